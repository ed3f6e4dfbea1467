//! The engine's side of a resume (DESIGN §8.2): `take` is the last moment before the resumed
//! turn runs (an answer's claim records it: the answer is spent, I5), and `settle` says how
//! the turn ended — finished or broken after an external write (the run ends), a retry (the
//! claim goes back; an answer's is retried by its driver), or a relaunch (the next job starts
//! in the same box under a new launch id).
//!
//! Take and settle act under the fence this node holds even while it hands the seat over: a
//! release waits for the resumes in flight (`placement`).
//!
//! Decisions: `transition::answer` (take), `transition::collect` (hand_back_claim),
//! `transition::launch` (relaunch), `transition::ending` (decide_ending).

use std::collections::BTreeMap;

use boxfleet_cluster::record::{AnswerRoute, ClaimKind, EndingReason, RunRecord, Status};
use boxfleet_cluster::runs::{Outcome, RunError};
use boxfleet_cluster::transition::{EndingGuard, Fence, Refusal, Transition};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::api::{LaunchRequest, Settle};
use super::error::Error;
use super::job::StoredJob;
use super::limits::{MAX_ENDING_DETAIL_BYTES, MAX_FINDINGS_RESUME_REFUSALS};
use super::text::{cut, new_id};

impl Coordinator {
    /// The last moment before the resumed turn runs: the claim records the take (an answer is
    /// spent; findings taken are never collected again, I12).
    pub async fn take(&self, turn_id: &str, launch_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Err(Error::NotFound(format!("run {turn_id} is gone")));
        };
        let fence = self.in_flight_fence(&run.record.seat).await?;
        let kind = run.record.claim.as_ref().map(|c| c.kind);
        let take = Transition::Take {
            launch_id: launch_id.to_owned(),
        };
        match self.runs.apply(&fence, turn_id, take).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
            Err(error) => return Err(error.into()),
        }
        crash::point(if kind == Some(ClaimKind::Answer) {
            crash::ANSWER_AFTER_TAKE
        } else {
            crash::SETTLE_AFTER_TAKE
        });
        Ok(())
    }

    /// An engine that took a resume went away before it settled it: what it took may have been
    /// used (an answer's take spends it), so the run is not handed back for a retry but ended
    /// `abandoned_tail`, once, under the claim it was taken under.
    pub async fn abandon_taken(
        &self,
        turn_id: &str,
        launch_id: &str,
        engine: &str,
    ) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        let fence = self.in_flight_fence(&run.record.seat).await?;
        let guard = EndingGuard::Claim {
            launch_id: launch_id.to_owned(),
        };
        let detail = format!(
            "engine {engine} took the resume and went away before it settled it; what it took \
             may have been used, so the run is not resumed again"
        );
        warn!(turn_id, engine, "sandbox_abandoned_tail_reaped");
        self.end_run(&fence, turn_id, EndingReason::AbandonedTail, &detail, guard)
            .await;
        self.pump(&run.record.seat).await;
        Ok(())
    }

    /// A resume that never reached an engine (none serves the seat, and the seat is leaving
    /// this node): its claim goes back uncounted — no engine refused it — for the seat's next
    /// holder to offer again (a completion collected again, an answer driven again).
    pub async fn hand_back_unsent(&self, turn_id: &str, launch_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        let fence = self.in_flight_fence(&run.record.seat).await?;
        let hand_back = Transition::HandBackClaim {
            launch_id: launch_id.to_owned(),
            collect_failed: false,
        };
        match self.runs.apply(&fence, turn_id, hand_back).await {
            Ok(_) | Err(RunError::Refused(_)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// How the resumed turn ended. A relaunch returns the new job's launch id.
    pub async fn settle(
        &self,
        turn_id: &str,
        launch_id: &str,
        settle: Settle,
    ) -> Result<Option<String>, Error> {
        let read = self.runs.read(turn_id).await;
        let seat_out = self
            .resumes_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(turn_id);
        let run = match read {
            Ok(Some(run)) => run,
            Ok(None) => return Err(Error::NotFound(format!("run {turn_id} is gone"))),
            Err(error) => {
                return self
                    .settle_unread(turn_id, launch_id, settle, seat_out, error.into())
                    .await;
            }
        };
        let span = self.span_of(crate::spans::Op::Settle, &run.record);
        tracing::Instrument::instrument(
            Box::pin(self.settle_read(run, turn_id, launch_id, settle)),
            span,
        )
        .await
    }

    /// A resumed turn came back (cleanly, or broken after writing outside the engine) and its
    /// run's record could not be read (`sandbox_claimed_settled_unread`): rather than leave the
    /// row in `resumed`, the store is asked to end the run while it is still the claim this
    /// node took, under the fence of the seat the resume went out for. A relaunched run (no
    /// longer that claim) declines it (`sandbox_claimed_settle_declined`); a store that refuses
    /// this too keeps the ending for the run's driver to decide once the store answers
    /// (`sandbox_claimed_settle_kept`), or the seat's next holder reaps it. Any other settle, or
    /// a turn this node sent no resume for, returns the read's error.
    async fn settle_unread(
        &self,
        turn_id: &str,
        launch_id: &str,
        settle: Settle,
        seat: Option<String>,
        error: Error,
    ) -> Result<Option<String>, Error> {
        let (reason, detail) = match &settle {
            Settle::Finished { reply, .. } => (EndingReason::Finished, reply.clone()),
            Settle::BrokeAfterExternalWrite { error } => {
                (EndingReason::BrokeAfterExternalWrite, error.clone())
            }
            _ => return Err(error),
        };
        let Some(seat) = seat else {
            return Err(error);
        };
        warn!(turn_id, launch_id, seat, %error, "sandbox_claimed_settled_unread");
        let announce = match &settle {
            Settle::Finished { reply, succeeded } => Some(Box::new(Coordinator::reply_event(
                turn_id, launch_id, &seat, reply, *succeeded,
            ))),
            _ => None,
        };
        let fence = self.in_flight_fence(&seat).await?;
        let ending = super::ending::KeptEnding {
            seat,
            reason,
            detail: cut(&boxfleet_redact::redact(&detail), MAX_ENDING_DETAIL_BYTES),
            guard: EndingGuard::Claim {
                launch_id: launch_id.to_owned(),
            },
            announce,
        };
        match self.end_run_kept(&fence, turn_id, &ending).await {
            Ok(true) => {}
            Ok(false) => info!(turn_id, launch_id, "sandbox_claimed_settle_declined"),
            Err(kept) => {
                warn!(turn_id, launch_id, error = %kept, "sandbox_claimed_settle_kept");
                self.follow_ups.keep_ending(turn_id, ending).await;
            }
        }
        self.pump(&fence.seat).await;
        Ok(None)
    }

    async fn settle_read(
        &self,
        run: boxfleet_cluster::runs::Versioned,
        turn_id: &str,
        launch_id: &str,
        settle: Settle,
    ) -> Result<Option<String>, Error> {
        let fence = self.in_flight_fence(&run.record.seat).await?;
        let guard = EndingGuard::Claim {
            launch_id: launch_id.to_owned(),
        };
        crash::point(if matches!(settle, Settle::Relaunched { .. }) {
            crash::RELAUNCH_BEFORE_OPEN
        } else {
            crash::SETTLE_BEFORE_ENDING
        });
        match settle {
            Settle::Finished { reply, succeeded } => {
                // the turn's reply rides the ending's decision, under an id derived from the
                // job: the run never ends without it, and a settle repeated after a crash
                // announces it once
                let announce = Coordinator::reply_event(
                    turn_id,
                    launch_id,
                    &run.record.seat,
                    &reply,
                    succeeded,
                );
                self.end_run_announcing(
                    &fence,
                    turn_id,
                    EndingReason::Finished,
                    &reply,
                    guard,
                    Some(announce),
                )
                .await;
                crash::point(crash::SETTLE_AFTER_FINISH);
                self.pump(&run.record.seat).await;
                Ok(None)
            }
            Settle::BrokeAfterExternalWrite { error } => {
                self.end_run(
                    &fence,
                    turn_id,
                    EndingReason::BrokeAfterExternalWrite,
                    &error,
                    guard,
                )
                .await;
                self.pump(&run.record.seat).await;
                Ok(None)
            }
            Settle::Retry { error } => {
                self.resume_refused(&fence, &run.record, launch_id, &error)
                    .await
            }
            Settle::ResumeBroken { error } => {
                warn!(turn_id, %error, "sandbox_resume_broken");
                let detail = broken_detail(&run.record, &error);
                self.end_run(&fence, turn_id, EndingReason::ResumeBroken, &detail, guard)
                    .await;
                self.pump(&run.record.seat).await;
                Ok(None)
            }
            Settle::Relaunched {
                brief,
                conversation,
                command,
                env,
            } => {
                let next = Relaunch {
                    brief,
                    conversation,
                    command,
                    env: relaunch_env(&run.record, env),
                };
                self.relaunch(&fence, &run.record, launch_id, next).await
            }
        }
    }

    /// The engine handed a resume back for a retry. An answer's goes back to its driver's
    /// spaced, bounded retries; a completion's is counted on the row and collected again by the
    /// next poll, and the refusal past [`MAX_FINDINGS_RESUME_REFUSALS`] ends the run
    /// `resume_broken`.
    async fn resume_refused(
        &self,
        fence: &Fence,
        run: &RunRecord,
        launch_id: &str,
        error: &str,
    ) -> Result<Option<String>, Error> {
        let turn_id = run.turn_id.as_str();
        warn!(turn_id, %error, "sandbox_resume_retried");
        let findings = run.claim.as_ref().map(|c| c.kind) == Some(ClaimKind::Completion);
        if findings && run.resume_refusals + 1 >= MAX_FINDINGS_RESUME_REFUSALS {
            let detail = format!(
                "the engine refused to resume this job's findings {} times; the last: {error}",
                run.resume_refusals + 1
            );
            let guard = EndingGuard::Claim {
                launch_id: launch_id.to_owned(),
            };
            self.end_run(fence, turn_id, EndingReason::ResumeBroken, &detail, guard)
                .await;
            self.pump(&run.seat).await;
            return Ok(None);
        }
        let hand_back = if findings {
            Transition::RefuseResume {
                launch_id: launch_id.to_owned(),
            }
        } else {
            Transition::HandBackClaim {
                launch_id: launch_id.to_owned(),
                collect_failed: false,
            }
        };
        let handed = self.runs.apply(fence, turn_id, hand_back).await?;
        if let Some(record) = handed.record()
            && record.status == Status::Answered
        {
            self.answer_resume_failed(record).await;
        }
        Ok(None)
    }

    /// A resumed turn starts its next job in the same box: the relaunch transition (a new
    /// launch id, `launching`), the job started, the conversation committed. A job that cannot
    /// start ends the run.
    async fn relaunch(
        &self,
        fence: &Fence,
        run: &RunRecord,
        launch_id: &str,
        next: Relaunch,
    ) -> Result<Option<String>, Error> {
        let turn_id = run.turn_id.as_str();
        // a box on a host this node cannot reach (the seat moved here after its node died) is
        // let go of for that host's nodes to kill, and the job re-seeds in a box of its own
        // here, from the branch its question named — never connected to through this node's
        // backend, which would read a box it cannot see as gone
        if let Some(sandbox_id) = &run.sandbox_id
            && self.access.reachable(run).is_err()
        {
            self.strand(fence, run, sandbox_id).await?;
        }
        let new_launch = new_id("launch");
        let in_flight = self.work.start_launch(&new_launch, fence.epoch);
        let relaunch = Transition::Relaunch {
            launch_id: launch_id.to_owned(),
            new_launch_id: new_launch.clone(),
            brief: next.brief.clone(),
        };
        let relaunched = match self.runs.apply(fence, turn_id, relaunch).await {
            Ok(Outcome::Written(run)) => run.record,
            Ok(Outcome::Deleted) => return Ok(None),
            Err(RunError::Refused(refusal)) => return Err(RunError::Refused(refusal).into()),
            Err(error) => {
                // landed or not, the store did not say: a landed relaunch is taken back
                self.claim_unknown(turn_id, launch_id, &error).await;
                return Err(error.into());
            }
        };
        crash::point(crash::RELAUNCH_AFTER_OPEN);
        let last = StoredJob::of(run);
        let runner_name = last
            .as_ref()
            .map_or("command".to_owned(), |j| j.runner.clone());
        let runner = self.access.runner(&runner_name)?.clone();
        // the box it reuses is where the record says, whatever this node's own boxes dir; a
        // re-seed's new box is this node's own
        let provider = match &relaunched.sandbox_id {
            Some(_) => self.access.provider_of(&relaunched)?,
            None => self
                .access
                .provider(&self.access.cell_of(&relaunched))?
                .clone(),
        };
        let request = LaunchRequest {
            seat: relaunched.seat.clone(),
            turn_id: Some(turn_id.to_owned()),
            brief: next.brief,
            command: next
                .command
                .or_else(|| last.as_ref().and_then(|j| j.command.clone())),
            timeout_seconds: last.as_ref().and_then(|j| j.timeout_seconds),
            model: last.as_ref().and_then(|j| j.model.clone()),
            trace: relaunched.trace.clone(),
            ..LaunchRequest::default()
        };
        let started = self
            .start_relaunch(
                fence,
                (turn_id, &new_launch),
                (&provider, runner.as_ref()),
                relaunched.sandbox_id.clone(),
                request,
                next.env,
            )
            .await;
        match started {
            Ok(_) => {
                let commit = Transition::CommitSuspension {
                    launch_id: new_launch.clone(),
                    conversation: next.conversation,
                };
                self.runs.apply(fence, turn_id, commit).await?;
                in_flight.committed();
                crash::point(crash::RELAUNCH_AFTER_COMMIT);
                info!(turn_id, launch_id = %new_launch, "sandbox_run_started");
                Ok(Some(new_launch))
            }
            Err(error) => {
                self.fail_launch(fence, turn_id, &error.to_string()).await;
                // the run is over: the seat's mail that waited behind it flows again
                self.pump(&fence.seat).await;
                Err(error)
            }
        }
    }
}

/// What a relaunch starts with (the engine's `Settle::Relaunched`).
struct Relaunch {
    brief: String,
    conversation: Vec<u8>,
    command: Option<String>,
    env: BTreeMap<String, String>,
}

/// What a relaunch exports to its job: the engine's variables, then — resuming an answer —
/// the answer, the question and (a re-seed) the branch, which the node sets itself so a
/// relaunch never asks its question again for want of them.
fn relaunch_env(run: &RunRecord, mut env: BTreeMap<String, String>) -> BTreeMap<String, String> {
    if run.claim.as_ref().map(|c| c.kind) != Some(ClaimKind::Answer) {
        return env;
    }
    if let Some(answer) = &run.answer {
        env.insert("BOXFLEET_ANSWER".to_owned(), answer.text.clone());
    }
    if let Some(question) = &run.question {
        env.insert("BOXFLEET_QUESTION".to_owned(), question.text.clone());
        if let Some(branch) = &question.branch {
            // a re-seeded box starts empty: the job checks its work out from here
            env.insert("BOXFLEET_BRANCH".to_owned(), branch.clone());
        }
    }
    env
}

/// A broken resume's ending detail: the error, and whether a person's reply goes back.
fn broken_detail(run: &RunRecord, error: &str) -> String {
    let untaken = run
        .answer
        .as_ref()
        .filter(|answer| answer.taken_at.is_none());
    if untaken.is_some_and(|answer| answer.route == AnswerRoute::Operator) {
        format!(
            "the resume broke before its turn began: {error}; the answer given by naming the run \
             was let go with it (announced gone): answer the question again once the run is \
             launched anew"
        )
    } else if untaken.is_some() {
        format!(
            "the resume broke before its turn began: {error}; the person's reply went back to \
             the seat as the ordinary message it is"
        )
    } else {
        format!("the resume broke before its turn began: {error}")
    }
}
