//! The node's gRPC surfaces (DESIGN §8): Runs, Engine, Ops and Fleet, with gRPC health and
//! reflection, served by one supervised actor. Domain failures travel in replies; a failed
//! call's status comes from the one kind → code table (`status`).
//!
//! | file | what it serves |
//! |---|---|
//! | `runs` | the Runs service: routes a seat's calls to its holder; get, board, events |
//! | `local` | a seat's calls as the holder answers them (launch, deliver, tail, answer) |
//! | `fleet` | the Fleet service: calls forwarded here by another node |
//! | `engine` | the Engine service: an external engine's stream |
//! | `ops` | the Ops service: tree, nodes, seats, drain |
//! | `status` | an error as a status, by its kind |
//! | `health` | gRPC health, `NOT_SERVING` while the store is down |
//! | reflection | `grpc.reflection.v1` and `v1alpha`, listing every service above and health |

mod engine;
mod fleet;
mod health;
mod inputs;
mod local;
mod ops;
mod runs;
mod status;

use std::sync::Arc;

use boxfleet_actors::lifecycle::Coordinator;
use boxfleet_actors::workers::Observed;
use boxfleet_proto::v1 as pb;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use tonic::service::interceptor::InterceptedService;

use crate::engines::Engines;
use crate::routing::Peers;
use crate::trust::Trust;
use engine::EngineService;
use fleet::FleetService;
use local::Local;
use ops::OpsService;
use runs::RunsService;

/// The API as a supervised actor: it serves every surface until stopped; a restart binds the
/// same address again.
#[derive(Debug)]
pub struct Api;

#[derive(Debug, Clone)]
pub struct ApiArgs {
    pub addr: std::net::SocketAddr,
    /// the listener bound at start-up, taken by the first instance
    pub listener: Arc<std::sync::Mutex<Option<tokio::net::TcpListener>>>,
    pub coordinator: Arc<Coordinator>,
    pub engines: Arc<Engines>,
    pub errors: Arc<Observed>,
    /// the root supervisor's name, for Ops.Tree
    pub root: String,
    /// the keyring every call is checked against, and the node's TLS
    pub trust: Arc<Trust>,
    /// the node's reloads (`Ops.Reload`)
    pub reloader: Arc<crate::reload::Reloader>,
}

#[derive(Debug)]
pub struct ApiState {
    cancel: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

impl ractor::Actor for Api {
    type Msg = ();
    type State = ApiState;
    type Arguments = ApiArgs;

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        args: ApiArgs,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        let taken = args
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let listener = match taken {
            Some(listener) => listener,
            None => tokio::net::TcpListener::bind(args.addr).await?,
        };
        let cancel = CancellationToken::new();
        let serving = serve(listener, args, cancel.clone());
        let server = tokio::spawn(async move {
            if let Err(error) = serving.await {
                warn!(%error, "api_stopped");
            }
        });
        Ok(ApiState { cancel, server })
    }

    async fn post_stop(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        // graceful first (in-flight calls finish), then cut: a followed stream never ends
        state.cancel.cancel();
        let graceful =
            tokio::time::timeout(std::time::Duration::from_secs(2), &mut state.server).await;
        if graceful.is_err() {
            state.server.abort();
        }
        Ok(())
    }
}

/// Serves every surface on `listener` until `cancel`.
async fn serve(
    listener: tokio::net::TcpListener,
    args: ApiArgs,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let (health_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(health::follow_store(
        health_reporter,
        args.coordinator.store.health(),
        cancel.clone(),
    ));
    // reflection as v1 and as v1alpha (what grpcio's reflection client and older grpcurl ask
    // for), listing health beside boxfleet's own services
    let reflected = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(boxfleet_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection = reflected().build_v1()?;
    let reflection_v1alpha = reflected().build_v1alpha()?;
    // every reply leaves at once: with Nagle on, a reply written as headers then body waits
    // out the caller's delayed ACK (40 ms a call on Linux loopback)
    let incoming = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        |accepted| {
            accepted.inspect(|stream| {
                let _ = stream.set_nodelay(true);
            })
        },
    );
    let trust = args.trust.clone();
    let peers = Arc::new(Peers::new(trust.clone()));
    args.coordinator
        .set_fleet_link(Arc::new(crate::fleet_link::Link {
            coordinator: Arc::downgrade(&args.coordinator),
            peers: peers.clone(),
        }));
    let local = Local {
        coordinator: args.coordinator.clone(),
        default_engine: args.engines.default_engine(),
    };
    let runs = Arc::new(RunsService {
        local: local.clone(),
        peers: peers.clone(),
    });
    let fleet = FleetService {
        local,
        trust: trust.clone(),
        mutual_tls: trust.client_tls().is_some(),
    };
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = trust.server_tls() {
        server = server.tls_config(tls)?;
    }
    // every surface but health and reflection is behind the credential check
    let checked = trust.interceptor();
    server
        .add_service(health)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(InterceptedService::new(
            pb::runs_server::RunsServer::from_arc(runs.clone()),
            checked.clone(),
        ))
        .add_service(pb::fleet_server::FleetServer::with_interceptor(
            fleet,
            checked.clone(),
        ))
        .add_service(pb::engine_server::EngineServer::with_interceptor(
            EngineService {
                engines: args.engines.clone(),
            },
            checked.clone(),
        ))
        .add_service(pb::ops_server::OpsServer::with_interceptor(
            OpsService {
                peers,
                coordinator: args.coordinator.clone(),
                errors: args.errors.clone(),
                root: args.root.clone(),
                reloader: args.reloader.clone(),
            },
            checked,
        ))
        .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
        .await?;
    Ok(())
}
