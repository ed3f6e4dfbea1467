//! The setup steps a new box is provisioned with before any brief runs (the spec's "Setup
//! steps"): each step's files, then its commands with the run environment; and the steps'
//! briefs folded into the agent's "## Your environment".

use std::collections::BTreeMap;
use std::time::Duration;

use boxfleet_config::providers::{DEFAULT_SETUP_TIMEOUT_SECONDS, SetupStep, clean_setup_path};

use super::text::{cut, shell_quote};
use crate::ports::Sandbox;

/// Applies setup steps to a new box, in order: each step's files, then its commands with the
/// run environment. The error names the step and which of three things failed (the spec's
/// sandbox_setup_failed): a file the box would not take, a command that exited non-zero, or
/// a command that reported no exit status.
pub(super) async fn apply_setup(
    sandbox: &dyn Sandbox,
    steps: &[SetupStep],
    env: &BTreeMap<String, String>,
) -> Result<(), String> {
    for step in steps {
        let name = &step.name;
        for (path, body) in &step.files {
            let cleaned = clean_setup_path(path, false).map_err(|problem| {
                format!("setup step {name:?}: could not write {path}: {problem}")
            })?;
            sandbox
                .write_file(&cleaned, body.as_bytes())
                .await
                .map_err(|error| format!("setup step {name:?}: could not write {path}: {error}"))?;
        }
        let timeout = step
            .timeout_seconds
            .unwrap_or(DEFAULT_SETUP_TIMEOUT_SECONDS);
        for (i, command) in step.commands.iter().enumerate() {
            run_setup_command(sandbox, name, i + 1, command, timeout, env).await?;
        }
    }
    Ok(())
}

/// Runs setup command number `n` of step `name` under the step's `timeout`.
async fn run_setup_command(
    sandbox: &dyn Sandbox,
    name: &str,
    n: usize,
    command: &str,
    timeout: u64,
    env: &BTreeMap<String, String>,
) -> Result<(), String> {
    // `timeout` gives the step's own bound its exit 124; the exec bound is a backstop
    let bounded = format!("timeout {timeout} sh -c {}", shell_quote(command));
    let output = sandbox
        .exec(&bounded, env, Duration::from_secs(timeout + 30))
        .await
        .map_err(|error| {
            format!("setup step {name:?}: command #{n} reported no exit status: {error}")
        })?;
    if output.exit_code == 0 {
        return Ok(());
    }
    let printed = boxfleet_redact::redact(&format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ));
    let printed = cut(printed.trim(), 4096);
    let code = output.exit_code;
    let mut text = format!("setup step {name:?}: command #{n} failed (exit {code})");
    if code == 124 {
        text.push_str(&format!(": its timeout_seconds of {timeout}s ran out"));
    }
    if !printed.is_empty() {
        text.push_str(&format!(": {printed}"));
    }
    if code > 128 {
        text.push_str(&format!(" (ended by signal {})", code - 128));
    }
    Err(text)
}

/// The brief with the setup steps' paragraphs, and the names of the MCP servers the agent is
/// given, folded into a "## Your environment" block.
pub(super) fn environment_brief(brief: &str, steps: &[SetupStep], mcp_servers: &[&str]) -> String {
    let mut paragraphs: Vec<String> = steps
        .iter()
        .filter_map(|step| step.brief.as_deref())
        .filter(|b| !b.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if !mcp_servers.is_empty() {
        paragraphs.push(format!(
            "MCP servers connected for you: {}. Every tool each one serves is yours to call.",
            mcp_servers.join(", ")
        ));
    }
    if paragraphs.is_empty() {
        return brief.to_owned();
    }
    format!(
        "{brief}\n\n## Your environment\n\n{}\n",
        paragraphs.join("\n\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_briefs_fold_into_one_environment_block() {
        let step = |brief: Option<&str>| SetupStep {
            name: "s".into(),
            brief: brief.map(str::to_owned),
            ..SetupStep::default()
        };
        assert_eq!(environment_brief("Fix it.", &[step(None)], &[]), "Fix it.");
        assert_eq!(
            environment_brief(
                "Fix it.",
                &[step(Some("Node 22 is on PATH.")), step(Some(" "))],
                &[]
            ),
            "Fix it.\n\n## Your environment\n\nNode 22 is on PATH.\n"
        );
    }

    #[test]
    fn the_connected_mcp_servers_are_named_in_the_environment_block() {
        assert_eq!(
            environment_brief("Fix it.", &[], &["github", "boxfleet"]),
            "Fix it.\n\n## Your environment\n\nMCP servers connected for you: github, boxfleet. Every tool each one serves is yours to call.\n"
        );
    }
}
