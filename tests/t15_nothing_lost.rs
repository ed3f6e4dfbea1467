//! Nothing lost, nothing doubled (issue 13), the scenarios the crash matrix does not run:
//!
//! - a launch repeated for a turn that already launched — its row still live, or ended and
//!   remembered by the completion ledger — gets the first launch's outcome, never a second job
//!   (DESIGN §6 I13). On `main` the repeat of an ended turn ran the job again: two phase
//!   records, two replies.
//!
//! The crash points themselves are the `crash_matrix` benchmark program, which the suite runs
//! (a subset) as a test.

use std::time::Duration;

use boxfleet_tests::fleet::{Fleet, eventually};
use boxfleet_tests::node::launched_turn;

/// `boxfleet launch` of `command` on `seat` under `turn` through n1: (exit code, stdout+stderr).
fn launch(fleet: &Fleet, seat: &str, turn: &str, command: &str) -> (i32, String) {
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        seat,
        "--turn",
        turn,
        "--runner",
        "command",
        "--command",
        command,
    ]);
    (code, format!("{out}{err}"))
}

fn launch_id_in(out: &str) -> String {
    out.split_whitespace()
        .find(|word| word.starts_with("launch-"))
        .unwrap_or_default()
        .trim_end_matches([',', ')', ';'])
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_launch_of_a_turn_gets_the_first_outcome_and_never_a_second_job() {
    let fleet = Fleet::start(&["n1"], 3);
    let turn = format!("turn-repeat-{}", uuid::Uuid::new_v4().simple());
    let job = r#"sleep 2; echo "Delivered: fix/once" > "$BOXFLEET_REPORT""#;

    let (code, first) = launch(&fleet, "rep", &turn, job);
    assert_eq!(code, 0, "{first}");
    assert_eq!(launched_turn(&first), turn);
    let first_launch = launch_id_in(&first);
    assert!(!first_launch.is_empty(), "a launch id in: {first}");

    // while the run lives: the same job, not "busy"
    let (code, again) = launch(&fleet, "rep", &turn, job);
    assert_eq!(
        code, 0,
        "a repeat while the run lives is the first launch: {again}"
    );
    assert_eq!(launch_id_in(&again), first_launch, "{again}");

    // a repeat for another seat is refused by name
    let (code, other) = launch(&fleet, "someone-else", &turn, job);
    assert_ne!(code, 0, "{other}");
    assert!(other.contains("seat rep's"), "{other}");

    eventually(
        &fleet,
        "the run to settle",
        Duration::from_secs(60),
        async || fleet.record("n1", &turn).await.is_none().then_some(()),
    )
    .await;

    // ended: the ledger remembers the launch; the repeat starts nothing
    let (code, late) = launch(&fleet, "rep", &turn, job);
    assert_eq!(code, 0, "{late}");
    assert_eq!(launch_id_in(&late), first_launch, "{late}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        fleet.record("n1", &turn).await.is_none(),
        "no second run of the turn"
    );
    let events = fleet.events_of("n1", &turn).await;
    let count = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(count("sandbox_run_started"), 1, "{events:#?}");
    assert_eq!(count("agent_phase_completed"), 1, "{events:#?}");
    assert_eq!(count("turn_replied"), 1, "{events:#?}");
}
