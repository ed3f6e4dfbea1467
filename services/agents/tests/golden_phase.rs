//! The whole phase record of one job per runner, as a node publishes it, against its golden
//! file (`tests/fixtures/golden/<runner>.json`): each runner's own collection in a real
//! `direct` box (the `command` runner's shell, the stand-in Claude Code and OpenCode CLIs
//! printing recorded streams), then the collection's pure path — redaction, bounds,
//! assessment, the record — through `record_for`, the function the node's collection uses.
//!
//! What varies from run to run (the box's id) is written as `<box>`. A deliberate change of
//! the record is blessed with `BOXFLEET_BLESS=1 cargo test -p boxfleet-agents --test
//! golden_phase`, and the diff read before it is committed.

mod support;

use boxfleet_actors::lifecycle::phase_record::{job_json, record_for};
use boxfleet_actors::ports::{Collected, LaunchSpec};
use boxfleet_agents::{ClaudeCodeRunner, CommandRunner, OpenCodeOptions, OpenCodeRunner};
use boxfleet_cluster::record::RunRecord;
use boxfleet_config::providers::MismatchPolicy;
use chrono::{DateTime, Duration, Utc};
use support::{TestBox, fixture, install_fake, launch, run};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("a time")
        .with_timezone(&Utc)
}

/// The row a launch of `runner` left: opened at 10:00, its current job named at 10:05 (a
/// relaunch: the record times the job from there, not from the row).
fn row(runner: &str, model: Option<&str>, job_dir: &str) -> RunRecord {
    let mut run = RunRecord::launching(
        "turn-g",
        "launch-2",
        "ada",
        runner,
        at("2026-12-01T10:00:00Z"),
    );
    run.iteration = 1;
    run.launched_at = Some(at("2026-12-01T10:05:00Z"));
    run.sandbox_id = Some("<box>".into());
    run.job = Some(job_json(runner, model, job_dir));
    run.work_item = Some("ENG-7".into());
    run.partition = Some("acme/api#7".into());
    run.conversation_key = Some("slack:C1/1700000000.1".into());
    run
}

/// The record collected at 10:05:42.5, checked against (or, blessed, written to) its file.
fn check_golden(runner: &str, model: Option<&str>, mut collected: Collected, home: &str) {
    // the wrapper recorded the job's start and end; pinned here (they are the real clock's)
    let (Some(started), Some(ended)) = (collected.job_started_ms, collected.job_ended_ms) else {
        panic!("{runner}'s wrapper recorded no start and end beside the exit status");
    };
    assert!(
        ended >= started,
        "{runner}: ended {ended} before started {started}"
    );
    let ended = at("2026-12-01T10:05:40Z").timestamp_millis();
    collected.job_started_ms = Some(ended - 1_500);
    collected.job_ended_ms = Some(ended);
    let dir = boxfleet_agents::layout::job_dir(home, "launch-2");
    let run = row(runner, model, &dir);
    let record = record_for(
        &run,
        collected,
        MismatchPolicy::Fail,
        at("2026-12-01T10:05:00Z") + Duration::milliseconds(42_500),
    )
    .expect("the row names its job");
    let got = serde_json::to_string_pretty(&record.to_value()).expect("json") + "\n";
    let got = got.replace(home, "<home>");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/golden")
        .join(format!("{runner}.json"));
    if std::env::var_os("BOXFLEET_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, &got).expect("bless");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (bless it: BOXFLEET_BLESS=1)", path.display()));
    assert_eq!(
        got,
        want,
        "{runner}'s phase record differs from {}",
        path.display()
    );
}

#[tokio::test]
async fn a_command_jobs_phase_record_matches_its_golden_file() {
    let b = TestBox::new().await;
    let spec = LaunchSpec {
        command: Some(
            "echo checking; echo 'Delivered: fix/g' >\"$BOXFLEET_REPORT\"; exit 0".into(),
        ),
        ..launch("launch-2", "")
    };
    let (_, collected) = run(&CommandRunner::new(), &b, &spec).await;
    check_golden("command", None, collected, b.home());
}

#[tokio::test]
async fn a_claude_code_jobs_phase_record_matches_its_golden_file() {
    let b = TestBox::new().await;
    let cli = install_fake("fake-claude.sh", b.dir.path());
    let runner = ClaudeCodeRunner::new().with_cli(cli);
    let mut spec = launch("launch-2", "Fix the retry backoff.");
    spec.model = Some("claude-sonnet-4-5".into());
    spec.env
        .insert("FAKE_RECORD".into(), b.record_dir().display().to_string());
    spec.env
        .insert("FAKE_STREAM".into(), fixture("claude-success.jsonl"));
    let (_, collected) = run(&runner, &b, &spec).await;
    check_golden(
        "claude-code",
        Some("claude-sonnet-4-5"),
        collected,
        b.home(),
    );
}

#[tokio::test]
async fn an_opencode_jobs_phase_record_matches_its_golden_file() {
    let b = TestBox::new().await;
    let cli = install_fake("fake-opencode.sh", b.dir.path());
    let runner = OpenCodeRunner::with_options(OpenCodeOptions {
        cli,
        shell: vec!["sh".into()],
        provider: None,
        credentials: None,
    });
    let mut spec = launch("launch-2", "Fix the retry backoff.");
    spec.model = Some("anthropic/claude-sonnet-4-5".into());
    spec.env
        .insert("FAKE_RECORD".into(), b.record_dir().display().to_string());
    spec.env
        .insert("FAKE_STREAM".into(), fixture("opencode-events.jsonl"));
    spec.env
        .insert("FAKE_SESSION".into(), fixture("opencode-session.json"));
    let (_, collected) = run(&runner, &b, &spec).await;
    check_golden(
        "opencode",
        Some("anthropic/claude-sonnet-4-5"),
        collected,
        b.home(),
    );
}
