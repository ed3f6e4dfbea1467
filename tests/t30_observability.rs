//! Scenario: what an SRE opens (issue 18), against real node processes.
//!
//! - `/metrics` answers only a credential of the fleet, exposes every metric the README names,
//!   and its counters move when a run is launched, polled, collected, tailed and refused.
//! - Spans reach a local OTLP endpoint: one per launch, poll, collection, answer and settle,
//!   each under the launch's own `TRACEPARENT` and carrying the node, seat, turn, launch and
//!   sandbox ids; the seat's recovery runs inside whatever took the seat (here the launch).
//! - The live tail, through the gRPC API: the error stream while the job's output has said
//!   nothing, a reset when the output begins (another reading), a continuation for a viewer
//!   whose digest matches, and a reset for one whose digest does not.
//! - A TLS node serves the dashboard's API and `/metrics` over TLS (asking its own API over TLS
//!   as the viewer); plain HTTP gets nothing.
//!
//! The dashboard in a real browser is `t31_dashboard`.

use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::node::{NodeProcess, launched_turn_and_job};
use boxfleet_tests::otlp_collector::OtlpCollector;

/// Every metric the README lists.
const METRICS: [&str; 18] = [
    "boxfleet_runs",
    "boxfleet_launches_total",
    "boxfleet_polls_total",
    "boxfleet_poll_seconds",
    "boxfleet_collections_total",
    "boxfleet_store_txns_total",
    "boxfleet_store_txn_seconds",
    "boxfleet_store_reads_total",
    "boxfleet_store_keys_read_total",
    "boxfleet_store_retries_total",
    "boxfleet_lease_renewals_total",
    "boxfleet_seats_held",
    "boxfleet_actor_restarts_total",
    "boxfleet_tail_requests_total",
    "boxfleet_tail_readers",
    "boxfleet_tail_box_reads_total",
    "boxfleet_events_published_total",
    "boxfleet_redaction_bytes_total",
];

fn token(node: &NodeProcess) -> String {
    std::fs::read_to_string(node.token_file())
        .expect("the node's admin token")
        .trim()
        .to_owned()
}

async fn scrape(node: &NodeProcess, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(format!("{}/metrics", node.http_url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let reply = request.send().await.expect("GET /metrics");
    let status = reply.status().as_u16();
    (status, reply.text().await.expect("the body"))
}

/// The value of the sample `series` (its name and labels, as exposed), or 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_served_to_a_credential_and_move_with_the_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("metrics", dir.path(), &[]);
    let token = token(&node);
    let (status, body) = scrape(&node, None).await;
    assert_eq!(status, 401, "no credential: {body}");
    let (status, body) = scrape(&node, Some("not-a-token")).await;
    assert_eq!(status, 401, "a bad credential: {body}");
    let (status, before) = scrape(&node, Some(&token)).await;
    assert_eq!(status, 200, "{before}");
    for name in METRICS {
        // OpenMetrics names a counter's family without its `_total`
        let family = name.strip_suffix("_total").unwrap_or(name);
        assert!(
            before.contains(&format!("# TYPE {family} ")),
            "{name} is not exposed:\n{before}"
        );
    }
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "metered",
        "--runner",
        "command",
        "--command",
        "echo password=hunter2-metrics; sleep 2; echo done",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (turn, _) = launched_turn_and_job(&out);
    // a viewer looking: the owner's tail is asked while the job runs
    let (code, out, err) = node.cli(&["tail", &turn]);
    assert_eq!(code, 0, "tail: {out}{err}\n{}", node.log());
    // the seat runs that job: another launch for it is refused, busy
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "metered",
        "--runner",
        "command",
        "--command",
        "true",
    ]);
    assert_ne!(code, 0, "a busy seat refuses: {out}{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let (_, after) = scrape(&node, Some(&token)).await;
        if sample(
            &after,
            "boxfleet_collections_total{outcome=\"succeeded\",reason=\"\"}",
        ) >= 1.0
        {
            break after;
        }
        assert!(
            Instant::now() < deadline,
            "no collection counted:\n{after}\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    for (series, at_least) in [
        (
            "boxfleet_launches_total{outcome=\"launched\",class=\"\"}",
            1.0,
        ),
        (
            "boxfleet_launches_total{outcome=\"refused\",class=\"busy\"}",
            1.0,
        ),
        ("boxfleet_polls_total{outcome=\"done\"}", 1.0),
        ("boxfleet_poll_seconds_count", 1.0),
        ("boxfleet_store_txn_seconds_count", 5.0),
        (
            "boxfleet_events_published_total{type=\"sandbox_run_started\"}",
            1.0,
        ),
        (
            "boxfleet_events_published_total{type=\"agent_phase_completed\"}",
            1.0,
        ),
        ("boxfleet_tail_requests_total", 1.0),
        ("boxfleet_tail_box_reads_total{outcome=\"read\"}", 1.0),
        ("boxfleet_redaction_bytes_total{what=\"read\"}", 1.0),
        ("boxfleet_redaction_bytes_total{what=\"changed\"}", 1.0),
    ] {
        let (was, now) = (sample(&before, series), sample(&after, series));
        assert!(
            now >= at_least && now > was,
            "{series} did not move: {was} then {now}\n{after}"
        );
    }
    assert!(
        sample(&after, "boxfleet_seats_held") >= 1.0,
        "the seat the job ran on is held here: {after}"
    );
    assert!(
        sample(&after, "boxfleet_store_txns_total{outcome=\"applied\"}")
            > sample(&before, "boxfleet_store_txns_total{outcome=\"applied\"}"),
        "{after}"
    );
    assert!(
        after.contains("boxfleet_runs{status=\"running\"}"),
        "every status is exposed: {after}"
    );
}

/// The trace a launch carries, as an engine's turn span would hand it on.
const TURN_TRACE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_spans_reach_an_otlp_endpoint_under_the_turns_trace() {
    let collector = OtlpCollector::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start_with_env(
        "traced",
        dir.path(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url()),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ],
    );
    boxfleet_tests::grpc::register(&node.addr(), &node.token_file());
    let mut runs = boxfleet_tests::grpc::runs(&node.addr())
        .await
        .expect("runs");
    let ask = r#"if [ -z "$BOXFLEET_ANSWER" ]; then boxfleet-ask "which store?" --to requester; else echo "Findings: $BOXFLEET_ANSWER" > "$BOXFLEET_REPORT"; fi"#;
    let launched = runs
        .launch(pb::LaunchRequest {
            seat: "traced-seat".into(),
            runner: "command".into(),
            command: ask.into(),
            requester: "alice".into(),
            trace: TURN_TRACE.into(),
            ..pb::LaunchRequest::default()
        })
        .await
        .expect("launch")
        .into_inner();
    let Some(pb::launch_reply::Outcome::Launched(launched)) = launched.outcome else {
        panic!("not launched: {launched:?}\n{}", node.log());
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = runs
            .answer(pb::AnswerRequest {
                turn_id: launched.turn_id.clone(),
                text: "sqlite".into(),
                ..pb::AnswerRequest::default()
            })
            .await
            .expect("answer")
            .into_inner();
        if answer.outcome == "recorded" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never parked: {answer:?}\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let wanted = [
        "boxfleet.launch",
        "boxfleet.poll",
        "boxfleet.collect",
        "boxfleet.answer",
        "boxfleet.settle",
        "boxfleet.recover",
    ];
    let deadline = Instant::now() + Duration::from_secs(40);
    let spans = loop {
        let spans: Vec<_> = collector
            .exports()
            .iter()
            .filter(|e| e.signal == "traces")
            .flat_map(|e| e.spans())
            .collect();
        let settled = spans
            .iter()
            .any(|s| s.name == "boxfleet.settle" && s.attributes["turn_id"] == launched.turn_id);
        if settled && wanted.iter().all(|w| spans.iter().any(|s| s.name == *w)) {
            break spans;
        }
        let names: Vec<_> = spans.iter().map(|s| s.name.as_str()).collect();
        assert!(
            Instant::now() < deadline,
            "the spans that came: {names:?}\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    for span in spans.iter().filter(|s| s.name != "boxfleet.recover") {
        assert_eq!(span.service, "boxfleet", "{span:?}");
        assert_eq!(span.attributes["turn_id"], launched.turn_id, "{span:?}");
        assert_eq!(span.attributes["seat"], "traced-seat", "{span:?}");
        assert_eq!(span.attributes["node"], "traced", "{span:?}");
        assert!(!span.attributes["launch_id"].is_empty(), "{span:?}");
        assert_eq!(
            span.trace_id, "0af7651916cd43dd8448eb211c80319c",
            "under the turn's trace: {span:?}"
        );
        assert_eq!(span.parent_span_id, "b7ad6b7169203331", "{span:?}");
    }
    let collect = spans
        .iter()
        .find(|s| s.name == "boxfleet.collect")
        .expect("a collection");
    assert_eq!(collect.attributes["sandbox_id"], launched.sandbox_id);
    let recover = spans
        .iter()
        .find(|s| s.name == "boxfleet.recover")
        .expect("a recovery");
    assert_eq!(recover.attributes["seat"], "traced-seat");
    // the seat was taken for the launch, so its recovery ran inside the launch's span
    let launch = spans
        .iter()
        .find(|s| s.name == "boxfleet.launch")
        .expect("a launch");
    assert!(
        recover.parent_span_id.is_empty() || recover.parent_span_id == launch.span_id,
        "a recovery is a root, or inside what took the seat: {recover:?}"
    );
}

fn tail_request(turn: &str, held: Option<&pb::TailReply>, digest: Option<&str>) -> pb::TailRequest {
    pb::TailRequest {
        turn_id: turn.to_owned(),
        epoch: held.map_or(0, |h| h.epoch),
        after: held.map_or(0, |h| h.end),
        digest: digest
            .map(str::to_owned)
            .or_else(|| held.map(|h| h.digest.clone()))
            .unwrap_or_default(),
        budget_ms: 4_000,
        ..pb::TailRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tail_shows_the_error_stream_then_the_output_and_checks_the_viewers_digest() {
    use pb::tail_reply::Outcome;
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("tailed", dir.path(), &[]);
    boxfleet_tests::grpc::register(&node.addr(), &node.token_file());
    let runs = boxfleet_tests::grpc::runs(&node.addr())
        .await
        .expect("runs");
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "tailed-seat",
        "--runner",
        "command",
        "--command",
        "echo 'cli: starting slowly' >&2; sleep 4; echo out-1; echo out-2; sleep 30",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (turn, _) = launched_turn_and_job(&out);
    let ask = |request: pb::TailRequest| {
        let mut runs = runs.clone();
        async move { runs.tail(request).await.expect("tail").into_inner() }
    };
    // the output has said nothing: the error stream is shown, and said to be
    let deadline = Instant::now() + Duration::from_secs(10);
    let errors = loop {
        let reply = ask(tail_request(&turn, None, None)).await;
        if reply.text.contains("cli: starting slowly") {
            break reply;
        }
        assert!(Instant::now() < deadline, "{reply:?}\n{}", node.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(errors.outcome, Outcome::Tail as i32, "{errors:?}");
    assert!(errors.detail.contains("error stream"), "{errors:?}");
    // once the output says something, a viewer holding the error stream is reset onto it
    let deadline = Instant::now() + Duration::from_secs(15);
    let output = loop {
        let reply = ask(tail_request(&turn, Some(&errors), None)).await;
        if reply.text.contains("out-2") {
            break reply;
        }
        assert!(Instant::now() < deadline, "{reply:?}\n{}", node.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(output.outcome, Outcome::Reset as i32, "{output:?}");
    assert_ne!(output.epoch, errors.epoch, "another reading");
    assert!(!output.text.contains("starting slowly"), "{output:?}");
    // the viewer that holds what it was given continues, with nothing new
    let same = ask(tail_request(&turn, Some(&output), None)).await;
    assert_eq!(same.outcome, Outcome::Tail as i32, "{same:?}");
    assert_eq!((same.text.as_str(), same.start), ("", output.end));
    // one whose digest does not match the text there is reset, whatever its epoch says
    let wrong = ask(tail_request(&turn, Some(&output), Some("0123abcd"))).await;
    assert_eq!(wrong.outcome, Outcome::Reset as i32, "{wrong:?}");
    assert_eq!(wrong.text, output.text);
}

/// A node serving TLS serves its dashboard and metrics over TLS, asking its own API over TLS
/// as the viewer; plain HTTP gets nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_tls_node_serves_its_dashboard_and_metrics_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = boxfleet_tests::tls::TlsFiles::make(dir.path());
    let args = tls.node_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let data = dir.path().join("node");
    std::fs::create_dir_all(&data).expect("the data dir");
    let node = NodeProcess::start("secured", &data, &args);
    let token = token(&node);
    let https = node.http_url().replacen("http://", "https://", 1);
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&tls.ca).expect("the CA"))
        .expect("a PEM certificate");
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("a client");
    for path in ["/api/whoami", "/api/board", "/api/fleet", "/metrics"] {
        let reply = client
            .get(format!("{https}{path}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path} over TLS: {e}\n{}", node.log()));
        let status = reply.status();
        let body = reply.text().await.expect("the body");
        assert_eq!(status, 200, "{path}: {body}\n{}", node.log());
        if path == "/api/board" {
            let board: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            assert!(board["runs"].is_array(), "{body}");
        }
    }
    let plain = reqwest::get(format!("{}/api/board", node.http_url())).await;
    assert!(
        plain.is_err() || !plain.expect("a reply").status().is_success(),
        "plain HTTP to a TLS listener gets nothing"
    );
}
