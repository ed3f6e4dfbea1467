//! boxfleet's configuration: serde types for the node config file (DESIGN §12), validated
//! into types the rest of the workspace uses. Unknown fields are refused; every default is
//! documented beside its field.

use serde::Deserialize;

/// What is wrong with a configuration, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A field holds a value it cannot hold.
    #[error("{field}: {problem}; {remedy}")]
    Invalid {
        /// the dotted path of the field, e.g. `store.endpoints`
        field: &'static str,
        problem: String,
        remedy: &'static str,
    },
    /// The document does not parse.
    #[error("could not parse the config: {0}")]
    Parse(#[from] serde_yaml::Error),
}

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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// embedded | etcd; default embedded
    #[serde(default)]
    pub kind: StoreKind,
    /// etcd client URLs; default `[http://127.0.0.1:2379]`
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// every key lives under this prefix; default `/boxfleet/v1`
    #[serde(default)]
    pub prefix: Option<String>,
}

/// A validated store configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    pub kind: StoreKind,
    pub endpoints: Vec<String>,
    pub prefix: String,
}

/// The key prefix when none is configured.
pub const DEFAULT_PREFIX: &str = "/boxfleet/v1";
/// The etcd endpoint when none is configured.
pub const DEFAULT_ETCD_ENDPOINT: &str = "http://127.0.0.1:2379";

impl StoreSection {
    /// Checks the section and fills its defaults.
    pub fn validate(self) -> Result<StoreConfig, Error> {
        let Self {
            kind,
            endpoints,
            prefix,
        } = self;
        let prefix = prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
        if !prefix.starts_with('/') || prefix.ends_with('/') || prefix.len() < 2 {
            return Err(Error::Invalid {
                field: "store.prefix",
                problem: format!("{prefix:?} is not an absolute key prefix"),
                remedy: "write it like /boxfleet/v1: a leading slash and no trailing one",
            });
        }
        let endpoints = if endpoints.is_empty() {
            vec![DEFAULT_ETCD_ENDPOINT.to_owned()]
        } else {
            endpoints
        };
        for endpoint in &endpoints {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err(Error::Invalid {
                    field: "store.endpoints",
                    problem: format!("{endpoint:?} is not an http(s) URL"),
                    remedy: "write each endpoint as http://HOST:PORT",
                });
            }
        }
        Ok(StoreConfig {
            kind,
            endpoints,
            prefix,
        })
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreSection {
            kind: StoreKind::Embedded,
            endpoints: Vec::new(),
            prefix: None,
        }
        .validate()
        .unwrap_or_else(|error| panic!("the built-in store defaults are valid: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_embedded_under_the_v1_prefix() {
        let config = StoreConfig::default();
        assert_eq!(config.kind, StoreKind::Embedded);
        assert_eq!(config.prefix, DEFAULT_PREFIX);
    }

    #[test]
    fn unknown_fields_and_bad_prefixes_are_refused_by_name() {
        let unknown = serde_yaml::from_str::<StoreSection>("kind: etcd\nendpoint: x\n");
        assert!(unknown.is_err());
        let section: StoreSection = serde_yaml::from_str("prefix: boxfleet/\n").expect("parses");
        let error = section.validate().expect_err("relative prefix refused");
        assert!(error.to_string().contains("store.prefix"), "{error}");
    }
}
