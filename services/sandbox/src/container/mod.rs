//! `container`: a box is a Docker or Podman container whose one mount is the box's home
//! (DESIGN §9, the spec's "Local sandboxes"). The on-host layout is the direct backend's:
//! `{state_dir}/boxes/{sandbox_id}/home/` (bind-mounted at `/home/user`) and `records/` (the
//! engine's, never mounted: `box.json`, the run environment `env` handed to the runtime with
//! `--env-file`, mode 0600, and short-lived per-exec env files).
//!
//! The container is `run -d --init --name boxfleet-{id} --env-file records/env -v
//! {home}:/home/user -w /home/user [--user uid:gid] [--network N] {run_args} {image} sleep
//! infinity`. `--user` is passed on a rootful runtime only (the runtime is asked; an
//! unanswerable probe counts as rootful). Before the box is used the mount is proved: the
//! engine writes a token the box reads back, and the box makes a directory the engine
//! writes into and removes. A failed proof removes the container and names the bind mount.
//!
//! No value of the run environment is ever put on a runtime's argv. A background job is
//! started with `setsid` inside the container; its identity is
//! `{container}:{pid}:{start time}` read from the container's `/proc`, so a recycled pid is
//! never signalled. Files are read and written on the host side of the mount with the direct
//! backend's rules. Pause and unpause are the runtime's (`pause`/`unpause`, the cgroup
//! freezer); kill is `rm -f`.
//!
//! The runtime's own CLI gets an explicit environment: the host allowlist (PATH, locale,
//! TLS trust, proxy), the engine user's home, temporary and XDG directories, the runtime's
//! own configuration (`DOCKER_*`, `CONTAINERS_*`, `PODMAN_*`, …), then `runtime_env`. The box
//! never gets any of it.
//!
//! Layout, each file using only those above it:
//! - `config`: the cell's configuration ([`ContainerConfig`], [`Runtime`], [`RuntimeKind`],
//!   [`BOX_HOME`]);
//! - `runtime`: the runtime CLI's environment, one bounded invocation, and the probe
//!   ([`Probe`]);
//! - `argv`: the box's run environment, env files and the `run` argv;
//! - `shared`: what the provider and its boxes share (the probe's answer, per-box locks);
//! - `sandbox`: one box ([`ContainerSandbox`], its record [`ContainerRecord`]): exec, jobs,
//!   files, pause and resume;
//! - `mount_proof`: the proof that a new box's mount is the engine's directory;
//! - `provider`: [`ContainerProvider`]: create, attach, connect, kill, reaping.

mod argv;
mod config;
mod mount_proof;
mod provider;
mod runtime;
mod sandbox;
mod shared;

pub use config::{BOX_HOME, ContainerConfig, Runtime, RuntimeKind};
pub use provider::ContainerProvider;
pub use runtime::Probe;
pub use sandbox::{ContainerRecord, ContainerSandbox};
