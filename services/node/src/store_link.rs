//! The node's link to its store: opening it as `store:` says (etcd's members, TLS, client
//! certificate and user), checking etcd against what boxfleet needs, and telling of an
//! outage once at its start and once at its end (the gRPC health goes `NOT_SERVING`
//! meanwhile, see `grpc::health`).

use std::sync::Arc;

use anyhow::Context as _;
use boxfleet_cluster::Store;
use boxfleet_cluster::store::embedded::{EmbeddedOptions, EmbeddedStore};
use boxfleet_cluster::store::etcd::limits::LimitsCheck;
use boxfleet_cluster::store::etcd::{EtcdOptions, EtcdStore, EtcdTls};
use boxfleet_cluster::store::health::{Reachability, StoreHealth};
use boxfleet_config::{NodeConfig, StoreConfig, StoreKind};
use tracing::{info, warn};

/// Opens the store the config names; an etcd one is checked against boxfleet's needs, each
/// shortfall logged as a warning.
pub async fn open(config: &NodeConfig) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match config.store.kind {
        StoreKind::Embedded => {
            let dir = config.data_dir.join("store");
            let options = EmbeddedOptions {
                history_seconds: config.store.history.as_secs(),
                ..EmbeddedOptions::default()
            };
            Arc::new(
                EmbeddedStore::open_with(&dir, options)
                    .await
                    .with_context(|| format!("open the embedded store in {}", dir.display()))?,
            )
        }
        StoreKind::Etcd => {
            let store = connect_etcd(&config.store).await?;
            match store.check_limits().await {
                Ok(check) => log_check(&check),
                Err(error) => warn!(%error, "store_limits_unchecked"),
            }
            Arc::new(store)
        }
    })
}

/// Connects to the etcd cluster `store` names.
pub async fn connect_etcd(store: &StoreConfig) -> anyhow::Result<EtcdStore> {
    let endpoints = store.endpoints.join(",");
    let options = etcd_options(store)?;
    EtcdStore::connect_with(options).await.with_context(|| {
        format!(
            "connect to etcd at {endpoints}: start etcd there (or check the address, TLS and \
                 credentials), or fix store.endpoints / --etcd"
        )
    })
}

/// The store layer's options for `store:`, its PEM files read.
fn etcd_options(store: &StoreConfig) -> anyhow::Result<EtcdOptions> {
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path).with_context(|| format!("read {what} {}", path.display()))
    };
    let tls = match &store.tls {
        None => None,
        Some(tls) => Some(EtcdTls {
            ca: read(&tls.ca, "store.tls.ca")?,
            identity: match &tls.identity {
                None => None,
                Some((cert, key)) => {
                    Some((read(cert, "store.tls.cert")?, read(key, "store.tls.key")?))
                }
            },
        }),
    };
    Ok(EtcdOptions {
        endpoints: store.endpoints.clone(),
        call_timeout: store.call_timeout,
        tls,
        user: store
            .user
            .as_ref()
            .map(|user| (user.name.clone(), user.password.clone())),
    })
}

fn log_check(check: &LimitsCheck) {
    info!(
        version = %check.version,
        db_size = check.db_size,
        revision = check.revision,
        "store_checked"
    );
    for warning in &check.warnings {
        warn!(%warning, "store_below_needs");
    }
}

/// Logs the store's outages for as long as the node runs: `store_unreachable` when one
/// starts, `store_reachable_again` with its length when it ends — one line each, however
/// many calls failed between.
pub fn log_outages(health: StoreHealth, node: String) -> tokio::task::JoinHandle<()> {
    let mut changes = health.subscribe();
    tokio::spawn(async move {
        let mut down_since = None;
        loop {
            let now = changes.borrow_and_update().clone();
            match (now, down_since) {
                (Reachability::Unreachable { since, error }, None) => {
                    warn!(node, %error, "store_unreachable");
                    down_since = Some(since);
                }
                (Reachability::Reachable, Some(since)) => {
                    let down_for = since.elapsed().unwrap_or_default();
                    // a warning too, so the default filter shows the outage's end beside its start
                    warn!(node, down_for = ?down_for, "store_reachable_again");
                    down_since = None;
                }
                _ => {}
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    })
}
