//! OpenCode's `run --format json` events, one JSON object a line (`{"type", "timestamp",
//! "sessionID", "part"}`): `tool_use` (`part.tool`, `part.callID`, `part.state.status`
//! `completed`/`error`, `state.input`, `state.error`), `text`, `step_start`, `step_finish`
//! (`part.tokens {input, output, reasoning, cache {read, write}}`, `part.cost`) and `error`;
//! and last the line the runner's script appends, `{"type":"session_report","session":…}`,
//! the session's own report (`opencode api session.get`), which the tokens are read from.
//! Unknown types and lines that are not JSON are skipped, never fatal.

use std::collections::HashMap;

use serde_json::Value;

use crate::claude_stream::{Usage, parse_line};
use crate::transcript::{self, count, usd_micros};

/// Where the effective model was read from the session's report.
pub const SOURCE_SESSION: &str = "opencode:session";
/// Where it was read from the events when the session's report named none.
pub const SOURCE_EVENTS: &str = "opencode:events";
/// The type of the line the script appends with the session's report.
pub const SESSION_REPORT: &str = "session_report";

/// An OpenCode event stream decoded a line at a time.
#[derive(Debug, Default, Clone)]
pub struct OpenCodeStream {
    transcript: Vec<String>,
    calls: HashMap<String, usize>,
    failed_calls: Vec<String>,
    event_model: Option<String>,
    report: Option<Value>,
    steps: Usage,
    final_text: Option<String>,
    errors: Vec<String>,
    /// the last line of what the agent said, or of a tool it called
    last_said: Option<String>,
    events: usize,
}

fn model_of(value: &Value) -> Option<String> {
    match value.get("model") {
        Some(Value::String(model)) if !model.is_empty() => return Some(model.clone()),
        Some(Value::Object(fields)) => {
            let id = fields
                .get("modelID")
                .or_else(|| fields.get("id"))
                .and_then(Value::as_str);
            let provider = fields
                .get("providerID")
                .or_else(|| fields.get("provider"))
                .and_then(Value::as_str);
            if let Some(id) = id.filter(|id| !id.is_empty()) {
                return Some(match provider.filter(|p| !p.is_empty()) {
                    Some(provider) => format!("{provider}/{id}"),
                    None => id.to_owned(),
                });
            }
        }
        _ => {}
    }
    let id = value.get("modelID").and_then(Value::as_str)?;
    if id.is_empty() {
        return None;
    }
    Some(match value.get("providerID").and_then(Value::as_str) {
        Some(provider) if !provider.is_empty() => format!("{provider}/{id}"),
        _ => id.to_owned(),
    })
}

impl OpenCodeStream {
    pub fn new() -> Self {
        OpenCodeStream::default()
    }

    /// Decodes one line. A line that is not a JSON object is skipped.
    pub fn push_line(&mut self, line: &str) {
        let Some(value) = parse_line(line) else {
            return;
        };
        self.events += 1;
        let part = value.get("part").cloned().unwrap_or(Value::Null);
        match value.get("type").and_then(Value::as_str) {
            Some("tool_use") => self.tool(&part),
            Some("step_finish") => {
                let step = usage_of(part.get("tokens"), part.get("cost"));
                let steps = &mut self.steps;
                steps.input_tokens = steps.input_tokens.saturating_add(step.input_tokens);
                steps.output_tokens = steps.output_tokens.saturating_add(step.output_tokens);
                steps.cache_read_tokens = steps
                    .cache_read_tokens
                    .saturating_add(step.cache_read_tokens);
                steps.cache_write_tokens = steps
                    .cache_write_tokens
                    .saturating_add(step.cache_write_tokens);
                steps.cost_micros = steps.cost_micros.saturating_add(step.cost_micros);
                steps.negative |= step.negative;
            }
            Some("text") => {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    let said = transcript::said_lines(text);
                    if let Some(last) = said.last() {
                        self.last_said = Some(last.clone());
                    }
                    self.transcript.extend(said);
                    self.final_text = Some(text.to_owned());
                }
            }
            Some("error") => {
                let error = value.get("error").or_else(|| part.get("error"));
                let message = error
                    .and_then(|e| {
                        e.get("data")
                            .and_then(|d| d.get("message"))
                            .or_else(|| e.get("message"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| e.as_str().map(str::to_owned))
                            .or_else(|| e.get("name").and_then(Value::as_str).map(str::to_owned))
                    })
                    .or_else(|| {
                        value
                            .get("message")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| "error".to_owned());
                self.errors.push(transcript::first_line(&message));
            }
            Some(SESSION_REPORT) => {
                if let Some(session) = value.get("session").filter(|s| s.is_object()) {
                    self.report = Some(session.clone());
                }
            }
            _ => {}
        }
        if let Some(model) = model_of(&part).or_else(|| model_of(&value))
            && value.get("type").and_then(Value::as_str) != Some(SESSION_REPORT)
        {
            self.event_model = Some(model);
        }
    }

    fn tool(&mut self, part: &Value) {
        let state = part.get("state").cloned().unwrap_or(Value::Null);
        let name = part.get("tool").and_then(Value::as_str).unwrap_or("tool");
        let id = part
            .get("callID")
            .or_else(|| part.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let at = match id.as_ref().and_then(|id| self.calls.get(id)).copied() {
            Some(at) => at,
            None => {
                let input = state.get("input").cloned().unwrap_or(Value::Null);
                let line = transcript::tool_line(name, &transcript::subject(name, &input));
                if let Some(id) = &id {
                    self.calls.insert(id.clone(), self.transcript.len());
                }
                self.last_said = Some(line.clone());
                self.transcript.push(line);
                self.transcript.len() - 1
            }
        };
        if state.get("status").and_then(Value::as_str) == Some("error") {
            let key = id.unwrap_or_else(|| at.to_string());
            if !self.failed_calls.contains(&key) {
                self.failed_calls.push(key);
                let error = match state.get("error") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| other.to_string(), str::to_owned),
                    None => String::new(),
                };
                if let Some(line) = self.transcript.get_mut(at) {
                    transcript::mark_failed(line, &error);
                }
            }
        }
    }

    /// One line per tool call, then how a run whose events reported an error ended.
    pub fn transcript(&self) -> Vec<String> {
        let mut lines = self.transcript.clone();
        for error in &self.errors {
            lines.push(format!("[ended] error: {error}"));
        }
        lines
    }

    /// The session's report, when the stream ends on one.
    pub fn report(&self) -> Option<&Value> {
        self.report.as_ref()
    }

    /// The session's totals: the whole prompt (both cache shares in it), the output with the
    /// reasoning added back, and OpenCode's price (0 where it has none). No report: `None`.
    pub fn usage(&self) -> Option<Usage> {
        let report = self.report.as_ref()?;
        let tokens = report.get("tokens").or_else(|| report.get("usage"));
        Some(usage_of(tokens, report.get("cost")))
    }

    /// The step events' own tally (not charged: the final step's counts are missing from
    /// them; a diagnostic beside the session's report).
    pub fn step_usage(&self) -> Usage {
        self.steps
    }

    /// The model that ran: the session report's, else the last the events named.
    pub fn effective_model(&self) -> Option<(String, &'static str)> {
        if let Some(model) = self.report.as_ref().and_then(model_of) {
            return Some((model, SOURCE_SESSION));
        }
        self.event_model
            .as_ref()
            .map(|model| (model.clone(), SOURCE_EVENTS))
    }

    /// The last text the model said (the report when none was written).
    pub fn final_text(&self) -> Option<&str> {
        self.final_text.as_deref()
    }

    /// What the agent was doing when the stream stopped: the last line it said, or of the last
    /// tool it called.
    pub fn last_said(&self) -> Option<&str> {
        self.last_said.as_deref()
    }

    /// The errors the events reported.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    pub fn events(&self) -> usize {
        self.events
    }
}

/// One token report (`{input, output, reasoning, cache: {read, write}}` and a USD cost): the
/// whole prompt with both cache shares in it, the output with the reasoning added back, each
/// figure floored at zero.
fn usage_of(tokens: Option<&Value>, cost: Option<&Value>) -> Usage {
    let mut negative = false;
    let field = |name: &str| tokens.and_then(|t| t.get(name));
    let cache = |name: &str| {
        tokens
            .and_then(|t| t.get("cache"))
            .and_then(|c| c.get(name))
    };
    let read = count(cache("read"), &mut negative);
    let write = count(cache("write"), &mut negative);
    let input = count(field("input"), &mut negative);
    let output = count(field("output"), &mut negative)
        .saturating_add(count(field("reasoning"), &mut negative));
    let cost_micros = usd_micros(cost, &mut negative);
    Usage {
        input_tokens: input.saturating_add(read).saturating_add(write),
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: write,
        cost_micros,
        negative,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTS: &str = r#"{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}
{"type":"reasoning","sessionID":"ses_1","part":{"type":"reasoning","text":"SECRET-THOUGHT"}}
{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"I'll run the tests.\n\nThen fix them."}}
{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"go test ./...","description":"d"},"output":"TOOL-OUTPUT"}}}
{"type":"tool_use","sessionID":"ses_1","part":{"type":"tool","tool":"edit","callID":"c2","state":{"status":"error","input":{"filePath":"/w/a.go"},"error":"oldString not found\nmore"}}}
{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","reason":"tool-calls","tokens":{"input":10,"output":5,"reasoning":2,"cache":{"read":100,"write":7}},"cost":0.01}}
[not json]
{"type":"session_report","session":{"id":"ses_1","model":{"providerID":"anthropic","modelID":"claude-sonnet-4-5"},"tokens":{"input":40,"output":30,"reasoning":8,"cache":{"read":400,"write":20}},"cost":0.0375}}"#;

    #[test]
    fn decodes_events_and_the_session_report() {
        let mut stream = OpenCodeStream::new();
        for line in EVENTS.lines() {
            stream.push_line(line);
        }
        assert_eq!(
            stream.transcript(),
            vec![
                "I'll run the tests.",
                "Then fix them.",
                "[tool] bash: go test ./...",
                "[tool] edit: /w/a.go (failed: oldString not found)",
            ]
        );
        let all = stream.transcript().join("\n");
        for never in ["SECRET-THOUGHT", "TOOL-OUTPUT", "more"] {
            assert!(!all.contains(never), "{never} in {all}");
        }
        assert_eq!(
            stream.usage(),
            Some(Usage {
                input_tokens: 460,
                output_tokens: 38,
                cache_read_tokens: 400,
                cache_write_tokens: 20,
                cost_micros: 37_500,
                negative: false,
            })
        );
        assert_eq!(stream.step_usage().input_tokens, 117);
        assert_eq!(
            stream.effective_model(),
            Some(("anthropic/claude-sonnet-4-5".to_owned(), SOURCE_SESSION))
        );
        assert_eq!(
            stream.final_text(),
            Some("I'll run the tests.\n\nThen fix them.")
        );
        assert_eq!(stream.events(), 7);
    }

    #[test]
    fn no_report_reads_as_no_usage() {
        let mut stream = OpenCodeStream::new();
        stream.push_line(r#"{"type":"step_finish","part":{"tokens":{"input":1},"modelID":"gpt-5","providerID":"openai"}}"#);
        stream.push_line(r#"{"type":"error","error":{"name":"APIError","data":{"message":"rate limited\nretry"}}}"#);
        assert_eq!(stream.usage(), None);
        assert_eq!(
            stream.effective_model(),
            Some(("openai/gpt-5".to_owned(), SOURCE_EVENTS))
        );
        assert_eq!(stream.transcript(), vec!["[ended] error: rate limited"]);
    }
}
