//! What a request may carry: every id in the one id grammar (`cluster::keys::id_problem`), and
//! every string and byte field under a bound, refused as `INVALID_ARGUMENT` naming the field
//! and the rule — before anything is routed, read or written, so a refused request changes
//! nothing and is never retried as if the node were unavailable.
//!
//! The bounds leave room for what the record and the store must carry after them: a run's
//! record holds the brief, the task and the conversation (base64) under etcd's 1.5 MiB request
//! limit, and a box's environment takes an answer as one variable (under the kernel's 128 KiB
//! per-string limit).

use boxfleet_cluster::keys::id_problem;
use boxfleet_proto::v1 as pb;
use tonic::Status;

/// A brief.
pub const MAX_BRIEF_BYTES: usize = 256 * 1024;
/// A task as the board shows it.
pub const MAX_TASK_BYTES: usize = 16 * 1024;
/// A `command` job's shell command.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// The suspended conversation an engine hands over.
pub const MAX_CONVERSATION_BYTES: usize = 1024 * 1024;
/// A delivered message.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// An answer.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024;
/// A short field: a requester, a work item, a conversation key, a partition, a model, a runner,
/// a name, an instant.
pub const MAX_SHORT_BYTES: usize = 512;
/// A trace context.
pub const MAX_TRACE_BYTES: usize = 2048;

fn refuse(field: &str, rule: String) -> Status {
    Status::invalid_argument(format!("{field}: {rule}"))
}

/// A suspended conversation, under its bound.
fn conversation(field: &str, bytes: &[u8]) -> Result<(), Status> {
    if bytes.len() > MAX_CONVERSATION_BYTES {
        return Err(refuse(
            field,
            format!(
                "{} bytes is over its bound of {MAX_CONVERSATION_BYTES}",
                bytes.len()
            ),
        ));
    }
    Ok(())
}

/// An id field: required, in the id grammar.
pub fn id(field: &str, value: &str) -> Result<(), Status> {
    match id_problem(value) {
        None => Ok(()),
        Some(problem) => Err(refuse(
            field,
            format!(
                "{problem}; an id is 1-128 ASCII letters, digits, '.', '_', '-', ':', '@' or '+', not starting with '.' or '-' and without '..'"
            ),
        )),
    }
}

/// An id field that may be empty.
pub fn optional_id(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Ok(());
    }
    id(field, value)
}

/// A text field under `max` bytes; `line` texts may hold no control characters at all.
fn text(field: &str, value: &str, max: usize, line: bool) -> Result<(), Status> {
    if value.len() > max {
        return Err(refuse(
            field,
            format!("{} bytes is over its bound of {max}", value.len()),
        ));
    }
    let bad = value.chars().find(|c| {
        (c.is_control() && (line || !matches!(c, '\n' | '\t' | '\r'))) || is_bidi_control(*c)
    });
    if let Some(c) = bad {
        return Err(refuse(
            field,
            format!("it holds the control character {c:?}, which no field may carry"),
        ));
    }
    Ok(())
}

/// A bidi override or isolate: it makes a text read in another order than it is stored.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// A short one-line field.
fn short(field: &str, value: &str) -> Result<(), Status> {
    text(field, value, MAX_SHORT_BYTES, true)
}

pub fn launch(r: &pb::LaunchRequest) -> Result<(), Status> {
    id("seat", &r.seat)?;
    optional_id("turn_id", &r.turn_id)?;
    text("brief", &r.brief, MAX_BRIEF_BYTES, false)?;
    text("task", &r.task, MAX_TASK_BYTES, false)?;
    text("command", &r.command, MAX_COMMAND_BYTES, false)?;
    conversation("conversation", &r.conversation)?;
    for (field, value) in [
        ("requester", &r.requester),
        ("work_item", &r.work_item),
        ("conversation_key", &r.conversation_key),
        ("partition", &r.partition),
        ("runner", &r.runner),
        ("model", &r.model),
    ] {
        short(field, value)?;
    }
    text("trace", &r.trace, MAX_TRACE_BYTES, true)
}

pub fn deliver(r: &pb::DeliverRequest) -> Result<(), Status> {
    id("seat", &r.seat)?;
    optional_id("delivery_id", &r.delivery_id)?;
    text("text", &r.text, MAX_MESSAGE_BYTES, false)?;
    for (field, value) in [
        ("conversation_key", &r.conversation_key),
        ("partition", &r.partition),
        ("from", &r.from),
        ("posted_at", &r.posted_at),
    ] {
        short(field, value)?;
    }
    Ok(())
}

pub fn answer(r: &pb::AnswerRequest) -> Result<(), Status> {
    id("turn_id", &r.turn_id)?;
    optional_id("launch_id", &r.launch_id)?;
    text("text", &r.text, MAX_ANSWER_BYTES, false)?;
    short("as_whom", &r.as_whom)
}

pub fn turn(field: &str, turn_id: &str) -> Result<(), Status> {
    id(field, turn_id)
}

pub fn tail(r: &pb::TailRequest) -> Result<(), Status> {
    id("turn_id", &r.turn_id)?;
    optional_id("launch_id", &r.launch_id)?;
    short("digest", &r.digest)
}

/// Variables an engine's relaunch may export.
pub const MAX_RELAUNCH_ENV_VARS: usize = 64;
/// One exported variable's value.
pub const MAX_ENV_VALUE_BYTES: usize = 32 * 1024;

/// A Settle from an engine: its ids, the reply, and a relaunch's brief, command, conversation
/// and variables (a name in the `BOXFLEET_` namespace is the node's to set).
pub fn settle(r: &pb::Settle) -> Result<(), Status> {
    id("turn_id", &r.turn_id)?;
    id("launch_id", &r.launch_id)?;
    match &r.outcome {
        Some(pb::settle::Outcome::Finished(f)) => text("reply", &f.reply, MAX_BRIEF_BYTES, false),
        Some(pb::settle::Outcome::Relaunched(relaunched)) => relaunch(relaunched),
        Some(pb::settle::Outcome::BrokeAfterExternalWrite(b)) => {
            text("error", &b.error, MAX_MESSAGE_BYTES, false)
        }
        Some(pb::settle::Outcome::Retry(b)) => text("error", &b.error, MAX_MESSAGE_BYTES, false),
        Some(pb::settle::Outcome::ResumeBroken(b)) => {
            text("error", &b.error, MAX_MESSAGE_BYTES, false)
        }
        None => Ok(()),
    }
}

/// The most tools an engine may declare in its `Hello`.
pub const MAX_TOOLS: usize = 256;

/// An engine's declared tools: each named as MCP tools are (1-64 ASCII letters, digits, `_`
/// and `-`), once; a description under its bound; a schema that is a JSON object, or empty.
pub fn tools(tools: &[pb::ToolSpec]) -> Result<(), Status> {
    if tools.len() > MAX_TOOLS {
        return Err(refuse(
            "hello.tools",
            format!("{} tools is over its bound of {MAX_TOOLS}", tools.len()),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for tool in tools {
        let name = tool.name.as_str();
        let well_formed = (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !well_formed {
            return Err(refuse(
                "hello.tools.name",
                format!("{name:?} is not a tool name: 1-64 letters, digits, '_' or '-'"),
            ));
        }
        if !seen.insert(name) {
            return Err(refuse(
                "hello.tools.name",
                format!("{name:?} is declared twice: a seat's surface names a tool once"),
            ));
        }
        text(
            "hello.tools.description",
            &tool.description,
            MAX_MESSAGE_BYTES,
            false,
        )?;
        let schema = tool.input_schema_json.trim();
        if !schema.is_empty()
            && !serde_json::from_str::<serde_json::Value>(schema).is_ok_and(|v| v.is_object())
        {
            return Err(refuse(
                "hello.tools.input_schema_json",
                format!(
                    "tool {name}'s schema is not a JSON object (a JSON Schema for its arguments)"
                ),
            ));
        }
    }
    Ok(())
}

fn relaunch(r: &pb::Relaunched) -> Result<(), Status> {
    text("relaunched.brief", &r.brief, MAX_BRIEF_BYTES, false)?;
    text("relaunched.command", &r.command, MAX_COMMAND_BYTES, false)?;
    conversation("relaunched.conversation", &r.conversation)?;
    if r.env.len() > MAX_RELAUNCH_ENV_VARS {
        return Err(refuse(
            "relaunched.env",
            format!(
                "{} variables is over its bound of {MAX_RELAUNCH_ENV_VARS}",
                r.env.len()
            ),
        ));
    }
    for (name, value) in &r.env {
        let well_formed = !name.is_empty()
            && name.len() <= 128
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed {
            return Err(refuse(
                "relaunched.env",
                format!(
                    "{name:?} is not a variable name: use letters, digits and '_', not starting with a digit"
                ),
            ));
        }
        if name.starts_with("BOXFLEET_") {
            return Err(refuse(
                "relaunched.env",
                format!(
                    "{name} is the node's to set (the BOXFLEET_ namespace): the answer, question and branch are exported by the node itself"
                ),
            ));
        }
        text("relaunched.env", value, MAX_ENV_VALUE_BYTES, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_refused_naming_the_field_and_its_rule() {
        let launch = |seat: &str, brief: String| pb::LaunchRequest {
            seat: seat.into(),
            brief,
            ..pb::LaunchRequest::default()
        };
        assert!(super::launch(&launch("eng", "fix it\nplease".into())).is_ok());
        let refused = super::launch(&launch("../etc", String::new())).expect_err("dots");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(
            refused.message().starts_with("seat: "),
            "{}",
            refused.message()
        );
        let spoof = super::launch(&launch("eng\u{202e}", String::new())).expect_err("bidi");
        assert!(spoof.message().starts_with("seat: "));
        let big = super::launch(&launch("eng", "x".repeat(MAX_BRIEF_BYTES + 1))).expect_err("big");
        assert!(
            big.message().contains("over its bound"),
            "{}",
            big.message()
        );
        let hidden = super::launch(&launch("eng", "ok\u{202e}drowssap".into())).expect_err("bidi");
        assert!(hidden.message().starts_with("brief: "));
        let answer = pb::AnswerRequest {
            turn_id: "turn-1".into(),
            text: "y".repeat(200 * 1024),
            ..pb::AnswerRequest::default()
        };
        assert!(super::answer(&answer).is_err(), "a 200 KB answer");
        let nul = pb::DeliverRequest {
            seat: "eng".into(),
            text: "a\0b".into(),
            ..pb::DeliverRequest::default()
        };
        assert!(super::deliver(&nul).is_err());
    }

    #[test]
    fn an_engines_tools_are_named_once_with_an_object_schema() {
        let tool = |name: &str, schema: &str| pb::ToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema_json: schema.into(),
        };
        assert!(
            super::tools(&[tool("lookup_ticket", r#"{"type":"object"}"#), tool("b", "")]).is_ok()
        );
        for (bad, field) in [
            (vec![tool("look up", "")], "hello.tools.name"),
            (vec![tool("a", ""), tool("a", "")], "hello.tools.name"),
            (vec![tool("a", "[1]")], "hello.tools.input_schema_json"),
        ] {
            let refused = super::tools(&bad).expect_err("refused");
            assert!(
                refused.message().starts_with(field),
                "{}",
                refused.message()
            );
        }
    }
}
