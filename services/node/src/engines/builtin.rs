//! The built-in engine (DESIGN §8.3): boxfleet useful with no engine at all. A delivery
//! becomes a `command` launch whose command is the message; a resume with findings settles the
//! turn and publishes the findings as the turn's reply event; a resume with an answer
//! relaunches into the same box with the answer in `BOXFLEET_ANSWER`; a re-seed relaunches in a
//! new box.

use std::collections::BTreeMap;

use boxfleet_actors::crash;
use boxfleet_actors::lifecycle::text::turn_id_for_delivery;
use boxfleet_actors::lifecycle::{
    self, EngineDown, LaunchOutcome, LaunchRequest, RefusalClass, Resume, ResumeKind, Settle,
};
use tracing::{info, warn};

use super::Engines;

impl Engines {
    /// The built-in engine's handling of one piece of work.
    pub async fn builtin(&self, work: EngineDown) {
        match work {
            EngineDown::Turn { seat, delivery, .. } => {
                // the turn id is the delivery's: worked again after a crash, it is the same
                // launch, never a second job
                let turn_id = turn_id_for_delivery(&seat, &delivery.delivery_id);
                let request = LaunchRequest {
                    seat: seat.clone(),
                    turn_id: Some(turn_id),
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
                        class: RefusalClass::Unavailable | RefusalClass::Busy,
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
            // notices: the built-in engine keeps no state a notice would change
            EngineDown::Ended(ended) => {
                info!(seat = %ended.seat, turn_id = %ended.turn_id, reason = %ended.reason, "builtin_engine_run_ended");
            }
            EngineDown::Parked(parked) => {
                info!(seat = %parked.seat, turn_id = %parked.turn_id, "builtin_engine_run_parked");
            }
            EngineDown::Resume(resume) => {
                let (turn_id, launch_id) = (resume.turn_id.clone(), resume.launch_id.clone());
                if let Err(error) = self.resume(*resume).await {
                    // nothing of this resume ran before its settle: its claim goes back for
                    // the answer to be driven again, or the completion collected again
                    warn!(turn_id, %error, "builtin_engine_resume_failed");
                    self.coordinator
                        .resume_unsettled(&turn_id, &launch_id, &error)
                        .await;
                }
            }
        }
    }

    /// [`Engines::builtin`], with a resume that panics before its turn began settled as
    /// broken (`resume_broken`) rather than left claimed for a recovery pass to reap.
    pub(super) async fn builtin_guarded(self: std::sync::Arc<Self>, work: EngineDown) {
        let resumed = match &work {
            EngineDown::Resume(resume) => Some((resume.turn_id.clone(), resume.launch_id.clone())),
            _ => None,
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
                // the settle publishes the findings as the turn's reply, then ends the run
                let finished = Settle::Finished {
                    reply,
                    succeeded: Some(succeeded),
                };
                self.coordinator
                    .settle(&turn_id, &launch_id, finished)
                    .await?;
            }
            ResumeKind::Answer | ResumeKind::Reseed if command.is_none() => {
                // a built-in launch is a command: a row naming none has lost the job the
                // answer reruns, and the command runner would run the brief (the question and
                // its answer) as the shell command; the run ends saying so instead
                warn!(turn_id, launch_id, "builtin_engine_command_missing");
                let broken = Settle::ResumeBroken {
                    error: "the run's record names no command for the answer to rerun (its job \
                            was lost): the built-in engine will not run the question as a \
                            command; launch the job again"
                        .into(),
                };
                self.coordinator
                    .settle(&turn_id, &launch_id, broken)
                    .await?;
            }
            ResumeKind::Answer | ResumeKind::Reseed => {
                // the relaunch carries the answer, the question and (a re-seed) the branch:
                // the node exports them to the new job (`BOXFLEET_ANSWER`, …)
                let question = question.unwrap_or_default();
                let relaunch = Settle::Relaunched {
                    brief: format!("{question}\nThe answer: {reply}"),
                    conversation,
                    command,
                    env: BTreeMap::new(),
                };
                self.coordinator
                    .settle(&turn_id, &launch_id, relaunch)
                    .await?;
            }
        }
        Ok(())
    }
}
