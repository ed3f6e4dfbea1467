//! What callers hand the lifecycle and what it hands back: a launch's request and outcome, the
//! work the engine is given (a turn, a resume), how the engine says a resumed turn ended, and
//! what answering a run did. Plain data; every field says what it holds.

use std::collections::BTreeMap;

use boxfleet_cluster::inbox::Delivery;
use serde::{Deserialize, Serialize};

/// The class of a refused launch (DESIGN §8.1): a refusal is a result, never a transport error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefusalClass {
    /// nothing is wrong with the request; it cannot run now (the seat is moving, or the store
    /// or box could not be reached): the caller may try again
    Unavailable,
    /// the seat runs another coding job (one at a time): try again when it ends or parks
    Busy,
    /// the request can never run as made (an unknown seat, runner or cell; a model the box
    /// could not route)
    Refused,
    /// the seat's or company's budget does not cover it
    Budget,
}

impl RefusalClass {
    /// The class as one word (a metric's label, a log's field).
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalClass::Unavailable => "unavailable",
            RefusalClass::Busy => "busy",
            RefusalClass::Refused => "refused",
            RefusalClass::Budget => "budget",
        }
    }
}

/// What a launch asks for (the spec's run_sandbox).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchRequest {
    /// the seat's handle the job runs for
    pub seat: String,
    /// the turn the job belongs to; `None`: a new turn id is made
    pub turn_id: Option<String>,
    /// how many jobs of the turn came before this one
    pub iteration: u32,
    /// the brief for a coding agent
    pub brief: String,
    /// what the board and the announcement show; empty: the command, else the brief
    pub task: String,
    /// the suspended conversation: opaque bytes from the engine, written when the job runs
    pub conversation: Vec<u8>,
    /// who asked for the work (a question's `requester` audience)
    pub requester: Option<String>,
    /// the work item the turn is for
    pub work_item: Option<String>,
    /// the conversation the turn reports back to (an answer posted there resumes it)
    pub conversation_key: Option<String>,
    /// the conversation's partition
    pub partition: Option<String>,
    /// `command`, `claude-code`, `opencode`; empty: the seat's role decides
    pub runner: String,
    /// the shell command of a `command` job
    pub command: Option<String>,
    /// the model to send to the box (`--model`); `None`: the seat's provider entry's
    pub model: Option<String>,
    /// seconds a parked box may stay paused (0 = never pause; `None`: the default)
    pub pause_ttl_seconds: Option<u64>,
    /// the check's in-box deadline (its own clock, distinct from the engine's backstop)
    pub timeout_seconds: Option<u64>,
    /// the coding agent's agentic-round cap for this launch; `None`: the role's, then the
    /// company default
    pub max_turns: Option<u32>,
    /// whether the turn owes its conversation a reply (the reply goes back when it ends)
    pub owes_answer: bool,
    /// the trace context the turn carries
    pub trace: Option<String>,
    /// variables the job gets beyond its plan's (a relaunch's `BOXFLEET_ANSWER`, …): they go
    /// into the job's environment only, never into its record
    pub env: BTreeMap<String, String>,
}

/// What a launch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchOutcome {
    /// the job runs: its run record is `running`
    Launched {
        turn_id: String,
        launch_id: String,
        sandbox_id: String,
    },
    /// nothing runs; `reason` says why and what to do
    Refused { class: RefusalClass, reason: String },
}

/// What the resumed turn is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResumeKind {
    /// the job finished: its findings report
    Findings,
    /// a person answered the job's question; its box is still there
    Answer,
    /// a person answered, but the box was reclaimed: the work re-seeds from its branch
    Reseed,
}

/// Work for the engine (DESIGN §8.2, down).
#[derive(Debug, Clone, PartialEq)]
pub enum EngineDown {
    /// An ordinary message to run as a turn; `attempt` counts its deliveries, this one
    /// included.
    Turn {
        seat: String,
        delivery: Delivery,
        attempt: u32,
    },
    /// A suspended turn to resume.
    Resume(Box<Resume>),
    /// A notice: a run ended without the engine settling it (a box gone for good, a resume
    /// broken or abandoned, a seat removed, …). Nothing to take or settle; the durable record
    /// of it is the run's `sandbox_run_failed` event.
    Ended(Box<Ended>),
    /// A notice: a job parked on a question; its answer comes back as a resume.
    Parked(Box<Parked>),
}

impl EngineDown {
    /// The seat the work is for.
    pub fn seat(&self) -> &str {
        match self {
            EngineDown::Turn { seat, .. } => seat,
            EngineDown::Resume(resume) => &resume.seat,
            EngineDown::Ended(ended) => &ended.seat,
            EngineDown::Parked(parked) => &parked.seat,
        }
    }
}

/// A run that ended without the engine settling it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub seat: String,
    pub turn_id: String,
    pub launch_id: String,
    /// the ending's reason (`collect_unreachable`, `resume_broken`, …)
    pub reason: String,
    /// what the ending says happened
    pub detail: String,
}

/// A job that parked on a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    pub seat: String,
    pub turn_id: String,
    pub launch_id: String,
    pub question: String,
    /// who the question is for
    pub audience: String,
}

/// A resume: everything the engine needs is in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// the seat the turn is for
    pub seat: String,
    pub turn_id: String,
    /// the job whose claim this resume settles
    pub launch_id: String,
    pub kind: ResumeKind,
    /// the suspended conversation the engine handed over at launch
    pub conversation: Vec<u8>,
    /// how many jobs of the turn came before the one resumed
    pub iteration: u32,
    pub work_item: Option<String>,
    /// the findings report (Findings), or the answer (Answer / Reseed)
    pub reply: String,
    /// whether the job succeeded (always true for an answer)
    pub succeeded: bool,
    /// the question the job parked on (Answer / Reseed)
    pub question: Option<String>,
    /// the branch the job pushed its work to, when it said
    pub branch: Option<String>,
    /// the shell command of a `command` job, for a relaunch
    pub command: Option<String>,
    /// how many times this claim has been offered, this one included
    pub attempt: u32,
    /// the refs the job said it delivered (findings)
    pub refs: Vec<String>,
}

/// How a resumed turn ended (DESIGN §8.2, up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// the turn is done: `reply` is published as the turn's reply (with the job's own verdict
    /// when the engine knows it), then the run ends and its box is reclaimed
    Finished {
        reply: String,
        succeeded: Option<bool>,
    },
    /// the turn starts another job in the same box (a new launch id)
    Relaunched {
        brief: String,
        conversation: Vec<u8>,
        /// the command of a `command` job; `None`: the last job's
        command: Option<String>,
        /// variables exported to the new job (`BOXFLEET_ANSWER`, …)
        env: BTreeMap<String, String>,
    },
    /// the turn failed after it wrote outside the box: it is not retried
    BrokeAfterExternalWrite { error: String },
    /// the turn failed before it changed anything: the claim goes back for a retry (a
    /// findings resume at most [`super::limits::MAX_FINDINGS_RESUME_REFUSALS`] times, then `resume_broken`)
    Retry { error: String },
    /// the turn could not be re-entered — resuming it broke before the turn began (a
    /// conversation that does not decode, a panic re-entering it): not retried, because every
    /// attempt re-enters the same bytes; the run ends `resume_broken` and a reply no turn took
    /// goes back to the seat
    ResumeBroken { error: String },
}

/// Who is answering a run's question by name (the Runs API's `answer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answerer {
    /// the person the answer is from: the caller, or whom an admin answers for
    pub from: String,
    /// the admin who gave it on `from`'s behalf
    pub given_by: Option<String>,
    /// an admin may answer any question; anyone else as the spec's answer authority allows
    pub admin: bool,
    /// the credential the answer came through: `{role}:{subject}@{key id}`
    pub operator_id: String,
}

/// What answering a run by name did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// the answer is on the record; the run resumes with it
    Recorded,
    /// the answer is on the seat's inbox, behind the job the seat runs (or for the seat's holder
    /// to take): it is recorded, and the run resumed with it, when the seat takes it
    Pending,
    /// the run is not waiting on a question (its status is given)
    NotAwaiting(String),
    /// no such run: it was collected, or never existed
    Gone,
    /// the run is on another job now (its launch id is given)
    WrongLaunch(String),
    /// somebody answered first
    AlreadyAnswered,
}

impl AnswerOutcome {
    /// The outcome's word on the wire.
    pub fn word(&self) -> &'static str {
        match self {
            AnswerOutcome::Recorded => "recorded",
            AnswerOutcome::Pending => "pending",
            AnswerOutcome::NotAwaiting(_) => "not_awaiting",
            AnswerOutcome::Gone => "gone",
            AnswerOutcome::WrongLaunch(_) => "wrong_launch",
            AnswerOutcome::AlreadyAnswered => "already_answered",
        }
    }
}
