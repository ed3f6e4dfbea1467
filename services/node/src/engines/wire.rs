//! The Engine API's down messages on the wire (`proto/boxfleet/v1/engine.proto`): the
//! lifecycle's work turned into what an engine reads, and the node's refusals and closings.

use boxfleet_actors::lifecycle::text::turn_id_for_delivery;
use boxfleet_actors::lifecycle::{EngineDown, ResumeKind};
use boxfleet_proto::v1 as pb;

/// The work as the engine receives it.
pub fn down_message(work: EngineDown) -> pb::EngineDown {
    let msg = match work {
        EngineDown::Turn {
            seat,
            delivery,
            attempt,
        } => pb::engine_down::Msg::Turn(pb::Turn {
            turn_id: turn_id_for_delivery(&seat, &delivery.delivery_id),
            seat,
            delivery_id: delivery.delivery_id,
            conversation_key: delivery.conversation_key.unwrap_or_default(),
            partition: delivery.partition.unwrap_or_default(),
            from: delivery.from,
            text: delivery.text,
            posted_at: delivery.posted_at.to_rfc3339(),
            attempt,
        }),
        EngineDown::Resume(resume) => {
            let kind = match resume.kind {
                ResumeKind::Findings => pb::resume::Kind::Findings,
                ResumeKind::Answer => pb::resume::Kind::Answer,
                ResumeKind::Reseed => pb::resume::Kind::Reseed,
            };
            let answer = match resume.kind {
                ResumeKind::Findings => String::new(),
                ResumeKind::Answer | ResumeKind::Reseed => resume.reply.clone(),
            };
            pb::engine_down::Msg::Resume(pb::Resume {
                seat: resume.seat,
                turn_id: resume.turn_id,
                launch_id: resume.launch_id,
                conversation: resume.conversation,
                reply: resume.reply,
                iteration: resume.iteration,
                work_item: resume.work_item.unwrap_or_default(),
                kind: kind as i32,
                question: resume.question.unwrap_or_default(),
                answer,
                branch: resume.branch.unwrap_or_default(),
                succeeded: resume.succeeded,
                attempt: resume.attempt,
                command: resume.command.unwrap_or_default(),
                ending: String::new(),
                refs: resume.refs,
            })
        }
        EngineDown::Ended(ended) => pb::engine_down::Msg::Resume(pb::Resume {
            seat: ended.seat,
            turn_id: ended.turn_id,
            launch_id: ended.launch_id,
            kind: pb::resume::Kind::Failed as i32,
            reply: ended.detail,
            ending: ended.reason,
            succeeded: false,
            ..pb::Resume::default()
        }),
        EngineDown::Parked(parked) => pb::engine_down::Msg::Parked(pb::Parked {
            seat: parked.seat,
            turn_id: parked.turn_id,
            launch_id: parked.launch_id,
            question: parked.question,
            audience: parked.audience,
        }),
    };
    pb::EngineDown { msg: Some(msg) }
}

/// Why the node did not act on an Up message (`Refused.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    NotYours,
    UnknownTurn,
    NotSent,
    WrongLaunch,
    AlreadyTaken,
    NotTaken,
    NoOutcome,
    HelloAgain,
    Empty,
    RefusedByRun,
    Unavailable,
    BadInput,
    UnknownCall,
}

impl Reason {
    pub fn word(self) -> &'static str {
        match self {
            Reason::NotYours => "not_yours",
            Reason::UnknownTurn => "unknown_turn",
            Reason::NotSent => "not_sent",
            Reason::WrongLaunch => "wrong_launch",
            Reason::AlreadyTaken => "already_taken",
            Reason::NotTaken => "not_taken",
            Reason::NoOutcome => "no_outcome",
            Reason::HelloAgain => "hello_again",
            Reason::Empty => "empty",
            Reason::RefusedByRun => "refused_by_run",
            Reason::Unavailable => "unavailable",
            Reason::BadInput => "bad_input",
            Reason::UnknownCall => "unknown_call",
        }
    }
}

/// A refusal of one Up message, naming what it was about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub message: String,
}

impl Refusal {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// The `Refused` down message for `refusal` of the Up message `up`.
pub fn refused(up: &pb::EngineUp, refusal: Refusal) -> pb::EngineDown {
    let mut refused = pb::Refused {
        reason: refusal.reason.word().to_owned(),
        message: refusal.message,
        ..pb::Refused::default()
    };
    match &up.msg {
        Some(pb::engine_up::Msg::Hello(_)) => refused.up = "hello".into(),
        Some(pb::engine_up::Msg::Ack(ack)) => {
            refused.up = "ack".into();
            refused.seat.clone_from(&ack.seat);
            refused.delivery_id.clone_from(&ack.delivery_id);
        }
        Some(pb::engine_up::Msg::Defer(defer)) => {
            refused.up = "defer".into();
            refused.seat.clone_from(&defer.seat);
            refused.delivery_id.clone_from(&defer.delivery_id);
        }
        Some(pb::engine_up::Msg::Take(take)) => {
            refused.up = "take".into();
            refused.turn_id.clone_from(&take.turn_id);
            refused.launch_id.clone_from(&take.launch_id);
        }
        Some(pb::engine_up::Msg::Settle(settle)) => {
            refused.up = "settle".into();
            refused.turn_id.clone_from(&settle.turn_id);
            refused.launch_id.clone_from(&settle.launch_id);
        }
        Some(pb::engine_up::Msg::ToolResult(result)) => {
            refused.up = "tool_result".into();
            refused.delivery_id.clone_from(&result.call_id);
        }
        None => {}
    }
    pb::EngineDown {
        msg: Some(pb::engine_down::Msg::Refused(refused)),
    }
}

/// The last message of a stream the node ends.
pub fn closing(reason: &str, message: String) -> pb::EngineDown {
    pb::EngineDown {
        msg: Some(pb::engine_down::Msg::Closing(pb::Closing {
            reason: reason.to_owned(),
            message,
        })),
    }
}
