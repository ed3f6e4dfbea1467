//! The built-in engine (DESIGN §8.3): boxfleet useful with no engine at all. A delivery
//! becomes a `command` launch whose command is the message; a resume with findings settles the
//! turn and publishes the findings as the turn's reply event; a resume with an answer
//! relaunches into the same box with the answer in `BOXFLEET_ANSWER`; a re-seed relaunches in a
//! new box.

use std::collections::BTreeMap;

use boxfleet_actors::crash;
use boxfleet_actors::lifecycle::{
    self, EngineDown, LaunchOutcome, LaunchRequest, RefusalClass, Resume, ResumeKind, Settle,
};
use boxfleet_cluster::events::{self, Event};
use boxfleet_cluster::store::{Op, Txn};
use tracing::{info, warn};

use super::Engines;

impl Engines {
    /// The built-in engine's handling of one piece of work.
    pub(super) async fn builtin(&self, work: EngineDown) {
        match work {
            EngineDown::Turn { seat, delivery } => {
                let request = LaunchRequest {
                    seat: seat.clone(),
                    brief: delivery.text.clone(),
                    task: delivery.text.clone(),
                    runner: "command".into(),
                    command: Some(delivery.text.clone()),
                    requester: Some(delivery.from.clone()),
                    conversation_key: delivery.conversation_key.clone(),
                    partition: delivery.partition.clone(),
                    owes_answer: true,
                    ..LaunchRequest::default()
                };
                let worked = match self.coordinator.launch(request).await {
                    LaunchOutcome::Launched { turn_id, .. } => {
                        info!(seat, turn_id, "builtin_engine_launched");
                        true
                    }
                    LaunchOutcome::Refused {
                        class: RefusalClass::Unavailable,
                        reason,
                    } => {
                        warn!(seat, reason, "builtin_engine_deferred");
                        false
                    }
                    LaunchOutcome::Refused { reason, .. } => {
                        warn!(seat, reason, "builtin_engine_refused");
                        true
                    }
                };
                if let Err(error) = self
                    .coordinator
                    .turn_done(&seat, &delivery.delivery_id, worked)
                    .await
                {
                    warn!(seat, %error, "builtin_engine_ack_failed");
                }
            }
            EngineDown::Resume(resume) => {
                if let Err(error) = self.resume(*resume).await {
                    warn!(%error, "builtin_engine_resume_failed");
                }
            }
        }
    }

    /// [`Engines::builtin`], with a resume that panics before its turn began settled as
    /// broken (`resume_broken`) rather than left claimed for a recovery pass to reap.
    pub(super) async fn builtin_guarded(self: std::sync::Arc<Self>, work: EngineDown) {
        let resumed = match &work {
            EngineDown::Resume(resume) => Some((resume.turn_id.clone(), resume.launch_id.clone())),
            EngineDown::Turn { .. } => None,
        };
        let engines = std::sync::Arc::clone(&self);
        let ran = tokio::spawn(async move { engines.builtin(work).await }).await;
        let Err(failure) = ran else {
            return;
        };
        let Some((turn_id, launch_id)) = resumed.filter(|_| failure.is_panic()) else {
            warn!(error = %failure, "builtin_engine_work_failed");
            return;
        };
        let panic = failure.into_panic();
        let text = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with no message".to_owned());
        warn!(turn_id, launch_id, panic = %text, "sandbox_resume_panicked");
        let broken = Settle::ResumeBroken {
            error: format!("the built-in engine panicked resuming the turn: {text}"),
        };
        if let Err(error) = self.coordinator.settle(&turn_id, &launch_id, broken).await {
            warn!(turn_id, %error, "builtin_engine_settle_failed");
        }
    }

    async fn resume(&self, resume: Resume) -> Result<(), lifecycle::Error> {
        let Resume {
            turn_id,
            launch_id,
            kind,
            conversation,
            reply,
            question,
            command,
            succeeded,
            seat,
            branch,
            ..
        } = resume;
        // a test failpoint: the first resume of this process is slow to be taken, as an
        // engine's can be, so a scenario can hand the seat over while the resume is in flight
        if boxfleet_actors::workers::failpoint_once("engine-resume-slow") {
            tokio::time::sleep(std::time::Duration::from_secs(4)).await;
        }
        // the built-in turn takes nothing separately (I12): the findings' turn writes only its
        // reply, under an id derived from the run, so a node that dies before the settle leaves
        // a claim the seat's next holder revives, collects again and resumes with the same
        // reply; an answer's turn is its relaunch, which takes the answer in the same write
        // test failpoints: a resume that breaks before its turn (a panic re-entering it), and
        // an engine that refuses every findings (or answer) resume it is offered
        if boxfleet_actors::workers::failpoint_once("engine-resume-panics") {
            panic!("failpoint engine-resume-panics: the conversation cannot be re-entered");
        }
        let refused = match kind {
            ResumeKind::Findings => "engine-findings-refused",
            ResumeKind::Answer | ResumeKind::Reseed => "engine-answers-refused",
        };
        if boxfleet_actors::workers::failpoint_armed(refused) {
            let refused = Settle::Retry {
                error: format!("failpoint {refused}"),
            };
            self.coordinator
                .settle(&turn_id, &launch_id, refused)
                .await?;
            return Ok(());
        }
        match kind {
            ResumeKind::Findings => {
                crash::point(crash::SETTLE_AFTER_TAKE);
                self.publish_reply(&turn_id, &launch_id, &seat, &reply, succeeded)
                    .await;
                crash::point(crash::SETTLE_AFTER_REPLY);
                self.coordinator
                    .settle(&turn_id, &launch_id, Settle::Finished { reply })
                    .await?;
            }
            ResumeKind::Answer | ResumeKind::Reseed => {
                let question = question.unwrap_or_default();
                let mut env = BTreeMap::new();
                env.insert("BOXFLEET_ANSWER".to_owned(), reply.clone());
                env.insert("BOXFLEET_QUESTION".to_owned(), question.clone());
                if let Some(branch) = &branch {
                    // a re-seeded box starts empty: the job checks its work out from here
                    env.insert("BOXFLEET_BRANCH".to_owned(), branch.clone());
                }
                let relaunch = Settle::Relaunched {
                    brief: format!("{question}\nThe answer: {reply}"),
                    conversation,
                    command,
                    env,
                };
                self.coordinator
                    .settle(&turn_id, &launch_id, relaunch)
                    .await?;
            }
        }
        Ok(())
    }

    /// The built-in engine's turn reply: the findings, as an event of the turn.
    async fn publish_reply(
        &self,
        turn_id: &str,
        launch_id: &str,
        seat: &str,
        reply: &str,
        succeeded: bool,
    ) {
        let coordinator = &self.coordinator;
        let now = chrono::Utc::now();
        let event = Event::new(
            events::kind::TURN_REPLIED,
            &[turn_id, launch_id],
            turn_id,
            launch_id,
            seat,
            now,
            serde_json::json!({ "reply": reply, "succeeded": succeeded }),
        );
        let lease = match self.retention.lease(coordinator.store.as_ref(), now).await {
            Ok(lease) => lease,
            Err(error) => {
                warn!(turn_id, %error, "turn_reply_not_published");
                return;
            }
        };
        let (compare, put) = events::create(&coordinator.keys, &event, lease);
        let txn = Txn::new()
            .when([compare])
            .and_then([put])
            .or_else([Op::get(coordinator.keys.event(&event.id))]);
        if let Err(error) = coordinator.store.txn(txn).await {
            warn!(turn_id, %error, "turn_reply_not_published");
        }
    }
}
