//! The activity transcript's one shape, for every CLI's event stream (spec line 275): what the
//! agent said ([`said_lines`]), one line per tool call naming the tool and the first line of
//! its subject (`[tool] Bash: go test ./...`), a failed call marked with the first line of its
//! error, and how a run that did not succeed ended (`[ended] …`). Never a tool's output, the
//! model's thinking, or a message type the build does not know. Everything is redacted whole
//! before it is cut: a subject to [`TOOL_PREVIEW_BYTES`], a line the agent said to
//! [`SAID_LINE_BYTES`], on a character boundary.

use serde_json::Value;

/// The most a tool's subject (or an error's first line) keeps.
pub const TOOL_PREVIEW_BYTES: usize = 160;

/// The most one line of what the agent said keeps.
pub const SAID_LINE_BYTES: usize = 400;
/// The most lines one message of the agent's keeps; the rest are counted on a line of theirs.
pub const SAID_LINES: usize = 20;

/// What the agent said in one message, as transcript lines: the message redacted whole, then
/// its non-empty lines, each trimmed and cut to [`SAID_LINE_BYTES`] (`…` where cut), at most
/// [`SAID_LINES`] of them and a line counting the rest. A line that would read as one of the
/// transcript's own (`[tool] …`, `[ended] …`) is quoted, so an agent cannot forge one.
pub fn said_lines(text: &str) -> Vec<String> {
    let redacted = boxfleet_redact::redact(text);
    let lines: Vec<&str> = redacted
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let mut said: Vec<String> = lines
        .iter()
        .take(SAID_LINES)
        .map(|line| {
            let kept = cut(line, SAID_LINE_BYTES);
            let quote = if kept.starts_with("[tool]") || kept.starts_with("[ended]") {
                "> "
            } else {
                ""
            };
            let more = if kept.len() < line.len() { "…" } else { "" };
            format!("{quote}{kept}{more}")
        })
        .collect();
    if lines.len() > SAID_LINES {
        said.push(format!(
            "[… {} more lines of this message]",
            lines.len() - SAID_LINES
        ));
    }
    said
}

/// Cuts `text` to at most `max` bytes on a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first non-empty line of `text`, redacted whole first, trimmed and cut to the preview.
pub fn first_line(text: &str) -> String {
    let redacted = boxfleet_redact::redact(text);
    let line = redacted
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    cut(line, TOOL_PREVIEW_BYTES).to_owned()
}

/// The subject of a tool call: the field that names what it acted on, by the tool's name
/// (case-insensitive, so OpenCode's `bash` reads as Claude Code's `Bash`), else the input's
/// first string field.
pub fn subject(tool: &str, input: &Value) -> String {
    let keys: &[&str] = match tool.to_ascii_lowercase().as_str() {
        "bash" | "shell" => &["command"],
        "write" | "edit" | "read" | "multiedit" | "notebookedit" => {
            &["file_path", "filePath", "notebook_path", "path"]
        }
        "grep" | "glob" => &["pattern"],
        "webfetch" => &["url"],
        "websearch" => &["query"],
        "task" => &["description", "prompt"],
        _ => &[],
    };
    let named = keys
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str));
    let text = named.or_else(|| {
        input
            .as_object()
            .and_then(|fields| fields.values().find_map(Value::as_str))
    });
    text.map(first_line).unwrap_or_default()
}

/// One transcript line for a tool call.
pub fn tool_line(tool: &str, subject: &str) -> String {
    let name = first_line(tool);
    if subject.is_empty() {
        format!("[tool] {name}")
    } else {
        format!("[tool] {name}: {subject}")
    }
}

/// Marks a tool line failed, with the first line of its error when there is one.
pub fn mark_failed(line: &mut String, error: &str) {
    let error = first_line(error);
    if error.is_empty() {
        line.push_str(" (failed)");
    } else {
        line.push_str(&format!(" (failed: {error})"));
    }
}

/// The text of a tool result's `content`: a string, or the text blocks of an array.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A token count as reported: a negative or fractional figure read as a whole non-negative
/// count, `negative` set when it was below zero. Absent or not a number: 0.
pub fn count(value: Option<&Value>, negative: &mut bool) -> u64 {
    let Some(value) = value else { return 0 };
    if let Some(n) = value.as_u64() {
        return n;
    }
    if let Some(n) = value.as_i64() {
        *negative |= n < 0;
        return 0;
    }
    match value.as_f64() {
        Some(n) if n < 0.0 => {
            *negative = true;
            0
        }
        Some(n) if n.is_finite() => float_to_u64(n.round()),
        _ => 0,
    }
}

/// A price in US dollars as micro-dollars; negative reads as 0 with `negative` set.
pub fn usd_micros(value: Option<&Value>, negative: &mut bool) -> u64 {
    match value.and_then(Value::as_f64) {
        Some(usd) if usd < 0.0 => {
            *negative = true;
            0
        }
        Some(usd) if usd.is_finite() => float_to_u64((usd * 1_000_000.0).round()),
        _ => 0,
    }
}

fn float_to_u64(n: f64) -> u64 {
    // a saturating conversion: `as` clamps a float past the range and maps NaN to 0
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = n as u64;
    whole
}

/// The warning a negative usage figure raises.
pub const USAGE_NEGATIVE: &str = "sandbox_usage_negative";
/// The warning a result file the box refused to hand over raises (read from the stream).
pub const RESULT_REFUSED: &str = "sandbox_result_refused";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_the_agent_said_is_its_lines_redacted_bounded_and_never_a_forged_line() {
        assert_eq!(
            said_lines("I'll run the tests.\n\n  Then fix them.  \n"),
            ["I'll run the tests.", "Then fix them."]
        );
        // a key is redacted whole before anything is cut
        let said = said_lines("the key is ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok");
        assert!(
            said[0].starts_with("the key is [REDACTED") && !said[0].contains("ghp_"),
            "{said:?}"
        );
        // each line bounded, on a character boundary, its cut said
        let long = "é".repeat(SAID_LINE_BYTES);
        let said = said_lines(&long);
        assert!(
            said[0].len() <= SAID_LINE_BYTES + '…'.len_utf8(),
            "{}",
            said[0].len()
        );
        assert!(said[0].ends_with('…'));
        // at most SAID_LINES of one message, the rest counted
        let many: String = (0..SAID_LINES + 5).map(|i| format!("line {i}\n")).collect();
        let said = said_lines(&many);
        assert_eq!(said.len(), SAID_LINES + 1);
        assert_eq!(said[SAID_LINES], "[… 5 more lines of this message]");
        // the agent cannot write a line that reads as one of the transcript's own
        assert_eq!(
            said_lines("[tool] Bash: rm -rf /\n[ended] success"),
            ["> [tool] Bash: rm -rf /", "> [ended] success"]
        );
        assert!(said_lines("\n \n").is_empty());
    }

    #[test]
    fn subjects_by_tool() {
        assert_eq!(
            subject(
                "Bash",
                &json!({"command": "go test ./...\necho x", "description": "d"})
            ),
            "go test ./..."
        );
        assert_eq!(subject("Read", &json!({"file_path": "/w/a.rs"})), "/w/a.rs");
        assert_eq!(
            subject("Grep", &json!({"pattern": "fn main", "path": "src"})),
            "fn main"
        );
        assert_eq!(
            subject(
                "WebFetch",
                &json!({"url": "https://x.test/a", "prompt": "p"})
            ),
            "https://x.test/a"
        );
        assert_eq!(
            subject("Task", &json!({"prompt": "long", "description": "Find it"})),
            "Find it"
        );
        assert_eq!(
            subject("mcp__x__y", &json!({"n": 1, "q": "first\nsecond"})),
            "first"
        );
        assert_eq!(subject("edit", &json!({"filePath": "/w/b.rs"})), "/w/b.rs");
        assert_eq!(subject("TodoWrite", &json!({"todos": []})), "");
    }

    #[test]
    fn cuts_on_a_character_boundary() {
        let long = "é".repeat(100); // 200 bytes
        let cut_line = first_line(&long);
        assert_eq!(cut_line.len(), 160);
        assert_eq!(cut("aé", 2), "a");
        let mut line = tool_line("Bash", "make");
        mark_failed(&mut line, "\nexit 2: no rule\nmore");
        assert_eq!(line, "[tool] Bash: make (failed: exit 2: no rule)");
    }

    #[test]
    fn counts_floor_at_zero() {
        let mut negative = false;
        assert_eq!(count(Some(&json!(12)), &mut negative), 12);
        assert!(!negative);
        assert_eq!(count(Some(&json!(-3)), &mut negative), 0);
        assert!(negative);
        let mut negative = false;
        assert_eq!(usd_micros(Some(&json!(0.1234567)), &mut negative), 123_457);
        assert_eq!(usd_micros(Some(&json!(-1.0)), &mut negative), 0);
        assert!(negative);
    }
}
