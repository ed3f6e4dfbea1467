//! A finished job (the spec's "Collecting"; DESIGN §4, §11): its completion is claimed at most
//! once per launch (I2), then collected in five steps, in this order:
//!
//! 1. **read the evidence** — everything the job left, read before the box is paused or
//!    killed, and redacted whole; a piece that cannot be read is an infrastructure error for
//!    that piece, never "absent";
//! 2. **charge** — both shares of the job's tokens, once per job (I3);
//! 3. **assess** — failed, reason, error text, model receipt (`assess`, no I/O);
//! 4. **publish** — the phase record, once per job (I3);
//! 5. **park or resume** — a refreshed login goes back, the box is paused, and the run parks
//!    on the job's question or its findings go to the engine.
//!
//! A collection that fails hands its claim back (the completion comes round again); a claim
//! that cannot be handed back ends the run.
//!
//! Decisions: `transition::collect` (claim_completion, hand_back_claim, charge,
//! publish_phase, park, mark_paused).

use std::sync::Arc;

use boxfleet_cluster::record::{EndingReason, Question, RunRecord, Usage};
use boxfleet_cluster::runs::{Outcome, RunError};
use boxfleet_cluster::transition::{
    COLLECT_SPAN, EndingGuard, Fence, Refusal, Share, Transition, collect_allowance_spent,
};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::access::{BACKSTOP_FILE, DISK_BUDGET_FILE};
use super::api::{EngineDown, Parked, Resume, ResumeKind};
use super::assess::Assessment;
use super::bounds::{self, Unaskable};
use super::error::Error;
use super::job::StoredJob;
use super::limits::{MAX_QUESTION_BYTES, MAX_REPORT_BYTES};
use super::phase_record::{self, Elided, EngineNotes, bound_collected, redact_collected};
use crate::boxes::BoxOp;
use crate::ports::{BoxError, Collected, Overlong, Sandbox};

/// What step 1 read of a finished job.
struct Evidence {
    /// everything the runner collected, redacted whole once more
    collected: Collected,
    /// the box, still reachable; `None` when it is gone
    sandbox: Option<Arc<dyn Sandbox>>,
    /// the notes the engine's backstop and disk watchdog left, when they ended the job
    notes: EngineNotes,
    /// what the bounds left out of `collected`
    elided: Elided,
}

impl Coordinator {
    /// A job finished: claims its completion (at most once), collects everything before the
    /// box is paused, charges, publishes the phase record once, then parks on the job's
    /// question or hands the findings to the engine.
    pub async fn complete(&self, turn_id: &str, launch_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        let span = self.span_of(crate::spans::Op::Collect, &run.record);
        tracing::Instrument::instrument(Box::pin(self.complete_read(run, turn_id, launch_id)), span)
            .await
    }

    async fn complete_read(
        &self,
        run: boxfleet_cluster::runs::Versioned,
        turn_id: &str,
        launch_id: &str,
    ) -> Result<(), Error> {
        let _working = self.working_on(&run.record.seat);
        let fence = self.seat_fence(&run.record.seat).await?;
        let claim = Transition::ClaimCompletion {
            launch_id: launch_id.to_owned(),
        };
        let claimed = match self.runs.apply(&fence, turn_id, claim).await {
            Ok(Outcome::Written(run)) => run.record,
            Ok(Outcome::Deleted) => return Ok(()),
            // a duplicate, an old job's completion, or a launch still unwinding: nothing to do
            Err(RunError::Refused(_)) => return Ok(()),
            Err(error) => {
                // landed or not, the store did not say: a landed claim is given back
                self.claim_unknown(turn_id, launch_id, &error).await;
                return Err(error.into());
            }
        };
        crash::point(crash::COLLECT_AFTER_CLAIM);
        let metrics = boxfleet_cluster::metrics::metrics();
        match self.collect_claimed(&fence, &claimed).await {
            Ok(()) => Ok(()),
            Err(Failed::Unread(error))
                if collect_allowance_spent(&claimed, boxfleet_cluster::clock::now()) =>
            {
                metrics.collected("failed", "collect_unreachable");
                // past the allowance the box is given up on: torn down, the run ended
                let detail = format!(
                    "box {} could not be read back in {} attempts over {}s or more: {error}",
                    claimed.sandbox_id.as_deref().unwrap_or("?"),
                    claimed.collect_failures + 1,
                    COLLECT_SPAN.num_seconds(),
                );
                warn!(turn_id, %error, attempts = claimed.collect_failures + 1, "sandbox_collect_unreachable");
                let guard = EndingGuard::Claim {
                    launch_id: launch_id.to_owned(),
                };
                self.end_run(
                    &fence,
                    turn_id,
                    EndingReason::CollectUnreachable,
                    &detail,
                    guard,
                )
                .await;
                Ok(())
            }
            Err(Failed::Interrupted) => {
                // handed back uncounted: the next holder collects it again at once
                metrics.collected("failed", "interrupted");
                info!(turn_id, launch_id, seat = %fence.seat, "sandbox_collect_interrupted");
                let hand_back = Transition::HandBackClaim {
                    launch_id: launch_id.to_owned(),
                    collect_failed: false,
                };
                match self.runs.apply(&fence, turn_id, hand_back).await {
                    Ok(_) | Err(RunError::Refused(_)) => Ok(()),
                    // the claim stays for the seat's next holder, whose recovery revives it
                    Err(error) => Err(error.into()),
                }
            }
            Err(failed) => {
                let unread = matches!(failed, Failed::Unread(_));
                metrics.collected("failed", if unread { "box_unread" } else { "retried" });
                let error = failed.into_error();
                warn!(turn_id, %error, unread, "sandbox_collect_retried");
                self.hand_back_failed_collection(&fence, turn_id, launch_id, unread)
                    .await;
                Err(error)
            }
        }
    }

    /// A collection failed: its claim goes back, so the completion comes round again; a claim
    /// that cannot go back ends the run. A failure to read the box counts against the
    /// collect-failure allowance; one after the box was read does not.
    async fn hand_back_failed_collection(
        &self,
        fence: &Fence,
        turn_id: &str,
        launch_id: &str,
        unread: bool,
    ) {
        let hand_back = Transition::HandBackClaim {
            launch_id: launch_id.to_owned(),
            collect_failed: unread,
        };
        if let Err(error) = self.runs.apply(fence, turn_id, hand_back).await {
            warn!(turn_id, %error, "sandbox_claim_unreverted");
            self.end_run(
                fence,
                turn_id,
                EndingReason::ClaimUnreverted,
                &error.to_string(),
                EndingGuard::Claim {
                    launch_id: launch_id.to_owned(),
                },
            )
            .await;
        }
    }

    /// A collection panicked holding its claim: the claim goes back, so the completion comes
    /// round again (the collectors count the panic as a restart).
    pub async fn hand_back_panicked_collection(&self, turn_id: &str, launch_id: &str) {
        if let Ok(fence) = self.seat_fence_of_run(turn_id).await {
            let hand_back = Transition::HandBackClaim {
                launch_id: launch_id.to_owned(),
                collect_failed: true,
            };
            let _ = self.runs.apply(&fence, turn_id, hand_back).await;
        }
    }

    /// Steps 1 to 5 on a claimed run.
    async fn collect_claimed(&self, fence: &Fence, run: &RunRecord) -> Result<(), Failed> {
        let turn_id = &run.turn_id;
        let job = StoredJob::of(run)
            .ok_or_else(|| Error::NotFound(format!("run {turn_id} names no job")))?;
        self.access.reachable(run)?;
        let sandbox_id = run.sandbox_id.clone().unwrap_or_default();
        // the reads (reaching the box) are what a hand-over stops: nothing is written before
        // they end, so the claim goes back as the completion found it
        let evidence = tokio::select! {
            biased;
            read = self.read_evidence(run, &job, &sandbox_id) => read.map_err(Failed::Unread)?,
            () = self.work.interrupted(&run.seat) => return Err(Failed::Interrupted),
        };
        Ok(self.collect_read(fence, run, &job, evidence).await?)
    }

    /// Steps 2 to 5, once the evidence is read.
    async fn collect_read(
        &self,
        fence: &Fence,
        run: &RunRecord,
        job: &StoredJob,
        evidence: Evidence,
    ) -> Result<(), Error> {
        let turn_id = &run.turn_id;
        let launch_id = &run.launch_id;
        let sandbox_id = run.sandbox_id.clone().unwrap_or_default();
        crash::point(crash::COLLECT_AFTER_READS);
        let Some(sandbox) = evidence.sandbox.clone() else {
            self.end_run(
                fence,
                turn_id,
                EndingReason::CollectUnreachable,
                &format!("box {sandbox_id} is gone"),
                EndingGuard::Claim {
                    launch_id: launch_id.clone(),
                },
            )
            .await;
            return Ok(());
        };
        let collected = &evidence.collected;
        let usage = self.charge(fence, run, collected).await?;
        crash::point(crash::COLLECT_AFTER_CHARGE);
        for warning in &collected.warnings {
            warn!(turn_id, launch_id, warning = %warning, "{}", warning);
        }
        if let Some(Unaskable(why)) = &evidence.elided.unaskable {
            warn!(turn_id, launch_id, %why, "sandbox_question_unaskable");
        }
        let mut assessment = phase_record::assess_evidence(
            collected,
            job,
            &evidence.notes,
            &evidence.elided,
            self.company().providers.sandbox.model_mismatch,
        );
        let failure = &assessment.error_text;
        if let Some(condensed) = self
            .condensed(
                &run.seat,
                turn_id,
                Overlong::Failure,
                failure,
                MAX_REPORT_BYTES,
            )
            .await
        {
            assessment.error_text = condensed;
        }
        assessment.error_text = bounds::failure(&assessment.error_text, MAX_REPORT_BYTES);
        if let Some(text) = &assessment.mismatch {
            warn!(turn_id, launch_id, %text, "sandbox_model_mismatch");
        }
        self.publish(fence, run, &evidence, &assessment, usage, &sandbox_id)
            .await?;
        // a collection, by how its job went: succeeded, or failed and why beyond its exit
        boxfleet_cluster::metrics::metrics().collected(
            if assessment.failed {
                "job_failed"
            } else {
                "succeeded"
            },
            &assessment
                .reason
                .map_or_else(String::new, |reason| reason.as_str().to_owned()),
        );
        info!(
            turn_id,
            launch_id,
            seat = %run.seat,
            failed = assessment.failed,
            exit_code = ?collected.exit_code,
            job_runtime_ms = ?collected.job_started_ms.zip(collected.job_ended_ms).map(|(s, e)| e - s),
            "sandbox_run_collected"
        );
        crash::point(crash::COLLECT_AFTER_PUBLISH);
        self.park_or_resume(fence, run, job, collected, &assessment, sandbox.as_ref())
            .await
    }

    /// Step 1: everything the job left, read from its box (connect: a paused box is resumed
    /// to be read) and redacted, with the backstop's note when the job had an in-box deadline.
    /// A box that is gone reads as nothing but that; one that cannot be reached is an error
    /// (the collection is retried).
    async fn read_evidence(
        &self,
        run: &RunRecord,
        job: &StoredJob,
        sandbox_id: &str,
    ) -> Result<Evidence, Error> {
        let runner = self.access.runner(&job.runner)?.clone();
        let provider = self.access.provider_of(run)?;
        let (collected, sandbox) = match self
            .access
            .box_handle(&provider, sandbox_id, BoxOp::Connect)
            .await
        {
            Ok(sandbox) => match runner.collect(sandbox.as_ref(), &job.handle).await {
                Ok(collected) => (collected, Some(sandbox)),
                // the box stopped answering mid-read: it could not be read back, which is a
                // collect failure asked again, never a run collected without those pieces
                Err(error @ BoxError::Unreachable(_)) => return Err(error.into()),
                Err(error) => (
                    Collected {
                        read_errors: vec![format!("the job's output could not be read: {error}")],
                        ..Collected::default()
                    },
                    Some(sandbox),
                ),
            },
            Err(BoxError::Gone(_)) => (
                Collected {
                    read_errors: vec![format!("box {sandbox_id} is gone")],
                    ..Collected::default()
                },
                None,
            ),
            Err(error) => return Err(error.into()),
        };
        // redacted again at publish: the runner redacted what it read, and nothing from a box
        // reaches the record, an event or a person without passing here
        let mut collected = redact_collected(collected);
        // past its bound, a piece the executor or a person reads is condensed when a model can
        let (seat, turn_id) = (&run.seat, &run.turn_id);
        if let Some(report) = self
            .condensed(
                seat,
                turn_id,
                Overlong::Report,
                &collected.report,
                MAX_REPORT_BYTES,
            )
            .await
        {
            collected.report = report;
        }
        if let Some(asked) = collected.question.as_mut()
            && let Some(question) = self
                .condensed(
                    seat,
                    turn_id,
                    Overlong::Question,
                    &asked.question,
                    MAX_QUESTION_BYTES,
                )
                .await
        {
            asked.question = question;
        }
        let (mut collected, elided) = bound_collected(collected);
        // the backstop's own record, read before anything is torn down: a job the engine ended
        // is told apart from a check that hit its own deadline
        let backstop = match &sandbox {
            Some(sandbox) if job.timeout_seconds.is_some() => {
                let path = format!("{}/{BACKSTOP_FILE}", job.handle.dir);
                read_note(sandbox.as_ref(), &path, &mut collected).await?
            }
            _ => None,
        };
        // and the disk watchdog's, on a box whose disk the node shares
        let local = !self.access.is_remote(run);
        let disk_budget = match &sandbox {
            Some(sandbox) if local => {
                let path = format!("{}/{DISK_BUDGET_FILE}", job.handle.dir);
                read_note(sandbox.as_ref(), &path, &mut collected).await?
            }
            _ => None,
        };
        Ok(Evidence {
            collected,
            sandbox,
            notes: EngineNotes {
                backstop,
                disk_budget,
            },
            elided,
        })
    }

    /// Step 2: the job's tokens, charged to the seat's and the company's share, each once.
    async fn charge(
        &self,
        fence: &Fence,
        run: &RunRecord,
        collected: &Collected,
    ) -> Result<Usage, Error> {
        let usage = phase_record::usage_of(collected);
        // a run launched for a work item charges that task too (its own counter, once)
        let task = run.work_item.as_ref().map(|_| Share::Task);
        for share in [Share::Seat, Share::Company].into_iter().chain(task) {
            let charge = Transition::Charge {
                launch_id: run.launch_id.clone(),
                share,
                usage,
            };
            match self.runs.apply(fence, &run.turn_id, charge).await {
                Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
                Err(error) => {
                    // nothing a counter recorded is taken back; the row says which share
                    // landed, so the retry records the other alone
                    let tokens = usage.input_tokens + usage.output_tokens;
                    if share == Share::Seat {
                        warn!(turn_id = %run.turn_id, seat = %run.seat, tokens, %error, "sandbox_accounting_failed");
                    } else {
                        warn!(turn_id = %run.turn_id, seat = %run.seat, tokens, failed = ?share, %error, "sandbox_accounting_partial");
                    }
                    return Err(error.into());
                }
            }
            if share == Share::Seat {
                crash::point(crash::COLLECT_AFTER_SEAT_CHARGE);
            }
        }
        self.note_over_budget(&run.seat, &run.turn_id).await;
        Ok(usage)
    }

    /// Step 4: the job's phase record, published once.
    async fn publish(
        &self,
        fence: &Fence,
        run: &RunRecord,
        evidence: &Evidence,
        assessment: &Assessment,
        usage: Usage,
        sandbox_id: &str,
    ) -> Result<(), Error> {
        let phase = phase_record::phase_record(
            run,
            &evidence.collected,
            &evidence.elided,
            assessment,
            usage,
            sandbox_id,
            boxfleet_cluster::clock::now(),
        );
        let publish = Transition::PublishPhase {
            launch_id: run.launch_id.clone(),
            phase: phase.to_value(),
        };
        match self.runs.apply(fence, &run.turn_id, publish).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Step 5: the evidence is read and published, so a refreshed login goes back and the box
    /// is paused; then the run parks on the job's question (the seat's mail flows again), or
    /// its findings go to the engine.
    async fn park_or_resume(
        &self,
        fence: &Fence,
        run: &RunRecord,
        job: &StoredJob,
        collected: &Collected,
        assessment: &Assessment,
        sandbox: &dyn Sandbox,
    ) -> Result<(), Error> {
        let turn_id = &run.turn_id;
        let launch_id = &run.launch_id;
        // a login the run refreshed goes back before the box is paused (a kill of the box, by
        // whoever settles the run or by the orphan reaper, gives back what it refreshed later)
        crate::credentials::give_back(sandbox).await;
        crash::point(crash::COLLECT_AFTER_LOGIN_GIVEN_BACK);
        self.pause_collected_box(fence, run).await;
        crash::point(crash::COLLECT_AFTER_PAUSE);
        if let Some(asked) = &collected.question {
            // resolved once, against the org chart, in the same write as the question
            let audience =
                self.company()
                    .resolve(&run.seat, run.requester.as_deref(), &asked.audience);
            let question = Question {
                text: asked.question.clone(),
                audience: asked.audience.clone(),
                audience_handles: audience.handles,
                audience_fallback: audience.fallback,
                asked_at: boxfleet_cluster::clock::now(),
                branch: asked.branch.clone(),
            };
            let park = Transition::Park {
                launch_id: launch_id.clone(),
                question,
            };
            let parked = self.runs.apply(fence, turn_id, park).await?;
            self.offers.parked(&run.seat);
            crash::point(crash::COLLECT_AFTER_PARK);
            info!(turn_id, launch_id, "sandbox_clarification_requested");
            self.dispatch(EngineDown::Parked(Box::new(Parked {
                seat: run.seat.clone(),
                turn_id: turn_id.clone(),
                launch_id: launch_id.clone(),
                question: asked.question.clone(),
                audience: asked.audience.clone(),
            })));
            // pause_ttl_seconds: 0 holds no snapshot: the box goes now, the run to reseed
            if run.pause_ttl_seconds == Some(0)
                && let Some(parked) = parked.record()
                && let Err(error) = self.expire_pause(parked).await
            {
                warn!(turn_id, %error, "sandbox_pause_reap_failed");
            }
            // a parked run holds nothing: the seat's mail flows again
            self.pump(&run.seat).await;
            return Ok(());
        }
        let resume = Resume {
            seat: run.seat.clone(),
            turn_id: turn_id.clone(),
            launch_id: launch_id.clone(),
            kind: ResumeKind::Findings,
            conversation: run.conversation.clone().unwrap_or_default(),
            iteration: run.iteration,
            work_item: run.work_item.clone(),
            reply: if assessment.failed {
                format!("{}\n{}", collected.report, assessment.error_text)
            } else {
                collected.report.clone()
            },
            succeeded: !assessment.failed,
            question: None,
            branch: None,
            command: job.command.clone(),
            attempt: run.resume_refusals + 1,
            refs: collected.delivered_refs.clone(),
        };
        self.dispatch(EngineDown::Resume(Box::new(resume)));
        crash::point(crash::COLLECT_AFTER_RESUME_DISPATCH);
        Ok(())
    }

    /// Pauses a collected run's box and marks it paused; a pause that fails is logged (the
    /// box stays named on the record for whoever settles the run).
    async fn pause_collected_box(&self, fence: &Fence, run: &RunRecord) {
        let sandbox_id = run.sandbox_id.clone().unwrap_or_default();
        match self.access.run_box_op(run, &sandbox_id, BoxOp::Pause).await {
            Ok(_) => {
                crash::point(crash::COLLECT_AFTER_BOX_PAUSED);
                let mark = Transition::MarkPaused {
                    sandbox_id: sandbox_id.clone(),
                };
                let _ = self.runs.apply(fence, &run.turn_id, mark).await;
            }
            Err(error) => warn!(turn_id = %run.turn_id, %error, "sandbox_pause_failed"),
        }
    }
}

/// Why a collection did not finish: its box could not be read (counted against the
/// collect-failure allowance), or a later step failed (not counted: the box answered).
enum Failed {
    Unread(Error),
    After(Error),
    /// this node stopped the collection (its seat is being handed over: a drain, a graceful
    /// restart), which says nothing about the box
    Interrupted,
}

impl Failed {
    fn into_error(self) -> Error {
        match self {
            Failed::Unread(error) | Failed::After(error) => error,
            Failed::Interrupted => Error::Box(BoxError::Unreachable(
                "the collection was stopped: its seat is being handed over".into(),
            )),
        }
    }
}

impl From<Error> for Failed {
    fn from(error: Error) -> Self {
        Failed::After(error)
    }
}

/// A note the engine left in a job's directory (the backstop's, the disk watchdog's), at
/// most 4 KiB; one that cannot be read is a read error, never "absent", and a box that does
/// not answer is a collect failure (`Err`: asked again).
async fn read_note(
    sandbox: &dyn Sandbox,
    path: &str,
    collected: &mut Collected,
) -> Result<Option<String>, Error> {
    match sandbox.read_file(path).await {
        Ok(found) => {
            Ok(found.map(|bytes| bounds::from_start(&String::from_utf8_lossy(&bytes), 4096)))
        }
        Err(error @ BoxError::Unreachable(_)) => Err(error.into()),
        Err(error) => {
            collected
                .read_errors
                .push(format!("{path} could not be read: {error}"));
            Ok(None)
        }
    }
}
