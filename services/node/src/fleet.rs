//! Node to node (DESIGN §8.4): where a seat's calls go, the clients to the other nodes, and
//! the Fleet service that answers calls forwarded here.
//!
//! A Runs call about a seat (launch, deliver, answer, tail) is answered by the node holding
//! the seat. Any node takes the call: it reads the seat's holder from the store and, when
//! that is another node, forwards the call to that node's Fleet service, which answers it
//! itself and never forwards again — so a call crosses at most one hop and cannot loop. A
//! seat nobody holds goes to the node it is placed on (rendezvous hashing over the live
//! nodes), which acquires it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxfleet_actors::coordinator::Coordinator;
use boxfleet_cluster::seat;
use boxfleet_proto::v1 as pb;
use pb::fleet_client::FleetClient;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status as GrpcStatus};

use crate::grpc::RunsService;

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

/// Has this node's collectors collect a run whose job is done.
fn collect_here(coordinator: &Coordinator, turn_id: &str, launch_id: &str) -> Result<(), String> {
    use boxfleet_actors::workers::CollectMsg;
    let name = format!("{}/collectors", coordinator.node);
    let collectors = ractor::ActorRef::<CollectMsg>::where_is(name)
        .ok_or_else(|| format!("node {}'s collectors are not running", coordinator.node))?;
    collectors
        .cast(CollectMsg::Collect {
            turn_id: turn_id.to_owned(),
            launch_id: launch_id.to_owned(),
        })
        .map_err(|e| format!("node {}'s collectors refused: {e}", coordinator.node))
}

/// How a node's actors reach the rest of the fleet.
#[derive(Debug)]
pub struct Link {
    pub coordinator: std::sync::Weak<Coordinator>,
    pub peers: Arc<Peers>,
}

#[tonic::async_trait]
impl boxfleet_actors::ports::FleetLink for Link {
    async fn completed(&self, seat: &str, turn_id: &str, launch_id: &str) -> Result<(), String> {
        let coordinator = self
            .coordinator
            .upgrade()
            .ok_or_else(|| "the node is stopping".to_owned())?;
        match route(&coordinator, seat)
            .await
            .map_err(|e| e.message().to_owned())?
        {
            Route::Here => collect_here(&coordinator, turn_id, launch_id),
            Route::There { node, addr } => {
                let mut peer = self
                    .peers
                    .client(&node, &addr)
                    .map_err(|e| e.message().to_owned())?;
                peer.seat_complete(pb::CompleteRequest {
                    turn_id: turn_id.to_owned(),
                    launch_id: launch_id.to_owned(),
                })
                .await
                .map(drop)
                .map_err(|e| format!("node {node} was not told: {}", e.message()))
            }
        }
    }
}

/// The Fleet service: calls another node forwarded here, answered here.
#[derive(Debug)]
pub struct FleetService {
    pub runs: Arc<RunsService>,
    pub coordinator: Arc<Coordinator>,
}

#[tonic::async_trait]
impl pb::fleet_server::Fleet for FleetService {
    async fn ping(
        &self,
        _request: Request<pb::PingRequest>,
    ) -> Result<Response<pb::PingReply>, GrpcStatus> {
        Ok(Response::new(pb::PingReply {
            node: self.coordinator.node.clone(),
            incarnation: self.coordinator.incarnation.clone(),
            seats: self.coordinator.held_seats().len() as u32,
        }))
    }

    async fn seat_launch(
        &self,
        request: Request<pb::LaunchRequest>,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        self.runs.launch_here(request.into_inner()).await
    }

    async fn seat_deliver(
        &self,
        request: Request<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        self.runs.deliver_here(request.into_inner()).await
    }

    async fn seat_answer(
        &self,
        request: Request<pb::AnswerRequest>,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        self.runs.answer_here(request.into_inner()).await
    }

    async fn owner_tail(
        &self,
        request: Request<pb::TailRequest>,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        self.runs.tail_here(request.into_inner()).await
    }

    async fn seat_complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::CompleteReply>, GrpcStatus> {
        let r = request.into_inner();
        // the claim decides: a completion told twice, or one this node found itself, is
        // collected once
        collect_here(&self.coordinator, &r.turn_id, &r.launch_id)
            .map_err(GrpcStatus::unavailable)?;
        Ok(Response::new(pb::CompleteReply {}))
    }
}
