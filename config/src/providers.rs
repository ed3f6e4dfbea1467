//! The company's providers and roles as written (DESIGN §12, the spec's "Enabling it",
//! "Claude Code", "Credentials and the run environment"): the `providers.llm` entries a seat's
//! code work runs on ([`LlmEntry`], its [`Wire`]), the `providers.sandbox` catalogue
//! ([`SandboxSection`]: the e2b and local cells, the defaults, the engine-wide
//! [`SetupStep`]s), and each [`Role`] with its `sandbox` gate ([`RoleSandbox`]).
//!
//! Layout: the LLM entries → their Debug forms, which hide keys → the sandbox catalogue →
//! roles → the runner and cell names → [`clean_setup_path`], a setup file's path rule.
//!
//! What a launch runs is decided from these in [`plan`](crate::plan); what is wrong with them
//! is found in [`validate`](crate::validate).

use std::collections::BTreeMap;

use serde::Deserialize;

/// The wire an LLM entry speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wire {
    Anthropic,
    Openai,
    OpenaiCompatible,
    /// a cli-agent entry: the Claude Code CLI signed in on the engine host (its login in
    /// `login_dir`), whose model is written in that CLI's grammar
    ClaudeCode,
    /// a cli-agent entry: OpenCode, its model written `<provider>/<model>` as its own calls
    /// write it, signed in by its exported login (`login_dir/exported-credentials`, what
    /// `opencode auth export` printed) in a local box, or by the provider's key in the seat's
    /// `role.sandbox.env`
    Opencode,
}

impl Wire {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::Openai => "openai",
            Wire::OpenaiCompatible => "openai-compatible",
            Wire::ClaudeCode => "claude-code",
            Wire::Opencode => "opencode",
        }
    }
}

/// One `providers.llm` entry. Its Debug form hides the keys.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmEntry {
    /// anthropic | openai | openai-compatible | claude-code | opencode
    pub provider: Wire,
    /// the model this entry's calls name
    pub model: String,
    /// the key (`${VAR}` references are resolved from the node's environment at load)
    #[serde(default)]
    pub api_key: Option<String>,
    /// a pool of keys; a box gets the first, since it cannot rotate through a pool
    #[serde(default)]
    pub api_keys: Vec<String>,
    /// a gateway's endpoint; for an anthropic entry, the host root (`/v1/messages` is added)
    #[serde(default)]
    pub base_url: Option<String>,
    /// a cli-agent entry's shared login directory on the engine host (claude-code: default
    /// `~/.claude`; opencode: holds `exported-credentials`): a local box is seeded from it and
    /// writes a refreshed login back
    #[serde(default)]
    pub login_dir: Option<String>,
}

impl LlmEntry {
    /// The key a box gets: `api_key`, else the first of `api_keys`.
    pub fn key(&self) -> Option<&str> {
        self.api_key
            .as_deref()
            .or(self.api_keys.first().map(String::as_str))
            .filter(|key| !key.is_empty())
    }
}

impl std::fmt::Debug for LlmEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmEntry")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .field("api_keys", &self.api_keys.len())
            .field("base_url", &self.base_url)
            .field("login_dir", &self.login_dir)
            .finish()
    }
}

impl std::fmt::Debug for E2bSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E2bSection")
            .field("api_key", &"<hidden>")
            .field("domain", &self.domain)
            .field("template", &self.template)
            .finish()
    }
}

impl std::fmt::Debug for RoleSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleSandbox")
            .field("enabled", &self.enabled)
            .field("run_in", &self.run_in)
            .field("coding_agent", &self.coding_agent)
            .field("max_turns", &self.max_turns)
            .field("pause_ttl_seconds", &self.pause_ttl_seconds)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("optional_keys", &self.optional_keys)
            .field("mcp", &self.mcp)
            .finish()
    }
}

/// What a mismatch between the model asked for and the model that ran does to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MismatchPolicy {
    /// the run fails with reason `model_mismatch` (the default)
    #[default]
    Fail,
    /// the run keeps its result; the receipt records `mismatch` with both ids
    Record,
}

/// `providers.sandbox.e2b`. Its Debug form hides the key.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct E2bSection {
    pub api_key: String,
    /// empty: E2B's cloud (`e2b.app`); else a self-hosted cluster's domain
    #[serde(default)]
    pub domain: Option<String>,
    /// empty: the prebuilt template for the coding agent
    #[serde(default)]
    pub template: Option<String>,
    /// the control plane's URL; empty: `https://api.{domain}` (a self-hosted cluster or a
    /// stand-in server may put it elsewhere)
    #[serde(default)]
    pub api_url: Option<String>,
    /// envd's URL with `{sandbox_id}` for the box; empty: `https://49983-{sandbox_id}.{domain}`
    #[serde(default)]
    pub envd_url: Option<String>,
}

/// `providers.sandbox.local`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LocalSection {
    /// where local boxes live; empty: `{node.data_dir}/boxes`
    #[serde(default)]
    pub state_dir: Option<String>,
    /// the container image (required only if some seat runs in a container)
    #[serde(default)]
    pub image: Option<String>,
    /// auto | docker | podman
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub network: Option<String>,
    /// how a container box is sized, e.g. `["--cpus", "2", "--memory", "4g"]`
    #[serde(default)]
    pub run_args: Vec<String>,
    /// extra environment for the docker/podman CLI itself, never the box
    #[serde(default)]
    pub runtime_env: BTreeMap<String, String>,
    /// the most a local box (direct or container) may hold on the node's disk, in bytes;
    /// past it the disk watchdog ends its job (`disk_budget`). Default 10 GiB
    #[serde(default)]
    pub max_box_bytes: Option<u64>,
    /// what the disk holding the node's store keeps free, in bytes: under it every running
    /// local job is ended (`disk_budget`). Default 256 MiB
    #[serde(default)]
    pub store_reserve_bytes: Option<u64>,
}

/// One setup step (the spec's "Setup steps"): files written into a new box, then commands
/// run with the run environment; a failure tears the box down before any brief runs.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SetupStep {
    /// unique within its list: what a setup failure names
    pub name: String,
    /// path → content. A relative path or one starting `~/` is under the box's home. A body
    /// that is exactly one `${VAR}` is that variable's value; any other `${…}` is left for
    /// whatever reads the file in the box.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// run after the files land, in order; a non-zero exit fails the box
    #[serde(default)]
    pub commands: Vec<String>,
    /// each command's bound (exit 124 when it runs out); default 600
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// variables merged into the run environment (`${VAR}`-expanded at load)
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// env keys and file paths whose value may resolve to nothing (left out, not refused)
    #[serde(default)]
    pub optional_keys: Vec<String>,
    /// what the step made true, for the agent's brief
    #[serde(default)]
    pub brief: Option<String>,
}

impl std::fmt::Debug for SetupStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetupStep")
            .field("name", &self.name)
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .field("commands", &self.commands.len())
            .field("timeout_seconds", &self.timeout_seconds)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A setup command's bound when its step names none.
pub const DEFAULT_SETUP_TIMEOUT_SECONDS: u64 = 600;

/// `providers.sandbox`: the catalogue of cells (`e2b:`, `local:`, or `fake: true`) and the
/// defaults; its rules are [`catalogue`](crate::catalogue)'s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// whether the document carries the block: absent is no sandbox at all, `{}` is refused
    #[serde(skip)]
    pub declared: bool,
    #[serde(default)]
    pub e2b: Option<E2bSection>,
    #[serde(default)]
    pub local: Option<LocalSection>,
    /// deterministic in-process boxes for every cell (`true`, or a block of latencies and
    /// the job); refused beside a real backend
    #[serde(default)]
    pub fake: crate::fake::FakeSection,
    /// direct | container | e2b, where a seat that names none runs; required unless the
    /// catalogue names exactly one cell (`e2b:` alone, `fake: true`)
    #[serde(default)]
    pub default_run_in: Option<String>,
    /// claude-code | opencode | command; default command
    #[serde(default)]
    pub default_coding_agent: Option<String>,
    /// the box's TTL / keepalive window — not a run cap
    #[serde(default)]
    pub default_timeout_seconds: Option<u64>,
    /// agentic-round cap for coding runs; 0 = uncapped
    #[serde(default)]
    pub default_max_turns: Option<u32>,
    /// how long a run parked on a question keeps its paused box, in seconds; absent: 1800,
    /// 0: never pause (the box goes the moment the run parks); negative is refused
    #[serde(default)]
    pub default_pause_ttl_seconds: Option<i64>,
    /// fail | record; default fail
    #[serde(default)]
    pub model_mismatch: MismatchPolicy,
    /// engine-wide setup steps, applied to every new box before the role's
    #[serde(default)]
    pub setup: Vec<SetupStep>,
}

/// `providers:`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Providers {
    /// named entries; the one named `default` is the company default
    #[serde(default)]
    pub llm: BTreeMap<String, LlmEntry>,
    /// absent: no sandbox at all (`declared` false)
    #[serde(default, deserialize_with = "declared_sandbox")]
    pub sandbox: SandboxSection,
}

/// Reads `providers.sandbox` as present: an absent block is told from an empty one.
fn declared_sandbox<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<SandboxSection, D::Error> {
    let mut sandbox = SandboxSection::deserialize(deserializer)?;
    sandbox.declared = true;
    Ok(sandbox)
}

/// A role's `sandbox` gate. Its Debug form names the environment's keys, not their values.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RoleSandbox {
    #[serde(default)]
    pub enabled: bool,
    /// direct | container | e2b; empty: `providers.sandbox.default_run_in`
    #[serde(default)]
    pub run_in: Option<String>,
    /// claude-code | opencode | command; empty: `providers.sandbox.default_coding_agent`
    #[serde(default)]
    pub coding_agent: Option<String>,
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// this role's pause TTL, in seconds; absent: `default_pause_ttl_seconds`; 0: never pause
    #[serde(default)]
    pub pause_ttl_seconds: Option<i64>,
    /// the run environment this role's seats get (`${VAR}`-expanded at load)
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// keys left out of the run when their value resolves to nothing
    #[serde(default)]
    pub optional_keys: Vec<String>,
    /// this role's setup steps, after `providers.sandbox.setup`
    #[serde(default)]
    pub setup: Vec<SetupStep>,
    /// which of the company's MCP servers this role's boxes get
    #[serde(default)]
    pub mcp: Option<crate::mcp::RoleMcp>,
}

/// A role.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Role {
    pub name: String,
    /// the entry the role's text calls use
    #[serde(default)]
    pub llm: Option<String>,
    /// the entry its code work uses (before `llm`, then `default`)
    #[serde(default)]
    pub llm_sandbox: Option<String>,
    /// the entry that condenses what its runs wrote past their bounds (before `llm`, then
    /// `default`): a report, a failure or a question
    #[serde(default)]
    pub llm_auxiliary: Option<String>,
    #[serde(default)]
    pub sandbox: Option<RoleSandbox>,
    /// the engine that serves this role's seats (a seat's own `engine` wins)
    #[serde(default)]
    pub engine: Option<crate::engine::EngineChoice>,
    /// the seat's own credentials for the company's MCP servers, by server: an HTTP server
    /// gets them as headers, a stdio one as environment (`${VAR}`-resolved at load)
    #[serde(default)]
    pub mcp_env: BTreeMap<String, BTreeMap<String, String>>,
    /// `mcp_env` resolved at load, by server
    #[serde(skip)]
    pub mcp_env_resolved: BTreeMap<String, crate::mcp::ResolvedMcpEnv>,
}

/// The runners and cells a plan can name.
pub const RUNNERS: [&str; 3] = ["command", "claude-code", "opencode"];
pub const CELLS: [&str; 3] = ["direct", "container", "e2b"];

/// A setup file's path, cleaned (`.` segments and a trailing `/` dropped; `..` may not
/// climb out). A relative path and one starting `~/` name a file under the home in every
/// cell; another account's home is refused everywhere, and an absolute path is refused in a
/// local box (`local`), which writes only inside its home.
pub fn clean_setup_path(path: &str, local: bool) -> Result<String, String> {
    if path.is_empty() {
        return Err("an empty path".into());
    }
    let (home, rest) = if let Some(rest) = path.strip_prefix("~/") {
        (true, rest)
    } else if path == "~" {
        return Err("which is the home itself, a directory".into());
    } else if path.starts_with('~') {
        return Err("which is another account's home".into());
    } else if let Some(rest) = path.strip_prefix('/') {
        (false, rest)
    } else {
        (true, path)
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("which climbs out of the home".into());
                }
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err("which names a directory, not a file".into());
    }
    if !home && local {
        return Err("which a local box refuses: it writes only inside the box's home".into());
    }
    Ok(if home {
        format!("~/{}", parts.join("/"))
    } else {
        format!("/{}", parts.join("/"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_paths_are_cleaned_and_a_local_box_writes_only_in_its_home() {
        assert_eq!(clean_setup_path(".npmrc", true).as_deref(), Ok("~/.npmrc"));
        assert_eq!(clean_setup_path("~/./a//b/", true).as_deref(), Ok("~/a/b"));
        assert_eq!(clean_setup_path("/etc/x", false).as_deref(), Ok("/etc/x"));
        assert!(clean_setup_path("/etc/x", true).is_err());
        assert!(clean_setup_path("~bob/.npmrc", false).is_err());
        assert!(clean_setup_path("../x", true).is_err());
        assert!(clean_setup_path("~/", true).is_err());
    }
}
