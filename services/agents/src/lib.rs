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

/// What the runners' tests share: the MCP servers a launch gives an agent, one of each
/// transport (a stdio server from npm, the tool bridge over HTTP).
#[cfg(test)]
pub(crate) mod test_mcp {
    use boxfleet_actors::ports::{McpTransport, RenderedMcp};

    pub(crate) fn servers() -> [RenderedMcp; 2] {
        [
            RenderedMcp {
                name: "everything".into(),
                transport: McpTransport::Stdio {
                    command: "npx".into(),
                    args: vec![
                        "-y".into(),
                        "@modelcontextprotocol/server-everything".into(),
                    ],
                    env: [("TOKEN".to_owned(), "t0k".to_owned())].into(),
                },
            },
            RenderedMcp {
                name: "boxfleet".into(),
                transport: McpTransport::Http {
                    url: "http://127.0.0.1:7480/mcp/bfr1.k1.p.m".into(),
                    headers: [("X-Seat".to_owned(), "eng".to_owned())].into(),
                },
            },
        ]
    }
}
