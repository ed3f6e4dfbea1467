//! The node's gRPC surfaces (DESIGN §8): Runs, Engine and Ops, with gRPC health and
//! reflection. Domain failures travel in replies; transport errors mean the node failed.

use std::pin::Pin;
use std::sync::Arc;

use boxfleet_actors::coordinator::{
    self, AnswerOutcome, Coordinator, EngineDown, LaunchOutcome, RefusalClass, ResumeKind,
};
use boxfleet_cluster::events;
use boxfleet_cluster::inbox::{Delivery, Enqueued};
use boxfleet_cluster::record::Status;
use boxfleet_cluster::seat;
use boxfleet_cluster::store::WatchEvent;
use boxfleet_proto::v1 as pb;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status as GrpcStatus};
use tracing::warn;

use crate::engine::Engines;
use crate::fleet::{FleetService, OWNER_TAIL_BUDGET, Peers, Route, forwarded};
use boxfleet_actors::board::BoardMsg;
use boxfleet_actors::supervisor::{self, ActorTree, SupervisorMsg};
use boxfleet_actors::tail::TailMsg;
use boxfleet_actors::workers::Observed;

type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, GrpcStatus>> + Send>>;

fn none_if_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// One table maps domain errors to gRPC codes.
fn status(error: impl Into<Error>) -> GrpcStatus {
    match error.into() {
        Error::Invalid(message) => GrpcStatus::invalid_argument(message),
        Error::Unavailable(message) => GrpcStatus::unavailable(message),
        Error::Internal(message) => GrpcStatus::internal(message),
    }
}

enum Error {
    Invalid(String),
    Unavailable(String),
    Internal(String),
}

impl From<coordinator::Error> for Error {
    fn from(error: coordinator::Error) -> Self {
        match error {
            coordinator::Error::Invalid(message) => Error::Invalid(message),
            coordinator::Error::SeatHeldElsewhere { .. } => Error::Unavailable(error.to_string()),
            coordinator::Error::Box(boxfleet_actors::ports::BoxError::Unreachable(_)) => {
                Error::Unavailable(error.to_string())
            }
            coordinator::Error::Store(ref store) if store.is_retryable() => {
                Error::Unavailable(error.to_string())
            }
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<boxfleet_cluster::Error> for Error {
    fn from(error: boxfleet_cluster::Error) -> Self {
        coordinator::Error::from(error).into()
    }
}

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
    health_reporter
        .set_serving::<pb::runs_server::RunsServer<RunsService>>()
        .await;
    health_reporter
        .set_serving::<pb::engine_server::EngineServer<EngineService>>()
        .await;
    health_reporter
        .set_serving::<pb::ops_server::OpsServer<OpsService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(boxfleet_proto::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    health_reporter
        .set_serving::<pb::fleet_server::FleetServer<FleetService>>()
        .await;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let peers = Arc::new(Peers::default());
    args.coordinator
        .set_fleet_link(Arc::new(crate::fleet::Link {
            coordinator: Arc::downgrade(&args.coordinator),
            peers: peers.clone(),
        }));
    let runs = Arc::new(RunsService {
        coordinator: args.coordinator.clone(),
        peers: peers.clone(),
    });
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(reflection)
        .add_service(pb::runs_server::RunsServer::from_arc(runs.clone()))
        .add_service(pb::fleet_server::FleetServer::new(FleetService {
            runs,
            coordinator: args.coordinator.clone(),
        }))
        .add_service(pb::engine_server::EngineServer::new(EngineService {
            engines: args.engines.clone(),
        }))
        .add_service(pb::ops_server::OpsServer::new(OpsService {
            peers,
            coordinator: args.coordinator.clone(),
            errors: args.errors.clone(),
            root: args.root.clone(),
        }))
        .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
        .await?;
    Ok(())
}

/// The Runs service.
#[derive(Debug)]
pub struct RunsService {
    coordinator: Arc<Coordinator>,
    peers: Arc<Peers>,
}

impl RunsService {
    async fn route(&self, seat: &str) -> Result<Route, GrpcStatus> {
        crate::fleet::route(&self.coordinator, seat).await
    }

    /// Where calls about a run go: its seat's route; here when there is no record (this node
    /// answers that the run is gone).
    async fn route_turn(&self, turn_id: &str) -> Result<Route, GrpcStatus> {
        match self.coordinator.runs.read(turn_id).await.map_err(status)? {
            Some(run) => self.route(&run.record.seat).await,
            None => Ok(Route::Here),
        }
    }
}

fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, GrpcStatus> {
    if text.is_empty() {
        return Ok(chrono::Utc::now());
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&chrono::Utc))
        .map_err(|_| {
            GrpcStatus::invalid_argument(format!("posted_at {text:?} is not an RFC 3339 instant"))
        })
}

fn event_json(stored: &events::Stored) -> String {
    let mut value = serde_json::to_value(&stored.event).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("revision".into(), stored.revision.into());
    }
    value.to_string()
}

fn event_message(stored: &events::Stored) -> pb::Event {
    pb::Event {
        id: stored.event.id.clone(),
        kind: stored.event.kind.clone(),
        turn_id: stored.event.turn_id.clone(),
        launch_id: stored.event.launch_id.clone(),
        seat: stored.event.seat.clone(),
        revision: stored.revision,
        json: event_json(stored),
    }
}

impl RunsService {
    pub(crate) async fn launch_here(
        &self,
        r: pb::LaunchRequest,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        let launch = coordinator::LaunchRequest {
            seat: r.seat,
            turn_id: none_if_empty(r.turn_id),
            iteration: r.iteration,
            brief: r.brief,
            task: r.task,
            conversation: r.conversation,
            requester: none_if_empty(r.requester),
            work_item: none_if_empty(r.work_item),
            conversation_key: none_if_empty(r.conversation_key),
            partition: none_if_empty(r.partition),
            runner: r.runner,
            command: none_if_empty(r.command),
            model: none_if_empty(r.model),
            pause_ttl_seconds: r.pause_ttl_seconds,
            timeout_seconds: (r.timeout_seconds > 0).then_some(r.timeout_seconds),
            owes_answer: r.owes_answer,
            trace: none_if_empty(r.trace),
        };
        let outcome = match self.coordinator.launch(launch).await {
            LaunchOutcome::Launched {
                turn_id,
                launch_id,
                sandbox_id,
            } => pb::launch_reply::Outcome::Launched(pb::Launched {
                turn_id,
                launch_id,
                sandbox_id,
                node: self.coordinator.node.clone(),
            }),
            LaunchOutcome::Refused { class, reason } => {
                let class = match class {
                    RefusalClass::Unavailable => pb::refusal::Class::Unavailable,
                    RefusalClass::Refused => pb::refusal::Class::Refused,
                    RefusalClass::Budget => pb::refusal::Class::Budget,
                };
                pb::launch_reply::Outcome::Refused(pb::Refusal {
                    class: class as i32,
                    reason,
                })
            }
        };
        Ok(Response::new(pb::LaunchReply {
            outcome: Some(outcome),
        }))
    }

    pub(crate) async fn deliver_here(
        &self,
        r: pb::DeliverRequest,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        let delivery_id = if r.delivery_id.is_empty() {
            format!("msg-{}", uuid::Uuid::new_v4().simple())
        } else {
            r.delivery_id
        };
        let delivery = Delivery {
            delivery_id: delivery_id.clone(),
            conversation_key: none_if_empty(r.conversation_key),
            partition: none_if_empty(r.partition),
            from: if r.from.is_empty() {
                "operator".into()
            } else {
                r.from
            },
            text: r.text,
            posted_at: parse_time(&r.posted_at)?,
        };
        let (outcome, seq) = match self
            .coordinator
            .deliver(&r.seat, delivery)
            .await
            .map_err(status)?
        {
            Enqueued::Queued { seq } => ("queued", seq),
            Enqueued::Duplicate => ("duplicate", 0),
            Enqueued::AlreadyWorked => ("already_worked", 0),
        };
        Ok(Response::new(pb::DeliverReply {
            outcome: outcome.into(),
            seq,
            delivery_id,
        }))
    }

    pub(crate) async fn tail_here(
        &self,
        r: pb::TailRequest,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        use pb::tail_reply::Outcome;
        let reply = |outcome: Outcome, detail: String| pb::TailReply {
            outcome: outcome as i32,
            detail,
            ..pb::TailReply::default()
        };
        let Some(run) = self
            .coordinator
            .runs
            .read(&r.turn_id)
            .await
            .map_err(status)?
        else {
            return Ok(Response::new(reply(
                Outcome::NotRunning,
                "collected".into(),
            )));
        };
        let record = run.record;
        if !r.launch_id.is_empty() && r.launch_id != record.launch_id {
            return Ok(Response::new(reply(
                Outcome::NotRunning,
                format!("replaced by job {}", record.launch_id),
            )));
        }
        match record.status {
            Status::Launching if record.job.is_none() => {
                return Ok(Response::new(reply(Outcome::Launching, String::new())));
            }
            Status::Launching | Status::Running => {}
            other => return Ok(Response::new(reply(Outcome::NotRunning, other.to_string()))),
        }
        self.coordinator.reachable(&record).map_err(status)?;
        let Some(owner) =
            ractor::ActorRef::<TailMsg>::where_is(format!("{}/tail", self.coordinator.node))
        else {
            return Err(GrpcStatus::unavailable(
                "the node's tail owner is not running",
            ));
        };
        let budget = std::time::Duration::from_millis(u64::from(r.budget_ms.clamp(500, 10_000)));
        let launch_id = record.launch_id.clone();
        let asked = owner
            .call(
                |reply| TailMsg::Read {
                    record: Box::new(record),
                    epoch: r.epoch,
                    after: r.after,
                    reply,
                },
                // an answer waits for the box at most three quarters of the asker's budget
                Some(budget * 3 / 4),
            )
            .await;
        match asked {
            Ok(ractor::rpc::CallResult::Success(Ok(view))) => Ok(Response::new(pb::TailReply {
                outcome: if view.reset {
                    Outcome::Reset
                } else {
                    Outcome::Tail
                } as i32,
                text: view.text,
                start: view.start,
                end: view.end,
                epoch: view.epoch,
                digest: String::new(),
                launch_id,
                detail: view
                    .stale_ms
                    .map(|ms| format!("from a reading {ms} ms old: the box is slow"))
                    .unwrap_or_default(),
                held: view.held,
                front: view.front,
            })),
            Ok(ractor::rpc::CallResult::Success(Err(error))) => Err(GrpcStatus::unavailable(
                format!("the box of run {} could not be read: {error}", r.turn_id),
            )),
            Ok(_) | Err(_) => Err(GrpcStatus::deadline_exceeded(format!(
                "the box of run {} did not answer inside the budget; ask again",
                r.turn_id
            ))),
        }
    }

    pub(crate) async fn answer_here(
        &self,
        r: pb::AnswerRequest,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        if r.text.trim().is_empty() {
            return Err(GrpcStatus::invalid_argument("an answer needs --text"));
        }
        let from = if r.as_whom.is_empty() {
            "operator".into()
        } else {
            r.as_whom
        };
        let outcome = self
            .coordinator
            .answer(&r.turn_id, &r.launch_id, &r.text, &from)
            .await
            .map_err(status)?;
        let detail = match &outcome {
            AnswerOutcome::NotAwaiting(status) => {
                format!("the run is {status}, not waiting on a question")
            }
            AnswerOutcome::WrongLaunch(current) => format!("the run is on job {current} now"),
            AnswerOutcome::Gone => "no such run: it was collected or never existed".into(),
            AnswerOutcome::AlreadyAnswered => "somebody answered first".into(),
            AnswerOutcome::Recorded => "the answer is recorded; the run resumes with it".into(),
        };
        Ok(Response::new(pb::AnswerReply {
            outcome: outcome.word().into(),
            detail,
        }))
    }
}

#[tonic::async_trait]
impl pb::runs_server::Runs for RunsService {
    async fn launch(
        &self,
        request: Request<pb::LaunchRequest>,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        let r = request.into_inner();
        match self.route(&r.seat).await? {
            Route::Here => self.launch_here(r).await,
            Route::There { node, addr } => {
                let mut peer = self.peers.client(&node, &addr)?;
                peer.seat_launch(r).await.map_err(|e| forwarded(&node, e))
            }
        }
    }

    async fn deliver(
        &self,
        request: Request<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        let r = request.into_inner();
        match self.route(&r.seat).await? {
            Route::Here => self.deliver_here(r).await,
            Route::There { node, addr } => {
                let mut peer = self.peers.client(&node, &addr)?;
                peer.seat_deliver(r).await.map_err(|e| forwarded(&node, e))
            }
        }
    }

    async fn answer(
        &self,
        request: Request<pb::AnswerRequest>,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        let r = request.into_inner();
        match self.route_turn(&r.turn_id).await? {
            Route::Here => self.answer_here(r).await,
            Route::There { node, addr } => {
                let mut peer = self.peers.client(&node, &addr)?;
                peer.seat_answer(r).await.map_err(|e| forwarded(&node, e))
            }
        }
    }

    async fn tail(
        &self,
        request: Request<pb::TailRequest>,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        let r = request.into_inner();
        let (node, addr) = match self.route_turn(&r.turn_id).await? {
            Route::Here => return self.tail_here(r).await,
            Route::There { node, addr } => (node, addr),
        };
        // the owner answers inside the asker's budget, or the asker says it was silent
        let mut peer = self.peers.client(&node, &addr)?;
        let mut ask = Request::new(r);
        ask.set_timeout(OWNER_TAIL_BUDGET);
        match tokio::time::timeout(OWNER_TAIL_BUDGET, peer.owner_tail(ask)).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(error))
                if !matches!(
                    error.code(),
                    tonic::Code::Unavailable
                        | tonic::Code::DeadlineExceeded
                        | tonic::Code::Cancelled
                ) =>
            {
                Err(error)
            }
            _ => Ok(Response::new(pb::TailReply {
                outcome: pb::tail_reply::Outcome::OwnerSilent as i32,
                detail: node,
                ..pb::TailReply::default()
            })),
        }
    }

    async fn get(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::GetReply>, GrpcStatus> {
        let turn_id = request.into_inner().turn_id;
        let record = self.coordinator.runs.read(&turn_id).await.map_err(status)?;
        let stored = events::read_from(self.coordinator.store.as_ref(), &self.coordinator.keys, 0)
            .await
            .map_err(status)?;
        let mut phase_records_json = Vec::new();
        let mut events_json = Vec::new();
        for event in stored.iter().filter(|s| s.event.turn_id == turn_id) {
            if event.event.kind == events::kind::PHASE_COMPLETED {
                phase_records_json.push(event_json(event));
            } else {
                events_json.push(event_json(event));
            }
        }
        let found = record.is_some() || !phase_records_json.is_empty() || !events_json.is_empty();
        Ok(Response::new(pb::GetReply {
            found,
            record_json: record
                .map(|run| String::from_utf8_lossy(&run.record.to_json()).into_owned())
                .unwrap_or_default(),
            phase_records_json,
            events_json,
        }))
    }

    async fn board(
        &self,
        request: Request<pb::BoardRequest>,
    ) -> Result<Response<pb::BoardReply>, GrpcStatus> {
        let audience = request.into_inner().audience;
        let Some(board) =
            ractor::ActorRef::<BoardMsg>::where_is(format!("{}/board", self.coordinator.node))
        else {
            return Err(GrpcStatus::unavailable("the node's board is not running"));
        };
        let audience = (!audience.is_empty()).then_some(audience);
        let rows = board
            .call(
                |reply| BoardMsg::List { audience, reply },
                Some(std::time::Duration::from_secs(5)),
            )
            .await
            .map_err(|error| {
                GrpcStatus::unavailable(format!("the board did not answer: {error}"))
            })?;
        let ractor::rpc::CallResult::Success(rows) = rows else {
            return Err(GrpcStatus::unavailable("the board did not answer in time"));
        };
        let entries = rows
            .into_iter()
            .map(|record| pb::BoardEntry {
                turn_id: record.turn_id.clone(),
                role: record.role.clone().unwrap_or_default(),
                agent_handle: record.seat.clone(),
                agent_id: record.seat_id.clone().unwrap_or_default(),
                coding_agent: record.coding_agent.clone(),
                sandbox_id: record.sandbox_id.clone().unwrap_or_default(),
                task: record.task.clone(),
                status: record.status.to_string(),
                started_at: record.created_at.to_rfc3339(),
                question: record
                    .question
                    .as_ref()
                    .map(|q| q.text.clone())
                    .unwrap_or_default(),
                audience: record
                    .question
                    .as_ref()
                    .map(|q| q.audience.clone())
                    .unwrap_or_default(),
                work_item: record.work_item.clone().unwrap_or_default(),
                owner: record.owner.clone().unwrap_or_default(),
                paused_at: record.paused_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                launch_id: record.launch_id.clone(),
                audience_handles: record
                    .question
                    .as_ref()
                    .map(|q| q.audience_handles.clone())
                    .unwrap_or_default(),
            })
            .collect();
        Ok(Response::new(pb::BoardReply { runs: entries }))
    }

    type EventsStream = Stream_<pb::Event>;

    async fn events(
        &self,
        request: Request<pb::EventsRequest>,
    ) -> Result<Response<Self::EventsStream>, GrpcStatus> {
        let r = request.into_inner();
        let store = self.coordinator.store.clone();
        let keys = self.coordinator.keys.clone();
        let range = store.range(&keys.events()).await.map_err(status)?;
        let mut backlog: Vec<events::Stored> = range
            .kvs
            .iter()
            .filter(|kv| kv.create_revision >= r.from_revision)
            .filter_map(|kv| events::from_watch(kv).ok())
            .collect();
        backlog.sort_by_key(|stored| stored.revision);
        let backlog = futures::stream::iter(backlog.into_iter().map(|s| Ok(event_message(&s))));
        if !r.follow {
            return Ok(Response::new(Box::pin(backlog)));
        }
        let watch = store
            .watch(&keys.events(), range.revision + 1)
            .await
            .map_err(status)?;
        let live = watch.filter_map(|event| async move {
            match event {
                Ok(WatchEvent::Put(kv)) if kv.version == 1 => {
                    events::from_watch(&kv).ok().map(|s| Ok(event_message(&s)))
                }
                Ok(_) => None,
                Err(error) => Some(Err(GrpcStatus::unavailable(format!(
                    "the events watch broke: {error}; resume from your last revision + 1"
                )))),
            }
        });
        Ok(Response::new(Box::pin(backlog.chain(live))))
    }
}

/// The Engine service.
#[derive(Debug)]
pub struct EngineService {
    engines: Arc<Engines>,
}

fn down_message(work: EngineDown) -> pb::EngineDown {
    let msg = match work {
        EngineDown::Turn { seat, delivery } => pb::engine_down::Msg::Turn(pb::Turn {
            seat,
            delivery_id: delivery.delivery_id,
            conversation_key: delivery.conversation_key.unwrap_or_default(),
            partition: delivery.partition.unwrap_or_default(),
            from: delivery.from,
            text: delivery.text,
            posted_at: delivery.posted_at.to_rfc3339(),
        }),
        EngineDown::Resume(resume) => {
            let kind = match resume.kind {
                ResumeKind::Findings => pb::resume::Kind::Findings,
                ResumeKind::Answer => pb::resume::Kind::Answer,
                ResumeKind::Reseed => pb::resume::Kind::Reseed,
            };
            pb::engine_down::Msg::Resume(pb::Resume {
                seat: resume.seat,
                turn_id: resume.turn_id,
                launch_id: resume.launch_id,
                conversation: resume.conversation,
                reply: resume.reply,
                iteration: resume.iteration,
                work_item: resume.work_item.unwrap_or_default(),
                kind: kind as i32,
                question: resume.question.unwrap_or_default(),
                answer: String::new(),
                branch: resume.branch.unwrap_or_default(),
                succeeded: resume.succeeded,
            })
        }
    };
    pb::EngineDown { msg: Some(msg) }
}

#[tonic::async_trait]
impl pb::engine_server::Engine for EngineService {
    type AttachStream = Stream_<pb::EngineDown>;

    async fn attach(
        &self,
        request: Request<tonic::Streaming<pb::EngineUp>>,
    ) -> Result<Response<Self::AttachStream>, GrpcStatus> {
        let mut up = request.into_inner();
        let hello = match up.message().await? {
            Some(pb::EngineUp {
                msg: Some(pb::engine_up::Msg::Hello(hello)),
            }) => hello,
            _ => {
                return Err(GrpcStatus::failed_precondition(
                    "an engine's first message is Hello",
                ));
            }
        };
        let (down_tx, down_rx) = mpsc::channel::<EngineDown>(256);
        let engines = self.engines.clone();
        let id = engines.attach(hello.engine.clone(), down_tx);
        // anything waiting on the seats is offered to the new engine
        for fence in engines.coordinator().held_seats() {
            engines.coordinator().pump(&fence.seat).await;
        }
        tokio::spawn(async move {
            let coordinator = engines.coordinator().clone();
            loop {
                let message = match up.message().await {
                    Ok(Some(message)) => message,
                    Ok(None) => break,
                    Err(error) => {
                        warn!(%error, "engine_stream_broke");
                        break;
                    }
                };
                let result = match message.msg {
                    Some(pb::engine_up::Msg::Ack(ack)) => {
                        coordinator
                            .turn_done(&ack.seat, &ack.delivery_id, true)
                            .await
                    }
                    Some(pb::engine_up::Msg::Defer(defer)) => {
                        coordinator
                            .turn_done(&defer.seat, &defer.delivery_id, false)
                            .await
                    }
                    Some(pb::engine_up::Msg::Take(take)) => {
                        let taken = coordinator.take(&take.turn_id, &take.launch_id).await;
                        if taken.is_ok() {
                            engines.taken(&take.turn_id);
                        }
                        taken
                    }
                    Some(pb::engine_up::Msg::Settle(settle)) => {
                        engines.taken(&settle.turn_id);
                        let outcome = match settle.outcome {
                            Some(pb::settle::Outcome::Finished(f)) => {
                                coordinator::Settle::Finished { reply: f.reply }
                            }
                            Some(pb::settle::Outcome::Relaunched(r)) => {
                                coordinator::Settle::Relaunched {
                                    brief: r.brief,
                                    conversation: r.conversation,
                                    command: none_if_empty(r.command),
                                    env: Default::default(),
                                }
                            }
                            Some(pb::settle::Outcome::BrokeAfterExternalWrite(b)) => {
                                coordinator::Settle::BrokeAfterExternalWrite { error: b.error }
                            }
                            Some(pb::settle::Outcome::Retry(r)) => {
                                coordinator::Settle::Retry { error: r.error }
                            }
                            None => continue,
                        };
                        coordinator
                            .settle(&settle.turn_id, &settle.launch_id, outcome)
                            .await
                            .map(|_| ())
                    }
                    Some(pb::engine_up::Msg::Hello(_)) | None => Ok(()),
                };
                if let Err(error) = result {
                    warn!(%error, "engine_message_failed");
                }
            }
            engines.detach(id).await;
        });
        let down = ReceiverStream::new(down_rx).map(|work| Ok(down_message(work)));
        Ok(Response::new(Box::pin(down)))
    }
}

/// The Ops service.
#[derive(Debug)]
pub struct OpsService {
    peers: Arc<Peers>,
    coordinator: Arc<Coordinator>,
    errors: Arc<Observed>,
    root: String,
}

/// Converts a supervision tree into `Ops.Tree`'s shape; a worker's handled errors fill its
/// `last_error` when it has not failed.
fn actor_info(tree: &ActorTree, errors: &Observed, node: &str) -> Vec<pb::ActorInfo> {
    tree.children
        .iter()
        .map(|child| {
            let short = child.report.name.rsplit('/').next().unwrap_or_default();
            let last_error = child
                .report
                .last_error
                .clone()
                .or_else(|| errors.get(short))
                .unwrap_or_default();
            pb::ActorInfo {
                name: child
                    .report
                    .name
                    .trim_start_matches(&format!("{node}/"))
                    .to_owned(),
                state: serde_json::to_value(child.report.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                restarts: child.report.restart_count,
                mailbox_depth: child.report.mailbox_depth.max(errors.depth(short)),
                last_error,
                children: child
                    .subtree
                    .as_ref()
                    .map(|sub| actor_info(sub, errors, node))
                    .unwrap_or_default(),
                strategy: String::new(),
            }
        })
        .collect()
}

impl OpsService {
    /// This node's own supervision tree.
    async fn own_tree(&self) -> Result<pb::TreeReply, GrpcStatus> {
        let node = self.coordinator.node.clone();
        let Some(root) = ractor::ActorRef::<SupervisorMsg>::where_is(self.root.clone()) else {
            return Err(GrpcStatus::unavailable(
                "the node's supervision tree is not running",
            ));
        };
        let tree = supervisor::tree(&root).await;
        let children = actor_info(&tree, &self.errors, &node);
        Ok(pb::TreeReply {
            node: node.clone(),
            roots: vec![pb::ActorInfo {
                name: tree.name.clone(),
                state: if tree.inspect_error.is_some() {
                    "unreachable"
                } else {
                    "running"
                }
                .into(),
                last_error: tree.inspect_error.clone().unwrap_or_default(),
                children,
                strategy: "rest_for_one".into(),
                ..pb::ActorInfo::default()
            }],
        })
    }
}

#[tonic::async_trait]
impl pb::ops_server::Ops for OpsService {
    async fn tree(
        &self,
        request: Request<pb::TreeRequest>,
    ) -> Result<Response<pb::TreeReply>, GrpcStatus> {
        let mut reply = self.own_tree().await?;
        if !request.into_inner().fleet {
            return Ok(Response::new(reply));
        }
        // every other live node's tree, each asked for at most the fleet read budget; a node
        // that does not answer shows as one silent root, never as a missing one
        let nodes = seat::nodes(self.coordinator.store.as_ref(), &self.coordinator.keys)
            .await
            .map_err(status)?;
        let asks = nodes
            .into_iter()
            .filter(|n| n.node != self.coordinator.node)
            .map(|n| async move {
                let asked = match self.peers.ops(&n.node, &n.addr) {
                    Ok(mut ops) => tokio::time::timeout(
                        OWNER_TAIL_BUDGET,
                        ops.tree(pb::TreeRequest::default()),
                    )
                    .await
                    .map_err(|_| "did not answer inside 2 s".to_owned())
                    .and_then(|r| r.map_err(|e| e.message().to_owned())),
                    Err(error) => Err(error.message().to_owned()),
                };
                match asked {
                    Ok(tree) => tree.into_inner().roots,
                    Err(error) => vec![pb::ActorInfo {
                        name: format!("node/{}", n.node),
                        state: "silent".into(),
                        last_error: error,
                        ..pb::ActorInfo::default()
                    }],
                }
            });
        for roots in futures::future::join_all(asks).await {
            reply.roots.extend(roots);
        }
        Ok(Response::new(reply))
    }
    async fn nodes(
        &self,
        _request: Request<pb::NodesRequest>,
    ) -> Result<Response<pb::NodesReply>, GrpcStatus> {
        let store = self.coordinator.store.as_ref();
        let keys = &self.coordinator.keys;
        let nodes = seat::nodes(store, keys).await.map_err(status)?;
        let held = seat::holders(store, keys).await.map_err(status)?;
        Ok(Response::new(pb::NodesReply {
            nodes: nodes
                .into_iter()
                .map(|n| pb::NodeInfo {
                    seats: held
                        .values()
                        .filter(|h| h.holder.incarnation == n.incarnation)
                        .count() as u32,
                    node: n.node,
                    addr: n.addr,
                    incarnation: n.incarnation,
                    started_at: n.started_at.to_rfc3339(),
                    build: n.build,
                    host: n.host,
                    draining: n.draining,
                })
                .collect(),
        }))
    }

    async fn seats(
        &self,
        _request: Request<pb::SeatsRequest>,
    ) -> Result<Response<pb::SeatsReply>, GrpcStatus> {
        let coordinator = &self.coordinator;
        let held = seat::holders(coordinator.store.as_ref(), &coordinator.keys)
            .await
            .map_err(status)?;
        // the same prefix again, for the mail each seat holds
        let range = coordinator
            .store
            .range(&coordinator.keys.seats())
            .await
            .map_err(status)?;
        let runs = coordinator.runs.list().await.map_err(status)?;
        let mut seats = Vec::new();
        for (name, held) in held {
            let inbox = range
                .kvs
                .iter()
                .filter(|m| m.key.starts_with(&coordinator.keys.inbox(&name)))
                .count() as u32;
            let mine = runs.iter().filter(|r| r.record.seat == name);
            let (active, awaiting) = mine.fold((0u32, 0u32), |(a, w), run| {
                (
                    a + u32::from(run.record.status.holds_seat()),
                    w + u32::from(matches!(
                        run.record.status,
                        Status::AwaitingClarification | Status::Reseed
                    )),
                )
            });
            seats.push(pb::SeatInfo {
                seat: name,
                holder_node: held.holder.node,
                incarnation: held.holder.incarnation,
                epoch: held.epoch,
                active_runs: active,
                awaiting,
                inbox,
            });
        }
        Ok(Response::new(pb::SeatsReply { seats }))
    }

    async fn drain(
        &self,
        request: Request<pb::DrainRequest>,
    ) -> Result<Response<pb::DrainReply>, GrpcStatus> {
        let node = request.into_inner().node;
        let coordinator = &self.coordinator;
        if !node.is_empty() && node != coordinator.node {
            // asked of another node: pass it to that node
            let nodes = seat::nodes(coordinator.store.as_ref(), &coordinator.keys)
                .await
                .map_err(status)?;
            let Some(target) = nodes.into_iter().find(|n| n.node == node) else {
                return Err(GrpcStatus::not_found(format!(
                    "no live node {node}: `boxfleet nodes` lists the live ones"
                )));
            };
            let mut ops = self.peers.ops(&target.node, &target.addr)?;
            return ops
                .drain(pb::DrainRequest { node })
                .await
                .map_err(|e| forwarded(&target.node, e));
        }
        // placed no seats from now on; every seat held here is released gracefully, in
        // parallel, and the nodes they are placed on take them and recover their runs
        coordinator.set_draining(true).await.map_err(status)?;
        tracing::info!(node = %coordinator.node, "node_draining");
        let before = coordinator.held_seats().len() as u32;
        // the placement pass may release some first: count what is gone
        let still_held = coordinator.release_all(coordinator::RELEASE_SETTLE).await as u32;
        Ok(Response::new(pb::DrainReply {
            released: before.saturating_sub(still_held),
            still_held,
        }))
    }
}
