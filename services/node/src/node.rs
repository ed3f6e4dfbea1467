//! One boxfleet node: its store, session and coordinator, and the supervision tree that runs
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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use boxfleet_actors::coordinator::{Coordinator, EngineDown};
use boxfleet_actors::ports::{Provider, Runner};
use boxfleet_actors::supervisor::{
    ChildSpec, Restart, Strategy, Supervisor, SupervisorArgs, SupervisorMsg,
};
use boxfleet_actors::workers::{
    Collectors, CollectorsArgs, Observed, Placement, PlacementArgs, SessionArgs, SessionKeeper,
    Waiter, WaiterArgs, WaiterMsg,
};
use boxfleet_cluster::seat::{NodeInfo, Session};
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::etcd::EtcdStore;
use boxfleet_cluster::{Keys, Store};
use boxfleet_config::{NodeConfig, StoreKind};
use ractor::{Actor, ActorRef};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::engine::{Engines, Router, RouterArgs};
use crate::grpc::{Api, ApiArgs};

/// A running node.
#[derive(Debug)]
pub struct Node {
    pub config: NodeConfig,
    pub addr: SocketAddr,
    pub coordinator: Arc<Coordinator>,
    pub root: ActorRef<SupervisorMsg>,
    root_join: tokio::task::JoinHandle<()>,
}

async fn open_store(config: &NodeConfig) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match config.store.kind {
        StoreKind::Embedded => {
            let dir = config.data_dir.join("store");
            Arc::new(
                EmbeddedStore::open(&dir)
                    .await
                    .with_context(|| format!("open the embedded store in {}", dir.display()))?,
            )
        }
        StoreKind::Etcd => Arc::new(
            EtcdStore::connect(&config.store.endpoints, Duration::from_secs(10))
                .await
                .with_context(|| {
                    format!("connect to etcd at {}", config.store.endpoints.join(","))
                })?,
        ),
    })
}

/// How often the placement pass runs: a seat whose holder died is taken within the lease's
/// TTL plus this.
const PLACEMENT_INTERVAL: Duration = Duration::from_secs(1);

/// How long a stopping node waits for each seat's work in progress before it lets go anyway
/// (the next holder's recovery pass settles what is left).
const STOP_SETTLE: Duration = Duration::from_secs(20);

impl Node {
    /// Starts a node: store, session, coordinator, the recovery pass, then the tree.
    pub async fn start(config: NodeConfig) -> anyhow::Result<Node> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("create the data dir {}", config.data_dir.display()))?;
        let store = open_store(&config).await?;
        let keys = Keys::new(config.store.prefix.clone());
        let id = config.id.clone();
        let incarnation = format!("{id}-{}", uuid::Uuid::new_v4().simple());

        // a restarted node takes over its previous incarnation's session at once
        if let Some(kv) = store.get(&keys.node(&id)).await?
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
        let info = NodeInfo {
            node: id.clone(),
            addr: config.advertise.clone().unwrap_or_else(|| {
                if addr.ip().is_unspecified() {
                    format!("{}:{}", config.host, addr.port())
                } else {
                    addr.to_string()
                }
            }),
            incarnation: incarnation.clone(),
            started_at: chrono::Utc::now(),
            build: env!("CARGO_PKG_VERSION").to_owned(),
            host: config.host.clone(),
            draining: false,
        };
        let session =
            Session::open(store.as_ref(), &keys, info, config.lease_ttl_seconds as i64).await?;

        let mut providers: BTreeMap<String, Arc<dyn Provider>> = BTreeMap::new();
        providers.insert(
            "direct".into(),
            // boxes live under {boxes_dir}/{sandbox_id}, {data_dir}/boxes unless configured
            Arc::new(boxfleet_sandbox::direct::DirectProvider::in_boxes_dir(
                config.boxes_dir.clone(),
            )),
        );
        let sandbox = &config.company.providers.sandbox;
        if let Some(local) = sandbox.local.as_ref().filter(|l| l.image.is_some()) {
            providers.insert(
                "container".into(),
                Arc::new(boxfleet_sandbox::ContainerProvider::new(container_config(
                    local,
                    &config.data_dir,
                )?)),
            );
        }
        if let Some(e2b) = &sandbox.e2b {
            let mut cell = boxfleet_sandbox::e2b::E2bConfig::new(
                e2b.api_key.clone(),
                e2b.template.clone().unwrap_or_else(|| "base".to_owned()),
            );
            if let Some(domain) = e2b.domain.as_deref().filter(|d| !d.is_empty()) {
                cell.domain = domain.to_owned();
            }
            cell.api_url = e2b.api_url.clone().filter(|u| !u.is_empty());
            cell.envd_url = e2b.envd_url.clone().filter(|u| !u.is_empty());
            let provider = boxfleet_sandbox::e2b::E2bProvider::new(cell)
                .map_err(|error| anyhow::anyhow!("company.providers.sandbox.e2b: {error}"))?;
            providers.insert("e2b".into(), Arc::new(provider));
        }
        let mut runners: BTreeMap<String, Arc<dyn Runner>> = BTreeMap::new();
        runners.insert(
            "command".into(),
            Arc::new(boxfleet_agents::command::CommandRunner::new()),
        );
        // the coding CLIs are found on the box's PATH (`claude`, `opencode`), or where
        // BOXFLEET_CLAUDE_CLI / BOXFLEET_OPENCODE_CLI name them
        let mut claude = boxfleet_agents::ClaudeCodeRunner::new();
        if let Some(cli) = cli_override("BOXFLEET_CLAUDE_CLI")? {
            claude = claude.with_cli(cli);
        }
        runners.insert("claude-code".into(), Arc::new(claude));
        let mut opencode = boxfleet_agents::OpenCodeRunner::new();
        if let Some(cli) = cli_override("BOXFLEET_OPENCODE_CLI")? {
            opencode = opencode.with_cli(cli);
        }
        runners.insert("opencode".into(), Arc::new(opencode));

        let (engine_tx, engine_rx) = mpsc::unbounded_channel::<EngineDown>();
        let coordinator = Arc::new(
            Coordinator::new(
                id.clone(),
                incarnation,
                store.clone(),
                keys.clone(),
                session,
                providers,
                runners,
                "direct".into(),
                engine_tx,
            )
            .with_company(config.company.clone()),
        );
        coordinator.register();
        let engines = Arc::new(Engines::new(coordinator.clone()));
        let errors = Arc::new(Observed::default());
        let collect_panics = Arc::new(std::sync::atomic::AtomicU32::new(0));

        let receiver = Arc::new(tokio::sync::Mutex::new(engine_rx));
        let listener = Arc::new(std::sync::Mutex::new(Some(listener)));
        let args = SupervisorArgs::new(Strategy::RestForOne)
            .with_intensity(10, Duration::from_secs(30))
            .with_child({
                let args = SessionArgs {
                    coordinator: coordinator.clone(),
                    ttl_seconds: config.lease_ttl_seconds,
                    errors: errors.clone(),
                };
                ChildSpec::worker(format!("{id}/session"), Restart::Permanent, move || {
                    (SessionKeeper, args.clone())
                })
            })
            .with_child({
                let args = RouterArgs {
                    engines: engines.clone(),
                    receiver,
                    observed: errors.clone(),
                };
                ChildSpec::worker(format!("{id}/engines"), Restart::Permanent, move || {
                    (Router, args.clone())
                })
            })
            .with_child(ChildSpec::supervisor(
                format!("{id}/seats"),
                Restart::Permanent,
                // the placement duty first; each held seat's actor joins it
                SupervisorArgs::new(Strategy::OneForOne).with_child({
                    let args = PlacementArgs {
                        coordinator: coordinator.clone(),
                        interval: PLACEMENT_INTERVAL,
                        waiter: format!("{id}/waiter"),
                        errors: errors.clone(),
                    };
                    ChildSpec::worker(format!("{id}/placement"), Restart::Permanent, move || {
                        (Placement, args.clone())
                    })
                }),
            ))
            .with_child(ChildSpec::supervisor(
                format!("{id}/boxes"),
                Restart::Permanent,
                SupervisorArgs::new(Strategy::OneForOne),
            ))
            .with_child(ChildSpec::supervisor(
                format!("{id}/runs"),
                Restart::Permanent,
                SupervisorArgs::new(Strategy::OneForOne),
            ))
            .with_child({
                let args = CollectorsArgs {
                    coordinator: coordinator.clone(),
                    errors: errors.clone(),
                    panics: collect_panics.clone(),
                };
                ChildSpec::worker(format!("{id}/collectors"), Restart::Permanent, move || {
                    (Collectors, args.clone())
                })
            })
            .with_child({
                let coordinator = coordinator.clone();
                ChildSpec::worker(format!("{id}/board"), Restart::Permanent, move || {
                    (boxfleet_actors::board::Board, coordinator.clone())
                })
            })
            .with_child({
                let coordinator = coordinator.clone();
                ChildSpec::worker(format!("{id}/tail"), Restart::Permanent, move || {
                    (boxfleet_actors::tail::TailOwner, coordinator.clone())
                })
            })
            .with_child({
                let args = ApiArgs {
                    addr,
                    listener,
                    coordinator: coordinator.clone(),
                    engines: engines.clone(),
                    errors: errors.clone(),
                    root: format!("node/{id}"),
                };
                ChildSpec::worker(format!("{id}/api"), Restart::Permanent, move || {
                    (Api, args.clone())
                })
            })
            // last: rest_for_one restarts only later siblings, and nothing depends on the poll
            .with_child({
                let args = WaiterArgs {
                    coordinator: coordinator.clone(),
                    interval: Duration::from_secs(config.poll_interval_seconds),
                    collectors: format!("{id}/collectors"),
                    errors: errors.clone(),
                };
                ChildSpec::worker(format!("{id}/waiter"), Restart::Permanent, move || {
                    (Waiter, args.clone())
                })
            });
        let (root, root_join) = Supervisor::spawn(Some(format!("node/{id}")), Supervisor, args)
            .await
            .context("start the node's supervision tree")?;
        // the recovery pass for every seat placed here; the waiter polls what it finds running
        if let Err(error) = coordinator.rebalance().await {
            warn!(%error, "seat_placement_failed");
        }
        // what the recovery found running is polled at once, not at the next tick
        if let Some(waiter) = ActorRef::<WaiterMsg>::where_is(format!("{id}/waiter")) {
            let _ = waiter.cast(WaiterMsg::Tick);
        }
        info!(node = %id, %addr, "node_started");
        Ok(Node {
            config,
            addr,
            coordinator,
            root,
            root_join,
        })
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
        coordinator.release_all(STOP_SETTLE).await;
        self.root.stop(Some("node stopping".into()));
        let _ = tokio::time::timeout(Duration::from_secs(10), self.root_join).await;
        let _ = self
            .coordinator
            .session()
            .close(self.coordinator.store.as_ref())
            .await;
        info!(node = %self.config.id, "node_stopped");
    }

    /// Runs until Ctrl-C or SIGTERM, or until the tree fails past its restart intensity.
    pub async fn run_until_signal(self) -> anyhow::Result<()> {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let root_cell = self.root.get_cell();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            _ = wait_stopped(root_cell) => {
                anyhow::bail!("the node's supervision tree stopped: restart intensity exceeded (see the log)");
            }
        }
        info!("node_stopping");
        self.stop().await;
        Ok(())
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

/// A coding CLI named by `var`: a bare name is looked up on the box's `PATH`; a path with a
/// `/` in it, if relative, is resolved now against the node's working directory (a job runs
/// in its box's home, where the relative path would name nothing).
fn cli_override(var: &str) -> anyhow::Result<Option<String>> {
    let Ok(cli) = std::env::var(var) else {
        return Ok(None);
    };
    if cli.is_empty() || !cli.contains('/') {
        return Ok(Some(cli).filter(|cli| !cli.is_empty()));
    }
    let resolved = boxfleet_config::paths::Base::of_process().absolute_text(var, &cli)?;
    Ok(Some(resolved))
}

/// The `container` cell from `providers.sandbox.local` (boxes under `{state_dir}` or
/// `{data_dir}/containers`).
fn container_config(
    local: &boxfleet_config::providers::LocalSection,
    data_dir: &std::path::Path,
) -> anyhow::Result<boxfleet_sandbox::ContainerConfig> {
    use boxfleet_sandbox::container::Runtime;
    let state_dir = local
        .state_dir
        .as_deref()
        .filter(|d| !d.is_empty())
        .map_or_else(|| data_dir.join("containers"), std::path::PathBuf::from);
    let mut cell =
        boxfleet_sandbox::ContainerConfig::new(local.image.clone().unwrap_or_default(), state_dir);
    cell.runtime = match local.runtime.as_deref().unwrap_or("auto") {
        "auto" | "" => Runtime::Auto,
        "docker" => Runtime::Docker,
        "podman" => Runtime::Podman,
        other => anyhow::bail!(
            "company.providers.sandbox.local.runtime: {other:?} is not a runtime; use auto, docker or podman"
        ),
    };
    cell.run_args = local.run_args.clone();
    cell.network = local.network.clone().filter(|n| !n.is_empty());
    cell.runtime_env = local.runtime_env.clone();
    Ok(cell)
}
