//! What asks the placement duty for a pass between its interval's passes:
//!
//! - a watch of the nodes' registrations (`nodes/`): a node that joins, drains, or whose
//!   session lapsed (its registration goes with its lease, in the same instant as the holder
//!   keys of its seats). Without it a dead node's seats waited up to a pass interval (a second)
//!   after its lease lapsed before a survivor looked (issue 20's failover at 1,000 seats);
//! - the seats' view (`boxfleet_cluster::seat_view`), kept by its own watch, when a change
//!   frees a seat: a hand-over or a lapsed holder is taken at once.
//!
//! A burst of changes (a dead node's thousand seats) asks for one pass, not a thousand
//! ([`PassAsked`]). The interval's passes go on beside them; a watch that breaks (the store
//! unreachable) is opened again after a pause, and a change missed meanwhile is the next
//! interval pass's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use ractor::ActorRef;
use tracing::debug;

use crate::lifecycle::Coordinator;
use crate::workers::PlacementMsg;

/// How long a broken watch waits before it is opened again.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// Asks the placement duty for a pass, once until the pass begins: asks made while one is
/// queued join it.
#[derive(Debug, Clone)]
pub struct PassAsked {
    placement: ActorRef<PlacementMsg>,
    queued: Arc<AtomicBool>,
}

impl PassAsked {
    pub fn new(placement: ActorRef<PlacementMsg>) -> Self {
        Self {
            placement,
            queued: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Asks for a pass, unless one asked for is still queued.
    pub fn ask(&self) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            let _ = self.placement.cast(PlacementMsg::Pass);
        }
    }

    /// The pass begins: what changes from now on asks for another.
    pub fn taken(&self) {
        self.queued.store(false, Ordering::Release);
    }
}

/// Asks for a pass on every change under the nodes' prefix, for as long as the task runs (the
/// duty aborts it when it stops).
pub async fn pass_on_change(coordinator: Arc<Coordinator>, asked: PassAsked) {
    let prefix = coordinator.keys.nodes();
    loop {
        match coordinator.store.watch(&prefix, 0).await {
            Ok(mut changes) => {
                while let Some(change) = changes.next().await {
                    match change {
                        Ok(_) => asked.ask(),
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

/// Keeps the coordinator's seats' view current, asking for a pass when a seat is freed, for
/// as long as the task runs (the duty aborts it when it stops).
pub async fn keep_seat_view(coordinator: Arc<Coordinator>, asked: PassAsked) {
    let c = &coordinator;
    c.seat_view
        .keep(c.store.as_ref(), &c.keys, &c.runs, || asked.ask())
        .await;
}
