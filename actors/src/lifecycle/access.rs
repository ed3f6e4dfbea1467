//! Reaching a run's box and job: the node's sandbox providers (by cell) and runners (by name),
//! box operations in order through the box's actor, whether a box is reachable from this
//! host, the completion poll (with the engine-side backstop), and following a job's output for
//! the live tail.
//!
//! Nothing here writes the run record; the lifecycle's steps do, around these reads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_cluster::record::RunRecord;
use tracing::warn;

use super::error::Error;
use super::follow_ups::FollowUps;
use super::job::StoredJob;
use crate::boxes::BoxOp;
use crate::ports::{BoxError, Followed, JobState, Provider, Runner, Sandbox};
use crate::tail::{FollowError, TailStream};

pub use super::cells::DEFAULT_BOX_TIMEOUT;
use super::cells::{CellChange, Cells, CellsInForce};

/// How long past a check's in-box deadline (and its kill grace) the engine waits before its
/// own backstop ends the job. The two clocks are distinct: neither is shortened to fit the
/// other, and their outcomes are reported differently.
pub const BACKSTOP_MARGIN: Duration = Duration::from_secs(120);

/// The file in a job's directory that says the engine's backstop, not the job, ended it.
pub(crate) const BACKSTOP_FILE: &str = "backstop";

/// The margin in force: [`BACKSTOP_MARGIN`], or `BOXFLEET_BACKSTOP_MARGIN_SECONDS` (a knob for
/// tests, which cannot wait two minutes for a wedged box, and for operators who want it
/// otherwise).
fn backstop_margin() -> Duration {
    std::env::var("BOXFLEET_BACKSTOP_MARGIN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(BACKSTOP_MARGIN, Duration::from_secs)
}
/// The file in a job's directory that says the disk watchdog ended it, and why.
pub(crate) const DISK_BUDGET_FILE: &str = "disk_budget";

/// The node's ways into boxes and jobs.
#[derive(Debug)]
pub struct Access {
    /// the node's id, for the errors that name it
    node: String,
    /// the host this node runs on (nodes on one host share its local boxes)
    pub host: String,
    /// the cells in force (a reload swaps them; a dropped cell is kept retired)
    cells: std::sync::RwLock<CellsInForce>,
    runners: BTreeMap<String, Arc<dyn Runner>>,
    /// box operations go through the box's actor, in order
    follow_ups: Arc<dyn FollowUps>,
    /// a cell's backend over another node's boxes dir on this host, by (cell, boxes dir)
    elsewhere: std::sync::Mutex<BTreeMap<(String, String), Arc<dyn Provider>>>,
}

impl Access {
    pub(crate) fn new(
        node: String,
        host: String,
        cells: Cells,
        runners: BTreeMap<String, Arc<dyn Runner>>,
        follow_ups: Arc<dyn FollowUps>,
    ) -> Self {
        Access {
            node,
            host,
            cells: std::sync::RwLock::new(CellsInForce::new(cells)),
            runners,
            follow_ups,
            elsewhere: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    fn in_force(&self) -> std::sync::RwLockReadGuard<'_, CellsInForce> {
        self.cells.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts the cells a reload built in force (see [`CellsInForce::apply`]); the backends
    /// over other nodes' boxes dirs are made again from the new ones as they are needed.
    pub fn apply_cells(&self, next: Cells) -> CellChange {
        let change = self
            .cells
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .apply(next);
        self.elsewhere
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        change
    }

    /// The cells new boxes can be made in, and the retired ones.
    pub fn cell_names(&self) -> (Vec<String>, Vec<String>) {
        let force = self.in_force();
        (
            force.cells.active.keys().cloned().collect(),
            force.retired.keys().cloned().collect(),
        )
    }

    /// How long a box lives between keepalives (`default_timeout_seconds`).
    pub fn box_timeout(&self) -> Duration {
        self.in_force().cells.box_timeout
    }

    /// The provider new boxes of `cell` are made with; a cell the catalogue does not reach (or
    /// a reload retired) makes none.
    pub fn provider(&self, cell: &str) -> Result<Arc<dyn Provider>, Error> {
        let force = self.in_force();
        force.for_new_box(cell).ok_or_else(|| {
            let retired = if force.retired.contains_key(cell) {
                " (a reload dropped it: its runs finish there, no new box is made)"
            } else {
                ""
            };
            Error::BadRequest(format!(
                "no sandbox cell {cell:?} on node {}{retired}",
                self.node
            ))
        })
    }

    /// The cell a run's box lives in.
    pub fn cell_of(&self, run: &RunRecord) -> String {
        run.placement
            .clone()
            .unwrap_or_else(|| self.in_force().cells.default_cell.clone())
    }

    /// The provider of the box a run names: its cell's (a retired cell's too), over the boxes
    /// dir the record names when that is not this node's own (another node's boxes on this
    /// host).
    pub fn provider_of(&self, run: &RunRecord) -> Result<Arc<dyn Provider>, Error> {
        let cell = self.cell_of(run);
        self.provider_at(&cell, run.boxes_dir.as_deref())
            .map_err(|error| Error::BadRequest(format!("run {}: {error}", run.turn_id)))
    }

    /// The runner `name`.
    pub fn runner(&self, name: &str) -> Result<&Arc<dyn Runner>, Error> {
        self.runners.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.runners.keys().map(String::as_str).collect();
            Error::BadRequest(format!(
                "no runner {name:?}: this node runs {}",
                known.join(", ")
            ))
        })
    }

    /// Whether a run's box is remote (reachable from every node: polled by the duty holder).
    pub fn is_remote(&self, run: &RunRecord) -> bool {
        run.placement.as_deref() == Some("e2b")
    }

    /// The host a box of `provider` made here lives on: this node's, for a local cell; none for
    /// a remote one, which every node reaches.
    pub fn host_of(&self, provider: &dyn Provider) -> Option<String> {
        (provider.cell() != "e2b").then(|| self.host.clone())
    }

    /// The provider of `cell` over the boxes dir `boxes_dir` names (another node's on this
    /// host), or the cell's own.
    pub fn provider_at(
        &self,
        cell: &str,
        boxes_dir: Option<&str>,
    ) -> Result<Arc<dyn Provider>, Error> {
        let base = self.in_force().for_existing_box(cell).ok_or_else(|| {
            Error::BadRequest(format!("no sandbox cell {cell:?} on node {}", self.node))
        })?;
        let Some(dir) = boxes_dir else {
            return Ok(base.clone());
        };
        if base.boxes_dir().as_deref() == Some(dir) {
            return Ok(base.clone());
        }
        let mut elsewhere = self.elsewhere.lock().unwrap_or_else(|p| p.into_inner());
        let key = (cell.to_owned(), dir.to_owned());
        if let Some(provider) = elsewhere.get(&key) {
            return Ok(provider.clone());
        }
        let provider = base.at_boxes_dir(dir).ok_or_else(|| {
            Error::BadRequest(format!(
                "boxes dir {dir:?} is not one cell {cell} on node {} can use",
                self.node
            ))
        })?;
        elsewhere.insert(key, provider.clone());
        Ok(provider)
    }

    /// A run's local box lives on one host: a node on another host cannot reach it, and
    /// must never read its absence as the box being gone.
    pub fn reachable(&self, run: &RunRecord) -> Result<(), Error> {
        match run.host.as_deref() {
            Some(host) if host != self.host => Err(Error::Box(BoxError::Unreachable(format!(
                "box {} of run {} lives on host {host}; node {} runs on host {} and cannot \
                 reach it: give the seat to a node on {host} (any node there finds it, whatever its \
                 own boxes dir: the run's record names where the box lives)",
                run.sandbox_id.as_deref().unwrap_or("?"),
                run.turn_id,
                self.node,
                self.host
            )))),
            _ => Ok(()),
        }
    }

    /// One control operation on a box of `provider`, through its `Box{sandbox_id}` actor.
    pub async fn box_op(
        &self,
        provider: &Arc<dyn Provider>,
        sandbox_id: &str,
        op: BoxOp,
    ) -> Result<Option<Arc<dyn Sandbox>>, BoxError> {
        self.follow_ups.box_op(provider, sandbox_id, op).await
    }

    /// One control operation on the box a run names (see [`Access::provider_of`]).
    pub async fn run_box_op(
        &self,
        run: &RunRecord,
        sandbox_id: &str,
        op: BoxOp,
    ) -> Result<Option<Arc<dyn Sandbox>>, BoxError> {
        let provider = self
            .provider_of(run)
            .map_err(|error| BoxError::Failed(error.to_string()))?;
        self.box_op(&provider, sandbox_id, op).await
    }

    /// A handle on a box of `provider` (attach or connect).
    pub async fn box_handle(
        &self,
        provider: &Arc<dyn Provider>,
        sandbox_id: &str,
        op: BoxOp,
    ) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.box_op(provider, sandbox_id, op)
            .await?
            .ok_or_else(|| BoxError::Failed(format!("{op:?} of box {sandbox_id} gave no handle")))
    }

    /// Polls one running run's job (attach: never wakes), refreshing its keepalive. `Some`
    /// when the job finished.
    pub async fn poll(&self, run: &RunRecord) -> Result<Option<JobState>, Error> {
        let began = std::time::Instant::now();
        let span = crate::spans::open(
            crate::spans::Op::Poll,
            crate::spans::Ids {
                node: &self.node,
                seat: &run.seat,
                turn_id: &run.turn_id,
                launch_id: &run.launch_id,
                sandbox_id: run.sandbox_id.as_deref().unwrap_or_default(),
                trace: run.trace.as_deref(),
            },
        );
        let polled =
            tracing::Instrument::instrument(Box::pin(self.poll_box(run)), span.clone()).await;
        let outcome = match &polled {
            Ok(None) => "running",
            Ok(Some(_)) => "done",
            Err(_) => "failed",
        };
        span.record("outcome", outcome);
        boxfleet_cluster::metrics::metrics().polled(outcome, began.elapsed().as_secs_f64());
        polled
    }

    async fn poll_box(&self, run: &RunRecord) -> Result<Option<JobState>, Error> {
        let (Some(sandbox_id), Some(job)) = (&run.sandbox_id, StoredJob::of(run)) else {
            return Ok(None);
        };
        self.reachable(run)?;
        let provider = self.provider_of(run)?;
        let sandbox = match self.box_handle(&provider, sandbox_id, BoxOp::Attach).await {
            Ok(sandbox) => sandbox,
            Err(BoxError::Gone(_)) => return Ok(Some(JobState::Done { exit_code: None })),
            Err(error) => return Err(error.into()),
        };
        if let Err(error) = sandbox.set_timeout(self.box_timeout()).await {
            warn!(turn_id = %run.turn_id, %error, "sandbox_keepalive_failed");
        }
        let runner = self.runner(&job.runner)?;
        match runner.poll(sandbox.as_ref(), &job.handle).await? {
            JobState::Running => match self.disk_watchdog(run, &job, sandbox.as_ref()).await? {
                Some(done) => Ok(Some(done)),
                None => self.backstop(run, &job, sandbox.as_ref()).await,
            },
            done => Ok(Some(done)),
        }
    }

    /// The disk watchdog: a running job whose box is past its disk budget, or whose disk
    /// leaves the store less than its reserve, is ended here, and its directory records why
    /// (read back by the collection as the failure's reason, `disk_budget`).
    async fn disk_watchdog(
        &self,
        run: &RunRecord,
        job: &StoredJob,
        sandbox: &dyn Sandbox,
    ) -> Result<Option<JobState>, Error> {
        let why = match sandbox.disk_check().await {
            Ok(Some(why)) => why,
            Ok(None) => return Ok(None),
            Err(error) => {
                warn!(turn_id = %run.turn_id, %error, "sandbox_disk_check_failed");
                return Ok(None);
            }
        };
        warn!(turn_id = %run.turn_id, %why, "sandbox_disk_budget_exceeded");
        // the job is ended first: the note is small, but the disk may be the one that is full
        sandbox.kill_job(&job.handle).await?;
        let path = format!("{}/{DISK_BUDGET_FILE}", job.handle.dir);
        if let Err(error) = sandbox.write_file(&path, why.as_bytes()).await {
            warn!(turn_id = %run.turn_id, %error, "sandbox_disk_note_unwritten");
        }
        Ok(Some(JobState::Done { exit_code: None }))
    }

    /// The engine-side backstop of a job with an in-box deadline: past the deadline, its kill
    /// grace and [`BACKSTOP_MARGIN`], the job is ended here, and the job's directory records
    /// that the backstop — not the job's own clock — ended it.
    async fn backstop(
        &self,
        run: &RunRecord,
        job: &StoredJob,
        sandbox: &dyn Sandbox,
    ) -> Result<Option<JobState>, Error> {
        let (Some(deadline), Some(started_at)) = (job.timeout_seconds, job.started_at) else {
            return Ok(None);
        };
        let limit = Duration::from_secs(deadline + 10) + backstop_margin();
        let ran = (boxfleet_cluster::clock::now() - started_at)
            .to_std()
            .unwrap_or_default();
        if ran < limit {
            return Ok(None);
        }
        let text = format!(
            "the engine's backstop ended the job after {}s: it had not ended on its own {}s past its in-box deadline of {deadline}s; the client timed out, and the job's execution state is uncertain",
            ran.as_secs(),
            limit.as_secs() - deadline
        );
        warn!(turn_id = %run.turn_id, %text, "sandbox_backstop_fired");
        let path = format!("{}/{BACKSTOP_FILE}", job.handle.dir);
        sandbox.write_file(&path, text.as_bytes()).await?;
        sandbox.kill_job(&job.handle).await?;
        Ok(Some(JobState::Done { exit_code: None }))
    }

    /// A job's `stream` from `from` (the live tail): its output, else — while the output has
    /// said nothing — its error stream; the output again the moment it says anything.
    pub async fn follow(
        &self,
        run: &RunRecord,
        stream: TailStream,
        from: u64,
    ) -> Result<(Followed, TailStream), Error> {
        let (Some(sandbox_id), Some(job)) = (&run.sandbox_id, StoredJob::of(run)) else {
            return Err(Error::NotFound("the run names no job".into()));
        };
        let provider = self.provider_of(run)?;
        let sandbox = self
            .box_handle(&provider, sandbox_id, BoxOp::Attach)
            .await?;
        let runner = self.runner(&job.runner)?;
        let on_output = stream == TailStream::Output;
        let output = runner
            .follow(
                sandbox.as_ref(),
                &job.handle,
                if on_output { from } else { 0 },
            )
            .await?;
        if output.end > 0 || (on_output && from > 0) {
            return Ok((output, TailStream::Output));
        }
        let errors = runner
            .follow_errors(
                sandbox.as_ref(),
                &job.handle,
                if on_output { 0 } else { from },
            )
            .await?;
        if errors.end == 0 {
            return Ok((output, TailStream::Output));
        }
        Ok((errors, TailStream::Errors))
    }
}

#[async_trait]
impl crate::tail::JobOutput for Access {
    async fn follow(
        &self,
        run: &RunRecord,
        stream: TailStream,
        from: u64,
    ) -> Result<crate::tail::Followed, FollowError> {
        match Access::follow(self, run, stream, from).await {
            Ok((followed, stream)) => Ok(crate::tail::Followed { followed, stream }),
            Err(Error::Box(refusal)) if refusal.is_paused_refusal() => {
                Err(FollowError::Paused(refusal.to_string()))
            }
            Err(error) => Err(FollowError::Failed(error.to_string())),
        }
    }
}
