//! The Runs service (DESIGN §8.1): what clients, operators and engines ask of runs. A call
//! about a seat (launch, deliver, answer, tail) is answered by the seat's holder: here, or
//! forwarded to it over the Fleet service (one hop). Reads (get, board, events) are answered
//! by any node from the store.

use std::pin::Pin;
use std::sync::Arc;

use boxfleet_actors::board::BoardMsg;
use boxfleet_actors::names::NodeRefs;
use boxfleet_cluster::events;
use boxfleet_cluster::store::WatchEvent;
use boxfleet_proto::v1 as pb;
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status as GrpcStatus};

use boxfleet_auth::{Call, Principal};

use super::inputs;
use super::local::Local;
use super::status::status;
use crate::routing::{OWNER_TAIL_BUDGET, Peers, Route, forwarded};
use crate::trust::{bearer, denied, principal_of};

pub(crate) type Stream_<T> = Pin<Box<dyn Stream<Item = Result<T, GrpcStatus>> + Send>>;

/// The Runs service.
#[derive(Debug)]
pub struct RunsService {
    pub local: Local,
    pub peers: Arc<Peers>,
}

impl RunsService {
    async fn route(&self, seat: &str) -> Result<Route, GrpcStatus> {
        crate::routing::route(&self.local.coordinator, seat).await
    }

    /// Where calls about a run go: its seat's route; here when there is no record (this node
    /// answers that the run is gone).
    async fn route_turn(&self, turn_id: &str) -> Result<Route, GrpcStatus> {
        match self
            .local
            .coordinator
            .runs
            .read(turn_id)
            .await
            .map_err(status)?
        {
            Some(run) => self.route(&run.record.seat).await,
            None => Ok(Route::Here),
        }
    }
}

/// The caller a request's credential names (the interceptor verified it), and the credential
/// itself, which a call forwarded to the seat's holder carries for the caller.
fn caller_of<T>(request: &Request<T>) -> Result<(Principal, String), GrpcStatus> {
    let principal = principal_of(request)?;
    let token = bearer(request.metadata(), "authorization")
        .unwrap_or_default()
        .to_owned();
    Ok((principal, token))
}

/// The caller's role may make `call` at all (its seat scope is checked where the seat is
/// known): refused here, before a hop to another node.
fn may(caller: &Principal, call: &Call<'_>) -> Result<(), GrpcStatus> {
    boxfleet_auth::authorize(caller, call).map_err(denied)
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

#[tonic::async_trait]
impl pb::runs_server::Runs for RunsService {
    async fn launch(
        &self,
        request: Request<pb::LaunchRequest>,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        let (caller, token) = caller_of(&request)?;
        let r = request.into_inner();
        inputs::launch(&r)?;
        may(&caller, &Call::Launch { seat: &r.seat })?;
        match self.route(&r.seat).await? {
            Route::Here => self.local.launch_here(&caller, r).await,
            Route::There { node, addr } => {
                let mut peer = self.peers.client(&node, &addr, Some(&token))?;
                peer.seat_launch(r).await.map_err(|e| forwarded(&node, e))
            }
        }
    }

    async fn deliver(
        &self,
        request: Request<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        let (caller, token) = caller_of(&request)?;
        let r = request.into_inner();
        inputs::deliver(&r)?;
        may(&caller, &Call::Deliver { seat: &r.seat })?;
        match self.route(&r.seat).await? {
            Route::Here => self.local.deliver_here(&caller, r).await,
            Route::There { node, addr } => {
                let mut peer = self.peers.client(&node, &addr, Some(&token))?;
                peer.seat_deliver(r).await.map_err(|e| forwarded(&node, e))
            }
        }
    }

    async fn answer(
        &self,
        request: Request<pb::AnswerRequest>,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        let (caller, token) = caller_of(&request)?;
        let r = request.into_inner();
        inputs::answer(&r)?;
        may(&caller, &Call::Answer { seat: None })?;
        match self.route_turn(&r.turn_id).await? {
            Route::Here => self.local.answer_here(&caller, r).await,
            Route::There { node, addr } => {
                let mut peer = self.peers.client(&node, &addr, Some(&token))?;
                peer.seat_answer(r).await.map_err(|e| forwarded(&node, e))
            }
        }
    }

    async fn tail(
        &self,
        request: Request<pb::TailRequest>,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        let (caller, token) = caller_of(&request)?;
        let r = request.into_inner();
        inputs::tail(&r)?;
        may(&caller, &Call::Tail { seat: None })?;
        let (node, addr) = match self.route_turn(&r.turn_id).await? {
            Route::Here => return self.local.tail_here(&caller, r).await,
            Route::There { node, addr } => (node, addr),
        };
        // the owner answers inside the asker's budget, or the asker says it was silent
        let mut peer = self.peers.client(&node, &addr, Some(&token))?;
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
        let caller = principal_of(&request)?;
        let turn_id = request.into_inner().turn_id;
        inputs::turn("turn_id", &turn_id)?;
        may(&caller, &Call::Get { seat: None })?;
        let record = self
            .local
            .coordinator
            .runs
            .read(&turn_id)
            .await
            .map_err(status)?;
        let stored = events::read_turn(
            self.local.coordinator.store.as_ref(),
            &self.local.coordinator.keys,
            &turn_id,
        )
        .await
        .map_err(status)?;
        let mut phase_records_json = Vec::new();
        let mut events_json = Vec::new();
        // a seat-scoped credential reads its seats' runs alone
        let seat = record
            .as_ref()
            .map(|run| run.record.seat.clone())
            .or_else(|| {
                stored
                    .iter()
                    .find(|s| s.event.turn_id == turn_id)
                    .map(|s| s.event.seat.clone())
            });
        may(
            &caller,
            &Call::Get {
                seat: seat.as_deref(),
            },
        )?;
        for event in stored.iter().filter(|s| s.event.turn_id == turn_id) {
            if event.event.kind == events::kind::PHASE_COMPLETED {
                phase_records_json.push(event_json(event));
            } else {
                events_json.push(event_json(event));
            }
        }
        let found = record.is_some() || !phase_records_json.is_empty() || !events_json.is_empty();
        if !found {
            // through the one error table (`lifecycle::Error::kind`)
            return Err(status(boxfleet_actors::lifecycle::Error::NotFound(
                format!(
                    "turn_id: no run {turn_id} on this fleet: no record, no phase record and no event \
                 (Board lists the runs in flight; the events outbox keeps a finished run's for a while)"
                ),
            )));
        }
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
        let caller = principal_of(&request)?;
        may(&caller, &Call::Board)?;
        let audience = request.into_inner().audience;
        let Some(board) = ractor::ActorRef::<BoardMsg>::where_is(
            NodeRefs::new(self.local.coordinator.node.clone()).board(),
        ) else {
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
            // a seat-scoped credential sees its seats' runs alone
            .filter(|record| caller.covers(&record.seat))
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
        let caller = principal_of(&request)?;
        may(&caller, &Call::Events)?;
        let r = request.into_inner();
        let store = self.local.coordinator.store.clone();
        let keys = self.local.coordinator.keys.clone();
        // the backlog is listed by key and read a page at a time as the client takes it
        let backlog = events::Backlog::list(store.as_ref(), &keys, r.from_revision)
            .await
            .map_err(status)?;
        let watch_from = backlog.revision + 1;
        // a seat-scoped credential reads its seats' events alone
        let reader = caller.clone();
        let backlog = backlog.stream(store.clone()).filter_map(move |read| {
            let reader = reader.clone();
            async move {
                match read {
                    Ok(stored) if reader.covers(&stored.event.seat) => {
                        Some(Ok(event_message(&stored)))
                    }
                    Ok(_) | Err(boxfleet_cluster::Error::Decode { .. }) => None,
                    Err(error) => Some(Err(status(error))),
                }
            }
        });
        if !r.follow {
            return Ok(Response::new(Box::pin(backlog)));
        }
        let watch = store
            .watch(&keys.events(), watch_from)
            .await
            .map_err(status)?;
        let live = watch.filter_map(move |event| {
            let caller = caller.clone();
            async move {
                match event {
                    Ok(WatchEvent::Put(kv)) if kv.version == 1 => events::from_watch(&kv)
                        .ok()
                        .filter(|s| caller.covers(&s.event.seat))
                        .map(|s| Ok(event_message(&s))),
                    Ok(_) => None,
                    Err(error) => Some(Err(GrpcStatus::unavailable(format!(
                        "the events watch broke: {error}; resume from your last revision + 1"
                    )))),
                }
            }
        });
        Ok(Response::new(Box::pin(backlog.chain(live))))
    }
}
