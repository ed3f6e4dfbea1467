//! Recovery after a seat changes hands: the new holder fences each run with its lease, so the
//! old holder's writes are refused from then on (I9). And the record-level invariants every
//! stored row satisfies, which recovery and the property tests check.

use crate::record::{RunRecord, Status};

use super::{Refusal, Step};

/// Stamps the writer's lease on the run, and the writer as its owner when it names one.
pub(super) fn fence_run(
    step: &Step<'_>,
    next: &mut RunRecord,
    owner: &Option<String>,
) -> Result<(), Refusal> {
    if step.current.epoch == step.fence.epoch {
        return Err(Refusal::AlreadyDone);
    }
    next.epoch = step.fence.epoch;
    if let Some(owner) = owner {
        next.owner = Some(owner.clone());
    }
    Ok(())
}

/// The record-level invariants every stored row satisfies; the property tests check them
/// after every step.
pub fn check_record(record: &RunRecord) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{} ({}): {what}", record.turn_id, record.status));
    match record.status {
        Status::Launching if record.claim.is_some() => return fail("launching with a claim"),
        Status::Resumed if record.claim.is_none() => return fail("resumed without a claim"),
        Status::Answered if record.answer.is_none() => return fail("answered without an answer"),
        Status::Ending if record.ending.is_none() => return fail("ending without terms"),
        Status::AwaitingClarification | Status::Reseed if record.question.is_none() => {
            return fail("parked without a question");
        }
        Status::AwaitingClarification | Status::Reseed if record.answer.is_some() => {
            return fail("parked while holding an answer");
        }
        _ => {}
    }
    if record.status != Status::Ending && record.ending.is_some() {
        return fail("ending terms on a run that is not ending");
    }
    if record.status == Status::Reseed && record.sandbox_id.is_some() {
        return fail("re-seed still naming a box");
    }
    if let Some(claim) = &record.claim
        && claim.epoch > record.epoch
    {
        return fail("a claim under a lease newer than the row's");
    }
    Ok(())
}
