//! Reaching a node: [`connect`] turns a command's [`Conn`] flags into a [`Node`] (a channel and
//! the bearer token every call carries), [`Node::call`] bounds each call in time, and
//! [`Failure`] is the one line a user reads when connecting or a call fails (exit 1).
//!
//! Layout: the pace every follower keeps; [`Node`] and its calls; the [`Auth`] interceptor;
//! [`Failure`]; [`connect`] and the two address and error helpers it uses.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use boxfleet_proto::v1::ops_client::OpsClient;
use boxfleet_proto::v1::runs_client::RunsClient;
use boxfleet_proto::v1::{Event, EventsRequest, GetReply, GetRequest};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::render::one_line;
use crate::cli::{Conn, DEFAULT_ADDR};

/// How long connecting to a node may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound on an ordinary call.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a follower asks again (tail) and re-checks a collected run.
pub(super) const POLL_EVERY: Duration = Duration::from_secs(1);
/// Consecutive failed attempts to (re)open the events stream before `--wait` gives up.
pub(super) const STREAM_RETRIES: u32 = 5;
/// The largest reply a client accepts: an event may be 8 MiB and `Get` carries several.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A connected node and the credentials every call carries.
#[derive(Debug, Clone)]
pub(super) struct Node {
    /// the address as the user gave it (for messages and the commands we print)
    pub(super) addr: String,
    channel: Channel,
    auth: Auth,
}

/// Adds `authorization: Bearer …` to every call when a token was given.
#[derive(Debug, Clone, Default)]
pub(super) struct Auth {
    bearer: Option<MetadataValue<Ascii>>,
}

impl Interceptor for Auth {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(bearer) = &self.bearer {
            request
                .metadata_mut()
                .insert("authorization", bearer.clone());
        }
        Ok(request)
    }
}

pub(super) type Authed = InterceptedService<Channel, Auth>;

/// Why a client command could not do what it was asked: printed as one line, exit 1.
#[derive(Debug)]
pub(super) enum Failure {
    /// nothing answered at the address
    Unreachable { addr: String, why: String },
    /// the token cannot travel as a header
    BadToken { why: String },
    /// the node answered the call with an error
    Rpc {
        addr: String,
        what: &'static str,
        status: Status,
    },
    /// the node did not answer the call in time
    TimedOut {
        addr: String,
        what: &'static str,
        after: Duration,
    },
    /// the node answered something this client cannot read
    Unexpected { what: &'static str, why: String },
}

impl std::error::Error for Failure {}

impl Failure {
    /// The exit code this failure ends the command with (`exit`).
    pub(super) fn exit_code(&self) -> i32 {
        match self {
            Failure::Unreachable { .. } | Failure::TimedOut { .. } => super::exit::UNAVAILABLE,
            Failure::BadToken { .. } => super::exit::DENIED,
            Failure::Rpc { status, .. } => super::exit::of_status(status.code()),
            Failure::Unexpected { .. } => super::exit::FAILED,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable { addr, why } => write!(
                f,
                "cannot reach a node at {addr}: {why}. Start one with 'boxfleet node' or pass --addr."
            ),
            Failure::BadToken { why } => write!(
                f,
                "the credential cannot be used ({why}); check --token, BOXFLEET_TOKEN, \
                 --token-file and --ca"
            ),
            Failure::Rpc { addr, what, status } => {
                let message = one_line(status.message());
                match status.code() {
                    Code::Unauthenticated => write!(
                        f,
                        "the node at {addr} refused {what}: {message}. Pass --token, \
                         BOXFLEET_TOKEN or --token-file (a node writes an admin credential to \
                         DATA_DIR/admin.token; `boxfleet token issue` mints one)."
                    ),
                    Code::PermissionDenied => {
                        write!(f, "{what} is not allowed: {message}")
                    }
                    Code::Unimplemented => write!(
                        f,
                        "the node at {addr} does not serve {what} ({message}); is it a boxfleet \
                         node of this version?"
                    ),
                    Code::Unavailable => write!(
                        f,
                        "{what} failed: the node at {addr} is unavailable: {message}"
                    ),
                    Code::NotFound | Code::InvalidArgument | Code::FailedPrecondition => {
                        write!(f, "{what}: {message}")
                    }
                    code => write!(f, "{what} failed: {message} ({code:?})"),
                }
            }
            Failure::TimedOut { addr, what, after } => write!(
                f,
                "{what} failed: the node at {addr} did not answer within {} s",
                after.as_secs()
            ),
            Failure::Unexpected { what, why } => write!(f, "{what}: {why}"),
        }
    }
}

/// The credential file a node started in this directory with its default data dir writes.
const DEFAULT_TOKEN_FILE: &str = ".boxfleet/admin.token";

/// The credential a command carries: `--token` (or `BOXFLEET_TOKEN`), else the file
/// `--token-file` (or `BOXFLEET_TOKEN_FILE`) names, else the default data dir's admin
/// credential when there is one.
fn credential(conn: &Conn) -> Result<Option<String>, Failure> {
    if let Some(token) = conn.token.as_ref().filter(|t| !t.trim().is_empty()) {
        return Ok(Some(token.trim().to_owned()));
    }
    let (path, named) = match &conn.token_file {
        Some(path) => (path.clone(), true),
        None => (std::path::PathBuf::from(DEFAULT_TOKEN_FILE), false),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Ok(_) if named => Err(Failure::BadToken {
            why: format!("{} is empty", path.display()),
        }),
        Err(error) if named => Err(Failure::BadToken {
            why: format!("cannot read {}: {error}", path.display()),
        }),
        _ => Ok(None),
    }
}

/// The TLS a command dials an `https://` node with.
fn tls(conn: &Conn) -> Result<Option<tonic::transport::ClientTlsConfig>, Failure> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|error| Failure::BadToken {
            why: format!("cannot read {}: {error}", path.display()),
        })
    };
    let Some(ca) = &conn.ca else {
        return Ok(None);
    };
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
    if let (Some(cert), Some(key)) = (&conn.cert, &conn.key) {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(Some(tls))
}

/// Connects to the node `conn` names, within [`CONNECT_TIMEOUT`].
pub(super) async fn connect(conn: &Conn) -> Result<Node, Failure> {
    let auth = match credential(conn)? {
        Some(token) => {
            let bearer = format!("Bearer {token}")
                .parse::<MetadataValue<Ascii>>()
                .map_err(|error| Failure::BadToken {
                    why: error.to_string(),
                })?;
            Auth {
                bearer: Some(bearer),
            }
        }
        _ => Auth::default(),
    };
    // an empty BOXFLEET_ADDR reaches clap as a value; it means "not set"
    let addr = match conn.addr.trim() {
        "" => DEFAULT_ADDR,
        addr => addr,
    };
    let unreachable = |why: String| Failure::Unreachable {
        addr: addr.to_owned(),
        why,
    };
    let tls = tls(conn)?;
    let url = with_scheme(addr, tls.is_some());
    let mut endpoint = Endpoint::from_shared(url.clone())
        .map_err(|error| unreachable(format!("not an address ({})", error_chain(&error))))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    match tls {
        Some(tls) => {
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|error| unreachable(format!("TLS: {}", error_chain(&error))))?;
        }
        None if url.starts_with("https://") => {
            return Err(unreachable(
                "an https:// node's certificate is checked against a CA: pass --ca FILE (or BOXFLEET_CA)".into(),
            ));
        }
        None => {}
    }
    let channel = match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
        Err(_) => {
            return Err(unreachable(format!(
                "no answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(error)) => return Err(unreachable(error_chain(&error))),
        Ok(Ok(channel)) => channel,
    };
    Ok(Node {
        addr: addr.to_owned(),
        channel,
        auth,
    })
}

impl Node {
    pub(super) fn runs(&self) -> RunsClient<Authed> {
        RunsClient::with_interceptor(self.channel.clone(), self.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub(super) fn ops(&self) -> OpsClient<Authed> {
        OpsClient::with_interceptor(self.channel.clone(), self.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Awaits one call within `limit`, turning its failure into the line a user reads.
    pub(super) async fn call<T>(
        &self,
        what: &'static str,
        limit: Duration,
        call: impl Future<Output = Result<tonic::Response<T>, Status>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(limit, call).await {
            Err(_) => Err(Failure::TimedOut {
                addr: self.addr.clone(),
                what,
                after: limit,
            }),
            Ok(Err(status)) => Err(self.failed(what, status)),
            Ok(Ok(response)) => Ok(response.into_inner()),
        }
    }

    /// The failure of `what` that the node answered with `status` (a call, or a stream that
    /// broke off).
    pub(super) fn failed(&self, what: &'static str, status: Status) -> Failure {
        Failure::Rpc {
            addr: self.addr.clone(),
            what,
            status,
        }
    }

    /// A run's record, phase records and events (`Runs.Get`).
    pub(super) async fn get(&self, turn: &str) -> Result<GetReply, Failure> {
        let request = GetRequest {
            turn_id: turn.to_owned(),
        };
        self.call("show", CALL_TIMEOUT, self.runs().get(request))
            .await
    }

    /// `get`, with a turn the node knows nothing of read as an empty reply (`found: false`):
    /// for a wait whose run may have settled and left no record behind.
    pub(super) async fn get_or_none(&self, turn: &str) -> Result<GetReply, Failure> {
        match self.get(turn).await {
            Err(Failure::Rpc { status, .. }) if status.code() == Code::NotFound => {
                Ok(GetReply::default())
            }
            other => other,
        }
    }

    /// The events outbox from `from_revision`, and with `follow` every event written after.
    pub(super) async fn open_events(
        &self,
        from_revision: i64,
        follow: bool,
    ) -> Result<tonic::Streaming<Event>, Failure> {
        let request = EventsRequest {
            from_revision,
            follow,
        };
        self.call("events", CALL_TIMEOUT, self.runs().events(request))
            .await
    }
}

/// An address with no scheme is taken as plain-text HTTP/2 (`127.0.0.1:7400`), or as TLS when
/// a CA was given.
fn with_scheme(addr: &str, tls: bool) -> String {
    if addr.contains("://") {
        addr.to_owned()
    } else if tls {
        format!("https://{addr}")
    } else {
        format!("http://{addr}")
    }
}

/// An error and its sources, each said once: `transport error: tcp connect error: refused`.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        if !text.is_empty() && !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        next = error.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_as_one_actionable_line() {
        let unreachable = Failure::Unreachable {
            addr: DEFAULT_ADDR.to_owned(),
            why: "connection refused".to_owned(),
        };
        assert_eq!(
            unreachable.to_string(),
            "cannot reach a node at http://127.0.0.1:7400: connection refused. Start one with \
             'boxfleet node' or pass --addr."
        );
        let denied = Failure::Rpc {
            addr: DEFAULT_ADDR.to_owned(),
            what: "answer",
            status: Status::unauthenticated("no token"),
        };
        assert!(
            denied
                .to_string()
                .contains("Pass --token, BOXFLEET_TOKEN or --token-file")
        );
    }

    #[test]
    fn small_helpers() {
        assert_eq!(
            with_scheme("127.0.0.1:7400", false),
            "http://127.0.0.1:7400"
        );
        assert_eq!(with_scheme("https://n:1", false), "https://n:1");
    }
}
