//! How a run ends: the ending is decided once and its terms never change (I6), a loss is
//! announced as `sandbox_run_failed`, the box is released (I8), and the row is deleted only
//! with its box reclaimed and nothing owed to the seat (I7). A parked run whose pause TTL
//! passed loses its box too, but not its question: it goes to re-seed.

use crate::events::{self, Event};
use crate::record::{Ending, EndingReason, RunRecord, Status};

use super::answer::let_answer_go;
use super::{Decision, Effect, EndingGuard, Next, Refusal, Step};

/// Decides the ending; an untaken answer on the run goes back to the seat as a copy.
pub(super) fn decide_ending(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    reason: EndingReason,
    detail: &str,
    guard: &EndingGuard,
) -> Result<(), Refusal> {
    let (current, now) = (step.current, step.now);
    if let EndingGuard::Claim { launch_id } = guard {
        step.own_claim(launch_id, None)?;
    }
    let reply_goes_back = let_answer_go(next, effects);
    let mut ending = Ending {
        reason,
        detail: detail.to_owned(),
        decided_at: now,
        epoch: step.fence.epoch,
        event_id: String::new(),
        reply_goes_back,
    };
    if reason.is_failure() {
        let event = Event::new(
            events::kind::RUN_FAILED,
            &[&current.turn_id, reason.as_str(), &now.to_rfc3339()],
            &current.turn_id,
            &current.launch_id,
            &current.seat,
            now,
            serde_json::json!({
                "reason": reason.as_str(),
                "detail": detail,
                "reply_went_back": reply_goes_back,
                "sandbox_id": current.sandbox_id,
            }),
        );
        ending.event_id = event.id.clone();
        effects.push(Effect::Announce(Box::new(event)));
    }
    next.status = Status::Ending;
    next.epoch = step.fence.epoch;
    next.ending = Some(ending);
    Ok(())
}

/// The ending run's box was killed: the record stops naming it.
pub(super) fn release_box(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Ending)?;
    match &current.sandbox_id {
        None => return Err(Refusal::AlreadyDone),
        Some(id) if id != sandbox_id => {
            return Err(Refusal::WrongBox {
                asked: sandbox_id.to_owned(),
                found: current.sandbox_id.clone(),
            });
        }
        Some(_) => {}
    }
    next.sandbox_id = None;
    next.job = None;
    next.paused_at = None;
    Ok(())
}

/// Deletes the ended row; the one rule whose decision is no record.
pub(super) fn finish(step: &Step<'_>) -> Result<Decision, Refusal> {
    let current = step.current;
    step.require_status(Status::Ending)?;
    if !current.hand_back.is_empty() {
        return Err(Refusal::OwesHandBack);
    }
    if let Some(id) = &current.sandbox_id {
        return Err(Refusal::BoxNotReclaimed(id.clone()));
    }
    Ok(Decision {
        next: Next::Delete,
        effects: Vec::new(),
    })
}

/// The pause TTL passed and the box was killed: a question parks on as re-seed, an answer
/// stays answered (its resume re-seeds).
pub(super) fn expire_pause(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    let current = step.current;
    if !matches!(
        current.status,
        Status::AwaitingClarification | Status::Answered
    ) {
        return Err(step.wrong_status("awaiting_clarification"));
    }
    step.same_box(sandbox_id)?;
    // the job's description (runner, command) stays: the re-seed relaunches it
    next.sandbox_id = None;
    next.paused_at = None;
    if current.status == Status::AwaitingClarification {
        next.status = Status::Reseed;
    }
    Ok(())
}
