//! What is wrong with a company document ([`Company::problems`]), each problem at its location
//! with its remedy: the chart's (seats, units, managers; found in [`company`](crate::company)),
//! then the providers' and roles' (found here).
//!
//! Layout: [`Company::problems`] → the providers' and roles' problems, one function per part
//! of the document, in the order they are reported: the sandbox defaults, the setup step
//! lists, the LLM entries, the roles, the seats' roles.

use std::collections::BTreeMap;

use crate::Error;
use crate::company::Company;
use crate::providers::{CELLS, LlmEntry, RUNNERS, SandboxSection, SetupStep, clean_setup_path};

use crate::catalogue::Bad;

impl Company {
    /// Every problem of the company document, each at its location with its remedy: the
    /// chart's, then the providers' and roles'.
    pub fn problems(&self) -> Vec<Error> {
        let mut problems = self.chart_problems();
        self.provider_problems(&mut problems);
        problems
    }

    /// Every problem of the providers and roles, each at its location with its remedy.
    fn provider_problems(&self, problems: &mut Vec<Error>) {
        let mut bad = |field: String, problem: String, remedy: &'static str| {
            problems.push(Error::Located {
                field,
                problem,
                remedy,
            });
        };
        self.catalogue_problems(&mut bad);
        sandbox_default_problems(&self.providers.sandbox, &mut bad);
        self.setup_list_problems(&mut bad);
        llm_entry_problems(&self.providers.llm, &mut bad);
        self.role_problems(&mut bad);
        self.mcp_problems(&mut bad);
        self.seat_role_problems(&mut bad);
        self.cli_pairing_problems(&mut bad);
        let seats: Vec<String> = self.seats.iter().map(|s| s.handle.clone()).collect();
        self.budgets.problems(&seats, &mut bad);
    }

    /// The MCP servers: what each transport needs (a stdio server's command, an HTTP server's
    /// URL, and none of the other's fields); a role's `mcp_env` names only servers the company
    /// carries. A server a role names that the company does not carry, or of another
    /// transport, is skipped at launch, and said by [`Company::mcp_warnings`].
    fn mcp_problems(&self, bad: &mut Bad<'_>) {
        for (name, server) in &self.mcp_servers {
            let field = format!("company.mcp_servers.{name}");
            match server.transport.as_str() {
                "stdio" if server.command.as_deref().is_none_or(str::is_empty) => bad(
                    format!("{field}.command"),
                    "a stdio server needs the command the box starts it with".into(),
                    "set command (and args); the program must exist in the box",
                ),
                "http" if server.url.as_deref().is_none_or(str::is_empty) => bad(
                    format!("{field}.url"),
                    "an http server needs its url".into(),
                    "set url to the endpoint the box reaches (Streamable HTTP)",
                ),
                // any other transport is skipped at each launch, with a warning (mcp_warnings)
                _ => {}
            }
            if server.transport == "stdio" && !server.headers.is_empty() {
                bad(
                    format!("{field}.headers"),
                    "a stdio server takes no headers".into(),
                    "put its credentials under env",
                );
            }
            if server.transport == "http" && (!server.env.is_empty() || !server.args.is_empty()) {
                bad(
                    format!("{field}.env"),
                    "an http server takes no env or args: nothing is started in the box".into(),
                    "put its credentials under headers",
                );
            }
        }
        for (i, role) in self.roles.iter().enumerate() {
            for name in role.mcp_env.keys() {
                if !self.mcp_servers.contains_key(name) {
                    bad(
                        format!("company.roles[{i}].mcp_env.{name}"),
                        format!("{name:?} is not one of the company's mcp_servers"),
                        "name a server under company.mcp_servers, or remove the entry",
                    );
                }
            }
        }
    }

    /// What the boxes will not be given, for `validate` and the node's start to say (the
    /// document is valid either way): each MCP server a role names that the company does not
    /// carry, or of a transport boxfleet does not render (skipped), and each whose values do
    /// not all resolve in the node's environment (withheld).
    pub fn mcp_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (i, role) in self.roles.iter().enumerate() {
            let named = role
                .sandbox
                .as_ref()
                .and_then(|g| g.mcp.as_ref())
                .map(|m| m.servers.as_slice())
                .unwrap_or_default();
            for (j, name) in named.iter().enumerate() {
                let Some(server) = self.mcp_servers.get(name) else {
                    warnings.push(format!(
                        "company.roles[{i}].sandbox.mcp.servers[{j}]: {name:?} is not one of the company's mcp_servers: it is skipped at each launch (sandbox_mcp_server_skipped), the rest of the role's servers given; name a server under company.mcp_servers, or leave it out"
                    ));
                    continue;
                };
                if !crate::mcp::TRANSPORTS.contains(&server.transport.as_str()) {
                    warnings.push(format!(
                        "company.mcp_servers.{name}.transport: {:?} is neither stdio nor http: the server is skipped at each launch (sandbox_mcp_server_skipped); use stdio or http",
                        server.transport
                    ));
                    continue;
                }
                let mut variables: Vec<&String> = server.unresolved.iter().collect();
                if let Some(own) = role.mcp_env_resolved.get(name) {
                    variables.extend(&own.unresolved);
                }
                variables.sort();
                variables.dedup();
                if !variables.is_empty() {
                    let list: Vec<String> = variables.iter().map(|v| format!("${{{v}}}")).collect();
                    warnings.push(format!(
                        "company.roles[{i}] ({}): MCP server {name:?} is withheld from its boxes: {} not set in the node's environment (sandbox_mcp_server_withheld); export it, or list the key under the server's optional_keys",
                        role.name,
                        list.join(", ")
                    ));
                }
            }
        }
        warnings
    }

    /// The engine-wide setup list (checked as local when any seat may run in a local cell),
    /// then each role's (local unless the role runs in e2b).
    fn setup_list_problems(&self, bad: &mut Bad<'_>) {
        let sandbox = &self.providers.sandbox;
        let local_default = matches!(
            sandbox.default_run_in.as_deref(),
            None | Some("direct" | "container")
        );
        setup_step_problems(
            "company.providers.sandbox.setup",
            &sandbox.setup,
            local_default
                || self.roles.iter().any(|r| {
                    r.sandbox
                        .as_ref()
                        .and_then(|g| g.run_in.as_deref())
                        .is_some_and(|c| c == "direct" || c == "container")
                }),
            bad,
        );
        for (i, role) in self.roles.iter().enumerate() {
            if let Some(gate) = &role.sandbox {
                let cell = gate
                    .run_in
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .or(sandbox.default_run_in.as_deref())
                    .unwrap_or("direct");
                setup_step_problems(
                    &format!("company.roles[{i}].sandbox.setup"),
                    &gate.setup,
                    cell != "e2b",
                    bad,
                );
            }
        }
    }

    /// A role's entries must exist; its cell and runner must be ones a plan can name.
    fn role_problems(&self, bad: &mut Bad<'_>) {
        for (i, role) in self.roles.iter().enumerate() {
            for (field, entry) in [
                ("llm", &role.llm),
                ("llm_sandbox", &role.llm_sandbox),
                ("llm_auxiliary", &role.llm_auxiliary),
            ] {
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
                crate::runenv::optional_key_problems(
                    &format!("company.roles[{i}].sandbox"),
                    &gate.env,
                    &BTreeMap::new(),
                    &gate.optional_keys,
                    bad,
                );
                if let Some(ttl) = gate.pause_ttl_seconds.filter(|&n| n < 0) {
                    bad(
                        format!("company.roles[{i}].sandbox.pause_ttl_seconds"),
                        format!(
                            "{ttl} is negative: an unbounded pause is the leak the knob exists to prevent"
                        ),
                        "give seconds (0 never pauses), or leave it out for the company default",
                    );
                }
                // `self` is the catalogue's refusal (agent mode)
                if let Some(cell) = gate.run_in.as_deref().filter(|c| !c.is_empty())
                    && !CELLS.contains(&cell)
                    && cell != "self"
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
    }

    /// A cli-agent entry backs code work only under its own CLI's runner (spec line 247): an
    /// enabled role whose entry chain (`llm_sandbox` → `llm` → `default`) resolves to a
    /// claude-code entry under OpenCode, or an opencode entry under Claude Code, is refused
    /// where the runner is chosen.
    fn cli_pairing_problems(&self, bad: &mut Bad<'_>) {
        use crate::providers::Wire;
        for (i, role) in self.roles.iter().enumerate() {
            let Some(gate) = role.sandbox.as_ref().filter(|g| g.enabled) else {
                continue;
            };
            let entry = [
                role.llm_sandbox.as_deref(),
                role.llm.as_deref(),
                Some("default"),
            ]
            .into_iter()
            .flatten()
            .find_map(|name| self.providers.llm.get(name).map(|e| (name, e)));
            let runner = gate
                .coding_agent
                .as_deref()
                .filter(|c| !c.is_empty())
                .or(self.providers.sandbox.default_coding_agent.as_deref())
                .unwrap_or("command");
            let clash = match entry {
                Some((name, e)) if e.provider == Wire::ClaudeCode && runner == "opencode" => {
                    Some((name, "claude-code"))
                }
                Some((name, e)) if e.provider == Wire::Opencode && runner == "claude-code" => {
                    Some((name, "opencode"))
                }
                _ => None,
            };
            if let Some((name, cli)) = clash {
                bad(
                    format!("company.roles[{i}].sandbox.coding_agent"),
                    format!(
                        "role {:?} runs {runner} on providers.llm.{name}, a {cli} cli-agent entry: a subscription runs only under its own CLI",
                        role.name
                    ),
                    "set coding_agent to the entry's CLI, or point role.llm_sandbox at an API entry",
                );
            }
        }
    }

    /// A seat's role must be one of the roles, when any are written.
    fn seat_role_problems(&self, bad: &mut Bad<'_>) {
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

/// The sandbox defaults must name a runner and bounds the knobs can take (the default cell is
/// the catalogue's rule).
fn sandbox_default_problems(sandbox: &SandboxSection, bad: &mut Bad<'_>) {
    if let Some(runner) = sandbox.default_coding_agent.as_deref()
        && !RUNNERS.contains(&runner)
    {
        bad(
            "company.providers.sandbox.default_coding_agent".into(),
            format!("{runner:?} is not a runner"),
            "use claude-code, opencode or command",
        );
    }
    if let Some(ttl) = sandbox.default_pause_ttl_seconds.filter(|&n| n < 0) {
        bad(
            "company.providers.sandbox.default_pause_ttl_seconds".into(),
            format!("{ttl} is negative: an unbounded pause is the leak the knob exists to prevent"),
            "give seconds (1800 is the default; 0 never pauses), or leave it out for the default",
        );
    }
    if let Some(timeout) = sandbox
        .default_timeout_seconds
        .filter(|n| !(60..=86_400).contains(n))
    {
        bad(
            "company.providers.sandbox.default_timeout_seconds".into(),
            format!(
                "{timeout} is out of range: it is the box's keepalive window, refreshed by every poll"
            ),
            "use 60 to 86400 seconds (default 900); it never stops a run, it reclaims a box nothing keeps alive",
        );
    }
    if let Some(local) = &sandbox.local
        && local.max_box_bytes.is_some_and(|bytes| bytes < 1024 * 1024)
    {
        bad(
            "company.providers.sandbox.local.max_box_bytes".into(),
            format!(
                "{} bytes is under 1 MiB: every job would be ended as it starts",
                local.max_box_bytes.unwrap_or_default()
            ),
            "give a box room to work, e.g. 10737418240 (10 GiB), or leave it out",
        );
    }
}

/// One setup list: every step named, once in the list, and writing only paths its cells
/// allow (`local`: a local box writes only inside its home).
fn setup_step_problems(field: &str, list: &[SetupStep], local: bool, bad: &mut Bad<'_>) {
    for (i, step) in list.iter().enumerate() {
        if step.name.trim().is_empty() {
            bad(
                format!("{field}[{i}].name"),
                "is empty".into(),
                "name every step: a setup failure names it",
            );
        }
        crate::runenv::optional_key_problems(
            &format!("{field}[{i}]"),
            &step.env,
            &step.files,
            &step.optional_keys,
            bad,
        );
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
}

/// Every LLM entry names a model (an opencode entry's as `<provider>/<model>`), and its
/// endpoint is an http(s) URL.
fn llm_entry_problems(llm: &BTreeMap<String, LlmEntry>, bad: &mut Bad<'_>) {
    for (name, entry) in llm {
        if entry.provider == crate::providers::Wire::Opencode
            && !entry.model.trim().is_empty()
            && !entry.model.contains('/')
        {
            bad(
                format!("company.providers.llm.{name}.model"),
                format!(
                    "{:?} names no provider: an opencode entry's model is written as OpenCode's own calls write it",
                    entry.model
                ),
                "write it <provider>/<model>, e.g. anthropic/claude-sonnet-4-5",
            );
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn company(yaml: &str) -> Company {
        serde_yaml::from_str(yaml).expect("parses")
    }

    #[test]
    fn setup_steps_are_validated_and_expanded() {
        let yaml = r#"
providers:
  sandbox:
    local: {}
    default_run_in: direct
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
        // a run's environment is left as written at load, and resolved at launch
        let step = &c.providers.sandbox.setup[0];
        assert_eq!(step.files["whole"], "${WHOLE}");
        let mut plan = c.plan_sandbox("x", None, None).expect("plans");
        plan.resolve_env(&lookup).expect("resolves");
        let step = &plan.setup[0];
        assert_eq!(step.files[".npmrc"], "//r/:_authToken=${NPM_TOKEN}");
        assert_eq!(step.files["whole"], "file body");
        assert!(!step.files.contains_key("opt"));
        assert_eq!(plan.env["NPM_TOKEN"], "t0k");
        assert_eq!(plan.setup.len(), 1);
    }

    fn problem_texts(yaml: &str) -> Vec<String> {
        company(yaml)
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn unknown_cells_runners_entries_and_roles_are_named_in_document_order() {
        let text = problem_texts(
            r#"
providers:
  llm:
    default: { provider: anthropic, model: " ", base_url: "gateway:9" }
  sandbox: { local: {}, default_run_in: vm, default_coding_agent: aider }
roles:
  - name: eng
    llm: nope
    sandbox: { enabled: true, run_in: cloud, coding_agent: codex }
seats:
  - { handle: ada, role: designer }
"#,
        );
        let fields: Vec<&str> = text
            .iter()
            .map(|t| t.split(':').next().unwrap_or_default())
            .collect();
        assert_eq!(
            fields,
            [
                "company.providers.sandbox.default_run_in",
                "company.providers.sandbox.default_coding_agent",
                "company.providers.llm.default.model",
                "company.providers.llm.default.base_url",
                "company.roles[0].llm",
                "company.roles[0].sandbox.run_in",
                "company.roles[0].sandbox.coding_agent",
                "company.seats[0].role",
            ],
            "{text:?}"
        );
        assert_eq!(
            text[0],
            "company.providers.sandbox.default_run_in: \"vm\" is not a cell; use direct, container or e2b"
        );
    }

    #[test]
    fn an_absolute_setup_path_is_allowed_only_for_a_remote_cell() {
        let remote = r#"
providers: { sandbox: { local: {}, e2b: { api_key: k }, default_run_in: direct } }
roles:
  - name: eng
    sandbox:
      enabled: true
      run_in: e2b
      setup: [{ name: motd, files: { "/etc/motd": "hi" } }]
"#;
        assert!(problem_texts(remote).is_empty());
        let local = remote.replace("run_in: e2b", "run_in: direct");
        let text = problem_texts(&local);
        assert_eq!(text.len(), 1, "{text:?}");
        assert!(
            text[0].starts_with("company.roles[0].sandbox.setup[0].files./etc/motd:"),
            "{text:?}"
        );
    }

    #[test]
    fn a_chart_without_roles_accepts_any_seat_role() {
        assert!(problem_texts("seats:\n  - { handle: ada, role: anything }\n").is_empty());
    }
}
