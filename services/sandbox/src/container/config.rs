//! The `container` cell's configuration: which runtime to drive ([`Runtime`],
//! [`RuntimeKind`]), the image, flags, network and environment every box is started with
//! ([`ContainerConfig`]), and where the box's home is mounted ([`BOX_HOME`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::direct::DEFAULT_PATH;

/// Where the box's home is mounted in the container (the same home E2B uses).
pub const BOX_HOME: &str = "/home/user";

/// Which container runtime the backend drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// the first of `docker`, `podman` on the runtime's PATH whose `info` answers
    Auto,
    Docker,
    Podman,
    /// an explicit binary speaking one runtime's CLI
    Binary {
        path: PathBuf,
        kind: RuntimeKind,
    },
}

/// Which CLI dialect a runtime binary speaks (they differ only in the rootless probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    Docker,
    Podman,
}

impl RuntimeKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            RuntimeKind::Docker => "docker",
            RuntimeKind::Podman => "podman",
        }
    }
}

/// The `container` cell's configuration (`providers.sandbox.local` with `run_in: container`).
#[derive(Debug, Clone)]
pub struct ContainerConfig {
    pub runtime: Runtime,
    /// the image every box runs (no default)
    pub image: String,
    /// operator flags, spliced after the backend's own (the runtimes take the last of a
    /// repeated flag, so these win)
    pub run_args: Vec<String>,
    /// `--network`; `None` or empty leaves the runtime's default
    pub network: Option<String>,
    /// extra environment for the runtime CLI itself (never the box's)
    pub runtime_env: BTreeMap<String, String>,
    /// boxes live under `{state_dir}/boxes/`
    pub state_dir: PathBuf,
    /// the PATH inside the box
    pub box_path: String,
    /// what a box's host directory may hold, and what the store's disk keeps free
    pub disk: crate::disk::DiskBudget,
}

impl ContainerConfig {
    pub fn new(image: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        ContainerConfig {
            runtime: Runtime::Auto,
            image: image.into(),
            run_args: Vec::new(),
            network: None,
            runtime_env: BTreeMap::new(),
            state_dir: state_dir.into(),
            box_path: DEFAULT_PATH.to_owned(),
            disk: crate::disk::DiskBudget::default(),
        }
    }
}
