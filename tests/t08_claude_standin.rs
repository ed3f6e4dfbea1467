//! The real Claude Code CLI, run headless (DESIGN §10) against the local Anthropic stand-in:
//! the scripted Bash → Write → final-text conversation really runs tools in the cwd, and the
//! stream the CLI prints carries what the runner reads (init, tool calls, the result's usage
//! with both cache counts, and the model that actually answered — DESIGN §11's receipt).
//!
//! `BOXFLEET_REGEN_CLAUDE_FIXTURES=1` also writes the two streams, with the temporary paths
//! replaced, to `services/agents/tests/fixtures/real-claude-{ok,mismatch}.jsonl`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use boxfleet_tests::anthropic_standin::{
    AnthropicStandin, DELIVERED_BRANCH, SCRIPT_NOTES, SIDE_TEXT, Script, StandinOptions, Usage,
};
use boxfleet_tests::claude_cli::{claude_command, headless_args};
use serde_json::Value;

const REQUESTED_MODEL: &str = "claude-sonnet-4-5";
const SERVED_MODEL: &str = "claude-haiku-4-5";
/// The CLI's whole run, a backstop only.
const RUN_WITHIN: Duration = Duration::from_secs(180);
/// The placeholders the fixtures carry instead of the temporary directories.
const WORK_PLACEHOLDER: &str = "/home/user/work";
const HOME_PLACEHOLDER: &str = "/home/user";

const BRIEF: &str = "Run `echo hello from bash > bash.txt` in the working directory, then write \
a short notes.md there, then finish with a line `Delivered: feature/standin-test`.\n";

const USAGE: Usage = Usage {
    input_tokens: 120,
    output_tokens: 45,
    cache_creation_input_tokens: 300,
    cache_read_input_tokens: 4_000,
};

struct Run {
    standin: AnthropicStandin,
    status: ExitStatus,
    stdout: String,
    stderr: String,
    lines: Vec<Value>,
    work: PathBuf,
    home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn context(&self) -> String {
        format!(
            "exit: {}\nstand-in requests:\n{}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.standin.request_log(),
            self.stdout,
            self.stderr
        )
    }

    fn of_type<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.lines
            .iter()
            .filter(move |l| l.get("type").and_then(Value::as_str) == Some(kind))
    }

    fn tool_uses(&self) -> Vec<&Value> {
        self.of_type("assistant")
            .filter_map(|l| l.pointer("/message/content").and_then(Value::as_array))
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .collect()
    }

    fn tool_results(&self) -> Vec<&Value> {
        self.of_type("user")
            .filter_map(|l| l.pointer("/message/content").and_then(Value::as_array))
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .collect()
    }

    fn result(&self) -> &Value {
        let last = self.lines.last().unwrap_or_else(|| {
            panic!("the stream is empty\n{}", self.context());
        });
        assert_eq!(
            last.get("type").and_then(Value::as_str),
            Some("result"),
            "the stream's last line is not the result\n{}",
            self.context()
        );
        last
    }

    /// The stream with the temporary paths replaced by the placeholders (also in the
    /// CLI's project slug, `/` and `.` as `-`), and the pid in its socket path fixed.
    fn sanitized(&self) -> String {
        let mut text = self.stdout.clone();
        for path in [self.work.canonicalize().ok(), Some(self.work.clone())]
            .into_iter()
            .flatten()
        {
            text = text.replace(&slug(&path), &slug(Path::new(WORK_PLACEHOLDER)));
        }
        text = fix_socket_pid(&text);
        for (path, placeholder) in [
            (&self.work, WORK_PLACEHOLDER),
            (&self.home, HOME_PLACEHOLDER),
        ] {
            if let Ok(real) = path.canonicalize() {
                text = text.replace(&*real.to_string_lossy(), placeholder);
            }
            text = text.replace(&*path.to_string_lossy(), placeholder);
        }
        text
    }
}

/// Runs the CLI on the three-turn script; `nonessential` leaves the CLI's non-essential
/// traffic on (its side requests then reach the stand-in too).
fn run_scenario(served_model: Option<&str>, nonessential: bool) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let work = dir.path().join("work");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&work).expect("work dir");
    std::fs::create_dir_all(&home).expect("home dir");
    let standin = AnthropicStandin::start(StandinOptions {
        served_model: served_model.map(str::to_owned),
        usage: USAGE,
        script: Script::bash_write_deliver(&work),
    });

    let mut command = claude_command(&standin.url(), &home, &work);
    if nonessential {
        command.env_remove("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC");
    }
    let mut child = command
        .args(headless_args(REQUESTED_MODEL))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn claude");
    let mut stdin = child.stdin.take().expect("claude's stdin");
    stdin.write_all(BRIEF.as_bytes()).expect("write the brief");
    drop(stdin);
    let stdout_reader = read_all(child.stdout.take().expect("claude's stdout"));
    let stderr_reader = read_all(child.stderr.take().expect("claude's stderr"));
    let deadline = Instant::now() + RUN_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for claude") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = stdout_reader.join().unwrap_or_default();
            panic!(
                "claude did not finish within {RUN_WITHIN:?}\nrequests:\n{}\nstdout:\n{stdout}",
                standin.request_log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = stdout_reader.join().unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
    let lines = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    Run {
        standin,
        status,
        stdout,
        stderr,
        lines,
        work,
        home,
        _dir: dir,
    }
}

/// Claude Code's name for a project directory: every character but ASCII letters and digits
/// as `-`.
fn slug(path: &Path) -> String {
    path.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `"/tmp/cc-socks/<pid>.sock"` with the pid as `1000`.
fn fix_socket_pid(text: &str) -> String {
    const MARK: &str = "/cc-socks/";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let (head, tail) = rest.split_at(at + MARK.len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("1000");
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn read_all(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn maybe_write_fixture(run: &Run, name: &str) {
    if std::env::var_os("BOXFLEET_REGEN_CLAUDE_FIXTURES").is_none() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../services/agents/tests/fixtures")
        .join(name);
    std::fs::create_dir_all(path.parent().expect("fixtures dir")).expect("fixtures dir");
    std::fs::write(&path, run.sanitized()).expect("write the fixture");
    eprintln!("wrote {}", path.display());
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {value}"))
}

#[test]
fn real_claude_runs_the_scripted_tools_and_reports_cached_usage() {
    let run = run_scenario(None, false);
    let ctx = run.context();
    maybe_write_fixture(&run, "real-claude-ok.jsonl");
    eprintln!("{ctx}");

    assert!(run.status.success(), "claude failed\n{ctx}");

    // the tools really ran, in the cwd
    let bash_txt = std::fs::read_to_string(run.work.join("bash.txt"))
        .unwrap_or_else(|e| panic!("no bash.txt ({e})\n{ctx}"));
    assert_eq!(bash_txt.trim(), "hello from bash");
    let notes = std::fs::read_to_string(run.work.join("notes.md"))
        .unwrap_or_else(|e| panic!("no notes.md ({e})\n{ctx}"));
    assert_eq!(notes, SCRIPT_NOTES);

    // the stream: init, the two tool calls and their results, the result last
    let init = run
        .of_type("system")
        .find(|l| l.get("subtype").and_then(Value::as_str) == Some("init"))
        .unwrap_or_else(|| panic!("no system init line\n{ctx}"));
    assert_eq!(
        init.get("model").and_then(Value::as_str),
        Some(REQUESTED_MODEL),
        "init names the model asked for\n{ctx}"
    );
    let tool_names: Vec<&str> = run
        .tool_uses()
        .iter()
        .filter_map(|b| b.get("name").and_then(Value::as_str))
        .collect();
    assert_eq!(tool_names, ["Bash", "Write"], "tool calls\n{ctx}");
    let results = run.tool_results();
    assert_eq!(results.len(), 2, "tool results\n{ctx}");
    for result in &results {
        assert_ne!(
            result.get("is_error").and_then(Value::as_bool),
            Some(true),
            "a tool failed: {result}\n{ctx}"
        );
    }
    for line in run.of_type("assistant") {
        assert_eq!(
            line.pointer("/message/model").and_then(Value::as_str),
            Some(REQUESTED_MODEL),
            "the stand-in echoed the model\n{ctx}"
        );
    }

    let result = run.result();
    assert_eq!(
        result.get("subtype").and_then(Value::as_str),
        Some("success")
    );
    assert_eq!(result.get("is_error").and_then(Value::as_bool), Some(false));
    let text = result.get("result").and_then(Value::as_str).unwrap_or("");
    assert!(
        text.contains(&format!("Delivered: {DELIVERED_BRANCH}")),
        "the final text carries the Delivered line: {text:?}\n{ctx}"
    );
    // three scripted turns, each reporting the stand-in's usage
    let main_turns = run.standin.main_requests().len() as u64;
    assert!(main_turns >= 3, "three main turns at least\n{ctx}");
    let usage = result.get("usage").expect("the result's usage");
    for (field, each) in [
        ("input_tokens", USAGE.input_tokens),
        (
            "cache_creation_input_tokens",
            USAGE.cache_creation_input_tokens,
        ),
        ("cache_read_input_tokens", USAGE.cache_read_input_tokens),
        ("output_tokens", USAGE.output_tokens),
    ] {
        assert_eq!(
            u64_at(usage, &format!("/{field}")),
            each * main_turns,
            "result usage {field}\n{ctx}"
        );
    }
}

#[test]
fn real_claude_stream_names_the_model_the_gateway_served() {
    let run = run_scenario(Some(SERVED_MODEL), false);
    let ctx = run.context();
    maybe_write_fixture(&run, "real-claude-mismatch.jsonl");
    eprintln!("{ctx}");

    assert!(run.status.success(), "claude failed\n{ctx}");
    // every main request asked for the requested model; the answers named the served one
    let main = run.standin.main_requests();
    assert!(!main.is_empty(), "no main requests\n{ctx}");
    for request in &main {
        assert_eq!(request.model.as_deref(), Some(REQUESTED_MODEL), "{ctx}");
    }
    let assistant_models: Vec<&str> = run
        .of_type("assistant")
        .filter_map(|l| l.pointer("/message/model").and_then(Value::as_str))
        .collect();
    assert!(!assistant_models.is_empty(), "no assistant lines\n{ctx}");
    assert!(
        assistant_models.iter().all(|m| *m == SERVED_MODEL),
        "assistant lines name the served model: {assistant_models:?}\n{ctx}"
    );
    // what the CLI itself says: init and the cost accounting name the model it asked for
    // (Claude Code 2.1.332), so only the assistant lines tell the receipt what ran
    let init = run
        .of_type("system")
        .find(|l| l.get("subtype").and_then(Value::as_str) == Some("init"))
        .unwrap_or_else(|| panic!("no system init line\n{ctx}"));
    assert_eq!(
        init.get("model").and_then(Value::as_str),
        Some(REQUESTED_MODEL),
        "{ctx}"
    );
    let result = run.result();
    assert_eq!(result.get("is_error").and_then(Value::as_bool), Some(false));
    let usage_models: Vec<&String> = result
        .get("modelUsage")
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        usage_models,
        [REQUESTED_MODEL],
        "modelUsage is keyed by the requested model, not the served one\n{ctx}"
    );
    assert!(
        !run.stdout
            .contains(&format!("\"model\":\"{REQUESTED_MODEL}\",\"role\"")),
        "no assistant line names the requested model\n{ctx}"
    );
}

#[test]
fn real_claude_with_nonessential_traffic_on_still_follows_the_script() {
    let run = run_scenario(None, true);
    let ctx = run.context();
    assert!(run.status.success(), "claude failed\n{ctx}");
    assert!(run.work.join("bash.txt").exists(), "no bash.txt\n{ctx}");
    assert!(run.work.join("notes.md").exists(), "no notes.md\n{ctx}");
    let turns: Vec<Option<usize>> = run.standin.main_requests().iter().map(|r| r.turn).collect();
    assert_eq!(turns, [Some(0), Some(1), Some(2)], "{ctx}");
    let text = run
        .result()
        .get("result")
        .and_then(Value::as_str)
        .unwrap_or("");
    assert!(text.contains("Delivered: feature/"), "{text:?}\n{ctx}");
}

/// One HTTP/1.1 request over a plain socket (the harness has no HTTP client); the status
/// code and body.
fn http(url: &str, method: &str, path: &str, body: &Value) -> (u16, String) {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).expect("connect to the stand-in");
    let body = body.to_string();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

/// The stand-in's own contract, without the CLI: plain JSON answers, side requests, the
/// served-model override, token counts and the catch-all.
#[test]
fn standin_answers_plain_json_side_requests_and_probes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let standin = AnthropicStandin::start(StandinOptions {
        served_model: Some(SERVED_MODEL.into()),
        usage: USAGE,
        script: Script::bash_write_deliver(dir.path()),
    });
    let tool = serde_json::json!([{ "name": "Bash", "input_schema": { "type": "object" } }]);

    // turn 0 of the main conversation, not streamed: the Bash tool_use
    let (status, body) = http(
        &standin.url(),
        "POST",
        "/v1/messages?beta=true",
        &serde_json::json!({
            "model": REQUESTED_MODEL, "max_tokens": 100, "tools": tool,
            "messages": [{ "role": "user", "content": "go" }],
        }),
    );
    assert_eq!(status, 200, "{body}");
    let message: Value = serde_json::from_str(&body).expect("a JSON message");
    assert_eq!(message["model"], SERVED_MODEL);
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][1]["name"], "Bash");
    assert_eq!(
        message["usage"]["cache_read_input_tokens"],
        USAGE.cache_read_input_tokens
    );

    // a side request (no tools) gets the side text and does not move the script
    let (_, body) = http(
        &standin.url(),
        "POST",
        "/v1/messages",
        &serde_json::json!({
            "model": "claude-haiku-4-5", "max_tokens": 10,
            "messages": [{ "role": "user", "content": "title this" }],
        }),
    );
    let side: Value = serde_json::from_str(&body).expect("a JSON message");
    assert_eq!(side["content"][0]["text"], SIDE_TEXT);

    // turn 2 (two assistant messages so far), streamed: the final text, as SSE
    let (status, body) = http(
        &standin.url(),
        "POST",
        "/v1/messages",
        &serde_json::json!({
            "model": REQUESTED_MODEL, "max_tokens": 100, "tools": tool, "stream": true,
            "messages": [
                { "role": "user", "content": "go" },
                { "role": "assistant", "content": "a" },
                { "role": "user", "content": "b" },
                { "role": "assistant", "content": "c" },
                { "role": "user", "content": "d" },
            ],
        }),
    );
    assert_eq!(status, 200);
    let events: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ],
        "{body}"
    );
    assert!(body.contains("end_turn"), "{body}");
    assert!(body.contains(SERVED_MODEL), "{body}");

    let (status, body) = http(
        &standin.url(),
        "POST",
        "/v1/messages/count_tokens",
        &serde_json::json!({ "model": REQUESTED_MODEL, "messages": [] }),
    );
    assert_eq!(status, 200);
    assert!(body.contains("input_tokens"), "{body}");
    let (status, _) = http(&standin.url(), "GET", "/api/anything", &Value::Null);
    assert_eq!(status, 200);

    let requests = standin.requests();
    let summary: Vec<(&str, Option<usize>, bool)> = requests
        .iter()
        .map(|r| (r.path.as_str(), r.turn, r.has_tools))
        .collect();
    assert_eq!(
        summary,
        [
            ("/v1/messages", Some(0), true),
            ("/v1/messages", None, false),
            ("/v1/messages", Some(2), true),
            ("/v1/messages/count_tokens", None, false),
            ("/api/anything", None, false),
        ]
    );
    assert_eq!(requests[0].query.as_deref(), Some("beta=true"));
}
