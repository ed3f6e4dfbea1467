//! The container runtime's CLI: which host variables it is handed ([`runtime_environment`]),
//! one bounded invocation ([`run_cli`], its [`CliOutput`]), and the probe that finds the
//! runtime and asks whether it is rootful ([`probe_runtime`], its [`Probe`]).
//!
//! The CLI gets an explicit environment: the host allowlist (PATH, locale, TLS trust,
//! proxy), the engine user's home, temporary and XDG directories, the runtime's own
//! configuration (`DOCKER_*`, `CONTAINERS_*`, `PODMAN_*`, …), then `runtime_env`. The box
//! never gets any of it.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use boxfleet_actors::ports::BoxError;
use tracing::warn;

use super::config::{Runtime, RuntimeKind};
use crate::direct::{io_failed, read_bounded};

/// How long a runtime control command (`run`, `pause`, `inspect`, `rm`, …) may take.
pub(super) const CONTROL_BOUND: Duration = Duration::from_secs(120);

/// What the runtime probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub binary: PathBuf,
    pub kind: RuntimeKind,
    /// rootful: the container's root is the host's, so the box runs as the engine's uid:gid
    pub rootful: bool,
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
pub(super) fn runtime_environment(
    runtime_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| runtime_may_see(k))
        .collect();
    env.extend(runtime_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// What a runtime CLI invocation printed.
#[derive(Debug)]
pub(super) struct CliOutput {
    pub(super) code: i32,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: Vec<u8>,
}

impl CliOutput {
    pub(super) fn ok(&self) -> bool {
        self.code == 0
    }
    pub(super) fn err_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_owned()
    }
    pub(super) fn out_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_owned()
    }
    /// The runtime says the container does not exist.
    pub(super) fn says_missing(&self) -> bool {
        let text = self.err_text().to_ascii_lowercase();
        text.contains("no such container")
            || text.contains("no such object")
            || text.contains("no container with name or id")
    }
}

/// Runs the runtime CLI with its own environment, bounded.
pub(super) async fn run_cli(
    cli_env: &BTreeMap<String, String>,
    binary: &Path,
    args: &[String],
    bound: Duration,
) -> Result<CliOutput, BoxError> {
    let mut cmd = tokio::process::Command::new(binary);
    cmd.args(args)
        .env_clear()
        .envs(cli_env)
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

/// The first executable file called `name` on the runtime CLI's PATH.
fn find_on_path(cli_env: &BTreeMap<String, String>, name: &str) -> Option<PathBuf> {
    let path = cli_env.get("PATH")?;
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| {
            fs::metadata(candidate)
                .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Finds the runtime `runtime` names and asks whether it is rootful. The first candidate
/// that answers wins; when none answers, the first found counts as rootful.
pub(super) async fn probe_runtime(
    runtime: &Runtime,
    cli_env: &BTreeMap<String, String>,
) -> Result<Probe, BoxError> {
    let candidates: Vec<(PathBuf, RuntimeKind)> = match runtime {
        Runtime::Binary { path, kind } => vec![(path.clone(), *kind)],
        Runtime::Docker | Runtime::Podman | Runtime::Auto => {
            let wanted: &[RuntimeKind] = match runtime {
                Runtime::Docker => &[RuntimeKind::Docker],
                Runtime::Podman => &[RuntimeKind::Podman],
                _ => &[RuntimeKind::Docker, RuntimeKind::Podman],
            };
            wanted
                .iter()
                .filter_map(|kind| find_on_path(cli_env, kind.name()).map(|p| (p, *kind)))
                .collect()
        }
    };
    let Some(first) = candidates.first().cloned() else {
        return Err(BoxError::Failed(
            "no container runtime found: neither docker nor podman is on the runtime's PATH".into(),
        ));
    };
    let mut failures = Vec::new();
    for (binary, kind) in &candidates {
        match ask_rootless(cli_env, binary, *kind).await {
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
async fn ask_rootless(
    cli_env: &BTreeMap<String, String>,
    binary: &Path,
    kind: RuntimeKind,
) -> Result<bool, String> {
    let format = match kind {
        RuntimeKind::Docker => "{{json .SecurityOptions}}",
        RuntimeKind::Podman => "{{.Host.Security.Rootless}}",
    };
    let args = ["info".to_owned(), "--format".to_owned(), format.to_owned()];
    let out = run_cli(cli_env, binary, &args, CONTROL_BOUND)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_sees_its_own_configuration_and_not_the_engines_secrets() {
        for name in [
            "PATH",
            "LC_ALL",
            "XDG_RUNTIME_DIR",
            "DOCKER_HOST",
            "CONTAINERS_CONF",
        ] {
            assert!(runtime_may_see(name), "{name}");
        }
        for name in [
            "ANTHROPIC_API_KEY",
            "E2B_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "path",
        ] {
            assert!(!runtime_may_see(name), "{name}");
        }
    }

    #[test]
    fn a_missing_container_is_recognised_in_either_runtimes_words() {
        let said = |stderr: &str| CliOutput {
            code: 1,
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
        };
        assert!(said("Error: No such container: boxfleet-c1").says_missing());
        assert!(said("Error: no container with name or ID \"x\" found").says_missing());
        assert!(!said("permission denied").says_missing());
    }
}
