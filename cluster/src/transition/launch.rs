//! A job's launch: the row opens as `launching`, names its box and job, takes the suspended
//! conversation (`launching → running`), and a resumed turn relaunches in the same box
//! (`resumed → launching`). Each launch is announced as `sandbox_run_started`.

use chrono::{DateTime, Utc};

use crate::events::{self, Event};
use crate::record::{ClaimKind, RunRecord, Status};

use super::{Decision, Effect, Fence, Next, Refusal, Step, Transition};

/// Opens the row: the only transition of an absent row.
pub(super) fn open_launch(
    fence: &Fence,
    transition: &Transition,
    now: DateTime<Utc>,
) -> Result<Decision, Refusal> {
    let Transition::OpenLaunch { record } = transition else {
        return Err(Refusal::Missing);
    };
    if record.status != Status::Launching {
        return Err(Refusal::Invalid(format!(
            "a launch opens its row as launching, not {}",
            record.status
        )));
    }
    if record.seat != fence.seat {
        return Err(Refusal::WrongSeat(record.seat.clone()));
    }
    let mut record = record.as_ref().clone();
    record.epoch = fence.epoch;
    record.created_at = now;
    record.updated_at = now;
    let effects = vec![started_event(&record, now)];
    Ok(Decision {
        next: Next::Write(Box::new(record)),
        effects,
    })
}

pub(super) fn attach_box(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
    sandbox_id: &str,
    placement: &str,
    job: &Option<String>,
) -> Result<(), Refusal> {
    step.require_status(Status::Launching)?;
    step.same_launch(launch_id)?;
    next.sandbox_id = Some(sandbox_id.to_owned());
    next.placement = Some(placement.to_owned());
    next.job = job.clone();
    Ok(())
}

pub(super) fn commit_suspension(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
    conversation: &[u8],
) -> Result<(), Refusal> {
    step.require_status(Status::Launching)?;
    step.same_launch(launch_id)?;
    next.conversation = Some(conversation.to_vec());
    next.status = Status::Running;
    Ok(())
}

/// A new job in the same box: everything of the old job's goes, the iteration counts up.
pub(super) fn relaunch(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    new_launch_id: &str,
    brief: &str,
) -> Result<(), Refusal> {
    let claim = step.own_claim(launch_id, None)?;
    if claim.kind == ClaimKind::Answer && !step.current.answer_taken() {
        return Err(Refusal::AnswerNotTaken);
    }
    if new_launch_id == launch_id {
        return Err(Refusal::Invalid("a relaunch needs a new launch id".into()));
    }
    next.status = Status::Launching;
    next.launch_id = new_launch_id.to_owned();
    next.iteration += 1;
    next.brief = brief.to_owned();
    next.claim = None;
    next.question = None;
    next.answer = None;
    next.declined_answers.clear();
    next.conversation = None;
    next.charged = None;
    next.phase_published = None;
    next.paused_at = None;
    next.collect_failures = 0;
    next.model = None;
    effects.push(started_event(next, step.now));
    Ok(())
}

fn started_event(record: &RunRecord, now: DateTime<Utc>) -> Effect {
    Effect::Announce(Box::new(Event::new(
        events::kind::RUN_STARTED,
        &[&record.turn_id, &record.launch_id],
        &record.turn_id,
        &record.launch_id,
        &record.seat,
        now,
        serde_json::json!({
            "coding_agent": record.coding_agent,
            "work_item": record.work_item,
            "task": record.task,
            "iteration": record.iteration,
        }),
    )))
}
