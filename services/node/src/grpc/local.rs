//! The calls a node answers about the seats it holds — launch, deliver, tail, answer — as
//! this node answers them itself. The Runs service calls these when the seat is held here; the
//! Fleet service when another node forwarded the call, so a call crosses at most one hop.

use std::sync::Arc;

use boxfleet_actors::lifecycle::{
    self, AnswerOutcome, Answerer, Coordinator, LaunchOutcome, RefusalClass,
};
use boxfleet_actors::names::NodeRefs;
use boxfleet_actors::tail::{FollowError, Holding, TailMsg, TailStream, TailView};
use boxfleet_auth::{Call, Principal, Role};
use boxfleet_cluster::inbox::{Delivery, Enqueued};
use boxfleet_cluster::record::Status;
use boxfleet_proto::v1 as pb;
use tonic::{Response, Status as GrpcStatus};

use super::inputs;
use super::status::{none_if_empty, status};
use crate::trust::authorize;

/// The calls about a seat, answered here.
#[derive(Debug, Clone)]
pub struct Local {
    pub coordinator: Arc<Coordinator>,
    /// the engine a seat's messages go to unless the company says otherwise
    pub default_engine: boxfleet_config::engine::EngineChoice,
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
    /// A launch for `caller`. A person's launch records them as its requester (so a question
    /// to `requester` is put to them); an engine or an admin names the requester of the turn
    /// it launches for.
    pub(crate) async fn launch_here(
        &self,
        caller: &Principal,
        r: pb::LaunchRequest,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        inputs::launch(&r)?;
        authorize(
            caller,
            &Call::Launch { seat: &r.seat },
            &format!("seat={}", r.seat),
        )?;
        let requester = match caller.role {
            Role::Engine | Role::Admin => {
                none_if_empty(r.requester).or_else(|| Some(caller.subject.clone()))
            }
            _ if r.requester.is_empty() || r.requester == caller.subject => {
                Some(caller.subject.clone())
            }
            _ => {
                return Err(GrpcStatus::permission_denied(format!(
                    "permission denied: {} launches as itself; only an engine or an admin names another requester ({})",
                    caller.subject, r.requester
                )));
            }
        };
        let launch = lifecycle::LaunchRequest {
            seat: r.seat,
            turn_id: none_if_empty(r.turn_id),
            iteration: r.iteration,
            brief: r.brief,
            task: r.task,
            conversation: r.conversation,
            requester,
            work_item: none_if_empty(r.work_item),
            conversation_key: none_if_empty(r.conversation_key),
            partition: none_if_empty(r.partition),
            runner: r.runner,
            command: none_if_empty(r.command),
            model: none_if_empty(r.model),
            pause_ttl_seconds: r.pause_ttl_seconds,
            timeout_seconds: (r.timeout_seconds > 0).then_some(r.timeout_seconds),
            max_turns: (r.max_turns > 0).then_some(r.max_turns),
            owes_answer: r.owes_answer,
            trace: none_if_empty(r.trace),
            env: Default::default(),
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
                    RefusalClass::Busy => pb::refusal::Class::Busy,
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

    /// A message into a seat's inbox from `caller`. A person's message is from them (it may
    /// answer a question of theirs on its conversation); an engine or an admin relays a
    /// message from whoever wrote it.
    pub(crate) async fn deliver_here(
        &self,
        caller: &Principal,
        r: pb::DeliverRequest,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        inputs::deliver(&r)?;
        authorize(
            caller,
            &Call::Deliver { seat: &r.seat },
            &format!("seat={}", r.seat),
        )?;
        let from = match caller.role {
            Role::Engine | Role::Admin if !r.from.is_empty() => r.from.clone(),
            Role::Engine | Role::Admin => "operator".into(),
            _ if r.from.is_empty() || r.from == "operator" || r.from == caller.subject => {
                caller.subject.clone()
            }
            _ => {
                return Err(GrpcStatus::permission_denied(format!(
                    "permission denied: {} delivers as itself; only an engine or an admin relays a message from {}",
                    caller.subject, r.from
                )));
            }
        };
        let delivery_id = if r.delivery_id.is_empty() {
            format!("msg-{}", uuid::Uuid::new_v4().simple())
        } else {
            r.delivery_id
        };
        let delivery = Delivery {
            delivery_id: delivery_id.clone(),
            conversation_key: none_if_empty(r.conversation_key),
            partition: none_if_empty(r.partition),
            from,
            text: r.text,
            posted_at: parse_time(&r.posted_at)?,
            answer_given: None,
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
        let engine = self
            .coordinator
            .company()
            .engine_for(&r.seat, self.default_engine);
        Ok(Response::new(pb::DeliverReply {
            outcome: outcome.into(),
            seq,
            delivery_id,
            engine: engine.as_str().into(),
        }))
    }

    pub(crate) async fn tail_here(
        &self,
        caller: &Principal,
        r: pb::TailRequest,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        use pb::tail_reply::Outcome;
        inputs::tail(&r)?;
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
            authorize(caller, &Call::Tail { seat: None }, "")?;
            // no record: a run that settled left its events; a turn with none was never here
            let stored = boxfleet_cluster::events::read_turn(
                self.coordinator.store.as_ref(),
                &self.coordinator.keys,
                &r.turn_id,
            )
            .await
            .map_err(status)?;
            if !stored.iter().any(|s| s.event.turn_id == r.turn_id) {
                // through the one error table (`lifecycle::Error::kind`)
                return Err(status(lifecycle::Error::NotFound(format!(
                    "turn_id: no run {} on this fleet: no record and no event",
                    r.turn_id
                ))));
            }
            return Ok(Response::new(reply(
                Outcome::NotRunning,
                "collected".into(),
            )));
        };
        let record = run.record;
        authorize(
            caller,
            &Call::Tail {
                seat: Some(&record.seat),
            },
            "",
        )?;
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
        let holding = Holding {
            epoch: r.epoch,
            after: r.after,
            digest: r.digest.clone(),
        };
        let asked = owner
            .call(
                |reply| TailMsg::Read {
                    record: Box::new(record),
                    holding,
                    // an answer waits for the box at most three quarters of the asker's budget
                    wait: budget * 3 / 4,
                    reply,
                },
                Some(budget),
            )
            .await;
        match asked {
            Ok(ractor::rpc::CallResult::Success(Ok(view))) => {
                Ok(Response::new(tail_reply(view, launch_id)))
            }
            Ok(ractor::rpc::CallResult::Success(Err(FollowError::Paused(why)))) => {
                Ok(Response::new(pb::TailReply {
                    outcome: Outcome::BoxPaused as i32,
                    launch_id,
                    detail: format!("the box is paused and is left so ({why})"),
                    ..pb::TailReply::default()
                }))
            }
            Ok(ractor::rpc::CallResult::Success(Err(FollowError::Failed(error)))) => {
                Err(GrpcStatus::unavailable(format!(
                    "the box of run {} could not be read: {error}",
                    r.turn_id
                )))
            }
            Ok(_) | Err(_) => Err(GrpcStatus::deadline_exceeded(format!(
                "the node's tail owner did not answer run {} inside the budget; ask again",
                r.turn_id
            ))),
        }
    }

    /// An answer to a run's question by name, from `caller`: as the caller, or — an admin
    /// only — on somebody's behalf (both recorded). Who may answer is the spec's answer
    /// authority (the run's requester, whoever leads its seat, an admin; never a seat).
    pub(crate) async fn answer_here(
        &self,
        caller: &Principal,
        r: pb::AnswerRequest,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        inputs::answer(&r)?;
        if r.text.trim().is_empty() {
            return Err(GrpcStatus::invalid_argument(
                "text: an answer needs its text (AnswerRequest.text, the CLI's --text)",
            ));
        }
        let seat = self
            .coordinator
            .runs
            .read(&r.turn_id)
            .await
            .map_err(status)?
            .map(|run| run.record.seat);
        authorize(
            caller,
            &Call::Answer {
                seat: seat.as_deref(),
            },
            &format!("turn_id={} launch_id={}", r.turn_id, r.launch_id),
        )?;
        let admin = caller.role == Role::Admin;
        let answerer = if r.as_whom.is_empty() || r.as_whom == caller.subject {
            Answerer {
                from: caller.subject.clone(),
                given_by: None,
                admin,
                operator_id: operator_id(caller),
            }
        } else if admin {
            Answerer {
                from: r.as_whom.clone(),
                given_by: Some(caller.subject.clone()),
                admin,
                operator_id: operator_id(caller),
            }
        } else {
            return Err(GrpcStatus::permission_denied(format!(
                "permission denied: {} answers as itself; only an admin answers on {}'s behalf",
                caller.subject, r.as_whom
            )));
        };
        let outcome = self
            .coordinator
            .answer(&r.turn_id, &r.launch_id, &r.text, &answerer)
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
            AnswerOutcome::Pending => "the answer is on the seat's inbox, behind the job the \
                                       seat runs now: it is recorded, and the run resumed with \
                                       it, when that job settles or parks"
                .into(),
        };
        use pb::answer_reply::Kind;
        let kind = match &outcome {
            AnswerOutcome::Recorded => Kind::Recorded,
            AnswerOutcome::Pending => Kind::Pending,
            AnswerOutcome::NotAwaiting(_) => Kind::NotAwaiting,
            AnswerOutcome::Gone => Kind::Gone,
            AnswerOutcome::WrongLaunch(_) => Kind::WrongLaunch,
            AnswerOutcome::AlreadyAnswered => Kind::AlreadyAnswered,
        };
        Ok(Response::new(pb::AnswerReply {
            outcome: outcome.word().into(),
            detail,
            kind: kind as i32,
        }))
    }
}

/// The credential an answer came through, as `sandbox_run_answered` names it.
fn operator_id(caller: &boxfleet_auth::Principal) -> String {
    format!(
        "{}:{}@{}",
        caller.role.as_str(),
        caller.subject,
        caller.key_id
    )
}

/// A reading's view as the API sends it.
fn tail_reply(view: TailView, launch_id: String) -> pb::TailReply {
    use pb::tail_reply::Outcome;
    let mut detail = Vec::new();
    if view.stream == TailStream::Errors {
        detail.push("the job's error stream: its output has said nothing yet".to_owned());
    }
    if let Some(ms) = view.stale_ms {
        detail.push(format!("from a reading {ms} ms old: the box is slow"));
    }
    pb::TailReply {
        outcome: if view.reset {
            Outcome::Reset
        } else {
            Outcome::Tail
        } as i32,
        text: view.text,
        start: view.start,
        end: view.end,
        epoch: view.epoch,
        digest: view.digest,
        launch_id,
        detail: detail.join("; "),
        held: view.held,
        front: view.front,
    }
}
