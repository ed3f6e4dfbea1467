//! The company's providers and roles (DESIGN §12, the spec's "Enabling it", "Claude Code",
//! "Credentials and the run environment"): the `providers.llm` entries a seat's code work
//! runs on, the `providers.sandbox` catalogue, and each role's `sandbox` gate — and the one
//! decision that joins them at launch, [`Company::plan_sandbox`]: which runner, which cell,
//! which model, and which variables the run environment carries.
//!
//! The plan is made before any box starts, so a model the box cannot route — an entry with
//! no key, an OpenAI-wire entry under Claude Code — is refused at launch with the entry named
//! and the remedies for its case, never left to stall inside a box.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Error;
use crate::company::Company;

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
}

impl Wire {
    fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::Openai => "openai",
            Wire::OpenaiCompatible => "openai-compatible",
            Wire::ClaudeCode => "claude-code",
        }
    }
}

/// One `providers.llm` entry. Its Debug form hides the keys.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmEntry {
    /// anthropic | openai | openai-compatible
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
    /// a claude-code entry's shared login directory on the engine host (default `~/.claude`):
    /// a local box is seeded from it and writes a refreshed login back
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
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("optional_keys", &self.optional_keys)
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
    /// each command's bound (exit 124 when it runs out); default 300
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
pub const DEFAULT_SETUP_TIMEOUT_SECONDS: u64 = 300;

/// `providers.sandbox`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    #[serde(default)]
    pub e2b: Option<E2bSection>,
    #[serde(default)]
    pub local: Option<LocalSection>,
    /// direct | container | e2b; default direct
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
    #[serde(default)]
    pub sandbox: SandboxSection,
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
    /// the run environment this role's seats get (`${VAR}`-expanded at load)
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// keys left out of the run when their value resolves to nothing
    #[serde(default)]
    pub optional_keys: Vec<String>,
    /// this role's setup steps, after `providers.sandbox.setup`
    #[serde(default)]
    pub setup: Vec<SetupStep>,
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
    #[serde(default)]
    pub sandbox: Option<RoleSandbox>,
}

/// The runners and cells a plan can name.
pub const RUNNERS: [&str; 3] = ["command", "claude-code", "opencode"];
pub const CELLS: [&str; 3] = ["direct", "container", "e2b"];

/// The variables that sign Claude Code in by themselves: a seat that sets one in its role's
/// environment gets neither of an entry's two variables.
pub const CLAUDE_SIGN_INS: [&str; 6] = [
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
];

/// What a launch runs, decided before any box starts. Its Debug form names the
/// environment's keys, not their values.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SandboxPlan {
    pub runner: String,
    pub cell: String,
    /// the model sent to the box (`--model`); None: the CLI's own choice
    pub model: Option<String>,
    /// the entry the model and credentials came from
    pub entry: Option<String>,
    /// an entry's base_url, for a runner that takes its endpoint in its own config (OpenCode)
    pub base_url: Option<String>,
    pub wire: Option<Wire>,
    /// the run environment: the role's env plus the entry's credentials
    pub env: BTreeMap<String, String>,
    pub max_turns: Option<u32>,
    /// the setup steps a new box gets: engine-wide, then the role's
    pub setup: Vec<SetupStep>,
    /// a cli-agent entry's shared login directory: seeded into the (local) box, a refreshed
    /// login written back
    pub login_dir: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for SandboxPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxPlan")
            .field("runner", &self.runner)
            .field("cell", &self.cell)
            .field("model", &self.model)
            .field("entry", &self.entry)
            .field("base_url", &self.base_url)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("max_turns", &self.max_turns)
            .field("setup", &self.setup)
            .field("login_dir", &self.login_dir)
            .finish()
    }
}

/// Why a launch's model cannot run (the spec's SandboxModelError).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SandboxModelError: {0}")]
pub struct ModelError(pub String);

impl Company {
    fn role_of(&self, seat: &str) -> Option<&Role> {
        let name = self
            .seats
            .iter()
            .find(|s| s.handle.eq_ignore_ascii_case(seat))?
            .role
            .as_deref()?;
        self.roles.iter().find(|role| role.name == name)
    }

    /// The entry a seat's code work runs on: `role.llm_sandbox`, else `role.llm`, else the
    /// entry named `default`.
    pub fn sandbox_entry(&self, seat: &str) -> Option<(&str, &LlmEntry)> {
        let role = self.role_of(seat);
        let chain = [
            role.and_then(|r| r.llm_sandbox.as_deref()),
            role.and_then(|r| r.llm.as_deref()),
            Some("default"),
        ];
        chain.into_iter().flatten().find_map(|name| {
            self.providers
                .llm
                .get_key_value(name)
                .map(|(k, v)| (k.as_str(), v))
        })
    }

    /// Decides what a launch for `seat` runs. `runner` and `model` are the launch's own
    /// choices (empty: the role's, then the provider defaults).
    pub fn plan_sandbox(
        &self,
        seat: &str,
        runner: Option<&str>,
        model: Option<&str>,
    ) -> Result<SandboxPlan, ModelError> {
        let role = self.role_of(seat);
        let gate = role.and_then(|r| r.sandbox.as_ref());
        let defaults = &self.providers.sandbox;
        let pick = |own: Option<&str>, role: Option<&str>, default: Option<&str>, last: &str| {
            [own, role, default]
                .into_iter()
                .flatten()
                .find(|s| !s.is_empty())
                .unwrap_or(last)
                .to_owned()
        };
        let runner = pick(
            runner,
            gate.and_then(|g| g.coding_agent.as_deref()),
            defaults.default_coding_agent.as_deref(),
            "command",
        );
        let cell = pick(
            None,
            gate.and_then(|g| g.run_in.as_deref()),
            defaults.default_run_in.as_deref(),
            "direct",
        );
        let mut plan = SandboxPlan {
            runner: runner.clone(),
            cell,
            env: gate
                .map(|g| {
                    g.env
                        .iter()
                        .filter(|(k, v)| !(v.is_empty() && g.optional_keys.contains(k)))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            max_turns: gate
                .and_then(|g| g.max_turns)
                .or(defaults.default_max_turns)
                .filter(|&n| n > 0),
            setup: defaults
                .setup
                .iter()
                .chain(gate.map(|g| g.setup.as_slice()).unwrap_or_default())
                .cloned()
                .collect(),
            ..SandboxPlan::default()
        };
        for step in &plan.setup {
            for (key, value) in &step.env {
                if !(value.is_empty() && step.optional_keys.contains(key)) {
                    plan.env.insert(key.clone(), value.clone());
                }
            }
        }
        let model = model.filter(|m| !m.is_empty());
        let entry = self.sandbox_entry(seat);
        match runner.as_str() {
            "command" => {
                // a plain command reads no model; one named is still sent and receipted
                plan.model = model.map(str::to_owned);
            }
            "claude-code" => {
                let signed_in = CLAUDE_SIGN_INS
                    .iter()
                    .find(|name| plan.env.get(**name).is_some_and(|v| !v.is_empty()));
                if let Some(name) = signed_in {
                    // the seat's own sign-in: none of the entry, so the company's key never
                    // moves a plan seat onto metered billing, nor its key to our gateway
                    plan.model = model.map(str::to_owned);
                    plan.entry = Some(format!("role.sandbox.env.{name}"));
                    return Ok(plan);
                }
                let Some((name, entry)) = entry else {
                    return Err(ModelError(format!(
                        "claude-code for seat {seat:?} has no credential: no providers.llm entry resolves (role.llm_sandbox → llm → default) and the role's sandbox env signs Claude Code in with nothing; add an anthropic entry named `default` (or point role.llm_sandbox at one), or set CLAUDE_CODE_OAUTH_TOKEN / ANTHROPIC_API_KEY in role.sandbox.env"
                    )));
                };
                if entry.provider == Wire::ClaudeCode {
                    // the CLI's own login; it never leaves the engine host for a remote box
                    if plan.cell == "e2b" {
                        return Err(ModelError(format!(
                            "providers.llm.{name} is Claude Code signed in on this host, and its login never leaves it for a remote box; run the seat's code work in a local cell (role.sandbox.run_in: direct or container), or give it a headless token (CLAUDE_CODE_OAUTH_TOKEN in role.sandbox.env)"
                        )));
                    }
                    let home = std::env::var("HOME").unwrap_or_default();
                    let dir = entry
                        .login_dir
                        .clone()
                        .filter(|d| !d.is_empty())
                        .unwrap_or_else(|| format!("{home}/.claude"));
                    let dir = match dir.strip_prefix("~/") {
                        Some(rest) => format!("{home}/{rest}"),
                        None => dir,
                    };
                    plan.login_dir = Some(dir.into());
                    plan.model = Some(model.unwrap_or(&entry.model).to_owned());
                    plan.entry = Some(name.to_owned());
                    plan.wire = Some(entry.provider);
                    return Ok(plan);
                }
                if entry.provider != Wire::Anthropic {
                    return Err(ModelError(format!(
                        "claude-code speaks the Anthropic API only, and seat {seat:?} resolves to providers.llm.{name}, a {} entry; point role.llm_sandbox at an anthropic entry, set role.sandbox.coding_agent: opencode, or give the seat a Claude Code sign-in of its own in role.sandbox.env",
                        entry.provider.name()
                    )));
                }
                let Some(key) = entry.key() else {
                    return Err(ModelError(format!(
                        "providers.llm.{name} has no key, so a claude-code box on it could not call its model; set its api_key (a ${{VAR}} reference is resolved at load)"
                    )));
                };
                plan.env.insert("ANTHROPIC_API_KEY".into(), key.to_owned());
                if let Some(url) = entry.base_url.as_deref().filter(|u| !u.is_empty()) {
                    plan.env.insert("ANTHROPIC_BASE_URL".into(), url.to_owned());
                }
                plan.model = Some(model.unwrap_or(&entry.model).to_owned());
                plan.entry = Some(name.to_owned());
                plan.wire = Some(entry.provider);
            }
            "opencode" => {
                let Some((name, entry)) = entry else {
                    return Err(ModelError(format!(
                        "opencode for seat {seat:?} has no model provider: no providers.llm entry resolves (role.llm_sandbox → llm → default); add one named `default` or point role.llm_sandbox at one"
                    )));
                };
                if entry.provider == Wire::ClaudeCode {
                    return Err(ModelError(format!(
                        "providers.llm.{name} is a claude-code entry: its model is written for Claude Code and its sign-in is that CLI's, so OpenCode cannot run on it; set role.sandbox.coding_agent: claude-code, or point role.llm_sandbox at an API entry"
                    )));
                }
                let Some(key) = entry.key() else {
                    return Err(ModelError(format!(
                        "providers.llm.{name} has no key, so an opencode box on it could not call its model; set its api_key"
                    )));
                };
                let variable = match entry.provider {
                    Wire::Anthropic => "ANTHROPIC_API_KEY",
                    Wire::Openai | Wire::OpenaiCompatible | Wire::ClaudeCode => "OPENAI_API_KEY",
                };
                // a key the seat names under the same variable replaces the entry's
                plan.env
                    .entry(variable.into())
                    .or_insert_with(|| key.to_owned());
                let bare = model.unwrap_or(&entry.model);
                let base_url = entry.base_url.clone().filter(|u| !u.is_empty());
                plan.model = Some(match (&base_url, entry.provider) {
                    _ if bare.contains('/') && model.is_some() => bare.to_owned(),
                    (Some(_), _) => format!("boxfleet/{bare}"),
                    (None, Wire::Anthropic) => format!("anthropic/{bare}"),
                    (None, _) => format!("openai/{bare}"),
                });
                plan.base_url = base_url;
                plan.entry = Some(name.to_owned());
                plan.wire = Some(entry.provider);
            }
            other => {
                return Err(ModelError(format!(
                    "{other:?} is not a runner; use one of {}",
                    RUNNERS.join(", ")
                )));
            }
        }
        Ok(plan)
    }

    /// Every problem of the providers and roles, each at its location with its remedy.
    pub(crate) fn provider_problems(&self, problems: &mut Vec<Error>) {
        let mut bad = |field: String, problem: String, remedy: &'static str| {
            problems.push(Error::Located {
                field,
                problem,
                remedy,
            });
        };
        let sandbox = &self.providers.sandbox;
        if let Some(cell) = sandbox.default_run_in.as_deref()
            && !CELLS.contains(&cell)
        {
            bad(
                "company.providers.sandbox.default_run_in".into(),
                format!("{cell:?} is not a cell"),
                "use direct, container or e2b",
            );
        }
        if let Some(runner) = sandbox.default_coding_agent.as_deref()
            && !RUNNERS.contains(&runner)
        {
            bad(
                "company.providers.sandbox.default_coding_agent".into(),
                format!("{runner:?} is not a runner"),
                "use claude-code, opencode or command",
            );
        }
        let steps = |field: &str,
                     list: &[SetupStep],
                     local: bool,
                     bad: &mut dyn FnMut(String, String, &'static str)| {
            for (i, step) in list.iter().enumerate() {
                if step.name.trim().is_empty() {
                    bad(
                        format!("{field}[{i}].name"),
                        "is empty".into(),
                        "name every step: a setup failure names it",
                    );
                }
                if list[..i].iter().any(|other| other.name == step.name) {
                    bad(
                        format!("{field}[{i}].name"),
                        format!("{:?} is a second step of that name in this list", step.name),
                        "give every step in one list its own name",
                    );
                }
                for path in step.files.keys() {
                    if let Err(problem) = clean_setup_path(path, local) {
                        bad(
                            format!("{field}[{i}].files.{path}"),
                            format!("setup step {:?} writes {path:?}, {problem}", step.name),
                            "write the file under the box's home (a relative or ~/ path), or have a command put it elsewhere",
                        );
                    }
                }
            }
        };
        let local_default = matches!(
            sandbox.default_run_in.as_deref(),
            None | Some("direct" | "container")
        );
        steps(
            "company.providers.sandbox.setup",
            &sandbox.setup,
            local_default
                || self.roles.iter().any(|r| {
                    r.sandbox
                        .as_ref()
                        .and_then(|g| g.run_in.as_deref())
                        .is_some_and(|c| c == "direct" || c == "container")
                }),
            &mut bad,
        );
        for (i, role) in self.roles.iter().enumerate() {
            if let Some(gate) = &role.sandbox {
                let cell = gate
                    .run_in
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .or(sandbox.default_run_in.as_deref())
                    .unwrap_or("direct");
                steps(
                    &format!("company.roles[{i}].sandbox.setup"),
                    &gate.setup,
                    cell != "e2b",
                    &mut bad,
                );
            }
        }
        for (name, entry) in &self.providers.llm {
            if entry.model.trim().is_empty() {
                bad(
                    format!("company.providers.llm.{name}.model"),
                    "is empty".into(),
                    "name the model this entry's calls use",
                );
            }
            if let Some(url) = &entry.base_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                bad(
                    format!("company.providers.llm.{name}.base_url"),
                    format!("{url:?} is not an http(s) URL"),
                    "write the endpoint's root, e.g. https://gateway.example.com",
                );
            }
        }
        for (i, role) in self.roles.iter().enumerate() {
            for (field, entry) in [("llm", &role.llm), ("llm_sandbox", &role.llm_sandbox)] {
                if let Some(entry) = entry
                    && !self.providers.llm.contains_key(entry)
                {
                    bad(
                        format!("company.roles[{i}].{field}"),
                        format!("{entry:?} names no providers.llm entry"),
                        "name an entry under company.providers.llm",
                    );
                }
            }
            if let Some(gate) = &role.sandbox {
                if let Some(cell) = gate.run_in.as_deref().filter(|c| !c.is_empty())
                    && !CELLS.contains(&cell)
                {
                    bad(
                        format!("company.roles[{i}].sandbox.run_in"),
                        format!("{cell:?} is not a cell"),
                        "use direct, container or e2b",
                    );
                }
                if let Some(runner) = gate.coding_agent.as_deref().filter(|c| !c.is_empty())
                    && !RUNNERS.contains(&runner)
                {
                    bad(
                        format!("company.roles[{i}].sandbox.coding_agent"),
                        format!("{runner:?} is not a runner"),
                        "use claude-code, opencode or command",
                    );
                }
            }
        }
        for (i, seat) in self.seats.iter().enumerate() {
            if let Some(role) = &seat.role
                && !self.roles.is_empty()
                && !self.roles.iter().any(|r| &r.name == role)
            {
                bad(
                    format!("company.seats[{i}].role"),
                    format!("{role:?} names no role"),
                    "add the role under company.roles, or fix the name",
                );
            }
        }
    }
}

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

/// Replaces every `${VAR}` in `text` with the variable's value from `lookup`. An unset
/// variable is an error naming it.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("{text:?} opens ${{ without closing it"));
        };
        let name = &after[..end];
        match lookup(name) {
            Some(value) => out.push_str(&value),
            None => return Err(format!("${{{name}}} is not set in the node's environment")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn company(yaml: &str) -> Company {
        serde_yaml::from_str(yaml).expect("parses")
    }

    const GATEWAY: &str = r#"
providers:
  llm:
    default: { provider: anthropic, model: claude-sonnet-4-5, api_key: sk-test, base_url: "http://127.0.0.1:9" }
    oai: { provider: openai, model: gpt-5, api_key: k }
roles:
  - name: eng
    sandbox: { enabled: true, coding_agent: claude-code }
  - name: oai-eng
    llm_sandbox: oai
    sandbox: { enabled: true, coding_agent: claude-code }
  - name: plan
    llm_sandbox: oai
    sandbox: { enabled: true, coding_agent: claude-code, env: { CLAUDE_CODE_OAUTH_TOKEN: tok } }
seats:
  - { handle: ada, role: eng }
  - { handle: bob, role: oai-eng }
  - { handle: cy, role: plan }
"#;

    #[test]
    fn claude_code_gets_the_anthropic_entrys_key_endpoint_and_model() {
        let plan = company(GATEWAY)
            .plan_sandbox("ada", None, None)
            .expect("plans");
        assert_eq!(plan.runner, "claude-code");
        assert_eq!(plan.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(plan.env["ANTHROPIC_API_KEY"], "sk-test");
        assert_eq!(plan.env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
        assert_eq!(plan.entry.as_deref(), Some("default"));
        let own = company(GATEWAY)
            .plan_sandbox("ada", None, Some("claude-opus-4-1"))
            .expect("plans");
        assert_eq!(own.model.as_deref(), Some("claude-opus-4-1"));
    }

    #[test]
    fn claude_code_on_an_openai_entry_is_refused_naming_the_entry_and_remedies() {
        let error = company(GATEWAY)
            .plan_sandbox("bob", None, None)
            .expect_err("refused");
        assert!(error.to_string().contains("providers.llm.oai"), "{error}");
        assert!(
            error.to_string().contains("coding_agent: opencode"),
            "{error}"
        );
    }

    #[test]
    fn a_claude_code_login_is_seeded_in_a_local_cell_and_refused_for_a_remote_one() {
        let yaml = r#"
providers:
  llm:
    default: { provider: claude-code, model: sonnet, login_dir: /srv/claude-login }
  sandbox: { default_coding_agent: claude-code }
roles:
  - { name: remote, sandbox: { enabled: true, run_in: e2b } }
  - { name: oc, sandbox: { enabled: true, coding_agent: opencode } }
seats:
  - { handle: ada }
  - { handle: rem, role: remote }
  - { handle: oc, role: oc }
"#;
        let c = company(yaml);
        let plan = c.plan_sandbox("ada", None, None).expect("plans");
        assert_eq!(
            plan.login_dir.as_deref(),
            Some(std::path::Path::new("/srv/claude-login"))
        );
        assert_eq!(plan.model.as_deref(), Some("sonnet"));
        assert!(!plan.env.contains_key("ANTHROPIC_API_KEY"));
        let remote = c.plan_sandbox("rem", None, None).expect_err("refused");
        assert!(remote.to_string().contains("never leaves"), "{remote}");
        let paired = c.plan_sandbox("oc", None, None).expect_err("refused");
        assert!(
            paired.to_string().contains("coding_agent: claude-code"),
            "{paired}"
        );
    }

    #[test]
    fn a_seat_signed_in_itself_gets_none_of_the_entry() {
        let plan = company(GATEWAY)
            .plan_sandbox("cy", None, None)
            .expect("plans");
        assert!(!plan.env.contains_key("ANTHROPIC_API_KEY"));
        assert!(!plan.env.contains_key("ANTHROPIC_BASE_URL"));
        assert_eq!(plan.model, None);
    }

    #[test]
    fn claude_code_with_no_credential_anywhere_is_refused() {
        let error = Company::default()
            .plan_sandbox("anyone", Some("claude-code"), Some("claude-sonnet-4-5"))
            .expect_err("refused");
        assert!(error.to_string().contains("no credential"), "{error}");
        let keyless =
            company("providers:\n  llm:\n    default: { provider: anthropic, model: m }\n")
                .plan_sandbox("x", Some("claude-code"), None)
                .expect_err("refused");
        assert!(keyless.to_string().contains("has no key"), "{keyless}");
    }

    #[test]
    fn opencode_addresses_the_model_by_its_provider() {
        let c = company(
            "providers:\n  llm:\n    default: { provider: anthropic, model: claude-sonnet-4-5, api_key: k }\n",
        );
        let plan = c.plan_sandbox("x", Some("opencode"), None).expect("plans");
        assert_eq!(plan.model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
        assert_eq!(plan.env["ANTHROPIC_API_KEY"], "k");
    }

    #[test]
    fn a_command_needs_no_model() {
        let plan = Company::default()
            .plan_sandbox("x", None, None)
            .expect("plans");
        assert_eq!(plan.runner, "command");
        assert_eq!(plan.cell, "direct");
    }

    #[test]
    fn debug_forms_never_show_a_key() {
        let c = company(GATEWAY);
        let plan = c.plan_sandbox("ada", None, None).expect("plans");
        assert!(!format!("{c:?} {plan:?}").contains("sk-test"));
    }

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

    #[test]
    fn setup_steps_are_validated_and_expanded() {
        let yaml = r#"
providers:
  sandbox:
    setup:
      - { name: a, files: { "/etc/motd": "hi" } }
      - { name: a, commands: ["true"] }
"#;
        let problems = company(yaml).problems();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("/etc/motd") && t.contains("local box")),
            "{text:?}"
        );
        assert!(text.iter().any(|t| t.contains("second step")), "{text:?}");

        let yaml = r#"
providers:
  sandbox:
    setup:
      - name: npm
        files: { ".npmrc": "//r/:_authToken=${NPM_TOKEN}", "whole": "${WHOLE}", "opt": "${UNSET}" }
        env: { NPM_TOKEN: "${TOKEN}" }
        optional_keys: [opt]
"#;
        let mut c = company(yaml);
        let lookup = |name: &str| match name {
            "TOKEN" => Some("t0k".to_owned()),
            "WHOLE" => Some("file body".to_owned()),
            _ => None,
        };
        assert!(c.expand_env(&lookup).is_empty());
        let step = &c.providers.sandbox.setup[0];
        assert_eq!(step.files[".npmrc"], "//r/:_authToken=${NPM_TOKEN}");
        assert_eq!(step.files["whole"], "file body");
        assert!(!step.files.contains_key("opt"));
        let plan = c.plan_sandbox("x", None, None).expect("plans");
        assert_eq!(plan.env["NPM_TOKEN"], "t0k");
        assert_eq!(plan.setup.len(), 1);
    }

    #[test]
    fn variables_expand_and_an_unset_one_is_named() {
        let lookup = |name: &str| (name == "K").then(|| "v".to_owned());
        assert_eq!(expand("a${K}b", &lookup).expect("expands"), "avb");
        let error = expand("${NOPE}", &lookup).expect_err("unset");
        assert!(error.contains("NOPE"));
    }
}
