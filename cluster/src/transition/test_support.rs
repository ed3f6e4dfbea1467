//! What the rules' tests start from: one seat and its lease, a fixed instant, and a run built
//! in each status the way the transitions leave it. A test takes one, changes what its case
//! needs, and states the exact decision it expects.

use chrono::{DateTime, Duration, Utc};

use crate::events::{self, Event};
use crate::record::{
    Answer, Claim, ClaimKind, Ending, EndingReason, HandBack, Question, RunRecord, Status, Usage,
};

use super::{Decision, Effect, EndingGuard, Fence, Next, Refusal, Share, Transition, decide};

pub(super) const SEAT: &str = "eng";
pub(super) const TURN: &str = "turn-1";
pub(super) const LAUNCH: &str = "launch-1";
/// A launch the run has moved on from.
pub(super) const OLD_LAUNCH: &str = "launch-0";
pub(super) const BOX: &str = "box-1";
pub(super) const OTHER_BOX: &str = "box-2";
/// The lease the runs below were stamped with and the writer holds.
pub(super) const EPOCH: i64 = 7;
pub(super) const DELIVERY: &str = "delivery-1";

/// The instant every decision in these tests is made at.
pub(super) fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2025-03-04T05:06:07Z")
        .expect("a fixed RFC 3339 instant")
        .with_timezone(&Utc)
}

pub(super) fn minutes_ago(minutes: i64) -> DateTime<Utc> {
    now() - Duration::minutes(minutes)
}

/// The writer's lease on the seat.
pub(super) fn fence() -> Fence {
    fence_at(EPOCH)
}

pub(super) fn fence_at(epoch: i64) -> Fence {
    Fence {
        seat: SEAT.into(),
        epoch,
    }
}

/// Decides `transition` on `current` for the writer of [`fence`], at [`now`].
pub(super) fn decide_on(current: &RunRecord, transition: Transition) -> Result<Decision, Refusal> {
    decide(Some(current), &fence(), &transition, now())
}

/// The decision that writes `record` with `effects`.
pub(super) fn writes(record: RunRecord, effects: Vec<Effect>) -> Result<Decision, Refusal> {
    Ok(Decision {
        next: Next::Write(Box::new(record)),
        effects,
    })
}

/// The row as a decision on it starts: a copy stamped with [`now`].
pub(super) fn stamped(current: &RunRecord) -> RunRecord {
    let mut next = current.clone();
    next.updated_at = now();
    next
}

/// An announcement of this run's, made at [`now`].
pub(super) fn announced(
    kind: &str,
    identity: &[&str],
    launch_id: &str,
    body: serde_json::Value,
) -> Effect {
    Effect::Announce(Box::new(Event::new(
        kind,
        identity,
        TURN,
        launch_id,
        SEAT,
        now(),
        body,
    )))
}

/// A row just opened for [`LAUNCH`], an hour ago.
pub(super) fn launching() -> RunRecord {
    let mut record = RunRecord::launching(TURN, LAUNCH, SEAT, "claude", minutes_ago(60));
    record.epoch = EPOCH;
    record.task = "fix the build".into();
    record.work_item = Some("WI-7".into());
    record.conversation_key = Some("conv-1".into());
    record
}

/// A job in flight in [`BOX`], its conversation on the row.
pub(super) fn running() -> RunRecord {
    let mut record = launching();
    record.sandbox_id = Some(BOX.into());
    record.placement = Some("local".into());
    record.job = Some("job-1".into());
    record.conversation = Some(b"conversation".to_vec());
    record.status = Status::Running;
    record
}

/// A finished job's completion, claimed under [`EPOCH`].
pub(super) fn claimed_for_completion() -> RunRecord {
    let mut record = running();
    record.status = Status::Resumed;
    record.claim = Some(Claim {
        kind: ClaimKind::Completion,
        launch_id: LAUNCH.into(),
        from: Status::Running,
        epoch: EPOCH,
        claimed_at: minutes_ago(40),
    });
    record
}

/// The question the run parks on, asked half an hour ago.
pub(super) fn question() -> Question {
    Question {
        text: "which branch?".into(),
        audience: "lead".into(),
        audience_handles: vec!["lead".into()],
        audience_fallback: false,
        asked_at: minutes_ago(30),
        branch: Some("fix/build".into()),
    }
}

/// A run parked on [`question`], its box paused.
pub(super) fn awaiting() -> RunRecord {
    let mut record = running();
    record.status = Status::AwaitingClarification;
    record.question = Some(question());
    record.paused_at = Some(minutes_ago(29));
    record
}

/// A reply to [`question`], posted ten minutes ago, as it arrives (not yet recorded).
pub(super) fn reply(delivery_id: &str) -> Answer {
    Answer {
        text: "main".into(),
        from: "lead".into(),
        delivery_id: delivery_id.into(),
        posted_at: minutes_ago(10),
        recorded_at: minutes_ago(10),
        taken_at: None,
        lost_claims: 0,
        first_lost_at: None,
        attempts: 0,
        first_failed_at: None,
        given_by: None,
        conversation_key: Some("conv-1".into()),
        partition: Some("p-1".into()),
        for_launch: None,
        route: Default::default(),
        operator: None,
    }
}

/// [`DELIVERY`]'s reply as the copy owed back to the seat when it leaves the run untaken.
pub(super) fn owed_copy() -> HandBack {
    HandBack {
        delivery_id: format!("copy-{}", events::derive_id(&["hand_back", DELIVERY])),
        original_delivery_id: DELIVERY.into(),
        text: "main".into(),
        from: "lead".into(),
        posted_at: minutes_ago(10),
        conversation_key: Some("conv-1".into()),
        partition: Some("p-1".into()),
    }
}

/// A parked run with [`DELIVERY`]'s reply recorded, its resume owed.
pub(super) fn answered() -> RunRecord {
    let mut record = awaiting();
    let mut answer = reply(DELIVERY);
    answer.recorded_at = minutes_ago(9);
    record.answer = Some(answer);
    record.status = Status::Answered;
    record
}

/// An answered run claimed for its resume under [`EPOCH`], the answer not yet taken.
pub(super) fn claimed_for_answer() -> RunRecord {
    let mut record = answered();
    record.status = Status::Resumed;
    record.paused_at = None;
    if let Some(answer) = record.answer.as_mut() {
        answer.attempts = 1;
    }
    record.claim = Some(Claim {
        kind: ClaimKind::Answer,
        launch_id: LAUNCH.into(),
        from: Status::Answered,
        epoch: EPOCH,
        claimed_at: minutes_ago(8),
    });
    record
}

/// [`claimed_for_answer`] after its turn took the answer.
pub(super) fn answer_taken() -> RunRecord {
    let mut record = claimed_for_answer();
    if let Some(answer) = record.answer.as_mut() {
        answer.taken_at = Some(minutes_ago(7));
    }
    record
}

/// A run whose ending (`reason`) is decided, its box still named.
pub(super) fn ending(reason: EndingReason) -> RunRecord {
    let mut record = running();
    record.status = Status::Ending;
    record.ending = Some(Ending {
        reason,
        detail: String::new(),
        decided_at: minutes_ago(5),
        epoch: EPOCH,
        event_id: String::new(),
        reply_goes_back: false,
    });
    record
}

/// One of each transition, in declaration order, with arguments that name this run.
pub(super) fn one_of_each() -> Vec<Transition> {
    vec![
        Transition::OpenLaunch {
            record: Box::new(launching()),
        },
        Transition::AttachBox {
            launch_id: LAUNCH.into(),
            sandbox_id: BOX.into(),
            placement: "local".into(),
            job: None,
            host: None,
            boxes_dir: None,
        },
        Transition::CommitSuspension {
            launch_id: LAUNCH.into(),
            conversation: Vec::new(),
        },
        Transition::ClaimCompletion {
            launch_id: LAUNCH.into(),
        },
        Transition::HandBackClaim {
            launch_id: LAUNCH.into(),
            collect_failed: false,
        },
        Transition::Charge {
            launch_id: LAUNCH.into(),
            share: Share::Seat,
            usage: Usage::default(),
        },
        Transition::PublishPhase {
            launch_id: LAUNCH.into(),
            phase: serde_json::json!({}),
        },
        Transition::Park {
            launch_id: LAUNCH.into(),
            question: question(),
        },
        Transition::RecordAnswer {
            answer: reply(DELIVERY),
        },
        Transition::ClaimAnswer {
            launch_id: LAUNCH.into(),
        },
        Transition::Take {
            launch_id: LAUNCH.into(),
        },
        Transition::Revive,
        Transition::LetGo,
        Transition::ClearHandBack {
            delivery_ids: Vec::new(),
        },
        Transition::DecideEnding {
            reason: EndingReason::Cancelled,
            detail: String::new(),
            guard: EndingGuard::Any,
            announce: None,
        },
        Transition::ReleaseBox {
            sandbox_id: BOX.into(),
        },
        Transition::RefuseResume {
            launch_id: LAUNCH.into(),
        },
        Transition::Finish,
        Transition::ExpirePause {
            sandbox_id: BOX.into(),
        },
        Transition::BoxReclaimed {
            sandbox_id: BOX.into(),
        },
        Transition::MarkPaused {
            sandbox_id: BOX.into(),
        },
        Transition::Relaunch {
            launch_id: LAUNCH.into(),
            new_launch_id: "launch-2".into(),
            brief: String::new(),
        },
        Transition::RevertRelaunch {
            launch_id: LAUNCH.into(),
            keep_box: false,
        },
        Transition::FenceRun { owner: None },
        Transition::AppendBridgeCall {
            line: String::new(),
        },
    ]
}
