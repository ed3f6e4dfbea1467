//! One simulated node: the node's own lifecycle (`Coordinator`) under its supervision tree as
//! `boxfleet node` builds it (`services/node/src/node.rs`) — the session keeper, the engines'
//! router and its built-in engine, the seats' supervisor with the placement duty (and its
//! watches of the fleet's nodes and of the seats' view) and each held seat's actor, the boxes'
//! and the runs' supervisors with each box's actor and each run's driver, the collectors and
//! the waiter — every actor from the `boxfleet-actors` and `boxfleet-node` crates. What the
//! node process adds around them (its gRPC and HTTP listeners, the board, the tail owner) is
//! left out: the simulation calls the lifecycle where a client's call would land.
//!
//! Killing a node is a SIGKILL's effect: its actors and tasks are stopped where they are, and
//! every store and box call of the incarnation — including the ones in flight in tasks that
//! outlive the kill — never returns. Its session's lease runs out on the store's clock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxfleet_actors::lifecycle::cells::Cells;
use boxfleet_actors::lifecycle::{Coordinator, EngineDown, Parts};
use boxfleet_actors::names::NodeRefs;
use boxfleet_actors::ports::{Provider, Runner};
use boxfleet_actors::supervisor::{ChildSpec, Restart, Strategy, Supervisor, SupervisorArgs};
use boxfleet_actors::tree::NodeTree;
use boxfleet_actors::waiter::{Waiter, WaiterArgs};
use boxfleet_actors::workers::{
    Collectors, CollectorsArgs, Observed, Placement, PlacementArgs, SessionArgs, SessionKeeper,
};
use boxfleet_cluster::Keys;
use boxfleet_cluster::seat::{NodeInfo, Session};
use boxfleet_cluster::store::Store;
use boxfleet_sandbox::fake::FakeProvider;
use ractor::{Actor, ActorCell};
use rand::rngs::StdRng;
use tokio::sync::mpsc;

use super::boxes::{Seen, SimProvider};
use super::store::{SimClient, SimStore};

/// The session lease's TTL: a dead node's seats move within it.
pub const LEASE_TTL: u64 = 3;
/// The waiter's poll interval.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// The placement duty's interval.
pub const PLACEMENT_INTERVAL: Duration = Duration::from_secs(2);

/// What every node of one simulation shares.
#[derive(Debug, Clone)]
pub struct Shared {
    pub store: Arc<SimStore>,
    pub keys: Keys,
    pub fake: FakeProvider,
    pub rng: Arc<Mutex<StdRng>>,
    pub box_unreachable: Arc<Mutex<f64>>,
    pub seen: Arc<Mutex<Seen>>,
}

/// A node, up or down.
#[derive(Debug)]
pub struct SimNode {
    pub id: String,
    /// how many times it was started
    pub starts: u32,
    pub up: Option<Up>,
}

/// A running incarnation of a node.
#[derive(Debug)]
pub struct Up {
    pub coordinator: Arc<Coordinator>,
    alive: Arc<AtomicBool>,
    /// the root of its supervision tree
    root: ActorCell,
}

impl SimNode {
    pub fn new(id: String) -> SimNode {
        SimNode {
            id,
            starts: 0,
            up: None,
        }
    }

    /// Starts the node (again): a fresh incarnation, its previous session revoked as a
    /// restarted node revokes it; `false` when the store refused the start (tried later).
    pub async fn start(&mut self, shared: &Shared) -> bool {
        self.starts += 1;
        let incarnation = format!("{}-{}", self.id, self.starts);
        let alive = Arc::new(AtomicBool::new(true));
        let client: Arc<dyn Store> = Arc::new(SimClient::new(
            shared.store.clone(),
            &incarnation,
            alive.clone(),
        ));
        if let Ok(Some(kv)) = client.get(&shared.keys.node(&self.id)).await
            && kv.lease != 0
        {
            let _ = client.lease_revoke(kv.lease).await;
        }
        let info = NodeInfo {
            node: self.id.clone(),
            addr: format!("sim://{}", self.id),
            incarnation: incarnation.clone(),
            started_at: boxfleet_cluster::clock::now(),
            build: "sim".into(),
            host: "sim-host".into(),
            draining: false,
            insecure: false,
            tls: false,
        };
        let Ok(session) =
            Session::open(client.as_ref(), &shared.keys, info, LEASE_TTL as i64).await
        else {
            alive.store(false, Ordering::SeqCst);
            return false;
        };
        let provider: Arc<dyn Provider> = Arc::new(SimProvider::new(
            shared.fake.clone(),
            alive.clone(),
            shared.rng.clone(),
            shared.box_unreachable.clone(),
            shared.seen.clone(),
        ));
        let runner: Arc<dyn Runner> = Arc::new(boxfleet_agents::command::CommandRunner::new());
        let (engine_tx, engine_rx) = mpsc::unbounded_channel::<EngineDown>();
        let parts = Parts {
            node: self.id.clone(),
            incarnation: incarnation.clone(),
            store: client,
            keys: shared.keys.clone(),
            session,
            cells: Cells::of(BTreeMap::from([("direct".to_owned(), provider)]), "direct"),
            runners: BTreeMap::from([("command".to_owned(), runner)]),
            engine: engine_tx,
            // the company a node runs with no company document: every seat's code work in the
            // `direct` cell, here the simulated boxes
            company: boxfleet_config::live::LiveCompany::new(
                boxfleet_config::company::Company::quickstart(),
            ),
            events_keep_seconds: 86_400,
        };
        // the actors' names are the incarnation's (and the process's: two simulations of one
        // seed may run side by side), so a killed incarnation's leaving the registry never
        // meets the next one's
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let refs = NodeRefs::new(format!("{incarnation}-r{run}"));
        let coordinator = Arc::new_cyclic(|me| {
            Coordinator::new(parts, Arc::new(NodeTree::new(me.clone(), refs.clone())))
        });
        let engines = Arc::new(boxfleet_node::Engines::new(
            coordinator.clone(),
            boxfleet_config::engine::EngineChoice::Builtin,
        ));
        let tree = tree(&refs, &coordinator, engines, engine_rx);
        let Ok((root, _)) = Supervisor::spawn(Some(refs.root()), Supervisor, tree).await else {
            alive.store(false, Ordering::SeqCst);
            return false;
        };
        // the recovery pass for every seat placed here, as a starting node runs it
        let _ = coordinator.rebalance().await;
        self.up = Some(Up {
            coordinator,
            alive,
            root: root.get_cell(),
        });
        true
    }

    /// Kills the node where it is (see the module docs): every actor of its tree at once,
    /// the root first so no supervisor restarts what is killed under it.
    pub fn kill(&mut self) {
        if let Some(up) = self.up.take() {
            up.alive.store(false, Ordering::SeqCst);
            let mut cells = vec![up.root.clone()];
            let mut i = 0;
            while i < cells.len() {
                let children = cells[i].get_children();
                cells.extend(children);
                i += 1;
            }
            for cell in &cells {
                cell.kill();
            }
        }
    }

    pub fn coordinator(&self) -> Option<Arc<Coordinator>> {
        self.up.as_ref().map(|up| up.coordinator.clone())
    }
}

/// The node's supervision tree as `boxfleet node` builds it (`services/node/src/node.rs`,
/// `Workers::tree`), less what serves the outside (the API, the board, the tail owner): the
/// session keeper, the engines' router, the seats' supervisor with the placement duty (each
/// held seat's actor joins it), the boxes' and the runs' supervisors, the collectors and the
/// waiter, rest-for-one.
fn tree(
    refs: &NodeRefs,
    coordinator: &Arc<Coordinator>,
    engines: Arc<boxfleet_node::Engines>,
    engine_rx: mpsc::UnboundedReceiver<EngineDown>,
) -> SupervisorArgs {
    let errors = Arc::new(Observed::default());
    let session = SessionArgs {
        coordinator: coordinator.clone(),
        ttl_seconds: LEASE_TTL,
        errors: errors.clone(),
    };
    let router = boxfleet_node::RouterArgs {
        engines,
        receiver: Arc::new(tokio::sync::Mutex::new(engine_rx)),
        observed: errors.clone(),
    };
    let placement = PlacementArgs {
        coordinator: coordinator.clone(),
        interval: PLACEMENT_INTERVAL,
        waiter: refs.waiter(),
        errors: errors.clone(),
    };
    let collectors = CollectorsArgs {
        coordinator: coordinator.clone(),
        errors: errors.clone(),
        panics: Arc::default(),
    };
    let waiter = WaiterArgs {
        coordinator: coordinator.clone(),
        interval: POLL_INTERVAL,
        collectors: refs.collectors(),
        errors,
    };
    SupervisorArgs::new(Strategy::RestForOne)
        .with_intensity(10, Duration::from_secs(30))
        .with_child(ChildSpec::worker(
            refs.session(),
            Restart::Permanent,
            move || (SessionKeeper, session.clone()),
        ))
        .with_child(ChildSpec::worker(
            refs.engines(),
            Restart::Permanent,
            move || (boxfleet_node::Router, router.clone()),
        ))
        .with_child(ChildSpec::supervisor(
            refs.seats(),
            Restart::Permanent,
            SupervisorArgs::new(Strategy::OneForOne).with_child(ChildSpec::worker(
                refs.placement(),
                Restart::Permanent,
                move || (Placement, placement.clone()),
            )),
        ))
        .with_child(ChildSpec::supervisor(
            refs.boxes(),
            Restart::Permanent,
            SupervisorArgs::new(Strategy::OneForOne),
        ))
        .with_child(ChildSpec::supervisor(
            refs.runs(),
            Restart::Permanent,
            SupervisorArgs::new(Strategy::OneForOne),
        ))
        .with_child(ChildSpec::worker(
            refs.collectors(),
            Restart::Permanent,
            move || (Collectors, collectors.clone()),
        ))
        .with_child(ChildSpec::worker(
            refs.waiter(),
            Restart::Permanent,
            move || (Waiter, waiter.clone()),
        ))
}
