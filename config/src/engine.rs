//! Which engine serves a seat's turns and resumes: the node's built-in one, or an external
//! engine attached over `Engine.Attach` with a credential for the seat (DESIGN §8.3, §13).
//! It is configuration — a seat's `engine:`, else its role's, else the node's
//! `default_engine` — never whoever attached last.

use serde::Deserialize;

/// The engine a seat is served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    /// the node's built-in engine: a delivery becomes a `command` launch (the default)
    #[default]
    Builtin,
    /// an engine attached over `Engine.Attach`; with none attached, the seat's work waits
    External,
}

impl EngineChoice {
    /// The choice's word.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineChoice::Builtin => "builtin",
            EngineChoice::External => "external",
        }
    }

    /// The choice a word names.
    pub fn parse(word: &str) -> Option<EngineChoice> {
        match word {
            "builtin" => Some(EngineChoice::Builtin),
            "external" => Some(EngineChoice::External),
            _ => None,
        }
    }
}
