//! Who may make which call: the one table (DESIGN §13), and the seat scope a credential may
//! narrow it to.
//!
//! | call | viewer | operator | engine | admin | node |
//! |---|---|---|---|---|---|
//! | Runs: get, board, tail, events | yes | yes | yes | yes | — |
//! | Runs: launch, deliver | — | yes | yes | yes | — |
//! | Runs: answer (and the answer-authority rule) | — | yes | — | yes | — |
//! | Engine: attach | — | — | yes | yes | — |
//! | Ops: tree, nodes, seats | yes | yes | yes | yes | — |
//! | Ops: drain | — | — | — | yes | — |
//! | Fleet: every call | — | — | — | yes | yes |
//!
//! A call about a seat (launch, deliver, answer, tail, get, attach) is refused to a credential
//! whose seat scope leaves that seat out. Who may answer a particular question is the spec's
//! answer authority on top of this (the run's requester, its seat's lead chain, an admin),
//! decided where the run is known.

use crate::credential::Principal;
use crate::role::Role;

/// A call, with the seats it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call<'a> {
    Get { seat: Option<&'a str> },
    Board,
    Tail { seat: Option<&'a str> },
    Events,
    Launch { seat: &'a str },
    Deliver { seat: &'a str },
    Answer { seat: Option<&'a str> },
    Attach { seats: &'a [String] },
    Tree,
    Nodes,
    Seats,
    Drain,
    Reload,
    Budget,
    Fleet,
}

impl Call<'_> {
    /// The call's name, as a refusal and the audit log say it.
    pub fn name(&self) -> &'static str {
        match self {
            Call::Get { .. } => "Runs.Get",
            Call::Board => "Runs.Board",
            Call::Tail { .. } => "Runs.Tail",
            Call::Events => "Runs.Events",
            Call::Launch { .. } => "Runs.Launch",
            Call::Deliver { .. } => "Runs.Deliver",
            Call::Answer { .. } => "Runs.Answer",
            Call::Attach { .. } => "Engine.Attach",
            Call::Tree => "Ops.Tree",
            Call::Nodes => "Ops.Nodes",
            Call::Seats => "Ops.Seats",
            Call::Drain => "Ops.Drain",
            Call::Reload => "Ops.Reload",
            Call::Budget => "Ops.Budget",
            Call::Fleet => "Fleet",
        }
    }

    /// The roles that may make it.
    pub fn roles(&self) -> &'static [Role] {
        use Role::*;
        match self {
            Call::Get { .. } | Call::Board | Call::Tail { .. } | Call::Events => {
                &[Viewer, Operator, Engine, Admin]
            }
            Call::Tree | Call::Nodes | Call::Seats | Call::Budget => {
                &[Viewer, Operator, Engine, Admin]
            }
            Call::Launch { .. } | Call::Deliver { .. } => &[Operator, Engine, Admin],
            Call::Answer { .. } => &[Operator, Admin],
            Call::Attach { .. } => &[Engine, Admin],
            Call::Drain | Call::Reload => &[Admin],
            Call::Fleet => &[Node, Admin],
        }
    }

    /// The seats it is about.
    fn seats(&self) -> Vec<&str> {
        match self {
            Call::Launch { seat } | Call::Deliver { seat } => vec![seat],
            Call::Get { seat } | Call::Tail { seat } | Call::Answer { seat } => {
                seat.iter().copied().collect()
            }
            Call::Attach { seats } => seats.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether it writes (the audit log records every call that does). A Fleet call is a call
    /// another node forwards: the caller's own call is logged where it is answered.
    pub fn mutates(&self) -> bool {
        matches!(
            self,
            Call::Launch { .. }
                | Call::Deliver { .. }
                | Call::Answer { .. }
                | Call::Attach { .. }
                | Call::Drain
                | Call::Reload
        )
    }
}

/// Why a call is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No credential, or one that does not verify.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// A verified credential that may not make this call.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
}

/// Whether `principal` may make `call`.
pub fn authorize(principal: &Principal, call: &Call<'_>) -> Result<(), Denied> {
    let roles = call.roles();
    if !roles.contains(&principal.role) {
        let may: Vec<&str> = roles.iter().map(|role| role.as_str()).collect();
        return Err(Denied::PermissionDenied(format!(
            "{} is a {} credential; {} needs {}",
            principal.subject,
            principal.role,
            call.name(),
            may.join(" or ")
        )));
    }
    if let Some(seat) = call
        .seats()
        .into_iter()
        .find(|seat| !principal.covers(seat))
    {
        return Err(Denied::PermissionDenied(format!(
            "{}'s credential acts for {}, not seat {seat}",
            principal.subject,
            principal.seats.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(role: Role, seats: &[&str]) -> Principal {
        Principal {
            subject: "ada".into(),
            role,
            seats: seats.iter().map(|s| (*s).to_owned()).collect(),
            key_id: "k1".into(),
        }
    }

    #[test]
    fn every_call_is_allowed_to_exactly_its_roles() {
        let attach = ["eng".to_owned()];
        let calls = [
            Call::Get { seat: Some("eng") },
            Call::Board,
            Call::Tail { seat: Some("eng") },
            Call::Events,
            Call::Launch { seat: "eng" },
            Call::Deliver { seat: "eng" },
            Call::Answer { seat: Some("eng") },
            Call::Attach { seats: &attach },
            Call::Tree,
            Call::Nodes,
            Call::Seats,
            Call::Drain,
            Call::Reload,
            Call::Budget,
            Call::Fleet,
        ];
        let table: Vec<String> = calls
            .iter()
            .map(|call| {
                let allowed: Vec<&str> = Role::ALL
                    .into_iter()
                    .filter(|role| authorize(&principal(*role, &[]), call).is_ok())
                    .map(Role::as_str)
                    .collect();
                format!("{}: {}", call.name(), allowed.join(" "))
            })
            .collect();
        assert_eq!(
            table,
            [
                "Runs.Get: viewer operator engine admin",
                "Runs.Board: viewer operator engine admin",
                "Runs.Tail: viewer operator engine admin",
                "Runs.Events: viewer operator engine admin",
                "Runs.Launch: operator engine admin",
                "Runs.Deliver: operator engine admin",
                "Runs.Answer: operator admin",
                "Engine.Attach: engine admin",
                "Ops.Tree: viewer operator engine admin",
                "Ops.Nodes: viewer operator engine admin",
                "Ops.Seats: viewer operator engine admin",
                "Ops.Drain: admin",
                "Ops.Reload: admin",
                "Ops.Budget: viewer operator engine admin",
                "Fleet: admin node",
            ]
        );
    }

    #[test]
    fn a_seat_scoped_credential_acts_for_its_seats_alone() {
        let scoped = principal(Role::Engine, &["eng"]);
        assert!(authorize(&scoped, &Call::Launch { seat: "eng" }).is_ok());
        let refused = authorize(&scoped, &Call::Launch { seat: "ops" }).expect_err("other seat");
        assert_eq!(
            refused.to_string(),
            "permission denied: ada's credential acts for eng, not seat ops"
        );
        let both = ["eng".to_owned(), "ops".to_owned()];
        assert!(authorize(&scoped, &Call::Attach { seats: &both }).is_err());
        assert!(
            authorize(&scoped, &Call::Board).is_ok(),
            "reads are not about one seat"
        );
    }

    #[test]
    fn a_refusal_says_which_roles_the_call_needs() {
        let refused = authorize(&principal(Role::Viewer, &[]), &Call::Drain).expect_err("viewer");
        assert_eq!(
            refused.to_string(),
            "permission denied: ada is a viewer credential; Ops.Drain needs admin"
        );
    }
}
