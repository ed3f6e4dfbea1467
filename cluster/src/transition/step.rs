//! The vocabulary of the run state machine: the lease a write is made under, the
//! transitions, why one is refused, what a decision writes and announces, and the `Step` a
//! rule reads. Everything in `transition/` names these; this file names nothing in it.

use chrono::{DateTime, Utc};

use crate::events::Event;
use crate::record::{Answer, EndingReason, Question, RunRecord, Status, Usage};
use crate::stranded::StrandedBox;

/// Revivals of one answer before its next dead claim is reaped (sandbox.MaxAnswerRevivals).
pub const MAX_ANSWER_REVIVALS: u32 = 3;
/// The pause TTL when a run names none.
pub const DEFAULT_PAUSE_TTL_SECONDS: u64 = 1800;

/// The seat lease a write is made under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub seat: String,
    /// the seat holder key's create_revision when this node acquired it
    pub epoch: i64,
}

/// Which share of a job's charge a write lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    Seat,
    Company,
    /// the work item the run was launched for (spec: "Charged to the task too")
    Task,
}

/// What must hold for an ending to be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndingGuard {
    /// any run not already ending (a reap, an operator, a failed launch)
    Any,
    /// only while the run is still the claim this writer took for `launch_id`
    Claim { launch_id: String },
    /// only while the run is still launching `launch_id` (a write reported refused may have
    /// landed: a run that is running now is left alone)
    Launching { launch_id: String },
}

/// One transition of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// Opens the row as `launching`; the seat is busy from this write.
    OpenLaunch { record: Box<RunRecord> },
    /// Names the box and job the launch started, and where the box lives: the host and boxes
    /// dir of a local box (both `None` for a remote one) — a re-seed's new box can be on
    /// another host than the box the run had before.
    AttachBox {
        launch_id: String,
        sandbox_id: String,
        placement: String,
        job: Option<String>,
        host: Option<String>,
        boxes_dir: Option<String>,
    },
    /// The unwinding turn writes its conversation: `launching → running`.
    CommitSuspension {
        launch_id: String,
        conversation: Vec<u8>,
    },
    /// At most once per job: `running → resumed` (I2).
    ClaimCompletion { launch_id: String },
    /// Gives a claim back to the status it was taken from.
    HandBackClaim {
        launch_id: String,
        collect_failed: bool,
    },
    /// Lands one share of the job's charge (I3).
    Charge {
        launch_id: String,
        share: Share,
        usage: Usage,
    },
    /// Publishes the job's phase record once (I3).
    PublishPhase {
        launch_id: String,
        phase: serde_json::Value,
    },
    /// Parks the claimed run on its question: `resumed → awaiting_clarification`.
    Park {
        launch_id: String,
        question: Question,
    },
    /// Records the first qualifying reply: `awaiting_clarification | reseed → answered` (I4).
    RecordAnswer { answer: Answer },
    /// Claims an answered run for its resume: `answered → resumed`.
    ClaimAnswer { launch_id: String },
    /// The last moment before the resumed turn runs: the answer is spent (I5).
    Take { launch_id: String },
    /// Gives a dead claim back to its answer, within the revival bounds (I5).
    Revive,
    /// Lets an answer go: declined for this question, its copy owed to the seat (I7).
    LetGo,
    /// Clears copies that were published to the seat's inbox.
    ClearHandBack { delivery_ids: Vec<String> },
    /// Decides how the run ends; the terms never change afterwards (I6).
    DecideEnding {
        reason: EndingReason,
        detail: String,
        guard: EndingGuard,
        /// what the decision announces beside its own events: a finished turn's reply
        /// (`turn_replied`), so the run never ends without it
        announce: Option<Box<crate::events::Event>>,
    },
    /// The box the record names was killed (I8).
    ReleaseBox { sandbox_id: String },
    /// The engine refused to resume a completion's findings: the claim goes back, as
    /// [`Transition::HandBackClaim`] gives it, with the refusal counted on the row.
    RefuseResume { launch_id: String },
    /// Deletes an ended row: only with its box reclaimed and nothing owed (I7, I8).
    Finish,
    /// The pause TTL passed: the box is released from the run and owed its kill
    /// (`reclaim_owed`); parked → re-seed.
    ExpirePause { sandbox_id: String },
    /// The box a released run owed was killed: the record stops naming it.
    BoxReclaimed { sandbox_id: String },
    /// A local box on a host the writer cannot reach is let go of: the record stops naming it
    /// (as the box it names, or as the one it owes a kill) and, in the same write, names it
    /// under `stranded/{host}/` for a node on that host to kill (I8).
    StrandBox { sandbox_id: String },
    /// The box was paused after collection.
    MarkPaused { sandbox_id: String },
    /// A resumed turn starts another job in the same box: `resumed → launching`.
    Relaunch {
        launch_id: String,
        new_launch_id: String,
        brief: String,
    },
    /// A relaunch whose node stopped before its conversation committed goes back to its
    /// answer, exactly as the run was before the relaunch, within the revival bounds (I12).
    /// `keep_box`: the box the relaunch reused still exists and what the relaunch started in
    /// it was stopped, so the answer reruns there; otherwise the box was killed (or was gone)
    /// and the answer re-seeds.
    RevertRelaunch { launch_id: String, keep_box: bool },
    /// A seat's new holder stamps its lease on the run (the reap's fence), and itself as the
    /// run's owner when it names one.
    FenceRun { owner: Option<String> },
    /// Appends a tool-bridge call to the bounded log.
    AppendBridgeCall { line: String },
}

impl Transition {
    /// The transition's name, for logs and refusals.
    pub fn name(&self) -> &'static str {
        match self {
            Transition::OpenLaunch { .. } => "open_launch",
            Transition::AttachBox { .. } => "attach_box",
            Transition::CommitSuspension { .. } => "commit_suspension",
            Transition::ClaimCompletion { .. } => "claim_completion",
            Transition::HandBackClaim { .. } => "hand_back_claim",
            Transition::Charge { .. } => "charge",
            Transition::PublishPhase { .. } => "publish_phase",
            Transition::Park { .. } => "park",
            Transition::RecordAnswer { .. } => "record_answer",
            Transition::ClaimAnswer { .. } => "claim_answer",
            Transition::Take { .. } => "take",
            Transition::Revive => "revive",
            Transition::LetGo => "let_go",
            Transition::ClearHandBack { .. } => "clear_hand_back",
            Transition::DecideEnding { .. } => "decide_ending",
            Transition::ReleaseBox { .. } => "release_box",
            Transition::Finish => "finish",
            Transition::RefuseResume { .. } => "refuse_resume",
            Transition::RevertRelaunch { .. } => "revert_relaunch",
            Transition::ExpirePause { .. } => "expire_pause",
            Transition::BoxReclaimed { .. } => "box_reclaimed",
            Transition::StrandBox { .. } => "strand_box",
            Transition::MarkPaused { .. } => "mark_paused",
            Transition::Relaunch { .. } => "relaunch",
            Transition::FenceRun { .. } => "fence_run",
            Transition::AppendBridgeCall { .. } => "append_bridge_call",
        }
    }
}

/// Why a transition does not apply to the run as read. None of these is a store failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no run record")]
    Missing,
    #[error("the run already exists")]
    Exists,
    #[error("{transition} needs status {expected}, the run is {found}")]
    WrongStatus {
        transition: &'static str,
        expected: &'static str,
        found: Status,
    },
    #[error("{transition} is for job {asked}, the run is on job {current}")]
    WrongLaunch {
        transition: &'static str,
        asked: String,
        current: String,
    },
    #[error("an ending is decided ({0}); the run takes no other write")]
    EndingDecided(EndingReason),
    #[error("sandbox_seat_not_held: no seat lease held")]
    NoLease,
    #[error("sandbox_seat_not_held: the run is fenced by a newer lease ({row} > {writer})")]
    Fenced { row: i64, writer: i64 },
    #[error("the run belongs to seat {0}")]
    WrongSeat(String),
    #[error("the claim was taken under another lease")]
    NotClaimant,
    #[error("the question has no anchor (asked_at)")]
    NoAnchor,
    #[error("the delivery was posted before the question was asked")]
    PostedBeforeQuestion,
    #[error("the delivery was declined for this question")]
    Declined,
    #[error("this delivery's answer is already recorded")]
    AlreadyRecorded,
    #[error("the question is already answered")]
    AlreadyAnswered,
    #[error("a turn took the answer: it is spent")]
    AnswerTaken,
    #[error("a turn took the findings: the claim is never revived")]
    CompletionTaken,
    #[error("the claim's revivals are spent ({lost_claims} lost claims)")]
    RevivalsSpent { lost_claims: u32 },
    #[error("the run still owes the seat a reply copy")]
    OwesHandBack,
    #[error("the box {0} is not reclaimed")]
    BoxNotReclaimed(String),
    #[error("the record names box {found:?}, not {asked}")]
    WrongBox {
        asked: String,
        found: Option<String>,
    },
    #[error("already done for this job")]
    AlreadyDone,
    #[error("the record is not valid: {0}")]
    Invalid(String),
}

/// What must land in the decision's txn besides the record.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Create the event if it is not there yet (I10).
    Announce(Box<Event>),
    /// Record the delivery as worked in the completion ledger.
    Spend { delivery_id: String },
    /// Add the job's usage to the share's spend counters.
    AddSpend { share: Share, usage: Usage },
    /// Name a box the record lets go of for a node on its host to kill.
    Strand(Box<StrandedBox>),
}

/// The next state of the row.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Write(Box<RunRecord>),
    Delete,
}

/// A decided transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub next: Next,
    pub effects: Vec<Effect>,
}

/// What a rule decides on: the row as read, the writer's lease, the transition asked for (its
/// name goes into refusals) and the instant the decision is made at.
pub(super) struct Step<'a> {
    pub(super) current: &'a RunRecord,
    pub(super) fence: &'a Fence,
    pub(super) transition: &'a Transition,
    pub(super) now: DateTime<Utc>,
}
