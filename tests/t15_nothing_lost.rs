//! Nothing lost, nothing doubled (issue 13), the scenarios the crash matrix does not run:
//!
//! - a launch repeated for a turn that already launched — its row still live, or ended and
//!   remembered by the completion ledger — gets the first launch's outcome, never a second job
//!   (DESIGN §6 I13). On `main` the repeat of an ended turn ran the job again: two phase
//!   records, two replies.
//!
//! - an answer given by naming a run while its seat runs another job waits on the seat's inbox
//!   (`sandbox_answer_given`, `pending`), and resumes the run once that job is done (spec line
//!   20: one coding run of a seat at a time; lines 476-478). On `main` it resumed at once, two
//!   of the seat's jobs in flight.
//!
//! - a launch whose node dies after its E2B box was made and before the box's id reached the
//!   row leaves no box: the box carries its launch in its metadata, and the reap of the
//!   launching row finds it by that and kills it. On `main` the row was reaped with
//!   `sandbox_id: null` while the box ran on, named by nothing, until E2B's timeout.
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

    fleet
        .until_settled("n1", &turn, "the run to settle", Duration::from_secs(60))
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

/// A launch's reply lost while its run asked, was answered and relaunched (simulation seed
/// 47760): the engine's repeat of that launch is told the job it started — the row now holds
/// the relaunch's — and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_launch_after_the_run_was_answered_gets_the_job_it_started() {
    let fleet = Fleet::start(&["n1"], 3);
    let turn = format!("turn-repeat-asked-{}", uuid::Uuid::new_v4().simple());
    let job = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "go on?" --to requester; else sleep 6; echo "Delivered: fix/asked" > "$BOXFLEET_REPORT"; fi"#;
    let (code, first) = launch(&fleet, "rep-asked", &turn, job);
    assert_eq!(code, 0, "{first}");
    let first_launch = launch_id_in(&first);
    until_parked(&fleet, &turn).await;
    let (code, out, err) = fleet.node("n1").cli(&[
        "answer",
        &turn,
        "--launch",
        &first_launch,
        "--text",
        "go on",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let relaunch = eventually(
        &fleet,
        "the answered job to run",
        Duration::from_secs(40),
        async || {
            let record = fleet.record("n1", &turn).await?;
            let launch_id = record["launch_id"].as_str()?.to_owned();
            (record["status"] == "running" && launch_id != first_launch).then_some(launch_id)
        },
    )
    .await;

    let (code, again) = launch(&fleet, "rep-asked", &turn, job);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        launch_id_in(&again),
        first_launch,
        "the repeat names the job it started, not the relaunch {relaunch}: {again}"
    );
    fleet
        .until_settled("n1", &turn, "the run to settle", Duration::from_secs(60))
        .await;
    let events = fleet.events_of("n1", &turn).await;
    let count = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(count("sandbox_run_started"), 2, "{events:#?}");
    assert_eq!(count("turn_replied"), 1, "{events:#?}");
}

/// Waits until `turn`'s run has asked and parked on its question.
async fn until_parked(fleet: &Fleet, turn: &str) {
    eventually(
        fleet,
        "the asking run to park",
        Duration::from_secs(40),
        async || {
            (status_of(fleet, turn).await.as_deref() == Some("awaiting_clarification"))
                .then_some(())
        },
    )
    .await;
}

/// The run's status as the node reports it (`None`: gone).
async fn status_of(fleet: &Fleet, turn: &str) -> Option<String> {
    let record = fleet.record("n1", turn).await?;
    record["status"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_by_naming_a_run_waits_while_its_seat_runs_another_job() {
    let fleet = Fleet::start(&["n1"], 3);
    let seat = "one-at-a-time";
    let asking = format!("turn-asks-{}", uuid::Uuid::new_v4().simple());
    let busy = format!("turn-busy-{}", uuid::Uuid::new_v4().simple());
    let ask = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "go on?" --to requester; else echo "Delivered: fix/answered" > "$BOXFLEET_REPORT"; fi"#;
    let (code, out) = launch(&fleet, seat, &asking, ask);
    assert_eq!(code, 0, "{out}");
    until_parked(&fleet, &asking).await;
    // a parked run frees its seat: another job starts there
    let (code, out) = launch(
        &fleet,
        seat,
        &busy,
        r#"sleep 6; echo done > "$BOXFLEET_REPORT""#,
    );
    assert_eq!(code, 0, "{out}");
    let parked = fleet.record("n1", &asking).await.expect("parked record");
    let launch_id = parked["launch_id"].as_str().expect("launch id").to_owned();
    let (code, out, err) = fleet
        .node("n1")
        .cli(&["answer", &asking, "--launch", &launch_id, "--text", "go on"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("pending"), "{out}{err}");
    // a second answer to the same question waits too; the first one taken wins
    let (code, out, err) = fleet
        .node("n1")
        .cli(&["answer", &asking, "--launch", &launch_id, "--text", "stop"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("pending"), "{out}{err}");

    // while the other job runs, the answer waits on the seat's inbox and the run on its
    // question (main resumed it at once: two of the seat's jobs in flight)
    for _ in 0..10 {
        let (a, b) = (
            status_of(&fleet, &asking).await,
            status_of(&fleet, &busy).await,
        );
        if b.as_deref() != Some("running") {
            break;
        }
        assert_eq!(
            a.as_deref(),
            Some("awaiting_clarification"),
            "the answer waits for the seat"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    eventually(
        &fleet,
        "both runs to settle",
        Duration::from_secs(90),
        async || {
            (status_of(&fleet, &asking).await.is_none() && status_of(&fleet, &busy).await.is_none())
                .then_some(())
        },
    )
    .await;
    let asked = fleet.events_of("n1", &asking).await;
    let busied = fleet.events_of("n1", &busy).await;
    let when = |e: &serde_json::Value| -> chrono::DateTime<chrono::Utc> {
        e["at"]
            .as_str()
            .and_then(|at| at.parse().ok())
            .expect("an event's instant")
    };
    let at = |events: &[serde_json::Value], kind: &str, nth: usize| {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(when)
            .nth(nth)
            .unwrap_or_else(|| panic!("no {kind} #{nth} in {events:#?}"))
    };
    let busy_done = at(&busied, "agent_phase_completed", 0);
    let mut starts: Vec<_> = asked
        .iter()
        .filter(|e| e["type"] == "sandbox_run_started")
        .map(when)
        .collect();
    starts.sort();
    assert_eq!(starts.len(), 2, "{asked:#?}");
    assert!(
        starts[1] >= busy_done,
        "the answered job started ({}) only after the seat's other job finished ({busy_done})",
        starts[1]
    );
    assert_eq!(
        asked.iter().filter(|e| e["type"] == "turn_replied").count(),
        1
    );
    let became: Vec<_> = asked
        .iter()
        .filter(|e| e["type"] == "sandbox_run_answered")
        .map(|e| e["body"]["became"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        became,
        ["resumed", "not_awaiting"],
        "the first answer resumed the run, the second found it answered: {asked:#?}"
    );
}

/// Draining the only node keeps what it holds polled and settled, says what will happen, takes
/// no new seat, and hands the seat to the next node that joins. On `main` its running run was
/// left unpolled until a restart, while it still launched for new seats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_the_only_node_keeps_its_runs_polled_and_takes_no_new_seat() {
    let mut fleet = Fleet::start(&["n1"], 3);
    let turn = format!("turn-drain-{}", uuid::Uuid::new_v4().simple());
    let job = r#"sleep 4; echo "Delivered: fix/drained" > "$BOXFLEET_REPORT""#;
    let (code, out) = launch(&fleet, "drain-only", &turn, job);
    assert_eq!(code, 0, "{out}");

    let (code, out, err) = fleet.node("n1").cli(&["drain", "n1"]);
    assert_eq!(code, 1, "not every seat could move: {out}{err}");
    assert!(
        err.contains("1 seat still held") && err.contains("keeps polling and settling"),
        "says what will happen: {out}{err}"
    );

    // the run it holds is still polled, collected and settled here
    fleet
        .until_settled(
            "n1",
            &turn,
            "the run to settle on the draining node",
            Duration::from_secs(60),
        )
        .await;
    let events = fleet.events_of("n1", &turn).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "agent_phase_completed")
            .count(),
        1,
        "{events:#?}"
    );

    // a new seat is refused, by name
    let (code, out) = launch(&fleet, "drain-new", "turn-drain-new", "true");
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("draining") && out.contains("start another node"),
        "{out}"
    );

    // a node joins: the kept seat is handed over, and new seats go to the new node
    fleet.add("n2");
    eventually(
        &fleet,
        "the draining node to hand its kept seat over",
        Duration::from_secs(60),
        async || {
            let holders = fleet.holders("n2").await;
            (holders.get("drain-only").map(String::as_str) != Some("n1")).then_some(())
        },
    )
    .await;
    let (code, out) = launch(&fleet, "drain-new", "turn-drain-new-2", "true");
    assert_eq!(code, 0, "the new node takes new seats: {out}");
    let holders = fleet.holders("n2").await;
    assert_eq!(
        holders.get("drain-new").map(String::as_str),
        Some("n2"),
        "{holders:?}"
    );
}

/// Three nodes on one host, each with a boxes dir of its own (the default, in its data dir):
/// SIGKILL the busiest, and the seats' new holders find its boxes where the records say they
/// live. On `main` each of its runs failed at once with `collect_unreachable` on the new holder,
/// though the boxes were alive on the same host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_host_failover_finds_boxes_in_another_nodes_own_boxes_dir() {
    const NODES: [&str; 3] = ["n1", "n2", "n3"];
    let mut fleet = Fleet::start(&[], 3);
    fleet.own_boxes = true;
    for node in NODES {
        fleet.add(node);
    }
    let seats = boxfleet_tests::fleet::seats_placed_on("n1", &NODES, 4, "own-dir");
    let mut turns = Vec::new();
    for (i, seat) in seats.iter().enumerate() {
        let turn = format!("turn-own-{i}-{}", uuid::Uuid::new_v4().simple());
        let job = format!(r#"sleep 6; echo "Delivered: fix/own-{i}" > "$BOXFLEET_REPORT""#);
        let (code, out) = launch(&fleet, seat, &turn, &job);
        assert_eq!(code, 0, "{out}");
        let record = fleet.record("n2", &turn).await.expect("record");
        assert_eq!(
            record["owner"].as_str().map(|o| o.starts_with("n1")),
            Some(true),
            "{record:#}"
        );
        assert!(
            record["boxes_dir"]
                .as_str()
                .is_some_and(|dir| dir.ends_with("n1/boxes")),
            "the record names where its box lives: {record:#}"
        );
        turns.push((turn, i));
    }
    fleet.node_mut("n1").kill();
    for (turn, i) in &turns {
        fleet
            .until_settled(
                "n2",
                turn,
                "the run to settle on a surviving node",
                Duration::from_secs(90),
            )
            .await;
        let events = fleet.events_of("n2", turn).await;
        assert!(
            !events.iter().any(|e| e["type"] == "sandbox_run_failed"),
            "no run failed: {events:#?}"
        );
        let phases: Vec<_> = events
            .iter()
            .filter(|e| e["type"] == "agent_phase_completed")
            .collect();
        assert_eq!(phases.len(), 1, "{events:#?}");
        let record = &phases[0]["body"]["record"];
        assert_eq!(record["failed"], false, "{record:#}");
        assert_eq!(
            record["delivered_refs"],
            serde_json::json!([format!("fix/own-{i}")]),
            "{record:#}"
        );
    }
}

/// An answer given by naming a run is announced once as what it became
/// (`sandbox_run_answered`: the route, who answered, `became: resumed`), and an answer naming
/// an older job of the run is refused inside the write that would record it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_announced_once_as_what_it_became() {
    let fleet = Fleet::start(&["n1"], 3);
    let turn = format!("turn-answered-{}", uuid::Uuid::new_v4().simple());
    let job = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "ship it?" --to requester; else echo "Delivered: fix/answered" > "$BOXFLEET_REPORT"; fi"#;
    let (code, out) = launch(&fleet, "answered", &turn, job);
    assert_eq!(code, 0, "{out}");
    let launch_id = fleet.parked_launch("n1", &turn).await;
    let (code, out, err) = fleet.node("n1").cli(&[
        "answer",
        &turn,
        "--launch",
        "launch-not-this-one",
        "--text",
        "no",
    ]);
    assert_ne!(
        code, 0,
        "an answer to another job is not recorded: {out}{err}"
    );
    let (code, out, err) = fleet
        .node("n1")
        .cli(&["answer", &turn, "--launch", &launch_id, "--text", "ship it"]);
    assert_eq!(code, 0, "{out}{err}");
    fleet
        .until_settled("n1", &turn, "the run to settle", Duration::from_secs(60))
        .await;
    let events = fleet.events_of("n1", &turn).await;
    let answered: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "sandbox_run_answered")
        .collect();
    assert_eq!(answered.len(), 1, "announced once: {events:#?}");
    let body = &answered[0]["body"];
    assert_eq!(body["became"], "resumed", "{body:#}");
    assert_eq!(body["route"], "operator", "{body:#}");
    assert_eq!(body["answered_by"], "admin", "{body:#}");
    // who answered as the chart names them (no chart here), and the credential they used
    assert_eq!(body["answered_by_kind"], "unlisted", "{body:#}");
    assert!(
        body["operator_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("admin:admin@")),
        "{body:#}"
    );
}

/// A launch killed between its E2B create and naming the box on its row leaves no box: the
/// seat's next holder finds the box by the launch label it was made with and kills it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_killed_after_its_e2b_box_was_made_leaves_no_box_behind() {
    let standin = boxfleet_tests::e2b_standin::E2bStandIn::start().await;
    let mut fleet = Fleet::start_configured(
        &boxfleet_tests::EtcdServer::shared().client_url(),
        &[],
        3,
        &standin.sandbox_config(),
    );
    let once = fleet.dir.path().join("crash");
    fleet.env = vec![
        (
            "BOXFLEET_CRASH_AT".into(),
            "launch.after_box_created".into(),
        ),
        ("BOXFLEET_CRASH_ONCE".into(), once.display().to_string()),
    ];
    fleet.add("n1");
    let (code, out) = launch(&fleet, "lost-e2b", "turn-lost-e2b", "sleep 600");
    assert_ne!(code, 0, "the launch's node died under it: {out}");
    // the CLI sees the connection drop a moment before the dying process can be reaped
    let died_by = std::time::Instant::now() + Duration::from_secs(10);
    while !fleet.node_mut("n1").has_exited() {
        assert!(std::time::Instant::now() < died_by, "the node died: {out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        standin.live_boxes().len(),
        1,
        "the box was made before the node died"
    );
    fleet.node_mut("n1").start_again();
    eventually(
        &fleet,
        "the launching row reaped and its unnamed box killed",
        Duration::from_secs(60),
        async || {
            (fleet.record("n1", "turn-lost-e2b").await.is_none() && standin.live_boxes().is_empty())
                .then_some(())
        },
    )
    .await;
    assert!(
        fleet.logs().contains("sandbox_unnamed_box_killed"),
        "the box was found by its launch"
    );
}

/// A chat reply whose answer the store will not record is handed back by deferral, keeping its
/// place, and offered again after each of the node's session renews — at most 10 times in one
/// process — then let go to the ordinary route, where it becomes the turn it looks like; the
/// parked run keeps waiting on its question (spec lines 440 and 452). On `main` a failed record
/// stopped the seat's inbox until something else happened to pump it, without bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_the_store_will_not_record_is_offered_again_then_let_go_to_the_ordinary_route() {
    let fleet = Fleet::start_armed(&["n1"], 3, "offer-record-fails");
    let ask = r#"boxfleet-ask "which way?" --to requester"#;
    let (code, out, err) = fleet.node("n1").cli(&[
        "deliver",
        "--seat",
        "deferred",
        "--conversation",
        "conv-deferred",
        "--text",
        ask,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let logs_say = |what: &str| fleet.logs().matches(what).count();
    eventually(
        &fleet,
        "the run to park",
        Duration::from_secs(60),
        async || (logs_say("sandbox_clarification_requested") == 1).then_some(()),
    )
    .await;
    let (code, out, err) = fleet.node("n1").cli(&[
        "deliver",
        "--seat",
        "deferred",
        "--conversation",
        "conv-deferred",
        "--text",
        "true",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    eventually(
        &fleet,
        "the reply to be let go after its attempts",
        Duration::from_secs(90),
        async || (logs_say("sandbox_answer_record_exhausted") == 1).then_some(()),
    )
    .await;
    assert_eq!(
        logs_say("sandbox_answer_deferred"),
        9,
        "nine hand-backs, each offered again after a renew"
    );
    eventually(
        &fleet,
        "the reply to run as an ordinary turn",
        Duration::from_secs(30),
        async || (logs_say("builtin_engine_launched") >= 2).then_some(()),
    )
    .await;
}

/// A recovery pass that fails part way — here the first pass of a restarted node, after it has
/// fenced the seat's runs — is run again (by the next placement pass), and the run it left is
/// collected as if the pass had never failed: nothing waits for the seat to change hands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_pass_that_fails_part_way_is_run_again() {
    let mut fleet = Fleet::start(&["n1"], 3);
    let turn = format!("turn-recover-{}", uuid::Uuid::new_v4().simple());
    let (code, out) = launch(
        &fleet,
        "recover-again",
        &turn,
        r#"sleep 4; echo "Delivered: fix/recovered" > "$BOXFLEET_REPORT""#,
    );
    assert_eq!(code, 0, "{out}");
    let node = fleet.node_mut("n1");
    node.kill();
    node.env
        .push(("BOXFLEET_FAILPOINTS".into(), "recovery-fails-once".into()));
    node.start_again();
    fleet
        .until_settled(
            "n1",
            &turn,
            "the run to be collected",
            Duration::from_secs(90),
        )
        .await;
    let logs = fleet.logs();
    assert!(
        logs.contains("recovery-fails-once"),
        "the first pass failed: {logs}"
    );
    assert_delivered(&fleet, &turn, "fix/recovered").await;
}

/// `turn`'s run published its phase record, naming `branch` as what it delivered; the events
/// read.
async fn assert_delivered(fleet: &Fleet, turn: &str, branch: &str) -> Vec<serde_json::Value> {
    let events = fleet.events_of("n1", turn).await;
    let phase = events
        .iter()
        .find(|e| e["type"] == "agent_phase_completed")
        .unwrap_or_else(|| panic!("a phase record: {events:#?}"));
    assert_eq!(
        phase["body"]["record"]["delivered_refs"],
        serde_json::json!([branch])
    );
    events
}

/// A node that gives a seat up for lost while a launch on it is in flight — a session renewal
/// that failed past the TTL while etcd kept the lease — never reaps that launch when it takes
/// the seat back: a recovery pass beside it read the launch's open row as abandoned and
/// reaped a job that was starting (seen in the etcd_cluster bench with quorum lost past the
/// TTL). Now the take-back waits for the launch, or the recovery pass keeps the launch it
/// finds in flight here. The run starts, runs and is collected with its findings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_given_up_mid_launch_is_taken_back_without_reaping_the_launch() {
    let fleet = Fleet::start_armed(&["n1"], 3, "seat-lost-mid-launch");
    let turn = format!("turn-lost-mid-{}", uuid::Uuid::new_v4().simple());
    let (code, out) = launch(
        &fleet,
        "lost-mid-launch",
        &turn,
        r#"sleep 1; echo "Delivered: fix/kept" > "$BOXFLEET_REPORT""#,
    );
    assert_eq!(code, 0, "the launch went through: {out}");
    fleet
        .until_settled(
            "n1",
            &turn,
            "the run to be collected",
            Duration::from_secs(60),
        )
        .await;
    let logs = fleet.logs();
    assert!(
        logs.contains("sandbox_seat_not_held"),
        "the failpoint gave the seat up: {logs}"
    );
    // either guard holds the launch: a placement pass defers the take-back while the launch
    // runs, or a pass that acquired the seat first (an inbox pass asking for the fence) keeps
    // the launch it finds in flight under the same epoch
    assert!(
        logs.contains("seat_take_back_deferred") || logs.contains("sandbox_launch_in_flight_kept"),
        "a pass met the seat while the launch was in flight, and held it off: {logs}"
    );
    let events = assert_delivered(&fleet, &turn, "fix/kept").await;
    assert!(
        !events
            .iter()
            .any(|e| e.to_string().contains("abandoned_tail")),
        "the launch was not reaped: {events:#?}"
    );
}

/// Every announcement the node at `addr` holds.
async fn all_events(addr: &str) -> Vec<serde_json::Value> {
    use futures::StreamExt;
    let mut runs = boxfleet_tests::grpc::runs(addr).await.expect("connect");
    let mut stream = runs
        .events(boxfleet_proto::v1::EventsRequest {
            from_revision: 0,
            follow: false,
        })
        .await
        .expect("events")
        .into_inner();
    let mut all = Vec::new();
    while let Some(event) = stream.next().await {
        all.push(serde_json::from_str(&event.expect("event").json).expect("event JSON"));
    }
    all
}

/// The hand-back of owed copies' crash point (`crash::ROUTES`, "hand-back of owed copies"): a
/// chat reply recorded on a parked run whose resume the engine keeps refusing is let go within
/// the run's pause TTL, as a copy the run owes its seat; the node dies right after queueing
/// the copy on the seat's inbox and before clearing it from the row (`hand_back.after_enqueue`).
/// Back, its recovery pass queues the copy again under the same delivery id and clears it: the
/// reply becomes the turn it looks like once, never twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_after_handing_a_reply_back_to_its_seat_works_it_once() {
    let mut fleet = Fleet::start_configured(
        &boxfleet_tests::EtcdServer::shared().client_url(),
        &[],
        3,
        "",
    );
    fleet.failpoints = "engine-answers-refused".into();
    let once = fleet.dir.path().join("crash");
    fleet.env = vec![
        ("BOXFLEET_CRASH_AT".into(), "hand_back.after_enqueue".into()),
        ("BOXFLEET_CRASH_ONCE".into(), once.display().to_string()),
    ];
    fleet.add("n1");
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        "handback",
        "--runner",
        "command",
        "--conversation",
        "conv-handback",
        "--pause-ttl",
        "4",
        "--command",
        r#"boxfleet-ask "which way?" --to requester"#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&out);
    fleet.parked_launch("n1", &turn).await;
    let (code, out, err) = fleet.node("n1").cli(&[
        "deliver",
        "--seat",
        "handback",
        "--conversation",
        "conv-handback",
        "--text",
        "echo handed-back-once",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let died_by = std::time::Instant::now() + Duration::from_secs(60);
    while !fleet.node_mut("n1").has_exited() {
        assert!(
            std::time::Instant::now() < died_by,
            "n1 to die at hand_back.after_enqueue:\n{}",
            fleet.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fleet.node_mut("n1").start_again();
    let addr = fleet.node("n1").addr();
    let started = eventually(
        &fleet,
        "the handed-back reply to run as its own turn",
        Duration::from_secs(60),
        async || {
            let events = all_events(&addr).await;
            let started: Vec<serde_json::Value> = events
                .into_iter()
                .filter(|e| {
                    e["type"] == "sandbox_run_started"
                        && e["body"]["task"] == "echo handed-back-once"
                })
                .collect();
            (!started.is_empty()).then_some(started)
        },
    )
    .await;
    // a second copy would be a second turn, launched a moment later
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again: Vec<serde_json::Value> = all_events(&addr)
        .await
        .into_iter()
        .filter(|e| {
            e["type"] == "sandbox_run_started" && e["body"]["task"] == "echo handed-back-once"
        })
        .collect();
    assert_eq!(started.len(), 1, "{started:#?}");
    assert_eq!(again.len(), 1, "the copy was worked once: {again:#?}");
}
