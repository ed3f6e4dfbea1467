//! One boxfleet node: its store, session and lifecycle, and the supervision tree that runs
//! its workers (DESIGN §7):
//!
//! ```text
//! node/{id}                 rest_for_one
//! ├── {id}/session          permanent   renews the session lease at ttl/3
//! ├── {id}/engines          permanent   routes work to an attached engine or the built-in one
//! ├── {id}/seats            permanent   one_for_one: Seat{handle} per held seat
//! ├── {id}/boxes            permanent   one_for_one: Box{sandbox_id}, one box's control ops in order
//! ├── {id}/runs             permanent   one_for_one: Run{turn}, each run's retry driver
//! ├── {id}/collectors       permanent   bounded pool of claimed collections
//! ├── {id}/board            permanent   the live projection of runs in flight (events + 30 s reconcile)
//! ├── {id}/tail             permanent   the live tail's readings
//! ├── {id}/api              permanent   the tonic listener (Runs, Engine, Ops, health, reflection)
//! └── {id}/waiter           permanent   the completion poll
//! ```
//! Started in order, stopped in reverse. Under rest_for_one a child's failure restarts it and
//! the children after it, so what depends on another comes after it, and the poll (which
//! nothing depends on) comes last: a poller that panics does not take the API down with it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use boxfleet_actors::board::{Board, BoardArgs};
use boxfleet_actors::lifecycle::{Coordinator, EngineDown, Parts};
use boxfleet_actors::names::NodeRefs;
use boxfleet_actors::supervisor::{
    ChildSpec, Restart, Strategy, Supervisor, SupervisorArgs, SupervisorMsg,
};
use boxfleet_actors::tail::{JobOutput, TailArgs, TailOwner};
use boxfleet_actors::tree::NodeTree;
use boxfleet_actors::workers::{
    Collectors, CollectorsArgs, Observed, Placement, PlacementArgs, SessionArgs, SessionKeeper,
    Waiter, WaiterArgs, WaiterMsg,
};
use boxfleet_cluster::Keys;
use boxfleet_cluster::seat::{NodeInfo, Session};
use boxfleet_config::NodeConfig;
use ractor::{Actor, ActorRef};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::cells;
use crate::engines::{Engines, Router, RouterArgs};
use crate::grpc::{Api, ApiArgs};
use crate::trust::Trust;

/// What this node registers: how others reach it, on which host, since when.
fn node_info(config: &NodeConfig, incarnation: &str, addr: SocketAddr, trust: &Trust) -> NodeInfo {
    NodeInfo {
        node: config.id.clone(),
        addr: config.advertise.clone().unwrap_or_else(|| {
            if addr.ip().is_unspecified() {
                format!("{}:{}", config.host, addr.port())
            } else {
                addr.to_string()
            }
        }),
        incarnation: incarnation.to_owned(),
        started_at: chrono::Utc::now(),
        build: env!("CARGO_PKG_VERSION").to_owned(),
        host: config.host.clone(),
        draining: false,
        insecure: !trust.tls() && !addr.ip().is_loopback(),
        tls: trust.tls(),
    }
}

/// A node listens beyond loopback only behind TLS, or when told on purpose: a credential sent
/// in the clear is anyone's on the network, and a launch runs code on this host.
fn check_listen(config: &NodeConfig) -> anyhow::Result<()> {
    if config.tls.is_some() || config.listen.ip().is_loopback() {
        return Ok(());
    }
    if !config.insecure_listen {
        anyhow::bail!(
            "node.listen {} is not a loopback address, and the node has no TLS: its calls and              their credentials would cross the network in the clear. Give node.tls (cert, key,              and ca for a fleet), or pass --insecure-listen on a network only the fleet reaches",
            config.listen
        );
    }
    warn!(
        listen = %config.listen,
        "node_listens_insecurely: beyond loopback without TLS (--insecure-listen); calls and credentials cross the network in the clear"
    );
    Ok(())
}

/// A running node.
#[derive(Debug)]
pub struct Node {
    pub config: NodeConfig,
    pub addr: SocketAddr,
    pub coordinator: Arc<Coordinator>,
    /// the engines attached here (told when the node stops)
    engines: Arc<Engines>,
    pub root: ActorRef<SupervisorMsg>,
    root_join: tokio::task::JoinHandle<()>,
    /// the node's keyring and TLS (what the banner reports it made)
    pub trust: Arc<Trust>,
    /// logs the store's outages, once at each start and end
    outages: tokio::task::JoinHandle<()>,
    /// gives the allocator's free memory back every 30 s
    trimmer: tokio::task::JoinHandle<()>,
    /// the store's disk reserve, looked at every second
    reserve_watch: tokio::task::JoinHandle<()>,
    /// the HTTP listener (the tool bridge, the OTLP receiver), when on
    pub http: Option<crate::http::HttpListener>,
    /// reads the config file again and puts it in force (file change, SIGHUP, `Ops.Reload`)
    pub reloader: Arc<crate::reload::Reloader>,
    /// the file watcher and SIGHUP handler, once the node is given its file
    watch: Option<tokio::task::JoinHandle<()>>,
}

/// How often the placement pass runs: a seat whose holder died is taken within the lease's
/// TTL plus this.
const PLACEMENT_INTERVAL: Duration = Duration::from_secs(1);

/// The workers the node's tree is made of, shared by their children's specs.
struct Workers {
    refs: NodeRefs,
    /// the node's reloads (`Ops.Reload`)
    reloader: Arc<crate::reload::Reloader>,
    coordinator: Arc<Coordinator>,
    engines: Arc<Engines>,
    errors: Arc<Observed>,
    /// the lifecycle's work for the engine, drained by the router
    engine_queue: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<EngineDown>>>,
    /// the listener bound at start-up, taken by the API's first instance
    listener: Arc<std::sync::Mutex<Option<tokio::net::TcpListener>>>,
    addr: SocketAddr,
    lease_ttl_seconds: u64,
    poll_interval: Duration,
    trust: Arc<Trust>,
}

impl Workers {
    /// A permanent worker named `name`.
    fn worker<A>(
        name: String,
        make: impl Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    ) -> ChildSpec
    where
        A: Actor,
    {
        ChildSpec::worker(name, Restart::Permanent, make)
    }

    /// The node's supervision tree (see the module doc), in start order.
    fn tree(&self) -> SupervisorArgs {
        let refs = &self.refs;
        let session = SessionArgs {
            coordinator: self.coordinator.clone(),
            ttl_seconds: self.lease_ttl_seconds,
            errors: self.errors.clone(),
        };
        let router = RouterArgs {
            engines: self.engines.clone(),
            receiver: self.engine_queue.clone(),
            observed: self.errors.clone(),
        };
        let placement = PlacementArgs {
            coordinator: self.coordinator.clone(),
            interval: PLACEMENT_INTERVAL,
            waiter: refs.waiter(),
            errors: self.errors.clone(),
        };
        let collectors = CollectorsArgs {
            coordinator: self.coordinator.clone(),
            errors: self.errors.clone(),
            panics: Arc::new(std::sync::atomic::AtomicU32::new(0)),
        };
        let board = BoardArgs {
            runs: self.coordinator.runs.clone(),
            store: self.coordinator.store.clone(),
            keys: self.coordinator.keys.clone(),
        };
        let output: Arc<dyn JobOutput> = self.coordinator.access.clone();
        let tail = TailArgs {
            output,
            read_bound: self.poll_interval,
        };
        let api = ApiArgs {
            addr: self.addr,
            listener: self.listener.clone(),
            coordinator: self.coordinator.clone(),
            engines: self.engines.clone(),
            errors: self.errors.clone(),
            root: refs.root(),
            trust: self.trust.clone(),
            reloader: self.reloader.clone(),
        };
        let waiter = WaiterArgs {
            coordinator: self.coordinator.clone(),
            interval: self.poll_interval,
            collectors: refs.collectors(),
            errors: self.errors.clone(),
        };
        SupervisorArgs::new(Strategy::RestForOne)
            .with_intensity(10, Duration::from_secs(30))
            .with_child(Self::worker(refs.session(), move || {
                (SessionKeeper, session.clone())
            }))
            .with_child(Self::worker(refs.engines(), move || {
                (Router, router.clone())
            }))
            .with_child(ChildSpec::supervisor(
                refs.seats(),
                Restart::Permanent,
                // the placement duty first; each held seat's actor joins it
                SupervisorArgs::new(Strategy::OneForOne)
                    .with_child(Self::worker(refs.placement(), move || {
                        (Placement, placement.clone())
                    })),
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
            .with_child(Self::worker(refs.collectors(), move || {
                (Collectors, collectors.clone())
            }))
            .with_child(Self::worker(refs.board(), move || (Board, board.clone())))
            .with_child(Self::worker(refs.tail(), move || (TailOwner, tail.clone())))
            .with_child(Self::worker(refs.api(), move || (Api, api.clone())))
            // last: rest_for_one restarts only later siblings, and nothing depends on the poll
            .with_child(Self::worker(refs.waiter(), move || {
                (Waiter, waiter.clone())
            }))
    }
}

impl Node {
    /// Starts a node: store, session, lifecycle, then the tree and the recovery pass of every
    /// seat placed here.
    pub async fn start(config: NodeConfig) -> anyhow::Result<Node> {
        check_listen(&config)?;
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("create the data dir {}", config.data_dir.display()))?;
        let trust = Arc::new(Trust::start(
            &config.id,
            &config.keys,
            config.tls.as_ref(),
            &config.data_dir,
        )?);
        // the redactor's rule tables are compiled before the node joins the fleet, off the
        // runtime's threads: compiled at the first job's output they would stall every duty
        // (the session's renewals among them) for as long as that takes
        tokio::task::spawn_blocking(boxfleet_redact::prepare)
            .await
            .context("compile the redaction rules")?;
        let store = crate::store_link::open(&config).await?;
        let outages = crate::store_link::log_outages(store.health(), config.id.clone());
        let keys = Keys::new(config.store.prefix.clone());
        // every txn, lease renewal and event counted for `/metrics`
        let store: Arc<dyn boxfleet_cluster::Store> = Arc::new(
            boxfleet_cluster::store::metered::Metered::new(store, keys.events()),
        );
        let id = config.id.clone();
        let incarnation = format!("{id}-{}", uuid::Uuid::new_v4().simple());
        // the first read: a store that does not answer is named with what to do
        let store_remedy = || match config.store.kind {
            boxfleet_config::StoreKind::Embedded => format!(
                "the embedded store in {} did not answer",
                config.data_dir.display()
            ),
            _ => format!(
                "etcd at {} did not answer: start etcd there (or check the address, TLS and \
                 credentials), or fix store.endpoints / --etcd",
                config.store.endpoints.join(",")
            ),
        };
        let previous = store
            .get(&keys.node(&id))
            .await
            .with_context(store_remedy)?;
        // a restarted node takes over its previous incarnation's session at once
        if let Some(kv) = previous
            && kv.lease != 0
        {
            info!(node = %id, "node_previous_session_revoked");
            let _ = store.lease_revoke(kv.lease).await;
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| {
                format!(
                    "listen on {} (is another node running there? pass --listen)",
                    config.listen
                )
            })?;
        let addr = listener.local_addr()?;
        let info = node_info(&config, &incarnation, addr, &trust);
        let grpc_addr = info.addr.clone();
        let session = Session::open(store.as_ref(), &keys, info, config.lease_ttl_seconds as i64)
            .await
            .with_context(store_remedy)?;
        let (engine_tx, engine_rx) = mpsc::unbounded_channel::<EngineDown>();
        let parts = Parts {
            node: id.clone(),
            incarnation,
            store,
            keys,
            session,
            cells: cells::build(&config)?,
            runners: cells::runners()?,
            engine: engine_tx,
            company: boxfleet_config::live::LiveCompany::new(config.company.clone()),
            events_keep_seconds: config.store.events_keep.as_secs() as i64,
        };
        let refs = NodeRefs::new(id.clone());
        let coordinator = Arc::new_cyclic(|me| {
            Coordinator::new(parts, Arc::new(NodeTree::new(me.clone(), refs.clone())))
        });
        coordinator.set_condenser(Arc::new(crate::condense::LlmCondenser::new(
            coordinator.live_company().clone(),
        )?));
        let engines = Arc::new(Engines::new(coordinator.clone(), config.default_engine));
        let reloader = Arc::new(crate::reload::Reloader::new(
            coordinator.clone(),
            config.clone(),
        ));
        // the HTTP listener: the tool bridge and the OTLP receiver a box calls back on
        let held_by = coordinator.clone();
        let dashboard = Arc::new(crate::http::dashboard::Dashboard::new(
            trust.clone(),
            config.id.clone(),
            grpc_addr,
            Box::new(move || held_by.held_count()),
        ));
        let http = crate::http::start(&config, engines.clone(), trust.clone(), dashboard)
            .await?
            .map(|(listener, endpoints)| {
                if endpoints.bridge.is_some() || endpoints.receiver.is_some() {
                    coordinator.set_endpoints(Arc::new(endpoints));
                }
                listener
            });
        let env = |name: &str| std::env::var(name).ok();
        let warnings = config.company.mcp_warnings().into_iter();
        for warning in warnings
            .chain(config.company.env_warnings(&env))
            .chain(config.company.catalogue_warnings())
        {
            warn!("{warning}");
        }
        let workers = Workers {
            refs: refs.clone(),
            reloader: reloader.clone(),
            engines: engines.clone(),
            trust: trust.clone(),
            coordinator: coordinator.clone(),
            errors: Arc::new(Observed::default()),
            engine_queue: Arc::new(tokio::sync::Mutex::new(engine_rx)),
            listener: Arc::new(std::sync::Mutex::new(Some(listener))),
            addr,
            lease_ttl_seconds: config.lease_ttl_seconds,
            poll_interval: Duration::from_secs(config.poll_interval_seconds),
        };
        let (root, root_join) = Supervisor::spawn(Some(refs.root()), Supervisor, workers.tree())
            .await
            .context("start the node's supervision tree")?;
        // the recovery pass for every seat placed here; the waiter polls what it finds running
        if let Err(error) = coordinator.rebalance().await {
            boxfleet_actors::outage::duty_failed(
                coordinator.store.as_ref(),
                "seat_placement_failed",
                &error,
            );
        }
        // what the recovery found running is polled at once, not at the next tick
        if let Some(waiter) = ActorRef::<WaiterMsg>::where_is(refs.waiter()) {
            let _ = waiter.cast(WaiterMsg::Tick);
        }
        let reserve_watch =
            crate::reserve::watch_store_reserve(crate::cells::disk_budget(&config), refs.waiter());
        info!(node = %id, %addr, "node_started");
        Ok(Node {
            config,
            addr,
            coordinator,
            engines,
            root,
            root_join,
            trust,
            outages,
            trimmer: crate::memory::trim_periodically(),
            reserve_watch,
            http,
            reloader,
            watch: None,
        })
    }

    /// Names the file the node was started from and how it was built (the start's overrides
    /// and validation), and reloads on its change and on SIGHUP from now on.
    pub fn reload_from(
        &mut self,
        file: std::path::PathBuf,
        loader: crate::reload::Loader,
    ) -> anyhow::Result<()> {
        self.reloader.set_source(file, loader);
        self.watch = Some(self.reloader.watch()?);
        Ok(())
    }

    /// Stops the node: the tree in reverse order, then the session (its seats go with it, so
    /// another node can take them at once).
    pub async fn stop(self) {
        // a graceful stop hands the seats over first: placed no more seats, each held one is
        // released once its launch, collections and answers settle, so a rolling restart
        // reaps nothing
        let coordinator = &self.coordinator;
        if let Err(error) = coordinator.set_draining(true).await {
            warn!(%error, "node_drain_failed");
        }
        // each seat's work in progress gets the settle window (node.settle_window_seconds,
        // default 60 s); what is left after it the next holder's recovery pass settles
        let window = Duration::from_secs(self.config.settle_window_seconds);
        coordinator.release_all(window).await;
        self.engines.close_all(
            "node_stopping",
            &format!(
                "node {} is stopping: attach to another node of the fleet",
                self.config.id
            ),
        );
        self.root.stop(Some("node stopping".into()));
        let _ = tokio::time::timeout(Duration::from_secs(10), self.root_join).await;
        let _ = self
            .coordinator
            .session()
            .close(self.coordinator.store.as_ref())
            .await;
        self.outages.abort();
        self.trimmer.abort();
        self.reserve_watch.abort();
        if let Some(watch) = &self.watch {
            watch.abort();
        }
        if let Some(http) = &self.http {
            http.stop();
        }
        info!(node = %self.config.id, "node_stopped");
    }

    /// Runs until Ctrl-C or SIGTERM, until the tree fails past its restart intensity, or until
    /// the embedded store fails a write (redb takes none after an I/O error until reopened:
    /// the node stops non-zero for its supervisor to restart it, never a live node that cannot
    /// write).
    pub async fn run_until_signal(self) -> anyhow::Result<()> {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let root_cell = self.root.get_cell();
        let embedded = self.config.store.kind == boxfleet_config::StoreKind::Embedded;
        let store = self.coordinator.store.health();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            _ = wait_stopped(root_cell) => {
                anyhow::bail!("the node's supervision tree stopped: restart intensity exceeded (see the log)");
            }
            error = embedded_store_failed(store), if embedded => {
                tracing::error!(node = %self.config.id, %error, "store_failed");
                anyhow::bail!(
                    "the embedded store cannot write ({error}); the node stops so its supervisor restarts it: free space on the data dir's disk first"
                );
            }
        }
        info!("node_stopping");
        self.stop().await;
        Ok(())
    }
}

/// Waits until the embedded store is down, which for it is for good; returns why.
async fn embedded_store_failed(health: boxfleet_cluster::store::health::StoreHealth) -> String {
    use boxfleet_cluster::store::health::Reachability;
    let mut changes = health.subscribe();
    loop {
        if let Reachability::Unreachable { error, .. } = &*changes.borrow_and_update() {
            return error.clone();
        }
        if changes.changed().await.is_err() {
            return "the store's health is no longer reported".into();
        }
    }
}

async fn wait_stopped(cell: ractor::ActorCell) {
    loop {
        if matches!(
            cell.get_status(),
            ractor::ActorStatus::Stopped | ractor::ActorStatus::Stopping
        ) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
