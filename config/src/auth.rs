//! The trust boundary's configuration (DESIGN §13): where the fleet's keyring comes from, and
//! the node's TLS.
//!
//! ```yaml
//! auth:
//!   keyring_file: /etc/boxfleet/keyring.json   # default {data_dir}/keyring.json, made when absent
//!   keys:                                      # or the keys themselves (then no file is read)
//!     - { id: k2, secret: "${BOXFLEET_KEY_K2}" }
//!     - { id: k1, secret: "${BOXFLEET_KEY_K1}", retired: true }
//!   signing_key: k2                            # default: the first key not retired
//! node:
//!   tls: { cert: node.pem, key: node.key, ca: fleet-ca.pem }
//!   insecure_listen: false
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::Error;
use crate::paths::Base;

/// `auth:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// the keyring file; default `{data_dir}/keyring.json`, made on first start when absent
    #[serde(default)]
    pub keyring_file: Option<PathBuf>,
    /// the keys themselves, secrets as `${VAR}` references; when given, no file is read
    #[serde(default)]
    pub keys: Vec<KeySection>,
    /// the key new credentials are signed with; default: the first key not retired
    #[serde(default)]
    pub signing_key: Option<String>,
}

/// One key as written. Its Debug form hides the secret.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySection {
    pub id: String,
    /// base64 of at least 32 random bytes (`boxfleet keyring secret` makes one)
    pub secret: String,
    /// a retired key verifies nothing
    #[serde(default)]
    pub retired: bool,
}

impl std::fmt::Debug for KeySection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySection")
            .field("id", &self.id)
            .field("secret", &"<hidden>")
            .field("retired", &self.retired)
            .finish()
    }
}

impl PartialEq for KeySection {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.secret == other.secret && self.retired == other.retired
    }
}

impl Eq for KeySection {}

/// `node.tls` as written: the node's certificate and key, and the CA that signs the fleet's
/// node certificates (its peers are verified against it, and present one of theirs to it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// with it, calls between nodes are mutual TLS
    #[serde(default)]
    pub ca: Option<PathBuf>,
}

/// Where the keyring comes from, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// a file (absolute), made on first start when absent
    File(PathBuf),
    /// the keys given in the config, secrets resolved
    Keys {
        keys: Vec<KeySection>,
        signing_key: Option<String>,
    },
}

/// Where the keyring comes from: the keys given (their `${VAR}` secrets resolved through
/// `lookup`), else the file (default `{data_dir}/keyring.json`).
pub(crate) fn key_source(
    section: Option<AuthSection>,
    data_dir: &Path,
    base: &Base,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<KeySource, Error> {
    let AuthSection {
        keyring_file,
        keys,
        signing_key,
    } = section.unwrap_or_default();
    if keys.is_empty() {
        if signing_key.is_some() {
            return Err(Error::Invalid {
                field: "auth.signing_key",
                problem: "names a key, but auth.keys gives none".into(),
                remedy: "give the keys under auth.keys, or drop signing_key (a keyring file names its own)",
            });
        }
        let file = match keyring_file {
            Some(file) => base.absolute("auth.keyring_file", &file)?,
            None => data_dir.join("keyring.json"),
        };
        return Ok(KeySource::File(file));
    }
    if keyring_file.is_some() {
        return Err(Error::Invalid {
            field: "auth.keyring_file",
            problem: "is given beside auth.keys".into(),
            remedy: "give one: the keys inline (secrets as ${VAR}) or the keyring file",
        });
    }
    let mut problems = Vec::new();
    let mut resolved = Vec::new();
    for (i, mut key) in keys.into_iter().enumerate() {
        match crate::expand::expand(&key.secret, lookup) {
            Ok(secret) if secret.trim().is_empty() => problems.push(Error::Located {
                field: format!("auth.keys[{i}].secret"),
                problem: format!("key {:?} has an empty secret", key.id),
                remedy: "export the variable it names, with `boxfleet keyring secret`'s output",
            }),
            Ok(secret) => {
                key.secret = secret;
                resolved.push(key);
            }
            Err(problem) => problems.push(Error::Located {
                field: format!("auth.keys[{i}].secret"),
                problem,
                remedy: "export the variable in the node's environment",
            }),
        }
    }
    if !problems.is_empty() {
        return Err(Error::Many(problems));
    }
    Ok(KeySource::Keys {
        keys: resolved,
        signing_key,
    })
}

/// The node's TLS with its paths made absolute.
pub(crate) fn tls(section: Option<TlsSection>, base: &Base) -> Result<Option<TlsSection>, Error> {
    let Some(TlsSection { cert, key, ca }) = section else {
        return Ok(None);
    };
    Ok(Some(TlsSection {
        cert: base.absolute("node.tls.cert", &cert)?,
        key: base.absolute("node.tls.key", &key)?,
        ca: ca.map(|ca| base.absolute("node.tls.ca", &ca)).transpose()?,
    }))
}
