//! Collecting a finished job: its completion is claimed at most once (`running → resumed`, I2),
//! its charge and phase record land once each (I3), and the claim either parks the run on its
//! question, is handed back, or (elsewhere) relaunches or ends it. The box's pause after
//! collection is marked here too.

use crate::events::{self, Event};
use crate::record::{Charged, Claim, ClaimKind, Question, RunRecord, Status, Usage};

use super::{Effect, Refusal, Share, Step};

/// At most once per job: the claim every later write of the collection carries (I2, I5).
pub(super) fn claim_completion(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.require_status(Status::Running)?;
    step.same_launch(launch_id)?;
    next.status = Status::Resumed;
    next.epoch = step.fence.epoch;
    next.claim = Some(Claim {
        kind: ClaimKind::Completion,
        launch_id: launch_id.to_owned(),
        from: Status::Running,
        epoch: step.fence.epoch,
        claimed_at: step.now,
    });
    Ok(())
}

/// Back to the status the claim was taken from; an answer's claim gives its answer back untaken.
pub(super) fn hand_back_claim(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
    collect_failed: bool,
) -> Result<(), Refusal> {
    let claim = step.own_claim(launch_id, None)?;
    next.status = claim.from;
    if claim.from == Status::Answered
        && let Some(answer) = next.answer.as_mut()
    {
        answer.taken_at = None;
    }
    next.claim = None;
    if collect_failed {
        next.collect_failures += 1;
    }
    Ok(())
}

/// One share of the job's charge, once per job (I3); a charge left from an older job restarts.
pub(super) fn charge(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    share: Share,
    usage: &Usage,
) -> Result<(), Refusal> {
    step.own_claim(launch_id, None)?;
    let charged = next.charged.get_or_insert_with(|| Charged {
        launch_id: launch_id.to_owned(),
        ..Charged::default()
    });
    if charged.launch_id != launch_id {
        *charged = Charged {
            launch_id: launch_id.to_owned(),
            ..Charged::default()
        };
    }
    let landed = match share {
        Share::Seat => &mut charged.seat,
        Share::Company => &mut charged.company,
    };
    if *landed {
        return Err(Refusal::AlreadyDone);
    }
    *landed = true;
    charged.input_tokens = usage.input_tokens;
    charged.output_tokens = usage.output_tokens;
    charged.cost_micros = usage.cost_micros;
    effects.push(Effect::AddSpend {
        share,
        usage: *usage,
    });
    Ok(())
}

/// The job's phase record, announced once per job (I3).
pub(super) fn publish_phase(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    phase: &serde_json::Value,
) -> Result<(), Refusal> {
    let current = step.current;
    step.own_claim(launch_id, None)?;
    if current.phase_published.as_deref() == Some(launch_id) {
        return Err(Refusal::AlreadyDone);
    }
    next.phase_published = Some(launch_id.to_owned());
    effects.push(Effect::Announce(Box::new(Event::new(
        events::kind::PHASE_COMPLETED,
        &[&current.turn_id, launch_id],
        &current.turn_id,
        launch_id,
        &current.seat,
        step.now,
        serde_json::json!({ "phase": "sandbox", "record": phase }),
    ))));
    Ok(())
}

/// A completion that asked a question parks on it, announced as
/// `sandbox_clarification_requested`: `resumed → awaiting_clarification`.
pub(super) fn park(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    question: &Question,
) -> Result<(), Refusal> {
    let current = step.current;
    step.own_claim(launch_id, Some(ClaimKind::Completion))?;
    next.status = Status::AwaitingClarification;
    next.claim = None;
    next.answer = None;
    next.question = Some(question.clone());
    effects.push(Effect::Announce(Box::new(Event::new(
        events::kind::CLARIFICATION_REQUESTED,
        &[&current.turn_id, launch_id, &question.asked_at.to_rfc3339()],
        &current.turn_id,
        launch_id,
        &current.seat,
        step.now,
        serde_json::json!({
            "question": question.text,
            "audience": question.audience,
            "audience_handles": question.audience_handles,
            "audience_fallback": question.audience_fallback,
            "conversation_key": current.conversation_key,
            "work_item": current.work_item,
            "branch": question.branch,
        }),
    ))));
    Ok(())
}

/// The box the record names was paused after collection.
pub(super) fn mark_paused(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    if !matches!(
        step.current.status,
        Status::Resumed | Status::AwaitingClarification | Status::Answered
    ) {
        return Err(step.wrong_status("resumed"));
    }
    step.same_box(sandbox_id)?;
    next.paused_at = Some(step.now);
    Ok(())
}
