//! `fake`: a deterministic in-memory box for tests. No processes: each box is a map of paths
//! to [`FakeNode`]s, and a job is a [`ScriptedJob`] queued with [`FakeProvider::script`] and
//! consumed by the next `start_background`.
//!
//! A scripted job's stdout is its `output`, written at `{job dir}/stdout.log` when it starts
//! (the path the runners follow). `job_running` answers `true` for its first
//! `polls_until_done` calls (none while the box is paused: a stopped job makes no progress);
//! the call that makes that count finishes the job, after which it answers `false`. With
//! `polls_until_done: 0` the job finishes as it starts. Finishing writes `{job dir}/done`
//! holding the exit code (unless `skip_done_marker`), then the scripted `files` (a path may
//! start with `{dir}/` for the job's directory). A killed job writes nothing and reads as not
//! running.
//!
//! A job may instead run for a time (`runs_for`): it answers `true` until that much time has
//! passed since its start, and finishes at the first poll after. A job's `report` is written
//! where its environment's `BOXFLEET_REPORT` points when it finishes; with `until_file` a
//! timed job runs on until that file exists on the host. The provider's
//! [`Pace`] gives each kind of call a latency, and its default job (`with_default_job`) is
//! what a `start_background` with no script queued runs: `providers.sandbox.fake`'s block.
//!
//! `attach` never wakes a paused box: it succeeds, the box stays paused, and the counters
//! record an attach that did not wake. `connect` resumes. `kill` of a gone box is success.
//! Writes, commands and new jobs on a paused box are refused as unreachable; reads are not.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

pub mod pace;
mod script;
use boxfleet_actors::ports::{
    BoxError, BoxSpec, ExecOutput, JobHandle, MAX_FILE_BYTES, Provider, Sandbox, TailRead,
};
pub use pace::{Call, Pace};
pub use script::ScriptedJob;

/// The home every fake box has (the same as an E2B box's).
pub const FAKE_HOME: &str = "/home/user";

/// What lies at a path in a fake box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeNode {
    File(Vec<u8>),
    /// a regular file of this length whose bytes are never materialised (a sparse file)
    Sparse(u64),
    Symlink(String),
    Fifo,
    Dir,
}

impl FakeNode {
    fn what(&self) -> &'static str {
        match self {
            FakeNode::File(_) | FakeNode::Sparse(_) => "a regular file",
            FakeNode::Symlink(_) => "a symbolic link",
            FakeNode::Fifo => "a named pipe",
            FakeNode::Dir => "a directory",
        }
    }
}

/// What the fake counted, for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeCounters {
    pub creates: u64,
    pub kills: u64,
    /// `kill` calls that found the box already gone
    pub kills_of_gone: u64,
    pub pauses: u64,
    pub connects: u64,
    /// connects that found the box paused and resumed it
    pub resumes: u64,
    pub attaches: u64,
    /// attaches that found the box paused and left it paused
    pub attaches_not_woken: u64,
    pub execs: u64,
    pub jobs_started: u64,
    pub job_kills: u64,
    pub keepalives: u64,
}

/// A box's keepalive state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeKeepalive {
    pub timeout: Duration,
    /// how many keepalives the box had (`set_timeout` calls)
    pub stamps: u64,
}

#[derive(Debug)]
struct FakeJob {
    script: ScriptedJob,
    dir: String,
    start_time: u64,
    polls: u32,
    finished: bool,
    killed: bool,
    started: Instant,
    /// where its report goes (`BOXFLEET_REPORT` in its environment)
    report_path: Option<String>,
    /// the launch that started it (`BOXFLEET_LAUNCH_ID` in its environment)
    launch_id: Option<String>,
}

#[derive(Debug)]
struct FakeBox {
    spec: BoxSpec,
    files: BTreeMap<String, FakeNode>,
    paused: bool,
    timeout: Duration,
    /// when the box's keep-alive window ends unless it is renewed (created, `set_timeout`,
    /// resumed); see [`FakeProvider::expire_lapsed`]
    lapses_at: Instant,
    stamps: u64,
    jobs: BTreeMap<String, FakeJob>,
    exec_log: Vec<String>,
    /// the record of the logins seeded into the box (kept beside its files, as a local box does)
    logins: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct State {
    boxes: BTreeMap<String, FakeBox>,
    scripts: VecDeque<ScriptedJob>,
    exec_results: VecDeque<ExecOutput>,
    next_box: u64,
    next_job: u64,
    counters: FakeCounters,
    /// what a job with no script queued does
    default_job: ScriptedJob,
    /// chooses a job's script from its environment before the queue is looked at
    script_by: Option<ScriptBy>,
}

/// A job's script chosen from the environment it starts with (`None`: the queue's, else the
/// default): how a simulation gives every job of every box its own part.
#[derive(Clone)]
pub struct ScriptBy(pub Arc<ScriptFor>);

/// What picks a job's script: its environment in, its script out (`None`: the default).
pub type ScriptFor = dyn Fn(&BTreeMap<String, String>) -> Option<ScriptedJob> + Send + Sync;

impl std::fmt::Debug for ScriptBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptBy(..)")
    }
}

/// The `fake` cell's provider. Clones share their boxes.
#[derive(Debug, Clone, Default)]
pub struct FakeProvider {
    state: Arc<Mutex<State>>,
    pace: Pace,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Resolves a path in a fake box to its absolute form under [`FAKE_HOME`].
fn resolve(path: &str) -> Result<String, BoxError> {
    let refuse = |why: &str| BoxError::Failed(format!("refused path {path:?}: {why}"));
    let rest = if let Some(rest) = path.strip_prefix("~/") {
        rest
    } else if path.starts_with('~') {
        return Err(refuse("names another account's home"));
    } else if let Some(abs) = path.strip_prefix('/') {
        abs.strip_prefix(&FAKE_HOME[1..])
            .and_then(|rest| rest.strip_prefix('/'))
            .ok_or_else(|| refuse("lies outside the box"))?
    } else {
        path
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(|| refuse("climbs out of the box"))?;
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err(refuse("names the home itself"));
    }
    Ok(format!("{FAKE_HOME}/{}", parts.join("/")))
}

impl FakeBox {
    fn check_parents(&self, path: &str, shown: &str) -> Result<(), BoxError> {
        let mut at = String::new();
        let parents: Vec<&str> = path.split('/').collect();
        for part in parents
            .iter()
            .take(parents.len().saturating_sub(1))
            .filter(|p| !p.is_empty())
        {
            at.push('/');
            at.push_str(part);
            match self.files.get(&at) {
                None | Some(FakeNode::Dir) => {}
                Some(node) => {
                    return Err(BoxError::NotRegular {
                        path: shown.to_owned(),
                        what: format!("under {at} (a parent), which is {}", node.what()),
                    });
                }
            }
        }
        Ok(())
    }

    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError> {
        let at = resolve(path)?;
        self.check_parents(&at, path)?;
        match self.files.get(&at) {
            None => Ok(None),
            Some(FakeNode::File(bytes)) if bytes.len() as u64 > MAX_FILE_BYTES => {
                Err(BoxError::TooLarge {
                    path: path.to_owned(),
                    size: bytes.len() as u64,
                    limit: MAX_FILE_BYTES,
                })
            }
            Some(FakeNode::File(bytes)) => Ok(Some(bytes.clone())),
            Some(FakeNode::Sparse(len)) if *len > MAX_FILE_BYTES => Err(BoxError::TooLarge {
                path: path.to_owned(),
                size: *len,
                limit: MAX_FILE_BYTES,
            }),
            Some(FakeNode::Sparse(len)) => Ok(Some(vec![0; usize::try_from(*len).unwrap_or(0)])),
            Some(node) => Err(BoxError::NotRegular {
                path: path.to_owned(),
                what: node.what().to_owned(),
            }),
        }
    }

    fn write(&mut self, path: &str, bytes: &[u8]) -> Result<(), BoxError> {
        let at = resolve(path)?;
        self.check_parents(&at, path)?;
        match self.files.get(&at) {
            None | Some(FakeNode::File(_)) | Some(FakeNode::Sparse(_)) => {
                self.files.insert(at, FakeNode::File(bytes.to_vec()));
                Ok(())
            }
            Some(node) => Err(BoxError::NotRegular {
                path: path.to_owned(),
                what: node.what().to_owned(),
            }),
        }
    }

    fn finish(&mut self, job_id: &str) {
        let Some(job) = self.jobs.get_mut(job_id) else {
            return;
        };
        if job.finished || job.killed {
            return;
        }
        job.finished = true;
        let dir = job.dir.clone();
        let script = job.script.clone();
        let report_path = job.report_path.clone();
        if !script.skip_done_marker {
            let _ = self.write(
                &format!("{dir}/done"),
                format!("{}\n", script.exit_code).as_bytes(),
            );
        }
        for (path, bytes) in &script.files {
            let path = match path.strip_prefix("{dir}/") {
                Some(rest) => format!("{dir}/{rest}"),
                None => path.clone(),
            };
            let _ = self.write(&path, bytes);
        }
        if let (Some(report), Some(path)) = (&script.report, report_path) {
            let _ = self.write(&path, report.as_bytes());
        }
    }
}

fn encode_job(box_id: &str, n: u64, start_time: u64) -> String {
    format!("fake:{box_id}:{n}:{start_time}")
}

fn job_key(id: &str) -> Option<(String, String, u64)> {
    // fake:{box}:{n}:{start}
    let rest = id.strip_prefix("fake:")?;
    let (front, start) = rest.rsplit_once(':')?;
    let (box_id, n) = front.rsplit_once(':')?;
    let start: u64 = start.parse().ok()?;
    Some((box_id.to_owned(), format!("{box_id}:{n}"), start))
}

impl FakeProvider {
    pub fn new() -> Self {
        FakeProvider::default()
    }

    /// The same, each kind of call taking its latency.
    pub fn with_pace(mut self, pace: Pace) -> Self {
        self.pace = pace;
        self
    }

    /// The same, running `job` wherever no script is queued.
    pub fn with_default_job(self, job: ScriptedJob) -> Self {
        lock(&self.state).default_job = job;
        self
    }

    /// Queues a job script for the next `start_background` (on any box).
    pub fn script(&self, job: ScriptedJob) {
        lock(&self.state).scripts.push_back(job);
    }

    /// Chooses every job's script from its environment from now on (before the queue).
    pub fn script_by(&self, by: ScriptBy) {
        lock(&self.state).script_by = Some(by);
    }

    /// The boxes that exist now (paused or not).
    pub fn box_ids(&self) -> Vec<String> {
        lock(&self.state).boxes.keys().cloned().collect()
    }

    /// Ends every running box whose keep-alive window lapsed, as E2B ends a sandbox whose
    /// timeout passed without a `set_timeout` renewing it (E2B's API: a sandbox's `timeout` is
    /// its time to live, and `POST /sandboxes/{id}/timeout` sets it anew from now); a paused
    /// box is kept, as E2B keeps a paused sandbox. Opt-in (the simulation calls it as its
    /// clock passes): the ids ended.
    pub fn expire_lapsed(&self) -> Vec<String> {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let lapsed: Vec<String> = state
            .boxes
            .iter()
            .filter(|(_, b)| !b.paused && b.lapses_at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &lapsed {
            state.boxes.remove(id);
        }
        lapsed
    }

    /// Removes what lies at `path` in a box, and everything under it.
    pub fn remove(&self, sandbox_id: &str, path: &str) {
        let Ok(at) = resolve(path) else {
            return;
        };
        let under = format!("{}/", at.trim_end_matches('/'));
        if let Some(fake) = lock(&self.state).boxes.get_mut(sandbox_id) {
            fake.files
                .retain(|key, _| key != &at && !key.starts_with(&under));
        }
    }

    /// Queues what the next `exec` answers (by default: exit 0, no output).
    pub fn script_exec(&self, output: ExecOutput) {
        lock(&self.state).exec_results.push_back(output);
    }

    pub fn counters(&self) -> FakeCounters {
        lock(&self.state).counters
    }

    /// Whether the box exists.
    pub fn exists(&self, sandbox_id: &str) -> bool {
        lock(&self.state).boxes.contains_key(sandbox_id)
    }

    /// Whether the box is paused; `None` when it does not exist.
    pub fn is_paused(&self, sandbox_id: &str) -> Option<bool> {
        lock(&self.state).boxes.get(sandbox_id).map(|b| b.paused)
    }

    /// What the box was created for.
    pub fn spec(&self, sandbox_id: &str) -> Option<BoxSpec> {
        lock(&self.state)
            .boxes
            .get(sandbox_id)
            .map(|b| b.spec.clone())
    }

    /// The box's keepalive state.
    pub fn keepalive(&self, sandbox_id: &str) -> Option<FakeKeepalive> {
        lock(&self.state)
            .boxes
            .get(sandbox_id)
            .map(|b| FakeKeepalive {
                timeout: b.timeout,
                stamps: b.stamps,
            })
    }

    /// The commands `exec` ran in the box, in order.
    pub fn exec_log(&self, sandbox_id: &str) -> Vec<String> {
        lock(&self.state)
            .boxes
            .get(sandbox_id)
            .map(|b| b.exec_log.clone())
            .unwrap_or_default()
    }

    /// How many polls a job has counted; `None` when there is no such job.
    pub fn job_polls(&self, sandbox_id: &str, job: &JobHandle) -> Option<u32> {
        let (_, key, _) = job_key(&job.id)?;
        lock(&self.state)
            .boxes
            .get(sandbox_id)?
            .jobs
            .get(&key)
            .map(|j| j.polls)
    }

    /// Puts anything at a path (a link, a named pipe, a sparse file), bypassing the rules a
    /// write keeps.
    pub fn put(&self, sandbox_id: &str, path: &str, node: FakeNode) -> Result<(), BoxError> {
        let at = resolve(path)?;
        let mut state = lock(&self.state);
        let fake = state
            .boxes
            .get_mut(sandbox_id)
            .ok_or_else(|| BoxError::Gone(sandbox_id.to_owned()))?;
        fake.files.insert(at, node);
        Ok(())
    }

    /// What lies at a path.
    pub fn node(&self, sandbox_id: &str, path: &str) -> Option<FakeNode> {
        let at = resolve(path).ok()?;
        lock(&self.state)
            .boxes
            .get(sandbox_id)?
            .files
            .get(&at)
            .cloned()
    }

    fn handle(&self, sandbox_id: &str) -> Arc<dyn Sandbox> {
        Arc::new(FakeSandbox {
            id: sandbox_id.to_owned(),
            state: self.state.clone(),
            pace: self.pace,
        })
    }
}

#[async_trait]
impl Provider for FakeProvider {
    fn cell(&self) -> &str {
        "fake"
    }

    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.pace.wait(Call::Create).await;
        let id = {
            let mut state = lock(&self.state);
            state.next_box += 1;
            state.counters.creates += 1;
            let id = format!("fake-{}", state.next_box);
            let mut files = BTreeMap::new();
            files.insert(FAKE_HOME.to_owned(), FakeNode::Dir);
            state.boxes.insert(
                id.clone(),
                FakeBox {
                    spec: spec.clone(),
                    files,
                    paused: false,
                    timeout: Duration::from_secs(spec.timeout_seconds),
                    lapses_at: Instant::now() + Duration::from_secs(spec.timeout_seconds),
                    stamps: 0,
                    jobs: BTreeMap::new(),
                    exec_log: Vec::new(),
                    logins: None,
                },
            );
            id
        };
        Ok(self.handle(&id))
    }

    async fn attach(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.pace.wait(Call::Manage).await;
        {
            let mut state = lock(&self.state);
            let paused = state
                .boxes
                .get(sandbox_id)
                .ok_or_else(|| BoxError::Gone(sandbox_id.to_owned()))?
                .paused;
            state.counters.attaches += 1;
            if paused {
                state.counters.attaches_not_woken += 1;
            }
        }
        Ok(self.handle(sandbox_id))
    }

    async fn connect(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.pace.wait(Call::Manage).await;
        {
            let mut state = lock(&self.state);
            let fake = state
                .boxes
                .get_mut(sandbox_id)
                .ok_or_else(|| BoxError::Gone(sandbox_id.to_owned()))?;
            let resumed = std::mem::replace(&mut fake.paused, false);
            if resumed {
                fake.lapses_at = Instant::now() + fake.timeout;
            }
            state.counters.connects += 1;
            if resumed {
                state.counters.resumes += 1;
            }
        }
        Ok(self.handle(sandbox_id))
    }

    async fn kill(&self, sandbox_id: &str) -> Result<(), BoxError> {
        self.pace.wait(Call::Manage).await;
        // a login the run refreshed goes back before the box goes, as on a local box
        let seeded = lock(&self.state)
            .boxes
            .get(sandbox_id)
            .is_some_and(|fake| fake.logins.is_some());
        if seeded {
            boxfleet_actors::credentials::give_back(self.handle(sandbox_id).as_ref()).await;
        }
        let mut state = lock(&self.state);
        state.counters.kills += 1;
        if state.boxes.remove(sandbox_id).is_none() {
            state.counters.kills_of_gone += 1;
        }
        Ok(())
    }
}

/// One fake box.
#[derive(Debug)]
pub struct FakeSandbox {
    id: String,
    state: Arc<Mutex<State>>,
    pace: Pace,
}

impl FakeSandbox {
    fn with_box<T>(
        &self,
        work: impl FnOnce(&mut FakeBox, &mut FakeCounters) -> Result<T, BoxError>,
    ) -> Result<T, BoxError> {
        let mut state = lock(&self.state);
        let State {
            boxes, counters, ..
        } = &mut *state;
        let fake = boxes
            .get_mut(&self.id)
            .ok_or_else(|| BoxError::Gone(self.id.clone()))?;
        work(fake, counters)
    }

    fn refuse_if_paused(&self, fake: &FakeBox, what: &str) -> Result<(), BoxError> {
        if fake.paused {
            return Err(BoxError::Unreachable(format!(
                "box {} is paused: {what} would need it running (connect resumes it)",
                self.id
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl Sandbox for FakeSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn home(&self) -> &str {
        FAKE_HOME
    }

    async fn exec(
        &self,
        command: &str,
        _env: &BTreeMap<String, String>,
        _timeout: Duration,
    ) -> Result<ExecOutput, BoxError> {
        self.pace.wait(Call::Exec).await;
        let mut state = lock(&self.state);
        let State {
            boxes,
            counters,
            exec_results,
            ..
        } = &mut *state;
        let fake = boxes
            .get_mut(&self.id)
            .ok_or_else(|| BoxError::Gone(self.id.clone()))?;
        self.refuse_if_paused(fake, "a command")?;
        counters.execs += 1;
        fake.exec_log.push(command.to_owned());
        Ok(exec_results.pop_front().unwrap_or_default())
    }

    async fn start_background(
        &self,
        _command: &str,
        env: &BTreeMap<String, String>,
        dir: &str,
    ) -> Result<JobHandle, BoxError> {
        self.pace.wait(Call::Exec).await;
        let mut state = lock(&self.state);
        let State {
            boxes,
            scripts,
            next_job,
            counters,
            default_job,
            script_by: state_script_by,
            ..
        } = &mut *state;
        let fake = boxes
            .get_mut(&self.id)
            .ok_or_else(|| BoxError::Gone(self.id.clone()))?;
        self.refuse_if_paused(fake, "starting a job")?;
        let dir = resolve(dir)?;
        let chosen = state_script_by.as_ref().and_then(|by| (by.0)(env));
        let script = chosen
            .or_else(|| scripts.pop_front())
            .unwrap_or_else(|| default_job.clone());
        *next_job += 1;
        counters.jobs_started += 1;
        let n = *next_job;
        let start_time = 1000 + n;
        let key = format!("{}:{n}", self.id);
        fake.write(&format!("{dir}/stdout.log"), script.output.as_bytes())?;
        let finishes_now = script.runs_for.map_or(script.polls_until_done == 0, |t| {
            t.is_zero() && script.until_file.as_deref().is_none_or(|f| f.exists())
        });
        fake.jobs.insert(
            key.clone(),
            FakeJob {
                script,
                dir: dir.clone(),
                start_time,
                polls: 0,
                finished: false,
                killed: false,
                started: Instant::now(),
                report_path: env.get("BOXFLEET_REPORT").cloned(),
                launch_id: env.get(boxfleet_actors::ports::LAUNCH_MARKER).cloned(),
            },
        );
        if finishes_now {
            fake.finish(&key);
        }
        Ok(JobHandle {
            id: encode_job(&self.id, n, start_time),
            dir,
        })
    }

    async fn job_running(&self, job: &JobHandle) -> Result<bool, BoxError> {
        self.pace.wait(Call::Poll).await;
        let Some((_, key, start_time)) = job_key(&job.id) else {
            return Err(BoxError::Failed(format!(
                "not a fake job identity: {:?}",
                job.id
            )));
        };
        self.with_box(|fake, _| {
            let paused = fake.paused;
            let Some(found) = fake.jobs.get_mut(&key) else {
                return Ok(false);
            };
            // a recycled pid: the same number, a later process
            if found.start_time != start_time || found.finished || found.killed {
                return Ok(false);
            }
            if paused {
                return Ok(true);
            }
            found.polls += 1;
            if let Some(runs_for) = found.script.runs_for {
                let held = found
                    .script
                    .until_file
                    .as_deref()
                    .is_some_and(|file| !file.exists());
                if found.started.elapsed() < runs_for || held {
                    return Ok(true);
                }
                fake.finish(&key);
                return Ok(false);
            }
            if found.polls >= found.script.polls_until_done {
                fake.finish(&key);
            }
            Ok(true)
        })
    }

    async fn kill_job(&self, job: &JobHandle) -> Result<(), BoxError> {
        self.pace.wait(Call::Manage).await;
        let Some((_, key, start_time)) = job_key(&job.id) else {
            return Err(BoxError::Failed(format!(
                "not a fake job identity: {:?}",
                job.id
            )));
        };
        self.with_box(|fake, counters| {
            if let Some(found) = fake.jobs.get_mut(&key)
                && found.start_time == start_time
                && !found.finished
                && !found.killed
            {
                found.killed = true;
                counters.job_kills += 1;
            }
            Ok(())
        })
    }

    /// Kills the unfinished jobs started with `BOXFLEET_LAUNCH_ID={launch_id}` (a real box's
    /// scan of its processes' environments, which the default does).
    async fn kill_launch(&self, launch_id: &str) -> Result<usize, BoxError> {
        self.pace.wait(Call::Manage).await;
        self.with_box(|fake, counters| {
            let mut killed = 0;
            for job in fake.jobs.values_mut() {
                if job.launch_id.as_deref() == Some(launch_id) && !job.finished && !job.killed {
                    job.killed = true;
                    counters.job_kills += 1;
                    killed += 1;
                }
            }
            Ok(killed)
        })
    }

    async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), BoxError> {
        self.pace.wait(Call::Write).await;
        self.with_box(|fake, _| {
            self.refuse_if_paused(fake, "a write")?;
            fake.write(path, bytes)
        })
    }

    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError> {
        self.pace.wait(Call::Read).await;
        self.with_box(|fake, _| fake.read(path))
    }

    async fn read_tail(&self, path: &str, offset: u64, max: u64) -> Result<TailRead, BoxError> {
        self.pace.wait(Call::Read).await;
        self.with_box(|fake, _| {
            let at = resolve(path)?;
            fake.check_parents(&at, path)?;
            let bytes: Vec<u8> = match fake.files.get(&at) {
                None => return Ok(TailRead::default()),
                Some(FakeNode::File(bytes)) => bytes.clone(),
                Some(FakeNode::Sparse(len)) => {
                    let len = *len;
                    let start = offset.min(len).max(len.saturating_sub(max));
                    let n = usize::try_from((len - start).min(max)).unwrap_or(0);
                    return Ok(TailRead {
                        bytes: vec![0; n],
                        offset: start,
                        len,
                    });
                }
                Some(node) => {
                    return Err(BoxError::NotRegular {
                        path: path.to_owned(),
                        what: node.what().to_owned(),
                    });
                }
            };
            let len = bytes.len() as u64;
            let start = offset.min(len).max(len.saturating_sub(max));
            let end = start + (len - start).min(max);
            let slice = bytes
                .get(
                    usize::try_from(start).unwrap_or(usize::MAX)
                        ..usize::try_from(end).unwrap_or(usize::MAX),
                )
                .unwrap_or_default()
                .to_vec();
            Ok(TailRead {
                bytes: slice,
                offset: start,
                len,
            })
        })
    }

    async fn set_timeout(&self, timeout: Duration) -> Result<(), BoxError> {
        self.pace.wait(Call::Manage).await;
        self.with_box(|fake, counters| {
            fake.timeout = timeout;
            fake.lapses_at = Instant::now() + timeout;
            fake.stamps += 1;
            counters.keepalives += 1;
            Ok(())
        })
    }

    async fn pause(&self) -> Result<(), BoxError> {
        self.pace.wait(Call::Manage).await;
        self.with_box(|fake, counters| {
            fake.paused = true;
            counters.pauses += 1;
            Ok(())
        })
    }

    async fn keep_login_record(&self, record: &[u8]) -> Result<(), BoxError> {
        self.with_box(|fake, _| {
            fake.logins = Some(record.to_vec());
            Ok(())
        })
    }

    async fn login_record(&self) -> Result<Option<Vec<u8>>, BoxError> {
        self.with_box(|fake, _| Ok(fake.logins.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_paths_stay_in_the_home() {
        assert_eq!(resolve("a/./b").ok().as_deref(), Some("/home/user/a/b"));
        assert_eq!(resolve("~/x").ok().as_deref(), Some("/home/user/x"));
        assert_eq!(
            resolve("/home/user/x/../y").ok().as_deref(),
            Some("/home/user/y")
        );
        assert!(resolve("../x").is_err());
        assert!(resolve("/etc/passwd").is_err());
        assert!(resolve("/home/username/x").is_err());
        assert!(resolve("~root/x").is_err());
    }

    #[test]
    fn job_ids_round_trip() {
        let id = encode_job("fake-3", 7, 1007);
        assert_eq!(
            job_key(&id),
            Some(("fake-3".to_owned(), "fake-3:7".to_owned(), 1007))
        );
        assert_eq!(job_key("12:34:boot"), None);
    }
}
