//! The **real** Claude Code CLI for tests, run offline against
//! [`crate::anthropic_standin::AnthropicStandin`].
//!
//! - [`claude_cli`]: `$BOXFLEET_CLAUDE_CLI` when set; else `@anthropic-ai/claude-code` at
//!   [`CLAUDE_CODE_VERSION`], installed with npm once into `<target>/claude-cli/<version>/`
//!   and shared by every later test run (a lock directory keeps parallel test processes from
//!   installing it twice; the install lands in a staging directory that is renamed into place,
//!   so a half-done install is never used). No npm panics naming the fix: a test that needs the
//!   CLI never skips.
//! - [`offline_env`]: the environment that points the CLI at a stand-in and keeps it from
//!   reaching anything else, or reading a real user's config.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The Claude Code version the tests install (and were verified against).
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";
/// The npm package.
pub const CLAUDE_CODE_PACKAGE: &str = "@anthropic-ai/claude-code";
/// Overrides the install: the path of a `claude` binary to use as is.
pub const CLAUDE_CLI_ENV: &str = "BOXFLEET_CLAUDE_CLI";

/// How long a test process waits for another one's install before giving up.
const INSTALL_WAIT: Duration = Duration::from_secs(600);

/// The path of a `claude` binary that answers `--version`; installed on first use.
pub fn claude_cli() -> PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        let cli = match std::env::var_os(CLAUDE_CLI_ENV) {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => installed_cli(),
        };
        let version = cli_version(&cli).unwrap_or_else(|error| {
            panic!("{} does not run: {error}", cli.display());
        });
        eprintln!("claude-cli: {} is {version}", cli.display());
        cli
    })
    .clone()
}

/// The environment that runs the CLI against `base_url` (a stand-in), with `home` as its
/// throwaway `HOME`: an API key that is not one, no telemetry, error reports, auto-updates or
/// other non-essential traffic, and `IS_SANDBOX=1` so `bypassPermissions` works as root.
pub fn offline_env(base_url: &str, home: &Path) -> Vec<(String, String)> {
    let home = home.to_string_lossy().into_owned();
    [
        ("ANTHROPIC_BASE_URL", base_url),
        ("ANTHROPIC_API_KEY", "sk-ant-standin-not-a-key"),
        ("HOME", home.as_str()),
        ("XDG_CONFIG_HOME", &format!("{home}/.config")),
        ("CLAUDE_CONFIG_DIR", &format!("{home}/.claude")),
        ("IS_SANDBOX", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Variables of the test's own environment that would sign the CLI in elsewhere or change
/// where it goes; [`claude_command`] removes them.
pub const SCRUBBED_ENV: &[&str] = &[
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// `claude` with [`offline_env`] set (and [`SCRUBBED_ENV`] removed), in `cwd`. Add the
/// arguments and stdin.
pub fn claude_command(base_url: &str, home: &Path, cwd: &Path) -> Command {
    let mut command = Command::new(claude_cli());
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    command.envs(offline_env(base_url, home)).current_dir(cwd);
    command
}

/// The headless flags of DESIGN §10 (`-p --output-format stream-json --verbose
/// --permission-mode bypassPermissions --model MODEL`); the brief goes on stdin.
pub fn headless_args(model: &str) -> Vec<String> {
    [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        "--model",
        model,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

fn cli_version(cli: &Path) -> Result<String, String> {
    let home = std::env::temp_dir().join(format!("claude-cli-version-{}", std::process::id()));
    let output = Command::new(cli)
        .arg("--version")
        .env("HOME", &home)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() && !stdout.is_empty() {
        Ok(stdout)
    } else {
        Err(format!(
            "`--version` exited with {}; stdout: {stdout}; stderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// `<target>/claude-cli`, beside the test binary's `target/<profile>/deps`.
fn cache_root() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("the test binary lives in <target>/<profile>/deps");
    target.join("claude-cli")
}

fn installed_cli() -> PathBuf {
    let root = cache_root();
    let dir = root.join(CLAUDE_CODE_VERSION);
    let bin = dir.join("node_modules/.bin/claude");
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("create {}: {e}", root.display()));
    let _lock = InstallLock::acquire(&root.join(format!("{CLAUDE_CODE_VERSION}.lock")), &bin);
    if !bin.exists() {
        npm_install(&root, &dir);
    }
    assert!(
        bin.exists(),
        "npm installed {CLAUDE_CODE_PACKAGE} but left no {}",
        bin.display()
    );
    bin
}

fn npm_install(root: &Path, dir: &Path) {
    let npm = which("npm").unwrap_or_else(|| {
        panic!(
            "the Claude Code CLI tests need npm to install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}, \
             and there is no npm on PATH: install it (Debian: apt-get install nodejs npm), \
             or point {CLAUDE_CLI_ENV} at a claude binary"
        )
    });
    let staging = root.join(format!(
        "{CLAUDE_CODE_VERSION}.staging-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .unwrap_or_else(|e| panic!("create {}: {e}", staging.display()));
    eprintln!(
        "claude-cli: npm install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} into {}",
        dir.display()
    );
    let output = Command::new(&npm)
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--prefix",
        ])
        .arg(&staging)
        .arg(format!("{CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}"))
        .current_dir(&staging)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", npm.display()));
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        panic!(
            "npm install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let staged = staging.join("node_modules/.bin/claude");
    if let Err(error) = cli_version(&staged) {
        let _ = std::fs::remove_dir_all(&staging);
        panic!(
            "npm installed {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} but its claude does not run \
             (its postinstall puts the native binary in place; was it skipped?): {error}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir)
        .unwrap_or_else(|e| panic!("move {} to {}: {e}", staging.display(), dir.display()));
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A lock directory (`mkdir` is atomic) holding its owner's pid; one left by a process that
/// has exited is taken over.
#[derive(Debug)]
struct InstallLock {
    dir: PathBuf,
}

impl InstallLock {
    /// Waits for the lock, or for `done` to appear (another process finished the install).
    fn acquire(dir: &Path, done: &Path) -> Option<InstallLock> {
        let deadline = Instant::now() + INSTALL_WAIT;
        loop {
            match std::fs::create_dir(dir) {
                Ok(()) => {
                    let _ = std::fs::write(dir.join("pid"), std::process::id().to_string());
                    return Some(InstallLock {
                        dir: dir.to_owned(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if done.exists() {
                        return None;
                    }
                    let owner = std::fs::read_to_string(dir.join("pid")).ok();
                    let alive = owner
                        .as_deref()
                        .map(str::trim)
                        .is_some_and(|pid| Path::new("/proc").join(pid).exists());
                    // no pid yet: the owner is between mkdir and write, or died there
                    let orphaned = owner.is_none()
                        && std::fs::metadata(dir)
                            .and_then(|m| m.modified())
                            .ok()
                            .and_then(|t| t.elapsed().ok())
                            .is_some_and(|age| age > Duration::from_secs(30));
                    if (owner.is_some() && !alive) || orphaned {
                        let _ = std::fs::remove_dir_all(dir);
                        continue;
                    }
                }
                Err(e) => panic!("create the install lock {}: {e}", dir.display()),
            }
            assert!(
                Instant::now() < deadline,
                "waited {INSTALL_WAIT:?} for another test process to install {CLAUDE_CODE_PACKAGE} \
                 (lock {})",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
