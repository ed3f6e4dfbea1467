//! gRPC clients of a node under test, carrying its admin credential: every Runs, Engine and
//! Ops call needs one (DESIGN §13). A node the harness starts registers where its credential
//! is (`DATA_DIR/admin.token`, which the node writes on start); a client for its address reads
//! it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use boxfleet_proto::v1 as pb;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// Where each node's credential is, by the address its clients dial.
static CREDENTIALS: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);

/// A client channel whose every call carries a credential.
pub type Authed = InterceptedService<Channel, Bearer>;

/// Adds `authorization: Bearer …` to every call.
#[derive(Debug, Clone)]
pub struct Bearer(MetadataValue<Ascii>);

impl Bearer {
    pub fn new(token: &str) -> Bearer {
        Bearer(
            format!("Bearer {}", token.trim())
                .parse()
                .expect("a credential is a header value"),
        )
    }
}

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// The node at `addr` keeps its admin credential in `token_file`.
pub fn register(addr: &str, token_file: &Path) {
    CREDENTIALS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(addr.to_owned(), token_file.to_owned());
}

/// The admin credential of the node at `addr`.
pub fn credential(addr: &str) -> String {
    let path = CREDENTIALS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|known| known.get(addr).cloned())
        .unwrap_or_else(|| panic!("no node the harness started listens at {addr}"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()))
        .trim()
        .to_owned()
}

async fn channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(addr.to_owned())?.connect().await
}

/// The Runs client of the node at `addr`, as its admin.
pub async fn runs(
    addr: &str,
) -> Result<pb::runs_client::RunsClient<Authed>, tonic::transport::Error> {
    let bearer = Bearer::new(&credential(addr));
    Ok(pb::runs_client::RunsClient::with_interceptor(
        channel(addr).await?,
        bearer,
    ))
}

/// `Runs.Get` of `turn_id`, a turn the fleet knows nothing of (yet, or any more) read as an
/// empty reply (`NOT_FOUND`); any other failure panics, naming the turn.
pub async fn get_turn(
    runs: &mut pb::runs_client::RunsClient<Authed>,
    turn_id: &str,
) -> pb::GetReply {
    match runs
        .get(pb::GetRequest {
            turn_id: turn_id.to_owned(),
        })
        .await
    {
        Ok(reply) => reply.into_inner(),
        Err(status) if status.code() == tonic::Code::NotFound => pb::GetReply::default(),
        Err(status) => panic!("get {turn_id}: {status}"),
    }
}

/// The Engine client of the node at `addr`, as its admin.
pub async fn engine(
    addr: &str,
) -> Result<pb::engine_client::EngineClient<Authed>, tonic::transport::Error> {
    let bearer = Bearer::new(&credential(addr));
    Ok(pb::engine_client::EngineClient::with_interceptor(
        channel(addr).await?,
        bearer,
    ))
}

/// The Ops client of the node at `addr`, as its admin.
pub async fn ops(addr: &str) -> Result<pb::ops_client::OpsClient<Authed>, tonic::transport::Error> {
    let bearer = Bearer::new(&credential(addr));
    Ok(pb::ops_client::OpsClient::with_interceptor(
        channel(addr).await?,
        bearer,
    ))
}

/// A client of `addr` that carries `token` (or, with `None`, nothing).
pub async fn runs_as(
    addr: &str,
    token: Option<&str>,
) -> Result<pb::runs_client::RunsClient<Authed>, tonic::transport::Error> {
    let bearer = Bearer::new(token.unwrap_or("none"));
    Ok(pb::runs_client::RunsClient::with_interceptor(
        channel(addr).await?,
        bearer,
    ))
}
