//! The job a run record names (`RunRecord::job`, a JSON document this module alone writes and
//! reads): which runner started it, its handle in the box, and what a relaunch, the backstop
//! and the model receipt need of it.

use boxfleet_cluster::record::RunRecord;
use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::ports::JobHandle;

/// The job handle and runner a record names, as stored in `RunRecord::job`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StoredJob {
    /// the runner that started it (`command`, `claude-code`, `opencode`)
    pub runner: String,
    /// the job in its box
    pub handle: JobHandle,
    /// the shell command of a `command` job
    #[serde(default)]
    pub command: Option<String>,
    /// the check's in-box deadline, when it has one
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// the model sent to the box (`--model`): the receipt's `requested`
    #[serde(default)]
    pub model: Option<String>,
    /// when the job started: the engine-side backstop counts from here
    #[serde(default)]
    pub started_at: Option<chrono::DateTime<Utc>>,
}

impl StoredJob {
    /// The job `record` names; `None` when it names none (or one this build cannot read).
    pub fn of(record: &RunRecord) -> Option<StoredJob> {
        serde_json::from_str(record.job.as_deref()?).ok()
    }

    /// The job as the record stores it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
