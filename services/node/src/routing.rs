//! Where a seat's calls go (DESIGN §8.4): the node holding the seat answers them. Any node
//! takes the call: it reads the seat's holder from the store and, when that is another node,
//! the caller forwards the call to that node's Fleet service, which answers it itself and
//! never forwards again — so a call crosses at most one hop and cannot loop. A seat nobody
//! holds goes to the node it is placed on (rendezvous hashing over the live nodes), which
//! acquires it. [`Peers`] keeps one channel per other node.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use boxfleet_actors::lifecycle::Coordinator;
use boxfleet_cluster::seat;
use boxfleet_proto::v1 as pb;
use pb::fleet_client::FleetClient;
use tonic::Status as GrpcStatus;
use tonic::transport::{Channel, Endpoint};

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

/// Clients to the other nodes, one channel per address.
#[derive(Debug, Default)]
pub struct Peers {
    channels: Mutex<HashMap<String, Channel>>,
}

impl Peers {
    /// The Fleet client of the node at `addr` (`host:port`).
    pub fn client(&self, node: &str, addr: &str) -> Result<FleetClient<Channel>, GrpcStatus> {
        self.channel(node, addr).map(FleetClient::new)
    }

    /// The Ops client of the node at `addr`.
    pub fn ops(
        &self,
        node: &str,
        addr: &str,
    ) -> Result<pb::ops_client::OpsClient<Channel>, GrpcStatus> {
        self.channel(node, addr).map(pb::ops_client::OpsClient::new)
    }

    fn channel(&self, node: &str, addr: &str) -> Result<Channel, GrpcStatus> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(channel) = channels.get(addr) {
            return Ok(channel.clone());
        }
        let url = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("http://{addr}")
        };
        let endpoint = Endpoint::from_shared(url).map_err(|e| {
            GrpcStatus::internal(format!(
                "node {node} registered a bad address {addr:?}: {e}"
            ))
        })?;
        let channel = endpoint.connect_timeout(CONNECT_BOUND).connect_lazy();
        channels.insert(addr.to_owned(), channel.clone());
        Ok(channel)
    }
}
