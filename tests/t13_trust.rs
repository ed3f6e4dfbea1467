//! Scenario: the trust boundary (DESIGN §13) as a caller meets it.
//!
//! 1. The matrix: every RPC of Runs, Engine, Ops and Fleet, called with no credential, an
//!    expired one, a forged one, one a retired key signed, and a valid one of every role (one
//!    of them scoped to another seat) — each allowed or refused exactly as the table says, and
//!    a refused call changes nothing: no run opened, no message queued, no answer recorded, no
//!    node drained.
//! 2. Answer authority on the CLI: an operator answers only as itself; an admin answers on a
//!    person's behalf and both are recorded.
//! 3. A node refuses to listen beyond loopback without TLS, unless told `--insecure-listen`,
//!    and then `boxfleet nodes` says it is insecure.
//! 4. Three nodes over mutual TLS: a launch through one node for seats the others hold is
//!    forwarded and collected; plain HTTP reaches nothing, and a Fleet call with a node's
//!    credential but no client certificate is refused.

use std::path::Path;
use std::time::{Duration, Instant};

use boxfleet_auth::keyring::{Key, fresh_secret_text};
use boxfleet_auth::{Claims, Keyring, Role};
use boxfleet_proto::v1 as pb;
use boxfleet_tests::grpc::{Authed, Bearer};
use boxfleet_tests::node::NodeProcess;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

const DAY: Duration = Duration::from_secs(86_400);

/// The chart the matrix runs against: `eng` is led by `alice`; `sink`'s work goes to an
/// external engine (none is attached for long, so what it is sent stays in its inbox).
const CHART: &str = "company:\n  providers:\n    sandbox: { local: {}, default_run_in: direct }\n  roles:\n    - { name: worker, sandbox: { enabled: true } }\n  seats:\n    - { handle: eng, kind: agent, role: worker, manager: alice }\n    - { handle: alice, kind: person }\n    - { handle: dave, kind: person }\n    - { handle: ops, kind: agent, role: worker }\n    - { handle: sink, kind: agent, role: worker, engine: external }\n";

/// How a call came out, as the caller reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    /// the trust boundary let it through (whatever the call then answered)
    Allowed,
    Unauthenticated,
    Denied,
}

fn got<T>(result: Result<T, tonic::Status>) -> Got {
    match result {
        Err(status) if status.code() == Code::Unauthenticated => Got::Unauthenticated,
        Err(status) if status.code() == Code::PermissionDenied => Got::Denied,
        _ => Got::Allowed,
    }
}

/// The keyring the node starts with — a signing key and a retired one — and a ring that still
/// signs with the retired key, as a leaked old credential would have been signed.
fn keyrings(path: &Path) -> (Keyring, Keyring) {
    let (current, old) = (fresh_secret_text(), fresh_secret_text());
    let ring = Keyring::new(
        vec![
            Key::from_text("k2", &current, false).expect("key"),
            Key::from_text("k1", &old, true).expect("key"),
        ],
        Some("k2"),
    )
    .expect("ring");
    ring.save(path).expect("save the keyring");
    let retired = Keyring::new(vec![Key::from_text("k1", &old, false).expect("key")], None)
        .expect("old ring");
    (ring, retired)
}

/// The credentials the matrix calls with, in its order.
fn credentials(ring: &Keyring, retired: &Keyring) -> Vec<(&'static str, Option<String>)> {
    let now = chrono::Utc::now();
    let issue = |sub: &str, role, seats: &[&str]| {
        let seats: Vec<String> = seats.iter().map(|s| (*s).to_owned()).collect();
        Some(ring.issue(sub, role, &seats, DAY, now))
    };
    let expired = ring.sign(&Claims {
        sub: "root".into(),
        role: Role::Admin,
        seats: Vec::new(),
        iat: now.timestamp() - 7200,
        exp: now.timestamp() - 3600,
        iss: "boxfleet".into(),
    });
    // a viewer's credential with its role rewritten to admin, the signature kept
    let viewer = ring.issue("vic", Role::Viewer, &[], DAY, now);
    let mut parts: Vec<String> = viewer.split('.').map(str::to_owned).collect();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let body = String::from_utf8(b64.decode(&parts[1]).expect("body")).expect("utf8");
    parts[1] = b64.encode(body.replace("\"viewer\"", "\"admin\""));
    vec![
        ("absent", None),
        ("expired", Some(expired)),
        ("forged", Some(parts.join("."))),
        (
            "retired",
            Some(retired.issue("root", Role::Admin, &[], DAY, now)),
        ),
        ("viewer", issue("vic", Role::Viewer, &[])),
        ("scoped", issue("oscar", Role::Operator, &["ops"])),
        ("engine", issue("bot", Role::Engine, &[])),
        ("operator", issue("alice", Role::Operator, &[])),
        ("admin", issue("root", Role::Admin, &[])),
        ("node", issue("n9", Role::Node, &[])),
    ]
}

/// The calls, in the matrix's order.
const CALLS: [&str; 17] = [
    "Runs.Launch",
    "Runs.Deliver",
    "Runs.Answer",
    "Runs.Get",
    "Runs.Board",
    "Runs.Tail",
    "Runs.Events",
    "Engine.Attach",
    "Ops.Tree",
    "Ops.Nodes",
    "Ops.Seats",
    "Ops.Drain",
    "Ops.Reload",
    "Ops.Budget",
    "Fleet.Ping",
    "Fleet.SeatDeliver",
    "Fleet.SeatLaunch",
];

/// The table, written out: what each credential gets from each call.
fn expected(credential: &str, call: &str) -> Got {
    use Got::{Allowed as A, Denied as D};
    if matches!(credential, "absent" | "expired" | "forged" | "retired") {
        return Got::Unauthenticated;
    }
    let reads = [
        "Runs.Board",
        "Runs.Events",
        "Ops.Tree",
        "Ops.Nodes",
        "Ops.Seats",
        "Ops.Budget",
    ];
    let eng_reads = ["Runs.Get", "Runs.Tail"];
    let fleet = call.starts_with("Fleet.");
    match credential {
        "admin" => A,
        "node" if fleet => A,
        "node" => D,
        _ if fleet || call == "Ops.Drain" || call == "Ops.Reload" => D,
        "viewer" if reads.contains(&call) || eng_reads.contains(&call) => A,
        "viewer" => D,
        // scoped to seat ops: every call about seat eng (or sink) is refused
        "scoped" if reads.contains(&call) => A,
        "scoped" => D,
        "engine" if call == "Runs.Answer" => D,
        "engine" => A,
        "operator" if call == "Engine.Attach" => D,
        "operator" => A,
        other => panic!("no row for {other}"),
    }
}

async fn channel(addr: &str) -> Channel {
    Endpoint::from_shared(addr.to_owned())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect")
}

/// A metadata-carrying request: with no credential, `authorization` is left off altogether.
fn request<T>(message: T, token: &Option<String>, caller: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
    }
    if let Some(caller) = caller {
        request.metadata_mut().insert(
            "x-boxfleet-caller",
            format!("Bearer {caller}").parse().expect("header"),
        );
    }
    request
}

/// Makes one call of the matrix as `name` with `token`.
async fn call(
    addr: &str,
    call: &str,
    (name, token): (&str, &Option<String>),
    parked: (&str, &str),
    admin: &str,
) -> Got {
    let ch = channel(addr).await;
    let mut runs = pb::runs_client::RunsClient::new(ch.clone());
    let mut ops = pb::ops_client::OpsClient::new(ch.clone());
    let mut fleet = pb::fleet_client::FleetClient::new(ch.clone());
    let (turn, launch) = parked;
    let launch_request = |turn_id: String| pb::LaunchRequest {
        seat: "eng".into(),
        turn_id,
        runner: "command".into(),
        command: "true".into(),
        ..Default::default()
    };
    let deliver = |delivery_id: String| pb::DeliverRequest {
        seat: "sink".into(),
        delivery_id,
        text: "hello".into(),
        ..Default::default()
    };
    match call {
        "Runs.Launch" => got(runs
            .launch(request(
                launch_request(format!("m-launch-{name}")),
                token,
                None,
            ))
            .await),
        "Runs.Deliver" => got(runs
            .deliver(request(deliver(format!("m-deliver-{name}")), token, None))
            .await),
        "Runs.Answer" => got(runs
            .answer(request(
                pb::AnswerRequest {
                    turn_id: turn.into(),
                    launch_id: launch.into(),
                    text: format!("pg, says {name}"),
                    as_whom: String::new(),
                },
                token,
                None,
            ))
            .await),
        "Runs.Get" => got(runs
            .get(request(
                pb::GetRequest {
                    turn_id: turn.into(),
                },
                token,
                None,
            ))
            .await),
        "Runs.Board" => got(runs
            .board(request(pb::BoardRequest::default(), token, None))
            .await),
        "Runs.Tail" => got(runs
            .tail(request(
                pb::TailRequest {
                    turn_id: turn.into(),
                    ..Default::default()
                },
                token,
                None,
            ))
            .await),
        "Runs.Events" => got(runs
            .events(request(pb::EventsRequest::default(), token, None))
            .await),
        "Engine.Attach" => {
            let mut engine = pb::engine_client::EngineClient::new(ch.clone());
            let hello = pb::EngineUp {
                msg: Some(pb::engine_up::Msg::Hello(pb::Hello {
                    engine: format!("m-{name}"),
                    seats: vec!["sink".into()],
                    ..pb::Hello::default()
                })),
            };
            let up = futures::stream::iter(vec![hello]);
            got(engine.attach(request(up, token, None)).await)
        }
        "Ops.Tree" => got(ops
            .tree(request(pb::TreeRequest::default(), token, None))
            .await),
        "Ops.Nodes" => got(ops.nodes(request(pb::NodesRequest {}, token, None)).await),
        "Ops.Seats" => got(ops.seats(request(pb::SeatsRequest {}, token, None)).await),
        "Ops.Drain" => got(ops
            .drain(request(
                pb::DrainRequest {
                    node: "nobody".into(),
                },
                token,
                None,
            ))
            .await),
        "Ops.Reload" => got(ops.reload(request(pb::ReloadRequest {}, token, None)).await),
        "Ops.Budget" => got(ops
            .budget(request(pb::BudgetRequest::default(), token, None))
            .await),
        "Fleet.Ping" => got(fleet.ping(request(pb::PingRequest {}, token, None)).await),
        "Fleet.SeatDeliver" => got(fleet
            .seat_deliver(request(
                deliver(format!("m-fdeliver-{name}")),
                token,
                Some(admin),
            ))
            .await),
        "Fleet.SeatLaunch" => got(fleet
            .seat_launch(request(
                launch_request(format!("m-flaunch-{name}")),
                token,
                Some(admin),
            ))
            .await),
        other => panic!("no call {other}"),
    }
}

async fn runs_as(addr: &str, token: &str) -> pb::runs_client::RunsClient<Authed> {
    pb::runs_client::RunsClient::with_interceptor(channel(addr).await, Bearer::new(token))
}

/// Waits until the run `turn` is parked on a question; returns its job.
async fn parked_job(runs: &mut pb::runs_client::RunsClient<Authed>, turn: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = runs
            .get(pb::GetRequest {
                turn_id: turn.into(),
            })
            .await
            .expect("get")
            .into_inner();
        if let Ok(record) = serde_json::from_str::<serde_json::Value>(&got.record_json)
            && record["status"] == "awaiting_clarification"
        {
            return record["launch_id"].as_str().unwrap_or_default().to_owned();
        }
        assert!(Instant::now() < deadline, "run {turn} never parked");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_by_every_credential_is_allowed_or_refused_as_the_table_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keyring = dir.path().join("keyring.json");
    let (ring, retired) = keyrings(&keyring);
    let config = dir.path().join("chart.yaml");
    std::fs::write(&config, CHART).expect("chart");
    let node = NodeProcess::start(
        "trust",
        dir.path(),
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--keyring",
            keyring.to_str().expect("utf-8"),
        ],
    );
    let addr = node.addr();
    let creds = credentials(&ring, &retired);
    let admin = creds
        .iter()
        .find(|(name, _)| *name == "admin")
        .and_then(|(_, token)| token.clone())
        .expect("admin");

    println!("--- phase: a run of seat eng parks on a question for dave");
    let mut runs = runs_as(&addr, &admin).await;
    runs.launch(pb::LaunchRequest {
        seat: "eng".into(),
        turn_id: "parked".into(),
        runner: "command".into(),
        command: r#"boxfleet-ask "which db?" --to requester"#.into(),
        requester: "dave".into(),
        ..Default::default()
    })
    .await
    .expect("launch");
    let launch = parked_job(&mut runs, "parked").await;

    println!("--- phase: the matrix");
    let mut mismatches = Vec::new();
    let mut table = String::new();
    for (name, token) in &creds {
        table.push_str(&format!("{name:>9}:"));
        for rpc in CALLS {
            let outcome = call(&addr, rpc, (name, token), ("parked", &launch), &admin).await;
            table.push_str(match outcome {
                Got::Allowed => " A",
                Got::Unauthenticated => " U",
                Got::Denied => " D",
            });
            if outcome != expected(name, rpc) {
                mismatches.push(format!(
                    "{name} {rpc}: got {outcome:?}, the table says {:?}",
                    expected(name, rpc)
                ));
            }
        }
        table.push('\n');
    }
    println!("{}\n{table}", CALLS.join(" "));
    assert!(mismatches.is_empty(), "{mismatches:#?}\n{table}");

    println!("--- phase: what was refused changed nothing");
    for (name, _) in &creds {
        for (rpc, turn) in [
            ("Runs.Launch", format!("m-launch-{name}")),
            ("Fleet.SeatLaunch", format!("m-flaunch-{name}")),
        ] {
            if expected(name, rpc) != Got::Allowed {
                let got = runs
                    .get(pb::GetRequest {
                        turn_id: turn.clone(),
                    })
                    .await;
                assert!(
                    matches!(&got, Err(status) if status.code() == Code::NotFound),
                    "a refused {rpc} by {name} opened run {turn}: {got:?}"
                );
            }
        }
    }
    let allowed_deliveries = creds
        .iter()
        .flat_map(|(name, _)| ["Runs.Deliver", "Fleet.SeatDeliver"].map(|rpc| expected(name, rpc)))
        .filter(|got| *got == Got::Allowed)
        .count() as u32;
    let mut ops =
        pb::ops_client::OpsClient::with_interceptor(channel(&addr).await, Bearer::new(&admin));
    boxfleet_tests::wait_until(
        "the sink's inbox holds what was allowed",
        Duration::from_secs(10),
        async || {
            let seats = ops
                .seats(pb::SeatsRequest {})
                .await
                .expect("seats")
                .into_inner()
                .seats;
            seats.iter().find(|s| s.seat == "sink").map(|s| s.inbox) == Some(allowed_deliveries)
        },
    )
    .await;
    let log = node.log();
    let recorded: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("sandbox_answer_recorded"))
        .collect();
    assert_eq!(
        recorded.len(),
        1,
        "one answer recorded, alice's: {recorded:#?}"
    );
    assert!(recorded[0].contains("alice"), "{}", recorded[0]);
    let nodes = ops
        .nodes(pb::NodesRequest {})
        .await
        .expect("nodes")
        .into_inner()
        .nodes;
    assert!(
        nodes.iter().all(|n| !n.draining),
        "no refused drain drained anything"
    );
    assert_eq!(
        log.matches("config_applied").count(),
        1,
        "the admin's reload alone read the file again"
    );
    assert!(
        log.contains("api_call_refused") && log.contains("rpc=\"Runs.Launch\""),
        "refusals and calls are audited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_answers_as_itself_and_an_admin_on_a_persons_behalf() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("chart.yaml");
    std::fs::write(&config, CHART).expect("chart");
    let node = NodeProcess::start(
        "authority",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
    );
    let keyring = Keyring::load(&dir.path().join("keyring.json")).expect("the node's keyring");
    let bob = keyring.issue("bob", Role::Operator, &[], DAY, chrono::Utc::now());
    let dave = keyring.issue("dave", Role::Operator, &[], DAY, chrono::Utc::now());

    println!("--- phase: dave launches a job that asks its requester");
    let (code, out, err) = node.cli(&[
        "launch",
        "--token",
        &dave,
        "--seat",
        "eng",
        "--command",
        r#"boxfleet-ask "which region?" --to requester"#,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = boxfleet_tests::node::launched_turn(&out);
    let mut runs = boxfleet_tests::grpc::runs(&node.addr())
        .await
        .expect("connect");
    let launch = parked_job(&mut runs, &turn).await;
    let got = runs
        .board(pb::BoardRequest {
            audience: "dave".into(),
        })
        .await
        .expect("board")
        .into_inner();
    assert!(
        got.runs.iter().any(|r| r.turn_id == turn),
        "a CLI launch's question to its requester waits on the launcher"
    );

    println!("--- phase: bob may not answer dave's question, nor as dave");
    for extra in [&[][..], &["--as", "dave"][..]] {
        let mut args = vec![
            "answer", &turn, "--launch", &launch, "--text", "eu", "--token", &bob,
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = node.cli(&args);
        assert_ne!(code, 0, "{out}");
        assert!(err.contains("permission denied"), "{err}");
    }

    println!("--- phase: the admin answers on dave's behalf");
    let (code, out, err) = node.cli(&[
        "answer", &turn, "--launch", &launch, "--text", "eu-west", "--as", "dave",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let log = node.log();
    let recorded = log
        .lines()
        .find(|line| line.contains("sandbox_answer_recorded"))
        .expect("recorded");
    assert!(
        recorded.contains("from=\"dave\"") || recorded.contains("from=dave"),
        "{recorded}"
    );
    assert!(
        recorded.contains("given_by=\"admin\"") || recorded.contains("given_by=admin"),
        "{recorded}"
    );

    println!("--- phase: the relaunch carries the answer in its environment, never in its command");
    let relaunched = parked_job(&mut runs, &turn).await;
    assert_ne!(relaunched, launch, "the answer relaunched the job");
    let got = runs
        .get(pb::GetRequest {
            turn_id: turn.clone(),
        })
        .await
        .expect("get")
        .into_inner();
    let record: serde_json::Value = serde_json::from_str(&got.record_json).expect("record");
    let job = record["job"].as_str().unwrap_or_default();
    assert!(
        !job.contains("eu-west") && !job.contains("BOXFLEET_ANSWER"),
        "the answer is not stored in the job's command: {job}"
    );
}

#[test]
fn a_node_listens_beyond_loopback_only_behind_tls_or_on_purpose() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = boxfleet_tests::node::free_port();
    let listen = format!("0.0.0.0:{port}");
    let refused = std::process::Command::new(boxfleet_tests::node::boxfleet_bin())
        .args(["node", "--listen", &listen, "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run boxfleet node");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("--insecure-listen"),
        "{err}"
    );

    let data = dir.path().join("open");
    std::fs::create_dir_all(&data).expect("dir");
    let node = NodeProcess::start("open", &data, &["--insecure-listen"]);
    // NodeProcess listens on 127.0.0.1; a second, insecure node shows how `nodes` reads
    let (code, out, _) = node.cli(&["nodes"]);
    assert_eq!(code, 0);
    assert!(
        !out.contains("insecure"),
        "a loopback node is not insecure: {out}"
    );
    drop(node);
    let open = dir.path().join("wide");
    std::fs::create_dir_all(&open).expect("dir");
    let mut child = std::process::Command::new(boxfleet_tests::node::boxfleet_bin())
        .args([
            "node",
            "--id",
            "wide",
            "--insecure-listen",
            "--listen",
            &listen,
            "--data-dir",
        ])
        .arg(&open)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the insecure node never listened"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let out = std::process::Command::new(boxfleet_tests::node::boxfleet_bin())
        .args([
            "nodes",
            "--addr",
            &format!("http://127.0.0.1:{port}"),
            "--token-file",
        ])
        .arg(open.join("admin.token"))
        .output()
        .expect("nodes");
    let _ = child.kill();
    let _ = child.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("insecure (no TLS)"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_over_mutual_tls_forward_and_collect_and_nothing_plain_gets_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = boxfleet_tests::tls::TlsFiles::make(dir.path());
    let etcd = boxfleet_tests::EtcdServer::shared().client_url();
    let prefix = boxfleet_tests::unique_prefix("mtls");
    let keyring = dir.path().join("keyring.json");
    let boxes = dir.path().join("boxes");
    std::fs::create_dir_all(&boxes).expect("boxes");
    let mut args: Vec<String> = vec![
        "--etcd".into(),
        etcd,
        "--prefix".into(),
        prefix,
        "--keyring".into(),
        keyring.display().to_string(),
        "--boxes-dir".into(),
        boxes.display().to_string(),
        "--lease-ttl".into(),
        "3".into(),
    ];
    args.extend(tls.node_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let nodes: Vec<NodeProcess> = ["m1", "m2", "m3"]
        .iter()
        .map(|name| {
            let data = dir.path().join(name);
            std::fs::create_dir_all(&data).expect("data");
            NodeProcess::start(name, &data, &args)
        })
        .collect();
    let https = |node: &NodeProcess| format!("https://127.0.0.1:{}", node.port);
    let cli = |node: &NodeProcess, extra: &[&str]| {
        let output = std::process::Command::new(boxfleet_tests::node::boxfleet_bin())
            .args(extra)
            .env("BOXFLEET_ADDR", https(node))
            .env("BOXFLEET_CA", &tls.ca)
            .env("BOXFLEET_TOKEN_FILE", node.token_file())
            .output()
            .expect("cli");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    boxfleet_tests::wait_until("three live nodes", Duration::from_secs(30), async || {
        let (_, out, _) = cli(&nodes[1], &["nodes"]);
        out.lines().filter(|l| l.contains("live")).count() == 3
    })
    .await;

    println!("--- phase: launches through m2 for seats placed all over the fleet");
    let mut turns = Vec::new();
    for i in 0..6 {
        let seat = format!("tls-seat-{i}");
        let (code, out, err) = cli(
            &nodes[1],
            &[
                "launch",
                "--seat",
                &seat,
                "--command",
                "echo over-tls > \"$BOXFLEET_REPORT\"",
            ],
        );
        assert_eq!(code, 0, "{out}{err}");
        turns.push(boxfleet_tests::node::launched_turn(&out));
    }
    let (_, seats, _) = cli(&nodes[0], &["seats"]);
    let holders: std::collections::BTreeSet<&str> = seats
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert!(
        holders.len() >= 2,
        "the seats are spread over the nodes: {seats}"
    );
    for turn in &turns {
        boxfleet_tests::wait_until(
            "the run collected and settled",
            Duration::from_secs(60),
            async || {
                let (_, out, _) = cli(&nodes[2], &["show", turn]);
                out.contains("over-tls") && out.contains("succeeded")
            },
        )
        .await;
    }

    println!(
        "--- phase: plain HTTP reaches nothing, and the Fleet service wants a client certificate"
    );
    let plain = std::process::Command::new(boxfleet_tests::node::boxfleet_bin())
        .args([
            "nodes",
            "--addr",
            &format!("http://127.0.0.1:{}", nodes[0].port),
        ])
        .env("BOXFLEET_TOKEN_FILE", nodes[0].token_file())
        .output()
        .expect("cli");
    assert!(!plain.status.success(), "plain HTTP to a TLS node");
    let ring = Keyring::load(&keyring).expect("keyring");
    let node_credential = ring.issue("m9", Role::Node, &[], DAY, chrono::Utc::now());
    let ca = tonic::transport::Certificate::from_pem(std::fs::read(&tls.ca).expect("ca"));
    let channel = Endpoint::from_shared(https(&nodes[0]))
        .expect("endpoint")
        .tls_config(tonic::transport::ClientTlsConfig::new().ca_certificate(ca))
        .expect("tls")
        .connect()
        .await
        .expect("connect over TLS");
    let mut fleet =
        pb::fleet_client::FleetClient::with_interceptor(channel, Bearer::new(&node_credential));
    let refused = fleet
        .ping(pb::PingRequest {})
        .await
        .expect_err("no client certificate");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
}

/// An external engine that takes a turn and goes away without acking it: the turn is deferred
/// (it keeps its place), and the next engine to attach for the seat is given it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_an_engine_took_and_never_acked_goes_to_the_next_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("chart.yaml");
    std::fs::write(&config, CHART).expect("chart");
    let node = NodeProcess::start(
        "engines",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
    );
    let keyring = Keyring::load(&dir.path().join("keyring.json")).expect("the node's keyring");
    let now = chrono::Utc::now();
    let bot = keyring.issue("bot", Role::Engine, &["sink".into()], DAY, now);
    let other = keyring.issue("other-bot", Role::Engine, &["ops".into()], DAY, now);

    println!("--- phase: an engine scoped to seat ops may not attach for sink");
    let attach = |token: String, seats: Vec<String>| {
        let addr = node.addr();
        async move {
            let mut engine = pb::engine_client::EngineClient::with_interceptor(
                channel(&addr).await,
                Bearer::new(&token),
            );
            let (up, rx) = tokio::sync::mpsc::channel::<pb::EngineUp>(8);
            up.send(pb::EngineUp {
                msg: Some(pb::engine_up::Msg::Hello(pb::Hello {
                    engine: "test".into(),
                    seats,
                    ..pb::Hello::default()
                })),
            })
            .await
            .expect("hello");
            let down = engine
                .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
                .map(tonic::Response::into_inner);
            (up, down)
        }
    };
    let (_up, refused) = attach(other, vec!["sink".into()]).await;
    assert_eq!(refused.expect_err("scoped").code(), Code::PermissionDenied);
    let (_up, refused) = attach(bot.clone(), vec!["eng".into()]).await;
    assert_eq!(
        refused.expect_err("eng is builtin").code(),
        Code::PermissionDenied
    );

    println!("--- phase: two messages for sink; the first goes to the engine, which leaves");
    for text in ["one", "two"] {
        let (code, out, err) = node.cli(&[
            "deliver",
            "--seat",
            "sink",
            "--conversation",
            "c1",
            "--text",
            text,
        ]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (up, down) = attach(bot.clone(), vec!["sink".into()]).await;
    let mut down = down.expect("attached");
    let first = tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut down))
        .await
        .expect("a turn within 10 s")
        .expect("open")
        .expect("message");
    let Some(pb::engine_down::Msg::Turn(turn)) = first.msg else {
        panic!("expected a turn, got {first:?}")
    };
    assert_eq!(turn.text, "one");
    drop(up);
    drop(down);

    println!("--- phase: the next engine for sink is given the same turn, first");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (up, down) = attach(bot.clone(), vec!["sink".into()]).await;
        if let Ok(mut down) = down {
            let next =
                tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut down))
                    .await
                    .expect("a turn within 10 s")
                    .expect("open")
                    .expect("message");
            let Some(pb::engine_down::Msg::Turn(again)) = next.msg else {
                panic!("expected a turn, got {next:?}")
            };
            assert_eq!(
                again.delivery_id, turn.delivery_id,
                "the unacked turn, not the next one"
            );
            drop(up);
            break;
        }
        // the first engine's stream is still closing: its seat is still served
        assert!(Instant::now() < deadline, "no second engine could attach");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn an_id_outside_the_grammar_is_refused_by_name_and_never_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("ids", dir.path(), &[]);
    for seat in ["../etc", "eng\u{202e}gne", &"x".repeat(200)] {
        let (code, out, err) = node.cli(&["launch", "--seat", seat, "--command", "true"]);
        // INVALID_ARGUMENT: the usage class, naming the field
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("launch: seat: "), "{err}");
    }
}
