//! What a box writes can never overflow a record, an event or the store (issue 24; spec lines
//! 290-297, DESIGN §11 I14). Each scenario runs on the shared test etcd, which runs with
//! etcd's default request limit (`--max-request-bytes` 1.5 MiB, gRPC's 2 MiB): on `main` a
//! report over ~2 MB was never published (`received message larger than max (4614576 vs.
//! 2097152)`) and a question over 1.5 MiB kept its run `running` for good, retrying its
//! collection every poll with its seat held.

use std::time::Duration;

use boxfleet_tests::EtcdServer;
use boxfleet_tests::anthropic_standin::{AnthropicStandin, SIDE_TEXT, StandinOptions};
use boxfleet_tests::fleet::Fleet;
use boxfleet_tests::node::{free_port, launched_turn};

/// The record's bounds (sandbox.MaxRunTextBytes, MaxQuestionBytes, MaxDeliveredRefBytes).
const RUN_TEXT_BYTES: usize = 256 * 1024;
const QUESTION_BYTES: usize = 16 * 1024;
const REF_BYTES: usize = 16 * 1024;

/// One node on the shared etcd whose seats' auxiliary model is `llm`: a stand-in's URL, or
/// `None` for one that cannot be reached (a closed port: connection refused), so an over-bound
/// piece is cut, as where no model can condense it.
fn fleet(llm: Option<&str>) -> Fleet {
    let closed = format!("http://127.0.0.1:{}", free_port());
    Fleet::start_with_llm(
        &EtcdServer::shared().client_url(),
        &["n1"],
        3,
        "",
        Some(llm.unwrap_or(&closed)),
    )
}

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

fn one_of(events: &[serde_json::Value], kind: &str) -> serde_json::Value {
    let found: Vec<_> = events.iter().filter(|e| e["type"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}: {events:#?}");
    found[0].clone()
}

/// A job's question written as the ask shim writes it, `question` last.
fn ask(audience: &str, question: &str) -> String {
    format!(
        "d=$HOME/.boxfleet/ask; mkdir -p $d; {audience} > $d/audience; {question} > $d/question"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_megabyte_report_with_two_thousand_refs_is_published_bounded_and_the_run_settles() {
    let fleet = fleet(None);
    let turn = launch(
        &fleet,
        "big-report",
        "{ head -c 2200000 /dev/zero | tr '\\0' r | fold -w 99; echo; } > \"$BOXFLEET_REPORT\"; \
         for i in $(seq 1 2000); do echo \"Delivered: https://github.com/acme/app/pull/$i\"; done >> \"$BOXFLEET_REPORT\"",
    );
    fleet
        .until_settled("n1", &turn, "the run to settle", Duration::from_secs(60))
        .await;
    let events = fleet.events_of("n1", &turn).await;
    let phase = one_of(&events, "agent_phase_completed");
    let record = &phase["body"]["record"];
    let response = record["response"].as_str().expect("a report");
    assert!(response.len() <= RUN_TEXT_BYTES, "{} bytes", response.len());
    assert!(response.starts_with(&"r".repeat(99)), "kept from its start");
    assert!(
        response.contains(" lines, ") && response.contains(" bytes left out]"),
        "the cut says what it left out: {}",
        &response[response.len().saturating_sub(300)..]
    );
    let refs = record["delivered_refs"].as_array().expect("refs");
    let listed: usize = refs
        .iter()
        .map(|r| r.as_str().unwrap_or("").len() + 1)
        .sum();
    assert!(listed <= REF_BYTES, "{listed} bytes of refs");
    let elided = record["delivered_refs_elided"].as_u64().expect("counted");
    assert_eq!(
        refs.len() as u64 + elided,
        2000,
        "every ref listed or counted"
    );
    // the turn's reply went out, bounded, and nothing on the way was past etcd's limit
    let reply = one_of(&events, "turn_replied");
    let text = reply["body"]["reply"].as_str().expect("reply");
    assert!(text.len() <= RUN_TEXT_BYTES, "{} bytes", text.len());
    assert!(
        text.contains("more delivered refs are not listed"),
        "said, never dropped unsaid"
    );
    assert!(
        !fleet.logs().contains("turn_reply_not_published"),
        "{}",
        fleet.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_megabyte_question_parks_its_run_bounded_to_whole_lines() {
    let fleet = fleet(None);
    let turn = launch(
        &fleet,
        "big-question",
        &ask("echo requester", "{ echo 'Which cap?'; seq 1 300000; }"),
    );
    fleet.parked_launch("n1", &turn).await;
    let record = fleet.record("n1", &turn).await.expect("parked");
    let question = record["question"]["text"].as_str().expect("a question");
    assert!(question.len() <= QUESTION_BYTES, "{} bytes", question.len());
    assert!(
        question.starts_with("Which cap?\n1\n2\n3\n"),
        "{}",
        &question[..40]
    );
    assert!(question.ends_with(" bytes left out]"), "its cut is said");
    let events = fleet.events_of("n1", &turn).await;
    let phase = one_of(&events, "agent_phase_completed");
    assert_eq!(phase["body"]["record"]["notes"].as_str(), Some(question));
    assert_eq!(phase["body"]["record"]["failed"], false);
    one_of(&events, "sandbox_clarification_requested");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_first_line_or_audience_is_past_the_bound_is_not_asked() {
    let fleet = fleet(None);
    let long_line = launch(
        &fleet,
        "long-line",
        &ask("echo requester", "head -c 20000 /dev/zero | tr '\\0' q"),
    );
    let long_audience = launch(
        &fleet,
        "long-audience",
        &ask(
            "head -c 1048576 /dev/zero | tr '\\0' a",
            "echo 'Which cap?'",
        ),
    );
    for (turn, said) in [
        (&long_line, "its first line alone is 20000 bytes"),
        (&long_audience, "its audience is 1048576 bytes"),
    ] {
        fleet
            .until_settled(
                "n1",
                turn,
                "the run to resume, not parked",
                Duration::from_secs(60),
            )
            .await;
        let events = fleet.events_of("n1", turn).await;
        let record = one_of(&events, "agent_phase_completed")["body"]["record"].clone();
        assert_eq!(record["failed"], true, "{record:#}");
        let error = record["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("was not asked") && error.contains(said),
            "{error}"
        );
        assert!(
            events
                .iter()
                .all(|e| e["type"] != "sandbox_clarification_requested"),
            "{events:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_their_bounds_a_report_and_a_question_are_condensed_by_the_auxiliary_model() {
    let standin = AnthropicStandin::start(StandinOptions::default());
    let fleet = fleet(Some(&standin.url()));
    let report = launch(
        &fleet,
        "condensed-report",
        "{ echo 'FINDING-ONE: the retry cap is wrong'; head -c 3000000 /dev/zero | tr '\\0' r | fold -w 99; echo; } > \"$BOXFLEET_REPORT\"",
    );
    let question = launch(
        &fleet,
        "condensed-question",
        &ask(
            "echo requester",
            "{ head -c 20000 /dev/zero | tr '\\0' q; echo; echo 'Which cap?'; }",
        ),
    );
    fleet
        .until_settled("n1", &report, "the run to settle", Duration::from_secs(60))
        .await;
    let events = fleet.events_of("n1", &report).await;
    let record = one_of(&events, "agent_phase_completed")["body"]["record"].clone();
    let response = record["response"].as_str().expect("a report");
    assert!(
        response.starts_with("[condensed by claude-fleet-test from "),
        "labelled as condensed: {}",
        &response[..response.len().min(300)]
    );
    assert!(
        response.ends_with(SIDE_TEXT),
        "the model's answer: {response}"
    );
    assert!(!response.contains("bytes left out"), "condensed, never cut");
    // the model was shown at most 2 MiB, from the report's start, under an instruction
    let asked: Vec<_> = standin
        .requests()
        .into_iter()
        .filter(|r| r.is_messages() && !r.has_tools)
        .collect();
    let shown = asked
        .iter()
        .map(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .find(|text| text.starts_with("FINDING-ONE"))
        .expect("the report was shown to the model");
    assert!(
        shown.len() <= 2 * 1024 * 1024,
        "{} bytes shown",
        shown.len()
    );
    assert!(asked.iter().any(|r| {
        r.body["system"]
            .as_str()
            .is_some_and(|s| s.contains("findings report"))
    }));
    // a question whose first line is past the bound is condensed and asked, not refused
    fleet.parked_launch("n1", &question).await;
    let parked = fleet.record("n1", &question).await.expect("parked");
    let text = parked["question"]["text"].as_str().expect("asked");
    assert!(text.starts_with(SIDE_TEXT), "{text}");
    assert!(
        text.contains("[condensed by claude-fleet-test from "),
        "{text}"
    );
}

/// The disk holding the store keeps its reserve between polls: a node polling every 60 s, its
/// reserve set 150 MiB under the disk's free space, runs a job that writes 400 MiB. The
/// reserve is looked at every second, so the job is ended (`disk_budget`, naming the reserve)
/// seconds after it crosses the reserve, long before the next poll would have seen it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_filling_the_stores_disk_is_ended_between_polls_for_the_reserve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stat = rustix::fs::statvfs(dir.path()).expect("statvfs");
    let free = stat.f_bavail * stat.f_frsize;
    let reserve = free.saturating_sub(150 << 20);
    let config = dir.path().join("node.yaml");
    std::fs::write(
        &config,
        format!(
            "node:\n  poll_interval_seconds: 60\ncompany:\n  providers:\n    sandbox:\n      default_run_in: direct\n      local: {{ store_reserve_bytes: {reserve} }}\n"
        ),
    )
    .expect("config");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let node = boxfleet_tests::node::UserNode::start(
        dir.path(),
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--listen",
            &listen,
            "--data-dir",
            "data",
        ],
        port,
        &dir.path().join("node.log"),
    )
    .with_token_file(&dir.path().join("data/admin.token"));
    let started = std::time::Instant::now();
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "filler",
        "--runner",
        "command",
        "--command",
        "for i in $(seq 1 400); do head -c 1048576 /dev/zero >> big.bin; done; sleep 120",
    ]);
    assert_eq!(code, 0, "{out}{err}\n{}", node.log());
    let turn = launched_turn(&out);
    let addr = format!("http://127.0.0.1:{port}");
    boxfleet_tests::grpc::register(&addr, &dir.path().join("data/admin.token"));
    let mut runs = boxfleet_tests::grpc::runs(&addr).await.expect("connect");
    let events = boxfleet_tests::wait_for(
        "the job to be ended for the store's reserve",
        Duration::from_secs(45),
        async || {
            let got = runs
                .get(boxfleet_proto::v1::GetRequest {
                    turn_id: turn.clone(),
                })
                .await
                .ok()?
                .into_inner();
            got.record_json.is_empty().then_some(got.phase_records_json)
        },
    )
    .await;
    let ended_after = started.elapsed();
    let phase: serde_json::Value = serde_json::from_str(&events[0]).expect("phase JSON");
    let record = &phase["body"]["record"];
    assert_eq!(record["failed"], true, "{record:#}");
    let error = record["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("disk_budget") && error.contains("local.store_reserve_bytes"),
        "{record:#}"
    );
    assert!(
        ended_after < Duration::from_secs(45),
        "ended after {ended_after:?}, inside the 60 s poll interval"
    );
    assert!(
        node.log().contains("store_reserve_breached"),
        "{}",
        node.log()
    );
}
