//! A hostile or broken job cannot wedge its seat, and a box that cannot be reached is not
//! polled for ever (issue 13; spec lines 506, 511-513 and Failure modes). Each run ends with a
//! named reason inside the spec's bounds. On `main` each of these runs stayed `running` — for
//! 30+ minutes, past the 900 s box timeout, with a poll-failure line logged every tick — and
//! its seat was refused as busy.

use std::time::Duration;

use boxfleet_tests::e2b_standin::E2bStandIn;
use boxfleet_tests::fleet::{Fleet, eventually};
use boxfleet_tests::node::launched_turn;

/// `boxfleet launch` of `command` on `seat` through n1: the turn.
fn launch(fleet: &Fleet, seat: &str, command: &str) -> String {
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        seat,
        "--runner",
        "command",
        "--command",
        command,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    launched_turn(&format!("{out}{err}"))
}

/// One node on the shared etcd whose boxes are in a fresh E2B stand-in.
async fn e2b_fleet() -> (E2bStandIn, Fleet) {
    let standin = E2bStandIn::start().await;
    let fleet = Fleet::start_configured(
        &boxfleet_tests::EtcdServer::shared().client_url(),
        &["n1"],
        3,
        &standin.sandbox_config(),
    );
    (standin, fleet)
}

/// The box `turn`'s run names, once its job runs.
async fn running_box(fleet: &Fleet, turn: &str) -> String {
    let record = fleet.record("n1", turn).await.expect("record");
    let sandbox_id = record["sandbox_id"].as_str().expect("a box").to_owned();
    eventually(
        fleet,
        "the job to run",
        Duration::from_secs(30),
        async || {
            let record = fleet.record("n1", turn).await?;
            (record["status"] == "running").then_some(())
        },
    )
    .await;
    sandbox_id
}

/// The run settles (its row goes) within `bound`, and its phase record is the one it left.
async fn settled_phase(fleet: &Fleet, turn: &str, bound: Duration) -> serde_json::Value {
    fleet
        .until_settled("n1", turn, "the run to settle", bound)
        .await;
    let events = fleet.events_of("n1", turn).await;
    let phases: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "agent_phase_completed")
        .collect();
    assert_eq!(phases.len(), 1, "one phase record: {events:#?}");
    phases[0]["body"]["record"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_replaces_its_boxfleet_dir_with_a_file_ends_its_run() {
    let fleet = Fleet::start(&["n1"], 3);
    let turn = launch(
        &fleet,
        "wedge-dir",
        "rm -rf ~/.boxfleet; echo x > ~/.boxfleet",
    );
    let phase = settled_phase(&fleet, &turn, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], true, "{phase:#}");
    let error = phase["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("done") || error.contains(".boxfleet"),
        "the error names what could not be read: {phase:#}"
    );
    // the seat is free again: a next job runs
    let next = launch(&fleet, "wedge-dir", "echo fine > \"$BOXFLEET_REPORT\"");
    let phase = settled_phase(&fleet, &next, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_pipe_at_the_done_marker_with_its_wrapper_dead_ends_its_run() {
    let fleet = Fleet::start(&["n1"], 3);
    let job = r#"jobs="$(dirname "$BOXFLEET_REPORT")/jobs"
for dir in "$jobs"/*/; do rm -f "$dir/done"; mkfifo "$dir/done"; done
kill -9 $PPID"#;
    let turn = launch(&fleet, "wedge-fifo", job);
    let phase = settled_phase(&fleet, &turn, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], true, "{phase:#}");
    assert_eq!(phase["exit_code"], serde_json::Value::Null, "{phase:#}");
    let error = phase["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("named pipe"),
        "the error names the pipe: {phase:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_box_unreachable_for_good_is_declared_gone_and_its_run_ended_collect_unreachable() {
    let (standin, fleet) = e2b_fleet().await;
    let turn = launch(&fleet, "wedge-gone", "sleep 600");
    let sandbox_id = running_box(&fleet, &turn).await;

    println!("--- phase: the provider stops answering (a partition that does not heal)");
    standin.fail_next(u32::MAX);
    let started = std::time::Instant::now();
    let ending = eventually(
        &fleet,
        "the run to be ended collect_unreachable",
        Duration::from_secs(240),
        async || {
            let record = fleet.record("n1", &turn).await?;
            let ending = record.get("ending")?.clone();
            Some(ending)
        },
    )
    .await;
    let took = started.elapsed();
    assert_eq!(ending["reason"], "collect_unreachable", "{ending:#}");
    assert!(
        took >= Duration::from_secs(110),
        "the poll's minute and the collection's minute both passed first: {took:?}"
    );
    let log = fleet.node("n1").log();
    let lines = |event: &str| log.lines().filter(|l| l.contains(event)).count();
    assert!(lines("sandbox_connect_failed") >= 1, "{log}");
    assert!(
        lines("sandbox_connect_failed") <= 6,
        "a repeated failure is logged once a minute, not once a tick: {} lines\n{log}",
        lines("sandbox_connect_failed")
    );
    assert_eq!(lines("sandbox_box_declared_gone"), 1, "{log}");
    assert!(lines("sandbox_collect_unreachable") >= 1, "{log}");

    println!("--- phase: the provider answers again: the ending finishes, the box is killed");
    standin.fail_next(0);
    fleet
        .until_settled("n1", &turn, "the run to settle", Duration::from_secs(90))
        .await;
    assert_eq!(standin.is_paused(&sandbox_id), None, "the box is gone");
    let events = fleet.events_of("n1", &turn).await;
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "sandbox_run_failed")
        .collect();
    assert_eq!(failed.len(), 1, "announced once: {events:#?}");
    assert_eq!(failed[0]["body"]["reason"], "collect_unreachable");
}

/// A running run whose box the provider paused behind the node's back (an auto-pause, or a
/// collection that paused the box and handed its claim back) is sent to its record by the
/// poll, which wakes the box because the record still runs that job in it (spec line 511). On
/// `main` the poll was refused for ever and the run stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_runs_box_paused_behind_its_back_is_woken_and_the_job_finishes() {
    let (standin, fleet) = e2b_fleet().await;
    let turn = launch(
        &fleet,
        "wedge-paused",
        r#"sleep 6; echo "Delivered: fix/paused" > "$BOXFLEET_REPORT""#,
    );
    let sandbox_id = running_box(&fleet, &turn).await;
    standin.pause_behind(&sandbox_id);
    let phase = settled_phase(&fleet, &turn, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
    assert_eq!(phase["delivered_refs"], serde_json::json!(["fix/paused"]));
    let log = fleet.node("n1").log();
    assert!(log.contains("sandbox_paused_box_woken"), "{log}");
    assert!(!log.contains("sandbox_box_declared_gone"), "{log}");
}

/// The job started but its conversation never reached the record (the store refused the
/// commit): the run, still launching, is ended `suspension_unrecorded` at once, its box and job
/// killed, rather than left running with nothing able to collect it. On `main` it was ended
/// `launch_failed`, naming nothing of what went wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_the_store_refused_ends_the_run_and_kills_its_box() {
    let fleet = Fleet::start_armed(&["n1"], 3, "suspension-commit-refused");
    let marker = format!("unrecorded{}", std::process::id());
    let turn = format!("turn-unrecorded-{}", uuid::Uuid::new_v4().simple());
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        "wedge-unrecorded",
        "--turn",
        &turn,
        "--runner",
        "command",
        "--command",
        &format!(": {marker}; sleep 600"),
    ]);
    assert_ne!(code, 0, "the launch is not acknowledged: {out}{err}");
    fleet
        .until_settled("n1", &turn, "the run to be ended", Duration::from_secs(30))
        .await;
    let events = fleet.events_of("n1", &turn).await;
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "sandbox_run_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["body"]["reason"], "suspension_unrecorded");
    assert!(fleet.boxes_on_host().is_empty(), "the box is reclaimed");
    let left = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&marker))
                .unwrap_or(false)
        })
        .count();
    assert_eq!(left, 0, "the job is killed");
}

/// A job that asks which way on its first run and delivers `fix/reseeded` once answered.
const ASKS_THEN_DELIVERS: &str = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "which way?" --to requester; else echo "Delivered: fix/reseeded" > "$BOXFLEET_REPORT"; fi"#;

/// Launches [`ASKS_THEN_DELIVERS`] on `seat` with `pause_ttl_seconds: 0`: the turn.
fn launch_unpaused(fleet: &Fleet, seat: &str) -> String {
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        seat,
        "--runner",
        "command",
        "--command",
        ASKS_THEN_DELIVERS,
        "--pause-ttl",
        "0",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    launched_turn(&format!("{out}{err}"))
}

/// The run parked in `reseed` with no box held and none left on the host: its launch id.
async fn parked_in_reseed_with_no_box(fleet: &Fleet, turn: &str) -> String {
    let launch_id = eventually(
        fleet,
        "the run to park in reseed with its box reclaimed",
        Duration::from_secs(60),
        async || {
            let record = fleet.record("n1", turn).await?;
            (record["status"] == "reseed" && record.get("reclaim_owed").is_none())
                .then(|| record["launch_id"].as_str().unwrap_or_default().to_owned())
        },
    )
    .await;
    let record = fleet.record("n1", turn).await.expect("record");
    assert!(
        record.get("sandbox_id").is_none(),
        "no box held: {record:#}"
    );
    assert!(fleet.boxes_on_host().is_empty(), "the box is gone");
    launch_id
}

/// Answers the parked run; the re-seeded job delivers and the run settles.
async fn answered_reseed_delivers(fleet: &Fleet, turn: &str, launch_id: &str) {
    let (code, out, err) = fleet
        .node("n1")
        .cli(&["answer", turn, "--launch", launch_id, "--text", "left"]);
    assert_eq!(code, 0, "{out}{err}");
    let phase = eventually(
        fleet,
        "the re-seeded job to deliver",
        Duration::from_secs(60),
        async || {
            fleet.record("n1", turn).await.is_none().then_some(())?;
            let events = fleet.events_of("n1", turn).await;
            events
                .iter()
                .filter(|e| e["type"] == "agent_phase_completed")
                .map(|e| e["body"]["record"].clone())
                .find(|r| r["delivered_refs"] == serde_json::json!(["fix/reseeded"]))
        },
    )
    .await;
    assert_eq!(phase["failed"], false, "{phase:#}");
}

/// `pause_ttl_seconds: 0` holds no snapshot: the box is torn down as the run parks and the run
/// waits in `reseed`; the answer re-seeds it in a new box and the job delivers. On `main` the
/// box was held until the pause reaper's next tick found it, and a parked row whose pause
/// stamp had not landed was never reaped at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_ttl_of_zero_tears_the_box_down_as_the_run_parks_and_the_answer_reseeds() {
    let fleet = Fleet::start(&["n1"], 3);
    let turn = launch_unpaused(&fleet, "wedge-ttl0");
    let launch_id = parked_in_reseed_with_no_box(&fleet, &turn).await;
    answered_reseed_delivers(&fleet, &turn, &launch_id).await;
}

/// The pause reaper releases the box on the row first and kills it second, so an answer's
/// claim that lands first keeps its box; the released box stays named on the row
/// (`reclaim_owed`) until its kill is confirmed. The node is killed between the two: on its
/// restart the box is killed and cleared, and the answer still re-seeds. On `main` the kill
/// came first, and a claim racing the reaper resumed into a dead box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_between_the_reapers_release_and_its_kill_leaks_no_box() {
    let mut fleet = Fleet::start_configured(
        &boxfleet_tests::EtcdServer::shared().client_url(),
        &[],
        3,
        "",
    );
    let once = fleet.dir.path().join("crash");
    fleet.env = vec![
        ("BOXFLEET_CRASH_AT".into(), "reap.after_release".into()),
        ("BOXFLEET_CRASH_ONCE".into(), once.display().to_string()),
    ];
    fleet.add("n1");
    let turn = launch_unpaused(&fleet, "wedge-reap-crash");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !fleet.node_mut("n1").has_exited() {
        assert!(
            std::time::Instant::now() < deadline,
            "the node to die between the release and the kill:\n{}",
            fleet.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !fleet.boxes_on_host().is_empty(),
        "the released box is still alive when the node dies"
    );
    fleet.node_mut("n1").start_again();
    let launch_id = parked_in_reseed_with_no_box(&fleet, &turn).await;
    answered_reseed_delivers(&fleet, &turn, &launch_id).await;
}

/// The `sandbox_run_failed` events announced for `turn`.
async fn failures_of(fleet: &Fleet, turn: &str) -> Vec<serde_json::Value> {
    fleet
        .events_of("n1", turn)
        .await
        .into_iter()
        .filter(|e| e["type"] == "sandbox_run_failed")
        .collect()
}

/// A findings resume the engine keeps refusing (`Retry`) is offered again by the next poll at
/// most 10 times, counted on the row, and the run then ends `resume_broken` — its findings
/// charged and published once. On `main` the refused resume was offered again every poll
/// without bound and the seat stayed busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_findings_resume_the_engine_keeps_refusing_ends_the_run_resume_broken() {
    let fleet = Fleet::start_armed(&["n1"], 3, "engine-findings-refused");
    let turn = launch(&fleet, "wedge-refused", "echo done > \"$BOXFLEET_REPORT\"");
    let phase = settled_phase(&fleet, &turn, Duration::from_secs(120)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
    let failures = failures_of(&fleet, &turn).await;
    assert_eq!(failures.len(), 1, "announced once: {failures:#?}");
    let body = &failures[0]["body"];
    assert_eq!(body["reason"], "resume_broken", "{body:#}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("10 times"),
        "{body:#}"
    );
    assert_eq!(
        fleet.logs().matches("sandbox_resume_retried").count(),
        10,
        "ten refusals: nine handed back, the tenth ends the run"
    );
}

/// A resume that breaks before its turn began — the built-in engine panicking as it re-enters
/// the conversation — is not retried: the run ends `resume_broken`, announced once, and the
/// answer that drove it, given by naming the run, is announced gone (a chat reply would go back
/// to the seat as the ordinary message it is). On `main` the panic left the claim for the
/// seat's next recovery pass, which reaped it as an abandoned tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_that_panics_before_its_turn_ends_the_run_resume_broken_and_the_answer_is_gone() {
    let fleet = Fleet::start_armed(&["n1"], 3, "engine-resume-panics");
    let turn = launch(
        &fleet,
        "wedge-panic",
        r#"boxfleet-ask "which way?" --to requester"#,
    );
    let launch_id = fleet.parked_launch("n1", &turn).await;
    let (code, out, err) = fleet
        .node("n1")
        .cli(&["answer", &turn, "--launch", &launch_id, "--text", "true"]);
    assert_eq!(code, 0, "{out}{err}");
    fleet
        .until_settled(
            "n1",
            &turn,
            "the broken resume to end the run",
            Duration::from_secs(60),
        )
        .await;
    let failures = failures_of(&fleet, &turn).await;
    assert_eq!(failures.len(), 1, "announced once: {failures:#?}");
    let body = &failures[0]["body"];
    assert_eq!(body["reason"], "resume_broken", "{body:#}");
    assert_eq!(body["reply_went_back"], false, "{body:#}");
    let events = fleet.events_of("n1", &turn).await;
    let became: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "sandbox_run_answered")
        .map(|e| e["body"]["became"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(became, ["resumed", "gone"], "{events:#?}");
    assert!(fleet.logs().contains("sandbox_resume_panicked"));
}

/// An answer's resume the engine refuses is retried a second later, doubling to 30 s (DESIGN
/// §15), never at once. On `main` a fresh run driver read the record as it started, skipping
/// the delay: all 10 attempts were spent in ~55 ms and the answer let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_answer_resume_is_retried_on_its_spacing_not_at_once() {
    let fleet = Fleet::start_armed(&["n1"], 3, "engine-answers-refused");
    let turn = launch(
        &fleet,
        "wedge-spacing",
        r#"boxfleet-ask "which way?" --to requester"#,
    );
    let launch_id = fleet.parked_launch("n1", &turn).await;
    let answered = std::time::Instant::now();
    let (code, out, err) = fleet
        .node("n1")
        .cli(&["answer", &turn, "--launch", &launch_id, "--text", "left"]);
    assert_eq!(code, 0, "{out}{err}");
    let attempts = async || {
        let record = fleet.record("n1", &turn).await?;
        record["answer"]["attempts"].as_u64()
    };
    // attempts 1 (at once), 2 (+1 s), 3 (+2 s), 4 (+4 s): the fourth no sooner than 7 s on
    eventually(
        &fleet,
        "a fourth attempt",
        Duration::from_secs(60),
        async || (attempts().await? >= 4).then_some(()),
    )
    .await;
    let elapsed = answered.elapsed();
    assert!(
        elapsed >= Duration::from_secs(7),
        "four attempts in {elapsed:?}: the retries were not spaced"
    );
    let record = fleet.record("n1", &turn).await.expect("the run waits on");
    assert_ne!(
        record["status"], "awaiting_clarification",
        "the answer is not let go yet: {record:#}"
    );
}

/// A seat that leaves the company's agent seats — here made a person's — keeps its runs for its
/// retirement grace (24 h; 3 s here, through `BOXFLEET_SEAT_RETIREMENT_GRACE_SECONDS`), then its
/// runs are ended `seat_removed`, announced once, and its boxes reclaimed. On `main` a removed
/// seat's parked run waited on its question for ever, its box held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_made_a_persons_has_its_runs_ended_seat_removed_after_its_grace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("company.yaml");
    let chart = |kind: &str| {
        format!(
            "company:\n  providers:\n    sandbox: {{ local: {{}}, default_run_in: direct }}\n  roles:\n    - {{ name: worker, sandbox: {{ enabled: true }} }}\n  seats:\n    - {{ handle: eng, kind: {kind}, role: worker }}\n    - {{ handle: lead, kind: person }}\n"
        )
    };
    std::fs::write(&config, chart("agent")).expect("config");
    let config_arg = config.display().to_string();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let mut node = boxfleet_tests::node::NodeProcess::start_with_env(
        "retire",
        &data,
        &["--config", &config_arg],
        &[("BOXFLEET_SEAT_RETIREMENT_GRACE_SECONDS", "3")],
    );
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--command",
        r#"boxfleet-ask "which way?" --to lead"#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&format!("{out}{err}"));
    let record = async |node: &boxfleet_tests::node::NodeProcess| {
        let mut runs = boxfleet_tests::grpc::runs(&node.addr()).await.ok()?;
        let got = runs
            .get(boxfleet_proto::v1::GetRequest {
                turn_id: turn.clone(),
            })
            .await
            .ok()?
            .into_inner();
        serde_json::from_str::<serde_json::Value>(&got.record_json).ok()
    };
    boxfleet_tests::wait_until("the run to park", Duration::from_secs(60), async || {
        record(&node)
            .await
            .is_some_and(|r| r["status"] == "awaiting_clarification")
    })
    .await;
    std::fs::write(&config, chart("person")).expect("config");
    node.restart();
    boxfleet_tests::wait_until(
        "the removed seat's run to end",
        Duration::from_secs(60),
        async || node.log().contains("seat_removed"),
    )
    .await;
    boxfleet_tests::wait_until("the row to go", Duration::from_secs(30), async || {
        record(&node).await.is_none()
    })
    .await;
    assert!(node.log().contains("seat_retiring"), "{}", node.log());
}
