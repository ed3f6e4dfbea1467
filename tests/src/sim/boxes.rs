//! The simulation's boxes: the `fake` cell (`boxfleet_sandbox::fake`) shared by every node, as
//! boxes on one host are, reached through a per-node [`SimProvider`] that carries the node's
//! life (a dead node's box call never returns, and the one it is in may or may not have been
//! made) and the seed's box faults (a call that finds the box unreachable).
//!
//! What the fake does not model and the wrapper adds, from the command runner's own install
//! step (`services/agents/src/common.rs`): the `rm -rf` of the ask directory and the report a
//! job's install runs, which the fake's `exec` only logs — without it an answered job would
//! find its question still asked.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{
    BoxError, BoxSpec, ExecOutput, JobHandle, Provider, Sandbox, TailRead,
};
use boxfleet_sandbox::fake::FakeProvider;
use rand::Rng;
use rand::rngs::StdRng;

/// What the simulation saw the boxes do, for the invariants.
#[derive(Debug, Default)]
pub struct Seen {
    /// each job's `command.sh` as written: (turn, launch, body)
    pub commands: Vec<(String, String, String)>,
}

/// A node's way into the shared fake cell.
#[derive(Debug, Clone)]
pub struct SimProvider {
    fake: FakeProvider,
    alive: Arc<AtomicBool>,
    rng: Arc<Mutex<StdRng>>,
    /// how often a box call finds the box unreachable
    unreachable: Arc<Mutex<f64>>,
    seen: Arc<Mutex<Seen>>,
}

impl SimProvider {
    pub fn new(
        fake: FakeProvider,
        alive: Arc<AtomicBool>,
        rng: Arc<Mutex<StdRng>>,
        unreachable: Arc<Mutex<f64>>,
        seen: Arc<Mutex<Seen>>,
    ) -> SimProvider {
        SimProvider {
            fake,
            alive,
            rng,
            unreachable,
            seen,
        }
    }

    async fn enter(&self) -> Result<(), BoxError> {
        hang_if_dead(&self.alive).await;
        let p = *self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        if p > 0.0
            && self
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .random_bool(p)
        {
            return Err(BoxError::Unreachable(
                "simulated: the box did not answer".into(),
            ));
        }
        Ok(())
    }

    fn wrap(&self, inner: Arc<dyn Sandbox>) -> Arc<dyn Sandbox> {
        Arc::new(SimSandbox {
            inner,
            provider: self.clone(),
        })
    }
}

async fn hang_if_dead(alive: &AtomicBool) {
    if !alive.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
}

#[async_trait]
impl Provider for SimProvider {
    fn cell(&self) -> &str {
        // the quickstart company's cell (`direct`), which the simulated boxes stand in for
        "direct"
    }
    fn new_box_id(&self) -> Option<String> {
        self.fake.new_box_id()
    }
    async fn find_by_launch(
        &self,
        turn_id: &str,
        launch_id: &str,
    ) -> Result<Vec<String>, BoxError> {
        self.enter().await?;
        self.fake.find_by_launch(turn_id, launch_id).await
    }
    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.enter().await?;
        let made = self.fake.create(spec).await?;
        hang_if_dead(&self.alive).await;
        Ok(self.wrap(made))
    }
    async fn attach(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.enter().await?;
        Ok(self.wrap(self.fake.attach(sandbox_id).await?))
    }
    async fn connect(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.enter().await?;
        Ok(self.wrap(self.fake.connect(sandbox_id).await?))
    }
    async fn kill(&self, sandbox_id: &str) -> Result<(), BoxError> {
        self.enter().await?;
        self.fake.kill(sandbox_id).await?;
        hang_if_dead(&self.alive).await;
        Ok(())
    }
}

/// One box, reached by one node.
#[derive(Debug)]
struct SimSandbox {
    inner: Arc<dyn Sandbox>,
    provider: SimProvider,
}

impl SimSandbox {
    async fn enter(&self) -> Result<(), BoxError> {
        self.provider.enter().await
    }
    async fn after(&self) {
        hang_if_dead(&self.provider.alive).await;
    }
}

#[async_trait]
impl Sandbox for SimSandbox {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn home(&self) -> &str {
        self.inner.home()
    }
    async fn exec(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExecOutput, BoxError> {
        self.enter().await?;
        // the runner's install clears the last job's question and report
        let ask = boxfleet_agents::layout::ask_dir(self.home());
        if command.contains("rm -rf") && command.contains(&ask) {
            self.provider.fake.remove(self.id(), &ask);
            let report = boxfleet_agents::layout::report(self.home());
            self.provider.fake.remove(self.id(), &report);
        }
        let out = self.inner.exec(command, env, timeout).await?;
        self.after().await;
        Ok(out)
    }
    async fn start_background(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        dir: &str,
    ) -> Result<JobHandle, BoxError> {
        self.enter().await?;
        let handle = self.inner.start_background(command, env, dir).await?;
        self.after().await;
        Ok(handle)
    }
    async fn job_running(&self, job: &JobHandle) -> Result<bool, BoxError> {
        self.enter().await?;
        self.inner.job_running(job).await
    }
    async fn kill_job(&self, job: &JobHandle) -> Result<(), BoxError> {
        self.enter().await?;
        self.inner.kill_job(job).await?;
        self.after().await;
        Ok(())
    }
    async fn kill_launch(&self, launch_id: &str) -> Result<usize, BoxError> {
        self.enter().await?;
        let killed = self.inner.kill_launch(launch_id).await?;
        self.after().await;
        Ok(killed)
    }
    async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), BoxError> {
        self.enter().await?;
        if path.ends_with("/command.sh") {
            let launch = path.rsplit('/').nth(1).unwrap_or_default().to_owned();
            let spec_turn = self
                .provider
                .fake
                .spec(self.id())
                .map(|spec| spec.turn_id)
                .unwrap_or_default();
            self.provider
                .seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .commands
                .push((
                    spec_turn,
                    launch,
                    String::from_utf8_lossy(bytes).into_owned(),
                ));
        }
        self.inner.write_file(path, bytes).await?;
        self.after().await;
        Ok(())
    }
    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError> {
        self.enter().await?;
        self.inner.read_file(path).await
    }
    async fn read_tail(&self, path: &str, offset: u64, max: u64) -> Result<TailRead, BoxError> {
        self.enter().await?;
        self.inner.read_tail(path, offset, max).await
    }
    async fn set_timeout(&self, timeout: Duration) -> Result<(), BoxError> {
        self.enter().await?;
        self.inner.set_timeout(timeout).await
    }
    async fn pause(&self) -> Result<(), BoxError> {
        self.enter().await?;
        self.inner.pause().await?;
        self.after().await;
        Ok(())
    }
    async fn disk_check(&self) -> Result<Option<String>, BoxError> {
        self.inner.disk_check().await
    }
}
