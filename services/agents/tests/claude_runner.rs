//! The `claude-code` runner against a real direct box, with a stand-in CLI that prints a
//! recorded stream (fixtures written from the documented stream-json schema), under each
//! POSIX shell; and its parser over real recorded streams.

mod support;

use boxfleet_actors::ports::{Collected, JobState, Runner};
use boxfleet_agents::claude_stream::{SOURCE_ASSISTANT, SOURCE_INIT};
use boxfleet_agents::{ClaudeCodeRunner, ClaudeResult, ClaudeStream, Usage, layout};
use support::{SHELLS, TestBox, fixture, have_shell, install_fake, launch, run};

const TASK: &str = "Fix the retry backoff. The token is ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

struct Fake {
    runner: ClaudeCodeRunner,
    record: std::path::PathBuf,
}

fn fake(b: &TestBox, shell: &[&str]) -> Fake {
    let record = b.record_dir();
    let cli = install_fake("fake-claude.sh", b.dir.path());
    Fake {
        runner: ClaudeCodeRunner::new()
            .with_cli(cli)
            .with_shell(shell.iter().copied()),
        record,
    }
}

async fn run_fake(
    b: &TestBox,
    f: &Fake,
    launch_id: &str,
    env: &[(&str, &str)],
) -> (JobState, Collected) {
    let mut spec = launch(launch_id, TASK);
    spec.model = Some("claude-sonnet-4-5".into());
    spec.max_turns = Some(25);
    spec.env
        .insert("FAKE_RECORD".into(), f.record.display().to_string());
    for (k, v) in env {
        spec.env.insert((*k).into(), (*v).into());
    }
    run(&f.runner, b, &spec).await
}

const TRANSCRIPT: [&str; 7] = [
    // what the agent said, redacted, one line per line
    "Let me look at the tests first.",
    "The key is [REDACTED:anthropic] (redacted).",
    "[tool] Bash: curl -s -H 'Authorization: Bearer [REDACTED:anthropic]' https://api.example.com/health",
    "[tool] Edit: /work/src/retry.rs (failed: <tool_use_error>String to replace not found in file.)",
    "[tool] Grep: fn backoff",
    "[tool] Write: /work/src/backoff.rs",
    "[tool] Bash: git push -u origin fix/retry-backoff && gh pr create --fill",
];

fn check_success(c: &Collected) {
    let transcript: Vec<String> = c.transcript.iter().map(|l| redaction_shape(l)).collect();
    assert_eq!(transcript, TRANSCRIPT, "{:#?}", c.transcript);
    let all = c.transcript.join("\n");
    for never in ["NEVER-SHOWN", "sk-ant-api03", "second line"] {
        assert!(!all.contains(never), "{never} in the transcript: {all}");
    }
    assert_eq!(
        (
            c.input_tokens,
            c.output_tokens,
            c.cache_read_tokens,
            c.cache_write_tokens
        ),
        (18 + 3600 + 1200, 260, 3600, 1200)
    );
    assert_eq!(c.cost_micros, 123_456);
    assert_eq!(
        c.effective_model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    assert_eq!(c.model_source.as_deref(), Some(SOURCE_ASSISTANT));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert!(c.read_errors.is_empty(), "{:?}", c.read_errors);
}

/// The redaction marker's kind name is the redact crate's business: compare its shape only.
fn redaction_shape(line: &str) -> String {
    match (line.find("[REDACTED:"), line.find(']')) {
        (Some(at), Some(_)) => {
            let end = at + line[at..].find(']').unwrap_or(0);
            format!("{}[REDACTED:anthropic]{}", &line[..at], &line[end + 1..])
        }
        _ => line.to_owned(),
    }
}

#[tokio::test]
async fn a_successful_run_is_collected_from_its_stream() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let stream = fixture("claude-success.jsonl");
    let (state, c) = run_fake(&b, &f, "l-1", &[("FAKE_STREAM", &stream)]).await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert_eq!(c.exit_code, Some(0));
    check_success(&c);
    // no report file: the final message is the report, its named refs the run's
    assert_eq!(
        c.report,
        "Fixed the retry backoff.\n\nDelivered: fix/retry-backoff\nDelivered: https://git.example.com/acme/api/pull/42"
    );
    assert_eq!(
        c.delivered_refs,
        vec![
            "fix/retry-backoff",
            "https://git.example.com/acme/api/pull/42"
        ]
    );
    assert!(c.succeeded());
    // stderr is redacted whole
    assert!(
        c.stderr_tail
            .starts_with("fake claude: done (key [REDACTED:"),
        "{}",
        c.stderr_tail
    );
    assert!(!c.stderr_tail.contains("sk-ant-"));

    // the exact invocation, and the brief on stdin (never on argv)
    let argv = std::fs::read_to_string(f.record.join("argv")).expect("argv");
    assert_eq!(
        argv,
        "-p\n--output-format\nstream-json\n--verbose\n--permission-mode\nbypassPermissions\n--model\nclaude-sonnet-4-5\n--max-turns\n25\n"
    );
    let stdin = std::fs::read_to_string(f.record.join("stdin")).expect("stdin");
    assert!(stdin.starts_with(boxfleet_agents::common::brief_preamble()));
    assert!(stdin.contains("BOXFLEET_REPORT"));
    assert!(stdin.contains("boxfleet-ask"));
    assert!(stdin.ends_with(&format!("{TASK}\n")));

    // the wrapper copied the stream's last line to result.json
    let result =
        std::fs::read_to_string(format!("{}/result.json", layout::job_dir(b.home(), "l-1")))
            .expect("result.json");
    assert!(result.starts_with(r#"{"type":"result","subtype":"success""#));
}

#[tokio::test]
async fn the_findings_report_wins_over_the_final_message() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let stream = fixture("claude-success.jsonl");
    let report = fixture("claude-report.md");
    let (_, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &stream), ("FAKE_REPORT", &report)],
    )
    .await;
    assert!(c.report.starts_with("# Findings\n"), "{}", c.report);
    assert_eq!(
        c.delivered_refs,
        vec![
            "fix/retry-backoff",
            "https://git.example.com/acme/api/pull/43"
        ]
    );
    assert!(c.succeeded());
}

#[tokio::test]
async fn max_turns_fails_and_negative_usage_reads_as_nothing_spent() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let stream = fixture("claude-max-turns.jsonl");
    let (state, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &stream), ("FAKE_EXIT", "1")],
    )
    .await;
    assert_eq!(state, JobState::Done { exit_code: Some(1) });
    assert_eq!(c.exit_code, Some(1));
    assert_eq!(
        c.transcript,
        vec![
            "working",
            "[tool] Bash: make check (failed: make: *** [check] Error 2)",
            "[ended] error_max_turns: Reached maximum number of turns (2)",
        ]
    );
    assert_eq!(
        (
            c.input_tokens,
            c.output_tokens,
            c.cache_read_tokens,
            c.cache_write_tokens,
            c.cost_micros
        ),
        (30, 30, 20, 10, 0)
    );
    assert_eq!(c.warnings, vec!["sandbox_usage_negative"]);
    // the assistant's model is <synthetic>: the init line names the model
    assert_eq!(
        (c.effective_model.as_deref(), c.model_source.as_deref()),
        (Some("claude-opus-4-1"), Some(SOURCE_INIT))
    );
    assert_eq!(
        c.report,
        "The run did not succeed: error_max_turns: Reached maximum number of turns (2)\n"
    );
    assert!(!c.succeeded());

    // the same result from a CLI that exited 0: still not a success, and said why
    let (_, c) = run_fake(&b, &f, "l-2", &[("FAKE_STREAM", &stream)]).await;
    assert_eq!(c.exit_code, Some(1));
    assert!(
        c.stderr_tail.starts_with(
            "[boxfleet] the CLI exited 0, but the run did not succeed (error_max_turns"
        ),
        "{}",
        c.stderr_tail
    );
    assert!(!c.succeeded());
}

#[tokio::test]
async fn a_killed_wrapper_is_read_from_the_streams_last_line() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let stream = fixture("claude-success.jsonl");
    let (state, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &stream), ("FAKE_KILL_WRAPPER", "1")],
    )
    .await;
    assert_eq!(state, JobState::Done { exit_code: None });
    let dir = layout::job_dir(b.home(), "l-1");
    assert!(!std::path::Path::new(&format!("{dir}/result.json")).exists());
    check_success(&c);
    assert_eq!(c.exit_code, None);
    assert_eq!(
        c.delivered_refs,
        vec![
            "fix/retry-backoff",
            "https://git.example.com/acme/api/pull/42"
        ]
    );
    assert!(!c.succeeded());
}

#[tokio::test]
async fn a_cli_that_printed_nothing_reads_as_what_it_is() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let (state, c) = run_fake(&b, &f, "l-1", &[("FAKE_EXIT", "2")]).await;
    assert_eq!(state, JobState::Done { exit_code: Some(2) });
    assert_eq!(c.effective_model, None);
    assert_eq!(c.model_source, None);
    assert_eq!((c.input_tokens, c.cost_micros), (0, 0));
    assert!(
        c.report
            .starts_with("The run did not succeed: the CLI printed nothing"),
        "{}",
        c.report
    );
    // the error stream stands in for the transcript, redacted, and the ending is said
    assert_eq!(c.transcript.len(), 2, "{:?}", c.transcript);
    assert!(c.transcript[0].starts_with("fake claude: done (key [REDACTED:"));
    assert!(
        ended(&c).starts_with("the CLI printed nothing"),
        "{:?}",
        c.transcript
    );
    assert!(c.read_errors.is_empty(), "{:?}", c.read_errors);
    assert!(!c.succeeded());
}

/// A stream file for the stand-in to print.
fn stream_file(b: &TestBox, name: &str, text: &str) -> String {
    let path = b.record_dir().join(name);
    std::fs::write(&path, text).expect("write the stream");
    path.display().to_string()
}

/// The `[ended]` line a collection closes its transcript with.
fn ended(c: &Collected) -> &str {
    c.transcript
        .last()
        .and_then(|line| line.strip_prefix("[ended] "))
        .unwrap_or_else(|| panic!("no ending line: {:?}", c.transcript))
}

#[tokio::test]
async fn no_silent_success_a_cli_that_exits_0_having_printed_nothing() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let (state, c) = run_fake(&b, &f, "l-1", &[("FAKE_EXIT", "0")]).await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert!(!c.succeeded(), "{c:#?}");
    assert_eq!(c.exit_code, Some(1), "exit 0 on no result reads as 1");
    assert!(ended(&c).contains("the CLI printed nothing"), "{c:#?}");
    assert!(
        c.stderr_tail
            .contains("the CLI exited 0, but the run did not succeed")
    );
    assert!(c.report.contains("did not succeed"), "{}", c.report);
}

#[tokio::test]
async fn no_silent_success_a_cli_that_exits_0_printing_no_json() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let text = stream_file(
        &b,
        "usage.txt",
        "Usage: claude [options]\nerror: unknown option '--bogus'\n",
    );
    let (_, c) = run_fake(&b, &f, "l-1", &[("FAKE_STREAM", &text)]).await;
    assert!(!c.succeeded(), "{c:#?}");
    assert_eq!(c.exit_code, Some(1));
    let ending = ended(&c);
    assert!(
        ending.contains("not stream-json") && ending.contains("unknown option"),
        "{ending}"
    );
}

#[tokio::test]
async fn no_silent_success_a_stream_without_its_result_says_what_the_agent_was_at() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let whole = std::fs::read_to_string(fixture("claude-success.jsonl")).expect("fixture");
    let cut: String = whole.lines().take(3).map(|l| format!("{l}\n")).collect();
    let stream = stream_file(&b, "cut.jsonl", &cut);
    let (_, c) = run_fake(&b, &f, "l-1", &[("FAKE_STREAM", &stream)]).await;
    assert!(!c.succeeded(), "{c:#?}");
    let ending = ended(&c);
    assert!(
        ending.contains("the stream ended before the run said how it ended")
            && ending.contains("its last line: user")
            && ending.contains("it was at: [tool] Bash: curl"),
        "{ending}"
    );
}

#[tokio::test]
async fn a_refused_result_file_is_read_from_the_streams_last_line_and_the_refusal_said() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let stream = fixture("claude-success.jsonl");
    let link = format!("{}/result.json.tmp", layout::job_dir(b.home(), "l-1"));
    let (state, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &stream), ("FAKE_LINK_RESULT", &link)],
    )
    .await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    let result = format!("{}/result.json", layout::job_dir(b.home(), "l-1"));
    assert!(
        std::fs::symlink_metadata(&result).is_ok_and(|m| m.file_type().is_symlink()),
        "the wrapper made a result file the box refuses"
    );
    // read from the stream's own last line: the run succeeded, with everything it reported
    check_success_refused(&c);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("sandbox_result_refused") && w.contains("not a regular file")),
        "{:?}",
        c.warnings
    );
    assert!(
        c.stderr_tail
            .contains("read from the event stream's last line"),
        "the refusal is still said: {}",
        c.stderr_tail
    );
}

/// [`check_success`] but for the one warning a refused result file raises.
fn check_success_refused(c: &Collected) {
    let mut quiet = c.clone();
    quiet
        .warnings
        .retain(|w| !w.starts_with("sandbox_result_refused"));
    check_success(&quiet);
    assert!(c.succeeded(), "{c:#?}");
    assert_eq!(
        c.session_id.as_deref(),
        Some("9f1c2d3e-0000-4000-8000-000000000001")
    );
    assert!(c.cost_reported);
}

#[tokio::test]
async fn the_wrapper_runs_alike_under_each_shell() {
    for shell in SHELLS {
        if !have_shell(shell) {
            continue;
        }
        let b = TestBox::new().await;
        let f = fake(&b, shell);
        let stream = fixture("claude-success.jsonl");
        let (state, c) = run_fake(&b, &f, "l-1", &[("FAKE_STREAM", &stream)]).await;
        assert_eq!(state, JobState::Done { exit_code: Some(0) }, "{shell:?}");
        check_success(&c);
        assert!(c.succeeded(), "{shell:?}");
        let stream = fixture("claude-max-turns.jsonl");
        let (state, c) = run_fake(
            &b,
            &f,
            "l-2",
            &[("FAKE_STREAM", &stream), ("FAKE_EXIT", "1")],
        )
        .await;
        assert_eq!(state, JobState::Done { exit_code: Some(1) }, "{shell:?}");
        assert_eq!(c.warnings, vec!["sandbox_usage_negative"], "{shell:?}");
        let stream = fixture("claude-success.jsonl");
        let (state, c) = run_fake(
            &b,
            &f,
            "l-3",
            &[("FAKE_STREAM", &stream), ("FAKE_KILL_WRAPPER", "1")],
        )
        .await;
        assert_eq!(state, JobState::Done { exit_code: None }, "{shell:?}");
        assert_eq!(c.cost_micros, 123_456, "{shell:?}");
        // and the ask shim is first on PATH for the CLI
        let ask = "#!/bin/sh\ncommand -v boxfleet-ask >\"$FAKE_RECORD/ask\"\n";
        std::fs::write(b.dir.path().join("ask-cli"), ask).expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            b.dir.path().join("ask-cli"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        let asker = Fake {
            runner: ClaudeCodeRunner::new()
                .with_cli(b.dir.path().join("ask-cli").display().to_string())
                .with_shell(shell.iter().copied()),
            record: f.record.clone(),
        };
        run_fake(&b, &asker, "l-4", &[]).await;
        assert_eq!(
            std::fs::read_to_string(f.record.join("ask")).expect("ask"),
            format!("{}\n", layout::ask_shim(b.home())),
            "{shell:?}"
        );
    }
}

#[tokio::test]
async fn follow_shows_the_transcript_of_whole_lines() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"]);
    let stream = fixture("claude-success.jsonl");
    let runner = &f.runner;
    runner.install(b.sandbox.as_ref()).await.expect("install");
    let mut spec = launch("l-1", TASK);
    spec.env
        .insert("FAKE_RECORD".into(), f.record.display().to_string());
    spec.env.insert("FAKE_STREAM".into(), stream.clone());
    let job = runner
        .start(b.sandbox.as_ref(), &spec)
        .await
        .expect("start");
    support::wait_done(runner, b.sandbox.as_ref(), &job).await;
    let all = runner
        .follow(b.sandbox.as_ref(), &job, 0)
        .await
        .expect("follow");
    let len = std::fs::metadata(&stream).expect("len").len();
    assert_eq!((all.start, all.end), (0, len));
    assert_eq!(all.text.lines().count(), 7, "{}", all.text);
    assert!(!all.text.contains("sk-ant-api03"));
    let rest = runner
        .follow(b.sandbox.as_ref(), &job, all.end)
        .await
        .expect("follow");
    assert_eq!((rest.text.as_str(), rest.start, rest.end), ("", len, len));
}

fn decode(name: &str) -> ClaudeStream {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture");
    let mut stream = ClaudeStream::new();
    for line in text.lines() {
        stream.push_line(line);
    }
    stream
}

#[test]
fn real_recorded_streams_decode() {
    for (name, model) in [
        ("real-claude-ok.jsonl", "claude-sonnet-4-5"),
        ("real-claude-mismatch.jsonl", "claude-haiku-4-5"),
    ] {
        if !std::path::Path::new(&fixture(name)).exists() {
            eprintln!("{name} is not there: skipped");
            continue;
        }
        let stream = decode(name);
        assert_eq!(
            stream.transcript(),
            [
                "I'll start by running a command.",
                "[tool] Bash: echo hello from bash > bash.txt",
                "Now I'll write the notes.",
                "[tool] Write: /home/user/work/notes.md",
                "Done: bash.txt and notes.md are written.",
                "Delivered: feature/standin-test",
            ],
            "{name}"
        );
        // the mismatch stream's init names claude-sonnet-4-5; the API served haiku
        assert_eq!(
            stream.effective_model(),
            Some((model.to_owned(), SOURCE_ASSISTANT)),
            "{name}"
        );
        let result = stream
            .last()
            .and_then(ClaudeResult::from_value)
            .expect("a result line");
        assert!(!result.failed(), "{name}");
        assert_eq!(result.num_turns, Some(3));
        assert_eq!(
            result.usage,
            Usage {
                input_tokens: 360 + 12_000 + 900,
                output_tokens: 135,
                cache_read_tokens: 12_000,
                cache_write_tokens: 900,
                cost_micros: 10_080,
                negative: false,
            },
            "{name}"
        );
        // the final text's `Delivered: feature/standin-test` line names the branch
        assert_eq!(
            boxfleet_agents::refs::run_refs(None, result.text.as_deref()),
            vec!["feature/standin-test".to_owned()]
        );
        // a label before the name makes the line a sentence, not a ref
        assert_eq!(
            boxfleet_agents::refs::run_refs(None, Some("Delivered: branch feature/x\n")),
            Vec::<String>::new()
        );
    }
}
