//! boxfleet's configuration: serde types for the node config file (DESIGN §12), validated
//! into types the rest of the workspace uses. Unknown fields are refused; every default is
//! documented beside its field.
//!
//! Layout: this file holds the node and store sections and the [`File`] that joins them;
//! then, each using only those listed before it: `expand` (one `${VAR}` value), `providers`
//! (the LLM entries, the sandbox catalogue and the roles as written), `company` (the org
//! chart, its audiences and the `${VAR}` expansion of the whole document), `plan` (the launch
//! decision that joins them, [`plan::SandboxPlan`]), `validate` (every problem of the company
//! document); `store`, the coordination store's section; and `paths`, the resolution of
//! relative paths.

pub mod auth;
pub mod budget;
pub mod catalogue;
pub mod company;
pub mod engine;
pub mod expand;
pub mod fake;
pub mod http;
pub mod live;
pub mod mcp;
pub mod paths;
pub mod plan;
pub mod providers;
pub mod runenv;
pub mod store;
mod validate;

use serde::Deserialize;

pub use store::{
    DEFAULT_ETCD_ENDPOINT, DEFAULT_PREFIX, StoreConfig, StoreKind, StoreSection, StoreTls,
    StoreUser,
};

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
    /// A field at a computed location (a list entry) holds a value it cannot hold.
    #[error("{field}: {problem}; {remedy}")]
    Located {
        field: String,
        problem: String,
        remedy: &'static str,
    },
    /// Several problems, each located.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many(Vec<Error>),
    /// The document does not parse.
    #[error("could not parse the config: {0}")]
    Parse(#[from] serde_yaml::Error),
}

/// The `node:` section as written in the file (DESIGN §12).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// the node's id; default: the host name
    pub id: Option<String>,
    /// the gRPC listener; default 127.0.0.1:7400
    pub listen: Option<String>,
    /// the embedded store and local boxes live here; default ./.boxfleet
    pub data_dir: Option<std::path::PathBuf>,
    /// the session lease's TTL; default 15
    pub lease_ttl_seconds: Option<u64>,
    /// the completion poll's interval; default 15
    pub poll_interval_seconds: Option<u64>,
    /// where `direct` boxes live; default `{data_dir}/boxes`. Nodes on one host that share
    /// it share their boxes: any of them can poll, read and collect a box another started
    pub boxes_dir: Option<std::path::PathBuf>,
    /// the host name runs' local boxes are recorded under; default the machine's host name
    pub host: Option<String>,
    /// the address other nodes reach this one at (`host:port`); default the listener's, or
    /// `{host}:{port}` when it listens on every interface
    pub advertise: Option<String>,
    /// the node's TLS; without it a node listens on loopback only (unless `insecure_listen`)
    pub tls: Option<auth::TlsSection>,
    /// listen beyond loopback without TLS, on purpose; default false
    pub insecure_listen: Option<bool>,
    /// the engine a seat whose seat and role name none is served by; default builtin
    pub default_engine: Option<engine::EngineChoice>,
    /// how long a stopping node waits for its seats' resumes in flight to settle (an engine's
    /// take and settle) before it lets them go; default 60
    pub settle_window_seconds: Option<u64>,
    /// the HTTP listener: the tool bridge, the OTLP receiver
    #[serde(default)]
    pub http: http::HttpSection,
}

/// A config file: `node:` and `store:` (the company section arrives with the fleet work).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    #[serde(default)]
    pub node: NodeSection,
    #[serde(default)]
    pub store: Option<StoreSection>,
    /// the org chart questions resolve against; absent: seats are implicit
    #[serde(default)]
    pub company: Option<company::Company>,
    /// the fleet's keyring; absent: `{data_dir}/keyring.json`, made on first start
    #[serde(default)]
    pub auth: Option<auth::AuthSection>,
}

/// A validated node configuration. Every path in it is absolute ([`paths`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    pub id: String,
    pub listen: std::net::SocketAddr,
    /// absolute
    pub data_dir: std::path::PathBuf,
    pub lease_ttl_seconds: u64,
    pub poll_interval_seconds: u64,
    /// absolute
    pub boxes_dir: std::path::PathBuf,
    pub host: String,
    /// `None`: the listener's address (or `{host}:{port}` on an unspecified IP)
    pub advertise: Option<String>,
    pub store: StoreConfig,
    pub company: company::Company,
    /// where the keyring comes from
    pub keys: auth::KeySource,
    /// the node's TLS, paths absolute
    pub tls: Option<auth::TlsSection>,
    /// listen beyond loopback without TLS, on purpose
    pub insecure_listen: bool,
    /// the engine a seat whose seat and role name none is served by
    pub default_engine: engine::EngineChoice,
    /// how long a stopping node waits for resumes in flight to settle
    pub settle_window_seconds: u64,
    /// the HTTP listener and what it serves a box
    pub http: http::HttpConfig,
}

/// How long a stopping node waits for resumes in flight when nothing is configured.
pub const DEFAULT_SETTLE_WINDOW_SECONDS: u64 = 60;

/// The listener when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7400";

/// The data dir when none is configured, under the node's working directory.
pub const DEFAULT_DATA_DIR: &str = ".boxfleet";

impl File {
    /// Reads a config file; a missing or malformed file is an error naming the path.
    pub fn load(path: &std::path::Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|error| Error::Invalid {
            field: "--config",
            problem: format!("cannot read {}: {error}", path.display()),
            remedy: "pass the path of a readable YAML file",
        })?;
        Self::parse(&text)
    }

    /// Reads a config document. A problem in one section does not hide another's: the first
    /// is said with its line, then every other section that does not read either.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let first = match serde_yaml::from_str::<File>(text) {
            Ok(file) => return Ok(file),
            Err(first) => first,
        };
        let said = first.to_string();
        let mut problems = vec![Error::Parse(first)];
        if let Ok(serde_yaml::Value::Mapping(sections)) =
            serde_yaml::from_str::<serde_yaml::Value>(text)
        {
            for (name, body) in sections {
                let name = name.as_str().unwrap_or_default().to_owned();
                let read = match name.as_str() {
                    "node" => serde_yaml::from_value::<NodeSection>(body).map(drop),
                    "store" => serde_yaml::from_value::<StoreSection>(body).map(drop),
                    "company" => serde_yaml::from_value::<company::Company>(body).map(drop),
                    "auth" => serde_yaml::from_value::<auth::AuthSection>(body).map(drop),
                    // the first problem names an unknown section already
                    _ => Ok(()),
                };
                if let Err(problem) = read {
                    let problem = problem.to_string();
                    if !said.contains(&problem) {
                        problems.push(Error::Located {
                            field: name,
                            problem,
                            remedy: "see DESIGN §12 for the section's fields",
                        });
                    }
                }
            }
        }
        if problems.len() == 1 {
            return Err(problems.remove(0));
        }
        Err(Error::Many(problems))
    }

    /// Checks the file and fills every default; relative paths are resolved against the
    /// process's working directory and `$HOME` ([`paths`]).
    pub fn validate(self) -> Result<NodeConfig, Error> {
        self.validate_in(&paths::Base::of_process())
    }

    /// [`File::validate`], resolving relative paths against `base`: every path in the
    /// [`NodeConfig`] is absolute.
    pub fn validate_in(self, base: &paths::Base) -> Result<NodeConfig, Error> {
        let File {
            node,
            store,
            company,
            auth,
        } = self;
        // no company document: the quickstart company (implicit seats, `direct` boxes)
        let mut company = company.unwrap_or_else(company::Company::quickstart);
        let mut problems = company.expand_env(&|name| std::env::var(name).ok());
        problems.extend(company.problems());
        problems.extend(paths::resolve_company_paths(&mut company, base));
        // every section's problems at once: each check below records its own and goes on
        let NodeSection {
            id,
            listen,
            data_dir,
            lease_ttl_seconds,
            poll_interval_seconds,
            boxes_dir,
            host,
            advertise,
            tls,
            insecure_listen,
            default_engine,
            settle_window_seconds,
            http,
        } = node;
        let id = kept(&mut problems, node_id(id.unwrap_or_else(default_node_id)));
        let listen = kept(&mut problems, listen_address(listen));
        let lease_ttl_seconds = kept(
            &mut problems,
            within(
                "node.lease_ttl_seconds",
                lease_ttl_seconds.unwrap_or(15),
                2..=3600,
                "use 2 to 3600 seconds (default 15)",
            ),
        );
        let poll_interval_seconds = kept(
            &mut problems,
            within(
                "node.poll_interval_seconds",
                poll_interval_seconds.unwrap_or(15),
                1..=3600,
                "use 1 to 3600 seconds (default 15)",
            ),
        );
        let settle_window_seconds = kept(
            &mut problems,
            within(
                "node.settle_window_seconds",
                settle_window_seconds.unwrap_or(DEFAULT_SETTLE_WINDOW_SECONDS),
                0..=3600,
                "use 0 to 3600 seconds (default 60)",
            ),
        );
        let store = kept(
            &mut problems,
            match store {
                Some(section) => section.validate_in(base, &|name| std::env::var(name).ok()),
                None => Ok(StoreConfig::default()),
            },
        );
        let data_dir = kept(
            &mut problems,
            base.absolute(
                "node.data_dir",
                &data_dir.unwrap_or_else(|| std::path::PathBuf::from(DEFAULT_DATA_DIR)),
            ),
        );
        let boxes_dir = match (boxes_dir, &data_dir) {
            (Some(dir), _) => kept(&mut problems, base.absolute("node.boxes_dir", &dir)),
            (None, Some(data_dir)) => Some(data_dir.join("boxes")),
            (None, None) => None,
        };
        let advertise = advertise.filter(|a| !a.is_empty());
        if let Some(addr) = &advertise {
            kept(&mut problems, advertised(addr));
        }
        let http = listen.and_then(|listen| {
            kept(
                &mut problems,
                http.validate(listen, &|name| std::env::var(name).ok()),
            )
        });
        let keys = data_dir.as_ref().and_then(|data_dir| {
            kept(
                &mut problems,
                auth::key_source(auth, data_dir, base, &|name| std::env::var(name).ok()),
            )
        });
        let tls = kept(&mut problems, auth::tls(tls, base));
        let (
            Some(id),
            Some(listen),
            Some(lease_ttl_seconds),
            Some(poll_interval_seconds),
            Some(settle_window_seconds),
            Some(store),
            Some(data_dir),
            Some(boxes_dir),
            Some(http),
            Some(keys),
            Some(tls),
        ) = (
            id,
            listen,
            lease_ttl_seconds,
            poll_interval_seconds,
            settle_window_seconds,
            store,
            data_dir,
            boxes_dir,
            http,
            keys,
            tls,
        )
        else {
            return Err(Error::Many(problems));
        };
        if !problems.is_empty() {
            return Err(Error::Many(problems));
        }
        Ok(NodeConfig {
            keys,
            tls,
            insecure_listen: insecure_listen.unwrap_or(false),
            default_engine: default_engine.unwrap_or_default(),
            settle_window_seconds,
            http,
            id,
            listen,
            boxes_dir,
            host: host
                .filter(|h| !h.is_empty())
                .unwrap_or_else(default_node_id),
            advertise,
            data_dir,
            lease_ttl_seconds,
            poll_interval_seconds,
            store,
            company,
        })
    }
}

/// `result`'s value; its problems (one, or many) go to `problems`.
fn kept<T>(problems: &mut Vec<Error>, result: Result<T, Error>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(Error::Many(many)) => {
            problems.extend(many);
            None
        }
        Err(error) => {
            problems.push(error);
            None
        }
    }
}

fn node_id(id: String) -> Result<String, Error> {
    if id.is_empty() || id.contains('/') || id.chars().any(char::is_whitespace) {
        return Err(Error::Invalid {
            field: "node.id",
            problem: format!("{id:?} cannot name a node"),
            remedy: "use letters, digits, '-' or '_'",
        });
    }
    Ok(id)
}

fn listen_address(listen: Option<String>) -> Result<std::net::SocketAddr, Error> {
    let text = listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    text.parse().map_err(|_| Error::Invalid {
        field: "node.listen",
        problem: format!("{text:?} is not an address"),
        remedy: "write it as HOST:PORT, e.g. 127.0.0.1:7400",
    })
}

fn within(
    field: &'static str,
    value: u64,
    range: std::ops::RangeInclusive<u64>,
    remedy: &'static str,
) -> Result<u64, Error> {
    if !range.contains(&value) {
        return Err(Error::Invalid {
            field,
            problem: format!("{value} is out of range"),
            remedy,
        });
    }
    Ok(value)
}

fn advertised(addr: &str) -> Result<(), Error> {
    let port = addr.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
    if !matches!(port, Some(Ok(_))) || addr.contains("://") {
        return Err(Error::Invalid {
            field: "node.advertise",
            problem: format!("{addr:?} is not HOST:PORT"),
            remedy: "write the address other nodes dial, e.g. n1.internal:7400",
        });
    }
    Ok(())
}

fn default_node_id() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "node".to_owned())
}

#[cfg(test)]
mod file_tests {
    use super::*;

    #[test]
    fn every_problem_of_the_file_is_said_at_once() {
        // one per section that does not read, the first with its line
        let unread = File::parse(
            "node:\n  bogus: 1\ncompany:\n  roles:\n    - {name: eng, nonsense: true}\n",
        )
        .expect_err("two sections that do not read");
        let said = unread.to_string();
        assert!(
            said.contains("node: unknown field `bogus`") && said.contains("line 2"),
            "{said}"
        );
        assert!(said.contains("company: unknown field `nonsense`"), "{said}");
        // every node and store problem, beside one another
        let file = File::parse(
            "node:\n  listen: nowhere\n  poll_interval_seconds: 0\nstore: {kind: etcd, endpoints: []}\n",
        )
        .expect("it reads");
        let Err(Error::Many(problems)) = file.validate_in(&started_in("/w")) else {
            panic!("three problems");
        };
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 3, "{said:#?}");
        assert!(said[0].starts_with("node.listen:"), "{said:#?}");
        assert!(
            said[1].starts_with("node.poll_interval_seconds:"),
            "{said:#?}"
        );
        assert!(said[2].starts_with("store.endpoints:"), "{said:#?}");
    }

    #[test]
    fn an_empty_file_is_a_working_single_node() {
        let config = File::default().validate().expect("defaults are valid");
        assert_eq!(config.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(config.store.kind, StoreKind::Embedded);
        assert_eq!(config.poll_interval_seconds, 15);
    }

    fn started_in(cwd: &str) -> paths::Base {
        paths::Base {
            cwd: Some(std::path::PathBuf::from(cwd)),
            home: Some(std::path::PathBuf::from("/home/ada")),
        }
    }

    #[test]
    fn with_no_paths_given_the_data_and_boxes_dirs_are_absolute_under_the_start_directory() {
        let config = File::default()
            .validate_in(&started_in("/work/my-project"))
            .expect("defaults are valid");
        assert_eq!(
            config.data_dir,
            std::path::PathBuf::from("/work/my-project/.boxfleet")
        );
        assert_eq!(
            config.boxes_dir,
            std::path::PathBuf::from("/work/my-project/.boxfleet/boxes")
        );
    }

    #[test]
    fn every_relative_path_in_the_file_is_resolved_once_against_the_start_directory() {
        let file: File = serde_yaml::from_str(
            "node:\n  data_dir: reldata\n  boxes_dir: ./shared/boxes\n\
             company:\n  providers:\n    llm:\n      default: { provider: claude-code, model: sonnet, login_dir: logins/claude }\n      \
             home: { provider: claude-code, model: sonnet, login_dir: ~/.claude }\n    \
             sandbox:\n      local: { state_dir: containers, image: busybox }\n      default_run_in: container\n",
        )
        .expect("parses");
        let config = file.validate_in(&started_in("/srv/bf")).expect("valid");
        assert_eq!(config.data_dir, std::path::PathBuf::from("/srv/bf/reldata"));
        assert_eq!(
            config.boxes_dir,
            std::path::PathBuf::from("/srv/bf/shared/boxes")
        );
        let llm = &config.company.providers.llm;
        assert_eq!(
            llm["default"].login_dir.as_deref(),
            Some("/srv/bf/logins/claude")
        );
        assert_eq!(llm["home"].login_dir.as_deref(), Some("/home/ada/.claude"));
        let local = config
            .company
            .providers
            .sandbox
            .local
            .as_ref()
            .expect("local");
        assert_eq!(local.state_dir.as_deref(), Some("/srv/bf/containers"));
    }

    #[test]
    fn an_absolute_path_is_kept_as_written() {
        let file: File =
            serde_yaml::from_str("node:\n  data_dir: /var/lib/boxfleet\n").expect("parses");
        let config = file.validate_in(&started_in("/elsewhere")).expect("valid");
        assert_eq!(
            config.data_dir,
            std::path::PathBuf::from("/var/lib/boxfleet")
        );
        assert_eq!(
            config.boxes_dir,
            std::path::PathBuf::from("/var/lib/boxfleet/boxes")
        );
    }

    #[test]
    fn a_bad_field_is_named_with_its_remedy() {
        let file: File = serde_yaml::from_str("node:\n  listen: nowhere\n").expect("parses");
        let error = file.validate().expect_err("bad listen refused");
        assert!(error.to_string().contains("node.listen"), "{error}");
        assert!(serde_yaml::from_str::<File>("node:\n  lissen: x\n").is_err());
    }
}
