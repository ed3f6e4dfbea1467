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

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
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

use crate::direct::files::{self, BoxPaths};
use crate::direct::{DEFAULT_LOCALE, DEFAULT_PATH, blocking, check_env, io_failed, read_bounded};

/// Where the box's home is mounted in the container (the same home E2B uses).
pub const BOX_HOME: &str = "/home/user";
/// How long a runtime control command (`run`, `pause`, `inspect`, `rm`, …) may take.
const CONTROL_BOUND: Duration = Duration::from_secs(120);

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
    fn name(self) -> &'static str {
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
        }
    }
}

/// What the runtime probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub binary: PathBuf,
    pub kind: RuntimeKind,
    /// rootful: the container's root is the host's, so the box runs as the engine's uid:gid
    pub rootful: bool,
}

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

/// The `container` cell's provider.
#[derive(Debug, Clone)]
pub struct ContainerProvider {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: ContainerConfig,
    boxes: PathBuf,
    /// the runtime CLI's environment
    cli_env: BTreeMap<String, String>,
    probe: Mutex<Option<Probe>>,
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

/// Whether a host variable is one the runtime CLI is handed (the fixed list).
fn runtime_may_see(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "CONTAINER_HOST",
        "CONTAINER_CONNECTION",
        "CONTAINER_SSHKEY",
        "CONTAINER_PASSPHRASE",
        "REGISTRY_AUTH_FILE",
        "STORAGE_DRIVER",
        "STORAGE_OPTS",
        "DBUS_SESSION_BUS_ADDRESS",
    ];
    const PREFIXES: &[&str] = &[
        "LC_",
        "XDG_",
        "DOCKER_",
        "CONTAINERS_",
        "PODMAN_",
        "BUILDAH_",
    ];
    NAMES.contains(&name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The runtime CLI's environment: the fixed list from the host, then `runtime_env` (a
/// declared name wins).
fn runtime_environment(runtime_env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| runtime_may_see(k))
        .collect();
    env.extend(runtime_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

fn valid_sandbox_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id.starts_with('c')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What a runtime CLI invocation printed.
#[derive(Debug)]
struct CliOutput {
    code: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl CliOutput {
    fn ok(&self) -> bool {
        self.code == 0
    }
    fn err_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_owned()
    }
    fn out_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_owned()
    }
    /// The runtime says the container does not exist.
    fn says_missing(&self) -> bool {
        let text = self.err_text().to_ascii_lowercase();
        text.contains("no such container")
            || text.contains("no such object")
            || text.contains("no container with name or id")
    }
}

/// The state the runtime reports for a container.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Missing,
    Paused,
    Other(String),
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
        let mut kept = self.shared.probe.lock().await;
        if let Some(probe) = kept.as_ref() {
            return Ok(probe.clone());
        }
        let probe = self.probe_now().await?;
        debug!(runtime = %probe.binary.display(), rootful = probe.rootful, "container_runtime_probed");
        *kept = Some(probe.clone());
        Ok(probe)
    }

    fn find_on_path(&self, name: &str) -> Option<PathBuf> {
        let path = self.shared.cli_env.get("PATH")?;
        path.split(':')
            .filter(|dir| !dir.is_empty())
            .map(|dir| Path::new(dir).join(name))
            .find(|candidate| {
                fs::metadata(candidate)
                    .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false)
            })
    }

    async fn probe_now(&self) -> Result<Probe, BoxError> {
        let candidates: Vec<(PathBuf, RuntimeKind)> = match &self.shared.config.runtime {
            Runtime::Binary { path, kind } => vec![(path.clone(), *kind)],
            Runtime::Docker | Runtime::Podman | Runtime::Auto => {
                let wanted: &[RuntimeKind] = match self.shared.config.runtime {
                    Runtime::Docker => &[RuntimeKind::Docker],
                    Runtime::Podman => &[RuntimeKind::Podman],
                    _ => &[RuntimeKind::Docker, RuntimeKind::Podman],
                };
                wanted
                    .iter()
                    .filter_map(|kind| self.find_on_path(kind.name()).map(|p| (p, *kind)))
                    .collect()
            }
        };
        let Some(first) = candidates.first().cloned() else {
            return Err(BoxError::Failed(
                "no container runtime found: neither docker nor podman is on the runtime's PATH"
                    .into(),
            ));
        };
        let mut failures = Vec::new();
        for (binary, kind) in &candidates {
            match self.ask_rootless(binary, *kind).await {
                Ok(rootless) => {
                    return Ok(Probe {
                        binary: binary.clone(),
                        kind: *kind,
                        rootful: !rootless,
                    });
                }
                Err(why) => failures.push(format!("{}: {why}", binary.display())),
            }
        }
        // unanswerable counts as rootful: that mistake fails loudly at creation
        warn!(failures = %failures.join("; "), "container_runtime_probe_unanswered");
        Ok(Probe {
            binary: first.0,
            kind: first.1,
            rootful: true,
        })
    }

    /// Asks the runtime whether it is rootless.
    async fn ask_rootless(&self, binary: &Path, kind: RuntimeKind) -> Result<bool, String> {
        let format = match kind {
            RuntimeKind::Docker => "{{json .SecurityOptions}}",
            RuntimeKind::Podman => "{{.Host.Security.Rootless}}",
        };
        let args = ["info".to_owned(), "--format".to_owned(), format.to_owned()];
        let out = self
            .shared
            .cli(binary, &args, CONTROL_BOUND)
            .await
            .map_err(|e| e.to_string())?;
        if !out.ok() {
            return Err(format!("info exited {}: {}", out.code, out.err_text()));
        }
        let text = out.out_text();
        match kind {
            RuntimeKind::Docker => Ok(text.contains("name=rootless")),
            RuntimeKind::Podman => match text.as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                other => Err(format!("info answered {other:?}")),
            },
        }
    }

    fn sandbox(&self, sandbox_id: &str) -> Result<ContainerSandbox, BoxError> {
        if !valid_sandbox_id(sandbox_id) {
            return Err(BoxError::Failed(format!(
                "not a container box id: {sandbox_id:?}"
            )));
        }
        let root = self.box_dir(sandbox_id);
        Ok(ContainerSandbox {
            id: sandbox_id.to_owned(),
            container: Self::container_name(sandbox_id),
            paths: BoxPaths {
                home: root.join("home"),
                root,
            },
            provider: self.clone(),
        })
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

    /// Proves the mount: the engine's token read back by the box, and a directory the box
    /// made that the engine writes into and removes.
    async fn prove_mount(&self, sandbox: &ContainerSandbox) -> Result<(), String> {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let token_name = format!(".boxfleet-mount-proof-{tag}");
        let dir_name = format!("{token_name}.d");
        let host_home = sandbox.paths.home.clone();
        let token_file = host_home.join(&token_name);
        let written = {
            let (home, file, tag) = (host_home.clone(), token_file.clone(), tag.clone());
            blocking("write the mount proof", move || {
                files::write_whole(&home, &file, "mount proof", tag.as_bytes(), 0o644)
            })
            .await
        };
        written.map_err(|e| format!("the engine could not write its token: {e}"))?;
        let script = format!(
            "cat {t} && mkdir {d} && printf box >{d}/from-box",
            t = quote(&token_name),
            d = quote(&dir_name)
        );
        let out = sandbox
            .exec_raw(&script, &BTreeMap::new(), CONTROL_BOUND)
            .await
            .map_err(|e| format!("the box could not be asked: {e}"))?;
        let token_seen = String::from_utf8_lossy(&out.stdout).trim() == tag;
        let checked = {
            let (home, dir_name) = (host_home.clone(), dir_name.clone());
            blocking("check the mount proof", move || {
                let _ = fs::remove_file(home.join(&token_name));
                let dir = home.join(&dir_name);
                let seen = fs::read(dir.join("from-box")).ok();
                let wrote = fs::write(dir.join("from-engine"), b"engine");
                let removed = fs::remove_dir_all(&dir);
                Ok((seen, wrote, removed))
            })
            .await
        };
        let (seen, wrote, removed) =
            checked.map_err(|e| format!("the engine could not inspect its side: {e}"))?;
        if out.exit_code != 0 || !token_seen {
            return Err(format!(
                "the box did not read back the engine's token (exit {}: {})",
                out.exit_code,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        if seen.as_deref() != Some(&b"box"[..]) {
            return Err("the directory the box created is not on the engine's side".into());
        }
        if let Err(e) = wrote {
            return Err(format!(
                "the engine cannot write into the directory the box created ({e}): the container runs as a user the engine cannot manage"
            ));
        }
        if let Err(e) = removed {
            return Err(format!(
                "the engine cannot remove the directory the box created ({e}): the container runs as a user the engine cannot manage"
            ));
        }
        Ok(())
    }
}

impl Shared {
    /// Runs the runtime CLI with its own environment, bounded.
    async fn cli(
        &self,
        binary: &Path,
        args: &[String],
        bound: Duration,
    ) -> Result<CliOutput, BoxError> {
        let mut cmd = tokio::process::Command::new(binary);
        cmd.args(args)
            .env_clear()
            .envs(&self.cli_env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            BoxError::Failed(format!(
                "cannot start the container runtime {}: {e}",
                binary.display()
            ))
        })?;
        let stdout = child.stdout.take().map(|s| tokio::spawn(read_bounded(s)));
        let stderr = child.stderr.take().map(|s| tokio::spawn(read_bounded(s)));
        let verb = args.first().map(String::as_str).unwrap_or("");
        let status = match tokio::time::timeout(bound, child.wait()).await {
            Ok(status) => status.map_err(|e| io_failed("wait for the container runtime", &e))?,
            Err(_) => {
                let _ = child.kill().await;
                return Err(BoxError::Unreachable(format!(
                    "the container runtime's {verb} did not answer within {}s",
                    bound.as_secs_f64()
                )));
            }
        };
        let mut outputs = Vec::new();
        for reader in [stdout, stderr] {
            let bytes = match reader {
                Some(task) => match tokio::time::timeout(Duration::from_secs(5), task).await {
                    Ok(Ok(bytes)) => bytes,
                    _ => Vec::new(),
                },
                None => Vec::new(),
            };
            outputs.push(bytes);
        }
        let stderr = outputs.pop().unwrap_or_default();
        let stdout = outputs.pop().unwrap_or_default();
        Ok(CliOutput {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        })
    }
}

/// Renders an env file (`NAME=value` a line, read literally by both runtimes).
fn env_file(env: &BTreeMap<String, String>) -> Result<Vec<u8>, BoxError> {
    let mut text = String::new();
    for (name, value) in env {
        if value.contains('\n') || value.contains('\r') || name.contains(char::is_whitespace) {
            return Err(BoxError::Failed(format!(
                "refused environment variable {name:?}: an env file cannot carry a line break or a space in a name"
            )));
        }
        text.push_str(name);
        text.push('=');
        text.push_str(value);
        text.push('\n');
    }
    Ok(text.into_bytes())
}

impl ContainerProvider {
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

    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
        check_env(&spec.env)?;
        let probe = self.probe().await?;
        self.reap_orphans().await;
        let now = Utc::now();
        let sandbox_id = format!(
            "c{}-{}",
            now.format("%Y%m%d%H%M%S"),
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let sandbox = self.sandbox(&sandbox_id)?;
        // the box's run environment: the allowlist, then the spec's
        let mut env = BTreeMap::new();
        for (name, value) in [
            ("PATH", self.shared.config.box_path.clone()),
            ("HOME", BOX_HOME.to_owned()),
            ("LANG", DEFAULT_LOCALE.to_owned()),
            ("LC_ALL", DEFAULT_LOCALE.to_owned()),
            ("TERM", "dumb".to_owned()),
            ("TMPDIR", format!("{BOX_HOME}/.tmp")),
            ("XDG_CACHE_HOME", format!("{BOX_HOME}/.cache")),
            ("XDG_CONFIG_HOME", format!("{BOX_HOME}/.config")),
            ("XDG_DATA_HOME", format!("{BOX_HOME}/.local/share")),
            ("XDG_STATE_HOME", format!("{BOX_HOME}/.local/state")),
        ] {
            env.insert(name.to_owned(), value);
        }
        env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
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
        let mut args: Vec<String> = [
            "run",
            "-d",
            "--init",
            "--name",
            &sandbox.container,
            "--env-file",
            env_str,
            "-v",
            &format!("{home_str}:{BOX_HOME}"),
            "-w",
            BOX_HOME,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if let Some(user) = &user {
            args.extend(["--user".to_owned(), user.clone()]);
        }
        if let Some(network) = self
            .shared
            .config
            .network
            .as_ref()
            .filter(|n| !n.is_empty())
        {
            args.extend(["--network".to_owned(), network.clone()]);
        }
        args.extend(self.shared.config.run_args.iter().cloned());
        args.extend([
            self.shared.config.image.clone(),
            "sleep".to_owned(),
            "infinity".to_owned(),
        ]);
        let started = self.shared.cli(&probe.binary, &args, CONTROL_BOUND).await;
        let failure = match started {
            Ok(out) if out.ok() => match self.prove_mount(&sandbox).await {
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
        self.shared
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(sandbox_id);
        debug!(sandbox_id, "container_sandbox_killed");
        Ok(())
    }
}

/// The shell that reads a process's `/proc/{pid}/stat` in the box: sets `st` (state),
/// `sid` (session) and `start` (start time), or returns 1 when there is no such process.
const STAT_FN: &str = r#"rd() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; [ -n "$s" ] || return 1; s=${s##*) }; set -- $s; st=$1; pg=$3; sid=$4; start=${20}; }"#;

/// One container box.
#[derive(Debug, Clone)]
pub struct ContainerSandbox {
    id: String,
    container: String,
    paths: BoxPaths,
    provider: ContainerProvider,
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
    /// The box's directory on the host.
    pub fn root(&self) -> &Path {
        &self.paths.root
    }

    /// The container's name.
    pub fn container(&self) -> &str {
        &self.container
    }

    async fn ensure_present(&self) -> Result<(), BoxError> {
        self.paths.ensure_present(&self.id).await
    }

    async fn read_record(&self) -> Result<ContainerRecord, BoxError> {
        self.paths.read_record(&self.id).await
    }

    async fn write_record(&self, record: &ContainerRecord) -> Result<(), BoxError> {
        self.paths.write_record(record).await
    }

    async fn update_record<T>(
        &self,
        change: impl FnOnce(&mut ContainerRecord) -> T,
    ) -> Result<T, BoxError> {
        let lock = self.provider.shared.lock_of(&self.id);
        let _guard = lock.lock().await;
        let mut record = self.read_record().await?;
        let out = change(&mut record);
        self.write_record(&record).await?;
        Ok(out)
    }

    async fn cli(&self, args: &[String], bound: Duration) -> Result<CliOutput, BoxError> {
        let probe = self.provider.probe().await?;
        self.provider.shared.cli(&probe.binary, args, bound).await
    }

    /// What the runtime says of the container.
    async fn state(&self) -> Result<State, BoxError> {
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
    async fn exec_raw(
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

    async fn resume(&self) -> Result<(), BoxError> {
        let lock = self.provider.shared.lock_of(&self.id);
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
        let lock = self.provider.shared.lock_of(&self.id);
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
        let lock = self.provider.shared.lock_of(&self.id);
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
                    return Err(BoxError::Failed(format!(
                        "pause {} exited {}: {}",
                        self.container,
                        out.code,
                        out.err_text()
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
