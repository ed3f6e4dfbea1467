//! Scenario: one node, used as a user uses it — the built `boxfleet` binary serving gRPC on
//! loopback, the CLI launching, a real `Engine.Attach` client resuming, taking and settling;
//! then a node SIGKILLed while its job runs, restarted on the same data dir, and the run
//! completed and resumed exactly once.

use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::node::NodeProcess;
use futures::StreamExt;
use tokio::sync::mpsc;

fn turn_of(launch_stdout: &str) -> (String, String) {
    boxfleet_tests::node::launched_turn_and_job(launch_stdout)
}

/// An external engine named `name` attached to the node at `addr`, serving every seat its
/// credential covers: its up channel (Hello sent) and its down stream.
async fn attach_engine(
    addr: &str,
    name: &str,
) -> (mpsc::Sender<pb::EngineUp>, tonic::Streaming<pb::EngineDown>) {
    let mut engine = boxfleet_tests::grpc::engine(addr).await.expect("connect");
    let (up_tx, up_rx) = mpsc::channel::<pb::EngineUp>(16);
    let hello = pb::Hello {
        engine: name.into(),
        seats: vec![],
        ..pb::Hello::default()
    };
    up_tx
        .send(pb::EngineUp {
            msg: Some(pb::engine_up::Msg::Hello(hello)),
        })
        .await
        .expect("hello");
    let down = engine
        .attach(tokio_stream::wrappers::ReceiverStream::new(up_rx))
        .await
        .expect("attach")
        .into_inner();
    (up_tx, down)
}

/// `Runs.Get` of one turn.
async fn get(addr: &str, turn_id: &str) -> pb::GetReply {
    let mut runs = boxfleet_tests::grpc::runs(addr).await.expect("connect");
    boxfleet_tests::grpc::get_turn(&mut runs, turn_id).await
}

async fn events_of(addr: &str, turn_id: &str) -> Vec<serde_json::Value> {
    let got = get(addr, turn_id).await;
    got.phase_records_json
        .iter()
        .chain(&got.events_json)
        .map(|json| serde_json::from_str(json).expect("event JSON"))
        .collect()
}

async fn record_gone(addr: &str, turn_id: &str) -> bool {
    get(addr, turn_id).await.record_json.is_empty()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_complete_resume_take_settle_over_grpc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("solo", dir.path(), &["--default-engine", "external"]);
    let addr = node.addr();

    println!("--- phase: a test engine attaches");
    let mut engine = boxfleet_tests::grpc::engine(&addr)
        .await
        .expect("connect engine");
    let (up_tx, up_rx) = mpsc::channel::<pb::EngineUp>(16);
    up_tx
        .send(pb::EngineUp {
            msg: Some(pb::engine_up::Msg::Hello(pb::Hello {
                engine: "test-engine".into(),
                seats: vec![],
                ..pb::Hello::default()
            })),
        })
        .await
        .expect("hello");
    let mut down = engine
        .attach(tokio_stream::wrappers::ReceiverStream::new(up_rx))
        .await
        .expect("attach")
        .into_inner();

    println!("--- phase: the CLI launches a command job");
    let job = r#"echo "working"; printf 'All green.\nDelivered: feature/retry-backoff\n' > "$BOXFLEET_REPORT""#;
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", job]);
    assert_eq!(code, 0, "launch failed: {out} {err}");
    let (turn_id, launch_id) = turn_of(&out);

    println!("--- phase: the completion reaches the attached engine as a resume");
    let resume = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let message = down
                .next()
                .await
                .expect("engine stream open")
                .expect("engine message");
            if let Some(pb::engine_down::Msg::Resume(resume)) = message.msg {
                return resume;
            }
        }
    })
    .await
    .expect("a resume within 30 s");
    assert_eq!(resume.turn_id, turn_id);
    assert_eq!(resume.launch_id, launch_id);
    assert_eq!(resume.kind, pb::resume::Kind::Findings as i32);
    assert!(resume.reply.contains("All green"), "{}", resume.reply);
    assert!(resume.succeeded);

    println!("--- phase: take, then settle finished");
    for msg in [
        pb::engine_up::Msg::Take(pb::Take {
            turn_id: turn_id.clone(),
            launch_id: launch_id.clone(),
        }),
        pb::engine_up::Msg::Settle(pb::Settle {
            turn_id: turn_id.clone(),
            launch_id: launch_id.clone(),
            outcome: Some(pb::settle::Outcome::Finished(pb::Finished {
                reply: "done".into(),
            })),
        }),
    ] {
        up_tx
            .send(pb::EngineUp { msg: Some(msg) })
            .await
            .expect("send");
    }
    boxfleet_tests::wait_until(
        "the settled run's record to be deleted",
        Duration::from_secs(20),
        async || record_gone(&addr, &turn_id).await,
    )
    .await;

    println!("--- phase: what the run left: one phase record with its refs, one start");
    let events = events_of(&addr, &turn_id).await;
    assert_eq!(count(&events, "agent_phase_completed"), 1, "{events:#?}");
    assert_eq!(count(&events, "sandbox_run_started"), 1, "{events:#?}");
    let phase = events
        .iter()
        .find(|e| e["type"] == "agent_phase_completed")
        .expect("phase");
    assert_eq!(
        phase["body"]["record"]["delivered_refs"],
        serde_json::json!(["feature/retry-backoff"])
    );

    println!("--- phase: the CLI reads it back");
    let (code, out, _) = node.cli(&["show", &turn_id, "--json"]);
    assert_eq!(code, 0, "{out}");
    let shown: serde_json::Value = serde_json::from_str(&out).expect("show --json is JSON");
    assert!(
        shown.to_string().contains("feature/retry-backoff"),
        "{shown}"
    );
    let (code, out, _) = node.cli(&["events", "--json"]);
    assert_eq!(code, 0);
    for line in out.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("one JSON event per line");
        assert!(
            event["type"].is_string() && event["id"].is_string(),
            "{event}"
        );
    }
    let (code, out, _) = node.cli(&["tree"]);
    assert_eq!(code, 0);
    assert!(out.contains("waiter") && out.contains("restarts="), "{out}");
    // the box's operations went through its Box actor, and the seat has its Seat actor
    assert!(out.contains("box/") && out.contains("seat/eng"), "{out}");

    println!("--- phase: gRPC health says every service is serving");
    let channel = tonic::transport::Endpoint::from_shared(addr.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect health");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for service in ["boxfleet.v1.Runs", "boxfleet.v1.Engine", "boxfleet.v1.Ops"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health check")
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "{service}"
        );
    }

    println!("--- phase: a coding run's wall-clock timeout is refused by name");
    for runner in ["claude-code", "opencode"] {
        let (code, out, err) = node.cli(&[
            "launch",
            "--seat",
            "eng",
            "--runner",
            runner,
            "--brief",
            "fix it",
            "--timeout",
            "60",
        ]);
        assert_ne!(code, 0, "{runner} with --timeout launched: {out}");
        let said = format!("{out}{err}");
        assert!(
            said.contains(&format!("a {runner} run takes no timeout_seconds"))
                && said.contains("without --timeout"),
            "{runner}: {out} {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_job_recovers_the_run_and_resumes_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut node = NodeProcess::start("phoenix", dir.path(), &[]);
    let addr = node.addr();

    println!("--- phase: a job that takes a few seconds, resumed by the built-in engine");
    let job = r#"echo started; sleep 4; echo "Delivered: fix/after-restart" > "$BOXFLEET_REPORT"; echo finished"#;
    let (code, out, err) = node.cli(&["launch", "--seat", "ops", "--command", job]);
    assert_eq!(code, 0, "launch failed: {out} {err}");
    let (turn_id, _) = turn_of(&out);

    println!("--- phase: SIGKILL the node while the job runs");
    tokio::time::sleep(Duration::from_millis(800)).await;
    node.kill();
    assert!(!record_gone_offline(dir.path()), "sanity");

    println!("--- phase: start it again on the same data dir");
    node.restart();
    let started = Instant::now();
    boxfleet_tests::wait_until(
        "the run to be collected, resumed and settled",
        Duration::from_secs(60),
        async || record_gone(&addr, &turn_id).await,
    )
    .await;
    println!(
        "recovered and settled {:.1}s after the restart",
        started.elapsed().as_secs_f64()
    );

    let events = events_of(&addr, &turn_id).await;
    assert_eq!(
        count(&events, "agent_phase_completed"),
        1,
        "published once: {events:#?}"
    );
    assert_eq!(
        count(&events, "turn_replied"),
        1,
        "resumed once: {events:#?}"
    );
    assert_eq!(count(&events, "sandbox_run_failed"), 0, "{events:#?}");
    let phase = events
        .iter()
        .find(|e| e["type"] == "agent_phase_completed")
        .expect("phase");
    assert_eq!(phase["body"]["record"]["failed"], false, "{phase}");
    assert_eq!(
        phase["body"]["record"]["delivered_refs"],
        serde_json::json!(["fix/after-restart"])
    );
}

/// The node is down: nothing to ask. (The store is the node's own; this only checks the data
/// dir is still there for the restart.)
fn record_gone_offline(dir: &std::path::Path) -> bool {
    !dir.join("store").exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poller_that_panics_is_restarted_and_no_run_is_lost_or_doubled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start_with_env(
        "shaky",
        dir.path(),
        &[],
        &[("BOXFLEET_FAILPOINTS", "waiter-panic-once")],
    );
    let addr = node.addr();

    println!("--- phase: launch while the waiter's first tick panics");
    let job = r#"sleep 1; echo "Delivered: fix/poller" > "$BOXFLEET_REPORT""#;
    let (code, out, err) = node.cli(&["launch", "--seat", "qa", "--command", job]);
    assert_eq!(code, 0, "launch failed: {out} {err}");
    let (turn_id, _) = turn_of(&out);

    println!("--- phase: the restarted waiter finds the job; it is collected and resumed once");
    boxfleet_tests::wait_until("the run to settle", Duration::from_secs(60), async || {
        record_gone(&addr, &turn_id).await
    })
    .await;
    let events = events_of(&addr, &turn_id).await;
    assert_eq!(count(&events, "agent_phase_completed"), 1, "{events:#?}");
    assert_eq!(count(&events, "turn_replied"), 1, "{events:#?}");

    println!("--- phase: the tree shows the waiter's restart");
    let (code, out, _) = node.cli(&["tree", "--json"]);
    assert_eq!(code, 0, "{out}");
    let tree: serde_json::Value = serde_json::from_str(&out).expect("tree --json is JSON");
    let waiter = find_actor(&tree, "waiter").unwrap_or_else(|| panic!("no waiter in {tree:#}"));
    assert_eq!(waiter["restarts"], 1, "{waiter:#}");
    assert!(
        waiter["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("waiter-panic-once")),
        "{waiter:#}"
    );
}

/// Finds an actor whose name ends with `name` anywhere in a `tree --json` document.
fn find_actor(value: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => {
            if map
                .get("name")
                .and_then(|n| n.as_str())
                .is_some_and(|n| n.ends_with(name))
            {
                return Some(value.clone());
            }
            map.values().find_map(|v| find_actor(v, name))
        }
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_actor(v, name)),
        _ => None,
    }
}

/// An attached engine that fails an answer's resume: retried after a second; once the run's
/// pause TTL has passed since the answer was recorded, the answer is let go — the run waits
/// on its question again and the answer, given by naming the run, is announced declined once
/// (a chat reply let go would go back to the seat as the ordinary message it is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_answer_resume_is_retried_then_let_go_and_announced_declined() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("retry", dir.path(), &["--default-engine", "external"]);
    let addr = node.addr();
    let (up_tx, mut down) = attach_engine(&addr, "flaky").await;
    // the engine's work; the notice that the job parked (a `Parked`) is not work
    let mut next = async move || -> pb::engine_down::Msg {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), down.next())
                .await
                .expect("engine work within 30 s")
                .expect("stream open")
                .expect("message")
                .msg
                .expect("a message");
            if !matches!(msg, pb::engine_down::Msg::Parked(_)) {
                return msg;
            }
        }
    };

    println!("--- phase: a job parks on a question (pause TTL 3 s)");
    let job = r#"boxfleet-ask "which region?" --to ops"#;
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "sre",
        "--pause-ttl",
        "3",
        "--command",
        job,
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let (turn_id, launch_id) = turn_of(&out);
    let mut runs = boxfleet_tests::grpc::runs(&addr).await.expect("connect");
    boxfleet_tests::wait_until("the run to park", Duration::from_secs(30), async || {
        let board = runs
            .board(pb::BoardRequest {
                audience: "ops".into(),
            })
            .await
            .expect("board");
        board.into_inner().runs.iter().any(|r| r.turn_id == turn_id)
    })
    .await;

    println!("--- phase: answered; the engine fails the first resume");
    let (code, out, _) = node.cli(&[
        "answer", &turn_id, "--launch", &launch_id, "--text", "eu-west", "--as", "ops",
    ]);
    assert_eq!(code, 0, "{out}");
    let pb::engine_down::Msg::Resume(first) = next().await else {
        panic!("expected a resume")
    };
    assert_eq!(first.kind, pb::resume::Kind::Answer as i32);
    assert_eq!(first.reply, "eu-west");
    let retry = |turn: &str, launch: &str| pb::EngineUp {
        msg: Some(pb::engine_up::Msg::Settle(pb::Settle {
            turn_id: turn.to_owned(),
            launch_id: launch.to_owned(),
            outcome: Some(pb::settle::Outcome::Retry(pb::Retry {
                error: "engine busy".into(),
            })),
        })),
    };
    up_tx.send(retry(&turn_id, &launch_id)).await.expect("send");
    let started = std::time::Instant::now();
    let pb::engine_down::Msg::Resume(second) = next().await else {
        panic!("expected a retried resume")
    };
    assert_eq!(second.reply, "eu-west");
    println!("retried after {:.1}s", started.elapsed().as_secs_f64());

    println!("--- phase: past the pause TTL the next failure lets the answer go");
    tokio::time::sleep(Duration::from_secs(3)).await;
    up_tx.send(retry(&turn_id, &launch_id)).await.expect("send");
    // an answer given by naming the run has no ordinary form to become: no copy of it reaches
    // the seat as a turn; it is announced declined, once, so the person knows to answer again
    let got = boxfleet_tests::wait_for(
        "the run to wait on its question again",
        Duration::from_secs(30),
        async || {
            let got = runs
                .get(pb::GetRequest {
                    turn_id: turn_id.clone(),
                })
                .await
                .ok()?
                .into_inner();
            let record: serde_json::Value = serde_json::from_str(&got.record_json).ok()?;
            (record["status"] == "awaiting_clarification").then_some(got)
        },
    )
    .await;
    let record: serde_json::Value = serde_json::from_str(&got.record_json).expect("record");
    assert!(record["hand_back"].is_null(), "no copy owed: {record:#}");
    let declined: Vec<serde_json::Value> = got
        .events_json
        .iter()
        .map(|json| serde_json::from_str(json).expect("event"))
        .filter(|e: &serde_json::Value| {
            e["type"] == "sandbox_run_answered" && e["body"]["became"] == "declined"
        })
        .collect();
    assert_eq!(declined.len(), 1, "announced declined once: {got:#?}");
    assert_eq!(declined[0]["body"]["answered_by"], "ops");
    let more = tokio::time::timeout(Duration::from_secs(2), next()).await;
    assert!(more.is_err(), "no turn for the let-go answer: {more:?}");
}

/// A busy seat takes nothing: a message delivered while its job runs waits in the inbox, in
/// order, and becomes a turn only once the job parks on its question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_for_a_busy_seat_waits_until_its_job_parks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("busy", dir.path(), &[]);
    let addr = node.addr();

    println!("--- phase: a job that works for 3 s, then asks");
    let job = r#"sleep 3; boxfleet-ask "merge it?" --to lead"#;
    let (code, out, err) = node.cli(&["launch", "--seat", "dev", "--command", job]);
    assert_eq!(code, 0, "{out} {err}");
    let (first_turn, _) = turn_of(&out);

    println!("--- phase: a message arrives while the seat is busy; it waits");
    let (code, out, _) = node.cli(&[
        "deliver",
        "--seat",
        "dev",
        "--conversation",
        "dm-lead",
        "--text",
        "echo second job",
        "--from",
        "lead",
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = node.cli(&["seats", "--json"]);
    assert_eq!(code, 0);
    let seats: serde_json::Value = serde_json::from_str(&out).expect("seats --json");
    let dev = &seats["seats"].as_array().expect("seats")[0];
    assert_eq!(
        (dev["active_runs"].as_u64(), dev["inbox"].as_u64()),
        (Some(1), Some(1)),
        "{seats:#}"
    );

    println!("--- phase: the job parks; the waiting message becomes the seat's next turn");
    let mut runs = boxfleet_tests::grpc::runs(&addr).await.expect("connect");
    let second = boxfleet_tests::wait_for(
        "the message to run as a turn",
        Duration::from_secs(40),
        async || {
            let events = runs
                .events(pb::EventsRequest {
                    from_revision: 0,
                    follow: false,
                })
                .await
                .ok()?
                .into_inner();
            let events: Vec<pb::Event> =
                events.filter_map(|e| async move { e.ok() }).collect().await;
            events
                .into_iter()
                .find(|e| e.kind == "sandbox_run_started" && e.turn_id != first_turn)
                .map(|e| e.turn_id)
        },
    )
    .await;
    let board = runs
        .board(pb::BoardRequest::default())
        .await
        .expect("board")
        .into_inner();
    let first = board
        .runs
        .iter()
        .find(|r| r.turn_id == first_turn)
        .expect("the parked run");
    assert_eq!(first.status, "awaiting_clarification");
    assert_ne!(second, first_turn);
}

/// The pause reaper: a parked run's box is reclaimed once its pause TTL passes (the run reads
/// `reseed`); an answer then re-seeds a new box, told the branch the work was pushed to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_box_past_its_pause_ttl_is_reclaimed_and_the_answer_reseeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("reaper", dir.path(), &[]);
    let addr = node.addr();

    println!("--- phase: a job parks with a 2 s pause TTL");
    let job = r#"if [ -n "${BOXFLEET_ANSWER:-}" ]; then echo "Delivered: $BOXFLEET_BRANCH" > "$BOXFLEET_REPORT"; exit 0; fi
boxfleet-ask "keep going?" --to ops --branch wip/reaped"#;
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "ml",
        "--pause-ttl",
        "2",
        "--command",
        job,
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let (turn_id, launch_id) = turn_of(&out);
    let mut runs = boxfleet_tests::grpc::runs(&addr).await.expect("connect");
    let first_box = boxfleet_tests::wait_for(
        "the box to be reclaimed (reseed)",
        Duration::from_secs(40),
        async || {
            let board = runs
                .board(pb::BoardRequest::default())
                .await
                .ok()?
                .into_inner();
            board
                .runs
                .into_iter()
                .find(|r| r.turn_id == turn_id && r.status == "reseed")
                .map(|r| r.sandbox_id)
        },
    )
    .await;
    assert!(first_box.is_empty(), "a re-seed names no box");
    let boxes = std::fs::read_dir(dir.path().join("boxes"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(boxes, 0, "the paused box was reclaimed on disk");

    println!("--- phase: answered; the job re-seeds in a new box with the branch");
    let (code, out, _) = node.cli(&["answer", &turn_id, "--launch", &launch_id, "--text", "yes"]);
    assert_eq!(code, 0, "{out}");
    boxfleet_tests::wait_until(
        "the re-seeded run to settle",
        Duration::from_secs(40),
        async || record_gone(&addr, &turn_id).await,
    )
    .await;
    let events = events_of(&addr, &turn_id).await;
    let phases: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "agent_phase_completed")
        .collect();
    assert_eq!(phases.len(), 2, "{events:#?}");
    let last = &phases[1]["body"]["record"];
    assert_eq!(
        last["delivered_refs"],
        serde_json::json!(["wip/reaped"]),
        "{last:#}"
    );
    assert_ne!(
        last["sandbox_id"], phases[0]["body"]["record"]["sandbox_id"],
        "a new box"
    );
    // each job is timed from its own launch: the re-seeded one started after the first was
    // collected, and its duration holds neither the first job nor the time parked
    let first = &phases[0]["body"]["record"];
    let started = |record: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(record["started_at"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("started_at: {e}: {record:#}"))
    };
    let first_collected =
        started(first) + chrono::Duration::milliseconds(first["duration_ms"].as_i64().unwrap_or(0));
    assert!(
        started(last) >= first_collected,
        "the re-seeded job's start {} is its own, after the first job's collection {first_collected}",
        started(last)
    );
    assert!(
        last["duration_ms"].as_i64().unwrap_or(i64::MAX)
            < (chrono::Utc::now() - started(first).with_timezone(&chrono::Utc)).num_milliseconds()
                - first["duration_ms"].as_i64().unwrap_or(0),
        "{last:#}"
    );
}

/// With a company document, a question's audience resolves against the org chart once, at the
/// park: `team` is the unit's lead and its people (not its other agents), and the board's
/// audience filter is "what is waiting on me".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_to_the_team_is_put_to_the_units_lead_and_people() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("node.yaml");
    std::fs::write(
        &config,
        "company:\n  providers:\n    sandbox: { local: {}, default_run_in: direct }\n  roles:\n    - { name: worker, sandbox: { enabled: true } }\n  seats:\n    - { handle: eng, role: worker, unit: platform, manager: alice }\n    - { handle: bot, role: worker, unit: platform }\n    - { handle: alice, kind: person, unit: platform }\n    - { handle: bob, kind: person, unit: platform }\n  units:\n    - { name: platform, lead: alice, members: [eng, bot, alice, bob] }\n",
    )
    .expect("write config");
    let node = NodeProcess::start(
        "org",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
    );

    let (code, out, err) = node.cli(&["launch", "--seat", "ghost", "--command", "true"]);
    assert_ne!(code, 0, "a seat outside the chart is refused: {out}");
    assert!(
        format!("{out}{err}").contains("company document"),
        "{out}{err}"
    );

    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--command",
        r#"boxfleet-ask "which index?" --to team"#,
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let (turn_id, _) = turn_of(&out);
    let mut runs = boxfleet_tests::grpc::runs(&node.addr())
        .await
        .expect("connect");
    let entry = boxfleet_tests::wait_for(
        "the question to reach bob",
        Duration::from_secs(30),
        async || {
            let board = runs
                .board(pb::BoardRequest {
                    audience: "bob".into(),
                })
                .await
                .ok()?
                .into_inner();
            board.runs.into_iter().find(|r| r.turn_id == turn_id)
        },
    )
    .await;
    assert_eq!(entry.audience, "team");
    assert_eq!(
        entry.audience_handles,
        ["alice", "bob"],
        "the unit's lead and people, not bot"
    );
}

/// An external engine that takes a resume and goes away before it settles it leaves no claim
/// behind: what it took may have been used, so the run is not handed back for a retry but
/// ended `abandoned_tail` at once, announced once, and the seat takes work again. On `main` the
/// claim stayed `resumed` — nothing polls, answers or expires one — until the seat changed
/// hands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_takes_a_resume_and_goes_away_leaves_its_run_ended_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("taker", dir.path(), &["--default-engine", "external"]);
    let addr = node.addr();
    let (up_tx, mut down) = attach_engine(&addr, "taker").await;

    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "taker",
        "--command",
        r#"echo done > "$BOXFLEET_REPORT""#,
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let (turn_id, _) = turn_of(&out);
    let resume = tokio::time::timeout(Duration::from_secs(30), down.next())
        .await
        .expect("a resume within 30 s")
        .expect("stream open")
        .expect("message")
        .msg;
    let Some(pb::engine_down::Msg::Resume(resume)) = resume else {
        panic!("expected the findings' resume, got {resume:?}")
    };
    up_tx
        .send(pb::EngineUp {
            msg: Some(pb::engine_up::Msg::Take(pb::Take {
                turn_id: resume.turn_id.clone(),
                launch_id: resume.launch_id.clone(),
            })),
        })
        .await
        .expect("take");
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(up_tx);
    drop(down);
    boxfleet_tests::wait_until("the run to be ended", Duration::from_secs(30), async || {
        get(&addr, &turn_id).await.record_json.is_empty()
    })
    .await;
    let got = get(&addr, &turn_id).await;
    let failed: Vec<serde_json::Value> = got
        .events_json
        .iter()
        .map(|json| serde_json::from_str(json).expect("event"))
        .filter(|e: &serde_json::Value| e["type"] == "sandbox_run_failed")
        .collect();
    assert_eq!(failed.len(), 1, "announced once: {got:#?}");
    assert_eq!(failed[0]["body"]["reason"], "abandoned_tail");
}
