//! Claude Code's `--output-format stream-json --verbose` stream: one JSON object a line —
//! `system/init` (the session's `model`, `session_id`, `tools`), `assistant` messages (the
//! API's `message.model`, `content` blocks of `text`, `thinking` and `tool_use`),
//! `user` messages carrying `tool_result` blocks (`tool_use_id`, `is_error`, `content`), and
//! last the `result` (`subtype`, `is_error`, `result`, `errors`, `session_id`, `num_turns`,
//! `total_cost_usd`, `usage`, `modelUsage`). Unknown types and lines that are not JSON are
//! skipped, never fatal.

use std::collections::HashMap;

use serde_json::Value;

use crate::transcript::{self, count, usd_micros};

/// Where the effective model was read from an assistant message (what the API served).
pub const SOURCE_ASSISTANT: &str = "stream:assistant";
/// Where the effective model was read from the session's `system/init` line.
pub const SOURCE_INIT: &str = "stream:init";

/// Parses one stream line: a JSON object, else `None`.
pub fn parse_line(line: &str) -> Option<Value> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str::<Value>(line)
        .ok()
        .filter(Value::is_object)
}

fn text_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A stream decoded a line at a time: the transcript, the models it named, its last line.
#[derive(Debug, Default, Clone)]
pub struct ClaudeStream {
    transcript: Vec<String>,
    /// a tool call's id → its transcript line
    calls: HashMap<String, usize>,
    init_model: Option<String>,
    assistant_model: Option<String>,
    session_id: Option<String>,
    last: Option<Value>,
    /// the last line of what the agent said, or of a tool it called
    last_said: Option<String>,
    events: usize,
}

impl ClaudeStream {
    pub fn new() -> Self {
        ClaudeStream::default()
    }

    /// Decodes one line. A line that is not a JSON object is skipped.
    pub fn push_line(&mut self, line: &str) {
        let Some(value) = parse_line(line) else {
            return;
        };
        self.events += 1;
        match value.get("type").and_then(Value::as_str) {
            Some("system") if value.get("subtype").and_then(Value::as_str) == Some("init") => {
                if let Some(model) = text_of(&value, "model").filter(|m| usable_model(m)) {
                    self.init_model = Some(model);
                }
                if let Some(id) = text_of(&value, "session_id") {
                    self.session_id = Some(id);
                }
            }
            Some("assistant") => self.assistant(&value),
            Some("user") => self.user(&value),
            Some("result") => {
                if let Some(id) = text_of(&value, "session_id") {
                    self.session_id = Some(id);
                }
            }
            _ => {}
        }
        self.last = Some(value);
    }

    fn assistant(&mut self, value: &Value) {
        let Some(message) = value.get("message") else {
            return;
        };
        // a subagent's messages (a Task's) may run on another model: the session's own are
        // the ones without a parent tool call
        let top_level = value.get("parent_tool_use_id").is_none_or(Value::is_null);
        if top_level && let Some(model) = text_of(message, "model").filter(|m| usable_model(m)) {
            self.assistant_model = Some(model);
        }
        let Some(blocks) = message.get("content").and_then(Value::as_array) else {
            return;
        };
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {}
                // what the session's agent said (a subagent's words are its answer to a Task
                // call: that call's output, never the transcript)
                Some("text") if top_level => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                    let said = transcript::said_lines(text);
                    if let Some(last) = said.last() {
                        self.last_said = Some(last.clone());
                    }
                    self.transcript.extend(said);
                    continue;
                }
                // thinking, redacted thinking, a block type a CLI release adds: never
                _ => continue,
            }
            let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
            let input = block.get("input").cloned().unwrap_or(Value::Null);
            let line = transcript::tool_line(name, &transcript::subject(name, &input));
            if let Some(id) = block.get("id").and_then(Value::as_str) {
                self.calls.insert(id.to_owned(), self.transcript.len());
            }
            self.last_said = Some(line.clone());
            self.transcript.push(line);
        }
    }

    fn user(&mut self, value: &Value) {
        let Some(blocks) = value
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
        else {
            return;
        };
        for block in blocks {
            if block.get("type").and_then(Value::as_str) != Some("tool_result")
                || block.get("is_error").and_then(Value::as_bool) != Some(true)
            {
                continue; // a successful result's body is never read
            }
            let error = block
                .get("content")
                .map(transcript::content_text)
                .unwrap_or_default();
            let id = block.get("tool_use_id").and_then(Value::as_str);
            match id.and_then(|id| self.calls.get(id)).copied() {
                Some(at) => {
                    if let Some(line) = self.transcript.get_mut(at)
                        && !line.contains(" (failed")
                    {
                        transcript::mark_failed(line, &error);
                    }
                }
                None => {
                    // its call was not in what was read (a reading that began mid-stream)
                    let mut line = "[tool] (an earlier call)".to_owned();
                    transcript::mark_failed(&mut line, &error);
                    self.transcript.push(line);
                }
            }
        }
    }

    /// The transcript so far: one line per tool call.
    pub fn transcript(&self) -> &[String] {
        &self.transcript
    }

    /// The transcript, taken.
    pub fn into_transcript(self) -> Vec<String> {
        self.transcript
    }

    /// The model the stream names, and where: the assistant messages' (what the API served),
    /// else `system/init`'s.
    pub fn effective_model(&self) -> Option<(String, &'static str)> {
        if let Some(model) = &self.assistant_model {
            return Some((model.clone(), SOURCE_ASSISTANT));
        }
        self.init_model
            .as_ref()
            .map(|model| (model.clone(), SOURCE_INIT))
    }

    /// The session id the stream named.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The last JSON line decoded.
    pub fn last(&self) -> Option<&Value> {
        self.last.as_ref()
    }

    /// What the agent was doing when the stream stopped: the last line it said, or of the last
    /// tool it called.
    pub fn last_said(&self) -> Option<&str> {
        self.last_said.as_deref()
    }

    /// How many JSON lines were decoded.
    pub fn events(&self) -> usize {
        self.events
    }
}

/// `<synthetic>` marks a message the CLI made itself (an API error, an interruption).
fn usable_model(model: &str) -> bool {
    !model.trim().is_empty() && model != "<synthetic>"
}

/// A run's usage, as the result line reports it, each figure floored at zero.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// the whole prompt: the uncached remainder and both cache shares
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_micros: u64,
    /// a figure was negative and read as 0 (`sandbox_usage_negative`)
    pub negative: bool,
}

impl Usage {
    /// Reads Anthropic-shaped `usage` and a USD cost.
    pub fn read(usage: Option<&Value>, cost_usd: Option<&Value>) -> Usage {
        let mut negative = false;
        let field = |name: &str| usage.and_then(|u| u.get(name));
        let uncached = count(field("input_tokens"), &mut negative);
        let cache_read = count(field("cache_read_input_tokens"), &mut negative);
        let cache_write = count(field("cache_creation_input_tokens"), &mut negative);
        let output = count(field("output_tokens"), &mut negative);
        let cost_micros = usd_micros(cost_usd, &mut negative);
        Usage {
            input_tokens: uncached
                .saturating_add(cache_read)
                .saturating_add(cache_write),
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
            cost_micros,
            negative,
        }
    }
}

/// The stream's `result` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeResult {
    /// `success`, `error_max_turns`, `error_during_execution`, …
    pub subtype: String,
    pub is_error: bool,
    /// the final text
    pub text: Option<String>,
    /// an error result's `errors`
    pub errors: Vec<String>,
    pub session_id: Option<String>,
    pub num_turns: Option<u64>,
    pub usage: Usage,
    /// whether the line carries a price (`total_cost_usd`); without one the record has none
    pub cost_reported: bool,
}

impl ClaudeResult {
    /// Reads a `result` line; `None` for any other line.
    pub fn from_value(value: &Value) -> Option<ClaudeResult> {
        if value.get("type").and_then(Value::as_str) != Some("result") {
            return None;
        }
        let errors = match value.get("errors") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(Value::String(text)) => vec![text.clone()],
            _ => Vec::new(),
        };
        Some(ClaudeResult {
            subtype: text_of(value, "subtype").unwrap_or_default(),
            is_error: value.get("is_error").and_then(Value::as_bool) == Some(true),
            text: text_of(value, "result"),
            errors,
            session_id: text_of(value, "session_id"),
            num_turns: value.get("num_turns").and_then(Value::as_u64),
            usage: Usage::read(value.get("usage"), value.get("total_cost_usd")),
            cost_reported: value.get("total_cost_usd").is_some_and(Value::is_number),
        })
    }

    /// Reads a `result` line from its text.
    pub fn from_line(line: &str) -> Option<ClaudeResult> {
        parse_line(line).as_ref().and_then(ClaudeResult::from_value)
    }

    /// Whether the result says the run failed: `is_error`, or a subtype other than `success`.
    pub fn failed(&self) -> bool {
        self.is_error || self.subtype != "success"
    }

    /// How a failed run ended: its subtype and the first line of its first error (or of its
    /// text), redacted.
    pub fn failure(&self) -> String {
        let subtype = if self.subtype.is_empty() {
            "error"
        } else {
            self.subtype.as_str()
        };
        let detail = self
            .errors
            .first()
            .or(self.text.as_ref())
            .map(|text| transcript::first_line(text))
            .unwrap_or_default();
        if detail.is_empty() {
            subtype.to_owned()
        } else {
            format!("{subtype}: {detail}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","tools":["Bash","Read"],"model":"claude-sonnet-4-5"}
not json at all
{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5-20250929","role":"assistant","content":[{"type":"thinking","thinking":"SECRET-THOUGHT"},{"type":"text","text":"I will look."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test\n--all","description":"run"}}],"usage":{"input_tokens":3}},"parent_tool_use_id":null,"session_id":"s-1"}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"error: 2 tests failed\nTOOL-OUTPUT"}]}}
{"type":"assistant","message":{"model":"claude-haiku-4-5","content":[{"type":"text","text":"SUBAGENT-SAID"},{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/w/src/lib.rs"}}]},"parent_tool_use_id":"t9"}
{"type":"assistant","message":{"content":[{"type":"redacted_thinking","data":"SECRET-THOUGHT"},{"type":"server_tool_use_v9","text":"NEW-BLOCK"}]},"parent_tool_use_id":null}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"FILE-BODY"}]}]}}
{"type":"stream_event","event":{}}
{"type":"result","subtype":"success","is_error":false,"result":"Done.","session_id":"s-1","num_turns":3,"total_cost_usd":0.0421,"usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":3000,"output_tokens":50}}"#;

    #[test]
    fn decodes_a_stream() {
        let mut stream = ClaudeStream::new();
        for line in STREAM.lines() {
            stream.push_line(line);
        }
        assert_eq!(
            stream.transcript(),
            [
                "I will look.",
                "[tool] Bash: cargo test (failed: error: 2 tests failed)",
                "[tool] Read: /w/src/lib.rs",
            ]
        );
        // never a tool's output, the model's thinking, a subagent's words or an unknown block
        let all = stream.transcript().join("\n");
        for never in [
            "SECRET-THOUGHT",
            "TOOL-OUTPUT",
            "FILE-BODY",
            "SUBAGENT-SAID",
            "NEW-BLOCK",
        ] {
            assert!(!all.contains(never), "{never} in {all}");
        }
        assert_eq!(stream.last_said(), Some("[tool] Read: /w/src/lib.rs"));
        assert_eq!(
            stream.effective_model(),
            Some(("claude-sonnet-4-5-20250929".to_owned(), SOURCE_ASSISTANT))
        );
        assert_eq!(stream.session_id(), Some("s-1"));
        assert_eq!(stream.events(), 8);
        let result = stream
            .last()
            .and_then(ClaudeResult::from_value)
            .expect("a result");
        assert_eq!(
            result.usage,
            Usage {
                input_tokens: 3210,
                output_tokens: 50,
                cache_read_tokens: 3000,
                cache_write_tokens: 200,
                cost_micros: 42_100,
                negative: false,
            }
        );
        assert!(!result.failed());
        assert_eq!(result.text.as_deref(), Some("Done."));
        assert_eq!(result.num_turns, Some(3));
    }

    #[test]
    fn init_model_when_no_assistant_named_one() {
        let mut stream = ClaudeStream::new();
        stream.push_line(r#"{"type":"system","subtype":"init","model":"claude-opus-4-1"}"#);
        stream.push_line(r#"{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error"}]}}"#);
        assert_eq!(
            stream.effective_model(),
            Some(("claude-opus-4-1".to_owned(), SOURCE_INIT))
        );
        assert_eq!(stream.transcript(), ["API Error"]);
        assert_eq!(ClaudeStream::new().effective_model(), None);
    }

    #[test]
    fn error_results_and_negative_usage() {
        let result = ClaudeResult::from_line(r#"{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["Reached maximum number of turns (5)"],"total_cost_usd":-0.5,"usage":{"input_tokens":-7,"output_tokens":9,"cache_read_input_tokens":1,"cache_creation_input_tokens":2}}"#).expect("a result");
        assert!(result.failed());
        assert_eq!(
            result.failure(),
            "error_max_turns: Reached maximum number of turns (5)"
        );
        assert_eq!(
            result.usage,
            Usage {
                input_tokens: 3,
                output_tokens: 9,
                cache_read_tokens: 1,
                cache_write_tokens: 2,
                cost_micros: 0,
                negative: true,
            }
        );
        assert!(ClaudeResult::from_line(r#"{"type":"assistant"}"#).is_none());
        assert!(ClaudeResult::from_line("garbage").is_none());
        let odd =
            ClaudeResult::from_line(r#"{"type":"result","subtype":"success","is_error":true}"#)
                .expect("a result");
        assert!(odd.failed());
        assert_eq!(odd.failure(), "success");
    }
}
