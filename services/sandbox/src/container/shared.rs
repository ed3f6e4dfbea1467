//! What the `container` provider and each of its boxes share: the configuration, the boxes
//! directory, the runtime CLI's environment, the runtime probe's answer (asked once and
//! kept) and one lock per box, so a box's record changes one at a time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use boxfleet_actors::ports::BoxError;
use tokio::sync::Mutex;
use tracing::debug;

use super::config::ContainerConfig;
use super::runtime::{CliOutput, Probe, probe_runtime, run_cli};

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) config: ContainerConfig,
    /// `{state_dir}/boxes`, absolute
    pub(super) boxes: PathBuf,
    /// the runtime CLI's environment
    pub(super) cli_env: BTreeMap<String, String>,
    pub(super) probe: Mutex<Option<Probe>>,
    pub(super) locks: StdMutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl Shared {
    pub(super) fn lock_of(&self, sandbox_id: &str) -> Arc<Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry(sandbox_id.to_owned()).or_default().clone()
    }

    /// Forgets a killed box's lock.
    pub(super) fn forget_lock(&self, sandbox_id: &str) {
        self.locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(sandbox_id);
    }

    /// Finds the runtime and asks whether it is rootful (once; the answer is kept).
    pub(super) async fn probe(&self) -> Result<Probe, BoxError> {
        let mut kept = self.probe.lock().await;
        if let Some(probe) = kept.as_ref() {
            return Ok(probe.clone());
        }
        let probe = probe_runtime(&self.config.runtime, &self.cli_env).await?;
        debug!(runtime = %probe.binary.display(), rootful = probe.rootful, "container_runtime_probed");
        *kept = Some(probe.clone());
        Ok(probe)
    }

    /// Runs the runtime CLI with its own environment, bounded.
    pub(super) async fn cli(
        &self,
        binary: &Path,
        args: &[String],
        bound: Duration,
    ) -> Result<CliOutput, BoxError> {
        run_cli(&self.cli_env, binary, args, bound).await
    }
}
