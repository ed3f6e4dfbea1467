//! The `store:` section: which coordination store a node uses, and for etcd how to reach it
//! (its members, TLS and client certificate, etcd's user auth, the bound on a call).
//!
//! ```yaml
//! store:
//!   kind: etcd
//!   endpoints: [https://etcd-1:2379, https://etcd-2:2379, https://etcd-3:2379]
//!   tls: { ca: etcd-ca.pem, cert: boxfleet-client.pem, key: boxfleet-client.key }
//!   username: boxfleet
//!   password: ${BOXFLEET_ETCD_PASSWORD}
//!   call_timeout_seconds: 10
//!   events_keep_seconds: 604800   # how long the events outbox keeps an event (7 days)
//! ```
//!
//! The embedded store keeps its watch history for `history_seconds` (default 1 hour, as the
//! README advises etcd's `--auto-compaction-retention=1h`); an etcd cluster's is etcd's own.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::Error;
use crate::paths::Base;

/// Which coordination store a node uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// The single-node store, durable in the node's data directory. The default.
    #[default]
    Embedded,
    /// A fleet's etcd cluster.
    Etcd,
}

/// The `store:` section as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// embedded | etcd; default embedded
    #[serde(default)]
    pub kind: StoreKind,
    /// etcd client URLs, every member's; default (absent) `[http://127.0.0.1:2379]`; an empty
    /// list is refused
    #[serde(default)]
    pub endpoints: Option<Vec<String>>,
    /// every key lives under this prefix; default `/boxfleet/v1`
    #[serde(default)]
    pub prefix: Option<String>,
    /// TLS to etcd, for `https://` endpoints
    #[serde(default)]
    pub tls: Option<StoreTlsSection>,
    /// etcd's user auth: the user boxfleet logs in as
    #[serde(default)]
    pub username: Option<String>,
    /// its password, as `${VAR}`
    #[serde(default)]
    pub password: Option<String>,
    /// the bound on one store call, every member tried included; default 10
    #[serde(default)]
    pub call_timeout_seconds: Option<u64>,
    /// How long the events outbox keeps an announced event (default 7 days): a subscriber
    /// that was away longer resumes from what is left.
    #[serde(default)]
    pub events_keep_seconds: Option<u64>,
    /// How long the embedded store keeps its watch history (default 1 hour).
    #[serde(default)]
    pub history_seconds: Option<u64>,
}

/// `store.tls` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreTlsSection {
    /// the CA that signed etcd's server certificates
    pub ca: PathBuf,
    /// the client certificate, for an etcd started with `--client-cert-auth`
    #[serde(default)]
    pub cert: Option<PathBuf>,
    #[serde(default)]
    pub key: Option<PathBuf>,
}

/// TLS to etcd, validated: paths absolute, a certificate always with its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreTls {
    pub ca: PathBuf,
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// etcd's user auth, validated. Its Debug form hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUser {
    pub name: String,
    pub password: String,
}

impl std::fmt::Debug for StoreUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreUser")
            .field("name", &self.name)
            .field("password", &"<hidden>")
            .finish()
    }
}

/// A validated store configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    pub kind: StoreKind,
    pub endpoints: Vec<String>,
    pub prefix: String,
    pub tls: Option<StoreTls>,
    pub user: Option<StoreUser>,
    pub call_timeout: Duration,
    /// how long an announced event is kept in the outbox
    pub events_keep: Duration,
    /// how long the embedded store keeps its watch history
    pub history: Duration,
}

/// The key prefix when none is configured.
pub const DEFAULT_PREFIX: &str = "/boxfleet/v1";
/// The etcd endpoint when none is configured.
pub const DEFAULT_ETCD_ENDPOINT: &str = "http://127.0.0.1:2379";
/// The bound on one store call when none is configured.
pub const DEFAULT_CALL_TIMEOUT_SECONDS: u64 = 10;
/// How long the events outbox keeps an event unless told (DESIGN §5: bounded retention).
pub const DEFAULT_EVENTS_KEEP_SECONDS: u64 = 7 * 24 * 3600;
/// How long the embedded store keeps its watch history unless told.
pub const DEFAULT_HISTORY_SECONDS: u64 = 3600;
/// The embedded history's shortest and longest span.
const HISTORY_RANGE: std::ops::RangeInclusive<u64> = 60..=30 * 24 * 3600;
/// The outbox's shortest and longest retention.
const EVENTS_KEEP_RANGE: std::ops::RangeInclusive<u64> = 60..=90 * 24 * 3600;

impl StoreSection {
    /// Checks the section and fills its defaults, relative paths resolved against the
    /// process's working directory and `${VAR}`s from its environment.
    pub fn validate(self) -> Result<StoreConfig, Error> {
        self.validate_in(&Base::of_process(), &|name| std::env::var(name).ok())
    }

    /// [`StoreSection::validate`] with paths resolved against `base` and `${VAR}`s looked
    /// up in `lookup`.
    pub fn validate_in(
        self,
        base: &Base,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<StoreConfig, Error> {
        let Self {
            kind,
            endpoints,
            prefix,
            tls,
            username,
            password,
            call_timeout_seconds,
            events_keep_seconds,
            history_seconds,
        } = self;
        let prefix = prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
        if !prefix.starts_with('/') || prefix.ends_with('/') || prefix.len() < 2 {
            return Err(Error::Invalid {
                field: "store.prefix",
                problem: format!("{prefix:?} is not an absolute key prefix"),
                remedy: "write it like /boxfleet/v1: a leading slash and no trailing one",
            });
        }
        if kind == StoreKind::Embedded
            && (tls.is_some() || username.is_some() || password.is_some())
        {
            return Err(Error::Invalid {
                field: "store.kind",
                problem: "is embedded, but tls, username or password are given for etcd".into(),
                remedy: "write kind: etcd with the endpoints, or drop the etcd settings",
            });
        }
        let endpoints = match endpoints {
            None => vec![DEFAULT_ETCD_ENDPOINT.to_owned()],
            Some(endpoints) if endpoints.is_empty() && kind == StoreKind::Etcd => {
                return Err(Error::Invalid {
                    field: "store.endpoints",
                    problem: "is empty: an etcd store needs at least one member's client URL"
                        .into(),
                    remedy: "list every member, e.g. endpoints: [http://etcd-1:2379], or drop \
                             the key for http://127.0.0.1:2379",
                });
            }
            Some(endpoints) if endpoints.is_empty() => vec![DEFAULT_ETCD_ENDPOINT.to_owned()],
            Some(endpoints) => endpoints,
        };
        let secure = check_endpoints(&endpoints)?;
        let tls = store_tls(tls, secure, base)?;
        let user = store_user(username, password, lookup)?;
        let call_timeout_seconds = seconds_within(
            "store.call_timeout_seconds",
            call_timeout_seconds.unwrap_or(DEFAULT_CALL_TIMEOUT_SECONDS),
            1..=300,
            "use 1 to 300 seconds (default 10)",
        )?;
        let events_keep_seconds = seconds_within(
            "store.events_keep_seconds",
            events_keep_seconds.unwrap_or(DEFAULT_EVENTS_KEEP_SECONDS),
            EVENTS_KEEP_RANGE,
            "use 60 seconds to 90 days (7776000); the default is 7 days (604800)",
        )?;
        if kind == StoreKind::Etcd && history_seconds.is_some() {
            return Err(Error::Invalid {
                field: "store.history_seconds",
                problem: "is the embedded store's; an etcd cluster keeps the history etcd keeps"
                    .into(),
                remedy: "drop it, and run etcd with --auto-compaction-mode=periodic --auto-compaction-retention=1h",
            });
        }
        let history_seconds = seconds_within(
            "store.history_seconds",
            history_seconds.unwrap_or(DEFAULT_HISTORY_SECONDS),
            HISTORY_RANGE,
            "use 60 seconds to 30 days (2592000); the default is 1 hour (3600)",
        )?;
        Ok(StoreConfig {
            kind,
            endpoints,
            prefix,
            tls,
            user,
            call_timeout: Duration::from_secs(call_timeout_seconds),
            events_keep: Duration::from_secs(events_keep_seconds),
            history: Duration::from_secs(history_seconds),
        })
    }
}

/// Every endpoint an http(s) URL, all of one scheme; `true` for https.
fn check_endpoints(endpoints: &[String]) -> Result<bool, Error> {
    for endpoint in endpoints {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(Error::Invalid {
                field: "store.endpoints",
                problem: format!("{endpoint:?} is not an http(s) URL"),
                remedy: "write each endpoint as http://HOST:PORT (or https:// with store.tls)",
            });
        }
    }
    let secure = endpoints
        .iter()
        .filter(|e| e.starts_with("https://"))
        .count();
    if secure != 0 && secure != endpoints.len() {
        return Err(Error::Invalid {
            field: "store.endpoints",
            problem: "mixes http:// and https:// members".into(),
            remedy: "every member of one etcd cluster is reached the same way: use one scheme",
        });
    }
    Ok(secure != 0)
}

fn store_tls(
    tls: Option<StoreTlsSection>,
    secure: bool,
    base: &Base,
) -> Result<Option<StoreTls>, Error> {
    match (tls, secure) {
        (None, false) => Ok(None),
        (None, true) => Err(Error::Invalid {
            field: "store.tls",
            problem: "is missing, but the endpoints are https://".into(),
            remedy: "name the CA that signed etcd's certificates as store.tls.ca",
        }),
        (Some(_), false) => Err(Error::Invalid {
            field: "store.tls",
            problem: "is given, but the endpoints are http://".into(),
            remedy: "write the endpoints as https://HOST:PORT, or drop store.tls",
        }),
        (Some(StoreTlsSection { ca, cert, key }), true) => {
            let identity = match (cert, key) {
                (None, None) => None,
                (Some(cert), Some(key)) => Some((
                    base.absolute("store.tls.cert", &cert)?,
                    base.absolute("store.tls.key", &key)?,
                )),
                _ => {
                    return Err(Error::Invalid {
                        field: "store.tls",
                        problem: "names a client certificate without its key, or a key without \
                                  its certificate"
                            .into(),
                        remedy: "give both store.tls.cert and store.tls.key, or neither",
                    });
                }
            };
            Ok(Some(StoreTls {
                ca: base.absolute("store.tls.ca", &ca)?,
                identity,
            }))
        }
    }
}

fn store_user(
    username: Option<String>,
    password: Option<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<StoreUser>, Error> {
    match (username, password) {
        (None, None) => Ok(None),
        (Some(name), Some(password)) => {
            let password =
                crate::expand::expand(&password, lookup).map_err(|problem| Error::Located {
                    field: "store.password".into(),
                    problem,
                    remedy: "export the variable in the node's environment",
                })?;
            if name.trim().is_empty() || password.is_empty() {
                return Err(Error::Invalid {
                    field: "store.username",
                    problem: "the user or its password is empty".into(),
                    remedy: "name etcd's user and give its password as ${VAR}",
                });
            }
            Ok(Some(StoreUser { name, password }))
        }
        _ => Err(Error::Invalid {
            field: "store.username",
            problem: "is given without store.password, or the password without the user".into(),
            remedy: "give both (the password as ${VAR}), or neither",
        }),
    }
}

/// `value` of `field` when it is within `range`, else the refusal naming both.
fn seconds_within(
    field: &'static str,
    value: u64,
    range: std::ops::RangeInclusive<u64>,
    remedy: &'static str,
) -> Result<u64, Error> {
    if range.contains(&value) {
        return Ok(value);
    }
    Err(Error::Invalid {
        field,
        problem: format!("{value} is out of range"),
        remedy,
    })
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreSection::default()
            .validate_in(&Base::default(), &|_| None)
            .unwrap_or_else(|error| panic!("the built-in store defaults are valid: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validated(yaml: &str, env: &[(&str, &str)]) -> Result<StoreConfig, Error> {
        let section: StoreSection = serde_yaml::from_str(yaml).expect("parses");
        let base = Base {
            cwd: Some(PathBuf::from("/srv/bf")),
            home: Some(PathBuf::from("/home/ada")),
        };
        section.validate_in(&base, &|name| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn defaults_are_embedded_under_the_v1_prefix() {
        let config = StoreConfig::default();
        assert_eq!(config.kind, StoreKind::Embedded);
        assert_eq!(config.prefix, DEFAULT_PREFIX);
        assert_eq!(config.call_timeout, Duration::from_secs(10));
    }

    #[test]
    fn unknown_fields_and_bad_prefixes_are_refused_by_name() {
        let unknown = serde_yaml::from_str::<StoreSection>("kind: etcd\nendpoint: x\n");
        assert!(unknown.is_err());
        let error = validated("prefix: boxfleet/\n", &[]).expect_err("relative prefix refused");
        assert!(error.to_string().contains("store.prefix"), "{error}");
    }

    #[test]
    fn a_secured_etcd_takes_a_ca_a_client_certificate_and_a_password_from_the_environment() {
        let config = validated(
            "kind: etcd\nendpoints: [https://e1:2379, https://e2:2379]\n\
             tls: { ca: ca.pem, cert: client.pem, key: client.key }\n\
             username: boxfleet\npassword: ${ETCD_PW}\ncall_timeout_seconds: 4\n",
            &[("ETCD_PW", "hunter2")],
        )
        .expect("valid");
        let tls = config.tls.expect("tls");
        assert_eq!(tls.ca, PathBuf::from("/srv/bf/ca.pem"));
        assert_eq!(
            tls.identity,
            Some((
                PathBuf::from("/srv/bf/client.pem"),
                PathBuf::from("/srv/bf/client.key")
            ))
        );
        let user = config.user.expect("user");
        assert_eq!(
            (user.name.as_str(), user.password.as_str()),
            ("boxfleet", "hunter2")
        );
        assert!(!format!("{user:?}").contains("hunter2"), "Debug hides it");
        assert_eq!(config.call_timeout, Duration::from_secs(4));
        assert_eq!(config.events_keep, Duration::from_secs(7 * 24 * 3600));
        let short = validated("events_keep_seconds: 120\n", &[]).expect("in range");
        assert_eq!(short.events_keep, Duration::from_secs(120));
    }

    #[test]
    fn each_inconsistent_etcd_setting_is_refused_naming_its_field() {
        let cases = [
            ("kind: etcd\nendpoints: []\n", "store.endpoints"),
            ("kind: etcd\nendpoints: [https://e1:2379]\n", "store.tls"),
            (
                "kind: etcd\nendpoints: [http://e1:2379]\ntls: { ca: ca.pem }\n",
                "store.tls",
            ),
            (
                "kind: etcd\nendpoints: [http://e1:2379, https://e2:2379]\n",
                "store.endpoints",
            ),
            (
                "kind: etcd\nendpoints: [https://e1:2379]\ntls: { ca: ca.pem, cert: c.pem }\n",
                "store.tls",
            ),
            ("kind: etcd\nusername: boxfleet\n", "store.username"),
            (
                "kind: etcd\nusername: u\npassword: ${UNSET_PW}\n",
                "UNSET_PW",
            ),
            ("username: u\npassword: p\n", "store.kind"),
            (
                "kind: etcd\ncall_timeout_seconds: 0\n",
                "store.call_timeout_seconds",
            ),
            ("events_keep_seconds: 59\n", "store.events_keep_seconds"),
            (
                "events_keep_seconds: 7776001\n",
                "store.events_keep_seconds",
            ),
        ];
        for (yaml, named) in cases {
            let error = validated(yaml, &[]).expect_err(yaml);
            assert!(error.to_string().contains(named), "{yaml}: {error}");
        }
    }
}
