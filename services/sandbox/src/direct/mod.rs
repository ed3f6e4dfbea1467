//! `direct`: a box is a directory and a process tree on this host (DESIGN §9, the spec's
//! "Local sandboxes"). Each box lives under `{data_dir}/boxes/{sandbox_id}/`: `home/` is the
//! agent's (its `HOME`, `TMPDIR` and XDG directories point inside it), `records/` the
//! engine's (`box.json`: created_at, timeout, keepalive stamp, pause state, the job list;
//! `env.json`: the box's run environment; `logins.json`: the logins seeded into it and the
//! digest of each, so any teardown writes back what a run refreshed; all mode 0600).
//!
//! A background job is `sh -c COMMAND` started as the leader of a new session (so of a new
//! process group), stdin null, its own stdout and stderr to `{job dir}/wrapper.log`. It is
//! not killed when the node exits; while the node lives a task waits on it so no zombie
//! lingers. Its identity is the leader's pid with the leader's start time and the boot id
//! (`pid:start_time:boot_id`); every later act first asks the kernel whether the pid is still
//! that job, so a recycled pid is never mistaken for it and never signalled. Signals go to
//! every process group in the job's session: GNU `timeout` moves itself into a group of its
//! own, and a pause or kill that reached only the leader's group would miss it.
//!
//! This is not a security boundary: the job runs as the node's user, with the host's tools.

pub(crate) mod files;
mod host_io;
pub mod marked;
pub mod proc;
mod sys;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{
    BoxError, BoxSpec, ExecOutput, JobHandle, Provider, Sandbox, TailRead,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use tracing::{debug, info, warn};

use files::BoxPaths;
pub(crate) use host_io::{blocking, io_failed, read_bounded};
pub use proc::{JobIdentity, Liveness, ProcStat};

/// The PATH a box gets unless the provider is told otherwise.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The locale a box gets.
pub const DEFAULT_LOCALE: &str = "C.UTF-8";
/// The box's record of the logins seeded into it (`records/logins.json`), which every
/// teardown reads to write back what the run refreshed.
pub(crate) const LOGINS_RECORD: &str = "logins.json";

/// The engine's record of one box (`records/box.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoxRecord {
    pub sandbox_id: String,
    pub turn_id: String,
    pub seat: String,
    pub created_at: DateTime<Utc>,
    /// how long the box lives without a keepalive
    pub timeout_seconds: u64,
    /// the keepalive stamp: when the box was last touched
    pub keepalive_at: DateTime<Utc>,
    pub paused: bool,
    #[serde(default)]
    pub paused_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub jobs: Vec<JobRecord>,
}

/// One job the box started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// `pid:start_time:boot_id`
    pub id: String,
    pub dir: String,
    pub started_at: DateTime<Utc>,
}

/// The `direct` cell's provider.
#[derive(Debug, Clone)]
pub struct DirectProvider {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    boxes: PathBuf,
    path: String,
    /// what a box may write, and what the store's disk keeps free
    disk: crate::disk::DiskBudget,
    /// one lock per box over its records (read-modify-write of box.json)
    locks: StdMutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl Shared {
    fn lock_of(&self, sandbox_id: &str) -> Arc<Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry(sandbox_id.to_owned()).or_default().clone()
    }
}

fn valid_sandbox_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl DirectProvider {
    /// A provider keeping its boxes under `{data_dir}/boxes/`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self::in_boxes_dir(data_dir.into().join("boxes"))
    }

    /// Boxes under `{boxes}/{sandbox_id}`: nodes on one host that name the same directory
    /// share their boxes. A relative `boxes` is made absolute against the working directory
    /// now, and `..` taken out: a job runs in its box's home, so a relative home handed to it
    /// as `HOME` would name a directory inside itself, and a box's file checks compare
    /// lexically normal paths. (The node hands over a path already resolved; this keeps any
    /// other caller from the same trap.)
    pub fn in_boxes_dir(boxes: impl Into<PathBuf>) -> Self {
        let boxes = boxes.into();
        let boxes = std::path::absolute(&boxes)
            .ok()
            .and_then(|absolute| files::normalise(&absolute))
            .unwrap_or(boxes);
        Self::made(boxes, DEFAULT_PATH.to_owned(), Default::default())
    }

    /// The PATH every box's commands get (default [`DEFAULT_PATH`]; never the node's own).
    pub fn with_path(self, path: impl Into<String>) -> Self {
        let (boxes, disk) = (self.shared.boxes.clone(), self.shared.disk.clone());
        Self::made(boxes, path.into(), disk)
    }

    /// The disk bounds every box of this provider is held to (default
    /// [`DiskBudget::default`](crate::disk::DiskBudget)).
    pub fn with_disk_budget(self, disk: crate::disk::DiskBudget) -> Self {
        let (boxes, path) = (self.shared.boxes.clone(), self.shared.path.clone());
        Self::made(boxes, path, disk)
    }

    fn made(boxes: PathBuf, path: String, disk: crate::disk::DiskBudget) -> Self {
        let locks = StdMutex::new(HashMap::new());
        let shared = Shared {
            boxes,
            path,
            disk,
            locks,
        };
        DirectProvider {
            shared: Arc::new(shared),
        }
    }

    /// The box's directory (`{data_dir}/boxes/{sandbox_id}`).
    pub fn box_dir(&self, sandbox_id: &str) -> PathBuf {
        self.shared.boxes.join(sandbox_id)
    }

    /// The engine's record of a box (`records/box.json`).
    pub async fn records(&self, sandbox_id: &str) -> Result<BoxRecord, BoxError> {
        self.sandbox(sandbox_id)?.read_record().await
    }

    fn sandbox(&self, sandbox_id: &str) -> Result<DirectSandbox, BoxError> {
        if !valid_sandbox_id(sandbox_id) {
            return Err(BoxError::Failed(format!(
                "not a direct box id: {sandbox_id:?}"
            )));
        }
        let root = self.box_dir(sandbox_id);
        let home = root.join("home");
        let home_str = home
            .to_str()
            .ok_or_else(|| BoxError::Failed(format!("box home {} is not UTF-8", home.display())))?
            .to_owned();
        Ok(DirectSandbox {
            id: sandbox_id.to_owned(),
            paths: BoxPaths { root, home },
            home: home_str,
            shared: self.shared.clone(),
        })
    }

    async fn existing(&self, sandbox_id: &str) -> Result<DirectSandbox, BoxError> {
        let sandbox = self.sandbox(sandbox_id)?;
        sandbox.ensure_present().await?;
        Ok(sandbox)
    }
}

impl DirectProvider {
    /// Reaps the boxes a crash orphaned (the spec's "reaped on the next create, but only when
    /// it is genuinely orphaned"). Two questions, both answered from what is, not inferred:
    /// is anything running in it (a job whose leader the kernel still says is that job —
    /// stopped counts as running), and has anything touched it (the keepalive stamp the
    /// completion poll refreshes, within the box's timeout)? Only a box where both say no is
    /// removed. A paused box is never reaped here: a run parked on a person's answer keeps it,
    /// and its pause TTL is the knob that owns that wait. Best effort: a box that cannot be
    /// read is left alone and said.
    pub async fn reap_orphans(&self) -> Vec<String> {
        let mut reaped = Vec::new();
        for (id, idle) in files::untouched_boxes(self.shared.boxes.clone(), valid_sandbox_id).await
        {
            let Ok(record) = self.records(&id).await else {
                continue;
            };
            let jobs: Vec<String> = record.jobs.iter().map(|j| j.id.clone()).collect();
            let running = blocking("inspect jobs", move || {
                // a job the kernel's record cannot be read for may be live: the box is kept
                Ok(jobs.iter().any(|id| {
                    JobIdentity::parse(id)
                        .is_some_and(|job| !matches!(job.liveness(), Ok(Liveness::Gone)))
                }))
            })
            .await
            .unwrap_or(true);
            if running {
                continue;
            }
            match self.kill(&id).await {
                Ok(()) => {
                    info!(sandbox_id = %id, idle_seconds = idle, "local_sandbox_reaped");
                    reaped.push(id);
                }
                Err(error) => warn!(sandbox_id = %id, %error, "local_sandbox_reap_failed"),
            }
        }
        reaped
    }
}

#[async_trait]
impl Provider for DirectProvider {
    fn cell(&self) -> &str {
        "direct"
    }

    fn new_box_id(&self) -> Option<String> {
        Some(local_box_id('d'))
    }

    fn boxes_dir(&self) -> Option<String> {
        Some(self.shared.boxes.display().to_string())
    }

    fn at_boxes_dir(&self, boxes_dir: &str) -> Option<Arc<dyn Provider>> {
        Path::new(boxes_dir).is_absolute().then(|| {
            Arc::new(DirectProvider::in_boxes_dir(boxes_dir).with_path(self.shared.path.clone()))
                as Arc<dyn Provider>
        })
    }

    fn host_path(&self, sandbox_id: &str, path: &str) -> Option<PathBuf> {
        // a direct box's paths are the host's own
        let path = PathBuf::from(path);
        (valid_sandbox_id(sandbox_id) && path.starts_with(self.box_dir(sandbox_id))).then_some(path)
    }

    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
        check_env(&spec.env)?;
        self.reap_orphans().await;
        let now = Utc::now();
        let sandbox_id = spec
            .sandbox_id
            .clone()
            .or_else(|| self.new_box_id())
            .unwrap_or_default();
        let sandbox = self.sandbox(&sandbox_id)?;
        if sandbox.paths.present().await? {
            return Err(BoxError::Failed(format!(
                "box {sandbox_id} exists already: a new box needs an id of its own"
            )));
        }
        let record = BoxRecord {
            sandbox_id: sandbox_id.clone(),
            turn_id: spec.turn_id.clone(),
            seat: spec.seat.clone(),
            created_at: now,
            timeout_seconds: spec.timeout_seconds,
            keepalive_at: now,
            paused: false,
            paused_at: None,
            jobs: Vec::new(),
        };
        let env_json =
            serde_json::to_vec_pretty(&spec.env).map_err(|e| BoxError::Failed(e.to_string()))?;
        sandbox
            .paths
            .lay_out(self.shared.boxes.clone(), "env.json", env_json)
            .await?;
        sandbox.write_record(&record).await?;
        debug!(sandbox_id = %sandbox_id, "local_sandbox_created");
        Ok(Arc::new(sandbox))
    }

    async fn attach(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        // never signals: a paused box stays stopped and its files read as they lie
        Ok(Arc::new(self.existing(sandbox_id).await?))
    }

    async fn connect(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        let sandbox = self.existing(sandbox_id).await?;
        sandbox.resume().await?;
        Ok(Arc::new(sandbox))
    }

    async fn kill(&self, sandbox_id: &str) -> Result<(), BoxError> {
        let sandbox = self.sandbox(sandbox_id)?;
        let lock = self.shared.lock_of(sandbox_id);
        let guard = lock.lock().await;
        if !sandbox.paths.present().await? {
            return Ok(());
        }
        match sandbox.read_record().await {
            Ok(record) => {
                for job in &record.jobs {
                    sandbox.signal_job(&job.id, libc::SIGKILL).await;
                }
            }
            Err(error) => warn!(sandbox_id, %error, "local_sandbox_records_unreadable"),
        }
        // and every process that left the job's session or outlived its parent
        let id = sandbox_id.to_owned();
        let _ = tokio::task::spawn_blocking(move || marked::kill_marked(&id)).await;
        // the jobs are dead: a login the run refreshed goes back before the home goes
        boxfleet_actors::credentials::give_back(&sandbox).await;
        let root = sandbox.paths.root.clone();
        blocking("remove box", move || match fs::remove_dir_all(&root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_failed("remove the box directory", &e)),
        })
        .await?;
        drop(guard);
        self.shared
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(sandbox_id);
        debug!(sandbox_id, "local_sandbox_killed");
        Ok(())
    }
}

/// A new local box's id: `kind` (`d` direct, `c` container), the instant, 12 random hex digits.
pub(crate) fn local_box_id(kind: char) -> String {
    format!(
        "{kind}{}-{}",
        Utc::now().format("%Y%m%d%H%M%S"),
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

pub(crate) fn check_env(env: &BTreeMap<String, String>) -> Result<(), BoxError> {
    for (name, value) in env {
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(BoxError::Failed(format!(
                "refused environment variable {name:?}: not a usable name or value"
            )));
        }
    }
    Ok(())
}

/// One direct box.
#[derive(Debug, Clone)]
pub struct DirectSandbox {
    id: String,
    home: String,
    paths: BoxPaths,
    shared: Arc<Shared>,
}

impl DirectSandbox {
    /// The box's directory.
    pub fn root(&self) -> &Path {
        &self.paths.root
    }

    async fn ensure_present(&self) -> Result<(), BoxError> {
        self.paths.ensure_present(&self.id).await
    }

    async fn read_record(&self) -> Result<BoxRecord, BoxError> {
        self.paths.read_record(&self.id).await
    }

    async fn write_record(&self, record: &BoxRecord) -> Result<(), BoxError> {
        self.paths.write_record(record).await
    }

    /// Read-modify-write of the box's record under the box's lock.
    async fn update_record<T>(
        &self,
        change: impl FnOnce(&mut BoxRecord) -> T,
    ) -> Result<T, BoxError> {
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        let mut record = self.read_record().await?;
        let out = change(&mut record);
        self.write_record(&record).await?;
        Ok(out)
    }

    async fn box_env(&self) -> Result<BTreeMap<String, String>, BoxError> {
        let path = self.paths.records().join("env.json");
        let shown = path.display().to_string();
        let records = self.paths.records();
        let bytes = blocking("read box env", move || {
            files::read_whole(&records, &path, &shown)
        })
        .await?;
        match bytes {
            None => Ok(BTreeMap::new()),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| BoxError::Failed(format!("records/env.json: {e}"))),
        }
    }

    /// The environment a command in this box gets: the allowlist, the box's run environment,
    /// then what the caller passes. Never the node's own.
    async fn environment(
        &self,
        extra: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, BoxError> {
        check_env(extra)?;
        let home = &self.home;
        let mut env = BTreeMap::new();
        for (name, value) in [
            ("PATH", self.shared.path.clone()),
            ("HOME", home.clone()),
            ("LANG", DEFAULT_LOCALE.to_owned()),
            ("LC_ALL", DEFAULT_LOCALE.to_owned()),
            ("TERM", "dumb".to_owned()),
            ("TMPDIR", format!("{home}/.tmp")),
            ("XDG_CACHE_HOME", format!("{home}/.cache")),
            ("XDG_CONFIG_HOME", format!("{home}/.config")),
            ("XDG_DATA_HOME", format!("{home}/.local/share")),
            ("XDG_STATE_HOME", format!("{home}/.local/state")),
        ] {
            env.insert(name.to_owned(), value);
        }
        env.extend(self.box_env().await?);
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        // last, so nothing overrides it: how a teardown finds every process the box started
        env.insert(marked::BOX_MARKER.to_owned(), self.id.clone());
        Ok(env)
    }

    fn shell_command(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        cwd: &Path,
    ) -> std::process::Command {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(command)
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::null());
        sys::new_session(&mut cmd);
        cmd
    }

    async fn refuse_if_paused(&self, what: &str) -> Result<(), BoxError> {
        if self.read_record().await?.paused {
            return Err(BoxError::Unreachable(format!(
                "box {} is paused: {what} would need it running (connect resumes it)",
                self.id
            )));
        }
        Ok(())
    }

    /// Signals every process the box started, found by its marker (`marked`).
    async fn signal_marked(&self, signal: i32) {
        let id = self.id.clone();
        let _ = tokio::task::spawn_blocking(move || marked::signal_marked(&id, signal)).await;
    }

    /// Signals a recorded job's session if, and only if, its leader is still that job.
    async fn signal_job(&self, id: &str, signal: i32) -> bool {
        let Some(identity) = JobIdentity::parse(id) else {
            warn!(sandbox_id = %self.id, job = id, "local_sandbox_signal_withheld: not a job identity");
            return false;
        };
        let shown = id.to_owned();
        let result = tokio::task::spawn_blocking(move || identity.signal(signal)).await;
        match result {
            Ok(Ok(sent)) => sent,
            Ok(Err(error)) => {
                warn!(sandbox_id = %self.id, job = %shown, %error, "local_sandbox_signal_withheld");
                false
            }
            Err(error) => {
                warn!(sandbox_id = %self.id, job = %shown, %error, "local_sandbox_signal_withheld");
                false
            }
        }
    }

    async fn resume(&self) -> Result<(), BoxError> {
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        let mut record = self.read_record().await?;
        if !record.paused {
            return Ok(());
        }
        for job in &record.jobs {
            self.signal_job(&job.id, libc::SIGCONT).await;
        }
        self.signal_marked(libc::SIGCONT).await;
        record.paused = false;
        record.paused_at = None;
        record.keepalive_at = Utc::now();
        self.write_record(&record).await?;
        debug!(sandbox_id = %self.id, "local_sandbox_resumed");
        Ok(())
    }
}

#[async_trait]
impl Sandbox for DirectSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn home(&self) -> &str {
        &self.home
    }

    async fn exec(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExecOutput, BoxError> {
        self.refuse_if_paused("a command").await?;
        let env = self.environment(env).await?;
        let mut cmd =
            tokio::process::Command::from(self.shell_command(command, &env, &self.paths.home));
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| io_failed("start a command", &e))?;
        let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
        // read while the leader is unreaped: its pid is still its own
        let identity = pid.and_then(|pid| JobIdentity::of_held(pid).ok());
        let stdout = child.stdout.take().map(|s| tokio::spawn(read_bounded(s)));
        let stderr = child.stderr.take().map(|s| tokio::spawn(read_bounded(s)));
        let deadline = tokio::time::Instant::now() + timeout;
        let kill_group = |pid: Option<i32>| {
            // the whole session while its leader lives (a `timeout` in it has a group of its
            // own); else the leader's group, whose id is not handed out again while any member
            // of it lives
            if !identity
                .as_ref()
                .is_some_and(|identity| identity.signal(libc::SIGKILL).unwrap_or(false))
                && let Some(pid) = pid
            {
                let _ = sys::signal_group(pid, libc::SIGKILL);
            }
        };
        let status = match tokio::time::timeout_at(deadline, child.wait()).await {
            Ok(status) => status.map_err(|e| io_failed("wait for a command", &e))?,
            Err(_) => {
                kill_group(pid);
                let _ = child.wait().await;
                return Err(BoxError::Failed(format!(
                    "the command did not finish within {}s; its process group was killed",
                    timeout.as_secs_f64()
                )));
            }
        };
        // a background process the command left behind may hold its output open
        let mut outputs = Vec::new();
        for reader in [stdout, stderr] {
            let bytes = match reader {
                Some(task) => match tokio::time::timeout_at(deadline, task).await {
                    Ok(Ok(bytes)) => bytes,
                    Ok(Err(_)) => Vec::new(),
                    Err(_) => {
                        kill_group(pid);
                        return Err(BoxError::Failed(format!(
                            "the command's output stayed open past {}s; its process group was killed",
                            timeout.as_secs_f64()
                        )));
                    }
                },
                None => Vec::new(),
            };
            outputs.push(bytes);
        }
        let stderr = outputs.pop().unwrap_or_default();
        let stdout = outputs.pop().unwrap_or_default();
        let exit_code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        Ok(ExecOutput {
            exit_code,
            stdout,
            stderr,
        })
    }

    async fn start_background(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        dir: &str,
    ) -> Result<JobHandle, BoxError> {
        // the box's lock is held until the job is recorded, so a pause cannot miss it
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        self.refuse_if_paused("starting a job").await?;
        let env = self.environment(env).await?;
        let job_dir = self.paths.resolve(dir, true)?;
        let home = self.paths.home.clone();
        let shown = dir.to_owned();
        let log = {
            let job_dir = job_dir.clone();
            blocking("prepare job directory", move || {
                let log = job_dir.join("wrapper.log");
                files::write_whole(&home, &log, &format!("{shown}/wrapper.log"), b"", 0o644)?;
                std::fs::OpenOptions::new()
                    .append(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&log)
                    .map_err(|e| io_failed("open the job's wrapper.log", &e))
            })
            .await?
        };
        let log_err = log
            .try_clone()
            .map_err(|e| io_failed("open the job's wrapper.log", &e))?;
        let mut cmd = self.shell_command(command, &env, &self.paths.home);
        cmd.stdout(Stdio::from(log)).stderr(Stdio::from(log_err));
        let mut child = tokio::process::Command::from(cmd)
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| io_failed("start the job", &e))?;
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .ok_or_else(|| {
                BoxError::Failed("the job exited before it could be identified".into())
            })?;
        // the child is unreaped until the task below waits on it, so the pid is still its own
        let identity = JobIdentity::of_held(pid);
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let identity = match identity {
            Ok(identity) => identity,
            Err(error) => {
                // unidentifiable is unmanageable: it must not run on unrecorded
                let _ = sys::signal_group(pid, libc::SIGKILL);
                return Err(io_failed("read the job's identity from /proc", &error));
            }
        };
        let dir_str = job_dir.to_str().unwrap_or(dir).to_owned();
        let handle = JobHandle {
            id: identity.to_string(),
            dir: dir_str.clone(),
        };
        let recorded = async {
            let mut record = self.read_record().await?;
            record.jobs.push(JobRecord {
                id: handle.id.clone(),
                dir: dir_str,
                started_at: Utc::now(),
            });
            self.write_record(&record).await
        };
        if let Err(error) = recorded.await {
            let _ = identity.signal(libc::SIGKILL);
            return Err(error);
        }
        debug!(sandbox_id = %self.id, job = %handle.id, "local_sandbox_job_started");
        Ok(handle)
    }

    async fn job_running(&self, job: &JobHandle) -> Result<bool, BoxError> {
        let Some(identity) = JobIdentity::parse(&job.id) else {
            return Err(BoxError::Failed(format!(
                "not a direct job identity: {:?}",
                job.id
            )));
        };
        match tokio::task::spawn_blocking(move || identity.liveness()).await {
            Ok(Ok(Liveness::Alive(_))) => Ok(true),
            Ok(Ok(Liveness::Gone)) => Ok(false),
            Ok(Err(error)) => Err(BoxError::Failed(format!(
                "cannot read the kernel's record of job {}: {error}",
                job.id
            ))),
            Err(error) => Err(BoxError::Failed(error.to_string())),
        }
    }

    async fn kill_job(&self, job: &JobHandle) -> Result<(), BoxError> {
        if JobIdentity::parse(&job.id).is_none() {
            return Err(BoxError::Failed(format!(
                "not a direct job identity: {:?}",
                job.id
            )));
        }
        self.signal_job(&job.id, libc::SIGKILL).await;
        Ok(())
    }

    async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), BoxError> {
        self.refuse_if_paused("a write").await?;
        let file = self.paths.resolve(path, true)?;
        self.paths.write_file(file, path, bytes).await
    }

    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError> {
        let file = self.paths.resolve(path, false)?;
        self.paths.read_file(&self.id, file, path).await
    }

    async fn read_tail(&self, path: &str, offset: u64, max: u64) -> Result<TailRead, BoxError> {
        let file = self.paths.resolve(path, false)?;
        self.paths
            .read_tail(&self.id, file, path, offset, max)
            .await
    }

    async fn set_timeout(&self, timeout: Duration) -> Result<(), BoxError> {
        self.update_record(|record| {
            record.timeout_seconds = timeout.as_secs();
            record.keepalive_at = Utc::now();
        })
        .await
    }

    async fn pause(&self) -> Result<(), BoxError> {
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        let mut record = self.read_record().await?;
        for job in &record.jobs {
            self.signal_job(&job.id, libc::SIGSTOP).await;
        }
        // what left the job's session is stopped too
        self.signal_marked(libc::SIGSTOP).await;
        if !record.paused {
            record.paused = true;
            record.paused_at = Some(Utc::now());
        }
        self.write_record(&record).await?;
        debug!(sandbox_id = %self.id, "local_sandbox_paused");
        Ok(())
    }

    async fn keep_login_record(&self, record: &[u8]) -> Result<(), BoxError> {
        self.paths
            .write_records_file(LOGINS_RECORD, record.to_vec())
            .await
    }

    async fn login_record(&self) -> Result<Option<Vec<u8>>, BoxError> {
        self.paths.read_records_file(&self.id, LOGINS_RECORD).await
    }

    async fn disk_check(&self) -> Result<Option<String>, BoxError> {
        crate::disk::check_in_background(self.shared.disk.clone(), self.paths.root.clone()).await
    }
}
