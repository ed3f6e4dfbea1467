//! Endings (the spec's "Endings"; DESIGN §6 I6, I7, I8): an ending is decided once with its
//! terms (a failure announced once), then finished from wherever it stopped — the reply
//! copies the run owes its seat published, the box reclaimed, the row deleted; a step that
//! fails keeps the row for the run's driver to finish later. The pause reaper: a parked box
//! is reclaimed once its pause TTL passes, and the run re-seeds from its branch when answered.
//!
//! Decisions: `transition::ending` (decide_ending, release_box, finish, expire_pause) and
//! `transition::answer` (clear_hand_back).

use boxfleet_cluster::inbox::Delivery;
use boxfleet_cluster::record::{EndingReason, RunRecord, Status};
use boxfleet_cluster::runs::RunError;
use boxfleet_cluster::transition::{
    DEFAULT_PAUSE_TTL_SECONDS, EndingGuard, Fence, Refusal, Transition,
};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::api::{Ended, EngineDown};
use super::error::Error;
use super::limits::MAX_ENDING_DETAIL_BYTES;
use super::strand::Reclaimed;
use super::text::cut;

/// An ending to decide, with its terms, kept while the store does not answer the decision.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptEnding {
    /// the seat of the run, whose fence the decision is written under
    pub seat: String,
    pub reason: EndingReason,
    /// redacted and bounded
    pub detail: String,
    pub guard: EndingGuard,
    /// what the decision announces with it: a finished turn's reply
    pub announce: Option<Box<boxfleet_cluster::events::Event>>,
}

impl Coordinator {
    /// Decides an ending (announced once), then finishes it: copies owed handed back, the box
    /// reclaimed, the row deleted. A step that fails keeps the row for the next reader.
    pub async fn end_run(
        &self,
        fence: &Fence,
        turn_id: &str,
        reason: EndingReason,
        detail: &str,
        guard: EndingGuard,
    ) {
        self.end_run_announcing(fence, turn_id, reason, detail, guard, None)
            .await;
    }

    /// [`Coordinator::end_run`], the decision announcing `announce` too (a finished turn's
    /// reply): the run does not end without it.
    pub(super) async fn end_run_announcing(
        &self,
        fence: &Fence,
        turn_id: &str,
        reason: EndingReason,
        detail: &str,
        guard: EndingGuard,
        announce: Option<boxfleet_cluster::events::Event>,
    ) {
        let ending = KeptEnding {
            seat: fence.seat.clone(),
            reason,
            // a failure's text can quote the box: redacted whole before it is bounded
            detail: cut(&boxfleet_redact::redact(detail), MAX_ENDING_DETAIL_BYTES),
            guard,
            announce: announce.map(Box::new),
        };
        match self.end_run_kept(fence, turn_id, &ending).await {
            Ok(true) => {}
            Ok(false) => info!(turn_id, reason = reason.as_str(), "sandbox_ending_declined"),
            Err(error) => {
                // the store did not take the decision: it is kept, and the run's driver asks
                // again until the store answers (or the seat moves, whose next holder's recovery
                // pass takes the run over)
                warn!(turn_id, %error, reason = reason.as_str(), "sandbox_ending_decision_kept");
                self.follow_ups.keep_ending(turn_id, ending).await;
            }
        }
    }

    /// Decides `ending` and finishes it as [`Coordinator::end_run`] does: `true`. `false`: the
    /// run declined it (its guard no longer holds: the run moved on), never to be kept. `Err`:
    /// the store did not answer the decision (the caller keeps it).
    pub async fn end_run_kept(
        &self,
        fence: &Fence,
        turn_id: &str,
        ending: &KeptEnding,
    ) -> Result<bool, RunError> {
        let reason = ending.reason;
        let decide = Transition::DecideEnding {
            reason,
            detail: ending.detail.clone(),
            guard: ending.guard.clone(),
            announce: ending.announce.clone(),
        };
        let decided = match self.runs.apply(fence, turn_id, decide).await {
            Ok(outcome) => outcome.record().cloned(),
            Err(RunError::Refused(Refusal::EndingDecided(_))) => None,
            Err(RunError::Refused(refusal)) => {
                info!(turn_id, %refusal, reason = reason.as_str(), "sandbox_ending_refusal");
                return Ok(false);
            }
            Err(error) => return Err(error),
        };
        crash::point(crash::ENDING_AFTER_DECISION);
        if reason.is_failure() {
            warn!(turn_id, seat = %fence.seat, reason = reason.as_str(), "sandbox_run_failed");
        } else {
            info!(turn_id, seat = %fence.seat, reason = reason.as_str(), "sandbox_run_ending");
        }
        // the engine hears of an ending it did not settle itself (a notice; the durable record
        // is the announcement the decision wrote)
        if let Some(run) = decided.filter(|_| !settled_by_engine(reason)) {
            self.dispatch(EngineDown::Ended(Box::new(Ended {
                seat: run.seat.clone(),
                turn_id: run.turn_id.clone(),
                launch_id: run.launch_id.clone(),
                reason: reason.as_str().to_owned(),
                detail: run
                    .ending
                    .as_ref()
                    .map(|e| e.detail.clone())
                    .unwrap_or_default(),
            })));
        }
        match self.finish_ending(fence, turn_id).await {
            Ok(()) => info!(turn_id, seat = %fence.seat, "sandbox_run_settled"),
            Err(error) => {
                warn!(turn_id, %error, "sandbox_ending_kept");
                self.follow_ups.check_run(turn_id).await;
            }
        }
        Ok(true)
    }

    /// Finishes a decided ending from wherever it stopped.
    pub async fn finish_ending(&self, fence: &Fence, turn_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        let record = run.record;
        if record.status != Status::Ending {
            return Ok(());
        }
        self.publish_hand_backs(fence, &record).await?;
        crash::point(crash::ENDING_AFTER_HAND_BACK);
        if let Some(sandbox_id) = record.sandbox_id.clone() {
            // a failed kill keeps the id on the record: the box is still ours to reclaim; a box
            // on another host is named for that host's nodes instead, in the write that lets it go
            if self.reclaim_box(fence, &record, &sandbox_id).await? == Reclaimed::Killed {
                crash::point(crash::ENDING_AFTER_RECLAIM);
                let release = Transition::ReleaseBox { sandbox_id };
                match self.runs.apply(fence, turn_id, release).await {
                    Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        // a box the pause reaper released and had not killed yet goes with the run (the record
        // as read still says which: neither step above changes what it owes)
        self.reclaim_owed(fence, &record).await?;
        crash::point(crash::ENDING_BEFORE_DELETE);
        match self.runs.apply(fence, turn_id, Transition::Finish).await {
            Ok(_) | Err(RunError::Refused(Refusal::Missing)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Publishes the reply copies a run owes its seat, then clears them (I7: published
    /// before the clear, the clear before the delete).
    pub(super) async fn publish_hand_backs(
        &self,
        fence: &Fence,
        record: &RunRecord,
    ) -> Result<(), Error> {
        if record.hand_back.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::new();
        for copy in &record.hand_back {
            let delivery = Delivery {
                delivery_id: copy.delivery_id.clone(),
                conversation_key: copy.conversation_key.clone(),
                partition: copy.partition.clone(),
                from: copy.from.clone(),
                text: copy.text.clone(),
                posted_at: copy.posted_at,
                answer_given: None,
            };
            self.inbox.enqueue(&record.seat, &delivery).await?;
            ids.push(copy.delivery_id.clone());
        }
        crash::point(crash::HAND_BACK_AFTER_ENQUEUE);
        let clear = Transition::ClearHandBack { delivery_ids: ids };
        match self.runs.apply(fence, &record.turn_id, clear).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// The pause reaper: a parked run whose box has been paused past its pause TTL has the box
    /// reclaimed and re-seeds from its branch when answered. `true` when it reclaimed one.
    pub async fn expire_pause(&self, run: &RunRecord) -> Result<bool, Error> {
        let Some(sandbox_id) = &run.sandbox_id else {
            return Ok(false);
        };
        // a pause whose stamp did not land is still a pause: its deadline runs from the row's
        // last write, the park itself, which can only be later than the pause (spec line 488)
        let paused_at = run.paused_at.unwrap_or(run.updated_at);
        if !matches!(run.status, Status::AwaitingClarification | Status::Answered) {
            return Ok(false);
        }
        let ttl = run.pause_ttl_seconds.unwrap_or(DEFAULT_PAUSE_TTL_SECONDS);
        if (boxfleet_cluster::clock::now() - paused_at).num_seconds() < ttl as i64 {
            return Ok(false);
        }
        let fence = self.seat_fence(&run.seat).await?;
        // the release lands first: an answer's claim that won the race keeps its box, and the
        // box stays named on the row (reclaim_owed) until its kill is confirmed
        let expire = Transition::ExpirePause {
            sandbox_id: sandbox_id.clone(),
        };
        let released = match self.runs.apply(&fence, &run.turn_id, expire).await {
            Ok(outcome) => outcome,
            Err(RunError::Refused(Refusal::BoxNotReclaimed(_))) => {
                // an earlier release's kill is owed first; this one follows on the next tick
                self.reclaim_owed(&fence, run).await?;
                return Ok(false);
            }
            Err(RunError::Refused(_)) => return Ok(false),
            Err(error) => return Err(error.into()),
        };
        info!(turn_id = %run.turn_id, sandbox_id, ttl, "sandbox_pause_expired");
        crash::point(crash::REAP_AFTER_RELEASE);
        let Some(released) = released.record() else {
            return Ok(true);
        };
        self.reclaim_owed(&fence, released).await?;
        Ok(true)
    }

    /// Kills the box a run was released from (the pause reaper's second step) and clears it
    /// from the row. A failed kill keeps it owed: the next tick, or whoever ends the run,
    /// kills it again (kills are idempotent).
    pub async fn reclaim_owed(&self, fence: &Fence, run: &RunRecord) -> Result<(), Error> {
        let Some(sandbox_id) = &run.reclaim_owed else {
            return Ok(());
        };
        if self.reclaim_box(fence, run, sandbox_id).await? == Reclaimed::Stranded {
            return Ok(());
        }
        crash::point(crash::REAP_AFTER_KILL);
        let reclaimed = Transition::BoxReclaimed {
            sandbox_id: sandbox_id.clone(),
        };
        match self.runs.apply(fence, &run.turn_id, reclaimed).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone | Refusal::Missing)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// Whether an ending is one the engine itself settled (and so needs no notice of).
fn settled_by_engine(reason: EndingReason) -> bool {
    matches!(
        reason,
        EndingReason::Finished | EndingReason::BrokeAfterExternalWrite
    )
}
