//! The Engine service (DESIGN §8.2; `docs/engine.md`): an external engine attaches with one
//! bidirectional stream. Down it goes the seats' work (a turn, a resume, a notice) and the
//! node's word on what it sent up (a `Refused` for every Up message not acted on, a `Closing`
//! before the node ends the stream); up come its acks and defers, its takes and settles, each
//! performed by the node's lifecycle.

use std::sync::Arc;

use boxfleet_actors::lifecycle::{self, Error as LifecycleError};
use boxfleet_cluster::runs::RunError;
use boxfleet_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status as GrpcStatus};
use tracing::{info, warn};

use boxfleet_auth::Call;

use super::inputs;
use super::runs::Stream_;
use super::status::none_if_empty;
use crate::engines::wire::{self, Reason, Refusal};
use crate::engines::{Engines, STREAM_BUFFER};
use crate::trust::{authorize, principal_of};

/// The Engine service.
#[derive(Debug)]
pub struct EngineService {
    pub engines: Arc<Engines>,
}

/// What a lifecycle error means to the engine.
fn refusal_of(error: LifecycleError) -> Refusal {
    match error {
        LifecycleError::NotFound(message) => Refusal::new(Reason::UnknownTurn, message),
        LifecycleError::Run(RunError::Refused(refusal)) => {
            Refusal::new(Reason::RefusedByRun, refusal.to_string())
        }
        LifecycleError::BadRequest(message) => Refusal::new(Reason::BadInput, message),
        other => Refusal::new(
            Reason::Unavailable,
            format!("{other}; nothing was changed: send it again"),
        ),
    }
}

/// A "not sent" refusal made precise: the run is gone, or the seat is not this engine's.
async fn refine(engines: &Engines, id: u64, turn_id: &str, refusal: Refusal) -> Refusal {
    if refusal.reason != Reason::NotSent {
        return refusal;
    }
    match engines.coordinator().runs.read(turn_id).await {
        Ok(None) => Refusal::new(
            Reason::UnknownTurn,
            format!("no run {turn_id} is on record: it ended, or never existed"),
        ),
        Ok(Some(run)) if !engines.serves(id, &run.record.seat) => Refusal::new(
            Reason::NotYours,
            format!(
                "run {turn_id} is seat {}'s, which this engine does not serve",
                run.record.seat
            ),
        ),
        _ => refusal,
    }
}

/// An ack or defer of a turn this engine was not given (or already answered for).
fn turn_not_held(engines: &Engines, id: u64, seat: &str, delivery_id: &str) -> Refusal {
    if engines.serves(id, seat) {
        Refusal::new(
            Reason::NotSent,
            format!(
                "seat {seat}'s turn out at this engine is not {delivery_id}: it was never sent here, or was already acked or deferred"
            ),
        )
    } else {
        Refusal::new(
            Reason::NotYours,
            format!("seat {seat} is not served by this engine"),
        )
    }
}

/// The lifecycle's settle outcome for the engine's.
fn outcome_of(outcome: pb::settle::Outcome) -> lifecycle::Settle {
    match outcome {
        pb::settle::Outcome::Finished(f) => lifecycle::Settle::Finished {
            reply: f.reply,
            succeeded: None,
        },
        pb::settle::Outcome::Relaunched(r) => lifecycle::Settle::Relaunched {
            brief: r.brief,
            conversation: r.conversation,
            command: none_if_empty(r.command),
            env: r.env.into_iter().collect(),
        },
        pb::settle::Outcome::BrokeAfterExternalWrite(b) => {
            lifecycle::Settle::BrokeAfterExternalWrite { error: b.error }
        }
        pb::settle::Outcome::Retry(r) => lifecycle::Settle::Retry { error: r.error },
        pb::settle::Outcome::ResumeBroken(r) => lifecycle::Settle::ResumeBroken { error: r.error },
    }
}

/// A take or settle that failed: the resume stays in the engine's hands when the call may be
/// sent again (`unavailable`), and is forgotten when the refusal is final.
fn kept_unless_final(
    engines: &Engines,
    id: u64,
    turn_id: &str,
    result: Result<(), LifecycleError>,
) -> Result<(), Refusal> {
    let Err(error) = result else {
        return Ok(());
    };
    let refusal = refusal_of(error);
    if refusal.reason != Reason::Unavailable {
        engines.settled(id, turn_id);
    }
    Err(refusal)
}

/// Performs one Up message of engine `id`; a refusal says why it was not acted on.
async fn handle_up(engines: &Arc<Engines>, id: u64, message: pb::EngineUp) -> Result<(), Refusal> {
    let coordinator = engines.coordinator().clone();
    match message.msg {
        None => Err(Refusal::new(
            Reason::Empty,
            "an Up message with nothing in it",
        )),
        Some(pb::engine_up::Msg::Hello(_)) => Err(Refusal::new(
            Reason::HelloAgain,
            "Hello is the stream's first message only: attach again to serve other seats",
        )),
        Some(pb::engine_up::Msg::Ack(ack)) => {
            if !engines.holds_turn(id, &ack.seat, &ack.delivery_id) {
                return Err(turn_not_held(engines, id, &ack.seat, &ack.delivery_id));
            }
            coordinator
                .turn_done(&ack.seat, &ack.delivery_id, true)
                .await
                .map_err(refusal_of)
        }
        Some(pb::engine_up::Msg::Defer(defer)) => {
            if !engines.holds_turn(id, &defer.seat, &defer.delivery_id) {
                return Err(turn_not_held(engines, id, &defer.seat, &defer.delivery_id));
            }
            coordinator
                .defer_turn(&defer.seat, &defer.delivery_id)
                .await
                .map(|_| ())
                .map_err(refusal_of)
        }
        Some(pb::engine_up::Msg::Take(take)) => {
            if let Err(refusal) = engines.may_take(id, &take.turn_id, &take.launch_id) {
                return Err(refine(engines, id, &take.turn_id, refusal).await);
            }
            let taken = coordinator.take(&take.turn_id, &take.launch_id).await;
            if taken.is_ok() {
                engines.taken(id, &take.turn_id);
            }
            kept_unless_final(engines, id, &take.turn_id, taken)
        }
        Some(pb::engine_up::Msg::ToolResult(result)) => engines.tool_result(id, result),
        Some(pb::engine_up::Msg::Settle(settle)) => {
            inputs::settle(&settle)
                .map_err(|status| Refusal::new(Reason::BadInput, status.message()))?;
            let Some(outcome) = settle.outcome else {
                return Err(Refusal::new(
                    Reason::NoOutcome,
                    "a Settle needs an outcome: finished, relaunched, broke_after_external_write, retry or resume_broken",
                ));
            };
            let needs_take = matches!(
                outcome,
                pb::settle::Outcome::Finished(_) | pb::settle::Outcome::BrokeAfterExternalWrite(_)
            );
            if let Err(refusal) =
                engines.may_settle(id, &settle.turn_id, &settle.launch_id, needs_take)
            {
                return Err(refine(engines, id, &settle.turn_id, refusal).await);
            }
            let settled = coordinator
                .settle(&settle.turn_id, &settle.launch_id, outcome_of(outcome))
                .await;
            if settled.is_ok() {
                engines.settled(id, &settle.turn_id);
            }
            kept_unless_final(engines, id, &settle.turn_id, settled.map(|_| ()))
        }
    }
}

#[tonic::async_trait]
impl pb::engine_server::Engine for EngineService {
    type AttachStream = Stream_<pb::EngineDown>;

    async fn attach(
        &self,
        request: Request<tonic::Streaming<pb::EngineUp>>,
    ) -> Result<Response<Self::AttachStream>, GrpcStatus> {
        let caller = principal_of(&request)?;
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
        inputs::id("hello.engine", &hello.engine)?;
        for seat in &hello.seats {
            inputs::id("hello.seats", seat)?;
        }
        inputs::tools(&hello.tools)?;
        authorize(
            &caller,
            &Call::Attach {
                seats: &hello.seats,
            },
            &format!("engine={} seats={}", hello.engine, hello.seats.join(",")),
        )?;
        let (down_tx, down_rx) = mpsc::channel::<pb::EngineDown>(STREAM_BUFFER);
        let engines = self.engines.clone();
        let id = engines
            .attach(
                hello.engine.clone(),
                caller,
                (hello.seats.clone(), hello.tools.clone()),
                down_tx,
            )
            .map_err(GrpcStatus::failed_precondition)?;
        engines.send_waiting().await;
        // anything waiting on the seats it serves is offered to the new engine
        for fence in engines.coordinator().held_seats() {
            if engines.serves(id, &fence.seat) {
                engines.coordinator().pump(&fence.seat).await;
            }
        }
        tokio::spawn(async move {
            loop {
                let message = match up.message().await {
                    Ok(Some(message)) => message,
                    Ok(None) => break,
                    Err(error) => {
                        warn!(engine = id, %error, "engine_stream_broke");
                        break;
                    }
                };
                let kept = message.clone();
                if let Err(refusal) = handle_up(&engines, id, message).await {
                    info!(engine = id, reason = refusal.reason.word(), message = %refusal.message, "engine_message_refused");
                    engines.tell(id, wire::refused(&kept, refusal));
                }
            }
            engines.detach(id).await;
        });
        let down = tokio_stream::StreamExt::map(ReceiverStream::new(down_rx), Ok);
        Ok(Response::new(Box::pin(down)))
    }
}
