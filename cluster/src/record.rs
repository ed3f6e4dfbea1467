//! The run record (DESIGN §6): one JSON document per `turn_id` under `runs/{turn_id}`.
//!
//! A record keeps every key it cannot read: [`RunRecord::extra`] collects unknown keys and
//! writes them back, so a rolling upgrade never strips what a newer build added.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a run is in its life (DESIGN §6).
///
/// ```text
///  open_launch ─▶ launching ─commit_suspension─▶ running ─claim_completion─▶ resumed
///  resumed(completion) ─park─▶ awaiting_clarification ─record_answer─▶ answered
///  awaiting_clarification ─expire_pause─▶ reseed ─record_answer─▶ answered
///  answered ─claim_answer─▶ resumed(answer) ─take─▶ (taken) ─relaunch─▶ launching
///  resumed ─hand_back_claim─▶ the status it was claimed from
///  resumed(answer, not taken) ─revive─▶ answered          answered ─let_go─▶ awaiting | reseed
///  any but ending ─decide_ending─▶ ending ─finish─▶ (deleted)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// job started, conversation not yet on the row: never polled, claimed or resumed
    Launching,
    /// conversation on the row, job in flight: polled; its completion is claimable
    Running,
    /// a claim (completion or answer) is being worked: the at-most-once gate
    Resumed,
    /// parked on a question, box paused, seat free
    AwaitingClarification,
    /// a reply is recorded; its resume is owed
    Answered,
    /// parked, box reclaimed; an answer re-seeds from the pushed branch
    Reseed,
    /// an ending is decided; its terms never change
    Ending,
}

impl Status {
    /// The record's own word for the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Launching => "launching",
            Status::Running => "running",
            Status::Resumed => "resumed",
            Status::AwaitingClarification => "awaiting_clarification",
            Status::Answered => "answered",
            Status::Reseed => "reseed",
            Status::Ending => "ending",
        }
    }

    /// Whether a run in this status holds its seat's inbox.
    pub fn holds_seat(self) -> bool {
        matches!(
            self,
            Status::Launching
                | Status::Running
                | Status::Resumed
                | Status::Answered
                | Status::Ending
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a claim was taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    Completion,
    Answer,
}

/// The at-most-once claim a `resumed` run is under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub kind: ClaimKind,
    /// the job the claim is for; a claim for an older job claims nothing
    pub launch_id: String,
    /// the status a hand-back returns the run to
    pub from: Status,
    /// the seat lease the claim was taken under; its later writes carry it back
    pub epoch: i64,
    pub claimed_at: DateTime<Utc>,
}

/// What a run's completion claims went through: a claim no turn took whose node stopped is
/// revived (the run goes back to `running` and the completion is collected again) at most
/// [`MAX_ANSWER_REVIVALS`](crate::transition::MAX_ANSWER_REVIVALS) times within one pause TTL
/// of the first loss, as an answer's is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionClaims {
    /// the job whose completion a resumed turn took (its writes may reach outside the engine
    /// from then on, so the claim is never revived)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_launch_id: Option<String>,
    #[serde(default)]
    pub lost_claims: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_lost_at: Option<DateTime<Utc>>,
}

/// A question the run parked on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub text: String,
    /// the audience as the agent wrote it
    pub audience: String,
    /// the seats it is put to, resolved once at the park
    #[serde(default)]
    pub audience_handles: Vec<String>,
    /// whether the audience named nobody and the lead chain was used instead
    #[serde(default)]
    pub audience_fallback: bool,
    /// the instant the question was put: only a delivery posted at or after it answers
    pub asked_at: DateTime<Utc>,
    /// the branch the work was pushed to, when known
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// A recorded reply to the question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub text: String,
    /// who answered (a seat handle)
    pub from: String,
    /// the admin who gave the answer on `from`'s behalf, when it was not `from` itself
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_by: Option<String>,
    /// the delivery that carried it (spent in the ledger once the reply leaves the run)
    pub delivery_id: String,
    /// the delivery's own post time
    pub posted_at: DateTime<Utc>,
    pub recorded_at: DateTime<Utc>,
    /// the last moment before the resumed turn ran; a taken answer is spent
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<DateTime<Utc>>,
    /// claims of this answer whose node stopped before its turn took it
    #[serde(default)]
    pub lost_claims: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_lost_at: Option<DateTime<Utc>>,
    /// resume attempts made for this answer
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failed_at: Option<DateTime<Utc>>,
    /// the conversation the reply came on (where its copy goes back)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// the job whose question it answers, when the answer names one: checked in the write
    /// that records it, so an answer to an older question never lands on a newer one
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_launch: Option<String>,
    /// how it came: a chat reply matched to the parked question, or an answer naming the run
    #[serde(default, skip_serializing_if = "AnswerRoute::is_chat")]
    pub route: AnswerRoute,
    /// for an answer given by naming the run: who answered as the chart names them and the
    /// credential they came through (`sandbox_run_answered`'s `answered_by_kind`, `operator_id`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<Operator>,
}

impl Answer {
    /// The answer a delivery carries, not yet recorded: recorded `now` by the write that takes
    /// it, for the parked job `for_launch`, on its conversation (a chat reply's own; an answer
    /// by name takes its run's).
    pub fn of_delivery(
        delivery: &crate::inbox::Delivery,
        for_launch: &str,
        route: AnswerRoute,
        now: DateTime<Utc>,
    ) -> Answer {
        Answer {
            text: delivery.text.clone(),
            from: delivery.from.clone(),
            delivery_id: delivery.delivery_id.clone(),
            posted_at: delivery.posted_at,
            recorded_at: now,
            taken_at: None,
            lost_claims: 0,
            first_lost_at: None,
            attempts: 0,
            first_failed_at: None,
            given_by: None,
            conversation_key: delivery.conversation_key.clone(),
            partition: delivery.partition.clone(),
            for_launch: Some(for_launch.to_owned()),
            route,
            operator: None,
        }
    }
}

/// Who gave an answer by naming its run, beyond their handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operator {
    /// the kind of seat the person holds in the chart (`person`, `agent`), or `unlisted`
    pub answered_by_kind: String,
    /// the credential they came through: `{role}:{subject}@{key id}`
    pub operator_id: String,
}

/// How an answer reached its run (`sandbox_run_answered`'s `route`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerRoute {
    /// a reply on the seat's inbox, offered to its parked question
    #[default]
    Chat,
    /// `answer_run`: an answer naming the run (the CLI's `boxfleet answer`)
    Operator,
}

impl AnswerRoute {
    pub fn is_chat(&self) -> bool {
        *self == AnswerRoute::Chat
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AnswerRoute::Chat => "chat",
            AnswerRoute::Operator => "operator",
        }
    }
}

/// A copy of a reply owed back to the seat's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandBack {
    /// the copy's own delivery id, derived from the original's
    pub delivery_id: String,
    pub original_delivery_id: String,
    pub text: String,
    pub from: String,
    pub posted_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndingReason {
    /// the resumed turn finished: the normal end, announced by the turn's own phase events
    Finished,
    /// the resumed turn broke after it wrote outside the engine; settled, never retried
    BrokeAfterExternalWrite,
    /// a launch failed after opening the row
    LaunchFailed,
    /// the box could not be reached to collect
    CollectUnreachable,
    /// a claim that could not be handed back
    ClaimUnreverted,
    /// reaped by a seat's new holder: a launch or claim whose node stopped
    AbandonedTail,
    /// the resume broke before its turn began
    ResumeBroken,
    /// the job was started but the conversation a resume re-enters never reached the record
    SuspensionUnrecorded,
    /// nothing to re-enter (no conversation this build can decode)
    NoConversation,
    /// the run's model did not match the model requested
    ModelMismatch,
    /// an operator ended it
    Cancelled,
    /// the seat left the company's agent seats (removed from the chart, or made a person's)
    /// and was not made an agent's again within the retirement grace
    SeatRemoved,
}

impl EndingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndingReason::Finished => "finished",
            EndingReason::BrokeAfterExternalWrite => "broke_after_external_write",
            EndingReason::LaunchFailed => "launch_failed",
            EndingReason::CollectUnreachable => "collect_unreachable",
            EndingReason::ClaimUnreverted => "claim_unreverted",
            EndingReason::AbandonedTail => "abandoned_tail",
            EndingReason::ResumeBroken => "resume_broken",
            EndingReason::SuspensionUnrecorded => "suspension_unrecorded",
            EndingReason::NoConversation => "no_conversation",
            EndingReason::ModelMismatch => "model_mismatch",
            EndingReason::Cancelled => "cancelled",
            EndingReason::SeatRemoved => "seat_removed",
        }
    }

    /// Whether the ending is a loss, announced as `sandbox_run_failed`.
    pub fn is_failure(self) -> bool {
        self != EndingReason::Finished
    }
}

impl std::fmt::Display for EndingReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The terms of a decided ending. Fixed once written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ending {
    pub reason: EndingReason,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    pub decided_at: DateTime<Utc>,
    /// the lease the ending was decided under
    pub epoch: i64,
    /// the announcement's id (derived from run, ending and instant); empty when not announced
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub event_id: String,
    /// whether a person's reply goes back to the seat
    pub reply_goes_back: bool,
}

/// Which shares of a job's charge have landed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charged {
    /// the job the charge is for
    pub launch_id: String,
    pub seat: bool,
    pub company: bool,
    /// the task's share (a run launched for a work item)
    #[serde(default)]
    pub task: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_micros: u64,
}

pub use crate::phase::ModelReceipt;

/// Token usage carried by a parked run until its resume charges it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_micros: u64,
}

/// What an answer's relaunch replaced on the row, kept until the new job's conversation
/// commits: a relaunch whose node stopped before then goes back to exactly this
/// (`revert_relaunch`), so the answer is resumed again into the same conversation, the same
/// job's command, and the same box where it still exists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelaunchedFrom {
    /// the job that asked the question the answer answers
    pub launch_id: String,
    pub iteration: u32,
    pub brief: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at: Option<DateTime<Utc>>,
    /// the suspended conversation the answer resumes into
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Vec<u8>>,
    /// the asking job (its runner, its command), as `RunRecord::job` named it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// the box the relaunch reused; `None`: a re-seed, whose new box is the relaunch's own
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declined_answers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charged: Option<Charged>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_published: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelReceipt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<DateTime<Utc>>,
}

/// Bound on the bridge-call log: this many first and last entries are kept, the middle elided.
pub const BRIDGE_LOG_HEAD: usize = 16;
pub const BRIDGE_LOG_TAIL: usize = 48;

/// One run's durable record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    // identity
    pub turn_id: String,
    pub launch_id: String,
    #[serde(default)]
    pub iteration: u32,
    /// the seat's handle
    pub seat: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub coding_agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// the host a local box lives on (`direct`, `container`): only nodes on that host reach it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// where on that host the box lives (the launching node's boxes dir): a node on the host
    /// with a boxes dir of its own still finds it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boxes_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_id: Option<String>,
    /// the job handle in the box (runner-specific)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    pub status: Status,

    // ownership
    /// the node incarnation driving the run
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// the seat lease that last stamped the row (launch, claim, recovery fence)
    #[serde(default)]
    pub epoch: i64,

    // what the turn asked for and the suspended conversation
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub brief: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task: String,
    /// the suspended conversation: opaque bytes from the engine, base64 in JSON
    #[serde(
        default,
        with = "base64_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub conversation: Option<Vec<u8>>,

    // report-back
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_item: Option<String>,
    #[serde(default)]
    pub owes_answer: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,

    // the claim, the question and its answer
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// deliveries that may never answer this question again
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declined_answers: Vec<String>,
    /// copies of replies owed back to the seat
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hand_back: Vec<HandBack>,

    // ending, charge, publishing
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ending: Option<Ending>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charged: Option<Charged>,
    /// the job whose phase record was published
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_published: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelReceipt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_usage: Option<Usage>,

    // the box's timers
    /// seconds a parked box may stay paused; absent is not 0 (0 = never pause)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_ttl_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<DateTime<Utc>>,
    /// a box the pause reaper released from the run and has still to kill: the release lands
    /// first, so an answer's claim racing the reaper keeps its box, and the box stays named
    /// here until its kill is confirmed, so a node that stops between the two leaks nothing
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_owed: Option<String>,
    /// failed attempts to read the finished job's box since a collection last read it
    #[serde(default)]
    pub collect_failures: u32,
    /// when the first of those failed (the allowance spans a minute from it)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collect_failed_since: Option<DateTime<Utc>>,
    /// times the engine refused to resume this job's findings (a retry that handed the claim
    /// back); past the bound the run ends `resume_broken`
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resume_refusals: u32,
    /// completion claims: the resumed turn's take, and the claims lost with their node and
    /// revived (DESIGN §6 I12)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionClaims>,

    /// the tool bridge's calls, head and tail kept, the middle elided
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bridge_calls: Vec<String>,
    #[serde(default)]
    pub bridge_calls_elided: u64,

    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// when the store named the current job: the launch that opened the row, or the relaunch
    /// that answered or re-seeded it (its phase record's `started_at`); absent on a row an
    /// older build wrote, which then reads as `created_at`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at: Option<DateTime<Utc>>,

    /// what an answer's relaunch replaced, until its conversation commits
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaunched_from: Option<Box<RelaunchedFrom>>,

    /// keys this build does not know, written back as they were read
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl RunRecord {
    /// A fresh record for a launch: status `launching`, nothing else decided.
    pub fn launching(
        turn_id: impl Into<String>,
        launch_id: impl Into<String>,
        seat: impl Into<String>,
        coding_agent: impl Into<String>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            turn_id: turn_id.into(),
            launch_id: launch_id.into(),
            iteration: 0,
            seat: seat.into(),
            seat_id: None,
            role: None,
            coding_agent: coding_agent.into(),
            placement: None,
            host: None,
            boxes_dir: None,
            sandbox_id: None,
            job: None,
            status: Status::Launching,
            owner: None,
            epoch: 0,
            brief: String::new(),
            task: String::new(),
            conversation: None,
            conversation_key: None,
            partition: None,
            requester: None,
            work_item: None,
            owes_answer: false,
            trace: None,
            claim: None,
            question: None,
            answer: None,
            declined_answers: Vec::new(),
            hand_back: Vec::new(),
            ending: None,
            charged: None,
            phase_published: None,
            model: None,
            pending_usage: None,
            pause_ttl_seconds: None,
            paused_at: None,
            reclaim_owed: None,
            collect_failures: 0,
            collect_failed_since: None,
            resume_refusals: 0,
            completion: None,
            bridge_calls: Vec::new(),
            bridge_calls_elided: 0,
            created_at: now,
            updated_at: now,
            launched_at: None,
            relaunched_from: None,
            extra: BTreeMap::new(),
        }
    }

    /// Reads a record from its stored JSON.
    pub fn from_json(key: &str, bytes: &[u8]) -> Result<Self, crate::Error> {
        serde_json::from_slice(bytes).map_err(|error| crate::Error::Decode {
            key: key.to_owned(),
            message: error.to_string(),
        })
    }

    /// The stored JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // a record of plain strings, numbers and maps always serializes
        serde_json::to_vec(self).unwrap_or_else(|error| panic!("run record serializes: {error}"))
    }

    /// Whether a resumed turn took the completion the run is claimed for.
    pub fn completion_taken(&self) -> bool {
        let claimed = self.claim.as_ref().map(|c| c.launch_id.as_str());
        claimed.is_some()
            && self
                .completion
                .as_ref()
                .and_then(|c| c.taken_launch_id.as_deref())
                == claimed
    }

    /// Whether the answer on the row was taken by a turn (and so is spent).
    pub fn answer_taken(&self) -> bool {
        self.answer.as_ref().is_some_and(|a| a.taken_at.is_some())
    }

    /// The status a parked run returns to when its answer leaves it: paused box or re-seed.
    pub fn parked_status(&self) -> Status {
        if self.sandbox_id.is_some() {
            Status::AwaitingClarification
        } else {
            Status::Reseed
        }
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => s.serialize_str(&STANDARD.encode(bytes)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|text| STANDARD.decode(text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_survive_a_rewrite_by_this_build() {
        let now = crate::clock::now();
        let mut record = RunRecord::launching("t1", "l1", "eng", "command", now);
        record.conversation = Some(b"\x00opaque".to_vec());
        let mut json: serde_json::Value =
            serde_json::from_slice(&record.to_json()).expect("record is JSON");
        json["added_by_a_newer_build"] = serde_json::json!({"nested": [1, 2, 3]});
        json["another_future_key"] = serde_json::json!("kept");
        let bytes = serde_json::to_vec(&json).expect("JSON");

        let mut read = RunRecord::from_json("k", &bytes).expect("this build reads it");
        read.status = Status::Running; // a transition by this build
        let rewritten: serde_json::Value =
            serde_json::from_slice(&read.to_json()).expect("record is JSON");
        assert_eq!(
            rewritten["added_by_a_newer_build"],
            serde_json::json!({"nested": [1, 2, 3]})
        );
        assert_eq!(rewritten["another_future_key"], "kept");
        assert_eq!(rewritten["status"], "running");
        let back = RunRecord::from_json("k", &read.to_json()).expect("reads back");
        assert_eq!(back.conversation.as_deref(), Some(&b"\x00opaque"[..]));
    }
}
