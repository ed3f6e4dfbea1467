//! The Engine service (DESIGN §8.2): an external engine attaches with one bidirectional
//! stream. Down it goes the seats' work (a turn, a resume); up come its acks and defers, its
//! takes and settles, each performed by the node's lifecycle.

use std::sync::Arc;

use boxfleet_actors::lifecycle::{self, EngineDown, ResumeKind};
use boxfleet_proto::v1 as pb;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status as GrpcStatus};
use tracing::warn;

use boxfleet_auth::Call;

use super::inputs;
use super::runs::Stream_;
use super::status::none_if_empty;
use crate::engines::Engines;
use crate::trust::{authorize, principal_of};

/// Whether engine `id` may send `message`: an ack or defer of a seat it serves, a take or a
/// settle of a run of a seat it serves.
async fn engine_may(engines: &Engines, id: u64, message: &pb::EngineUp) -> Result<(), String> {
    let seat = match &message.msg {
        Some(pb::engine_up::Msg::Ack(ack)) => ack.seat.clone(),
        Some(pb::engine_up::Msg::Defer(defer)) => defer.seat.clone(),
        Some(pb::engine_up::Msg::Take(pb::Take { turn_id, .. }))
        | Some(pb::engine_up::Msg::Settle(pb::Settle { turn_id, .. })) => {
            match engines.coordinator().runs.read(turn_id).await {
                Ok(Some(run)) => run.record.seat,
                Ok(None) => return Ok(()),
                Err(error) => return Err(format!("run {turn_id} could not be read: {error}")),
            }
        }
        Some(pb::engine_up::Msg::Hello(_)) | None => return Ok(()),
    };
    if engines.serves(id, &seat) {
        Ok(())
    } else {
        Err(format!("seat {seat} is not this engine's"))
    }
}

/// The Engine service.
#[derive(Debug)]
pub struct EngineService {
    pub engines: Arc<Engines>,
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
        for seat in &hello.seats {
            inputs::id("hello.seats", seat)?;
        }
        authorize(
            &caller,
            &Call::Attach {
                seats: &hello.seats,
            },
            &format!("engine={} seats={}", hello.engine, hello.seats.join(",")),
        )?;
        let (down_tx, down_rx) = mpsc::channel::<EngineDown>(256);
        let engines = self.engines.clone();
        let id = engines
            .attach(hello.engine.clone(), caller, hello.seats.clone(), down_tx)
            .map_err(GrpcStatus::failed_precondition)?;
        engines.send_waiting(id);
        // anything waiting on the seats it serves is offered to the new engine
        for fence in engines.coordinator().held_seats() {
            if engines.serves(id, &fence.seat) {
                engines.coordinator().pump(&fence.seat).await;
            }
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
                if let Err(refusal) = engine_may(&engines, id, &message).await {
                    warn!(engine = id, %refusal, "engine_message_refused");
                    continue;
                }
                let result = match message.msg {
                    Some(pb::engine_up::Msg::Ack(ack)) => {
                        engines.holds_turn(id, &ack.seat, &ack.delivery_id);
                        coordinator
                            .turn_done(&ack.seat, &ack.delivery_id, true)
                            .await
                    }
                    Some(pb::engine_up::Msg::Defer(defer)) => {
                        engines.holds_turn(id, &defer.seat, &defer.delivery_id);
                        coordinator
                            .turn_done(&defer.seat, &defer.delivery_id, false)
                            .await
                    }
                    Some(pb::engine_up::Msg::Take(take)) => {
                        let taken = coordinator.take(&take.turn_id, &take.launch_id).await;
                        if taken.is_ok() {
                            engines.taken(id, &take.turn_id);
                        }
                        taken
                    }
                    Some(pb::engine_up::Msg::Settle(settle)) => {
                        engines.settled(id, &settle.turn_id);
                        let outcome = match settle.outcome {
                            Some(pb::settle::Outcome::Finished(f)) => {
                                lifecycle::Settle::Finished { reply: f.reply }
                            }
                            Some(pb::settle::Outcome::Relaunched(r)) => {
                                lifecycle::Settle::Relaunched {
                                    brief: r.brief,
                                    conversation: r.conversation,
                                    command: none_if_empty(r.command),
                                    env: Default::default(),
                                }
                            }
                            Some(pb::settle::Outcome::BrokeAfterExternalWrite(b)) => {
                                lifecycle::Settle::BrokeAfterExternalWrite { error: b.error }
                            }
                            Some(pb::settle::Outcome::Retry(r)) => {
                                lifecycle::Settle::Retry { error: r.error }
                            }
                            Some(pb::settle::Outcome::ResumeBroken(r)) => {
                                lifecycle::Settle::ResumeBroken { error: r.error }
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
