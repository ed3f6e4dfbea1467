//! Scenario: budgets (issue 16; the spec's lines 551–560) through the `boxfleet` binary. A seat
//! capped at 3,000 tokens a day parks a job on a question; a Claude Code job (a stand-in CLI
//! reporting 3,500 tokens) is collected and charged in full — to the seat, the company and its
//! work item — past the cap (`sandbox_spend_over_budget`); the next launch is refused (class
//! `budget`) naming the window; the person's answer to the parked question waits on the
//! seat's inbox (the budget park) instead of resuming the spent seat; a reload that raises the
//! cap lifts the park and the run resumes with the answer. `boxfleet budget` shows the
//! counters beside the caps. A budget that cannot be read (etcd frozen) refuses the launch,
//! class `budget`, and the same launch goes through once the store answers.
//!
//! The windows on the company's clock are `budget::tests`; the caps' validation is
//! `config::budget::tests`.

use std::path::Path;
use std::time::{Duration, Instant};

use boxfleet_tests::node::{NodeProcess, launched_turn_and_job};

/// A stand-in Claude Code CLI reporting 2,500 input and 1,000 output tokens.
const SPENDING_CLAUDE: &str = r#"#!/bin/sh
cat >/dev/null
echo '{"type":"system","subtype":"init","model":"claude-sonnet-4-5"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"spent","total_cost_usd":0.01,"usage":{"input_tokens":2500,"output_tokens":1000}}'
"#;

fn company(seat_day_cap: u64) -> String {
    format!(
        r#"
company:
  providers:
    llm:
      default: {{ provider: anthropic, model: claude-sonnet-4-5, api_key: sk-ant-t27 }}
    sandbox: {{ local: {{}}, default_run_in: direct }}
  roles:
    - {{ name: eng, sandbox: {{ enabled: true }} }}
  seats:
    - {{ handle: eng, role: eng, manager: alice }}
    - {{ handle: alice, kind: person }}
  budgets:
    seat: {{ day: {seat_day_cap} }}
    company: {{ month: 1000000 }}
"#
    )
}

fn write(path: &Path, body: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, body).expect("write");
    std::fs::rename(&next, path).expect("rename");
}

async fn status_of(node: &NodeProcess, turn: &str) -> String {
    node.record(turn)
        .await
        .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_else(|| "gone".to_owned())
}

async fn until(node: &NodeProcess, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what}:\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_seat_is_refused_its_answer_parked_and_its_run_charged_in_full() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cli = dir.path().join("spending-claude");
    std::fs::write(&cli, SPENDING_CLAUDE).expect("write cli");
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = dir.path().join("node.yaml");
    write(&config, &company(3_000));
    let node = NodeProcess::start_with_env(
        "budget",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
        &[("BOXFLEET_CLAUDE_CLI", cli.to_str().expect("utf-8"))],
    );

    // a job parks on a question while the seat still has room (charged its 0 tokens: a run)
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--command",
        r#"boxfleet-ask "carry on?" --to alice; echo "answered: $BOXFLEET_ANSWER" > "$BOXFLEET_REPORT""#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (asking, asked_launch) = launched_turn_and_job(&out);
    until(&node, "the job parks", async || {
        matches!(
            status_of(&node, &asking).await.as_str(),
            "awaiting_clarification" | "reseed"
        )
    })
    .await;

    // a coding job spends past the day's cap: charged in full, and said
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--brief",
        "spend",
        "--work-item",
        "ENG-27",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (spending, _) = launched_turn_and_job(&out);
    let phase = node.phase_record(&spending, Duration::from_secs(60)).await;
    assert_eq!(phase["input_tokens"], 2500, "{phase:#}");
    until(&node, "sandbox_spend_over_budget", async || {
        node.log().contains("sandbox_spend_over_budget")
    })
    .await;
    let (code, out, err) = node.cli(&["budget", "--seat", "eng", "--task", "ENG-27"]);
    assert_eq!(code, 0, "{err}");
    let line = |scope: &str, kind: &str| {
        out.lines()
            .find(|l| l.starts_with(scope) && l.contains(kind))
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        line("seat eng", "day-").contains(" 3500 3000 0 2 "),
        "the seat's day, charged in full past its cap:\n{out}"
    );
    assert!(
        line("company", "month-").contains(" 3500 1000000 996500 2 "),
        "{out}"
    );
    assert!(
        line("task ENG-27", "total").ends_with(" 3500 - - 1"),
        "{out}"
    );

    // the next launch is refused against the recorded figure
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "true"]);
    assert_eq!(code, 1, "{out}{err}");
    let said = format!("{out}{err}");
    assert!(
        said.contains("refused (budget)")
            && said.contains("seat eng has 0 tokens left in its day window (3500 of 3000 used"),
        "{said}"
    );

    // the answer does not resume the spent seat: it waits on the inbox
    let (code, out, err) = node.cli(&[
        "answer",
        &asking,
        "--launch",
        &asked_launch,
        "--text",
        "yes",
        "--as",
        "alice",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    until(&node, "the budget park", async || {
        node.log().contains("sandbox_budget_park")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        matches!(
            status_of(&node, &asking).await.as_str(),
            "awaiting_clarification" | "reseed"
        ),
        "held, not resumed"
    );

    // a reload that raises the cap lifts the park: the run resumes with the answer
    write(&config, &company(100_000));
    until(&node, "the park lifted", async || {
        node.log().contains("sandbox_budget_park_lifted")
    })
    .await;
    until(&node, "the run resumed with the answer", async || {
        node.cli(&["show", &asking]).1.contains("answered: yes")
    })
    .await;
}

/// A budget that cannot be read refuses the launch (class `budget`, naming the store as the
/// cause) instead of launching on an unknown figure; once the store answers, the same launch
/// goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_that_cannot_be_read_refuses_the_launch() {
    let etcd = boxfleet_tests::EtcdServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("node.yaml");
    write(&config, &company(100_000));
    let url = etcd.client_url();
    let node = NodeProcess::start(
        "unread",
        dir.path(),
        &["--config", config.to_str().expect("utf-8"), "--etcd", &url],
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "true"]);
    assert_eq!(code, 0, "the store answers: {out}{err}");

    etcd.pause();
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "true"]);
    etcd.resume();
    let said = format!("{out}{err}");
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains("refused (budget)") && said.contains("budget could not be read"),
        "a launch on an unknown budget is refused, naming why:\n{said}\n{}",
        node.log()
    );

    let started = Instant::now();
    loop {
        let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "true"]);
        if code == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the store answers again, the launch goes through: {out}{err}\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
