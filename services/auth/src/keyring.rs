//! The fleet's keyring: the keys that sign and verify its credentials.
//!
//! A credential is a JWT signed with HS256 under one key of the ring, named by its `kid`
//! header. Several keys verify at once, so a ring can be rotated without a flag day: add a key
//! (it signs from then on), hand out new credentials, then retire the old key — a credential it
//! signed is refused from that moment, by name ("signed by retired key k1"). A key's secret is
//! at least 32 random bytes; verification compares signatures in constant time (ring's HMAC).
//!
//! A node given no keys makes a ring on its first start, in a 0600 file in its data directory
//! ([`Keyring::load_or_create`]). A fleet shares one ring: every node reads the same file, or the
//! same keys from its config (their secrets as `${VAR}` references), since a node verifies what
//! its peers sign.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore as _;
use serde::{Deserialize, Serialize};

use crate::credential::{Claims, ISSUER, Principal};
use crate::role::Role;

/// The fewest bytes a key's secret may have.
pub const MIN_SECRET_BYTES: usize = 32;
/// How far a credential's expiry may be off the verifier's clock.
const LEEWAY_SECONDS: u64 = 5;

/// Why a keyring could not be used, or a credential was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    /// The credential is not a boxfleet credential at all.
    #[error("the credential is malformed: {0}")]
    Malformed(String),
    /// No key of this ring is the one that signed it.
    #[error("the credential was signed by key {0:?}, which this fleet's keyring does not hold")]
    UnknownKey(String),
    /// The key that signed it has been retired.
    #[error("the credential was signed by retired key {0:?}: ask for a new one")]
    RetiredKey(String),
    /// The signature does not match: forged, or altered.
    #[error("the credential's signature does not verify")]
    BadSignature,
    /// It has expired.
    #[error("the credential expired: ask for a new one")]
    Expired,
    /// A keyring file or key that cannot be used, and what to do.
    #[error("{0}")]
    Invalid(String),
}

/// One key.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    pub id: String,
    secret: Vec<u8>,
    /// a retired key verifies nothing (and signs nothing)
    pub retired: bool,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .field("secret", &"<hidden>")
            .field("retired", &self.retired)
            .finish()
    }
}

impl Key {
    /// A key from its id and its secret as base64 text.
    pub fn from_text(id: &str, secret: &str, retired: bool) -> Result<Key, KeyringError> {
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(KeyringError::Invalid(format!(
                "key id {id:?} is not a key id: use letters, digits, '-', '_' or '.'"
            )));
        }
        let secret = STANDARD.decode(secret.trim()).map_err(|_| {
            KeyringError::Invalid(format!(
                "key {id:?}: its secret is not base64; make one with `boxfleet keyring secret`"
            ))
        })?;
        if secret.len() < MIN_SECRET_BYTES {
            return Err(KeyringError::Invalid(format!(
                "key {id:?}: its secret is {} bytes, fewer than {MIN_SECRET_BYTES}; make one with `boxfleet keyring secret`",
                secret.len()
            )));
        }
        Ok(Key {
            id: id.to_owned(),
            secret,
            retired,
        })
    }

    /// A new key of fresh random bytes.
    pub fn generate(id: &str) -> Key {
        Key {
            id: id.to_owned(),
            secret: fresh_secret(),
            retired: false,
        }
    }

    /// The secret, as the keyring file and the per-run tokens need it.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }
}

/// A fresh secret: [`MIN_SECRET_BYTES`] random bytes.
fn fresh_secret() -> Vec<u8> {
    let mut secret = vec![0u8; MIN_SECRET_BYTES];
    rand::rng().fill_bytes(&mut secret);
    secret
}

/// A fresh secret as base64 text, for a key given in a config's `${VAR}`.
pub fn fresh_secret_text() -> String {
    STANDARD.encode(fresh_secret())
}

/// The keyring file (JSON).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyringFile {
    /// the key new credentials are signed with
    signing: String,
    keys: Vec<KeyEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    id: String,
    /// base64
    secret: String,
    created_at: DateTime<Utc>,
    #[serde(default)]
    retired: bool,
}

/// The keys a fleet signs and verifies its credentials with.
#[derive(Debug, Clone)]
pub struct Keyring {
    keys: Vec<Key>,
    /// when each key was made (kept in the file)
    created: Vec<DateTime<Utc>>,
    signing: String,
}

impl Keyring {
    /// A ring of `keys`, signing with `signing` (default: the first key not retired).
    pub fn new(keys: Vec<Key>, signing: Option<&str>) -> Result<Keyring, KeyringError> {
        let signing = match signing {
            Some(id) => id.to_owned(),
            None => keys
                .iter()
                .find(|key| !key.retired)
                .map(|key| key.id.clone())
                .ok_or_else(|| {
                    KeyringError::Invalid(
                        "the keyring holds no key that is not retired: add one".into(),
                    )
                })?,
        };
        match keys.iter().find(|key| key.id == signing) {
            None => {
                return Err(KeyringError::Invalid(format!(
                    "the signing key {signing:?} is not in the keyring"
                )));
            }
            Some(key) if key.retired => {
                return Err(KeyringError::Invalid(format!(
                    "the signing key {signing:?} is retired: sign with another"
                )));
            }
            Some(_) => {}
        }
        for (i, key) in keys.iter().enumerate() {
            if keys[..i].iter().any(|other| other.id == key.id) {
                return Err(KeyringError::Invalid(format!(
                    "key id {:?} is in the keyring twice",
                    key.id
                )));
            }
        }
        let now = Utc::now();
        Ok(Keyring {
            created: vec![now; keys.len()],
            keys,
            signing,
        })
    }

    /// A new ring of one fresh key.
    pub fn generate(now: DateTime<Utc>) -> Keyring {
        let id = new_key_id(now);
        Keyring {
            keys: vec![Key::generate(&id)],
            created: vec![now],
            signing: id,
        }
    }

    /// The keys, signing key first.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.keys.iter()
    }

    /// The id of the key new credentials are signed with.
    pub fn signing_key(&self) -> &str {
        &self.signing
    }

    /// Reads a keyring file.
    pub fn load(path: &Path) -> Result<Keyring, KeyringError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            KeyringError::Invalid(format!(
                "cannot read the keyring {}: {error}",
                path.display()
            ))
        })?;
        let file: KeyringFile = serde_json::from_str(&text).map_err(|error| {
            KeyringError::Invalid(format!(
                "the keyring {} is not one: {error}",
                path.display()
            ))
        })?;
        let mut keys = Vec::new();
        let mut created = Vec::new();
        for entry in file.keys {
            keys.push(Key::from_text(&entry.id, &entry.secret, entry.retired)?);
            created.push(entry.created_at);
        }
        let mut ring = Keyring::new(keys, Some(&file.signing))?;
        ring.created = created;
        Ok(ring)
    }

    /// Writes the ring to `path`, readable by its owner only; an existing file is replaced
    /// whole (written beside it, then renamed over it).
    pub fn save(&self, path: &Path) -> Result<(), KeyringError> {
        let file = KeyringFile {
            signing: self.signing.clone(),
            keys: self
                .keys
                .iter()
                .zip(&self.created)
                .map(|(key, created_at)| KeyEntry {
                    id: key.id.clone(),
                    secret: STANDARD.encode(&key.secret),
                    created_at: *created_at,
                    retired: key.retired,
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default();
        write_private(path, text.as_bytes())
    }

    /// The ring in `path`, or a new one written there when there is none. `true` when made.
    /// Two nodes starting on one file at once agree: the new file is linked into place only
    /// if nothing is there yet, and the one that lost reads the winner's.
    pub fn load_or_create(path: &Path) -> Result<(Keyring, bool), KeyringError> {
        if path.exists() {
            return Ok((Keyring::load(path)?, false));
        }
        let ring = Keyring::generate(Utc::now());
        let staged = path.with_extension(format!("new-{}", std::process::id()));
        ring.save(&staged)?;
        let linked = std::fs::hard_link(&staged, path);
        let _ = std::fs::remove_file(&staged);
        match linked {
            Ok(()) => Ok((ring, true)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                Ok((Keyring::load(path)?, false))
            }
            Err(error) => Err(KeyringError::Invalid(format!(
                "cannot write the keyring {}: {error}",
                path.display()
            ))),
        }
    }

    /// Adds a fresh key that signs from now on; the others keep verifying. Returns its id.
    pub fn rotate(&mut self, now: DateTime<Utc>) -> String {
        let mut id = new_key_id(now);
        while self.keys.iter().any(|key| key.id == id) {
            id = new_key_id(now);
        }
        self.keys.insert(0, Key::generate(&id));
        self.created.insert(0, now);
        self.signing = id.clone();
        id
    }

    /// Retires key `id`: what it signed is refused from now on. The signing key cannot be
    /// retired (rotate first).
    pub fn retire(&mut self, id: &str) -> Result<(), KeyringError> {
        if id == self.signing {
            return Err(KeyringError::Invalid(format!(
                "key {id:?} signs new credentials: rotate first (`boxfleet keyring rotate`), then retire it"
            )));
        }
        let key = self
            .keys
            .iter_mut()
            .find(|key| key.id == id)
            .ok_or_else(|| KeyringError::Invalid(format!("no key {id:?} in the keyring")))?;
        key.retired = true;
        Ok(())
    }

    /// A credential for `subject` as `role`, for `seats` (empty: every seat), valid `ttl` from
    /// `now`.
    pub fn issue(
        &self,
        subject: &str,
        role: Role,
        seats: &[String],
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> String {
        let claims = Claims {
            sub: subject.to_owned(),
            role,
            seats: seats.to_vec(),
            iat: now.timestamp(),
            exp: now.timestamp() + ttl.as_secs() as i64,
            iss: ISSUER.to_owned(),
        };
        self.sign(&claims)
    }

    /// Signs `claims` with the signing key (as given: a test makes expired ones this way).
    pub fn sign(&self, claims: &Claims) -> String {
        let key = self.key(&self.signing).unwrap_or(&self.keys[0]);
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(key.id.clone());
        // HS256 over serializable claims cannot fail
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(&key.secret))
            .unwrap_or_default()
    }

    /// Verifies a credential: a key of this ring, not retired, signed it; it has not expired;
    /// its claims are boxfleet's.
    pub fn verify(&self, token: &str) -> Result<Principal, KeyringError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| KeyringError::Malformed(e.to_string()))?;
        if header.alg != Algorithm::HS256 {
            return Err(KeyringError::Malformed(format!(
                "it is signed with {:?}, not HS256",
                header.alg
            )));
        }
        let kid = header
            .kid
            .ok_or_else(|| KeyringError::Malformed("it names no key (kid)".into()))?;
        let key = self
            .key(&kid)
            .ok_or_else(|| KeyringError::UnknownKey(kid.clone()))?;
        if key.retired {
            return Err(KeyringError::RetiredKey(kid));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = LEEWAY_SECONDS;
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(
            token,
            &DecodingKey::from_secret(&key.secret),
            &validation,
        )
        .map_err(|error| match error.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => KeyringError::BadSignature,
            jsonwebtoken::errors::ErrorKind::ExpiredSignature => KeyringError::Expired,
            _ => KeyringError::Malformed(error.to_string()),
        })?;
        let claims = data.claims;
        Ok(Principal {
            subject: claims.sub,
            role: claims.role,
            seats: claims.seats,
            key_id: kid,
        })
    }

    /// The key `id`.
    pub(crate) fn key(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|key| key.id == id)
    }
}

/// A key id naming the day it was made and four random hex digits.
fn new_key_id(now: DateTime<Utc>) -> String {
    format!(
        "k{}-{:04x}",
        now.format("%Y%m%d"),
        rand::rng().next_u32() & 0xffff
    )
}

/// Writes `bytes` to `path` with mode 0600, through a temporary file renamed over it.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), KeyringError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let fail = |doing: &str, error: std::io::Error| {
        KeyringError::Invalid(format!("cannot {doing} {}: {error}", path.display()))
    };
    // a name of this process's own: two nodes making one keyring file at once each stage
    // theirs (`load_or_create`), and a shared name would let one rename the other's
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| fail("write", e))?;
    file.write_all(bytes).map_err(|e| fail("write", e))?;
    file.sync_all().map_err(|e| fail("write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| fail("write", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_credential_verifies_to_its_subject_role_and_seats() {
        let ring = Keyring::generate(Utc::now());
        let token = ring.issue("ada", Role::Operator, &["eng".into()], HOUR, Utc::now());
        let principal = ring.verify(&token).expect("verifies");
        assert_eq!(principal.subject, "ada");
        assert_eq!(principal.role, Role::Operator);
        assert!(principal.covers("eng") && !principal.covers("ops"));
        assert_eq!(principal.key_id, ring.signing_key());
    }

    #[test]
    fn an_expired_a_forged_and_a_foreign_credential_are_refused_by_name() {
        let ring = Keyring::generate(Utc::now());
        let old = Utc::now() - chrono::Duration::hours(2);
        let expired = ring.issue("ada", Role::Admin, &[], HOUR, old);
        assert_eq!(ring.verify(&expired), Err(KeyringError::Expired));
        let token = ring.issue("ada", Role::Viewer, &[], HOUR, Utc::now());
        // the role changed in the body, the signature kept: forged
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&parts[1])
            .expect("body");
        let forged = String::from_utf8(body)
            .expect("utf8")
            .replace("viewer", "admin");
        parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(forged);
        assert_eq!(
            ring.verify(&parts.join(".")),
            Err(KeyringError::BadSignature)
        );
        let other = Keyring::generate(Utc::now());
        let foreign = other.issue("ada", Role::Admin, &[], HOUR, Utc::now());
        assert!(matches!(
            ring.verify(&foreign),
            Err(KeyringError::UnknownKey(_))
        ));
        assert!(matches!(
            ring.verify("not-a-token"),
            Err(KeyringError::Malformed(_))
        ));
    }

    #[test]
    fn a_rotated_ring_verifies_both_keys_until_the_old_one_is_retired() {
        let mut ring = Keyring::generate(Utc::now());
        let first = ring.signing_key().to_owned();
        let before = ring.issue("ada", Role::Operator, &[], HOUR, Utc::now());
        let second = ring.rotate(Utc::now());
        assert_ne!(first, second);
        let after = ring.issue("ada", Role::Operator, &[], HOUR, Utc::now());
        assert!(ring.verify(&before).is_ok() && ring.verify(&after).is_ok());
        assert!(
            ring.retire(&second).is_err(),
            "the signing key is not retired"
        );
        ring.retire(&first).expect("retire");
        assert_eq!(ring.verify(&before), Err(KeyringError::RetiredKey(first)));
        assert!(ring.verify(&after).is_ok());
    }

    #[test]
    fn a_ring_made_on_first_start_is_private_and_read_back_whole() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("keyring.json");
        let (ring, made) = Keyring::load_or_create(&path).expect("made");
        assert!(made);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let token = ring.issue("ada", Role::Admin, &[], HOUR, Utc::now());
        let (again, made) = Keyring::load_or_create(&path).expect("read");
        assert!(!made);
        assert!(again.verify(&token).is_ok());
    }

    #[test]
    fn a_short_or_unreadable_secret_is_refused_with_its_remedy() {
        let short = Key::from_text("k1", &STANDARD.encode([1u8; 8]), false).expect_err("short");
        assert!(short.to_string().contains("fewer than 32"), "{short}");
        let text = Key::from_text("k1", "not base64!", false).expect_err("text");
        assert!(
            text.to_string().contains("boxfleet keyring secret"),
            "{text}"
        );
        assert!(Key::from_text("k/1", &fresh_secret_text(), false).is_err());
        let retired = Key::from_text("k1", &fresh_secret_text(), true).expect("key");
        assert!(
            Keyring::new(vec![retired], None).is_err(),
            "nothing to sign with"
        );
    }
}
