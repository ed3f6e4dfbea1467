//! Scenarios: the fleet on real etcd — three `boxfleet node` processes on loopback, as the
//! README's by-hand recipe runs them (one etcd, a shared boxes dir), driven by the `boxfleet`
//! CLI against any node.
//!
//! - a node SIGKILLed while its seats' runs are running, parked on a question, finishing and
//!   holding mail: every run is recovered by the others, each completion resumed once, each
//!   job charged once, each event announced once, and no box left without a record;
//! - a node drained: its seats move, no inbox message is lost or worked twice.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::fleet::{Fleet, JOB_TOKENS, eventually, seats_placed_on};
use boxfleet_tests::node::launched_turn;

const NODES: [&str; 3] = ["n1", "n2", "n3"];
const TTL: u64 = 3;

/// `Runs.Tail` of a turn, asked of `via`.
async fn tail_via(fleet: &Fleet, via: &str, turn: &str) -> pb::TailReply {
    let mut runs = boxfleet_tests::grpc::runs(&fleet.node(via).addr())
        .await
        .expect("connect");
    runs.tail(pb::TailRequest {
        turn_id: turn.to_owned(),
        budget_ms: 2000,
        ..pb::TailRequest::default()
    })
    .await
    .expect("tail")
    .into_inner()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

/// Launches through `via`; returns (turn, the node that answered).
fn launch(fleet: &Fleet, via: &str, args: &[&str]) -> (String, String) {
    let mut all = vec!["launch"];
    all.extend_from_slice(args);
    let (code, out, err) = fleet.node(via).cli(&all);
    assert_eq!(
        code,
        0,
        "launch {args:?} via {via}: {out}{err}\n{}",
        fleet.logs()
    );
    let node = out
        .split_whitespace()
        .skip_while(|w| *w != "on")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (launched_turn(&out), node)
}

async fn status_of(fleet: &Fleet, via: &str, turn: &str) -> Option<String> {
    fleet
        .record(via, turn)
        .await
        .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
}

/// Every turn's events: each launch's phase published once, the turn resumed once, nothing
/// failed; returns the number of phases.
async fn assert_once_each(fleet: &Fleet, via: &str, turn: &str) -> usize {
    let events = fleet.events_of(via, turn).await;
    let seat = events
        .first()
        .and_then(|e| e["seat"].as_str())
        .unwrap_or(turn)
        .to_owned();
    let failed =
        |events: &[serde_json::Value]| events.iter().any(|e| e["type"] == "sandbox_run_failed");
    if failed(&events) || !events.iter().any(|e| e["type"] == "agent_phase_completed") {
        // what each node said about the turn and its seat, for the failure below
        println!("----- the nodes on {turn} and seat {seat}:");
        for node in &fleet.nodes {
            for line in node.log().lines().filter(|l| {
                l.contains(turn)
                    || l.contains(&format!("seat={seat}"))
                    || l.contains(&format!("\"{seat}\""))
            }) {
                println!("[{}] {line}", node.id);
            }
        }
    }
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    for event in events
        .iter()
        .filter(|e| e["type"] == "agent_phase_completed")
    {
        *phases
            .entry(event["launch_id"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    assert!(
        !phases.is_empty(),
        "{turn}: no phase published: {events:#?}"
    );
    for (launch, n) in &phases {
        assert_eq!(
            *n, 1,
            "{turn}: launch {launch} published {n} times: {events:#?}"
        );
    }
    assert_eq!(
        count(&events, "turn_replied"),
        1,
        "{turn}: resumed once: {events:#?}"
    );
    assert_eq!(
        count(&events, "sandbox_run_failed"),
        0,
        "{turn}: {events:#?}"
    );
    // an event's id is derived from what it announces: a repeat would be the same id
    let ids: BTreeSet<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(
        ids.len(),
        events.len(),
        "{turn}: an event announced twice: {events:#?}"
    );
    phases.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_runs_are_recovered_by_the_others_exactly_once() {
    let mut fleet = Fleet::start(&NODES, TTL);
    // seats placed on n1, the node that will die, and one elsewhere that must not notice
    let doomed = seats_placed_on("n1", &NODES, 4, "kill");
    let bystander = seats_placed_on("n2", &NODES, 1, "kill").remove(0);
    let (running, finishing, asking, mailed) = (&doomed[0], &doomed[1], &doomed[2], &doomed[3]);

    println!("--- phase: runs launched through n2, each forwarded to the seat's node");
    let (run_long, on) = launch(
        &fleet,
        "n2",
        &[
            "--seat",
            running,
            "--brief",
            "fleet-wait go-long fleet-name long",
        ],
    );
    assert_eq!(on, "n1", "the launch was forwarded to the seat's node");
    let (run_finish, _) = launch(
        &fleet,
        "n3",
        &[
            "--seat",
            finishing,
            "--brief",
            "fleet-wait go-finish fleet-name finish",
        ],
    );
    let ask = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "ship it?" --to requester; else echo "Delivered: fix/answered" > "$BOXFLEET_REPORT"; fi"#;
    let (run_ask, _) = launch(
        &fleet,
        "n2",
        &["--seat", asking, "--runner", "command", "--command", ask],
    );
    let (run_mailed, _) = launch(
        &fleet,
        "n1",
        &[
            "--seat",
            mailed,
            "--brief",
            "fleet-wait go-mailed fleet-name mailed",
        ],
    );
    // mail for a busy seat waits in its inbox, through the handoff
    let (code, out, err) = fleet.node("n3").cli(&[
        "deliver",
        "--seat",
        mailed,
        "--conversation",
        "dm-ops",
        "--text",
        "echo mail-worked",
        "--from",
        "ops",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (run_bystander, on) = launch(
        &fleet,
        "n1",
        &[
            "--seat",
            &bystander,
            "--brief",
            "fleet-sleep 2 fleet-name bystander",
        ],
    );
    assert_eq!(on, "n2");

    eventually(
        &fleet,
        "the asking run to park",
        Duration::from_secs(40),
        async || {
            (status_of(&fleet, "n2", &run_ask).await.as_deref() == Some("awaiting_clarification"))
                .then_some(())
        },
    )
    .await;
    for turn in [&run_long, &run_finish, &run_mailed] {
        assert_eq!(
            status_of(&fleet, "n2", turn).await.as_deref(),
            Some("running"),
            "{turn}"
        );
    }

    println!("--- phase: a tail asked of n3 is read by the run's owner, n1");
    let tail = tail_via(&fleet, "n3", &run_ask).await;
    assert_eq!(
        tail.outcome,
        pb::tail_reply::Outcome::NotRunning as i32,
        "a parked run is not running: {tail:?}"
    );
    let tail = tail_via(&fleet, "n3", &run_long).await;
    assert_eq!(
        tail.outcome,
        pb::tail_reply::Outcome::Tail as i32,
        "{tail:?}"
    );

    println!("--- phase: SIGKILL n1 while its seats' runs are in flight");
    fleet.node_mut("n1").kill();
    // until its lease lapses n1 still holds the seat: the owner is silent, and says who
    let tail = tail_via(&fleet, "n3", &run_long).await;
    assert_eq!(
        (tail.outcome, tail.detail.as_str()),
        (pb::tail_reply::Outcome::OwnerSilent as i32, "n1"),
        "{tail:?}"
    );
    let killed = Instant::now();
    // one job finishes while nobody holds its seat; the others after the handoff
    fleet.signal("go-finish");
    let moved = eventually(
        &fleet,
        "n1's seats to be held by n2 and n3",
        Duration::from_secs(30),
        async || {
            let holders = fleet.holders("n2").await;
            doomed
                .iter()
                .all(|s| holders.get(s).is_some_and(|h| h != "n1"))
                .then_some(holders)
        },
    )
    .await;
    println!(
        "n1's seats held again {:.1}s after the kill (lease TTL {TTL}s): {moved:?}",
        killed.elapsed().as_secs_f64()
    );

    println!("--- phase: n1 is listed lost, and the takeovers and the loss are events");
    let listed = eventually(
        &fleet,
        "n1 listed lost",
        Duration::from_secs(15),
        async || {
            let (code, out, _) = fleet.node("n2").cli(&["nodes"]);
            (code == 0
                && out
                    .lines()
                    .any(|line| line.starts_with("n1 ") && line.contains("lost since ")))
            .then_some(out)
        },
    )
    .await;
    println!("{listed}");
    let events = eventually(
        &fleet,
        "the loss and every takeover announced",
        Duration::from_secs(15),
        async || {
            let (_, out, _) = fleet.node("n2").cli(&["events", "--json"]);
            let events: Vec<serde_json::Value> = out
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect();
            let taken = doomed.iter().all(|seat| {
                events.iter().any(|e| {
                    e["type"] == "seat_taken_over"
                        && e["body"]["seat"] == seat.as_str()
                        && e["body"]["from_node"] == "n1"
                })
            });
            (taken && events.iter().any(|e| e["type"] == "node_lost")).then_some(events)
        },
    )
    .await;
    let lost: Vec<_> = events.iter().filter(|e| e["type"] == "node_lost").collect();
    assert_eq!(lost.len(), 1, "one node_lost, whoever saw it: {lost:?}");
    assert_eq!(lost[0]["body"]["node"], "n1");

    fleet.signal("go-long");
    fleet.signal("go-mailed");
    println!("--- phase: the question is answered through n3, routed to its seat's new holder");
    let launch_id = fleet.record("n3", &run_ask).await.expect("parked record")["launch_id"]
        .as_str()
        .expect("launch id")
        .to_owned();
    let (code, out, err) = fleet.node("n3").cli(&[
        "answer",
        &run_ask,
        "--launch",
        &launch_id,
        "--text",
        "yes, ship it",
    ]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());

    println!("--- phase: every run completes, resumes and settles exactly once");
    let turns = [
        &run_long,
        &run_finish,
        &run_ask,
        &run_mailed,
        &run_bystander,
    ];
    eventually(
        &fleet,
        "every run to settle",
        Duration::from_secs(90),
        async || {
            for turn in turns {
                if fleet.record("n2", turn).await.is_some() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    let mut phases = BTreeMap::new();
    for turn in turns {
        phases.insert(turn.clone(), assert_once_each(&fleet, "n3", turn).await);
    }
    assert_eq!(
        phases[&run_ask], 2,
        "the question's job and the answered one"
    );

    println!("--- phase: the mail waited through the handoff and ran once");
    let mail_turn = eventually(
        &fleet,
        "the mail to run as a turn",
        Duration::from_secs(60),
        async || {
            let (_, out, _) = fleet.node("n2").cli(&["events", "--json"]);
            let started: Vec<String> = out
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|e| e["type"] == "sandbox_run_started" && e["seat"] == mailed.as_str())
                .filter_map(|e| e["turn_id"].as_str().map(str::to_owned))
                .filter(|t| *t != run_mailed)
                .collect();
            match started.len() {
                0 => None,
                1 => Some(started[0].clone()),
                n => panic!("the mail ran {n} times: {started:?}"),
            }
        },
    )
    .await;
    eventually(
        &fleet,
        "the mail's run to settle",
        Duration::from_secs(60),
        async || fleet.record("n2", &mail_turn).await.is_none().then_some(()),
    )
    .await;
    assert_once_each(&fleet, "n2", &mail_turn).await;

    println!("--- phase: each job charged once");
    let (input, output) = JOB_TOKENS;
    // (seat, jobs charged, jobs that spent tokens): the mail ran as a command job, which
    // spends none but is charged as a job all the same
    for (seat, jobs, spending) in [
        (running, 1, 1),
        (finishing, 1, 1),
        (mailed, 2, 1),
        (&bystander, 1, 1),
        (asking, 2, 0),
    ] {
        let (charges, i, o) = fleet.seat_spend(seat).await;
        assert_eq!(
            (charges, i, o),
            (jobs, spending * input, spending * output),
            "seat {seat}: charges, input, output"
        );
    }

    println!("--- phase: no box left without a record");
    let left = fleet.boxes_on_host();
    assert!(
        left.is_empty(),
        "boxes nothing names: {left:?}\n{}",
        fleet.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_hands_its_seats_over_and_no_mail_is_lost_or_doubled() {
    let fleet = Fleet::start(&NODES, TTL);
    let seats = seats_placed_on("n1", &NODES, 3, "drain");

    println!("--- phase: n1's seats each park a run and hold mail");
    let ask = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "go on?" --to requester; fi"#;
    let mut parked = Vec::new();
    for seat in &seats {
        let (turn, on) = launch(
            &fleet,
            "n3",
            &["--seat", seat, "--runner", "command", "--command", ask],
        );
        assert_eq!(on, "n1");
        parked.push(turn);
    }
    for turn in &parked {
        eventually(
            &fleet,
            "the run to park",
            Duration::from_secs(40),
            async || {
                (status_of(&fleet, "n2", turn).await.as_deref() == Some("awaiting_clarification"))
                    .then_some(())
            },
        )
        .await;
    }

    println!("--- phase: drain n1, asked of n2 (which passes it on)");
    let (code, out, err) = fleet.node("n2").cli(&["drain", "n1"]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    assert!(out.contains("released 3 seats"), "{out}");
    let (code, out, _) = fleet.node("n3").cli(&["nodes", "--json"]);
    assert_eq!(code, 0);
    let nodes: serde_json::Value = serde_json::from_str(&out).expect("nodes --json");
    let n1 = nodes["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["node"] == "n1")
        .expect("n1 listed")
        .clone();
    assert_eq!(
        (n1["draining"].as_bool(), n1["seats"].as_u64()),
        (Some(true), Some(0)),
        "{nodes:#}"
    );
    let holders = eventually(
        &fleet,
        "the seats to be taken",
        Duration::from_secs(20),
        async || {
            let holders = fleet.holders("n3").await;
            seats
                .iter()
                .all(|s| holders.get(s).is_some_and(|h| h != "n1"))
                .then_some(holders)
        },
    )
    .await;
    println!("after the drain: {holders:?}");
    let (code, out, err) = fleet.node("n2").cli(&["events", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|line| line.contains(r#""type":"node_draining""#)
                && line.contains(r#""node":"n1""#)),
        "the drain is an event: {out}"
    );
    assert!(
        !out.contains(r#""type":"seat_taken_over""#),
        "a handover is not a takeover: {out}"
    );

    println!("--- phase: mail and answers sent to n1 are routed to the seats' new holders");
    for (i, seat) in seats.iter().enumerate() {
        let text = format!("echo mail-{i}");
        let (code, out, err) = fleet.node("n1").cli(&[
            "deliver",
            "--seat",
            seat,
            "--conversation",
            "dm-ops",
            "--text",
            &text,
            "--from",
            "ops",
        ]);
        assert_eq!(code, 0, "{out}{err}");
    }
    for turn in &parked {
        let launch_id = fleet.record("n1", turn).await.expect("record")["launch_id"]
            .as_str()
            .expect("launch")
            .to_owned();
        let (code, out, err) = fleet
            .node("n1")
            .cli(&["answer", turn, "--launch", &launch_id, "--text", "yes"]);
        assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    }

    println!("--- phase: every answered run and every message runs exactly once");
    let mail_turns = eventually(
        &fleet,
        "each message to run once",
        Duration::from_secs(90),
        async || {
            let (_, out, _) = fleet.node("n2").cli(&["events", "--json"]);
            let events: Vec<serde_json::Value> = out
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            let mut by_seat: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for e in events.iter().filter(|e| e["type"] == "sandbox_run_started") {
                let turn = e["turn_id"].as_str().unwrap_or_default().to_owned();
                if !parked.contains(&turn) {
                    by_seat
                        .entry(e["seat"].as_str().unwrap_or_default().to_owned())
                        .or_default()
                        .push(turn);
                }
            }
            for (seat, turns) in &by_seat {
                assert!(
                    turns.len() <= 1,
                    "seat {seat}'s mail ran {} times: {turns:?}",
                    turns.len()
                );
            }
            (by_seat.len() == seats.len())
                .then(|| by_seat.into_values().flatten().collect::<Vec<_>>())
        },
    )
    .await;
    let all: Vec<&String> = parked.iter().chain(&mail_turns).collect();
    eventually(
        &fleet,
        "every run to settle",
        Duration::from_secs(90),
        async || {
            for turn in &all {
                if fleet.record("n2", turn).await.is_some() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    for turn in all {
        assert_once_each(&fleet, "n2", turn).await;
    }
    assert!(
        fleet.boxes_on_host().is_empty(),
        "{:?}",
        fleet.boxes_on_host()
    );
}

/// A graceful handoff settles what is in flight: a completion collected and resumed to the
/// engine, which has not taken it yet when the seat is drained, is taken and settled by the
/// old holder (the release waits for it), never reaped by the new holder as abandoned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_in_flight_when_its_seat_is_drained_settles_once_not_abandoned() {
    let names = ["n1", "n2"];
    // each node's first resume waits 4 s before the engine takes it
    let fleet = Fleet::start_armed(&names, TTL, "engine-resume-slow");
    let seat = seats_placed_on("n1", &names, 1, "inflight").remove(0);
    let (turn, on) = launch(
        &fleet,
        "n2",
        &[
            "--seat",
            &seat,
            "--runner",
            "command",
            "--command",
            r#"echo "Delivered: fix/in-flight" > "$BOXFLEET_REPORT""#,
        ],
    );
    assert_eq!(on, "n1");

    println!("--- phase: the job is done and its resume sits with n1's engine, untaken");
    eventually(
        &fleet,
        "the run to be resumed",
        Duration::from_secs(30),
        async || (status_of(&fleet, "n2", &turn).await.as_deref() == Some("resumed")).then_some(()),
    )
    .await;

    println!("--- phase: drain n1 while the resume is in flight");
    let (code, out, err) = fleet.node("n2").cli(&["drain", "n1"]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    assert!(out.contains("released 1 seat"), "{out}");

    eventually(
        &fleet,
        "the run to settle",
        Duration::from_secs(60),
        async || fleet.record("n2", &turn).await.is_none().then_some(()),
    )
    .await;
    assert_once_each(&fleet, "n2", &turn).await;
    let n1 = fleet.node("n1").log();
    assert!(
        !n1.contains("seat_released_unsettled") && !n1.contains("builtin_engine_resume_failed"),
        "{n1}"
    );
    assert!(
        fleet.boxes_on_host().is_empty(),
        "{:?}",
        fleet.boxes_on_host()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_etcd_stops_acting_and_none_of_its_old_writes_land() {
    let etcd = boxfleet_tests::EtcdServer::shared();
    let proxy =
        boxfleet_tests::proxy::TcpProxy::start(etcd.client_url().trim_start_matches("http://"))
            .await;
    let mut fleet = Fleet::start(&["n2", "n3"], TTL);
    fleet.add_on("n1", &proxy.url());
    let seats = seats_placed_on("n1", &NODES, 2, "cut");
    eventually(&fleet, "n1 to serve", Duration::from_secs(20), async || {
        (fleet.node("n1").cli(&["nodes"]).0 == 0).then_some(())
    })
    .await;

    println!("--- phase: n1's seats run a short job and park a question");
    let (working, on) = launch(
        &fleet,
        "n2",
        &[
            "--seat",
            &seats[0],
            "--brief",
            "fleet-wait go-cut fleet-name cut-off",
        ],
    );
    assert_eq!(on, "n1");
    let ask = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "go?" --to requester; fi"#;
    let (parked, _) = launch(
        &fleet,
        "n3",
        &["--seat", &seats[1], "--runner", "command", "--command", ask],
    );
    eventually(
        &fleet,
        "the question to park",
        Duration::from_secs(40),
        async || {
            (status_of(&fleet, "n2", &parked).await.as_deref() == Some("awaiting_clarification"))
                .then_some(())
        },
    )
    .await;

    println!("--- phase: cut n1 off from etcd; its job finishes while it cannot record that");
    assert_eq!(
        status_of(&fleet, "n2", &working).await.as_deref(),
        Some("running")
    );
    proxy.cut();
    let cut_at = Instant::now();
    // the job ends while its node cannot record that
    fleet.signal("go-cut");
    let holders = eventually(
        &fleet,
        "n1's seats to be taken over",
        Duration::from_secs(30),
        async || {
            let holders = fleet.holders("n2").await;
            seats
                .iter()
                .all(|s| holders.get(s).is_some_and(|h| h != "n1"))
                .then_some(holders)
        },
    )
    .await;
    println!(
        "taken over {:.1}s after the cut: {holders:?}",
        cut_at.elapsed().as_secs_f64()
    );
    let launch_id = fleet.record("n2", &parked).await.expect("parked")["launch_id"]
        .as_str()
        .expect("launch id")
        .to_owned();
    let (code, out, err) = fleet
        .node("n3")
        .cli(&["answer", &parked, "--launch", &launch_id, "--text", "go"]);
    assert_eq!(code, 0, "{out}{err}");
    // n1 stays cut off well past its lease, then comes back
    tokio::time::sleep(Duration::from_secs(3 * TTL).saturating_sub(cut_at.elapsed())).await;
    proxy.restore();

    println!("--- phase: every run settles exactly once; n1 rejoins with a new session");
    eventually(
        &fleet,
        "both runs to settle",
        Duration::from_secs(60),
        async || {
            for turn in [&working, &parked] {
                if fleet.record("n2", turn).await.is_some() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    assert_once_each(&fleet, "n2", &working).await;
    assert_eq!(assert_once_each(&fleet, "n2", &parked).await, 2);
    let (input, output) = JOB_TOKENS;
    assert_eq!(fleet.seat_spend(&seats[0]).await, (1, input, output));
    assert_eq!(fleet.seat_spend(&seats[1]).await, (2, 0, 0));
    eventually(
        &fleet,
        "n1 to open a new session",
        Duration::from_secs(30),
        async || {
            fleet
                .node("n1")
                .log()
                .contains("session_reopened")
                .then_some(())
        },
    )
    .await;
    let log = fleet.node("n1").log();
    assert!(
        log.contains("sandbox_seat_not_held"),
        "n1 dropped its seats:\n{log}"
    );
    assert!(
        fleet.boxes_on_host().is_empty(),
        "{:?}",
        fleet.boxes_on_host()
    );
}

/// One CLI call against the node at `addr`, as its admin: (exit code, stdout, stderr).
fn cli_at(addr: &str, args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(boxfleet_tests::node::boxfleet_bin())
        .args(args)
        .env("BOXFLEET_ADDR", addr)
        .env("BOXFLEET_TOKEN", boxfleet_tests::grpc::credential(addr))
        .output()
        .expect("run the boxfleet CLI");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_continuous_launches_loses_nothing() {
    let mut fleet = Fleet::start(&NODES, TTL);
    let addrs: Vec<String> = fleet.nodes.iter().map(|n| n.addr()).collect();
    let seats: Vec<String> = (0..6).map(|i| format!("roll-{i}")).collect();

    println!("--- phase: a launcher sends a job every ~300 ms through whichever node answers");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let launcher = {
        let (stop, addrs, seats) = (stop.clone(), addrs.clone(), seats.clone());
        std::thread::spawn(move || {
            // (turn, accepted): every turn tried, and whether its launch said "launched"
            let mut tried: Vec<(String, bool)> = Vec::new();
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let seat = &seats[i % seats.len()];
                let addr = &addrs[i % addrs.len()];
                let turn = format!("turn-roll-{i}");
                let job =
                    format!("sleep 1; echo \"Delivered: fix/roll-{i}\" > \"$BOXFLEET_REPORT\"");
                let (code, out, err) = cli_at(
                    addr,
                    &[
                        "launch",
                        "--seat",
                        seat,
                        "--turn",
                        &turn,
                        "--runner",
                        "command",
                        "--command",
                        &job,
                    ],
                );
                let accepted = code == 0 && out.contains("launched");
                if !(accepted || out.contains("busy") || err.contains("busy")) {
                    println!("launch {turn} via {addr}: {}{}", out.trim(), err.trim());
                }
                tried.push((turn, accepted));
                i += 1;
                std::thread::sleep(Duration::from_millis(300));
            }
            tried
        })
    };

    println!("--- phase: restart n1, n2, n3 in turn (SIGTERM, then start again)");
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in NODES {
        let node = fleet.node_mut(name);
        node.terminate();
        tokio::time::sleep(Duration::from_secs(1)).await;
        node.start_again();
        tokio::time::sleep(Duration::from_secs(4)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let tried = launcher.join().expect("launcher");
    let accepted: Vec<&String> = tried.iter().filter(|(_, a)| *a).map(|(t, _)| t).collect();
    println!(
        "{} launches tried, {} accepted",
        tried.len(),
        accepted.len()
    );
    assert!(
        accepted.len() >= 10,
        "too few launches got through: {tried:?}\n{}",
        fleet.logs()
    );

    println!("--- phase: every accepted run settles exactly once; no other run is left behind");
    eventually(
        &fleet,
        "every run to settle",
        Duration::from_secs(120),
        async || {
            for (turn, _) in &tried {
                if fleet.record("n2", turn).await.is_some() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    for turn in &accepted {
        assert_once_each(&fleet, "n2", turn).await;
    }
    for (turn, _) in tried.iter().filter(|(_, a)| !*a) {
        // a launch cut off by a restart may have written its row: then it was ended once
        let events = fleet.events_of("n2", turn).await;
        let ids: BTreeSet<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
        assert_eq!(ids.len(), events.len(), "{turn}: {events:#?}");
        assert!(
            count(&events, "agent_phase_completed") <= 1,
            "{turn}: {events:#?}"
        );
    }
    eventually(
        &fleet,
        "no box left without a record",
        Duration::from_secs(30),
        async || fleet.boxes_on_host().is_empty().then_some(()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_box_is_polled_by_the_duty_holder_and_collected_by_the_seat_holder() {
    use boxfleet_tests::e2b_standin::E2bStandIn;
    let standin = E2bStandIn::start().await;
    let fleet = Fleet::start_configured(
        &boxfleet_tests::EtcdServer::shared().client_url(),
        &NODES,
        TTL,
        &standin.sandbox_config(),
    );
    let duty = eventually(
        &fleet,
        "a node to take the poll duty",
        Duration::from_secs(20),
        async || fleet.duty_holder().await,
    )
    .await;
    // a seat held by a node without the duty: only a forwarded completion can finish its run
    let holder = NODES.iter().find(|n| **n != duty).expect("another node");
    let seat = seats_placed_on(holder, &NODES, 1, "remote").remove(0);
    println!("--- phase: duty on {duty}; seat {seat} on {holder}; a job in an e2b box");
    let job = r#"sleep 3; echo "Delivered: fix/remote" > "$BOXFLEET_REPORT""#;
    let (turn, on) = launch(
        &fleet,
        &duty,
        &["--seat", &seat, "--runner", "command", "--command", job],
    );
    assert_eq!(on, *holder);
    let record = fleet.record(holder, &turn).await.expect("record");
    assert_eq!(record["placement"], "e2b", "{record:#}");
    assert!(
        record.get("host").is_none(),
        "a remote box names no host: {record:#}"
    );

    println!("--- phase: the duty holder finds it done; the seat's holder collects it once");
    eventually(
        &fleet,
        "the run to settle",
        Duration::from_secs(60),
        async || fleet.record(holder, &turn).await.is_none().then_some(()),
    )
    .await;
    assert_once_each(&fleet, holder, &turn).await;
    let found = |node: &str| {
        fleet
            .node(node)
            .log()
            .lines()
            .any(|l| l.contains("sandbox_run_completed") && l.contains(turn.as_str()))
    };
    assert!(
        found(&duty),
        "the duty holder found the job done\n{}",
        fleet.logs()
    );
    // the duty holder told the seat's holder (which may also have seen it on its first poll
    // after acquiring the seat: the claim makes it one collection either way)
    assert!(
        !fleet
            .node(&duty)
            .log()
            .contains("sandbox_completion_not_forwarded"),
        "{}",
        fleet.logs()
    );
    let phase = fleet.events_of(holder, &turn).await;
    let phase = phase
        .iter()
        .find(|e| e["type"] == "agent_phase_completed")
        .expect("phase");
    assert_eq!(
        phase["body"]["record"]["delivered_refs"],
        serde_json::json!(["fix/remote"]),
        "{phase:#}"
    );
}
