//! Scenario: the phase record tells the truth about how a job ended, through a node — the
//! eval-sandbox report's table (`../shared/spec/eval-sandbox-post.txt`) as one test. Four
//! `command` checks on one node, each read back from its published phase record:
//!
//! | what the check did                      | what its record establishes                   |
//! |-----------------------------------------|-----------------------------------------------|
//! | ran whole, wrote no report              | the report is absent: not a failure           |
//! | left a report the box will not hand over | the engine does not know: an infrastructure  |
//! |                                         | error (`collect_incomplete`), never "absent"  |
//! | outlived its in-box deadline            | the check timed out (exit 124)                |
//! | wedged its own deadline, past the       | the client timed out; execution state         |
//! | engine's backstop                       | uncertain (`backstop`, no exit status)        |
//!
//! Each keeps what was collected (its output so far). The backstop's margin is cut to 1 s
//! (`BOXFLEET_BACKSTOP_MARGIN_SECONDS`) so the wedged check is ended 13 s in rather than 132 s.

use std::time::Duration;

use boxfleet_tests::node::{NodeProcess, launched_turn};

/// Launches `command` on `seat` (with an in-box deadline of `timeout` seconds): its turn.
fn launch(node: &NodeProcess, seat: &str, command: &str, timeout: Option<u64>) -> String {
    let timeout = timeout.map(|t| t.to_string());
    let mut args = vec!["launch", "--seat", seat, "--command", command];
    if let Some(timeout) = &timeout {
        args.extend(["--timeout", timeout]);
    }
    let (code, out, err) = node.cli(&args);
    assert_eq!(code, 0, "{seat}: {out}{err}");
    launched_turn(&out)
}

fn text(record: &serde_json::Value, field: &str) -> String {
    record[field].as_str().unwrap_or_default().to_owned()
}

fn transcript(record: &serde_json::Value) -> String {
    record["activity_transcript"]
        .as_array()
        .map(|lines| {
            lines
                .iter()
                .filter_map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eval_reports_table_each_ending_reads_as_what_it_establishes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start_with_env(
        "clocks",
        dir.path(),
        &[],
        &[("BOXFLEET_BACKSTOP_MARGIN_SECONDS", "1")],
    );
    let absent = launch(&node, "clock-absent", "echo checked; exit 0", None);
    let unread = launch(
        &node,
        "clock-unread",
        r#"echo partial; mkdir -p "$BOXFLEET_REPORT"; exit 0"#,
        None,
    );
    let deadline = launch(&node, "clock-deadline", "echo started; sleep 60", Some(2));
    // the check stops the `timeout` that holds its deadline, so only the backstop ends it
    let wedged = launch(
        &node,
        "clock-backstop",
        r#"echo started; kill -STOP "$PPID"; sleep 600"#,
        Some(2),
    );
    let within = Duration::from_secs(90);

    // a complete workspace lacks a file: the file is absent, and that is no failure
    let record = node.phase_record(&absent, within).await;
    assert_eq!(record["failed"], false, "{record:#}");
    assert_eq!(record["reason"], serde_json::Value::Null, "{record:#}");
    assert!(record.get("error").is_none(), "{record:#}");
    assert_eq!(record["exit_code"], 0);
    assert!(transcript(&record).contains("checked"), "{record:#}");

    // a failed read lacks a file: the engine does not know, an infrastructure error
    let record = node.phase_record(&unread, within).await;
    assert_eq!(record["failed"], true, "{record:#}");
    assert_eq!(record["reason"], "collect_incomplete", "{record:#}");
    let error = text(&record, "error");
    assert!(
        error.contains("report") && error.contains("not a regular file"),
        "{record:#}"
    );
    assert_eq!(record["exit_code"], 0, "the check's own exit is kept");
    assert!(transcript(&record).contains("partial"), "{record:#}");

    // the check exceeded its sandbox deadline: the check timed out
    let record = node.phase_record(&deadline, within).await;
    assert_eq!(record["failed"], true, "{record:#}");
    assert_eq!(record["exit_code"], 124, "{record:#}");
    assert_eq!(record["reason"], serde_json::Value::Null, "{record:#}");
    let error = text(&record, "error");
    assert!(error.contains("the check timed out"), "{record:#}");
    assert!(!error.contains("client timed out"), "{record:#}");
    assert!(transcript(&record).contains("started"), "{record:#}");

    // the client exceeded its backstop: the client timed out, execution state uncertain
    let record = node.phase_record(&wedged, within).await;
    assert_eq!(record["failed"], true, "{record:#}");
    assert_eq!(record["reason"], "backstop", "{record:#}");
    assert_eq!(record["exit_code"], serde_json::Value::Null, "{record:#}");
    let error = text(&record, "error");
    assert!(
        error.contains("the client timed out") && error.contains("execution state is uncertain"),
        "{record:#}"
    );
    assert!(!error.contains("the check timed out"), "{record:#}");
    assert!(transcript(&record).contains("started"), "{record:#}");
    assert!(
        record["duration_ms"]
            .as_i64()
            .is_some_and(|ms| ms >= 13_000),
        "ended by the backstop, 2 s + 10 s grace + 1 s margin in: {record:#}"
    );
}
