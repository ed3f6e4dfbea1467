//! The company document's org chart (DESIGN §12): seats and units — what a question's audience
//! resolves against. Without one, seats are implicit: a seat named by a launch or a delivery
//! exists, and an audience resolves to the requester or the handle it names.

use serde::Deserialize;

use crate::Error;
use crate::expand::expand;
use crate::providers::{Providers, Role};

/// Whether a seat is an agent or a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    Agent,
    Person,
}

/// A seat as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seat {
    pub handle: String,
    /// the seat's id in the engine's own directory (the board's `agent_id`); empty: its handle
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub kind: Kind,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub unit: Option<String>,
    /// the seat's manager (a handle)
    #[serde(default)]
    pub manager: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    /// the engine that serves the seat's work; empty: its role's, else the node's default
    #[serde(default)]
    pub engine: Option<crate::engine::EngineChoice>,
}

/// A unit as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unit {
    pub name: String,
    pub lead: Option<String>,
    #[serde(default)]
    pub members: Vec<String>,
}

/// The `company:` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Company {
    #[serde(default)]
    pub seats: Vec<Seat>,
    #[serde(default)]
    pub units: Vec<Unit>,
    /// the LLM entries and the sandbox catalogue
    #[serde(default)]
    pub providers: Providers,
    /// roles, with their sandbox gates
    #[serde(default)]
    pub roles: Vec<Role>,
    /// the MCP servers a role's boxes may be given (`role.sandbox.mcp.servers`), by name
    #[serde(default)]
    pub mcp_servers: std::collections::BTreeMap<String, crate::mcp::McpServer>,
    /// the seat and company token caps and the launch floor
    #[serde(default)]
    pub budgets: crate::budget::Budgets,
}

fn expand_one(
    problems: &mut Vec<Error>,
    lookup: &dyn Fn(&str) -> Option<String>,
    field: String,
    value: &mut String,
) {
    match expand(value, lookup) {
        Ok(expanded) => *value = expanded,
        Err(problem) => problems.push(Error::Located {
            field,
            problem,
            remedy: "export the variable in the node's environment, or write the value",
        }),
    }
}

/// Who a question is put to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audience {
    pub handles: Vec<String>,
    /// the audience named nobody; the seat's lead chain was used instead
    pub fallback: bool,
}

impl Company {
    /// Resolves the engine's own `${VAR}` references (the LLM entries' keys and endpoints, the
    /// E2B key, the container runtime's env, the MCP servers') through `lookup`; an unset
    /// variable is a problem at its location. A run's environment is left as written, for
    /// [`SandboxPlan::resolve_env`](crate::plan::SandboxPlan::resolve_env) at launch.
    pub fn expand_env(&mut self, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<Error> {
        let mut problems = Vec::new();
        let p = &mut problems;
        for (name, entry) in &mut self.providers.llm {
            if let Some(key) = &mut entry.api_key {
                expand_one(
                    p,
                    lookup,
                    format!("company.providers.llm.{name}.api_key"),
                    key,
                );
            }
            for (i, key) in entry.api_keys.iter_mut().enumerate() {
                expand_one(
                    p,
                    lookup,
                    format!("company.providers.llm.{name}.api_keys[{i}]"),
                    key,
                );
            }
            if let Some(url) = &mut entry.base_url {
                expand_one(
                    p,
                    lookup,
                    format!("company.providers.llm.{name}.base_url"),
                    url,
                );
            }
        }
        if let Some(e2b) = &mut self.providers.sandbox.e2b {
            expand_one(
                p,
                lookup,
                "company.providers.sandbox.e2b.api_key".into(),
                &mut e2b.api_key,
            );
        }
        if let Some(local) = &mut self.providers.sandbox.local {
            for (key, value) in &mut local.runtime_env {
                let field = format!("company.providers.sandbox.local.runtime_env.{key}");
                expand_one(p, lookup, field, value);
            }
        }
        // MCP servers are resolved by the same resolver, but a value that does not resolve
        // withholds its server from the boxes (named at each launch) rather than the document
        for server in self.mcp_servers.values_mut() {
            crate::mcp::resolve_server(server, lookup);
        }
        for role in &mut self.roles {
            role.mcp_env_resolved = role
                .mcp_env
                .iter()
                .map(|(name, values)| {
                    let optional = self
                        .mcp_servers
                        .get(name)
                        .map(|s| s.optional_keys.as_slice())
                        .unwrap_or_default();
                    let resolved = crate::mcp::resolve_role_env(values, optional, lookup);
                    (name.clone(), resolved)
                })
                .collect();
        }
        // a run's environment (the role's env, the setup steps' env and whole-body files) is
        // resolved at launch, not here: a variable unset now refuses that run, not the node
        problems
    }

    /// Whether `handle` is a seat: any seat when no chart is configured (seats are implicit).
    pub fn has_seat(&self, handle: &str) -> bool {
        self.seats.is_empty() || self.seat(handle).is_some()
    }

    /// The kind of seat `handle` holds in the chart (`person`, `agent`), or `unlisted`.
    pub fn kind_of(&self, handle: &str) -> &'static str {
        match self.seat(handle).map(|seat| seat.kind) {
            Some(Kind::Person) => "person",
            Some(Kind::Agent) => "agent",
            None => "unlisted",
        }
    }

    /// Whether `handle` is one of the company's agent seats: any seat when no chart is
    /// configured; else a seat of the chart whose kind is `agent`.
    pub fn is_agent_seat(&self, handle: &str) -> bool {
        self.seats.is_empty()
            || self
                .seat(handle)
                .is_some_and(|seat| seat.kind == Kind::Agent)
    }

    pub fn seat(&self, handle: &str) -> Option<&Seat> {
        self.seats
            .iter()
            .find(|seat| seat.handle.eq_ignore_ascii_case(handle))
    }

    /// The engine that serves `seat`: the seat's `engine`, else its role's, else `default`.
    pub fn engine_for(
        &self,
        seat: &str,
        default: crate::engine::EngineChoice,
    ) -> crate::engine::EngineChoice {
        let seat = self.seat(seat);
        let role = seat
            .and_then(|s| s.role.as_deref())
            .and_then(|name| self.roles.iter().find(|role| role.name == name));
        seat.and_then(|s| s.engine)
            .or_else(|| role.and_then(|role| role.engine))
            .unwrap_or(default)
    }

    /// The spec's answer authority: who may answer a question a run of `seat` asked, for a
    /// turn `requester` woke — the requester, or whoever leads the seat (its lead chain), and
    /// never a seat (an admin may too; the caller decides that, it is not the chart's).
    pub fn may_answer(
        &self,
        seat: &str,
        requester: Option<&str>,
        subject: &str,
    ) -> Result<(), String> {
        if self.seat(subject).is_some_and(|s| s.kind == Kind::Agent) {
            return Err(format!(
                "{subject} is an agent seat, and a seat never answers a question"
            ));
        }
        if requester.is_some_and(|r| r.eq_ignore_ascii_case(subject)) {
            return Ok(());
        }
        let leads = self.lead_chain(seat);
        if leads.iter().any(|lead| lead.eq_ignore_ascii_case(subject)) {
            return Ok(());
        }
        let leads = if leads.is_empty() {
            "nobody".to_owned()
        } else {
            leads.join(", ")
        };
        Err(format!(
            "{subject} may not answer seat {seat}'s question: its requester ({}), whoever leads seat {seat} ({leads}) or an admin may",
            requester.unwrap_or("none recorded")
        ))
    }

    fn unit(&self, name: &str) -> Option<&Unit> {
        self.units.iter().find(|unit| unit.name == name)
    }

    /// Every problem of the chart, each at its location with its remedy (the whole
    /// document's are [`Company::problems`], in `validate`).
    pub(crate) fn chart_problems(&self) -> Vec<Error> {
        let mut problems = Vec::new();
        let mut bad = |field: String, problem: String, remedy: &'static str| {
            problems.push(Error::Located {
                field,
                problem,
                remedy,
            });
        };
        for (i, seat) in self.seats.iter().enumerate() {
            if self
                .seats
                .iter()
                .take(i)
                .any(|other| other.handle.eq_ignore_ascii_case(&seat.handle))
            {
                bad(
                    format!("company.seats[{i}].handle"),
                    format!("{:?} is a second seat with that handle", seat.handle),
                    "give every seat its own handle (case aside)",
                );
            }
            if let Some(manager) = &seat.manager
                && self.seat(manager).is_none()
            {
                bad(
                    format!("company.seats[{i}].manager"),
                    format!("{manager:?} names no seat"),
                    "name a seat's handle, or drop the manager",
                );
            }
            if let Some(unit) = &seat.unit
                && self.unit(unit).is_none()
            {
                bad(
                    format!("company.seats[{i}].unit"),
                    format!("{unit:?} names no unit"),
                    "add the unit under company.units, or fix the name",
                );
            }
            // a manager chain must end
            let mut seen = vec![seat.handle.to_ascii_lowercase()];
            let mut next = seat.manager.clone();
            while let Some(manager) = next {
                let key = manager.to_ascii_lowercase();
                if seen.contains(&key) {
                    bad(
                        format!("company.seats[{i}].manager"),
                        format!("the manager chain from {:?} loops back", seat.handle),
                        "break the loop: somebody at the top has no manager",
                    );
                    break;
                }
                seen.push(key);
                next = self.seat(&manager).and_then(|m| m.manager.clone());
            }
        }
        for (i, unit) in self.units.iter().enumerate() {
            if let Some(lead) = &unit.lead
                && self.seat(lead).is_none()
            {
                bad(
                    format!("company.units[{i}].lead"),
                    format!("{lead:?} names no seat"),
                    "name a seat's handle",
                );
            }
            for (j, member) in unit.members.iter().enumerate() {
                if self.seat(member).is_none() {
                    bad(
                        format!("company.units[{i}].members[{j}]"),
                        format!("{member:?} names no seat"),
                        "name a seat's handle",
                    );
                }
            }
        }
        problems
    }

    /// The seat's lead chain: its managers nearest first, or, for a seat nobody manages, the
    /// leads of the units that hold it.
    fn lead_chain(&self, seat: &str) -> Vec<String> {
        let mut chain = Vec::new();
        let mut next = self.seat(seat).and_then(|s| s.manager.clone());
        while let Some(manager) = next {
            if chain.contains(&manager) {
                break;
            }
            next = self.seat(&manager).and_then(|m| m.manager.clone());
            chain.push(manager);
        }
        if chain.is_empty() {
            chain = self
                .units
                .iter()
                .filter(|unit| {
                    unit.members.iter().any(|m| m.eq_ignore_ascii_case(seat))
                        || self
                            .seat(seat)
                            .and_then(|s| s.unit.as_deref())
                            .is_some_and(|name| name == unit.name)
                })
                .filter_map(|unit| unit.lead.clone())
                .filter(|lead| !lead.eq_ignore_ascii_case(seat))
                .collect();
        }
        chain
    }

    /// Resolves the audience an agent wrote, for a run of `seat` whose turn `requester` woke.
    pub fn resolve(&self, seat: &str, requester: Option<&str>, audience: &str) -> Audience {
        let found: Vec<String> = match audience.trim().to_ascii_lowercase().as_str() {
            "" | "requester" => requester.map(str::to_owned).into_iter().collect(),
            "manager" => self
                .seat(seat)
                .and_then(|s| s.manager.clone())
                .into_iter()
                .collect(),
            "team" => {
                let unit = self
                    .seat(seat)
                    .and_then(|s| s.unit.as_deref())
                    .and_then(|u| self.unit(u));
                match unit {
                    Some(unit) => {
                        let mut people: Vec<String> = unit.lead.clone().into_iter().collect();
                        for member in &unit.members {
                            let person = self.seat(member).is_some_and(|s| s.kind == Kind::Person);
                            if person
                                && !people.contains(member)
                                && !member.eq_ignore_ascii_case(seat)
                            {
                                people.push(member.clone());
                            }
                        }
                        people
                    }
                    None => Vec::new(),
                }
            }
            name => {
                // one colleague named exactly: a handle or a role name, case aside
                let by_handle = self.seat(name).map(|s| s.handle.clone());
                let by_role = || {
                    self.seats
                        .iter()
                        .filter(|s| {
                            s.role
                                .as_deref()
                                .is_some_and(|r| r.eq_ignore_ascii_case(name))
                        })
                        .map(|s| s.handle.clone())
                        .collect::<Vec<_>>()
                };
                match by_handle {
                    Some(handle) => vec![handle],
                    None if self.seats.is_empty() => vec![audience.trim().to_owned()],
                    None => by_role(),
                }
            }
        };
        if !found.is_empty() {
            return Audience {
                handles: found,
                fallback: false,
            };
        }
        Audience {
            handles: self.lead_chain(seat),
            fallback: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Company {
        serde_yaml::from_str(
            r#"
seats:
  - { handle: eng, kind: agent, role: engineer, unit: platform, manager: alice }
  - { handle: bot2, kind: agent, unit: platform }
  - { handle: alice, kind: person, role: lead, unit: platform, manager: carol }
  - { handle: bob, kind: person, unit: platform }
  - { handle: carol, kind: person, role: director }
units:
  - { name: platform, lead: alice, members: [eng, bot2, alice, bob] }
"#,
        )
        .expect("chart parses")
    }

    /// The spec's answer authority, as a table: who may answer a question of seat `eng`'s run
    /// that `dave` asked for (an admin may always; that is the caller's to decide).
    #[test]
    fn the_requester_and_the_seats_lead_chain_may_answer_and_never_a_seat() {
        let company = chart();
        let may = |subject: &str| company.may_answer("eng", Some("dave"), subject).is_ok();
        let table: Vec<(&str, bool)> = [
            "dave", "DAVE", "alice", "carol", "bob", "bot2", "eng", "zed",
        ]
        .into_iter()
        .map(|subject| (subject, may(subject)))
        .collect();
        assert_eq!(
            table,
            [
                ("dave", true),  // the requester
                ("DAVE", true),  // handles match without case
                ("alice", true), // eng's manager
                ("carol", true), // alice's manager: the lead chain
                ("bob", false),  // a colleague who leads nobody
                ("bot2", false), // a seat
                ("eng", false),  // the run's own seat
                ("zed", false),  // nobody the chart knows
            ]
        );
        let refused = company
            .may_answer("eng", Some("dave"), "bob")
            .expect_err("bob");
        assert_eq!(
            refused,
            "bob may not answer seat eng's question: its requester (dave), whoever leads seat eng (alice, carol) or an admin may"
        );
        // a seat nobody manages: its units' leads
        assert!(company.may_answer("bot2", None, "alice").is_ok());
        // a requester who is a seat (an agent asked for the work) still cannot answer
        assert!(company.may_answer("eng", Some("bot2"), "bot2").is_err());
    }

    #[test]
    fn a_seats_engine_is_its_own_then_its_roles_then_the_nodes_default() {
        use crate::engine::EngineChoice::{Builtin, External};
        let mut company = chart();
        assert_eq!(company.engine_for("eng", Builtin), Builtin);
        assert_eq!(company.engine_for("eng", External), External);
        company
            .roles
            .push(serde_yaml::from_str("{ name: engineer, engine: external }").expect("role"));
        assert_eq!(company.engine_for("eng", Builtin), External);
        company.seats[0].engine = Some(Builtin);
        assert_eq!(company.engine_for("eng", External), Builtin);
        assert_eq!(company.engine_for("somebody-new", External), External);
    }

    #[test]
    fn audiences_resolve_as_the_spec_lists() {
        let company = chart();
        let to = |audience: &str| company.resolve("eng", Some("dave"), audience);
        assert_eq!(to("requester").handles, ["dave"]);
        assert_eq!(to("manager").handles, ["alice"]);
        // the unit's lead and its people; its other agents are left out
        assert_eq!(to("team").handles, ["alice", "bob"]);
        assert_eq!(to("BOB").handles, ["bob"]);
        assert_eq!(to("director").handles, ["carol"]);
        // a name the chart does not have goes to the lead chain, said so
        let guessed = to("bobby");
        assert_eq!(guessed.handles, ["alice", "carol"]);
        assert!(guessed.fallback);
        // no requester recorded: the lead chain
        let nobody = company.resolve("eng", None, "requester");
        assert!(nobody.fallback && nobody.handles == ["alice", "carol"]);
        // a seat nobody manages falls back to its units' leads
        assert_eq!(company.resolve("bot2", None, "manager").handles, ["alice"]);
    }

    #[test]
    fn chart_problems_are_located_with_a_remedy() {
        let mut company = chart();
        company.seats[1].manager = Some("zed".into());
        company.seats[4].manager = Some("eng".into()); // eng → alice → carol → eng
        company.units[0].members.push("ghost".into());
        let problems: Vec<String> = company.problems().iter().map(ToString::to_string).collect();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("company.seats[1].manager") && p.contains("zed")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("loops back")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("company.units[0].members[4]")),
            "{problems:?}"
        );
        assert!(chart().problems().is_empty());
    }
}
