//! The seat's tools, as the tool bridge reaches them (the spec's "The tool bridge"; DESIGN
//! §8.2): a box's MCP client lists and calls its seat's tools, and each call goes to the engine
//! that serves the seat — the built-in engine's own small tool set ([`builtin`]), or an
//! attached external engine's, which it declared in its `Hello` and answers with a `ToolResult`
//! for each `ToolCall` sent down. A call is bounded ([`CALL_BOUND`]); an engine that goes away
//! first answers it with an error.
//!
//! Which engine serves a seat is configuration, as for its turns: a seat served by an external
//! engine with none attached has no tools to list, and a call says so.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use boxfleet_config::engine::EngineChoice;
use boxfleet_proto::v1 as pb;
use tokio::sync::oneshot;
use tracing::warn;

use super::Engines;
use super::wire::{Reason, Refusal};

pub mod builtin;

/// How long a bridged call waits for its engine's result.
pub const CALL_BOUND: Duration = Duration::from_secs(300);

/// A bridged call, made by a run's box acting as the run's seat.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub seat: String,
    pub turn_id: String,
    pub launch_id: String,
    pub tool: String,
    /// a JSON object
    pub arguments: serde_json::Value,
}

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}

/// Calls sent to an engine and not answered yet.
#[derive(Debug, Default)]
pub struct Calls {
    pending: Mutex<HashMap<String, Pending>>,
}

#[derive(Debug)]
struct Pending {
    engine: u64,
    answer: oneshot::Sender<pb::ToolResult>,
}

impl Calls {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An engine went away: its calls are answered with an error (their senders dropped).
    pub fn drop_engine(&self, engine: u64) {
        self.pending().retain(|_, call| call.engine != engine);
    }
}

impl Engines {
    /// The tools a box of `seat` lists: the built-in engine's, or the attached external
    /// engine's that serves the seat. `Err` says why there are none to list.
    pub fn tools_for(&self, seat: &str) -> Result<Vec<pb::ToolSpec>, String> {
        if self.engine_for(seat) == EngineChoice::Builtin {
            return Ok(builtin::tools());
        }
        self.attached()
            .iter()
            .find(|engine| engine.serves(seat))
            .map(|engine| engine.tools.clone())
            .ok_or_else(|| no_engine(seat))
    }

    /// Calls a tool of the seat's surface for a run's box: the built-in engine answers here;
    /// an external engine is sent the call and answers within [`CALL_BOUND`].
    pub async fn call_tool(&self, call: ToolCall) -> ToolOutput {
        if self.engine_for(&call.seat) == EngineChoice::Builtin {
            return builtin::call(self, &call).await;
        }
        let call_id = boxfleet_actors::lifecycle::text::new_id("call");
        let (answer, answered) = oneshot::channel();
        let sent = {
            let attached = self.attached();
            let Some(engine) = attached.iter().find(|engine| engine.serves(&call.seat)) else {
                return ToolOutput::error(no_engine(&call.seat));
            };
            if !engine.tools.iter().any(|tool| tool.name == call.tool) {
                return ToolOutput::error(format!(
                    "no tool {:?} on seat {}'s surface: its engine {} serves {}",
                    call.tool,
                    call.seat,
                    engine.name,
                    tool_names(&engine.tools)
                ));
            }
            self.calls.pending().insert(
                call_id.clone(),
                Pending {
                    engine: engine.id,
                    answer,
                },
            );
            let message = pb::EngineDown {
                msg: Some(pb::engine_down::Msg::ToolCall(pb::ToolCall {
                    call_id: call_id.clone(),
                    seat: call.seat.clone(),
                    turn_id: call.turn_id.clone(),
                    launch_id: call.launch_id.clone(),
                    tool: call.tool.clone(),
                    arguments_json: call.arguments.to_string(),
                })),
            };
            engine
                .down
                .try_send(message)
                .map_err(|_| engine.name.clone())
        };
        if let Err(engine) = sent {
            self.calls.pending().remove(&call_id);
            warn!(seat = %call.seat, engine = %engine, tool = %call.tool, "mcp_bridge_engine_backlogged");
            return ToolOutput::error(format!(
                "seat {}'s engine {engine} cannot take a call now (its stream is full or closing); try again",
                call.seat
            ));
        }
        match tokio::time::timeout(CALL_BOUND, answered).await {
            Ok(Ok(result)) => ToolOutput {
                text: result.text,
                is_error: result.is_error,
            },
            Ok(Err(_)) => ToolOutput::error(format!(
                "seat {}'s engine went away before it answered the call",
                call.seat
            )),
            Err(_) => {
                self.calls.pending().remove(&call_id);
                ToolOutput::error(format!(
                    "seat {}'s engine did not answer within {} s",
                    call.seat,
                    CALL_BOUND.as_secs()
                ))
            }
        }
    }

    /// Engine `id` answered a call it was sent.
    pub fn tool_result(&self, id: u64, result: pb::ToolResult) -> Result<(), Refusal> {
        let pending = {
            let mut pending = self.calls.pending();
            match pending.get(&result.call_id) {
                Some(call) if call.engine == id => pending.remove(&result.call_id),
                _ => None,
            }
        };
        let Some(call) = pending else {
            return Err(Refusal::new(
                Reason::UnknownCall,
                format!(
                    "no call {} is out at this engine: it was never sent here, was answered already, or passed its bound",
                    result.call_id
                ),
            ));
        };
        // the box may have given up meanwhile: nothing waits then, and nothing is owed
        let _ = call.answer.send(result);
        Ok(())
    }
}

fn no_engine(seat: &str) -> String {
    format!(
        "seat {seat} is served by an external engine and none is attached to this node for it: its tools come back when its engine attaches"
    )
}

fn tool_names(tools: &[pb::ToolSpec]) -> String {
    if tools.is_empty() {
        return "no tools".into();
    }
    tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
