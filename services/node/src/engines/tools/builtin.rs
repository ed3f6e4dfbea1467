//! The built-in engine's tools, served through the tool bridge to the boxes of the seats it
//! serves (`docs/engine.md`, "The tool bridge"). A small set of its own, each acting as the
//! run's seat:
//!
//! | tool | arguments | what it does |
//! |---|---|---|
//! | `boxfleet_run_task` | none | the run's task: its brief, task, work item, requester, iteration and job |
//! | `boxfleet_post_note` | `text` | posts a note on the run for the people watching it: announced as a `sandbox_run_note` event (redacted, at most 4 KiB) |
//! | `boxfleet_seat` | none | who the seat is on the org chart: handle, role, unit, manager, email |
//!
//! Asking a person is `boxfleet-ask` in the box, which parks the run: a tool call cannot wait
//! days for its answer.

use boxfleet_cluster::events::Event;
use boxfleet_proto::v1 as pb;
use serde_json::json;

use super::{ToolCall, ToolOutput};
use crate::engines::Engines;

/// The most of a note's text an event carries.
pub const MAX_NOTE_BYTES: usize = 4 * 1024;

/// The event a posted note is announced as.
pub const NOTE_EVENT: &str = "sandbox_run_note";

/// The built-in engine's tools, as a box's MCP client lists them.
pub fn tools() -> Vec<pb::ToolSpec> {
    let none = json!({"type": "object", "properties": {}, "additionalProperties": false});
    vec![
        pb::ToolSpec {
            name: "boxfleet_run_task".into(),
            description: "The task of the run this box works on: its brief, task, work item, who asked, the executor iteration and the job's launch id.".into(),
            input_schema_json: none.to_string(),
        },
        pb::ToolSpec {
            name: "boxfleet_post_note".into(),
            description: "Post a short note on this run for the people watching it (the run's events and board). Notes are redacted and kept to 4 KiB; they are not questions: to ask a person, run boxfleet-ask.".into(),
            input_schema_json: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "the note"}},
                "required": ["text"],
                "additionalProperties": false
            })
            .to_string(),
        },
        pb::ToolSpec {
            name: "boxfleet_seat".into(),
            description: "Who this seat is on the org chart: its handle, role, unit, manager and email.".into(),
            input_schema_json: none.to_string(),
        },
    ]
}

/// Answers a call to one of [`tools`].
pub async fn call(engines: &Engines, call: &ToolCall) -> ToolOutput {
    match call.tool.as_str() {
        "boxfleet_run_task" => run_task(engines, call).await,
        "boxfleet_post_note" => post_note(engines, call).await,
        "boxfleet_seat" => seat(engines, call),
        other => ToolOutput::error(format!(
            "no tool {other:?}: the built-in engine serves boxfleet_run_task, boxfleet_post_note and boxfleet_seat"
        )),
    }
}

async fn run_task(engines: &Engines, call: &ToolCall) -> ToolOutput {
    let run = match engines.coordinator().runs.read(&call.turn_id).await {
        Ok(Some(run)) => run.record,
        Ok(None) => return ToolOutput::error(format!("run {} is gone", call.turn_id)),
        Err(error) => {
            return ToolOutput::error(format!(
                "the run could not be read now ({error}): try again"
            ));
        }
    };
    let task = json!({
        "turn_id": run.turn_id,
        "launch_id": run.launch_id,
        "seat": run.seat,
        "iteration": run.iteration,
        "task": run.task,
        "brief": run.brief,
        "work_item": run.work_item,
        "requester": run.requester,
    });
    ToolOutput::ok(serde_json::to_string_pretty(&task).unwrap_or_default())
}

async fn post_note(engines: &Engines, call: &ToolCall) -> ToolOutput {
    let Some(text) = call.arguments.get("text").and_then(|t| t.as_str()) else {
        return ToolOutput::error("boxfleet_post_note needs `text`, a string");
    };
    if text.trim().is_empty() {
        return ToolOutput::error("the note is empty: say something in `text`");
    }
    let redacted = boxfleet_redact::redact(text);
    let kept = boxfleet_actors::lifecycle::text::cut(&redacted, MAX_NOTE_BYTES);
    let now = boxfleet_cluster::clock::now();
    let note_id = boxfleet_actors::lifecycle::text::new_id("note");
    let event = Event::new(
        NOTE_EVENT,
        &[&call.turn_id, &call.launch_id, &note_id],
        &call.turn_id,
        &call.launch_id,
        &call.seat,
        now,
        json!({ "text": kept, "truncated": kept.len() < redacted.len() }),
    );
    match engines.coordinator().runs.announce(&event).await {
        Ok(_) => ToolOutput::ok(format!(
            "posted on run {} (event {})",
            call.turn_id, event.id
        )),
        Err(error) => ToolOutput::error(format!("the note was not posted ({error}): try again")),
    }
}

fn seat(engines: &Engines, call: &ToolCall) -> ToolOutput {
    let company = engines.coordinator().company();
    let Some(seat) = company.seat(&call.seat) else {
        return ToolOutput::ok(
            json!({"handle": call.seat, "on_chart": false, "note": "the node runs without an org chart: the seat is implicit"})
                .to_string(),
        );
    };
    ToolOutput::ok(
        json!({
            "handle": seat.handle,
            "on_chart": true,
            "role": seat.role,
            "unit": seat.unit,
            "manager": seat.manager,
            "email": seat.email,
        })
        .to_string(),
    )
}
