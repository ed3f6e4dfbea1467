//! The calls a node answers about the seats it holds — launch, deliver, tail, answer — as
//! this node answers them itself. The Runs service calls these when the seat is held here; the
//! Fleet service when another node forwarded the call, so a call crosses at most one hop.

use std::sync::Arc;

use boxfleet_actors::lifecycle::{self, AnswerOutcome, Coordinator, LaunchOutcome, RefusalClass};
use boxfleet_actors::names::NodeRefs;
use boxfleet_actors::tail::TailMsg;
use boxfleet_cluster::inbox::{Delivery, Enqueued};
use boxfleet_cluster::record::Status;
use boxfleet_proto::v1 as pb;
use tonic::{Response, Status as GrpcStatus};

use super::status::{none_if_empty, status};

/// The calls about a seat, answered here.
#[derive(Debug, Clone)]
pub struct Local {
    pub coordinator: Arc<Coordinator>,
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

impl Local {
    pub(crate) async fn launch_here(
        &self,
        r: pb::LaunchRequest,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        let launch = lifecycle::LaunchRequest {
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
        self.coordinator.access.reachable(&record).map_err(status)?;
        let Some(owner) = ractor::ActorRef::<TailMsg>::where_is(
            NodeRefs::new(self.coordinator.node.clone()).tail(),
        ) else {
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
