//! The phase record (the spec's `agent_phase_completed{phase: sandbox}`; DESIGN §11): what one
//! job did, published once per job (I3) as the body of its announcement and read back by the
//! CLI, the board and every subscriber of `Runs.Events`.
//!
//! It is a contract, so it is a type: every field is named here with what it holds, and its
//! JSON — the event body's `record` — is pinned by a golden test. A field's JSON name never
//! changes; a new field is added with a default, so a record a newer build wrote still reads.
//!
//! - [`PhaseRecord`]: the record itself.
//! - [`FailureReason`]: why a job that failed failed, when a reason other than its exit says.
//! - [`receipt`]: the model receipt (`model: {requested, effective, source, status}`).

pub mod receipt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use receipt::{ModelReceipt, ReceiptStatus};

/// Why a failed job failed, beyond its exit status (the phase record's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// the engine's own backstop ended the job past its in-box deadline: "the client timed
    /// out; execution state uncertain" (DESIGN §11, two clocks)
    Backstop,
    /// the box ran another model than the one asked for, under `model_mismatch: fail`
    ModelMismatch,
    /// a piece of the job's evidence could not be read: an infrastructure error, never "absent"
    CollectIncomplete,
    /// the node's disk watchdog ended the job: its box past `local.max_box_bytes`, or the
    /// disk holding the store under `local.store_reserve_bytes`
    DiskBudget,
}

impl FailureReason {
    /// The reason's word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Backstop => "backstop",
            FailureReason::ModelMismatch => "model_mismatch",
            FailureReason::CollectIncomplete => "collect_incomplete",
            FailureReason::DiskBudget => "disk_budget",
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job's phase record. Every field reads with a default, so a record missing one (an older
/// build's) still reads; unknown fields are ignored by readers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct PhaseRecord {
    /// the turn the job worked for
    pub turn_id: String,
    /// how many jobs of this turn came before this one (0 for the first)
    pub iteration: u32,
    /// the job
    pub launch_id: String,
    /// when this job was launched, as the row that named it was dated (its launch, or the
    /// relaunch that answered or re-seeded it), as RFC 3339 with a `+00:00` offset
    #[serde(with = "rfc3339_offset")]
    pub started_at: Option<DateTime<Utc>>,
    /// from `started_at` to the collection on the node that read the result, in milliseconds
    /// (the completion poll's interval is inside it)
    pub duration_ms: i64,
    /// the job's own runtime, from its start to its exit as its wrapper recorded them (the
    /// box's clock); absent when the job left no times (killed, or its box gone)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_runtime_ms: Option<i64>,
    /// from the job's exit to its collection: how long the node took to notice and read it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collect_lag_ms: Option<i64>,
    /// input tokens, the cache's shares included
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// `input_tokens + output_tokens`
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// what the job cost, where its agent CLI said so; absent where it said nothing (a
    /// `command` job, a CLI with no pricing for the provider)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// which model was asked for and which ran
    pub model: ModelReceipt,
    /// the runner: `command`, `claude-code`, `opencode`
    pub coding_agent: String,
    /// the box the job ran in
    pub sandbox_id: String,
    /// the agent CLI's session (Claude Code's `session_id`, OpenCode's); absent for a
    /// `command` job and a CLI that named none
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// the findings report, redacted and bounded
    pub response: String,
    /// the branches and PRs the report's `Delivered:` lines name
    pub delivered_refs: Vec<String>,
    /// one line per tool call or step
    pub activity_transcript: Vec<String>,
    /// refs the record's 16 KiB bound left out; absent when none was
    #[serde(skip_serializing_if = "is_zero")]
    pub delivered_refs_elided: u64,
    /// the lines of the transcript's middle its bound left out; absent when none was
    #[serde(skip_serializing_if = "is_zero")]
    pub activity_transcript_elided_lines: u64,
    /// the bytes of those lines
    #[serde(skip_serializing_if = "is_zero")]
    pub activity_transcript_elided_bytes: u64,
    /// whether the job failed (a job that parked on a question did not)
    pub failed: bool,
    /// why it failed, when that is more than its exit status; `null` when it did not fail
    pub reason: Option<FailureReason>,
    /// what went wrong, redacted and bounded; absent when it did not fail
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// the job's exit status; `null` when it ended without one (killed, or its box gone)
    pub exit_code: Option<i32>,
    /// the question the job parked on
    pub notes: Option<String>,
    /// the work item the turn was for
    pub work_item: Option<String>,
    /// the key the turn's work is ordered under (its message's partition), as on every phase
    /// record
    pub work_key: Option<String>,
    /// the conversation the turn reports back to
    pub conversation_key: Option<String>,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl PhaseRecord {
    /// The record as the JSON value an event body carries.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|error| {
            // every field is a string, a number, a bool or a list of those: this cannot fail
            serde_json::json!({ "turn_id": self.turn_id, "serialize_error": error.to_string() })
        })
    }

    /// The record an `agent_phase_completed` event carries (its body's `record`).
    pub fn from_event_body(body: &serde_json::Value) -> Option<PhaseRecord> {
        serde_json::from_value(body.get("record")?.clone()).ok()
    }
}

/// `started_at` as the record has always carried it: RFC 3339 with a `+00:00` offset (chrono's
/// own serde form writes `Z`).
mod rfc3339_offset {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        at: &Option<DateTime<Utc>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => serializer.serialize_str(&at.to_rfc3339()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<DateTime<Utc>>, D::Error> {
        let text = Option::<String>::deserialize(deserializer)?;
        Ok(text
            .and_then(|text| DateTime::parse_from_rfc3339(&text).ok())
            .map(|at| at.with_timezone(&Utc)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_failed_job() -> PhaseRecord {
        PhaseRecord {
            turn_id: "turn-1".into(),
            iteration: 2,
            launch_id: "launch-3".into(),
            started_at: Some(
                DateTime::parse_from_rfc3339("2026-12-01T10:15:19.794344472+00:00")
                    .expect("time")
                    .with_timezone(&Utc),
            ),
            duration_ms: 13_000,
            job_runtime_ms: None,
            collect_lag_ms: None,
            input_tokens: 1200,
            output_tokens: 340,
            total_tokens: 1540,
            cache_read_tokens: 1000,
            cache_write_tokens: 100,
            cost_usd: Some(0.0125),
            model: ModelReceipt::new(
                Some("claude-sonnet-4-5"),
                Some("claude-haiku-4-5"),
                Some("stream:assistant"),
            ),
            coding_agent: "claude-code".into(),
            sandbox_id: "d20261201101519-6aaa36f40942".into(),
            session_id: Some("0b1c6a2e-5f4d-4a8e-9a51-3c2f7d9e8b10".into()),
            response: "half done\n".into(),
            delivered_refs: vec!["fix/retry".into()],
            activity_transcript: vec!["Bash: cargo test".into()],
            delivered_refs_elided: 0,
            activity_transcript_elided_lines: 0,
            activity_transcript_elided_bytes: 0,
            failed: true,
            reason: Some(FailureReason::ModelMismatch),
            error: "model_mismatch: the box ran claude-haiku-4-5".into(),
            exit_code: Some(0),
            notes: None,
            work_item: Some("ENG-7".into()),
            work_key: Some("acme/api#7".into()),
            conversation_key: None,
        }
    }

    /// The JSON the phase record is published as: first printed by the hand-built `json!` the
    /// collection used before the record was a type, then given `session_id` and `work_key`
    /// (and `cost_usd`, `error` only where the spec says). A change here is a change of the
    /// contract every reader parses.
    const GOLDEN: &str = r#"{"activity_transcript":["Bash: cargo test"],"cache_read_tokens":1000,"cache_write_tokens":100,"coding_agent":"claude-code","conversation_key":null,"cost_usd":0.0125,"delivered_refs":["fix/retry"],"duration_ms":13000,"error":"model_mismatch: the box ran claude-haiku-4-5","exit_code":0,"failed":true,"input_tokens":1200,"iteration":2,"launch_id":"launch-3","model":{"effective":"claude-haiku-4-5","requested":"claude-sonnet-4-5","source":"stream:assistant","status":"mismatch"},"notes":null,"output_tokens":340,"reason":"model_mismatch","response":"half done\n","sandbox_id":"d20261201101519-6aaa36f40942","session_id":"0b1c6a2e-5f4d-4a8e-9a51-3c2f7d9e8b10","started_at":"2026-12-01T10:15:19.794344472+00:00","total_tokens":1540,"turn_id":"turn-1","work_item":"ENG-7","work_key":"acme/api#7"}"#;

    #[test]
    fn the_record_serializes_byte_for_byte_as_it_always_has() {
        let value = a_failed_job().to_value();
        assert_eq!(serde_json::to_string(&value).expect("json"), GOLDEN);
    }

    #[test]
    fn a_published_record_reads_back_whole() {
        let body = serde_json::json!({ "phase": "sandbox", "record": a_failed_job().to_value() });
        assert_eq!(PhaseRecord::from_event_body(&body), Some(a_failed_job()));
        let parsed: PhaseRecord = serde_json::from_str(GOLDEN).expect("golden reads");
        assert_eq!(parsed, a_failed_job());
    }

    #[test]
    fn a_succeeded_unpriced_job_carries_no_error_and_no_price() {
        let record = PhaseRecord {
            failed: false,
            reason: None,
            error: String::new(),
            cost_usd: None,
            session_id: None,
            ..a_failed_job()
        };
        let value = record.to_value();
        for absent in ["error", "cost_usd", "session_id"] {
            assert!(value.get(absent).is_none(), "{absent} in {value}");
        }
        assert_eq!(value["failed"], false);
        let back: PhaseRecord = serde_json::from_value(value).expect("reads");
        assert_eq!(back, record);
    }

    #[test]
    fn a_record_missing_fields_or_carrying_new_ones_still_reads() {
        let parsed: PhaseRecord =
            serde_json::from_str(r#"{"turn_id":"t","failed":false,"newer_field":[1,2]}"#)
                .expect("reads");
        assert_eq!(parsed.turn_id, "t");
        assert_eq!(parsed.reason, None);
        assert_eq!(parsed.started_at, None);
    }
}
