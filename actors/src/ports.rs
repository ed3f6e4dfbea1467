//! The ports the actors drive boxes and coding agents through (DESIGN §9, §10). Backends
//! (`fake`, `direct`, `container`, `e2b`) implement [`Provider`] and [`Sandbox`]; runners
//! (`command`, `claude-code`, `opencode`) implement [`Runner`]. They live in
//! `boxfleet-services`; the actors see only these traits.
//!
//! Every operation is bounded: a backend that cannot answer inside its bound returns
//! [`BoxError::Unreachable`], never hangs.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// The largest file read whole; past it a read is refused, never clipped.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Why a box operation failed. A failed or refused read is never "the file is absent".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoxError {
    /// The provider says the box no longer exists.
    #[error("box {0} is gone")]
    Gone(String),
    /// The box could not be reached (network, timeout, a paused box a reader must not wake).
    #[error("box unreachable: {0}")]
    Unreachable(String),
    /// A path is not a regular file where it lies (a link, a named pipe, a directory).
    #[error("refused to read {path}: it is {what}, not a regular file")]
    NotRegular { path: String, what: String },
    /// A whole-file read past [`MAX_FILE_BYTES`].
    #[error("refused to read {path}: {size} bytes is over the {limit}-byte bound")]
    TooLarge { path: String, size: u64, limit: u64 },
    /// The backend refused or failed the operation.
    #[error("{0}")]
    Failed(String),
}

impl BoxError {
    /// Whether this is a paused box refusing a reader (every backend words that refusal
    /// "box … is paused"): the poll then goes to the run's record rather than counting a
    /// failure (spec line 511).
    pub fn is_paused_refusal(&self) -> bool {
        matches!(self, BoxError::Unreachable(message) if message.contains(" is paused"))
    }
}

/// What a new box is made for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoxSpec {
    pub turn_id: String,
    pub seat: String,
    /// the run environment (allowlisted by the backend; never put on argv)
    pub env: BTreeMap<String, String>,
    /// how long the box lives without a keepalive
    pub timeout_seconds: u64,
    /// the id the box is to have, chosen before it exists ([`Provider::new_box_id`]) so the run's
    /// row names it first (DESIGN §6 I13); `None`: the backend names it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_id: Option<String>,
    /// the launch the box is made for: a backend that names its boxes itself labels the box
    /// with it, so [`Provider::find_by_launch`] finds a box whose id never reached the row
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub launch_id: String,
    /// the runner the box is made for (`claude-code`, `opencode`, `command`): a backend that
    /// builds boxes from prebuilt images picks the one with that CLI when it is told none
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub coding_agent: String,
}

/// A job started in a box: enough to find it again from another process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobHandle {
    /// backend-specific identity (e.g. `pid:start_time:boot_id` for a direct box)
    pub id: String,
    /// where the job's artefacts live in the box (`~/.boxfleet/…`)
    pub dir: String,
}

/// The output of a command run to completion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The end of a stream read from a byte offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TailRead {
    /// the bytes read, starting at `offset`
    pub bytes: Vec<u8>,
    pub offset: u64,
    /// the file's length when read
    pub len: u64,
}

/// A sandbox backend for one cell.
#[async_trait]
pub trait Provider: Send + Sync + fmt::Debug {
    /// The cell's name (`direct`, `container`, `e2b`, `fake`).
    fn cell(&self) -> &str;
    /// An id for a box not made yet, for [`BoxSpec::sandbox_id`]: a launch names its box on the
    /// run's row before [`Provider::create`] makes it, so a launch that dies between the two
    /// leaves a row whose reaping kills what it started (DESIGN §6 I13). `None` (the default)
    /// for a backend that names its boxes itself (e2b).
    fn new_box_id(&self) -> Option<String> {
        None
    }
    /// Where this provider keeps its boxes on the host, for a local backend (the run's record
    /// names it, so any node on the host finds the box whatever its own boxes dir). `None`
    /// (the default) for a remote backend.
    fn boxes_dir(&self) -> Option<String> {
        None
    }
    /// The same backend over the boxes kept under `boxes_dir` (a local backend: another node's
    /// boxes on this host). `None` (the default) where boxes have no host directory.
    fn at_boxes_dir(&self, _boxes_dir: &str) -> Option<Arc<dyn Provider>> {
        None
    }
    /// The boxes this backend made for `launch_id` (of `turn_id`), found by the label
    /// [`Provider::create`] gave them: how reaping a launch that died between the create and
    /// naming the box on its row kills what it started, on a backend that names its boxes
    /// itself (e2b). Empty (the default) where the row names the box before it exists.
    async fn find_by_launch(
        &self,
        _turn_id: &str,
        _launch_id: &str,
    ) -> Result<Vec<String>, BoxError> {
        Ok(Vec::new())
    }
    /// Makes a new box (under `spec.sandbox_id`, when the backend chose one).
    /// Where `path`, a path in box `sandbox_id`, lies on this node's own filesystem, for a
    /// box whose home is a directory on this host (`direct`, `container`): the completion
    /// watch sees a job's done marker there the moment it is written. `None` for a remote box
    /// (the poll finds its jobs' ends).
    fn host_path(&self, _sandbox_id: &str, _path: &str) -> Option<std::path::PathBuf> {
        None
    }
    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError>;
    /// Reaches a box without waking it: a paused box is refused where reading it would wake it.
    async fn attach(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError>;
    /// Reaches a box, resuming it if paused.
    async fn connect(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError>;
    /// Destroys a box. Never resumes it; a box already gone is success.
    async fn kill(&self, sandbox_id: &str) -> Result<(), BoxError>;
}

/// One box.
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    fn id(&self) -> &str;
    /// The agent's home in the box; artefacts go under `{home}/.boxfleet/`.
    fn home(&self) -> &str;
    /// Runs a command to completion, bounded by `timeout`.
    async fn exec(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExecOutput, BoxError>;
    /// Starts a command in the background, detached from the caller; it outlives the node.
    async fn start_background(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        dir: &str,
    ) -> Result<JobHandle, BoxError>;
    /// Whether the job's wrapper is still alive (a recycled pid is never mistaken for it).
    async fn job_running(&self, job: &JobHandle) -> Result<bool, BoxError>;
    /// Kills the job's whole process group (SIGKILL), only while its identity still matches.
    async fn kill_job(&self, job: &JobHandle) -> Result<(), BoxError>;
    /// Kills every process in the box marked as started by launch `launch_id` (the
    /// [`LAUNCH_MARKER`] in its environment, which a job and all it starts inherit), round
    /// after round until a scan finds none: how a recovery stops what a relaunch started in a
    /// reused box before the row named its job. The count killed; a box gone is
    /// [`BoxError::Gone`]. The default scans `/proc` with a POSIX-sh command through
    /// [`Sandbox::exec`] (every backend's box is a Linux process tree, container or VM).
    async fn kill_launch(&self, launch_id: &str) -> Result<usize, BoxError> {
        let out = self
            .exec(
                &launch_kill_script(launch_id),
                &BTreeMap::new(),
                Duration::from_secs(60),
            )
            .await?;
        let text = String::from_utf8_lossy(&out.stdout);
        if out.exit_code != 0 {
            return Err(BoxError::Failed(format!(
                "stopping launch {launch_id}'s processes in box {} exited {}: {}",
                self.id(),
                out.exit_code,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(text.trim().parse().unwrap_or(0))
    }
    /// Writes a whole file (regular file or nothing at the path; a link is refused).
    async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), BoxError>;
    /// Reads a whole regular file, `None` when nothing is at the path. Past
    /// [`MAX_FILE_BYTES`] it is refused.
    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError>;
    /// Reads a stream from `offset` to its end, at most `max` bytes (the last `max` when more).
    async fn read_tail(&self, path: &str, offset: u64, max: u64) -> Result<TailRead, BoxError>;
    /// Keepalive: the box lives `timeout` from now.
    async fn set_timeout(&self, timeout: Duration) -> Result<(), BoxError>;
    /// Pauses the box (its jobs stop; its files stay).
    async fn pause(&self) -> Result<(), BoxError>;
    /// Keeps the record of the logins seeded into the box (each file's shared path, its path
    /// in the box and the digest of its seed) on the engine's side of the box, beside its home
    /// and never in it, so whoever tears the box down — a collection, a kill, the orphan
    /// reaper, on any node of its host — knows what to write back, where, and against what.
    /// Only a local box is seeded with a login; a backend that keeps no records refuses.
    async fn keep_login_record(&self, _record: &[u8]) -> Result<(), BoxError> {
        Err(BoxError::Failed(format!(
            "box {} keeps no login record: a CLI login is seeded only into a local box \
             (run_in: direct or container)",
            self.id()
        )))
    }
    /// The record [`Sandbox::keep_login_record`] kept, `None` when the box was seeded with none.
    async fn login_record(&self) -> Result<Option<Vec<u8>>, BoxError> {
        Ok(None)
    }
    /// Why the box must stop writing — past its disk budget, or the disk holding the store
    /// under its reserve — or `None` while it may go on. A box on a disk the node does not
    /// share (a remote VM) always may.
    async fn disk_check(&self) -> Result<Option<String>, BoxError> {
        Ok(None)
    }
}

/// The environment variable naming the launch a job's processes belong to (set on every job).
pub const LAUNCH_MARKER: &str = "BOXFLEET_LAUNCH_ID";

/// A POSIX-sh command that SIGKILLs every process whose environment holds
/// `{LAUNCH_MARKER}={launch_id}`, never itself, in rounds until one finds none (at most ten),
/// and prints how many it killed.
pub fn launch_kill_script(launch_id: &str) -> String {
    let wanted = format!("{LAUNCH_MARKER}={launch_id}").replace('\'', "'\\''");
    format!(
        r#"wanted='{wanted}'
killed=0
round=0
while [ "$round" -lt 10 ]; do
  found=0
  for env in /proc/[0-9]*/environ; do
    pid=${{env#/proc/}}
    pid=${{pid%/environ}}
    [ "$pid" = "$$" ] && continue
    if tr '\000' '\n' <"$env" 2>/dev/null | grep -qxF "$wanted"; then
      kill -9 "$pid" 2>/dev/null && found=$((found + 1))
    fi
  done
  [ "$found" -eq 0 ] && break
  killed=$((killed + found))
  round=$((round + 1))
done
echo "$killed"
"#
    )
}

/// A piece of what a box wrote, past its bound, that a condensation shortens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlong {
    /// the findings report, which the resumed executor acts on
    Report,
    /// a failed job's text: the engine's sentences, the CLI's error, the end of its stderr
    Failure,
    /// the question a job parked on, read by a person
    Question,
}

/// A piece a model condensed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condensed {
    pub text: String,
    /// the model that condensed it
    pub model: String,
}

/// The seat's auxiliary model, asked to condense a piece past its bound (spec lines 294–296).
#[async_trait]
pub trait Condenser: Send + Sync + std::fmt::Debug {
    /// `text` condensed to at most `max_bytes` by `seat`'s auxiliary model; `Err` says why no
    /// model could (none configured, the call failed), and the piece is cut instead.
    async fn condense(
        &self,
        seat: &str,
        piece: Overlong,
        text: &str,
        max_bytes: usize,
    ) -> Result<Condensed, String>;
}

pub use boxfleet_config::mcp::{McpTransport, RenderedMcp};

/// The job a box runs, as the ways back out of the box name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdentity {
    pub seat: String,
    pub turn_id: String,
    pub launch_id: String,
    /// the runner (`claude-code` alone gets Claude Code's telemetry switches)
    pub runner: String,
    /// the turn's W3C trace context (`traceparent`), when the launch carried one
    pub trace: Option<String>,
}

/// What a job is given to call its node back on, beside its own environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobEndpoints {
    /// variables for the run environment (the bridge's URL, the OTLP endpoint and its
    /// resource attributes, `TRACEPARENT`, …)
    pub env: BTreeMap<String, String>,
    /// MCP servers to give the agent (the tool bridge)
    pub mcp: Vec<RenderedMcp>,
}

/// The node's ways back out of a box — the tool bridge to the seat's engine and the per-run
/// OTLP receiver — each behind a per-run signed token only the node can mint (DESIGN §13).
pub trait RunEndpoints: Send + Sync + std::fmt::Debug {
    /// What the job `job` is given; nothing when the node mounts neither.
    fn for_job(&self, job: &JobIdentity) -> JobEndpoints;
}

/// What a launch asks the runner to start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchSpec {
    pub turn_id: String,
    pub launch_id: String,
    pub seat: String,
    /// the brief for a coding agent, or the command for the `command` runner
    pub brief: String,
    pub command: Option<String>,
    /// the in-box deadline (the check's own clock), distinct from any engine backstop
    pub timeout_seconds: Option<u64>,
    pub model: Option<String>,
    /// the agentic-round cap for a coding agent (`--max-turns`); None or 0: uncapped
    pub max_turns: Option<u32>,
    pub env: BTreeMap<String, String>,
    /// the MCP servers the coding agent is given, every value resolved (the role's, and the
    /// tool bridge to its seat's engine when the node mounts one)
    pub mcp: Vec<RenderedMcp>,
}

/// What a poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Running,
    /// finished: the done marker's exit code, or `None` when the wrapper died without one
    Done {
        exit_code: Option<i32>,
    },
}

/// A question the job parked on (`boxfleet-ask`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskedQuestion {
    pub question: String,
    pub audience: String,
    pub branch: Option<String>,
}

/// What a collection read back from a finished job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    pub exit_code: Option<i32>,
    /// when the job started and ended, on the box's clock in Unix milliseconds, as its
    /// wrapper recorded them beside its exit status (absent from a marker without them)
    pub job_started_ms: Option<i64>,
    pub job_ended_ms: Option<i64>,
    /// the findings report (or the final message when no report was written)
    pub report: String,
    pub delivered_refs: Vec<String>,
    /// one line per tool call / step
    pub transcript: Vec<String>,
    pub question: Option<AskedQuestion>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_micros: u64,
    /// whether the agent CLI said what it billed: without that the phase record carries no
    /// price (OpenCode's zero, where it has no pricing for the provider, is no price)
    pub cost_reported: bool,
    /// the agent CLI's session (Claude Code's `session_id`, OpenCode's session it named)
    pub session_id: Option<String>,
    /// pieces that could not be read: each an infrastructure error, never "absent"
    pub read_errors: Vec<String>,
    /// the end of the job's stderr
    pub stderr_tail: String,
    /// the model that actually ran, as the agent CLI's own output names it (Claude Code's
    /// `system/init` and its assistant messages; OpenCode's session report): None when the
    /// output named none (the `command` runner, a CLI that died before its first line)
    pub effective_model: Option<String>,
    /// where `effective_model` was read (`stream:init`, `stream:assistant`, `opencode:session`)
    pub model_source: Option<String>,
    /// the spec's warning events this collection raised (`sandbox_usage_negative`, …), each
    /// logged by the coordinator with the run's fields
    pub warnings: Vec<String>,
}

impl Collected {
    /// Whether the job succeeded: it exited 0 and every piece was read. A job that parked on a
    /// question exits 0 too; whether it asked is [`Collected::question`].
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && self.read_errors.is_empty()
    }
}

/// A live reading of a job's output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followed {
    pub text: String,
    /// where the reading began (0 when it holds the stream from its start)
    pub start: u64,
    /// the offset the reading holds through
    pub end: u64,
}

/// A coding-agent runner.
#[async_trait]
pub trait Runner: Send + Sync + fmt::Debug {
    /// `command`, `claude-code`, `opencode`.
    fn name(&self) -> &str;
    /// Installs the runner's pieces in a box (the ask shim, the artefact dir), clearing the
    /// previous job's markers.
    async fn install(&self, sandbox: &dyn Sandbox) -> Result<(), BoxError>;
    /// Starts the job in the background.
    async fn start(
        &self,
        sandbox: &dyn Sandbox,
        launch: &LaunchSpec,
    ) -> Result<JobHandle, BoxError>;
    /// Whether the job finished: the done marker, else the wrapper's liveness.
    async fn poll(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> Result<JobState, BoxError>;
    /// Reads everything the job left (before the box is paused or killed).
    async fn collect(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> Result<Collected, BoxError>;
    /// Reads the job's output written at or after `from`.
    async fn follow(
        &self,
        sandbox: &dyn Sandbox,
        job: &JobHandle,
        from: u64,
    ) -> Result<Followed, BoxError>;
    /// Reads the job's error stream written at or after `from`: what the tail shows while the
    /// output has said nothing yet (a CLI that failed to start).
    async fn follow_errors(
        &self,
        sandbox: &dyn Sandbox,
        job: &JobHandle,
        from: u64,
    ) -> Result<Followed, BoxError>;
}

/// What a node's actors ask of the rest of the fleet (the node implements it over gRPC).
#[async_trait]
pub trait FleetLink: Send + Sync + std::fmt::Debug {
    /// The poll duty found the job of `turn_id`'s `launch_id` done in a remote box, and this
    /// node does not hold `seat`: the seat's holder is told, and collects it.
    async fn completed(&self, seat: &str, turn_id: &str, launch_id: &str) -> Result<(), String>;
}
