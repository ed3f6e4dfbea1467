//! The sandbox catalogue's rules (the spec's "Enabling it" through "Sandbox backends"): which
//! cells a company configures ([`SandboxSection::configured_cells`]), the cell a seat that
//! names none falls to ([`SandboxSection::resolved_default`]), the cells something reaches —
//! the only ones a backend is built for ([`Company::reached_cells`]) — what `validate` refuses
//! about them ([`Company::catalogue_problems`]), and the gate a launch passes
//! ([`Company::sandbox_gate`]).
//!
//! No `providers.sandbox` is no sandbox at all: no seat launches code work, and a role that
//! enables its gate is refused where it is written. A node started with no company document
//! runs the quickstart company ([`Company::quickstart`]): implicit seats on `direct`.

use std::collections::BTreeSet;

use crate::company::Company;
use crate::providers::{CELLS, LocalSection, RoleSandbox, SandboxSection};

/// Records one problem: its location, what is wrong, and the remedy.
pub(crate) type Bad<'a> = dyn FnMut(String, String, &'static str) + 'a;

/// What makes each cell: `direct` and `container` are `local:`'s, `e2b` is `e2b:`'s.
fn backend_of(cell: &str) -> &'static str {
    match cell {
        "e2b" => "e2b:",
        _ => "local:",
    }
}

impl SandboxSection {
    /// The cells the catalogue can make boxes in: `local:` serves `direct` and `container`,
    /// `e2b:` serves `e2b`, and `fake: true` answers every cell.
    pub fn configured_cells(&self) -> BTreeSet<&'static str> {
        if !self.declared {
            return BTreeSet::new();
        }
        if self.fake.enabled {
            return CELLS.into_iter().collect();
        }
        let mut cells = BTreeSet::new();
        if self.local.is_some() {
            cells.extend(["direct", "container"]);
        }
        if self.e2b.is_some() {
            cells.insert("e2b");
        }
        cells
    }

    /// Where a seat that names no cell runs: `default_run_in`, else the one cell an
    /// `e2b:`-only catalogue names, else `direct` for `fake: true` (which answers every cell).
    /// `local:` alone is two cells, and neither is chosen for an operator who did not say.
    pub fn resolved_default(&self) -> Option<&str> {
        if !self.declared {
            return None;
        }
        if let Some(cell) = self.default_run_in.as_deref().filter(|c| !c.is_empty()) {
            return Some(cell);
        }
        if self.fake.enabled {
            return Some("direct");
        }
        match (&self.e2b, &self.local) {
            (Some(_), None) => Some("e2b"),
            _ => None,
        }
    }
}

/// A role's gate when it is on.
fn enabled(gate: Option<&RoleSandbox>) -> Option<&RoleSandbox> {
    gate.filter(|g| g.enabled)
}

impl Company {
    /// The company a node runs with no company document: seats are implicit, and each runs
    /// its code work in a `direct` box on the node (the demo's and a first node's route).
    pub fn quickstart() -> Company {
        let mut company = Company::default();
        let sandbox = &mut company.providers.sandbox;
        sandbox.declared = true;
        sandbox.local = Some(LocalSection::default());
        sandbox.default_run_in = Some("direct".into());
        company
    }

    /// The cells something reaches: the resolved default (every catalogue that resolves one
    /// reaches it, so a seat added later has somewhere to go) and each enabled role's
    /// `run_in`. A backend is built for these and no other.
    pub fn reached_cells(&self) -> BTreeSet<String> {
        let sandbox = &self.providers.sandbox;
        if !sandbox.declared {
            return BTreeSet::new();
        }
        let roles = self
            .roles
            .iter()
            .filter_map(|role| enabled(role.sandbox.as_ref()).and_then(|g| g.run_in.as_deref()));
        sandbox
            .resolved_default()
            .into_iter()
            .chain(roles)
            .filter(|cell| CELLS.contains(cell))
            .map(str::to_owned)
            .collect()
    }

    /// Whether `seat` may launch code work: the company has a catalogue, and — when the chart
    /// lists its seats — the seat's role enables its sandbox gate. The refusal names the role
    /// and what to change.
    pub fn sandbox_gate(&self, seat: &str) -> Result<(), String> {
        if !self.providers.sandbox.declared {
            return Err(
                "this company has no sandbox: company.providers.sandbox is absent, so no seat launches code work; add providers.sandbox with local: or e2b: (and default_run_in)"
                    .into(),
            );
        }
        if self.seats.is_empty() {
            return Ok(());
        }
        let Some(role) = self.seat(seat).and_then(|s| s.role.as_deref()) else {
            return Err(format!(
                "seat {seat:?} has no role, and a seat's sandbox is its role's gate: give it a role whose sandbox.enabled is true"
            ));
        };
        match self.roles.iter().position(|r| r.name == role) {
            None => Err(format!(
                "seat {seat:?}'s role {role:?} is not under company.roles, so no gate enables its sandbox: add role {role:?} with sandbox.enabled: true"
            )),
            Some(i) if enabled(self.roles[i].sandbox.as_ref()).is_none() => Err(format!(
                "role {role:?} (seat {seat:?}) does not enable the sandbox: set sandbox.enabled: true on company.roles[{i}] ({role:?})"
            )),
            Some(_) => Ok(()),
        }
    }

    /// The catalogue's problems, each where it is written: no catalogue under an enabled
    /// gate; an empty block; `fake: true` beside a real backend; a default that is not a
    /// configured cell, or missing where something falls to it; a role's cell that is not
    /// configured or is `self`; a gate that is off with settings under it; a catalogue that
    /// reaches nothing; an image missing for a reached container, or set for none; an empty
    /// E2B key.
    pub(crate) fn catalogue_problems(&self, bad: &mut Bad<'_>) {
        let sandbox = &self.providers.sandbox;
        if !sandbox.declared {
            for (i, role) in self.roles.iter().enumerate() {
                if enabled(role.sandbox.as_ref()).is_some() {
                    bad(
                        format!("company.roles[{i}].sandbox.enabled"),
                        format!(
                            "role {:?} enables the sandbox, but the company has no providers.sandbox: its seats would plan around a box nothing can make",
                            role.name
                        ),
                        "add providers.sandbox with local: or e2b:, or turn the role's gate off",
                    );
                }
            }
            return;
        }
        let field = "company.providers.sandbox";
        if sandbox.fake.enabled && (sandbox.e2b.is_some() || sandbox.local.is_some()) {
            bad(
                format!("{field}.fake"),
                "fake: true replaces the backends; a real block beside it configures nothing"
                    .into(),
                "remove fake: true, or the e2b: and local: blocks",
            );
        }
        let configured = sandbox.configured_cells();
        if configured.is_empty() {
            bad(
                field.into(),
                "names no cell: a block with no e2b:, local: or fake: true configures nothing, and every sandbox-enabled seat would plan around a box it never gets".into(),
                "give it e2b:, local: or fake: true, or leave providers.sandbox out for no sandbox at all",
            );
            return;
        }
        self.default_problems(&configured, bad);
        self.role_cell_problems(&configured, bad);
        if self.reached_cells().is_empty() {
            // implicit seats, or a default that is no cell, already had it said
            let default_written = sandbox
                .default_run_in
                .as_deref()
                .is_some_and(|c| !c.is_empty());
            if !self.seats.is_empty() && !default_written {
                bad(
                    field.into(),
                    "reaches no cell: there is no default_run_in and no enabled role names a run_in, so no backend would be built".into(),
                    "set default_run_in, or run_in on a role",
                );
            }
        } else {
            self.image_problems(bad);
        }
        if let Some(e2b) = &sandbox.e2b
            && e2b.api_key.trim().is_empty()
        {
            bad(
                format!("{field}.e2b.api_key"),
                "is empty: E2B's API authenticates every call, a self-hosted cluster's too".into(),
                "set api_key: \"${E2B_API_KEY}\" and export the key",
            );
        }
    }

    /// `default_run_in` names a configured cell (never `self`), and is there whenever
    /// something falls to it: implicit seats, or an enabled role that names no cell.
    fn default_problems(&self, configured: &BTreeSet<&'static str>, bad: &mut Bad<'_>) {
        let sandbox = &self.providers.sandbox;
        let field = "company.providers.sandbox.default_run_in";
        match sandbox.default_run_in.as_deref().filter(|c| !c.is_empty()) {
            Some("self") => bad(
                field.into(),
                "self cannot be the company default: it would turn code work off for every seat"
                    .into(),
                "use direct, container or e2b",
            ),
            Some(cell) if !CELLS.contains(&cell) => bad(
                field.into(),
                format!("{cell:?} is not a cell"),
                "use direct, container or e2b",
            ),
            Some(cell) if !configured.contains(cell) => bad(
                field.into(),
                format!(
                    "{cell:?} is not in the catalogue: its backend, {}, is not configured",
                    backend_of(cell)
                ),
                "configure that backend under providers.sandbox, or name a cell it has",
            ),
            Some(_) => {}
            None if sandbox.resolved_default().is_none() && self.seats.is_empty() => bad(
                field.into(),
                format!(
                    "is needed: seats are implicit (no company.seats), so each falls to the default, and local: alone is two cells ({})",
                    configured.iter().copied().collect::<Vec<_>>().join(", ")
                ),
                "set default_run_in: direct (the engine's own user, on the host) or container",
            ),
            None => {}
        }
    }

    /// Each role's cell: one the catalogue configures, never `self`; an enabled gate that
    /// names none needs a default; a gate that is off carries nothing it would not read.
    fn role_cell_problems(&self, configured: &BTreeSet<&'static str>, bad: &mut Bad<'_>) {
        let default = self.providers.sandbox.resolved_default();
        for (i, role) in self.roles.iter().enumerate() {
            let Some(gate) = &role.sandbox else { continue };
            let field = format!("company.roles[{i}].sandbox");
            if !gate.enabled {
                let mcp = gate.mcp.as_ref().is_some_and(|m| !m.servers.is_empty());
                if gate.run_in.as_deref().is_some_and(|c| !c.is_empty())
                    || !gate.setup.is_empty()
                    || !gate.env.is_empty()
                    || mcp
                {
                    bad(
                        format!("{field}.enabled"),
                        format!(
                            "role {:?}'s gate is off, so the run_in, setup, env or mcp under it is read by nothing",
                            role.name
                        ),
                        "set enabled: true, or remove them",
                    );
                }
                continue;
            }
            match gate.run_in.as_deref().filter(|c| !c.is_empty()) {
                Some("self") => bad(
                    format!("{field}.run_in"),
                    "self is the cell of an executor in agent mode, and boxfleet runs none: it would turn this role's code work off".into(),
                    "name direct, container or e2b, or leave run_in empty for the default",
                ),
                Some(cell) if CELLS.contains(&cell) && !configured.contains(cell) => bad(
                    format!("{field}.run_in"),
                    format!(
                        "{cell:?} is not in the catalogue: its backend, {}, is not configured",
                        backend_of(cell)
                    ),
                    "configure that backend under providers.sandbox, or name a cell it has",
                ),
                Some(_) => {}
                None if default.is_none() => bad(
                    format!("{field}.run_in"),
                    format!(
                        "role {:?} names no cell, and the catalogue has no default_run_in (local: alone is two cells, and neither is chosen for you)",
                        role.name
                    ),
                    "set run_in on the role, or providers.sandbox.default_run_in",
                ),
                None => {}
            }
        }
    }

    /// `local.image` is required when a container is reached, and refused when none is.
    fn image_problems(&self, bad: &mut Bad<'_>) {
        let sandbox = &self.providers.sandbox;
        let Some(local) = &sandbox.local else { return };
        let image = local.image.as_deref().is_some_and(|i| !i.trim().is_empty());
        let container = self.reached_cells().contains("container");
        if container && !image {
            bad(
                "company.providers.sandbox.local.image".into(),
                "is needed: a seat runs in a container, which is made from this image".into(),
                "set local.image to an image with the coding CLI in it",
            );
        }
        if image && !container {
            bad(
                "company.providers.sandbox.local.image".into(),
                "no seat runs in a container, so the image configures nothing".into(),
                "remove it, or set run_in: container (on a role or as default_run_in)",
            );
        }
        if container {
            return;
        }
        // the rest of the container-only fields, checked against the cells reached too
        let written = [
            (
                "runtime",
                local.runtime.as_deref().is_some_and(|r| !r.is_empty()),
            ),
            (
                "network",
                local.network.as_deref().is_some_and(|n| !n.is_empty()),
            ),
            ("run_args", !local.run_args.is_empty()),
            ("runtime_env", !local.runtime_env.is_empty()),
        ];
        for (field, set) in written {
            if set {
                bad(
                    format!("company.providers.sandbox.local.{field}"),
                    "is container-only, and no seat runs in a container: it configures nothing"
                        .into(),
                    "remove it, or set run_in: container (on a role or as default_run_in)",
                );
            }
        }
    }

    /// What `validate` warns of in the catalogue (the document is valid either way): each bare
    /// `-e NAME` in `local.run_args`, which copies NAME from the container runtime CLI's own
    /// environment — its fixed list and `runtime_env` — so anything else arrives unset.
    pub fn catalogue_warnings(&self) -> Vec<String> {
        let Some(local) = &self.providers.sandbox.local else {
            return Vec::new();
        };
        let mut warnings = Vec::new();
        let mut args = local.run_args.iter().enumerate().peekable();
        while let Some((i, arg)) = args.next() {
            let name = match arg.as_str() {
                "-e" | "--env" => args.peek().map(|(_, next)| next.as_str()),
                other => other
                    .strip_prefix("--env=")
                    .or_else(|| other.strip_prefix("-e")),
            };
            if let Some(name) = name.filter(|n| !n.is_empty() && !n.contains('='))
                && !local.runtime_env.contains_key(name)
            {
                warnings.push(format!(
                    "company.providers.sandbox.local.run_args[{i}]: -e {name} copies {name} from the container runtime's own environment, which carries only its fixed list and local.runtime_env: declare it in runtime_env, or put what the box needs in role.sandbox.env"
                ));
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn company(yaml: &str) -> Company {
        serde_yaml::from_str(yaml).expect("parses")
    }

    fn problems(yaml: &str) -> Vec<String> {
        company(yaml)
            .problems()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn one(yaml: &str, field: &str, says: &str) {
        let text = problems(yaml);
        assert!(
            text.iter()
                .any(|t| t.starts_with(field) && t.contains(says)),
            "{field} … {says} in {text:#?}"
        );
    }

    #[test]
    fn no_catalogue_is_no_sandbox_and_an_enabled_gate_under_it_is_refused() {
        let c = company("seats: [{ handle: eng }]\n");
        assert!(c.reached_cells().is_empty());
        let refused = c.sandbox_gate("eng").expect_err("no sandbox");
        assert!(refused.contains("providers.sandbox is absent"), "{refused}");
        one(
            "roles: [{ name: eng, sandbox: { enabled: true } }]\n",
            "company.roles[0].sandbox.enabled",
            "no providers.sandbox",
        );
    }

    #[test]
    fn an_empty_block_and_one_naming_no_cell_are_refused() {
        one(
            "providers: { sandbox: {} }\n",
            "company.providers.sandbox:",
            "names no cell",
        );
        one(
            "providers: { sandbox: { default_coding_agent: claude-code } }\n",
            "company.providers.sandbox:",
            "names no cell",
        );
    }

    #[test]
    fn fake_answers_every_cell_and_is_refused_beside_a_real_backend() {
        let c = company("providers: { sandbox: { fake: true } }\n");
        assert_eq!(c.providers.sandbox.resolved_default(), Some("direct"));
        assert_eq!(c.providers.sandbox.configured_cells().len(), 3);
        assert!(c.problems().is_empty());
        one(
            "providers: { sandbox: { fake: true, local: {}, default_run_in: direct } }\n",
            "company.providers.sandbox.fake",
            "replaces the backends",
        );
    }

    #[test]
    fn local_alone_is_two_cells_and_needs_a_default_for_whatever_falls_to_it() {
        one(
            "providers: { sandbox: { local: {} } }\n",
            "company.providers.sandbox.default_run_in",
            "seats are implicit",
        );
        one(
            "providers: { sandbox: { local: {} } }\nroles: [{ name: eng, sandbox: { enabled: true } }]\nseats: [{ handle: a, role: eng }]\n",
            "company.roles[0].sandbox.run_in",
            "names no cell",
        );
        // every enabled role names its own cell: no default needed
        let own = "providers: { sandbox: { local: {} } }\nroles: [{ name: eng, sandbox: { enabled: true, run_in: direct } }]\nseats: [{ handle: a, role: eng }]\n";
        assert!(problems(own).is_empty(), "{:?}", problems(own));
        assert_eq!(
            company(own).reached_cells(),
            BTreeSet::from(["direct".to_owned()])
        );
        // an e2b-only catalogue resolves its own default
        let e2b = company("providers: { sandbox: { e2b: { api_key: k } } }\n");
        assert_eq!(e2b.providers.sandbox.resolved_default(), Some("e2b"));
        assert!(e2b.problems().is_empty());
    }

    #[test]
    fn a_catalogue_that_reaches_nothing_is_refused() {
        one(
            "providers: { sandbox: { local: {} } }\nroles: [{ name: eng, sandbox: { enabled: false } }]\nseats: [{ handle: a, role: eng }]\n",
            "company.providers.sandbox:",
            "reaches no cell",
        );
    }

    #[test]
    fn a_cell_whose_backend_is_not_configured_or_self_is_refused() {
        one(
            "providers: { sandbox: { local: {}, default_run_in: e2b } }\n",
            "company.providers.sandbox.default_run_in",
            "e2b:, is not configured",
        );
        one(
            "providers: { sandbox: { e2b: { api_key: k } } }\nroles: [{ name: eng, sandbox: { enabled: true, run_in: direct } }]\n",
            "company.roles[0].sandbox.run_in",
            "local:, is not configured",
        );
        one(
            "providers: { sandbox: { local: {}, default_run_in: self } }\n",
            "company.providers.sandbox.default_run_in",
            "cannot be the company default",
        );
        one(
            "providers: { sandbox: { local: {}, default_run_in: direct } }\nroles: [{ name: eng, sandbox: { enabled: true, run_in: self } }]\n",
            "company.roles[0].sandbox.run_in",
            "agent mode",
        );
    }

    #[test]
    fn the_image_is_needed_for_a_reached_container_and_refused_for_none() {
        one(
            "providers: { sandbox: { local: {}, default_run_in: container } }\n",
            "company.providers.sandbox.local.image",
            "is needed",
        );
        one(
            "providers: { sandbox: { local: { image: node:22 }, default_run_in: direct } }\n",
            "company.providers.sandbox.local.image",
            "configures nothing",
        );
        let both = "providers: { sandbox: { local: { image: node:22 }, default_run_in: direct } }\nroles: [{ name: box, sandbox: { enabled: true, run_in: container } }]\n";
        assert!(problems(both).is_empty(), "{:?}", problems(both));
        assert_eq!(company(both).reached_cells().len(), 2);
    }

    #[test]
    fn the_container_only_fields_configure_nothing_without_a_container_and_bare_env_is_warned() {
        one(
            "providers: { sandbox: { local: { network: none, run_args: [--cpus, \"2\"] }, default_run_in: direct } }\n",
            "company.providers.sandbox.local.network",
            "container-only",
        );
        one(
            "providers: { sandbox: { local: { run_args: [--cpus, \"2\"] }, default_run_in: direct } }\n",
            "company.providers.sandbox.local.run_args",
            "configures nothing",
        );
        let c = company(
            "providers: { sandbox: { local: { image: busybox, run_args: [-e, PULL_ROLE, --env=DECLARED, -e, \"X=1\"], runtime_env: { DECLARED: v } }, default_run_in: container } }\n",
        );
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        let warnings = c.catalogue_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("company.providers.sandbox.local.run_args[0]: -e PULL_ROLE"),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_gate_that_is_off_carries_nothing_and_an_empty_key_is_refused() {
        one(
            "providers: { sandbox: { local: {}, default_run_in: direct } }\nroles: [{ name: eng, sandbox: { enabled: false, env: { A: b } } }]\n",
            "company.roles[0].sandbox.enabled",
            "read by nothing",
        );
        one(
            "providers: { sandbox: { e2b: { api_key: \"\" } } }\n",
            "company.providers.sandbox.e2b.api_key",
            "authenticates every call",
        );
    }

    #[test]
    fn the_gate_names_the_role_and_implicit_seats_pass() {
        let c = company(
            "providers: { sandbox: { local: {}, default_run_in: direct } }\nroles:\n  - { name: writer }\n  - { name: eng, sandbox: { enabled: true } }\nseats:\n  - { handle: w, role: writer }\n  - { handle: e, role: eng }\n  - { handle: n }\n",
        );
        assert_eq!(c.sandbox_gate("e"), Ok(()));
        let off = c.sandbox_gate("w").expect_err("writer's gate is off");
        assert!(
            off.contains("role \"writer\"") && off.contains("sandbox.enabled: true"),
            "{off}"
        );
        let none = c.sandbox_gate("n").expect_err("no role");
        assert!(none.contains("has no role"), "{none}");
        let quick = Company::quickstart();
        assert_eq!(quick.sandbox_gate("anyone"), Ok(()));
        assert!(quick.problems().is_empty());
        assert_eq!(quick.reached_cells(), BTreeSet::from(["direct".to_owned()]));
    }
}
