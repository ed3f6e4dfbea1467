//! How a node's actors reach the rest of the fleet ([`FleetLink`]): the poll duty found a
//! remote box's job done for a seat another node holds, and that node is told to collect it
//! (or this node's collectors are, when the seat is here after all).

use std::sync::Arc;

use boxfleet_actors::lifecycle::Coordinator;
use boxfleet_actors::names::NodeRefs;
use boxfleet_actors::ports::FleetLink;
use boxfleet_proto::v1 as pb;

use crate::routing::{Peers, Route, route};

/// Has this node's collectors collect a run whose job is done.
pub(crate) fn collect_here(
    coordinator: &Coordinator,
    turn_id: &str,
    launch_id: &str,
) -> Result<(), String> {
    use boxfleet_actors::workers::CollectMsg;
    let name = NodeRefs::new(coordinator.node.clone()).collectors();
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
impl FleetLink for Link {
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
                    .client(&node, &addr, None)
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
