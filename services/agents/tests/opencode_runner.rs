//! The `opencode` runner against a real direct box, with a stand-in OpenCode 2 CLI (its
//! server, run, session report and login export), under each POSIX shell.

mod support;

use boxfleet_actors::ports::{Collected, JobState};
use boxfleet_agents::opencode::{CustomProvider, OpenCodeOptions, REFUSED_EXIT, Wire};
use boxfleet_agents::opencode_stream::SOURCE_SESSION;
use boxfleet_agents::{OpenCodeRunner, layout};
use support::{SHELLS, TestBox, fixture, have_shell, install_fake, launch, run};

const TASK: &str = "Fix the retry loop in retry.go.";

struct Fake {
    runner: OpenCodeRunner,
    record: std::path::PathBuf,
}

fn fake(
    b: &TestBox,
    shell: &[&str],
    provider: Option<CustomProvider>,
    creds: Option<String>,
) -> Fake {
    let record = b.record_dir();
    let cli = install_fake("fake-opencode.sh", b.dir.path());
    Fake {
        runner: OpenCodeRunner::with_options(OpenCodeOptions {
            cli,
            shell: shell.iter().map(|s| (*s).to_owned()).collect(),
            provider,
            credentials: creds,
        }),
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
    spec.model = Some("anthropic/claude-sonnet-4-5".into());
    spec.env
        .insert("FAKE_RECORD".into(), f.record.display().to_string());
    // a box environment carrying a server password: unset before anything starts
    spec.env
        .insert("OPENCODE_PASSWORD".into(), "seat-password".into());
    spec.env
        .insert("OPENCODE_SERVER_PASSWORD".into(), "seat-password".into());
    for (k, v) in env {
        spec.env.insert((*k).into(), (*v).into());
    }
    run(&f.runner, b, &spec).await
}

fn read(path: std::path::PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn check_success(b: &TestBox, f: &Fake, state: JobState, c: &Collected) {
    assert_eq!(
        state,
        JobState::Done { exit_code: Some(0) },
        "{}",
        c.stderr_tail
    );
    assert_eq!(c.exit_code, Some(0));
    assert_eq!(c.transcript.len(), 5, "{:?}", c.transcript);
    assert!(
        c.transcript[0].starts_with("[tool] bash: GITHUB_TOKEN=[REDACTED:"),
        "{:?}",
        c.transcript
    );
    assert!(
        c.transcript[0].ends_with("] go test ./..."),
        "{:?}",
        c.transcript
    );
    assert_eq!(
        c.transcript[1],
        "[tool] edit: /work/retry.go (failed: oldString not found in content)"
    );
    assert_eq!(c.transcript[2], "[tool] read: /work/retry_test.go");
    // what the agent said, in its place among the calls
    assert_eq!(c.transcript[3..], ["Fixed it.", "Delivered: fix/retry-go"]);
    let all = c.transcript.join("\n");
    for never in ["NEVER-SHOWN", "ghp_"] {
        assert!(!all.contains(never), "{never}: {all}");
    }
    // the session's totals: the whole prompt, the output with the reasoning added back
    assert_eq!(
        (
            c.input_tokens,
            c.output_tokens,
            c.cache_read_tokens,
            c.cache_write_tokens,
            c.cost_micros
        ),
        (50 + 2000 + 300, 150, 2000, 300, 45_600)
    );
    assert_eq!(
        c.effective_model.as_deref(),
        Some("anthropic/claude-sonnet-4-5")
    );
    assert_eq!(c.model_source.as_deref(), Some(SOURCE_SESSION));
    assert_eq!(c.report, "Fixed it.\n\nDelivered: fix/retry-go");
    assert_eq!(c.delivered_refs, vec!["fix/retry-go"]);
    assert!(c.warnings.is_empty());
    assert!(c.read_errors.is_empty(), "{:?}", c.read_errors);
    assert!(!c.stderr_tail.contains("ghp_"));
    assert!(c.succeeded());
    assert_eq!(c.session_id.as_deref(), Some("boxfleet-l-1"));
    assert!(c.cost_reported);

    // the server: loopback, its own password, never the seat's
    assert_eq!(
        read(f.record.join("serve-argv")),
        "serve\n--hostname\n127.0.0.1\n--port\n0\n"
    );
    let serve_env = read(f.record.join("serve-env"));
    assert!(!serve_env.contains("OPENCODE_PASSWORD"), "{serve_env}");
    assert!(
        !serve_env.contains("OPENCODE_SERVER_PASSWORD"),
        "{serve_env}"
    );
    assert_eq!(read(f.record.join("run-password")), "pw-minted-123\n");
    assert_eq!(
        read(f.record.join("run-argv")),
        "run\n--attach\nhttp://127.0.0.1:4567\n--format\njson\n--session\nboxfleet-l-1\n--title\nboxfleet run l-1\n--model\nanthropic/claude-sonnet-4-5\n"
    );
    let stdin = read(f.record.join("stdin"));
    assert!(stdin.starts_with(boxfleet_agents::common::brief_preamble()));
    assert!(stdin.ends_with(&format!("{TASK}\n")));
    // the configuration is written into the checkout on every run
    let config: serde_json::Value =
        serde_json::from_str(&read(format!("{}/opencode.json", b.home()).into())).expect("json");
    assert_eq!(config["share"], "disabled");
    assert_eq!(config["permission"]["question"], "deny");
}

#[tokio::test]
async fn a_run_is_collected_from_its_events_and_session_report() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"], None, None);
    let (events, session) = (
        fixture("opencode-events.jsonl"),
        fixture("opencode-session.json"),
    );
    let (state, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &events), ("FAKE_SESSION", &session)],
    )
    .await;
    check_success(&b, &f, state, &c);
    // the stream's last line is the session's report
    let stream = read(format!("{}/stream.jsonl", layout::job_dir(b.home(), "l-1")).into());
    assert!(
        stream
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(r#"{"type":"session_report","session":{"#))
    );
}

#[tokio::test]
async fn the_script_runs_alike_under_each_shell() {
    for shell in SHELLS {
        if !have_shell(shell) {
            continue;
        }
        let b = TestBox::new().await;
        let f = fake(&b, shell, None, None);
        let (events, session) = (
            fixture("opencode-events.jsonl"),
            fixture("opencode-session.json"),
        );
        let (state, c) = run_fake(
            &b,
            &f,
            "l-1",
            &[("FAKE_STREAM", &events), ("FAKE_SESSION", &session)],
        )
        .await;
        check_success(&b, &f, state, &c);
        let (state, c) = run_fake(&b, &f, "l-2", &[("FAKE_VERSION", "1.18.35")]).await;
        assert_eq!(
            state,
            JobState::Done {
                exit_code: Some(REFUSED_EXIT)
            },
            "{shell:?}"
        );
        assert!(
            c.stderr_tail.contains("this box runs OpenCode 1.18.35"),
            "{shell:?}: {}",
            c.stderr_tail
        );
    }
}

#[tokio::test]
async fn opencode_1x_is_refused_by_name_before_anything_runs() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"], None, None);
    let events = fixture("opencode-events.jsonl");
    let (state, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[
            ("FAKE_STREAM", &events),
            ("FAKE_VERSION", "opencode v1.18.35"),
        ],
    )
    .await;
    assert_eq!(
        state,
        JobState::Done {
            exit_code: Some(REFUSED_EXIT)
        }
    );
    assert!(
        c.stderr_tail
            .contains("this box runs OpenCode 1.18.35; the opencode runner drives OpenCode 2"),
        "{}",
        c.stderr_tail
    );
    assert!(c.stderr_tail.contains("@opencode/cli"));
    assert!(
        !f.record.join("serve-argv").exists(),
        "the server never started"
    );
    assert!(!f.record.join("run-argv").exists());
    // the error stream is the transcript where the event stream said nothing
    assert_eq!(c.transcript.len(), 2, "{:?}", c.transcript);
    assert!(c.transcript[0].contains("OpenCode 1.18.35"));
    assert_eq!(
        c.transcript[1],
        format!(
            "[ended] OpenCode printed no events and no session report (exited with status {REFUSED_EXIT})"
        )
    );
    assert_eq!(c.effective_model, None);
    assert!(!c.succeeded());
}

#[tokio::test]
async fn a_missing_session_report_reports_zero() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"], None, None);
    let events = fixture("opencode-events.jsonl");
    let (state, c) = run_fake(&b, &f, "l-1", &[("FAKE_STREAM", &events)]).await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert_eq!((c.input_tokens, c.output_tokens, c.cost_micros), (0, 0, 0));
    assert_eq!(c.effective_model, None);
    assert!(
        c.stderr_tail
            .contains("the session's usage report could not be read"),
        "{}",
        c.stderr_tail
    );
    assert_eq!(c.transcript.len(), 5);
    assert!(!c.cost_reported, "no report: no price");
}

#[tokio::test]
async fn a_run_that_exits_non_zero_without_an_error_event_says_how_it_ended() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"], None, None);
    let events = fixture("opencode-events.jsonl");
    let (_, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &events), ("FAKE_EXIT", "3")],
    )
    .await;
    assert_eq!(c.exit_code, Some(3));
    assert_eq!(
        c.transcript.last().map(String::as_str),
        Some(
            "[ended] exited with status 3 without an error event (it was at: Delivered: fix/retry-go)"
        ),
        "{:?}",
        c.transcript
    );
    assert!(!c.succeeded());
}

#[tokio::test]
async fn no_silent_success_a_run_that_printed_nothing_and_exited_0() {
    let b = TestBox::new().await;
    let f = fake(&b, &["sh"], None, None);
    let (_, c) = run_fake(&b, &f, "l-1", &[]).await;
    assert!(!c.succeeded(), "{c:#?}");
    assert_eq!(
        c.exit_code,
        Some(1),
        "exit 0 with nothing printed reads as 1"
    );
    assert_eq!(
        c.transcript.last().map(String::as_str),
        Some("[ended] OpenCode printed no events and no session report"),
        "{:?}",
        c.transcript
    );
}

#[tokio::test]
async fn negative_usage_is_floored_and_warned_and_a_custom_provider_is_declared() {
    let b = TestBox::new().await;
    let provider = CustomProvider {
        base_url: "https://gw.example.com".into(),
        wire: Wire::Anthropic,
    };
    let f = fake(&b, &["sh"], Some(provider), None);
    let (events, session) = (
        fixture("opencode-events.jsonl"),
        fixture("opencode-session-negative.json"),
    );
    let (_, c) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &events), ("FAKE_SESSION", &session)],
    )
    .await;
    assert_eq!((c.input_tokens, c.output_tokens, c.cost_micros), (3, 7, 0));
    assert_eq!(c.warnings, vec!["sandbox_usage_negative"]);
    assert_eq!(c.effective_model.as_deref(), Some("boxfleet/glm-5"));
    let argv = read(f.record.join("run-argv"));
    // the launch names the model as written; under the declared provider it is addressed as boxfleet/<model>
    assert!(
        argv.ends_with("--model\nboxfleet/anthropic/claude-sonnet-4-5\n"),
        "{argv}"
    );
    let config: serde_json::Value =
        serde_json::from_str(&read(format!("{}/opencode.json", b.home()).into())).expect("json");
    assert_eq!(
        config["provider"]["boxfleet"]["settings"]["baseURL"],
        "https://gw.example.com/v1"
    );
    assert_eq!(
        config["provider"]["boxfleet"]["env"],
        serde_json::json!(["ANTHROPIC_API_KEY"])
    );
}

#[tokio::test]
async fn the_login_is_imported_and_exported_back() {
    let b = TestBox::new().await;
    let creds = format!("{}/.boxfleet-exported-credentials", b.home());
    std::fs::write(
        &creds,
        "[{\"provider\":\"anthropic\",\"refresh\":\"old\"}]\n",
    )
    .expect("seed");
    let f = fake(&b, &["sh"], None, Some(creds.clone()));
    let (events, session) = (
        fixture("opencode-events.jsonl"),
        fixture("opencode-session.json"),
    );
    let (state, _) = run_fake(
        &b,
        &f,
        "l-1",
        &[("FAKE_STREAM", &events), ("FAKE_SESSION", &session)],
    )
    .await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert_eq!(
        read(f.record.join("imported")),
        "[{\"provider\":\"anthropic\",\"refresh\":\"old\"}]\n"
    );
    assert_eq!(
        read(creds.into()),
        "[{\"provider\":\"anthropic\",\"refresh\":\"rotated\"}]\n"
    );
}
