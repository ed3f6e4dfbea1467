//! gRPC health in step with the store: every surface (and the server as a whole, `""`) is
//! `SERVING` while the store can be reached and `NOT_SERVING` while it cannot — a node cut off
//! from its store takes no launch, answer or drain, so a load balancer or an operator's probe
//! should see it as down. Health itself stays open (no credential), as DESIGN §13 says.

use boxfleet_cluster::store::health::{Reachability, StoreHealth};
use boxfleet_proto::v1 as pb;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use super::engine::EngineService;
use super::fleet::FleetService;
use super::ops::OpsService;
use super::runs::RunsService;

/// The names health reports: the server's and every surface's.
fn surfaces() -> [&'static str; 5] {
    [
        "",
        <pb::runs_server::RunsServer<RunsService> as NamedService>::NAME,
        <pb::engine_server::EngineServer<EngineService> as NamedService>::NAME,
        <pb::ops_server::OpsServer<OpsService> as NamedService>::NAME,
        <pb::fleet_server::FleetServer<FleetService> as NamedService>::NAME,
    ]
}

/// Sets every surface as the store is now, then follows it until `cancel`.
pub(super) async fn follow_store(
    reporter: HealthReporter,
    health: StoreHealth,
    cancel: CancellationToken,
) {
    let mut changes = health.subscribe();
    loop {
        let status = match *changes.borrow_and_update() {
            Reachability::Reachable => ServingStatus::Serving,
            Reachability::Unreachable { .. } => ServingStatus::NotServing,
        };
        for name in surfaces() {
            reporter.set_service_status(name, status).await;
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = cancel.cancelled() => return,
        }
    }
}
