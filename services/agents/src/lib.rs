//! boxfleet's coding-agent runners (DESIGN §10): `command`, `claude-code` and `opencode`,
//! with the pieces every runner shares: the box layout under `{home}/.boxfleet/`, the
//! `boxfleet-ask` shim, the brief's preamble, the transcript's one shape, the event-stream
//! parsers, and the `Delivered:` parser.

pub mod ask;
pub mod claude;
pub mod claude_stream;
pub mod command;
pub mod common;
pub mod layout;
pub mod opencode;
pub mod opencode_stream;
pub mod refs;
pub mod transcript;

pub use claude::ClaudeCodeRunner;
pub use claude_stream::{ClaudeResult, ClaudeStream, Usage};
pub use command::CommandRunner;
pub use opencode::{OpenCodeOptions, OpenCodeRunner};
