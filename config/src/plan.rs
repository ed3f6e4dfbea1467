//! The one decision that joins the company's chart, its providers and a seat's role at launch
//! ([`Company::plan_sandbox`]): which runner, which cell, which model, and which variables the
//! run environment carries ([`SandboxPlan`]).
//!
//! The plan is made before any box starts, so a model the box cannot route — an entry with
//! no key, an OpenAI-wire entry under Claude Code — is refused at launch ([`ModelError`]) with
//! the entry named and the remedies for its case, never left to stall inside a box.
//!
//! Layout: the plan and its error → the seat's role and entry ([`Company::sandbox_entry`]) →
//! [`Company::plan_sandbox`]: the plan every runner shares (runner, cell, environment, turns,
//! setup), then one credential rule per runner (`plan_claude_code`, with a host login in
//! `plan_claude_code_login`; `plan_opencode`).

use std::collections::BTreeMap;

use crate::company::Company;
use crate::providers::{LlmEntry, RUNNERS, Role, SetupStep, Wire};

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
    /// the run environment: the entry's credentials, the agent's identity, the setup steps'
    /// env and the role's, later winning; `${VAR}` references unresolved until
    /// [`SandboxPlan::resolve_env`] (at launch) resolves them
    pub env: BTreeMap<String, String>,
    /// the keys the declaration beside their winning value lists under `optional_keys`
    pub optional_env: std::collections::BTreeSet<String>,
    pub max_turns: Option<u32>,
    /// how long a parked run keeps its paused box (the role's, else the company default);
    /// `None`: the default (1800 s); `Some(0)`: never pause
    pub pause_ttl_seconds: Option<u64>,
    /// the box's TTL, refreshed by every poll (`default_timeout_seconds`; not a run cap)
    pub box_timeout_seconds: Option<u64>,
    /// the setup steps a new box gets: engine-wide, then the role's
    pub setup: Vec<SetupStep>,
    /// a cli-agent entry's shared login directory: seeded into the (local) box, a refreshed
    /// login written back
    pub login_dir: Option<std::path::PathBuf>,
    /// the MCP servers the role's boxes get, resolved, and the ones left out with why
    pub mcp: crate::mcp::McpPlan,
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
            .field("pause_ttl_seconds", &self.pause_ttl_seconds)
            .field("setup", &self.setup)
            .field("login_dir", &self.login_dir)
            .field("mcp", &self.mcp)
            .finish()
    }
}

impl SandboxPlan {
    /// The plan runs `model` on the entry `name`: the model, the entry and its wire recorded.
    fn running_on(mut self, name: &str, entry: &LlmEntry, model: String) -> SandboxPlan {
        self.model = Some(model);
        self.entry = Some(name.to_owned());
        self.wire = Some(entry.provider);
        self
    }
}

/// Why a launch's model cannot run (the spec's SandboxModelError).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SandboxModelError: {0}")]
pub struct ModelError(pub String);

impl Company {
    pub(crate) fn role_of(&self, seat: &str) -> Option<&Role> {
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
        self.first_entry(seat, |r| r.llm_sandbox.as_deref(), |_| true)
    }

    /// The entry that condenses what a seat's runs wrote past their bounds:
    /// `role.llm_auxiliary`, else `role.llm`, else the entry named `default` — the first that
    /// names an API entry (anthropic, openai, openai-compatible) with a key. `None`: nothing
    /// condenses, and an over-bound piece is cut on whole lines instead.
    pub fn auxiliary_entry(&self, seat: &str) -> Option<(&str, &LlmEntry)> {
        self.first_entry(
            seat,
            |r| r.llm_auxiliary.as_deref(),
            |entry| {
                !matches!(entry.provider, Wire::ClaudeCode | Wire::Opencode)
                    && entry.key().is_some()
            },
        )
    }

    /// The first entry of the chain `own(role)` → `role.llm` → `default` that exists and
    /// `fits`.
    fn first_entry(
        &self,
        seat: &str,
        own: impl Fn(&Role) -> Option<&str>,
        fits: impl Fn(&LlmEntry) -> bool,
    ) -> Option<(&str, &LlmEntry)> {
        let role = self.role_of(seat);
        let chain = [
            role.and_then(&own),
            role.and_then(|r| r.llm.as_deref()),
            Some("default"),
        ];
        chain.into_iter().flatten().find_map(|name| {
            self.providers
                .llm
                .get_key_value(name)
                .filter(|(_, entry)| fits(entry))
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
        self.plan_sandbox_or(seat, runner, model, "command")
    }

    /// [`Company::plan_sandbox`], with `last` the runner when neither the launch, the role
    /// nor the company names one (a launch with a brief and no command: `claude-code`).
    pub fn plan_sandbox_or(
        &self,
        seat: &str,
        runner: Option<&str>,
        model: Option<&str>,
        last: &str,
    ) -> Result<SandboxPlan, ModelError> {
        let mut plan = self.shared_plan(seat, runner, last);
        let model = model.filter(|m| !m.is_empty());
        let entry = self.sandbox_entry(seat);
        let runner = plan.runner.clone();
        match runner.as_str() {
            "command" => {
                // a plain command reads no model; one named is still sent and receipted
                plan.model = model.map(str::to_owned);
                Ok(plan)
            }
            "claude-code" => plan_claude_code(plan, seat, model, entry),
            "opencode" => plan_opencode(plan, seat, model, entry),
            other => Err(ModelError(format!(
                "{other:?} is not a runner; use one of {}",
                RUNNERS.join(", ")
            ))),
        }
    }

    /// What a launch runs whatever its runner: the runner and cell (the launch's, the role's,
    /// the provider default, then `command` on `direct`), the role's environment with the
    /// setup steps' merged in, the turn cap and the setup steps (engine-wide, then the
    /// role's).
    fn shared_plan(&self, seat: &str, runner: Option<&str>, last: &str) -> SandboxPlan {
        let role = self.role_of(seat);
        let gate = role.and_then(|r| r.sandbox.as_ref());
        let defaults = &self.providers.sandbox;
        let runner = first_chosen(
            runner,
            gate.and_then(|g| g.coding_agent.as_deref()),
            defaults.default_coding_agent.as_deref(),
            last,
        );
        // the role's cell, else the catalogue's default (resolved at launch, so a changed
        // catalogue reaches every seat that wrote none)
        let cell = first_chosen(
            None,
            gate.and_then(|g| g.run_in.as_deref()),
            defaults.resolved_default(),
            "direct",
        );
        // the config's layers, later winning: the agent's identity, the setup steps' env, the
        // role's env (the entry's credentials go beneath them all, in the runner's rule)
        let mut layers = crate::runenv::EnvLayers::default();
        layers
            .values
            .insert("BOXFLEET_AGENT_HANDLE".into(), seat.to_owned());
        if let Some(email) = self.seat(seat).and_then(|s| s.email.as_deref()) {
            layers
                .values
                .insert("BOXFLEET_AGENT_EMAIL".into(), email.to_owned());
        }
        let setup: Vec<SetupStep> = defaults
            .setup
            .iter()
            .chain(gate.map(|g| g.setup.as_slice()).unwrap_or_default())
            .cloned()
            .collect();
        for step in &setup {
            layers.lay(&step.env, &step.optional_keys);
        }
        if let Some(gate) = gate {
            layers.lay(&gate.env, &gate.optional_keys);
        }
        let mut plan = SandboxPlan {
            runner,
            cell,
            env: layers.values,
            optional_env: layers.optional,
            max_turns: gate
                .and_then(|g| g.max_turns)
                .or(defaults.default_max_turns)
                .filter(|&n| n > 0),
            // validation refuses a negative one; absent is not 0
            pause_ttl_seconds: gate
                .and_then(|g| g.pause_ttl_seconds)
                .or(defaults.default_pause_ttl_seconds)
                .and_then(|n| u64::try_from(n).ok()),
            box_timeout_seconds: defaults.default_timeout_seconds,
            setup,
            ..SandboxPlan::default()
        };
        plan.mcp = self.plan_mcp(seat);
        plan
    }
}

/// The first non-empty of the launch's own choice, the role's and the provider default; else
/// `last`.
fn first_chosen(
    own: Option<&str>,
    role: Option<&str>,
    default: Option<&str>,
    last: &str,
) -> String {
    [own, role, default]
        .into_iter()
        .flatten()
        .find(|s| !s.is_empty())
        .unwrap_or(last)
        .to_owned()
}

/// Claude Code's credential rule: the seat's own sign-in wins and takes none of the entry;
/// else a claude-code entry's host login (local cells only); else an anthropic entry's key,
/// endpoint and model.
fn plan_claude_code(
    mut plan: SandboxPlan,
    seat: &str,
    model: Option<&str>,
    entry: Option<(&str, &LlmEntry)>,
) -> Result<SandboxPlan, ModelError> {
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
        return plan_claude_code_login(plan, model, name, entry);
    }
    if entry.provider == Wire::Opencode {
        return Err(ModelError(format!(
            "providers.llm.{name} is an opencode entry: its model is written for OpenCode and its sign-in is that CLI's, so Claude Code cannot run on it; set role.sandbox.coding_agent: opencode, or point role.llm_sandbox at an anthropic entry"
        )));
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
    // the entry's credentials are the lowest layer: the config's own values win
    plan.env
        .entry("ANTHROPIC_API_KEY".into())
        .or_insert_with(|| key.to_owned());
    if let Some(url) = entry.base_url.as_deref().filter(|u| !u.is_empty()) {
        plan.env
            .entry("ANTHROPIC_BASE_URL".into())
            .or_insert_with(|| url.to_owned());
    }
    let model = model.unwrap_or(&entry.model).to_owned();
    Ok(plan.running_on(name, entry, model))
}

/// A claude-code entry: the CLI's own login on this host, seeded into a local box from its
/// `login_dir` (default `~/.claude`); it never leaves the engine host for a remote box.
fn plan_claude_code_login(
    mut plan: SandboxPlan,
    model: Option<&str>,
    name: &str,
    entry: &LlmEntry,
) -> Result<SandboxPlan, ModelError> {
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
    let model = model.unwrap_or(&entry.model).to_owned();
    Ok(plan.running_on(name, entry, model))
}

/// OpenCode's credential rule: an API entry's key under its wire's variable (a key the seat
/// names under that variable wins), and the model addressed by its provider.
fn plan_opencode(
    mut plan: SandboxPlan,
    seat: &str,
    model: Option<&str>,
    entry: Option<(&str, &LlmEntry)>,
) -> Result<SandboxPlan, ModelError> {
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
    if entry.provider == Wire::Opencode {
        return plan_opencode_login(plan, model, name, entry);
    }
    let Some(key) = entry.key() else {
        return Err(ModelError(format!(
            "providers.llm.{name} has no key, so an opencode box on it could not call its model; set its api_key"
        )));
    };
    let variable = match entry.provider {
        Wire::Anthropic => "ANTHROPIC_API_KEY",
        Wire::Openai | Wire::OpenaiCompatible | Wire::ClaudeCode | Wire::Opencode => {
            "OPENAI_API_KEY"
        }
    };
    // a key the seat names under the same variable replaces the entry's
    plan.env
        .entry(variable.into())
        .or_insert_with(|| key.to_owned());
    let base_url = entry.base_url.clone().filter(|u| !u.is_empty());
    let model = opencode_model(model, &entry.model, base_url.is_some(), entry.provider);
    plan.base_url = base_url;
    Ok(plan.running_on(name, entry, model))
}

/// An opencode cli-agent entry: the model passed exactly as written (`<provider>/<model>`), and
/// the entry's exported login seeded into a local box (and written back); it never leaves the
/// engine host, so a remote box needs the provider's key in the seat's own environment.
fn plan_opencode_login(
    mut plan: SandboxPlan,
    model: Option<&str>,
    name: &str,
    entry: &LlmEntry,
) -> Result<SandboxPlan, ModelError> {
    let login = entry.login_dir.clone().filter(|d| !d.is_empty());
    if plan.cell == "e2b" {
        let keyed = plan.env.keys().any(|key| key.ends_with("_API_KEY"));
        if !keyed {
            return Err(ModelError(format!(
                "providers.llm.{name} is OpenCode signed in on this host, and its login never leaves it for a remote box; run the seat's code work in a local cell (role.sandbox.run_in: direct or container), or give the seat its model provider's key (e.g. ANTHROPIC_API_KEY) in role.sandbox.env"
            )));
        }
    } else if let Some(dir) = login {
        plan.login_dir = Some(dir.into());
    }
    let model = model.unwrap_or(&entry.model).to_owned();
    Ok(plan.running_on(name, entry, model))
}

/// The model as OpenCode addresses it: a launch's own `provider/model` as written; through an
/// entry's endpoint, the `boxfleet` provider; else the wire's provider.
fn opencode_model(launch: Option<&str>, entry_model: &str, endpoint: bool, wire: Wire) -> String {
    let bare = launch.unwrap_or(entry_model);
    match (endpoint, wire) {
        _ if bare.contains('/') && launch.is_some() => bare.to_owned(),
        (true, _) => format!("boxfleet/{bare}"),
        (false, Wire::Anthropic) => format!("anthropic/{bare}"),
        (false, _) => format!("openai/{bare}"),
    }
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

    /// An opencode cli-agent entry runs only under OpenCode: its model as written, its exported
    /// login seeded into a local box; a remote box needs the provider's key in the seat's env;
    /// Claude Code on it is refused, at launch and on the write.
    #[test]
    fn an_opencode_login_is_seeded_in_a_local_cell_and_runs_only_under_opencode() {
        let yaml = r#"
providers:
  llm:
    default: { provider: opencode, model: anthropic/claude-sonnet-4-5, login_dir: /srv/opencode-login }
  sandbox: { local: {}, e2b: { api_key: k }, default_run_in: direct, default_coding_agent: opencode }
roles:
  - { name: local, sandbox: { enabled: true } }
  - { name: remote, sandbox: { enabled: true, run_in: e2b } }
  - { name: keyed, sandbox: { enabled: true, run_in: e2b, env: { ANTHROPIC_API_KEY: sk-ant-own } } }
  - { name: claude, sandbox: { enabled: true, coding_agent: claude-code } }
seats:
  - { handle: ada, role: local }
  - { handle: rem, role: remote }
  - { handle: key, role: keyed }
  - { handle: cc, role: claude }
"#;
        let c = company(yaml);
        let plan = c.plan_sandbox("ada", None, None).expect("plans");
        assert_eq!(plan.model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
        assert_eq!(
            plan.login_dir.as_deref(),
            Some(std::path::Path::new("/srv/opencode-login"))
        );
        let remote = c.plan_sandbox("rem", None, None).expect_err("refused");
        assert!(remote.to_string().contains("never leaves"), "{remote}");
        let keyed = c.plan_sandbox("key", None, None).expect("its own key");
        assert!(
            keyed.login_dir.is_none(),
            "a remote box is never given the login"
        );
        let claude = c.plan_sandbox("cc", None, None).expect_err("refused");
        assert!(claude.to_string().contains("opencode entry"), "{claude}");
        let problems: Vec<String> = c.problems().iter().map(ToString::to_string).collect();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("company.roles[3].sandbox.coding_agent")
                    && p.contains("opencode cli-agent entry")),
            "{problems:#?}"
        );
        let bare = company(&yaml.replace("anthropic/claude-sonnet-4-5", "sonnet"));
        let problems: Vec<String> = bare.problems().iter().map(ToString::to_string).collect();
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("company.providers.llm.default.model")),
            "{problems:#?}"
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
    fn opencode_names_the_models_provider_unless_the_launch_wrote_one() {
        let name = |launch, endpoint, wire| opencode_model(launch, "m", endpoint, wire);
        assert_eq!(name(None, false, Wire::Anthropic), "anthropic/m");
        assert_eq!(name(None, false, Wire::Openai), "openai/m");
        assert_eq!(name(None, false, Wire::OpenaiCompatible), "openai/m");
        assert_eq!(name(None, true, Wire::Anthropic), "boxfleet/m");
        assert_eq!(name(Some("x/y"), true, Wire::Anthropic), "x/y");
        assert_eq!(name(Some("y"), false, Wire::Openai), "openai/y");
        // an entry's own model with a slash is still addressed by its provider
        assert_eq!(
            opencode_model(None, "org/m", false, Wire::Openai),
            "openai/org/m"
        );
    }

    #[test]
    fn the_first_non_empty_choice_wins() {
        assert_eq!(first_chosen(Some(""), Some("r"), Some("d"), "l"), "r");
        assert_eq!(first_chosen(Some("o"), Some("r"), Some("d"), "l"), "o");
        assert_eq!(first_chosen(None, None, Some(""), "l"), "l");
    }

    #[test]
    fn an_unknown_runner_is_refused_with_the_runners_listed() {
        let error = Company::default()
            .plan_sandbox("x", Some("aider"), None)
            .expect_err("refused");
        assert_eq!(
            error.to_string(),
            "SandboxModelError: \"aider\" is not a runner; use one of command, claude-code, opencode"
        );
    }

    #[test]
    fn the_turn_cap_is_the_roles_then_the_companys() {
        let plan = company(
            "providers: { sandbox: { default_max_turns: 0 } }\nroles: [{ name: eng, sandbox: { enabled: true, max_turns: 7 } }]\nseats: [{ handle: ada, role: eng }]\n",
        )
        .plan_sandbox("ada", None, None)
        .expect("plans");
        assert_eq!(plan.max_turns, Some(7));
        assert_eq!(
            Company::default()
                .plan_sandbox("x", None, None)
                .expect("plans")
                .max_turns,
            None
        );
    }
}
