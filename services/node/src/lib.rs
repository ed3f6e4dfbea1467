//! The `boxfleet` program (DESIGN §16): a node, the demo, and the client CLI. The binary
//! (`src/main.rs`) only calls [`main`]; the scenario tests build the same entry point into
//! their own binary, so `cargo test` compiles it once, with the features the tests resolve.

mod cells;
mod cli;
mod client;
mod condense;
mod demo;
mod engines;
mod fleet_link;
mod grpc;
mod http;
mod keys;
mod memory;
mod node;
pub mod reload;
mod reserve;
mod routing;
mod store_link;
mod traces;
mod trust;

/// The node's engines (the built-in one among them) and where a seat's call is answered, for a
/// simulation that runs nodes in process.
pub use engines::{Engines, Router, RouterArgs};
pub use routing::{Route, route};

use clap::Parser as _;

/// The node's allocator: mimalloc (`memory.rs` says why and how it is set up).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Parses the command line, runs the command and exits with its status.
pub fn main() -> ! {
    memory::configure_allocator();
    let cli = cli::Cli::parse();
    // traces are a node's (and the demo's, which runs one); a client command exports none
    let exports_traces = matches!(cli.command, cli::Command::Node(_) | cli::Command::Demo(_));
    init_logs(cli.log_format, exports_traces);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_keep_alive(memory::BLOCKING_THREAD_KEEP_ALIVE)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("boxfleet: cannot start the async runtime: {error}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(cli.command));
    traces::flush();
    std::process::exit(code);
}

/// What a node logs unless `BOXFLEET_LOG` says otherwise: boxfleet's own lifecycle at info
/// (a launch, a collection, a park, an answer, a seat acquired, released or taken over, a
/// drain, a node lost: one line each, the ids as fields), its dependencies' warnings.
pub const DEFAULT_LOG_FILTER: &str = "warn,boxfleet_node=info,boxfleet_actors=info,\
boxfleet_cluster=info,boxfleet_sandbox=info,boxfleet_agents=info,boxfleet_auth=info";

/// The log on stderr: `BOXFLEET_LOG` (a tracing filter) or [`DEFAULT_LOG_FILTER`]; text with
/// colour only on a terminal and without `NO_COLOR`, or one JSON object per line. With
/// `traces`, the operation spans are exported too when an endpoint is configured
/// ([`traces`]), whatever the log's filter.
fn init_logs(format: cli::LogFormat, traces: bool) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("BOXFLEET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // colour only on a terminal: a log redirected to a file or a collector reads as plain text
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        cli::LogFormat::Text => logs.with_ansi(ansi).with_filter(filter).boxed(),
        cli::LogFormat::Json => logs.json().with_ansi(false).with_filter(filter).boxed(),
    };
    let spans = if traces { traces::layer() } else { None };
    tracing_subscriber::registry().with(logs).with(spans).init();
}

async fn run(command: cli::Command) -> i32 {
    let result = match command {
        cli::Command::Node(args) => Box::pin(run_node(args)).await,
        cli::Command::Validate { file } => validate(&file).await,
        cli::Command::Demo(args) => Box::pin(demo(args)).await,
        cli::Command::Token(cli::TokenCommand::Issue(args)) => keys::issue(&args),
        cli::Command::Keyring(command) => keys::keyring(&command),
        other => client::run(other).await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("boxfleet: {error:#}");
            1
        }
    }
}

fn node_config(args: &cli::NodeArgs) -> anyhow::Result<boxfleet_config::NodeConfig> {
    let mut file = match &args.config {
        Some(path) => boxfleet_config::File::load(path)?,
        None => boxfleet_config::File::default(),
    };
    if let Some(id) = &args.id {
        file.node.id = Some(id.clone());
    }
    if let Some(listen) = &args.listen {
        file.node.listen = Some(listen.clone());
    }
    if let Some(listen) = &args.http_listen {
        file.node.http.listen = Some(listen.clone());
    }
    if let Some(dir) = &args.data_dir {
        file.node.data_dir = Some(dir.clone());
    }
    if let Some(advertise) = &args.advertise {
        file.node.advertise = Some(advertise.clone());
    }
    if let Some(host) = &args.host {
        file.node.host = Some(host.clone());
    }
    if let Some(dir) = &args.boxes_dir {
        file.node.boxes_dir = Some(dir.clone());
    }
    if let Some(ttl) = args.lease_ttl {
        file.node.lease_ttl_seconds = Some(ttl);
    }
    if let Some(interval) = args.poll_interval {
        file.node.poll_interval_seconds = Some(interval);
    }
    if let Some(window) = args.settle_window {
        file.node.settle_window_seconds = Some(window);
    }
    if let Some(keyring) = &args.keyring {
        file.auth.get_or_insert_with(Default::default).keyring_file = Some(keyring.clone());
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        file.node.tls = Some(boxfleet_config::auth::TlsSection {
            cert: cert.clone(),
            key: key.clone(),
            ca: args.tls_ca.clone(),
        });
    }
    if args.insecure_listen {
        file.node.insecure_listen = Some(true);
    }
    if let Some(engine) = args.default_engine.as_deref() {
        file.node.default_engine = boxfleet_config::engine::EngineChoice::parse(engine);
    }
    if !args.etcd.is_empty() || args.prefix.is_some() {
        let mut store = file.store.take().unwrap_or_default();
        if !args.etcd.is_empty() {
            store.kind = boxfleet_config::StoreKind::Etcd;
            store.endpoints = Some(args.etcd.clone());
        }
        if let Some(prefix) = &args.prefix {
            store.prefix = Some(prefix.clone());
        }
        file.store = Some(store);
    }
    Ok(file.validate()?)
}

/// The banner's line on the cells the node built backends for, or why it has none.
fn cells_line(company: &boxfleet_config::company::Company) -> String {
    let sandbox = &company.providers.sandbox;
    if !sandbox.declared {
        return "no sandbox: company.providers.sandbox is absent, so every launch is refused (add local: or e2b:)".into();
    }
    let cells: Vec<String> = company.reached_cells().into_iter().collect();
    format!(
        "sandbox cells: {}{} (default {})",
        cells.join(", "),
        if sandbox.fake.enabled {
            ", all fake"
        } else {
            ""
        },
        sandbox
            .resolved_default()
            .unwrap_or("none: each role names its own")
    )
}

async fn run_node(args: cli::NodeArgs) -> anyhow::Result<i32> {
    let config = node_config(&args)?;
    let mut node = node::Node::start(config).await?;
    if let Some(file) = &args.config {
        // a reload builds from the file exactly as this start did (the same overrides, the
        // same validation `boxfleet validate` runs)
        let again = args.clone();
        node.reload_from(
            std::path::absolute(file).unwrap_or_else(|_| file.clone()),
            std::sync::Arc::new(move || node_config(&again)),
        )?;
    }
    // every path absolute, as the node uses it (a relative one was resolved at start)
    let config_file = match &args.config {
        Some(path) => format!(
            ", config {}",
            std::path::absolute(path)
                .unwrap_or_else(|_| path.clone())
                .display()
        ),
        None => String::new(),
    };
    // the store the node keeps its runs in: the embedded one in its data dir, or etcd
    let store = match node.config.store.kind {
        boxfleet_config::StoreKind::Embedded => {
            format!("embedded store in {}", node.config.data_dir.display())
        }
        _ => format!(
            "etcd at {} (prefix {}), node files in {}",
            node.config.store.endpoints.join(","),
            node.config.store.prefix,
            node.config.data_dir.display()
        ),
    };
    let boxes = if node.config.company.providers.sandbox.fake.enabled {
        "fake boxes in memory".to_owned()
    } else {
        format!("direct boxes in {}", node.config.boxes_dir.display())
    };
    eprintln!(
        "boxfleet node {} listening on {} ({store}, {boxes}{config_file}); Ctrl-C stops it",
        node.config.id, node.addr,
    );
    eprintln!("{}", cells_line(&node.config.company));
    if let Some(http) = &node.http {
        eprintln!(
            "HTTP on {} (the tool bridge and the OTLP receiver boxes call back on; node.http)",
            http.base_url()
        );
    }
    if let Some(keyring) = &node.trust.made_keyring {
        eprintln!(
            "made a keyring for this node at {} (share it, or auth.keys, with every node of a fleet)",
            keyring.display()
        );
    }
    if let Some(admin) = &node.trust.admin_file {
        eprintln!(
            "wrote an admin credential to {} (the CLI reads it from ./.boxfleet/admin.token, or pass --token-file)",
            admin.display()
        );
    }
    node.run_until_signal().await?;
    Ok(0)
}

async fn validate(file: &std::path::Path) -> anyhow::Result<i32> {
    match boxfleet_config::File::load(file).and_then(boxfleet_config::File::validate) {
        Ok(config) => {
            println!(
                "{}: valid (node {}, store {:?}, {} seats, {} units)",
                file.display(),
                config.id,
                config.store.kind,
                config.company.seats.len(),
                config.company.units.len()
            );
            let env = |name: &str| std::env::var(name).ok();
            let warnings = config.company.mcp_warnings().into_iter();
            for warning in warnings
                .chain(config.company.env_warnings(&env))
                .chain(config.company.catalogue_warnings())
            {
                eprintln!("warning: {}: {warning}", file.display());
            }
            if config.store.kind == boxfleet_config::StoreKind::Etcd {
                check_etcd(&config.store).await;
            }
            Ok(0)
        }
        Err(boxfleet_config::Error::Many(problems)) => {
            for problem in problems {
                eprintln!("{}: {problem}", file.display());
            }
            Ok(1)
        }
        Err(error) => {
            eprintln!("{}: {error}", file.display());
            Ok(1)
        }
    }
}

/// What `validate` says of the etcd a config names: its version and size, and each way it
/// falls short of what boxfleet needs (warnings: the config itself is valid either way).
async fn check_etcd(store: &boxfleet_config::StoreConfig) {
    let mut store = store.clone();
    store.call_timeout = store.call_timeout.min(std::time::Duration::from_secs(5));
    let checked = match store_link::connect_etcd(&store).await {
        Ok(etcd) => etcd.check_limits().await.map_err(anyhow::Error::from),
        Err(error) => Err(error),
    };
    match checked {
        Ok(check) => {
            println!(
                "store: etcd {} at {}, {} on disk, revision {}",
                check.version,
                store.endpoints.join(","),
                client::render::human_bytes(check.db_size.max(0) as u64),
                check.revision
            );
            for warning in &check.warnings {
                eprintln!("warning: {warning}");
            }
        }
        Err(error) => eprintln!("warning: could not reach etcd to check its limits: {error:#}"),
    }
}

async fn demo(args: cli::DemoArgs) -> anyhow::Result<i32> {
    Box::pin(demo::run(args)).await
}
