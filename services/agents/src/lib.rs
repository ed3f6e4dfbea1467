//! boxfleet's coding-agent runners (DESIGN §10): `command` (and, later, `claude-code` and
//! `opencode`), with the pieces every runner shares: the box layout under
//! `{home}/.boxfleet/`, the `boxfleet-ask` shim, and the `Delivered:` parser.

pub mod ask;
pub mod command;
pub mod layout;
pub mod refs;

pub use command::CommandRunner;
