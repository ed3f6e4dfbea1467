//! The `container` cell's provider ([`ContainerProvider`]): create (the runtime's `run`, then
//! the mount's proof), attach, connect, kill (`rm -f`, then the box directory) and the reaping
//! of boxes a crash orphaned.
//!
//! Layout: the provider and its own helpers (box ids, removal, reaping) first, then the
//! [`Provider`] port, then the engine's own uid and gid (`ids`, for `--user` on a rootful
//! runtime).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};

use async_trait::async_trait;
use boxfleet_actors::ports::{BoxError, BoxSpec, Provider, Sandbox};
use chrono::Utc;
use tokio::sync::Mutex;
use tracing::{debug, info, warn};

use super::argv::{box_environment, env_file, run_argv};
use super::config::{BOX_HOME, ContainerConfig};
use super::mount_proof::prove_mount;
use super::runtime::{CONTROL_BOUND, Probe, runtime_environment};
use super::sandbox::{ContainerRecord, ContainerSandbox, State};
use super::shared::Shared;
use crate::direct::files;
use crate::direct::{blocking, check_env, io_failed, local_box_id};

/// The `container` cell's provider.
#[derive(Debug, Clone)]
pub struct ContainerProvider {
    shared: Arc<Shared>,
}

fn valid_sandbox_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id.starts_with('c')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl ContainerProvider {
    /// A relative `state_dir` is made absolute against the working directory now: the
    /// runtime reads a relative `-v` source as a volume's name, not a directory.
    pub fn new(config: ContainerConfig) -> Self {
        let cli_env = runtime_environment(&config.runtime_env);
        let state_dir = std::path::absolute(&config.state_dir)
            .ok()
            .and_then(|absolute| files::normalise(&absolute))
            .unwrap_or_else(|| config.state_dir.clone());
        ContainerProvider {
            shared: Arc::new(Shared {
                boxes: state_dir.join("boxes"),
                config,
                cli_env,
                probe: Mutex::new(None),
                locks: StdMutex::new(HashMap::new()),
            }),
        }
    }

    /// The box's directory on the host (`{state_dir}/boxes/{sandbox_id}`).
    pub fn box_dir(&self, sandbox_id: &str) -> PathBuf {
        self.shared.boxes.join(sandbox_id)
    }

    /// The container a box runs in.
    pub fn container_name(sandbox_id: &str) -> String {
        format!("boxfleet-{sandbox_id}")
    }

    /// The engine's record of a box.
    pub async fn records(&self, sandbox_id: &str) -> Result<ContainerRecord, BoxError> {
        self.sandbox(sandbox_id)?.read_record().await
    }

    /// Finds the runtime and asks whether it is rootful (once; the answer is kept).
    pub async fn probe(&self) -> Result<Probe, BoxError> {
        self.shared.probe().await
    }

    fn sandbox(&self, sandbox_id: &str) -> Result<ContainerSandbox, BoxError> {
        if !valid_sandbox_id(sandbox_id) {
            return Err(BoxError::Failed(format!(
                "not a container box id: {sandbox_id:?}"
            )));
        }
        Ok(ContainerSandbox::new(
            sandbox_id,
            Self::container_name(sandbox_id),
            self.box_dir(sandbox_id),
            self.shared.clone(),
        ))
    }

    async fn existing(&self, sandbox_id: &str) -> Result<ContainerSandbox, BoxError> {
        let sandbox = self.sandbox(sandbox_id)?;
        sandbox.ensure_present().await?;
        if sandbox.state().await? == State::Missing {
            return Err(BoxError::Gone(sandbox_id.to_owned()));
        }
        Ok(sandbox)
    }

    async fn remove_container(&self, name: &str) -> Result<(), BoxError> {
        let probe = self.probe().await?;
        let args = ["rm".to_owned(), "-f".to_owned(), name.to_owned()];
        let out = self.shared.cli(&probe.binary, &args, CONTROL_BOUND).await?;
        if out.ok() || out.says_missing() {
            Ok(())
        } else {
            Err(BoxError::Failed(format!(
                "{} rm -f {name} exited {}: {}",
                probe.kind.name(),
                out.code,
                out.err_text()
            )))
        }
    }

    async fn remove_box_dir(&self, root: PathBuf) -> Result<(), BoxError> {
        blocking("remove box", move || match fs::remove_dir_all(&root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_failed("remove the box directory", &e)),
        })
        .await
    }

    /// Reaps the boxes a crash orphaned, on the next create, only when both questions say no:
    /// is anything running (an existing container, asked of the runtime), and has anything
    /// touched it (its keepalive stamp, within its timeout)? A paused box is left to its pause
    /// TTL. A box whose state cannot be read is left alone.
    pub async fn reap_orphans(&self) -> Vec<String> {
        let mut reaped = Vec::new();
        let boxes = self.shared.boxes.clone();
        for (id, idle) in files::untouched_boxes(boxes, valid_sandbox_id).await {
            let Ok(sandbox) = self.sandbox(&id) else {
                continue;
            };
            if !matches!(sandbox.state().await, Ok(State::Missing)) {
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
impl Provider for ContainerProvider {
    fn cell(&self) -> &str {
        "container"
    }

    fn new_box_id(&self) -> Option<String> {
        Some(local_box_id('c'))
    }

    fn boxes_dir(&self) -> Option<String> {
        Some(self.shared.boxes.display().to_string())
    }

    fn at_boxes_dir(&self, boxes_dir: &str) -> Option<Arc<dyn Provider>> {
        let boxes = std::path::Path::new(boxes_dir);
        let state_dir = boxes.parent().filter(|_| boxes.is_absolute())?;
        let mut config = self.shared.config.clone();
        config.state_dir = state_dir.to_path_buf();
        Some(Arc::new(ContainerProvider::new(config)) as Arc<dyn Provider>)
    }

    fn host_path(&self, sandbox_id: &str, path: &str) -> Option<PathBuf> {
        // the box's home is a bind mount of `{box_dir}/home` at BOX_HOME
        let rest = path.strip_prefix(BOX_HOME)?;
        if !valid_sandbox_id(sandbox_id) || !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        if rest.split('/').any(|part| part == "..") {
            return None;
        }
        Some(self.box_dir(sandbox_id).join("home").join(rest))
    }

    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
        check_env(&spec.env)?;
        let probe = self.probe().await?;
        self.reap_orphans().await;
        let now = Utc::now();
        let sandbox_id = spec
            .sandbox_id
            .clone()
            .or_else(|| self.new_box_id())
            .unwrap_or_default();
        let sandbox = self.sandbox(&sandbox_id)?;
        let env = box_environment(&self.shared.config.box_path, &spec.env);
        let env_bytes = env_file(&env)?;
        let user = match probe.rootful {
            true => {
                let (uid, gid) = ids::engine_ids()
                    .map_err(|e| io_failed("read the engine's own uid and gid", &e))?;
                Some(format!("{uid}:{gid}"))
            }
            false => None,
        };
        let record = ContainerRecord {
            sandbox_id: sandbox_id.clone(),
            container: sandbox.container.clone(),
            turn_id: spec.turn_id.clone(),
            seat: spec.seat.clone(),
            created_at: now,
            timeout_seconds: spec.timeout_seconds,
            keepalive_at: now,
            paused: false,
            paused_at: None,
            user: user.clone(),
            jobs: Vec::new(),
            alive_at_pause: Vec::new(),
        };
        sandbox
            .paths
            .lay_out(self.shared.boxes.clone(), "env", env_bytes)
            .await?;
        sandbox.write_record(&record).await?;

        let home_str = sandbox.paths.home.to_str().ok_or_else(|| {
            BoxError::Failed(format!(
                "box home {} is not UTF-8",
                sandbox.paths.home.display()
            ))
        })?;
        let env_path = sandbox.paths.records().join("env");
        let env_str = env_path.to_str().ok_or_else(|| {
            BoxError::Failed(format!("box env file {} is not UTF-8", env_path.display()))
        })?;
        let args = run_argv(
            &sandbox.container,
            env_str,
            home_str,
            user.as_deref(),
            &self.shared.config,
        );
        let started = self.shared.cli(&probe.binary, &args, CONTROL_BOUND).await;
        let failure = match started {
            Ok(out) if out.ok() => match prove_mount(&sandbox).await {
                Ok(()) => None,
                Err(why) => Some(format!(
                    "the bind mount of the box's home ({home_str} at {BOX_HOME}) failed its proof: {why}. \
                     A runtime pointed at a daemon on another host (DOCKER_HOST, CONTAINER_HOST, a forwarded socket) \
                     mounts that host's filesystem; use the e2b provider for a remote runtime"
                )),
            },
            Ok(out) => Some(format!(
                "{} run exited {}: {}",
                probe.kind.name(),
                out.code,
                out.err_text()
            )),
            Err(error) => Some(error.to_string()),
        };
        if let Some(why) = failure {
            if let Err(error) = self.remove_container(&sandbox.container).await {
                warn!(sandbox_id = %sandbox_id, %error, "container_sandbox_teardown_failed");
            }
            if let Err(error) = self.remove_box_dir(sandbox.paths.root.clone()).await {
                warn!(sandbox_id = %sandbox_id, %error, "container_sandbox_teardown_failed");
            }
            return Err(BoxError::Failed(format!(
                "container box {sandbox_id} could not be created: {why}"
            )));
        }
        debug!(sandbox_id = %sandbox_id, "container_sandbox_created");
        Ok(Arc::new(sandbox))
    }

    async fn attach(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        // never unpauses: what would need it running is refused on the sandbox
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
        self.remove_container(&sandbox.container).await?;
        // nothing runs in the box now: a login the run refreshed goes back before the home goes
        if sandbox.paths.present().await? {
            boxfleet_actors::credentials::give_back(&sandbox).await;
        }
        self.remove_box_dir(sandbox.paths.root.clone()).await?;
        drop(guard);
        self.shared.forget_lock(sandbox_id);
        debug!(sandbox_id, "container_sandbox_killed");
        Ok(())
    }
}

mod ids {
    /// The engine's own uid and gid, read from the kernel's record of this process.
    pub(super) fn engine_ids() -> std::io::Result<(u32, u32)> {
        use std::os::unix::fs::MetadataExt;
        // /proc/self is owned by the process's effective uid and gid
        let meta = std::fs::metadata("/proc/self")?;
        Ok((meta.uid(), meta.gid()))
    }
}
