//! One `container` box ([`ContainerSandbox`]): its record ([`ContainerRecord`],
//! `records/box.json`), what the runtime says of it, exec, background jobs, files, pause and
//! resume.
//!
//! Layout: the record and the runtime's view of the container (`State`) first, then the
//! box's own helpers (records, exec with a per-exec env file, the jobs' `/proc` reads,
//! resume, host paths), then the [`Sandbox`] port.
//!
//! A command runs with `sh -c` through the runtime's `exec`, its environment in a per-exec
//! env file, never on argv. A background job is started with `setsid` inside the container;
//! its identity is `{container}:{pid}:{start time}` read from the container's `/proc`, so a
//! recycled pid is never signalled. Files are read and written on the host side of the
//! mount with the direct backend's rules. Pause and unpause are the runtime's
//! (`pause`/`unpause`, the cgroup freezer).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{BoxError, ExecOutput, JobHandle, Sandbox, TailRead};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use super::argv::{env_file, quote};
use super::config::BOX_HOME;
use super::runtime::{CONTROL_BOUND, CliOutput};
use super::shared::Shared;
use crate::direct::files::{self, BoxPaths};
use crate::direct::{blocking, check_env, io_failed};

/// The engine's record of one container box (`records/box.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRecord {
    pub sandbox_id: String,
    pub container: String,
    pub turn_id: String,
    pub seat: String,
    pub created_at: DateTime<Utc>,
    pub timeout_seconds: u64,
    /// the keepalive stamp: when the box was last touched
    pub keepalive_at: DateTime<Utc>,
    pub paused: bool,
    #[serde(default)]
    pub paused_at: Option<DateTime<Utc>>,
    /// `--user` passed at run (rootful runtime), if any
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub jobs: Vec<String>,
    /// the jobs alive when the box was paused: a frozen container's jobs cannot change, and
    /// reading them would need it running
    #[serde(default)]
    pub alive_at_pause: Vec<String>,
}

/// The state the runtime reports for a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    Missing,
    Paused,
    Other(String),
}

/// The shell that reads a process's `/proc/{pid}/stat` in the box: sets `st` (state),
/// `sid` (session) and `start` (start time), or returns 1 when there is no such process.
const STAT_FN: &str = r#"rd() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; [ -n "$s" ] || return 1; s=${s##*) }; set -- $s; st=$1; pg=$3; sid=$4; start=${20}; }"#;

/// One container box.
#[derive(Debug, Clone)]
pub struct ContainerSandbox {
    pub(super) id: String,
    /// `boxfleet-{id}`
    pub(super) container: String,
    pub(super) paths: BoxPaths,
    pub(super) shared: Arc<Shared>,
}

/// A job's identity: `{container}:{pid}:{start time}`, read in the box.
fn parse_job(id: &str) -> Option<(&str, i64, u64)> {
    let mut parts = id.rsplitn(3, ':');
    let start = parts.next()?.parse().ok()?;
    let pid: i64 = parts.next()?.parse().ok()?;
    let container = parts.next()?;
    (pid > 1 && !container.is_empty()).then_some((container, pid, start))
}

impl ContainerSandbox {
    pub(super) fn new(id: &str, container: String, root: PathBuf, shared: Arc<Shared>) -> Self {
        ContainerSandbox {
            id: id.to_owned(),
            container,
            paths: BoxPaths {
                home: root.join("home"),
                root,
            },
            shared,
        }
    }

    /// The box's directory on the host.
    pub fn root(&self) -> &Path {
        &self.paths.root
    }

    /// The container's name.
    pub fn container(&self) -> &str {
        &self.container
    }

    pub(super) async fn ensure_present(&self) -> Result<(), BoxError> {
        self.paths.ensure_present(&self.id).await
    }

    pub(super) async fn read_record(&self) -> Result<ContainerRecord, BoxError> {
        self.paths.read_record(&self.id).await
    }

    pub(super) async fn write_record(&self, record: &ContainerRecord) -> Result<(), BoxError> {
        self.paths.write_record(record).await
    }

    async fn update_record<T>(
        &self,
        change: impl FnOnce(&mut ContainerRecord) -> T,
    ) -> Result<T, BoxError> {
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        let mut record = self.read_record().await?;
        let out = change(&mut record);
        self.write_record(&record).await?;
        Ok(out)
    }

    async fn cli(&self, args: &[String], bound: Duration) -> Result<CliOutput, BoxError> {
        let probe = self.shared.probe().await?;
        self.shared.cli(&probe.binary, args, bound).await
    }

    /// What the runtime says of the container.
    pub(super) async fn state(&self) -> Result<State, BoxError> {
        let args = [
            "inspect".to_owned(),
            "--format".to_owned(),
            "{{.State.Status}}".to_owned(),
            self.container.clone(),
        ];
        let out = self.cli(&args, CONTROL_BOUND).await?;
        if out.ok() {
            let status = out.out_text();
            Ok(if status == "paused" {
                State::Paused
            } else {
                State::Other(status)
            })
        } else if out.says_missing() {
            Ok(State::Missing)
        } else {
            Err(BoxError::Failed(format!(
                "inspect {} exited {}: {}",
                self.container,
                out.code,
                out.err_text()
            )))
        }
    }

    async fn refuse_if_paused(&self, what: &str) -> Result<(), BoxError> {
        self.ensure_present().await?;
        match self.state().await? {
            State::Missing => Err(BoxError::Gone(self.id.clone())),
            State::Paused => Err(BoxError::Unreachable(format!(
                "box {} is paused: {what} would need it running, and attach never wakes a box (connect resumes it)",
                self.id
            ))),
            State::Other(_) => Ok(()),
        }
    }

    /// Runs `script` in the box with `sh -c`, the caller's environment in a per-exec env
    /// file (never on argv), bounded; past the bound every process it started is killed.
    pub(super) async fn exec_raw(
        &self,
        script: &str,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExecOutput, BoxError> {
        check_env(env)?;
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let mut env = env.clone();
        env.insert("BOXFLEET_EXEC".into(), marker.clone());
        let bytes = env_file(&env)?;
        let file = self.paths.records().join(format!("exec-{marker}.env"));
        {
            let file = file.clone();
            blocking("write exec env", move || {
                files::write_atomic(&file, &bytes, 0o600)
                    .map_err(|e| io_failed("write the exec's env file", &e))
            })
            .await?;
        }
        let file_str = file.to_str().unwrap_or_default().to_owned();
        let args: Vec<String> = [
            "exec",
            "--env-file",
            &file_str,
            "-w",
            BOX_HOME,
            &self.container,
            "sh",
            "-c",
            script,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let result = self.cli(&args, timeout).await;
        let _ = fs::remove_file(&file);
        let out = match result {
            Ok(out) => out,
            Err(BoxError::Unreachable(_)) => {
                self.kill_marked(&marker).await;
                return Err(BoxError::Failed(format!(
                    "the command did not finish within {}s; its processes were killed",
                    timeout.as_secs_f64()
                )));
            }
            Err(error) => return Err(error),
        };
        if out.code != 0 && out.says_missing() {
            return Err(BoxError::Gone(self.id.clone()));
        }
        Ok(ExecOutput {
            exit_code: out.code,
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }

    /// Kills every process in the box carrying an exec's marker in its environment.
    async fn kill_marked(&self, marker: &str) {
        let script = format!(
            "for e in /proc/[0-9]*/environ; do p=${{e#/proc/}}; p=${{p%/environ}}; [ \"$p\" = $$ ] && continue; \
             if tr '\\0' '\\n' <\"$e\" 2>/dev/null | grep -qx 'BOXFLEET_EXEC={marker}'; then kill -9 \"$p\" 2>/dev/null; fi; done; true"
        );
        let args: Vec<String> = ["exec", &self.container, "sh", "-c", &script]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        if let Err(error) = self.cli(&args, CONTROL_BOUND).await {
            warn!(sandbox_id = %self.id, %error, "container_sandbox_exec_kill_failed");
        }
    }

    /// Which of `jobs` are alive in the box (their pid still has their start time).
    async fn alive(&self, jobs: &[String]) -> Result<Vec<String>, BoxError> {
        let mut checks = String::new();
        for job in jobs {
            if let Some((container, pid, start)) = parse_job(job)
                && container == self.container
            {
                checks.push_str(&format!(
                        "if rd {pid} && [ \"$start\" = {start} ] && [ \"$st\" != Z ]; then echo {pid}:{start}; fi; "
                    ));
            }
        }
        if checks.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .exec_raw(
                &format!("{STAT_FN}; {checks}true"),
                &BTreeMap::new(),
                CONTROL_BOUND,
            )
            .await?;
        if out.exit_code != 0 {
            return Err(BoxError::Failed(format!(
                "cannot read the box's process table (exit {}): {}",
                out.exit_code,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let seen: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        Ok(jobs
            .iter()
            .filter(|job| {
                parse_job(job)
                    .is_some_and(|(_, pid, start)| seen.contains(&format!("{pid}:{start}")))
            })
            .cloned()
            .collect())
    }

    pub(super) async fn resume(&self) -> Result<(), BoxError> {
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        let mut record = self.read_record().await?;
        match self.state().await? {
            State::Missing => return Err(BoxError::Gone(self.id.clone())),
            State::Paused => {
                let args = ["unpause".to_owned(), self.container.clone()];
                let out = self.cli(&args, CONTROL_BOUND).await?;
                if !out.ok() {
                    return Err(BoxError::Failed(format!(
                        "unpause {} exited {}: {}",
                        self.container,
                        out.code,
                        out.err_text()
                    )));
                }
            }
            State::Other(_) => {}
        }
        if record.paused {
            record.paused = false;
            record.paused_at = None;
            record.alive_at_pause.clear();
            record.keepalive_at = Utc::now();
            self.write_record(&record).await?;
        }
        debug!(sandbox_id = %self.id, "container_sandbox_resumed");
        Ok(())
    }

    /// Maps a path a caller names to the host side of the mount.
    fn host_path(&self, path: &str, write: bool) -> Result<PathBuf, BoxError> {
        let relative = if Path::new(path).is_absolute() {
            match path.strip_prefix(BOX_HOME) {
                Some("") | Some("/") => ".",
                Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
                _ => {
                    return Err(BoxError::Failed(format!(
                        "refused path {path:?}: lies outside the box's home (only {BOX_HOME} is mounted)"
                    )));
                }
            }
        } else {
            path
        };
        self.paths.resolve(relative, write)
    }
}

#[async_trait]
impl Sandbox for ContainerSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn home(&self) -> &str {
        BOX_HOME
    }

    async fn exec(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExecOutput, BoxError> {
        self.refuse_if_paused("a command").await?;
        self.exec_raw(command, env, timeout).await
    }

    async fn start_background(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        dir: &str,
    ) -> Result<JobHandle, BoxError> {
        let lock = self.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        self.refuse_if_paused("starting a job").await?;
        let job_dir = self.host_path(dir, true)?;
        let relative = job_dir
            .strip_prefix(&self.paths.home)
            .map_err(|_| BoxError::Failed(format!("refused path {dir:?}: outside the home")))?
            .to_str()
            .ok_or_else(|| BoxError::Failed(format!("job directory {dir:?} is not UTF-8")))?
            .to_owned();
        {
            let (home, job_dir, shown) = (self.paths.home.clone(), job_dir.clone(), dir.to_owned());
            blocking("prepare job directory", move || {
                files::write_whole(
                    &home,
                    &job_dir.join("wrapper.log"),
                    &format!("{shown}/wrapper.log"),
                    b"",
                    0o644,
                )
            })
            .await?;
        }
        // `setsid` in a background child (not a group leader) execs without forking: `$!` is
        // the job's session leader
        let script = format!(
            "{STAT_FN}; setsid sh -c {cmd} </dev/null >>{log} 2>&1 & p=$!; \
             if rd $p; then echo \"$p $start\"; else echo \"$p 0\"; fi",
            cmd = quote(command),
            log = quote(&format!("{relative}/wrapper.log")),
        );
        let out = self.exec_raw(&script, env, CONTROL_BOUND).await?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut words = text.split_whitespace();
        let (Some(pid), Some(start), 0) = (
            words.next().and_then(|w| w.parse::<i64>().ok()),
            words.next().and_then(|w| w.parse::<u64>().ok()),
            out.exit_code,
        ) else {
            return Err(BoxError::Failed(format!(
                "the job could not be started or identified (exit {}): {}",
                out.exit_code,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        };
        let id = format!("{}:{pid}:{start}", self.container);
        let mut record = self.read_record().await?;
        record.jobs.push(id.clone());
        self.write_record(&record).await?;
        debug!(sandbox_id = %self.id, job = %id, "container_sandbox_job_started");
        Ok(JobHandle {
            id,
            dir: format!("{BOX_HOME}/{relative}"),
        })
    }

    async fn job_running(&self, job: &JobHandle) -> Result<bool, BoxError> {
        if parse_job(&job.id).is_none() {
            return Err(BoxError::Failed(format!(
                "not a container job identity: {:?}",
                job.id
            )));
        }
        let record = self.read_record().await?;
        match self.state().await? {
            State::Missing => Err(BoxError::Gone(self.id.clone())),
            // a frozen box's jobs are as they were at the pause
            State::Paused => Ok(record.alive_at_pause.contains(&job.id)),
            State::Other(_) => Ok(!self.alive(std::slice::from_ref(&job.id)).await?.is_empty()),
        }
    }

    async fn kill_job(&self, job: &JobHandle) -> Result<(), BoxError> {
        let Some((container, pid, start)) = parse_job(&job.id) else {
            return Err(BoxError::Failed(format!(
                "not a container job identity: {:?}",
                job.id
            )));
        };
        if container != self.container {
            warn!(sandbox_id = %self.id, job = %job.id, "container_sandbox_signal_withheld: another box's job");
            return Ok(());
        }
        self.refuse_if_paused("killing a job").await?;
        // only while the leader is still the job's; every process group of its session
        let script = format!(
            "{STAT_FN}; rd {pid} || exit 0; [ \"$start\" = {start} ] && [ \"$sid\" = {pid} ] || exit 0; \
             for round in 1 2 3; do for f in /proc/[0-9]*/stat; do q=${{f#/proc/}}; q=${{q%/stat}}; \
             if rd $q && [ \"$sid\" = {pid} ]; then kill -9 -- -$pg 2>/dev/null || kill -9 $q 2>/dev/null; fi; done; done; true"
        );
        let out = self
            .exec_raw(&script, &BTreeMap::new(), CONTROL_BOUND)
            .await?;
        if out.exit_code != 0 {
            return Err(BoxError::Failed(format!(
                "kill_job exited {}: {}",
                out.exit_code,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), BoxError> {
        self.refuse_if_paused("a write").await?;
        let file = self.host_path(path, true)?;
        self.paths.write_file(file, path, bytes).await
    }

    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError> {
        let file = self.host_path(path, false)?;
        self.paths.read_file(&self.id, file, path).await
    }

    async fn read_tail(&self, path: &str, offset: u64, max: u64) -> Result<TailRead, BoxError> {
        let file = self.host_path(path, false)?;
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
        match self.state().await? {
            State::Missing => return Err(BoxError::Gone(self.id.clone())),
            State::Paused => {}
            State::Other(_) => {
                record.alive_at_pause = self.alive(&record.jobs).await?;
                let args = ["pause".to_owned(), self.container.clone()];
                let out = self.cli(&args, CONTROL_BOUND).await?;
                if !out.ok() {
                    let said = out.err_text();
                    // rootless podman on cgroup v1 (or hybrid) has no cgroup to freeze:
                    // "can not pause containers on rootless containers with cgroup V1"
                    let remedy = if record.user.is_none() && said.contains("cgroup") {
                        "; a rootless runtime cannot freeze a container on a host without \
                         cgroup v2, so this box keeps running while its run waits (bounded by \
                         pause_ttl_seconds): run the runtime rootful, or boot the host with \
                         cgroup v2 (systemd.unified_cgroup_hierarchy=1)"
                    } else {
                        ""
                    };
                    return Err(BoxError::Failed(format!(
                        "pause {} exited {}: {said}{remedy}",
                        self.container, out.code,
                    )));
                }
            }
        }
        if !record.paused {
            record.paused = true;
            record.paused_at = Some(Utc::now());
        }
        self.write_record(&record).await?;
        debug!(sandbox_id = %self.id, "container_sandbox_paused");
        Ok(())
    }

    async fn keep_login_record(&self, record: &[u8]) -> Result<(), BoxError> {
        self.paths
            .write_records_file(crate::direct::LOGINS_RECORD, record.to_vec())
            .await
    }

    async fn login_record(&self) -> Result<Option<Vec<u8>>, BoxError> {
        self.paths
            .read_records_file(&self.id, crate::direct::LOGINS_RECORD)
            .await
    }

    /// The box's directory on the host (its home is bind-mounted from it); what the job
    /// writes elsewhere goes to the container's own layer, which the runtime holds.
    async fn disk_check(&self) -> Result<Option<String>, BoxError> {
        crate::disk::check_in_background(self.shared.config.disk.clone(), self.paths.root.clone())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_identity_is_container_pid_and_start_time() {
        assert_eq!(
            parse_job("boxfleet-c1:42:9001"),
            Some(("boxfleet-c1", 42, 9001))
        );
        // the container's name is everything before the last two fields
        assert_eq!(parse_job("a:b:42:7"), Some(("a:b", 42, 7)));
        // pid 1 is the container's init, never a job
        assert_eq!(parse_job("boxfleet-c1:1:7"), None);
        assert_eq!(parse_job(":42:7"), None);
        assert_eq!(parse_job("42:7"), None);
        assert_eq!(parse_job("boxfleet-c1:x:7"), None);
    }
}
