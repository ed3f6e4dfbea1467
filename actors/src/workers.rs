//! The node's long-lived workers as supervised actors (DESIGN §7):
//!
//! - [`SessionKeeper`]: renews the node's session lease at ttl/3; a lost session loses every
//!   seat the node held.
//! - [`Waiter`]: the completion poll (its own module, `waiter`).
//! - [`Collectors`]: a bounded pool running claimed collections. A collection that panics is
//!   counted as a restart and its claim handed back, so the completion comes round again.
//!
//! Each is restarted by its supervisor when it fails; a restart re-reads its truth from the
//! store (the waiter's list, the session's lease).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::Semaphore;
use tracing::warn;

use crate::outage::duty_failed;

use crate::lifecycle::Coordinator;
pub use crate::waiter::{Waiter, WaiterArgs, WaiterMsg, WaiterState};

/// Polls in flight at once across the node (sandbox.MaxConcurrentPolls).
pub const MAX_CONCURRENT_POLLS: usize = 16;
/// Collections in flight at once.
pub const MAX_CONCURRENT_COLLECTIONS: usize = 4;
/// One poll's bound (the control plane's whole-request budget).
pub const POLL_BOUND: Duration = Duration::from_secs(60);

/// What `Ops.Tree` shows beyond what the supervisor knows: the failures a worker saw and
/// handled (`last_error`), and the work queued at each worker (`mailbox_depth`, since ractor
/// exposes no queue length: each worker counts what waits on it).
#[derive(Debug, Default)]
pub struct Observed {
    errors: Mutex<std::collections::BTreeMap<String, String>>,
    depths: Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Observed {
    pub fn record(&self, actor: &str, error: &str) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(actor.to_owned(), error.to_owned());
    }
    pub fn get(&self, actor: &str) -> Option<String> {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(actor)
            .cloned()
    }
    pub fn set_depth(&self, actor: &str, depth: u64) {
        self.depths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(actor.to_owned(), depth);
    }
    pub fn depth(&self, actor: &str) -> u64 {
        self.depths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(actor)
            .copied()
            .unwrap_or(0)
    }
}

/// A test failpoint named in `BOXFLEET_FAILPOINTS` (comma-separated) fires every time.
pub fn failpoint_armed(name: &str) -> bool {
    std::env::var("BOXFLEET_FAILPOINTS")
        .is_ok_and(|list| list.split(',').any(|point| point.trim() == name))
}

/// A test failpoint named in `BOXFLEET_FAILPOINTS` (comma-separated) fires once per process.
pub fn failpoint_once(name: &str) -> bool {
    static FIRED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    if !failpoint_armed(name) {
        return false;
    }
    let mut fired = FIRED.lock().unwrap_or_else(|p| p.into_inner());
    if fired.iter().any(|point| point == name) {
        return false;
    }
    fired.push(name.to_owned());
    true
}

// -------------------------------------------------------------------------------------------
// session

/// Keeps the node's session alive.
#[derive(Debug)]
pub struct SessionKeeper;

#[derive(Debug, Clone)]
pub struct SessionArgs {
    pub coordinator: Arc<Coordinator>,
    pub ttl_seconds: u64,
    pub errors: Arc<Observed>,
}

#[derive(Debug)]
pub enum SessionMsg {
    Renew,
}

impl Actor for SessionKeeper {
    type Msg = SessionMsg;
    type State = SessionArgs;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let every = Duration::from_millis((args.ttl_seconds * 1000 / 3).max(500));
        myself.send_interval(every, || SessionMsg::Renew);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        SessionMsg::Renew: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let coordinator = &state.coordinator;
        // a lost lease loses every seat at once and opens a new session
        if let Err(error) = coordinator.renew_session().await {
            duty_failed(coordinator.store.as_ref(), "session_renew_failed", &error);
            state.errors.record("session", &error.to_string());
            return Ok(());
        }
        // an inbox that stopped on a hand-back is offered again after the renew
        for seat in coordinator.stalled_inboxes() {
            let coordinator = coordinator.clone();
            tokio::spawn(async move { coordinator.pump(&seat).await });
        }
        Ok(())
    }
}

// -------------------------------------------------------------------------------------------
// seats: placement

/// The `Seats` duty (DESIGN §7): runs the placement pass on its interval, so seats follow
/// the live nodes — acquired here when placed here and free, released gracefully when placed
/// elsewhere. A seat it acquires has its running jobs polled at once, not at the next tick.
#[derive(Debug)]
pub struct Placement;

#[derive(Debug, Clone)]
pub struct PlacementArgs {
    pub coordinator: Arc<Coordinator>,
    pub interval: Duration,
    pub waiter: String,
    pub errors: Arc<Observed>,
}

#[derive(Debug)]
pub enum PlacementMsg {
    Pass,
}

/// The placement duty's state: its arguments, the watch of the fleet's nodes and the one
/// that keeps the seats' view, and whether a pass they asked for is queued.
#[derive(Debug)]
pub struct PlacementState {
    args: PlacementArgs,
    nodes_watch: tokio::task::JoinHandle<()>,
    view_keeper: tokio::task::JoinHandle<()>,
    asked: crate::nodes_watch::PassAsked,
}

impl Actor for Placement {
    type Msg = PlacementMsg;
    type State = PlacementState;
    type Arguments = PlacementArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: PlacementArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let _ = myself.cast(PlacementMsg::Pass);
        myself.send_interval(args.interval, || PlacementMsg::Pass);
        let asked = crate::nodes_watch::PassAsked::new(myself.clone());
        let nodes_watch = tokio::spawn(crate::nodes_watch::pass_on_change(
            args.coordinator.clone(),
            asked.clone(),
        ));
        let view_keeper = tokio::spawn(crate::nodes_watch::keep_seat_view(
            args.coordinator.clone(),
            asked.clone(),
        ));
        Ok(PlacementState {
            args,
            nodes_watch,
            view_keeper,
            asked,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.nodes_watch.abort();
        state.view_keeper.abort();
        // nothing keeps the view now: the next pass (a restarted duty's) reads the store
        state.args.coordinator.seat_view.clear();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        PlacementMsg::Pass: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // a change seen from here on asks for another pass
        state.asked.taken();
        let state = &mut state.args;
        match state.coordinator.rebalance().await {
            Ok(acquired) if !acquired.is_empty() => {
                if let Some(waiter) = ActorRef::<WaiterMsg>::where_is(state.waiter.clone()) {
                    let _ = waiter.cast(WaiterMsg::Tick);
                }
            }
            Ok(_) => {}
            Err(error) => {
                duty_failed(
                    state.coordinator.store.as_ref(),
                    "seat_placement_failed",
                    &error,
                );
                state.errors.record("placement", &error.to_string());
            }
        }
        Ok(())
    }
}

// -------------------------------------------------------------------------------------------
// waiter

// -------------------------------------------------------------------------------------------
// collectors

/// The bounded pool of collections.
#[derive(Debug)]
pub struct Collectors;

#[derive(Debug, Clone)]
pub struct CollectorsArgs {
    pub coordinator: Arc<Coordinator>,
    pub errors: Arc<Observed>,
    /// collections that panicked (the claim was handed back)
    pub panics: Arc<std::sync::atomic::AtomicU32>,
}

#[derive(Debug)]
pub struct CollectorsState {
    args: CollectorsArgs,
    slots: Arc<Semaphore>,
    running: Arc<Mutex<BTreeSet<String>>>,
}

#[derive(Debug)]
pub enum CollectMsg {
    Collect { turn_id: String, launch_id: String },
}

impl Actor for Collectors {
    type Msg = CollectMsg;
    type State = CollectorsState;
    type Arguments = CollectorsArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: CollectorsArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(CollectorsState {
            running: args.coordinator.collecting.clone(),
            args,
            slots: Arc::new(Semaphore::new(MAX_CONCURRENT_COLLECTIONS)),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        CollectMsg::Collect { turn_id, launch_id }: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let key = crate::lifecycle::collection_key(&turn_id, &launch_id);
        if !state
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone())
        {
            return Ok(());
        }
        let args = state.args.clone();
        let slots = state.slots.clone();
        let running = state.running.clone();
        let queued = running.lock().unwrap_or_else(|p| p.into_inner()).len() as u64;
        args.errors.set_depth("collectors", queued);
        tokio::spawn(async move {
            let _slot = slots.acquire().await;
            let coordinator = args.coordinator.clone();
            let (turn, launch) = (turn_id.clone(), launch_id.clone());
            let collection =
                tokio::spawn(async move { Box::pin(coordinator.complete(&turn, &launch)).await });
            match collection.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    warn!(turn_id, %error, "sandbox_collect_failed");
                    args.errors.record("collectors", &error.to_string());
                }
                Err(join) if join.is_panic() => {
                    // the collection died holding the claim: give it back for the retry
                    warn!(turn_id, "sandbox_collect_panicked");
                    args.panics
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    args.errors.record(
                        "collectors",
                        "a collection panicked; its claim was handed back",
                    );
                    args.coordinator
                        .hand_back_panicked_collection(&turn_id, &launch_id)
                        .await;
                }
                Err(_) => {}
            }
            let left = {
                let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
                running.remove(&key);
                running.len() as u64
            };
            args.errors.set_depth("collectors", left);
        });
        Ok(())
    }
}
