//! MCP servers inside the box (the spec's "MCP inside the sandbox"): the company's
//! `mcp_servers` as written ([`McpServer`]: stdio or HTTP), a role's `mcp_env` (the seat's own
//! credentials for them: headers for an HTTP server, environment for a stdio one) and
//! `role.sandbox.mcp.servers` (which of them the role's boxes get), resolved on the node into
//! what a launch renders ([`RenderedMcp`]) — or withheld, or skipped, with the reason.
//!
//! Every `${VAR}` in a server's `command`, `args`, `env`, `url` and `headers`, and in the role's
//! `mcp_env`, is resolved at load by the resolver the run environment uses (the node's
//! environment), and never written into the box as a reference: OpenCode does not read that
//! syntax, and Claude Code would read it from the run environment, which holds a company secret
//! only where the seat repeats it. A value that does not resolve — under a key the server does
//! not declare optional — withholds the server from every box (`sandbox_mcp_server_withheld`,
//! naming the variables): handed an empty token, an in-box server refuses to start or acts as
//! nobody, and the agent would spend a round finding that out. An optional key that does not
//! resolve is left out.
//!
//! Layout: the types as written → [`resolve_server`] (load) → [`Company::plan_mcp`] (launch).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::company::Company;
use crate::expand::expand;

/// The transports a server may name; any other is skipped with a warning.
pub const TRANSPORTS: [&str; 2] = ["stdio", "http"];

/// One of the company's `mcp_servers`, as written. Its Debug form names keys, not values.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// `stdio` (spawned inside the box: its command must be there) or `http`
    pub transport: String,
    /// stdio: the program and its arguments
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: the server's environment
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// http: the endpoint the box reaches
    #[serde(default)]
    pub url: Option<String>,
    /// http: headers sent on every request
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// env or header names whose value may resolve to nothing (left out, not withheld)
    #[serde(default)]
    pub optional_keys: Vec<String>,
    /// the `${VAR}`s that did not resolve at load under a required key (filled at load)
    #[serde(skip)]
    pub unresolved: BTreeSet<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("transport", &self.transport)
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("url", &self.url.as_ref().map(|_| "<set>"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("unresolved", &self.unresolved)
            .finish()
    }
}

/// `role.sandbox.mcp`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RoleMcp {
    /// which of the company's `mcp_servers` this role's boxes get; the agent gets every tool
    /// each one serves (there is no per-tool allowlist: scoping is by server)
    #[serde(default)]
    pub servers: Vec<String>,
}

/// A role's `mcp_env` for one server, resolved: its values, and the `${VAR}`s that did not
/// resolve.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ResolvedMcpEnv {
    pub values: BTreeMap<String, String>,
    pub unresolved: BTreeSet<String>,
}

impl std::fmt::Debug for ResolvedMcpEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedMcpEnv")
            .field("values", &self.values.keys().collect::<Vec<_>>())
            .field("unresolved", &self.unresolved)
            .finish()
    }
}

/// How a rendered server is reached.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpTransport::Stdio { command, env, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
            McpTransport::Http { headers, .. } => f
                .debug_struct("Http")
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// A server a box is given, every value resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedMcp {
    pub name: String,
    pub transport: McpTransport,
}

/// A server a box is not given, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpLeftOut {
    /// a required value did not resolve (`sandbox_mcp_server_withheld`): the variables
    Withheld {
        name: String,
        variables: Vec<String>,
    },
    /// named by the role but not one of the company's servers, or of an unknown transport
    Skipped { name: String, why: String },
}

/// What a launch renders into its box.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpPlan {
    pub servers: Vec<RenderedMcp>,
    pub left_out: Vec<McpLeftOut>,
}

/// Resolves a map of values: each `${VAR}` through `lookup`; an unresolved value under an
/// optional key is left out, under any other it names its variable in `unresolved`.
fn resolve_values(
    values: &mut BTreeMap<String, String>,
    optional: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    unresolved: &mut BTreeSet<String>,
) {
    let mut dropped = Vec::new();
    for (key, value) in values.iter_mut() {
        match resolve_text(value, lookup) {
            Ok(resolved) if resolved.is_empty() && optional.contains(key) => {
                dropped.push(key.clone())
            }
            Ok(resolved) => *value = resolved,
            Err(missing) if optional.contains(key) => {
                let _ = missing;
                dropped.push(key.clone());
            }
            Err(missing) => unresolved.extend(missing),
        }
    }
    for key in dropped {
        values.remove(&key);
    }
}

/// One text with every `${VAR}` resolved, or the variables that are not set.
fn resolve_text(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Vec<String>> {
    expand(text, lookup).map_err(|_| unset_variables(text, lookup))
}

/// The `${VAR}`s in `text` that `lookup` does not answer (an unclosed `${` names itself).
fn unset_variables(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut missing = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            missing.push(format!("${{{after}"));
            break;
        };
        let name = &after[..end];
        if lookup(name).is_none() {
            missing.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    missing
}

/// Resolves a server as written, at load: every value through `lookup`, the variables that do
/// not resolve (under required keys) recorded on it.
pub fn resolve_server(server: &mut McpServer, lookup: &dyn Fn(&str) -> Option<String>) {
    let mut unresolved = BTreeSet::new();
    let optional = server.optional_keys.clone();
    for text in server
        .command
        .iter_mut()
        .chain(server.url.iter_mut())
        .chain(server.args.iter_mut())
    {
        match resolve_text(text, lookup) {
            Ok(resolved) => *text = resolved,
            Err(missing) => unresolved.extend(missing),
        }
    }
    resolve_values(&mut server.env, &optional, lookup, &mut unresolved);
    resolve_values(&mut server.headers, &optional, lookup, &mut unresolved);
    server.unresolved = unresolved;
}

/// Resolves a role's `mcp_env` for one server, at load; keys the server declares optional may
/// resolve to nothing.
pub fn resolve_role_env(
    values: &BTreeMap<String, String>,
    optional: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> ResolvedMcpEnv {
    let mut resolved = ResolvedMcpEnv {
        values: values.clone(),
        unresolved: BTreeSet::new(),
    };
    resolve_values(
        &mut resolved.values,
        optional,
        lookup,
        &mut resolved.unresolved,
    );
    resolved
}

impl Company {
    /// The MCP servers a box of `seat` is given: the ones its role's `sandbox.mcp.servers`
    /// names, each with the role's `mcp_env` for it merged in (headers for HTTP, environment
    /// for stdio; the role's value wins), every value resolved — and the ones left out, each
    /// with why.
    pub fn plan_mcp(&self, seat: &str) -> McpPlan {
        let mut plan = McpPlan::default();
        let Some(role) = self.role_of(seat) else {
            return plan;
        };
        let named = role
            .sandbox
            .as_ref()
            .and_then(|gate| gate.mcp.as_ref())
            .map(|mcp| mcp.servers.as_slice())
            .unwrap_or_default();
        for name in named {
            let Some(server) = self.mcp_servers.get(name) else {
                plan.left_out.push(McpLeftOut::Skipped {
                    name: name.clone(),
                    why: format!("{name:?} is not one of the company's mcp_servers"),
                });
                continue;
            };
            let role_env = role.mcp_env_resolved.get(name).cloned().unwrap_or_default();
            let variables: BTreeSet<String> = server
                .unresolved
                .iter()
                .chain(&role_env.unresolved)
                .cloned()
                .collect();
            if !variables.is_empty() {
                plan.left_out.push(McpLeftOut::Withheld {
                    name: name.clone(),
                    variables: variables.into_iter().collect(),
                });
                continue;
            }
            let transport = match server.transport.as_str() {
                "stdio" => match server.command.as_deref().filter(|c| !c.is_empty()) {
                    Some(command) => {
                        let mut env = server.env.clone();
                        env.extend(role_env.values);
                        McpTransport::Stdio {
                            command: command.to_owned(),
                            args: server.args.clone(),
                            env,
                        }
                    }
                    None => {
                        plan.left_out.push(McpLeftOut::Skipped {
                            name: name.clone(),
                            why: "a stdio server needs its command".into(),
                        });
                        continue;
                    }
                },
                "http" => match server.url.as_deref().filter(|u| !u.is_empty()) {
                    Some(url) => {
                        let mut headers = server.headers.clone();
                        headers.extend(role_env.values);
                        McpTransport::Http {
                            url: url.to_owned(),
                            headers,
                        }
                    }
                    None => {
                        plan.left_out.push(McpLeftOut::Skipped {
                            name: name.clone(),
                            why: "an http server needs its url".into(),
                        });
                        continue;
                    }
                },
                other => {
                    plan.left_out.push(McpLeftOut::Skipped {
                        name: name.clone(),
                        why: format!(
                            "transport {other:?} is neither {}",
                            TRANSPORTS.join(" nor ")
                        ),
                    });
                    continue;
                }
            };
            plan.servers.push(RenderedMcp {
                name: name.clone(),
                transport,
            });
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "GH" => Some("ghp_seat".into()),
            "HOST" => Some("mcp.example.com".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn a_server_resolves_every_value_and_names_what_did_not() {
        let mut server = McpServer {
            transport: "http".into(),
            url: Some("https://${HOST}/mcp".into()),
            headers: BTreeMap::from([
                ("Authorization".into(), "Bearer ${GH}".into()),
                ("X-Team".into(), "${TEAM}".into()),
                ("X-Opt".into(), "${OPT}".into()),
            ]),
            optional_keys: vec!["X-Opt".into()],
            ..McpServer::default()
        };
        resolve_server(&mut server, &lookup);
        assert_eq!(server.url.as_deref(), Some("https://mcp.example.com/mcp"));
        assert_eq!(server.headers["Authorization"], "Bearer ghp_seat");
        assert!(
            !server.headers.contains_key("X-Opt"),
            "an optional key left out"
        );
        assert_eq!(server.unresolved, BTreeSet::from(["TEAM".to_owned()]));
    }

    #[test]
    fn unset_variables_are_each_named() {
        assert_eq!(
            unset_variables("${GH}:${A}-${B}", &lookup),
            vec!["A".to_owned(), "B".to_owned()]
        );
    }
}
