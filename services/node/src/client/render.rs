//! The client's shared rendering: what every command prints is built here from typed values,
//! as text (the pure functions the tests pin down), and written by [`out`] (the answer, to
//! stdout) or [`note`] (a notice about the wait itself, to stderr).
//!
//! Layout: the two writers; the text helpers (tables, labelled rows, indent, truncation,
//! counts, human bytes, shell quoting, timestamps); a [`Question`] and the exact command that
//! answers it; the phase-record renderer ([`render_phase_record`]) and the run-record renderer
//! ([`render_record`]), with the model-receipt and token texts both use.

use std::io::Write;

use boxfleet_cluster::phase::{ModelReceipt, PhaseRecord, ReceiptStatus};
use boxfleet_cluster::record::{self, RunRecord, Status};
use chrono::{DateTime, SecondsFormat, Utc};

use super::records::{ClarificationRequested, EventView};
use crate::cli::DEFAULT_ADDR;

/// Writes to stdout and flushes (a follower's output must show as it arrives).
pub(super) fn out(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// Writes one notice line to stderr.
pub(super) fn note(text: &str) {
    eprintln!("{text}");
}

// ---------------------------------------------------------------------------------------------
// Text helpers

/// An aligned table: columns two spaces apart, the last column unpadded (no trailing blanks).
pub(super) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, value) in widths.iter_mut().zip(row) {
            *width = (*width).max(value.chars().count());
        }
    }
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    let mut text = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().min(widths.len()).saturating_sub(1);
        for (index, (value, width)) in row.iter().zip(&widths).enumerate() {
            text.push_str(value);
            if index < last {
                let pad = width - value.chars().count() + 2;
                text.push_str(&" ".repeat(pad));
            }
        }
        text.push('\n');
    }
    text
}

/// Labelled rows: `  label         value`, a multi-line value continued under its first line.
pub(super) fn labelled(rows: &[(&str, String)]) -> String {
    let width = rows
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0);
    let mut text = String::new();
    for (label, value) in rows {
        let mut lines = value.lines();
        let first = lines.next().unwrap_or("");
        text.push_str(&format!("  {label:<width$}  {first}\n"));
        for line in lines {
            text.push_str(&format!("  {:<width$}  {line}\n", ""));
        }
    }
    text
}

/// Every line of `text` indented by `by` spaces, ending in a newline.
pub(super) fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    let mut out = String::new();
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("{pad}{line}\n"));
        }
    }
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// At most `max` characters, the cut marked with `…`.
pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Text on one line: line breaks and tabs become spaces, runs of blanks one space.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: `-` for nothing, so every column has a word.
pub(super) fn cell(value: &str) -> &str {
    non_empty(value, "-")
}

pub(super) fn non_empty<'a>(value: &'a str, otherwise: &'a str) -> &'a str {
    if value.is_empty() { otherwise } else { value }
}

pub(super) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

pub(crate) fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// A JSON document, pretty-printed (every `--json` document but the JSON lines).
pub(super) fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// An instant as the store's JSON writes it (chrono's serde form: RFC 3339, `Z`, the fraction
/// only as long as it needs), so a record's time prints as the record holds it.
pub(super) fn timestamp(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A word as a POSIX shell reads it back unchanged.
pub(super) fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

// ---------------------------------------------------------------------------------------------
// A question and its answer command

/// A question a run parked on, as an event or a record carries it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Question {
    pub(super) text: String,
    pub(super) audience: String,
    pub(super) audience_handles: Vec<String>,
    pub(super) branch: String,
}

impl Question {
    /// From a `sandbox_clarification_requested` event.
    pub(super) fn from_event(event: &EventView) -> Self {
        let body: ClarificationRequested = event.body_as();
        Self {
            text: body.question,
            audience: body.audience,
            audience_handles: body.audience_handles,
            branch: body.branch.unwrap_or_default(),
        }
    }

    /// From a run record: its `question`, or none.
    pub(super) fn from_record(record: &RunRecord) -> Self {
        record
            .question
            .as_ref()
            .map(Self::from_asked)
            .unwrap_or_default()
    }

    fn from_asked(question: &record::Question) -> Self {
        Self {
            text: question.text.clone(),
            audience: question.audience.clone(),
            audience_handles: question.audience_handles.clone(),
            branch: question.branch.clone().unwrap_or_default(),
        }
    }

    /// The question, whom it is put to, and the exact command that answers it.
    pub(super) fn render(&self, turn: &str, launch: &str, addr: &str) -> String {
        let mut to = cell(&self.audience).to_owned();
        if !self.audience_handles.is_empty() {
            to = format!("{to}: {}", self.audience_handles.join(", "));
        }
        let mut text = format!("job {launch} asks ({to}):\n");
        text.push_str(&indent(non_empty(&self.text, "(no question text)"), 2));
        if !self.branch.is_empty() {
            text.push_str(&format!("  work pushed to branch {}\n", self.branch));
        }
        text.push_str("answer it with:\n  ");
        text.push_str(&answer_command(turn, launch, addr));
        text.push('\n');
        text
    }
}

/// The exact `boxfleet answer` command for a parked job.
pub(super) fn answer_command(turn: &str, launch: &str, addr: &str) -> String {
    let mut command = format!(
        "boxfleet answer {} --launch {} --text '<your answer>'",
        shell_quote(turn),
        shell_quote(launch)
    );
    if addr != DEFAULT_ADDR {
        command.push_str(&format!(" --addr {}", shell_quote(addr)));
    }
    command
}

// ---------------------------------------------------------------------------------------------
// The phase record

/// Whether a phase record is that of a job that stopped to ask (its `notes` carry the question).
pub(super) fn asks_question(record: &PhaseRecord) -> bool {
    record
        .notes
        .as_deref()
        .is_some_and(|notes| !notes.trim().is_empty())
}

/// An `agent_phase_completed{phase: sandbox}` event, readably: outcome, tokens, what the job
/// delivered, its report and its transcript.
pub(super) fn render_phase_record(event: &EventView) -> String {
    let phase = event.phase();
    let record = &phase.record;
    let mut text = format!(
        "phase {}  turn {}  job {}",
        non_empty(&phase.name, "sandbox"),
        cell(non_empty(&record.turn_id, &event.turn_id)),
        cell(non_empty(&record.launch_id, &event.launch_id))
    );
    if !event.seat.is_empty() {
        text.push_str(&format!("  seat {}", event.seat));
    }
    if let Some(at) = &event.at {
        text.push_str(&format!("  at {}", timestamp(at)));
    }
    text.push('\n');

    let asks = asks_question(record);
    let mut rows: Vec<(&str, String)> = Vec::new();
    rows.push((
        "outcome",
        if record.failed {
            "failed".to_owned()
        } else if asks {
            "asked a question".to_owned()
        } else {
            "succeeded".to_owned()
        },
    ));
    let started = record
        .started_at
        .map(|at| at.to_rfc3339())
        .unwrap_or_default();
    for (label, value) in [
        ("coding agent", record.coding_agent.as_str()),
        ("box", record.sandbox_id.as_str()),
        ("work item", record.work_item.as_deref().unwrap_or("")),
        ("started", started.as_str()),
    ] {
        if !value.is_empty() {
            rows.push((label, one_line(value)));
        }
    }
    if phase.has_duration {
        rows.push((
            "duration",
            format!("{:.1} s", record.duration_ms as f64 / 1000.0),
        ));
    }
    if let Some(job) = record.job_runtime_ms {
        let lag = record
            .collect_lag_ms
            .map(|lag| format!(", collected {:.1} s after it exited", lag as f64 / 1000.0))
            .unwrap_or_default();
        rows.push(("job ran", format!("{:.1} s{lag}", job as f64 / 1000.0)));
    }
    if phase.has_model {
        rows.push(("model", model_text(&record.model)));
    }
    rows.push(("tokens", tokens_text(record)));
    if let Some(cost) = record.cost_usd {
        rows.push(("cost", format!("${cost:.4}")));
    }
    let delivered = if record.delivered_refs.is_empty() {
        "(nothing)".to_owned()
    } else {
        record.delivered_refs.join("\n")
    };
    rows.push(("delivered", delivered));
    text.push_str(&labelled(&rows));
    text.push_str(&phase_texts(record, asks));
    text
}

/// The phase record's texts under its rows: error, notes, report and transcript.
fn phase_texts(record: &PhaseRecord, asks: bool) -> String {
    let mut text = String::new();
    if !record.error.is_empty() {
        text.push_str("  error\n");
        text.push_str(&indent(&record.error, 4));
    }
    if asks {
        text.push_str("  notes\n");
        text.push_str(&indent(record.notes.as_deref().unwrap_or(""), 4));
    }
    text.push_str("  report\n");
    text.push_str(&indent(non_empty(&record.response, "(no report)"), 4));
    let transcript: Vec<&str> = record
        .activity_transcript
        .iter()
        .flat_map(|item| item.lines())
        .collect();
    text.push_str(&format!(
        "  transcript ({})\n",
        count(transcript.len(), "line")
    ));
    if transcript.is_empty() {
        text.push_str("    (empty)\n");
    }
    for line in &transcript {
        text.push_str(&format!("    {line}\n"));
    }
    text
}

pub(super) fn tokens_text(record: &PhaseRecord) -> String {
    let mut text = format!(
        "input {}, output {}",
        record.input_tokens, record.output_tokens
    );
    for (label, value) in [
        ("cache read", record.cache_read_tokens),
        ("cache write", record.cache_write_tokens),
    ] {
        if value > 0 {
            text.push_str(&format!(", {label} {value}"));
        }
    }
    text
}

/// A model receipt: which model was asked for, which ran, and what the receipt concludes.
fn model_text(receipt: &ModelReceipt) -> String {
    let requested = receipt.requested.as_deref().unwrap_or("");
    let effective = receipt.effective.as_deref().unwrap_or("");
    if requested.is_empty() && effective.is_empty() {
        // a command job: no model was asked for and none reported
        return "none (no model requested or reported)".into();
    }
    format!(
        "requested {}, ran {} ({})",
        non_empty(requested, "(none)"),
        non_empty(effective, "(unknown)"),
        receipt_word(receipt.status)
    )
}

/// The receipt status's word, as the record's JSON spells it.
fn receipt_word(status: ReceiptStatus) -> &'static str {
    match status {
        ReceiptStatus::Known => "known",
        ReceiptStatus::Unknown => "unknown",
        ReceiptStatus::Mismatch => "mismatch",
    }
}

// ---------------------------------------------------------------------------------------------
// The run record

/// A run record, readably: its identity, state, question and answer, then its brief.
pub(super) fn render_record(record: &RunRecord, addr: &str) -> String {
    let mut text = format!("run {}\n", cell(&record.turn_id));
    text.push_str(&labelled(&record_rows(record)));
    let parked = matches!(
        record.status,
        Status::AwaitingClarification | Status::Reseed
    );
    if record.question.is_some() {
        let question = Question::from_record(record);
        if parked {
            text.push_str(&indent(
                &question.render(&record.turn_id, &record.launch_id, addr),
                2,
            ));
        } else {
            text.push_str("  question\n");
            text.push_str(&indent(&question.text, 4));
        }
    }
    if !record.brief.is_empty() {
        text.push_str("  brief\n");
        text.push_str(&indent(&record.brief, 4));
    }
    text
}

/// The labelled rows of a run record, each only when it holds something.
fn record_rows(record: &RunRecord) -> Vec<(&'static str, String)> {
    let mut rows: Vec<(&str, String)> = Vec::new();
    let mut field = |label: &'static str, value: String| {
        if !value.is_empty() {
            rows.push((label, value));
        }
    };
    let given = |value: &Option<String>| value.clone().unwrap_or_default();
    field("job", record.launch_id.clone());
    field("seat", record.seat.clone());
    field("status", record.status.as_str().to_owned());
    field("coding agent", record.coding_agent.clone());
    field(
        "box",
        match (
            record.sandbox_id.as_deref().unwrap_or(""),
            record.placement.as_deref().unwrap_or(""),
        ) {
            ("", _) => String::new(),
            (sandbox, "") => sandbox.to_owned(),
            (sandbox, placement) => format!("{sandbox} ({placement})"),
        },
    );
    field("owner", given(&record.owner));
    field("task", one_line(&record.task));
    field("work item", given(&record.work_item));
    field("requester", given(&record.requester));
    field(
        "model",
        record.model.as_ref().map(model_text).unwrap_or_default(),
    );
    field(
        "pause ttl",
        record
            .pause_ttl_seconds
            .map(|s| format!("{s} s"))
            .unwrap_or_default(),
    );
    field(
        "paused at",
        record.paused_at.as_ref().map(timestamp).unwrap_or_default(),
    );
    field("created", timestamp(&record.created_at));
    field("updated", timestamp(&record.updated_at));
    if let Some(ending) = &record.ending {
        field(
            "ending",
            if ending.detail.is_empty() {
                ending.reason.as_str().to_owned()
            } else {
                format!("{}: {}", ending.reason, one_line(&ending.detail))
            },
        );
    }
    if let Some(answer) = &record.answer {
        field(
            "answer",
            format!(
                "from {} at {}: {}",
                cell(&answer.from),
                timestamp(&answer.recorded_at),
                one_line(&answer.text)
            ),
        );
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{at, phase_event, run_record_with, view_of};
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns_and_leave_no_trailing_blanks() {
        let rows = vec![
            vec!["t-1".to_owned(), "running".to_owned(), "x".to_owned()],
            vec!["turn-22".to_owned(), "-".to_owned(), "ü-wide".to_owned()],
        ];
        let text = table(&["TURN", "STATUS", "TASK"], &rows);
        assert_eq!(
            text,
            "TURN     STATUS   TASK\n\
             t-1      running  x\n\
             turn-22  -        ü-wide\n"
        );
        assert!(text.lines().all(|line| !line.ends_with(' ')));
    }

    #[test]
    fn a_phase_record_renders_readably() {
        let text = render_phase_record(&view_of(phase_event(false)));
        assert_eq!(
            text,
            "phase sandbox  turn t1  job l1  seat alice  at 2026-05-01T10:00:00Z\n\
             \x20 outcome    succeeded\n\
             \x20 tokens     input 1, output 2\n\
             \x20 delivered  fix/retry\n\
             \x20            https://git.example.com/acme/api/pull/42\n\
             \x20 report\n\
             \x20   Fixed the retry.\n\
             \x20   All tests pass.\n\
             \x20 transcript (2 lines)\n\
             \x20   [tool] Bash: go test ./...\n\
             \x20   done\n"
        );
    }

    #[test]
    fn a_failed_phase_record_says_why() {
        let event = view_of(phase_event(true));
        let text = render_phase_record(&event);
        assert!(text.contains("  outcome    failed\n"), "{text}");
        assert!(text.contains("  error\n    exit status 1\n"), "{text}");
        assert!(event.phase().record.failed);
    }

    #[test]
    fn a_phase_record_with_notes_asked_a_question() {
        let mut event = phase_event(false);
        event["body"]["record"]["notes"] = json!("Which database should I use?");
        assert!(asks_question(&view_of(event.clone()).phase().record));
        let text = render_phase_record(&view_of(event));
        assert!(text.contains("  outcome    asked a question\n"), "{text}");
        assert!(
            text.contains("  notes\n    Which database should I use?\n"),
            "{text}"
        );
        assert!(!asks_question(&view_of(phase_event(false)).phase().record));
    }

    #[test]
    fn a_question_prints_the_exact_answer_command() {
        let event = json!({"type": "sandbox_clarification_requested", "turn_id": "t1",
            "launch_id": "l1", "id": "e1", "seat": "alice", "at": "2026-05-01T10:00:00Z", "body": {"question": "Postgres or SQLite?", "audience": "team",
            "audience_handles": ["bob", "carol"], "branch": "wip/db"}});
        let question = Question::from_event(&view_of(event));
        assert_eq!(
            question.render("t1", "l1", DEFAULT_ADDR),
            "job l1 asks (team: bob, carol):\n\
             \x20 Postgres or SQLite?\n\
             \x20 work pushed to branch wip/db\n\
             answer it with:\n\
             \x20 boxfleet answer t1 --launch l1 --text '<your answer>'\n"
        );
        assert_eq!(
            answer_command("t 1", "l1", "http://10.0.0.2:7400"),
            "boxfleet answer 't 1' --launch l1 --text '<your answer>' --addr http://10.0.0.2:7400"
        );
        let record = run_record_with(json!({"status": "awaiting_clarification", "question": {
            "text": "Which?", "audience": "requester", "asked_at": "2026-05-01T10:00:00Z"}}));
        let from_record = Question::from_record(&serde_json::from_value(record).expect("a record"));
        assert_eq!(from_record.text, "Which?");
        assert_eq!(from_record.audience, "requester");
    }

    #[test]
    fn shell_quoting_round_trips_awkward_words() {
        assert_eq!(shell_quote("abc-1.2"), "abc-1.2");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_parked_record_shows_its_question_and_answer_command() {
        let record = run_record_with(json!({
            "turn_id": "t1", "launch_id": "l1", "seat": "alice", "status": "awaiting_clarification",
            "coding_agent": "command", "sandbox_id": "sb-1", "placement": "direct",
            "question": {"text": "Which?", "audience": "team", "audience_handles": ["bob"],
                "asked_at": "2026-05-01T10:00:00Z"},
            "brief": "do it"
        }));
        let record = serde_json::from_value(record).expect("a record");
        let text = render_record(&record, DEFAULT_ADDR);
        assert!(text.starts_with("run t1\n"), "{text}");
        assert!(text.contains("  box           sb-1 (direct)\n"), "{text}");
        assert!(
            text.contains("boxfleet answer t1 --launch l1 --text '<your answer>'"),
            "{text}"
        );
        assert!(text.ends_with("  brief\n    do it\n"), "{text}");
    }

    #[test]
    fn small_helpers() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(one_line("a\n  b\tc"), "a b c");
        assert_eq!(count(1, "seat"), "1 seat");
        assert_eq!(count(2, "seat"), "2 seats");
        assert_eq!(human_bytes(2048), "2.0 KiB");
    }

    #[test]
    fn timestamps_print_as_the_store_writes_them() {
        for text in [
            "2026-05-01T10:00:00Z",
            "2026-05-01T10:00:00.500Z",
            "2026-05-01T10:00:00.123456Z",
            "2026-05-01T10:00:00.000000001Z",
        ] {
            let at = at(text);
            assert_eq!(timestamp(&at), text);
            assert_eq!(
                serde_json::to_value(at).expect("time"),
                json!(timestamp(&at))
            );
        }
    }

    #[test]
    fn receipt_words_are_the_json_words() {
        for status in [
            ReceiptStatus::Known,
            ReceiptStatus::Unknown,
            ReceiptStatus::Mismatch,
        ] {
            assert_eq!(
                serde_json::to_value(status).expect("status"),
                json!(receipt_word(status))
            );
        }
    }
}
