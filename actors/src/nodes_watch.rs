//! The placement pass at once when the fleet changes: a watch of the nodes' registrations
//! (`nodes/`) asks the placement duty for a pass on every change — a node that joins, drains,
//! or whose session lapsed (its registration goes with its lease, in the same instant as the
//! holder keys of its seats). Without it a dead node's seats waited up to a pass interval
//! (a second) after its lease lapsed before a survivor looked (issue 20's failover at 1,000
//! seats). The interval's passes go on beside it; a watch that breaks (the store unreachable)
//! is opened again after a pause, and a change missed meanwhile is the next interval pass's.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ractor::ActorRef;
use tracing::debug;

use crate::lifecycle::Coordinator;
use crate::workers::PlacementMsg;

/// How long a broken watch waits before it is opened again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Asks `placement` for a pass on every change under the nodes' prefix, for as long as the
/// task runs (the duty aborts it when it stops).
pub async fn pass_on_change(coordinator: Arc<Coordinator>, placement: ActorRef<PlacementMsg>) {
    let prefix = coordinator.keys.nodes();
    loop {
        match coordinator.store.watch(&prefix, 0).await {
            Ok(mut changes) => {
                while let Some(change) = changes.next().await {
                    match change {
                        Ok(_) => {
                            let _ = placement.cast(PlacementMsg::Pass);
                        }
                        Err(error) => {
                            debug!(%error, "nodes_watch_broken");
                            break;
                        }
                    }
                }
            }
            Err(error) => debug!(%error, "nodes_watch_unopened"),
        }
        tokio::time::sleep(REOPEN_AFTER).await;
    }
}
