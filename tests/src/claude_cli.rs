//! The **real** Claude Code CLI for tests, run offline against
//! [`crate::anthropic_standin::AnthropicStandin`].
//!
//! - [`claude_cli`]: `$BOXFLEET_CLAUDE_CLI` when set; else `@anthropic-ai/claude-code` at
//!   [`CLAUDE_CODE_VERSION`], installed with npm once into `<target>/claude-cli/<version>/`
//!   and shared by every later test run ([`crate::npm`]). No npm panics naming the fix: a test
//!   that needs the CLI never skips.
//! - [`offline_env`]: the environment that points the CLI at a stand-in and keeps it from
//!   reaching anything else, or reading a real user's config.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The Claude Code version the tests install (and were verified against).
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";
/// The npm package.
pub const CLAUDE_CODE_PACKAGE: &str = "@anthropic-ai/claude-code";
/// Overrides the install: the path of a `claude` binary to use as is.
pub const CLAUDE_CLI_ENV: &str = "BOXFLEET_CLAUDE_CLI";

/// The path of a `claude` binary that answers `--version`; installed on first use.
pub fn claude_cli() -> PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        let cli = match std::env::var_os(CLAUDE_CLI_ENV) {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => crate::npm::installed(&crate::npm::Package {
                name: CLAUDE_CODE_PACKAGE,
                version: CLAUDE_CODE_VERSION,
                bin: "claude",
                cache: "claude-cli",
                check: cli_version,
                override_env: CLAUDE_CLI_ENV,
            }),
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

pub fn cli_version(cli: &Path) -> Result<String, String> {
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
