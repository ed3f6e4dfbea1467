//! The roles a credential carries (DESIGN §13), from least to most: what each may do is the
//! table in [`crate::policy`].

use serde::{Deserialize, Serialize};

/// A credential's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// reads: the board, a run, its tail, the events, the tree, nodes and seats
    Viewer,
    /// a person at work: a viewer who also launches, delivers and answers (as the spec's
    /// answer authority allows)
    Operator,
    /// an agent engine: attaches for its seats, launches and delivers for them, reads
    Engine,
    /// everything: drains, answers any question, on anyone's behalf
    Admin,
    /// another node of the fleet: the Fleet service, and the Ops calls one node asks of another
    Node,
}

impl Role {
    /// Every role, in order.
    pub const ALL: [Role; 5] = [
        Role::Viewer,
        Role::Operator,
        Role::Engine,
        Role::Admin,
        Role::Node,
    ];

    /// The role's word.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Engine => "engine",
            Role::Admin => "admin",
            Role::Node => "node",
        }
    }

    /// The role a word names; `None` for anything else.
    pub fn parse(word: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == word)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
