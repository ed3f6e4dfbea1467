//! The run environment (the spec's "Credentials and the run environment", lines 363–386): the
//! layers a launch's variables come from, in the spec's precedence (later wins) — the host's
//! proxy and TLS-trust variables, the entry's LLM credentials, the agent's identity
//! (`BOXFLEET_AGENT_HANDLE`, `BOXFLEET_AGENT_EMAIL`), the setup steps' env, the role's env —
//! and their `${VAR}` references resolved at launch ([`SandboxPlan::resolve_env`]) against the
//! node's environment (boxfleet has no secret store; a variable set to `""` is unset).
//!
//! A required value that resolves to nothing refuses that run before any box starts
//! ([`EnvUnresolved`], `sandbox_env_unresolved`), never the node and never another seat's
//! run. A key under `optional_keys` — judged by the declaration beside the value that won — is
//! left out whole instead. The engine's identity facts never refuse: an email that resolves
//! to nothing is left out and said.
//!
//! Layout: the host's variables → the layer builder ([`EnvLayers`]) → resolution → what a
//! document's references lack here ([`Company::env_warnings`], for `validate` and the start).

use std::collections::{BTreeMap, BTreeSet};

use crate::catalogue::Bad;
use crate::company::Company;
use crate::expand::{expand, references_any, unset_references};
use crate::plan::SandboxPlan;

/// Proxy variables of the node a box inherits, in every cell.
pub const PROXY_VARS: [&str; 8] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// TLS-trust variables of the node (a CA bundle's path), which a `direct` box inherits: they
/// name files on the node's disk, which only a box on that disk can read.
pub const TLS_TRUST_VARS: [&str; 6] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
];

/// The engine's identity facts: contributed when they have a value, never refusing a run.
pub const IDENTITY_VARS: [&str; 2] = ["BOXFLEET_AGENT_HANDLE", "BOXFLEET_AGENT_EMAIL"];

/// A run environment with a required value that resolves to nothing: the keys, the setup
/// files and the variables (never a value or a body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvUnresolved {
    pub keys: Vec<String>,
    pub files: Vec<String>,
    pub variables: Vec<String>,
}

impl std::fmt::Display for EnvUnresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vars: Vec<String> = self.variables.iter().map(|v| format!("${{{v}}}")).collect();
        let mut what = self.keys.clone();
        what.extend(self.files.iter().map(|f| format!("file {f}")));
        write!(
            f,
            "sandbox_env_unresolved: the run environment needs {} for {}, unset or empty in the node's environment; export it on the node holding the seat and launch again, or list the key under optional_keys where the run can go without it",
            vars.join(", "),
            what.join(", ")
        )
    }
}

impl std::error::Error for EnvUnresolved {}

/// The run environment as it is layered, before resolution: each key's raw value (its
/// `${VAR}` references unresolved) and whether the declaration beside the value that won
/// lists it optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvLayers {
    pub values: BTreeMap<String, String>,
    pub optional: BTreeSet<String>,
}

impl EnvLayers {
    /// Lays `env` over what is there: each key's value replaces the one below it, and its
    /// optionality is `optional_keys` beside it.
    pub fn lay(&mut self, env: &BTreeMap<String, String>, optional_keys: &[String]) {
        for (key, value) in env {
            self.values.insert(key.clone(), value.clone());
            if optional_keys.contains(key) {
                self.optional.insert(key.clone());
            } else {
                self.optional.remove(key);
            }
        }
    }

    /// Sets `key` only where no layer above wrote it (a layer below the config's).
    pub fn under(&mut self, key: &str, value: &str) {
        self.values
            .entry(key.to_owned())
            .or_insert_with(|| value.to_owned());
    }
}

/// `lookup` with an empty value read as unset.
fn non_empty(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).filter(|value| !value.is_empty())
}

impl SandboxPlan {
    /// Resolves the run environment and the setup files' whole-body references through
    /// `lookup` (the node's environment; empty is unset), with the host's proxy variables
    /// beneath (and TLS-trust ones in a `direct` box). A required value that resolves to
    /// nothing refuses the run; an optional one is left out whole; an identity fact is left
    /// out and said (the returned notes).
    pub fn resolve_env(
        &mut self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<String>, EnvUnresolved> {
        let lookup = |name: &str| non_empty(lookup, name);
        let mut env = BTreeMap::new();
        let trust: &[&str] = if self.cell == "direct" {
            &TLS_TRUST_VARS
        } else {
            &[]
        };
        for name in PROXY_VARS.iter().chain(trust) {
            if let Some(value) = lookup(name) {
                env.insert((*name).to_owned(), value);
            }
        }
        let mut missing = EnvUnresolved::default();
        let mut notes = Vec::new();
        for (key, raw) in std::mem::take(&mut self.env) {
            let unset = unset_references(&raw, &lookup);
            let value = if unset.is_empty() {
                expand(&raw, &lookup).unwrap_or_default()
            } else {
                String::new()
            };
            if !value.is_empty() {
                env.insert(key, value);
            } else if IDENTITY_VARS.contains(&key.as_str()) {
                notes.push(format!(
                    "{key} is left out: {} resolves to nothing",
                    unset
                        .iter()
                        .map(|v| format!("${{{v}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else if !self.optional_env.contains(&key) {
                missing.keys.push(key);
                missing.variables.extend(unset);
            }
        }
        for step in &mut self.setup {
            let mut dropped = Vec::new();
            for (path, body) in &mut step.files {
                let whole = body.starts_with("${")
                    && body.ends_with('}')
                    && body.matches("${").count() == 1;
                if !whole {
                    continue;
                }
                match expand(body, &lookup) {
                    Ok(value) if !value.is_empty() => *body = value,
                    _ if step.optional_keys.contains(path) => dropped.push(path.clone()),
                    _ => {
                        missing.files.push(format!("{} ({})", path, step.name));
                        missing.variables.extend(unset_references(body, &lookup));
                    }
                }
            }
            for path in dropped {
                step.files.remove(&path);
            }
        }
        if !(missing.keys.is_empty() && missing.files.is_empty()) {
            missing.variables.sort();
            missing.variables.dedup();
            return Err(missing);
        }
        self.env = env;
        Ok(notes)
    }
}

impl Company {
    /// Each required `${VAR}` of a run environment (a role's env, a setup step's env and
    /// whole-body files) that `lookup` does not resolve: the seats it is for are refused
    /// (`sandbox_env_unresolved`) until it is set. For `validate` and the node's start to say;
    /// the document is valid either way, since it resolves at launch.
    pub fn env_warnings(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        let lookup = |name: &str| non_empty(lookup, name);
        let mut warnings = Vec::new();
        let mut check = |field: String, raw: &str, optional: bool| {
            let unset = unset_references(raw, &lookup);
            if !unset.is_empty() && !optional {
                let vars: Vec<String> = unset.iter().map(|v| format!("${{{v}}}")).collect();
                warnings.push(format!(
                    "{field}: {} not set in this environment: launches that need it are refused (sandbox_env_unresolved) until it is; export it on the node, or list the key under optional_keys",
                    vars.join(", ")
                ));
            }
        };
        let mut steps: Vec<(String, &crate::providers::SetupStep)> =
            (self.providers.sandbox.setup.iter().enumerate())
                .map(|(i, s)| (format!("company.providers.sandbox.setup[{i}]"), s))
                .collect();
        for (i, role) in self.roles.iter().enumerate() {
            let Some(gate) = role.sandbox.as_ref().filter(|g| g.enabled) else {
                continue;
            };
            for (key, raw) in &gate.env {
                let field = format!("company.roles[{i}].sandbox.env.{key}");
                check(field, raw, gate.optional_keys.contains(key));
            }
            steps.extend(
                gate.setup
                    .iter()
                    .enumerate()
                    .map(|(j, s)| (format!("company.roles[{i}].sandbox.setup[{j}]"), s)),
            );
        }
        for (field, step) in steps {
            for (key, raw) in &step.env {
                check(
                    format!("{field}.env.{key}"),
                    raw,
                    step.optional_keys.contains(key),
                );
            }
            for (path, body) in &step.files {
                let whole = body.starts_with("${")
                    && body.ends_with('}')
                    && body.matches("${").count() == 1;
                if whole {
                    check(
                        format!("{field}.files.{path}"),
                        body,
                        step.optional_keys.contains(path),
                    );
                }
            }
        }
        warnings
    }
}

/// The admission rule for `optional_keys` (spec line 384): each must name a key (or, on a setup
/// step, a file path) its block writes, whose value references a variable — otherwise it leaves
/// nothing out, and the key it was meant for stays required.
pub(crate) fn optional_key_problems(
    field: &str,
    env: &BTreeMap<String, String>,
    files: &BTreeMap<String, String>,
    optional_keys: &[String],
    bad: &mut Bad<'_>,
) {
    for (i, key) in optional_keys.iter().enumerate() {
        let value = env.get(key).or_else(|| files.get(key));
        let problem = match value {
            None if files.is_empty() => format!(
                "{key:?} is not a key this block's env writes, so it leaves nothing out (is it a variable's name? list the key whose value references it)"
            ),
            None => format!(
                "{key:?} is neither a key this block's env writes nor a file it writes, so it leaves nothing out"
            ),
            Some(value) if !references_any(value) => format!(
                "{key:?}'s value references no ${{VAR}}, so it always resolves and leaves nothing out"
            ),
            Some(_) => continue,
        };
        bad(
            format!("{field}.optional_keys[{i}]"),
            problem,
            "list only keys (or files) of this block whose values reference a variable the run can go without",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn company(yaml: &str) -> Company {
        serde_yaml::from_str(yaml).expect("parses")
    }

    fn lookup(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "EMPTY_VAR" => Some(String::new()),
            "HTTPS_PROXY" => Some("http://proxy:3128".into()),
            "SSL_CERT_FILE" => Some("/etc/ssl/corp.pem".into()),
            "MAIL" => Some("eng@example.com".into()),
            _ => None,
        }
    }

    const LAYERS: &str = r#"
providers:
  sandbox:
    local: {}
    default_run_in: direct
    setup:
      - { name: a, env: { A: "1", SHARED: from-setup, OPT_IN_STEP: "${NOPE}", ROLE_DECIDES: "${NOPE}" }, optional_keys: [OPT_IN_STEP, ROLE_DECIDES] }
roles:
  - name: eng
    sandbox:
      enabled: true
      env:
        SHARED: from-role
        GITHUB_TOKEN: "${TOKEN}"
        DATABASE_URL: "postgres://${EMPTY_VAR}/app"
        ROLE_DECIDES: "x-${NOPE}"
        HTTPS_PROXY: "http://role-proxy:8080"
      optional_keys: [DATABASE_URL, ROLE_DECIDES]
seats:
  - { handle: ada, role: eng, email: "${MAIL}" }
  - { handle: bob, role: eng, email: "${NO_MAIL}" }
"#;

    /// Later wins (setup env → role env), an empty variable is unset, an optional key is left
    /// out whole (judged by the declaration beside the winning value), the identity facts are
    /// there, and the host's proxy and TLS-trust variables are beneath the config's.
    #[test]
    fn the_layers_resolve_in_the_specs_precedence() {
        let mut plan = company(LAYERS)
            .plan_sandbox("ada", None, None)
            .expect("plans");
        let notes = plan.resolve_env(&lookup).expect("resolves");
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            plan.env["SHARED"], "from-role",
            "the role's env wins over a step's"
        );
        assert_eq!(plan.env["GITHUB_TOKEN"], "t0k");
        assert_eq!(plan.env["A"], "1");
        assert!(!plan.env.contains_key("DATABASE_URL"), "never half-filled");
        assert!(!plan.env.contains_key("OPT_IN_STEP"));
        assert!(!plan.env.contains_key("ROLE_DECIDES"));
        assert_eq!(plan.env["BOXFLEET_AGENT_HANDLE"], "ada");
        assert_eq!(plan.env["BOXFLEET_AGENT_EMAIL"], "eng@example.com");
        assert_eq!(
            plan.env["HTTPS_PROXY"], "http://role-proxy:8080",
            "the config wins over the host"
        );
        assert_eq!(
            plan.env["SSL_CERT_FILE"], "/etc/ssl/corp.pem",
            "a direct box trusts the host's CA"
        );

        // an email nothing sets is left out and said, never refusing the run
        let mut bob = company(LAYERS)
            .plan_sandbox("bob", None, None)
            .expect("plans");
        let notes = bob.resolve_env(&lookup).expect("resolves");
        assert!(!bob.env.contains_key("BOXFLEET_AGENT_EMAIL"));
        assert!(notes[0].contains("${NO_MAIL}"), "{notes:?}");
    }

    /// A required value that resolves to nothing — unset or empty — refuses the run naming the
    /// keys, files and variables; the TLS-trust variables reach only a direct box.
    #[test]
    fn a_required_value_that_resolves_to_nothing_refuses_the_run() {
        let yaml = LAYERS.replace(
            "optional_keys: [DATABASE_URL, ROLE_DECIDES]",
            "optional_keys: [ROLE_DECIDES]",
        );
        let mut plan = company(&yaml)
            .plan_sandbox("ada", None, None)
            .expect("plans");
        let refused = plan
            .resolve_env(&lookup)
            .expect_err("DATABASE_URL is required");
        assert_eq!(refused.keys, ["DATABASE_URL"]);
        assert_eq!(refused.variables, ["EMPTY_VAR"]);
        assert!(
            refused.to_string().starts_with("sandbox_env_unresolved: "),
            "{refused}"
        );
        assert!(!refused.to_string().contains("t0k"));

        let files = "providers: { sandbox: { e2b: { api_key: k }, setup: [{ name: npm, files: { .npmrc: \"${NPMRC}\", opt: \"${NOPE}\" }, optional_keys: [opt] }] } }\n";
        let mut plan = company(files).plan_sandbox("x", None, None).expect("plans");
        let refused = plan
            .resolve_env(&lookup)
            .expect_err("the whole file is required");
        assert_eq!(refused.files, [".npmrc (npm)"]);
        assert_eq!(refused.variables, ["NPMRC"]);

        let mut remote = company("providers: { sandbox: { e2b: { api_key: k } } }\n")
            .plan_sandbox("x", None, None)
            .expect("plans");
        remote.resolve_env(&lookup).expect("resolves");
        assert_eq!(remote.env["HTTPS_PROXY"], "http://proxy:3128");
        assert!(
            !remote.env.contains_key("SSL_CERT_FILE"),
            "a host path names nothing in a VM"
        );
    }

    /// `optional_keys` that leave nothing out are refused where they are written; a document's
    /// references this environment lacks are warned of, not refused.
    #[test]
    fn optional_keys_must_leave_something_out_and_unset_references_are_warned() {
        let c = company(
            "providers: { sandbox: { local: {}, default_run_in: direct, setup: [{ name: s, env: { A: plain }, optional_keys: [A, B] }] } }\nroles: [{ name: eng, sandbox: { enabled: true, env: { DATABASE_URL: \"postgres://${TEST_DB_HOST}/app\" }, optional_keys: [TEST_DB_HOST] } }]\n",
        );
        let text: Vec<String> = c.problems().iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t
                .starts_with("company.providers.sandbox.setup[0].optional_keys[0]")
                && t.contains("references no")),
            "{text:#?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("company.providers.sandbox.setup[0].optional_keys[1]")),
            "{text:#?}"
        );
        assert!(
            text.iter().any(
                |t| t.starts_with("company.roles[0].sandbox.optional_keys[0]")
                    && t.contains("variable's name")
            ),
            "{text:#?}"
        );

        let warnings = company(LAYERS).env_warnings(&lookup);
        assert_eq!(warnings.len(), 0, "{warnings:#?}");
        let required = LAYERS.replace(
            "optional_keys: [DATABASE_URL, ROLE_DECIDES]",
            "optional_keys: [ROLE_DECIDES]",
        );
        let warnings = company(&required).env_warnings(&lookup);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert!(
            warnings[0].starts_with("company.roles[0].sandbox.env.DATABASE_URL: ${EMPTY_VAR}"),
            "{warnings:#?}"
        );
    }
}
