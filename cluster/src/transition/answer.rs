//! A parked run's answer: the first qualifying reply is recorded (I4), claimed for its resume,
//! taken by the resumed turn (spent, I5), revived when its claim died before the take, or let
//! go — declined for this question, its copy owed back to the seat (I7) until that copy is
//! published and cleared.

use chrono::Duration;

use crate::events;
use crate::record::{Answer, Claim, ClaimKind, HandBack, RunRecord, Status};

use super::{DEFAULT_PAUSE_TTL_SECONDS, Effect, MAX_ANSWER_REVIVALS, Refusal, Step};

/// The first qualifying reply: posted at or after the question, never declined for it.
pub(super) fn record_answer(
    step: &Step<'_>,
    next: &mut RunRecord,
    answer: &Answer,
) -> Result<(), Refusal> {
    let current = step.current;
    match current.status {
        Status::AwaitingClarification | Status::Reseed => {}
        Status::Answered | Status::Resumed
            if current
                .answer
                .as_ref()
                .is_some_and(|a| a.delivery_id == answer.delivery_id) =>
        {
            return Err(Refusal::AlreadyRecorded);
        }
        Status::Answered => return Err(Refusal::AlreadyAnswered),
        _ => return Err(step.wrong_status("awaiting_clarification")),
    }
    let question = current.question.as_ref().ok_or(Refusal::NoAnchor)?;
    if answer.posted_at < question.asked_at {
        return Err(Refusal::PostedBeforeQuestion);
    }
    if current.declined_answers.contains(&answer.delivery_id) {
        return Err(Refusal::Declined);
    }
    let mut answer = answer.clone();
    answer.recorded_at = step.now;
    answer.taken_at = None;
    next.answer = Some(answer);
    next.status = Status::Answered;
    next.epoch = step.fence.epoch;
    Ok(())
}

/// Claims the answered run for its resume; every claim counts as an attempt.
pub(super) fn claim_answer(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.require_status(Status::Answered)?;
    step.same_launch(launch_id)?;
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("an answered run carries no answer".into()))?;
    answer.attempts += 1;
    next.status = Status::Resumed;
    next.epoch = step.fence.epoch;
    next.claim = Some(Claim {
        kind: ClaimKind::Answer,
        launch_id: launch_id.to_owned(),
        from: Status::Answered,
        epoch: step.fence.epoch,
        claimed_at: step.now,
    });
    Ok(())
}

/// The last moment before the resumed turn runs: the answer is spent, its delivery worked.
pub(super) fn take(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.own_claim(launch_id, Some(ClaimKind::Answer))?;
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("an answer's claim carries no answer".into()))?;
    if answer.taken_at.is_some() {
        return Err(Refusal::AnswerTaken);
    }
    answer.taken_at = Some(step.now);
    effects.push(Effect::Spend {
        delivery_id: answer.delivery_id.clone(),
    });
    Ok(())
}

/// A dead claim gives its untaken answer back: at most [`MAX_ANSWER_REVIVALS`] times, and only
/// within one pause TTL of the first loss.
pub(super) fn revive(step: &Step<'_>, next: &mut RunRecord) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Resumed)?;
    let claim = current
        .claim
        .as_ref()
        .ok_or_else(|| Refusal::Invalid("a resumed run carries no claim".into()))?;
    if claim.kind != ClaimKind::Answer {
        return Err(step.wrong_status("resumed for an answer"));
    }
    let pause_ttl = current
        .pause_ttl_seconds
        .unwrap_or(DEFAULT_PAUSE_TTL_SECONDS);
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("an answer's claim carries no answer".into()))?;
    if answer.taken_at.is_some() {
        return Err(Refusal::AnswerTaken);
    }
    let now = step.now;
    let window_passed = answer.first_lost_at.is_some_and(|first| {
        now.signed_duration_since(first) >= Duration::seconds(pause_ttl as i64)
    });
    if answer.lost_claims >= MAX_ANSWER_REVIVALS || window_passed {
        return Err(Refusal::RevivalsSpent {
            lost_claims: answer.lost_claims,
        });
    }
    answer.lost_claims += 1;
    answer.first_lost_at.get_or_insert(now);
    next.status = Status::Answered;
    next.claim = None;
    next.epoch = step.fence.epoch;
    Ok(())
}

/// Declines the untaken answer for this question; the run parks again.
pub(super) fn let_go(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Answered)?;
    if !current.hand_back.is_empty() {
        return Err(Refusal::OwesHandBack);
    }
    if current.answer_taken() {
        return Err(Refusal::AnswerTaken);
    }
    let_answer_go(next, effects);
    next.status = next.parked_status();
    Ok(())
}

/// The copies named were published to the seat's inbox; clearing none is already done.
pub(super) fn clear_hand_back(
    step: &Step<'_>,
    next: &mut RunRecord,
    delivery_ids: &[String],
) -> Result<(), Refusal> {
    next.hand_back
        .retain(|copy| !delivery_ids.contains(&copy.delivery_id));
    if next.hand_back.len() == step.current.hand_back.len() {
        return Err(Refusal::AlreadyDone);
    }
    Ok(())
}

/// Takes the untaken answer off the run into a copy owed to the seat; a taken one stays spent.
/// Either way its original delivery is recorded as worked. Returns whether a copy is owed.
pub(super) fn let_answer_go(record: &mut RunRecord, effects: &mut Vec<Effect>) -> bool {
    let Some(answer) = record.answer.take() else {
        return false;
    };
    effects.push(Effect::Spend {
        delivery_id: answer.delivery_id.clone(),
    });
    if answer.taken_at.is_some() {
        return false;
    }
    let copy = copy_of(&answer);
    for id in [&answer.delivery_id, &copy.delivery_id] {
        if !record.declined_answers.contains(id) {
            record.declined_answers.push(id.clone());
        }
    }
    record.hand_back.push(copy);
    true
}

/// The copy of a reply owed back to the seat, its delivery id derived from the original's.
fn copy_of(answer: &Answer) -> HandBack {
    HandBack {
        delivery_id: format!(
            "copy-{}",
            events::derive_id(&["hand_back", &answer.delivery_id])
        ),
        original_delivery_id: answer.delivery_id.clone(),
        text: answer.text.clone(),
        from: answer.from.clone(),
        posted_at: answer.posted_at,
        conversation_key: answer.conversation_key.clone(),
        partition: answer.partition.clone(),
    }
}
