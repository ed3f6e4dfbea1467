//! Where a seat's calls go (DESIGN §8.4): the node holding the seat answers them. Any node
//! takes the call: it reads the seat's holder from the store and, when that is another node,
//! the caller forwards the call to that node's Fleet service, which answers it itself and
//! never forwards again — so a call crosses at most one hop and cannot loop. A seat nobody
//! holds goes to the node it is placed on (rendezvous hashing over the live nodes), which
//! acquires it. [`Peers`] keeps one channel per other node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxfleet_actors::lifecycle::Coordinator;
use boxfleet_cluster::seat;
use boxfleet_proto::v1 as pb;
use pb::fleet_client::FleetClient;
use tonic::Status as GrpcStatus;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::trust::{CALLER_HEADER, Trust};

/// How long an asker waits for a run's owner to answer a tail (DESIGN §15: fleet read 2 s).
pub const OWNER_TAIL_BUDGET: Duration = Duration::from_secs(2);
/// How long a connection to another node may take.
const CONNECT_BOUND: Duration = Duration::from_secs(2);

/// Where a seat's call is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Here,
    There { node: String, addr: String },
}

/// Which node answers calls about `seat`: its holder, else the node it is placed on.
pub async fn route(coordinator: &Coordinator, seat: &str) -> Result<Route, GrpcStatus> {
    if coordinator.holds(seat) {
        return Ok(Route::Here);
    }
    let store = coordinator.store.as_ref();
    let unavailable = |e: boxfleet_cluster::Error| {
        GrpcStatus::unavailable(format!(
            "the store could not say who holds seat {seat}: {e}"
        ))
    };
    let target = match seat::holder(store, &coordinator.keys, seat)
        .await
        .map_err(unavailable)?
    {
        Some((holder, _)) => holder.node,
        None => match coordinator.placed_on(seat).await {
            Ok(Some(node)) => node.node,
            Ok(None) => return Ok(Route::Here),
            Err(error) => return Err(GrpcStatus::unavailable(error.to_string())),
        },
    };
    if target == coordinator.node {
        return Ok(Route::Here);
    }
    let nodes = seat::nodes(store, &coordinator.keys)
        .await
        .map_err(unavailable)?;
    match nodes.into_iter().find(|n| n.node == target) {
        Some(node) => Ok(Route::There {
            node: node.node,
            addr: node.addr,
        }),
        None => Err(GrpcStatus::unavailable(format!(
            "seat {seat} is held by node {target}, which is not registered (its session just \
             ended); retry in a moment, once another node has taken the seat"
        ))),
    }
}

/// A call forwarded to `node` failed: say which node, keep the code.
pub fn forwarded(node: &str, error: GrpcStatus) -> GrpcStatus {
    GrpcStatus::new(
        error.code(),
        format!("forwarded to node {node}: {}", error.message()),
    )
}

/// What a call to another node carries: this node's own credential, and — for a call made for
/// a caller — the caller's credential beside it (the holder acts for the caller, not for this
/// node). An Ops call asked for a caller carries the caller's credential alone.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// the `authorization` credential
    credential: String,
    /// the caller's, carried in `x-boxfleet-caller`
    caller: Option<String>,
}

impl tonic::service::Interceptor for Outgoing {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, GrpcStatus> {
        let header = |token: &str| {
            format!("Bearer {token}")
                .parse::<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>()
                .map_err(|_| GrpcStatus::internal("a credential is not a header value"))
        };
        request
            .metadata_mut()
            .insert("authorization", header(&self.credential)?);
        if let Some(caller) = &self.caller {
            request
                .metadata_mut()
                .insert(CALLER_HEADER, header(caller)?);
        }
        Ok(request)
    }
}

/// A Fleet client that carries this node's credential.
pub type FleetPeer = FleetClient<InterceptedService<Channel, Outgoing>>;
/// An Ops client that carries a caller's credential.
pub type OpsPeer = pb::ops_client::OpsClient<InterceptedService<Channel, Outgoing>>;
/// A Runs client that carries a caller's credential.
pub type RunsPeer = pb::runs_client::RunsClient<InterceptedService<Channel, Outgoing>>;

/// Clients to the other nodes, one channel per address, over TLS when this node has it.
#[derive(Debug)]
pub struct Peers {
    trust: Arc<Trust>,
    channels: Mutex<HashMap<String, Channel>>,
}

impl Peers {
    pub fn new(trust: Arc<Trust>) -> Self {
        Peers {
            trust,
            channels: Mutex::new(HashMap::new()),
        }
    }

    /// The Fleet client of the node at `addr` (`host:port`), under this node's credential, for
    /// `caller` when the call is made for one.
    pub fn client(
        &self,
        node: &str,
        addr: &str,
        caller: Option<&str>,
    ) -> Result<FleetPeer, GrpcStatus> {
        let outgoing = Outgoing {
            credential: self.trust.node_credential(),
            caller: caller.map(str::to_owned),
        };
        self.channel(node, addr)
            .map(|channel| FleetClient::with_interceptor(channel, outgoing))
    }

    /// The Ops client of the node at `addr`, asked for `caller` (under its credential).
    pub fn ops(&self, node: &str, addr: &str, caller: &str) -> Result<OpsPeer, GrpcStatus> {
        let outgoing = Outgoing {
            credential: caller.to_owned(),
            caller: None,
        };
        self.channel(node, addr)
            .map(|channel| pb::ops_client::OpsClient::with_interceptor(channel, outgoing))
    }

    /// The Runs client of the node at `addr`, asked under `caller`'s own credential (the
    /// dashboard asks its own node's API as the viewer).
    pub fn runs(&self, node: &str, addr: &str, caller: &str) -> Result<RunsPeer, GrpcStatus> {
        let outgoing = Outgoing {
            credential: caller.to_owned(),
            caller: None,
        };
        self.channel(node, addr)
            .map(|channel| pb::runs_client::RunsClient::with_interceptor(channel, outgoing))
    }

    fn channel(&self, node: &str, addr: &str) -> Result<Channel, GrpcStatus> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(channel) = channels.get(addr) {
            return Ok(channel.clone());
        }
        let tls = self.trust.client_tls();
        let url = if addr.contains("://") {
            addr.to_owned()
        } else if tls.is_some() {
            format!("https://{addr}")
        } else {
            format!("http://{addr}")
        };
        let bad = |e: &dyn std::fmt::Display| {
            GrpcStatus::internal(format!(
                "node {node} registered a bad address {addr:?}: {e}"
            ))
        };
        let mut endpoint = Endpoint::from_shared(url).map_err(|e| bad(&e))?;
        if let Some(tls) = tls {
            // the peer's certificate must name the host it is dialled by
            let host = addr
                .rsplit_once(':')
                .map_or(addr, |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']');
            endpoint = endpoint
                .tls_config(tls.domain_name(host))
                .map_err(|e| bad(&e))?;
        }
        let channel = endpoint.connect_timeout(CONNECT_BOUND).connect_lazy();
        channels.insert(addr.to_owned(), channel.clone());
        Ok(channel)
    }
}
