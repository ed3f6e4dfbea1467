//! Scenario: live reload (issue 16; the spec's lines 40 and 81–85) through the `boxfleet`
//! binary. A node runs a job in `direct`; its config file is rewritten to a catalogue of E2B
//! alone (the stand-in) with a second seat: the node applies it on the file's change, the new
//! seat's job and the first seat's next job run in E2B, and the job already in `direct` — a
//! cell the revision removed — is still polled and collected through the retired backend. A
//! document that cannot be built is refused on the file's change and on `boxfleet reload`,
//! changing nothing; SIGHUP and `boxfleet reload` apply a good one. Each outcome is announced
//! (`config_applied`, `config_refused`).
//!
//! How the cells swap (retired, kept, rebuilt) is `lifecycle::cells::tests`.

use std::path::Path;
use std::time::{Duration, Instant};

use boxfleet_tests::e2b_standin::E2bStandIn;
use boxfleet_tests::node::{NodeProcess, launched_turn};

const DIRECT: &str = "company:\n  providers:\n    sandbox: { local: {}, default_run_in: direct }\n  roles:\n    - { name: eng, sandbox: { enabled: true } }\n  seats:\n    - { handle: a, role: eng }\n";

fn e2b_only(standin: &E2bStandIn) -> String {
    format!(
        "company:\n  providers:\n    sandbox: {{ {} }}\n  roles:\n    - {{ name: eng, sandbox: {{ enabled: true }} }}\n  seats:\n    - {{ handle: a, role: eng }}\n    - {{ handle: b, role: eng }}\n",
        standin.sandbox_config()
    )
}

/// Waits until the node's log holds `needle` `times` times.
async fn logged(node: &NodeProcess, needle: &str, times: usize) {
    let started = Instant::now();
    while node.log().matches(needle).count() < times {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no {needle} (×{times}) in:\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Launches `command` for `seat` (once the seat's last run has let it go: a published phase
/// precedes the run's end) and returns the turn and the box's cell, read off the launch line's
/// box: the stand-in's boxes are E2B's.
async fn launch(
    node: &NodeProcess,
    standin: &E2bStandIn,
    seat: &str,
    command: &str,
) -> (String, &'static str) {
    let started = Instant::now();
    loop {
        let (code, out, err) = node.cli(&["launch", "--seat", seat, "--command", command]);
        if code == 0 {
            let turn = launched_turn(&out);
            let sandbox = out
                .split(" in box ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_default();
            let cell = if standin.keepalive(sandbox).is_some() {
                "e2b"
            } else {
                "direct"
            };
            return (turn, cell);
        }
        assert!(
            err.contains("refused (busy)") && started.elapsed() < Duration::from_secs(30),
            "{out}{err}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn write(path: &Path, body: &str) {
    // written whole and renamed into place, as an editor or a config manager does
    let next = path.with_extension("next");
    std::fs::write(&next, body).expect("write");
    std::fs::rename(&next, path).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_is_added_a_seat_moved_and_the_old_cell_removed_while_a_run_is_in_it() {
    let standin = E2bStandIn::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("node.yaml");
    write(&config, DIRECT);
    let node = NodeProcess::start(
        "reload",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
    );

    let (first, cell) = launch(
        &node,
        &standin,
        "a",
        "sleep 6; echo first > \"$BOXFLEET_REPORT\"",
    )
    .await;
    assert_eq!(cell, "direct");

    // the revision: E2B added, direct removed, seat b added — applied on the file's change
    write(&config, &e2b_only(&standin));
    logged(&node, "config_applied", 1).await;
    let log = node.log();
    assert!(
        log.contains("added e2b")
            && log.contains("retired direct")
            && log.contains("seats added b"),
        "{log}"
    );
    let (second, cell) = launch(&node, &standin, "b", "echo second > \"$BOXFLEET_REPORT\"").await;
    assert_eq!(cell, "e2b");
    let phase = node.phase_record(&second, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");

    // the run in the removed cell is polled and collected through the retired backend
    let phase = node.phase_record(&first, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
    assert!(
        phase["response"]
            .as_str()
            .unwrap_or_default()
            .contains("first"),
        "{phase:#}"
    );
    // and seat a's next job goes where the catalogue now says
    let (third, cell) = launch(&node, &standin, "a", "echo third > \"$BOXFLEET_REPORT\"").await;
    assert_eq!(cell, "e2b");
    node.phase_record(&third, Duration::from_secs(60)).await;

    // a document that cannot be built is refused whole: nothing changes
    write(
        &config,
        "company:\n  providers:\n    sandbox: {}\n  seats:\n    - { handle: a }\n",
    );
    logged(&node, "config_refused", 1).await;
    let (code, out, err) = node.cli(&["reload"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("refused") && err.contains("company.providers.sandbox: names no cell"),
        "{err}"
    );
    let (fourth, cell) = launch(&node, &standin, "b", "echo fourth > \"$BOXFLEET_REPORT\"").await;
    assert_eq!(cell, "e2b", "the refused revision changed nothing");
    node.phase_record(&fourth, Duration::from_secs(60)).await;

    // SIGHUP and `boxfleet reload` apply a good document; a removed seat is said
    std::fs::write(&config, DIRECT).expect("write");
    node.hangup();
    logged(&node, "trigger=\"sighup\"", 1).await;
    assert!(node.log().contains("removed b"), "{}", node.log());
    let (code, out, err) = node.cli(&["reload"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("applied: cells direct"), "{out}");
    let (code, out, err) = node.cli(&["events", "--json"]);
    assert_eq!(code, 0, "{err}");
    for kind in ["config_applied", "config_refused"] {
        assert!(out.contains(kind), "{kind} announced: {out}");
    }
}
