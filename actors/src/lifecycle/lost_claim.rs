//! A claim this node lost track of, given back (issue 45, found by the fleet's simulation; spec
//! lines 24 and 448): a resume the built-in engine could not settle, or a claim, launch or
//! relaunch write whose outcome the store did not say. A landed one stands with nothing on
//! this node working on it — no poll, redelivery or answer claims a `resumed` run, and only a
//! recovery pass reads a `launching` one — so the run's driver (`RunMsg::HandBackClaim`) gives
//! it back once nothing on the seat is in progress: a claim to its answer or its completion, a
//! relaunch to its answer, a first launch to its ending.
//!
//! Decisions: `transition::collect` (hand_back_claim), `transition::launch` (revert_relaunch),
//! `transition::ending` (decide_ending).

use boxfleet_cluster::record::{EndingReason, Status};
use boxfleet_cluster::runs::RunError;
use boxfleet_cluster::transition::{EndingGuard, Transition};
use tracing::{info, warn};

use super::Coordinator;
use super::error::Error;

/// What became of a lost claim's hand-back ([`Coordinator::hand_back_lost_claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostClaim {
    /// given back to its answer, whose retry is queued on the run's driver
    AnswerRetryQueued,
    /// given back to its completion, which the poll collects again
    HandedBack,
    /// nothing is owed from here: the run moved on or settled, a resume or collection of
    /// this node has it, or its seat left this node (whose next holder revives the claim)
    NotOwed,
    /// work is in progress on the seat: asked again later
    Later,
}

impl Coordinator {
    /// A resume this node's own engine took and could not settle (the store did not answer
    /// its settle): its claim is owed back, as a failed resume dispatch's is, so the answer is
    /// driven again (on its spaced, bounded retries) or the completion collected again. The
    /// run's driver gives it back until the store takes it (`sandbox_resume_unsettled`).
    pub async fn resume_unsettled(&self, turn_id: &str, launch_id: &str, error: &Error) {
        warn!(turn_id, launch_id, %error, "sandbox_resume_unsettled");
        self.follow_ups.hand_back_claim(turn_id, launch_id).await;
    }

    /// A claim this node wrote and lost track of: the store did not say whether it landed
    /// (`sandbox_claim_unknown`). One that did land stands in `resumed` with nothing on this
    /// node working on it — no poll, redelivery or answer claims a `resumed` run — so the
    /// run's driver gives it back, once nothing is in progress on the seat, for the answer to
    /// be driven again or the completion collected again.
    pub(super) async fn claim_unknown(&self, turn_id: &str, launch_id: &str, error: &RunError) {
        warn!(turn_id, launch_id, %error, "sandbox_claim_unknown");
        self.follow_ups.hand_back_claim(turn_id, launch_id).await;
    }

    /// Gives back the claim `launch_id` a resume or a lost write of this node left
    /// ([`Coordinator::resume_unsettled`], [`Coordinator::claim_unknown`]) while the run still
    /// stands in it under this node's fence of its seat and nothing on this node has it in
    /// hand (a resume out with the engine, a collection, launch or answer in progress on the
    /// seat). An error is the store's, and the hand-back is asked again.
    pub async fn hand_back_lost_claim(
        &self,
        turn_id: &str,
        launch_id: &str,
    ) -> Result<LostClaim, Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(LostClaim::NotOwed);
        };
        let Some(fence) = self.seats.fence(&run.record.seat) else {
            // the seat's next holder revives the claim in its recovery pass
            return Ok(LostClaim::NotOwed);
        };
        // a relaunch of the claim whose transition or commit the store did not confirm: the
        // row is `launching` with a job no call of this node is starting any more, which only
        // a recovery pass would read — it goes back to the answer, as a recovery pass takes
        // it back (`sandbox_relaunch_reverted`)
        let relaunch_left = run.record.status == Status::Launching
            && run.record.epoch == fence.epoch
            && run.record.answer.is_some()
            && run
                .record
                .relaunched_from
                .as_ref()
                .is_some_and(|from| from.launch_id == launch_id)
            && !self
                .work
                .launch_in_flight(&run.record.launch_id, fence.epoch);
        if relaunch_left {
            if self.work.count(&fence.seat) > 0 {
                return Ok(LostClaim::Later);
            }
            let seat_lock = self.seats.seat.lock(&fence.seat).await;
            self.kill_unnamed_boxes(&run.record).await?;
            self.revert_relaunch(&fence, &run.record).await?;
            drop(seat_lock);
            return match self.runs.read(turn_id).await? {
                Some(run) if run.record.status == Status::Answered => {
                    self.answer_resume_failed(&run.record).await;
                    Ok(LostClaim::AnswerRetryQueued)
                }
                _ => Ok(LostClaim::HandedBack),
            };
        }
        // a first launch whose opening write the store did not confirm, and which gave up:
        // the row is `launching` with no job behind it and nothing of this node starting one
        // (a repeat of the launch is told of it, as of any launch): it ends as a launch that
        // died before its commit does in a recovery pass (`abandoned_tail`), its box killed
        let launch_left = run.record.status == Status::Launching
            && run.record.epoch == fence.epoch
            && run.record.launch_id == launch_id
            && run.record.relaunched_from.is_none()
            && !self.work.launch_in_flight(launch_id, fence.epoch);
        if launch_left {
            if self.work.count(&fence.seat) > 0 {
                return Ok(LostClaim::Later);
            }
            let seat_lock = self.seats.seat.lock(&fence.seat).await;
            self.kill_unnamed_boxes(&run.record).await?;
            self.end_run(
                &fence,
                turn_id,
                EndingReason::AbandonedTail,
                "the launch gave up after a write the store did not confirm had opened its run",
                // a claim guard needs a claim: the row is `launching`, read under the seat's
                // lock just now, as a recovery pass ends such a row
                EndingGuard::Any,
            )
            .await;
            drop(seat_lock);
            self.pump(&fence.seat).await;
            return Ok(LostClaim::HandedBack);
        }
        let ours =
            run.record.status == Status::Resumed
                && run.record.claim.as_ref().is_some_and(|claim| {
                    claim.launch_id == launch_id && claim.epoch == fence.epoch
                });
        let out = self
            .resumes_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(turn_id);
        if !ours || out {
            return Ok(LostClaim::NotOwed);
        }
        if self.work.count(&fence.seat) > 0 {
            return Ok(LostClaim::Later);
        }
        let hand_back = Transition::HandBackClaim {
            launch_id: launch_id.to_owned(),
            collect_failed: false,
        };
        match self.runs.apply(&fence, turn_id, hand_back).await {
            Ok(handed) => {
                info!(turn_id, launch_id, "sandbox_claim_handed_back");
                let answer = handed
                    .record()
                    .filter(|record| record.status == Status::Answered);
                if let Some(record) = answer {
                    self.answer_resume_failed(record).await;
                }
                self.pump(&fence.seat).await;
                Ok(if answer.is_some() {
                    LostClaim::AnswerRetryQueued
                } else {
                    LostClaim::HandedBack
                })
            }
            Err(RunError::Refused(_)) => Ok(LostClaim::NotOwed),
            Err(error) => Err(error.into()),
        }
    }
}
