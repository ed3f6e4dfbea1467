//! Scenarios: the box's way back out (issue 15; the spec's "MCP inside the sandbox", "The tool
//! bridge", "Per-run OTel") — what a job is given to reach its seat's tools and its
//! telemetry's backend without holding a credential of the fleet's.
//!
//! - the real Claude Code CLI in a `direct` box, against the scripted Anthropic stand-in, given
//!   a real MCP server from npm (`@modelcontextprotocol/server-everything`, stdio) and the tool
//!   bridge: the scripted model calls a tool on each, each result reaches the conversation and
//!   the transcript, the bridged call reaches the seat's engine and the run's record; and the
//!   same CLI's OTLP export reaches a collector through the node's receiver, the credential
//!   added outside the box;
//! - an external engine that declared a tool answers a bridged call, acting as the run's seat;
//! - the gates: a forged, expired or other-audience token, another run's, one that outlived its
//!   run, one sent to a node not holding the seat, and a receiver whose upstream is down.

use std::path::Path;
use std::time::Duration;

use boxfleet_auth::Keyring;
use boxfleet_auth::run_token::{RunGrant, mint};
use boxfleet_proto::v1 as pb;
use boxfleet_tests::mcp_client::McpClient;
use boxfleet_tests::node::{NodeProcess, launched_turn_and_job};
use boxfleet_tests::otlp_collector::OtlpCollector;
use serde_json::{Value, json};

/// A job that hands the test what its box was given, then waits for `~/go`.
const HANDS_OVER: &str = r#"printf '%s\n' "$BOXFLEET_MCP_BRIDGE_URL" > "$HOME/bridge_url"
printf '%s\n' "$OTEL_EXPORTER_OTLP_ENDPOINT" > "$HOME/otlp_url"
printf '[%s]\n' "$OTEL_EXPORTER_OTLP_HEADERS" > "$HOME/otlp_headers"
while [ ! -e "$HOME/go" ]; do sleep 0.2; done
echo "Delivered: fix/way-out" > "$BOXFLEET_REPORT""#;

/// The record of `turn`, asked of `node`.
async fn record(node: &NodeProcess, turn: &str) -> Option<Value> {
    let mut runs = boxfleet_tests::grpc::runs(&node.addr())
        .await
        .expect("connect");
    let got = runs
        .get(pb::GetRequest {
            turn_id: turn.to_owned(),
        })
        .await
        .expect("get")
        .into_inner();
    (!got.record_json.is_empty()).then(|| serde_json::from_str(&got.record_json).expect("json"))
}

/// Reads a file the job wrote into its home, once it is there.
async fn handed_over(node: &NodeProcess, sandbox_id: &str, name: &str) -> String {
    let path = node
        .data_dir
        .join("boxes")
        .join(sandbox_id)
        .join("home")
        .join(name);
    boxfleet_tests::wait_for(
        &format!("the job to write {name}"),
        Duration::from_secs(20),
        async || {
            std::fs::read_to_string(&path)
                .ok()
                .map(|s| s.trim_end().to_owned())
        },
    )
    .await
}

/// Launches `command` on `seat`; the turn, its box and the box's home.
async fn launch(node: &NodeProcess, seat: &str, command: &str) -> (String, String) {
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        seat,
        "--runner",
        "command",
        "--command",
        command,
    ]);
    assert_eq!(code, 0, "{out}{err}\n{}", node.log());
    let (turn, _) = launched_turn_and_job(&out);
    let run = record(node, &turn).await.expect("the run");
    (turn, run["sandbox_id"].as_str().expect("a box").to_owned())
}

/// The node's keyring, to mint tokens a box could never have been given.
fn keyring(node: &NodeProcess) -> Keyring {
    Keyring::load(&node.data_dir.join("keyring.json")).expect("the node's keyring")
}

fn grant(aud: &str, turn: &str, launch: &str, exp_in: i64) -> RunGrant {
    RunGrant {
        aud: aud.into(),
        turn_id: turn.into(),
        launch_id: launch.into(),
        exp: chrono::Utc::now().timestamp() + exp_in,
    }
}

/// An engine attached for `seat` that serves one tool, `lookup_ticket`, and answers every
/// call to it with what it was asked (the calls it was sent come out of the receiver); a run's
/// findings it takes and settles as finished.
async fn engine_with_a_tool(
    node: &NodeProcess,
    seat: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<pb::ToolCall> {
    let token = keyring(node).issue(
        "ticket-engine",
        boxfleet_auth::Role::Engine,
        &[seat.to_owned()],
        Duration::from_secs(3600),
        chrono::Utc::now(),
    );
    let channel = tonic::transport::Endpoint::from_shared(node.addr())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut client = pb::engine_client::EngineClient::with_interceptor(
        channel,
        boxfleet_tests::grpc::Bearer::new(&token),
    );
    let (up, rx) = tokio::sync::mpsc::channel::<pb::EngineUp>(16);
    up.send(pb::EngineUp {
        msg: Some(pb::engine_up::Msg::Hello(pb::Hello {
            engine: "ticket-engine".into(),
            seats: vec![seat.to_owned()],
            tools: vec![pb::ToolSpec {
                name: "lookup_ticket".into(),
                description: "Look a ticket up by its id.".into(),
                input_schema_json: json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}).to_string(),
            }],
        })),
    })
    .await
    .expect("hello");
    let mut down = client
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("attach")
        .into_inner();
    let (calls_tx, calls) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(message)) = down.message().await {
            if let Some(pb::engine_down::Msg::Resume(resume)) = &message.msg
                && resume.kind == pb::resume::Kind::Findings as i32
            {
                for msg in [
                    pb::engine_up::Msg::Take(pb::Take {
                        turn_id: resume.turn_id.clone(),
                        launch_id: resume.launch_id.clone(),
                    }),
                    pb::engine_up::Msg::Settle(pb::Settle {
                        turn_id: resume.turn_id.clone(),
                        launch_id: resume.launch_id.clone(),
                        outcome: Some(pb::settle::Outcome::Finished(pb::Finished {
                            reply: resume.reply.clone(),
                        })),
                    }),
                ] {
                    let _ = up.send(pb::EngineUp { msg: Some(msg) }).await;
                }
            }
            if let Some(pb::engine_down::Msg::ToolCall(call)) = message.msg {
                let asked: Value = serde_json::from_str(&call.arguments_json).unwrap_or_default();
                let result = pb::ToolResult {
                    call_id: call.call_id.clone(),
                    text: format!(
                        "ticket {}: open, assigned to {}",
                        asked["id"].as_str().unwrap_or("?"),
                        call.seat
                    ),
                    is_error: false,
                };
                let _ = calls_tx.send(call);
                let _ = up
                    .send(pb::EngineUp {
                        msg: Some(pb::engine_up::Msg::ToolResult(result)),
                    })
                    .await;
            }
        }
    });
    calls
}

/// The two seats of the external-engine scenario.
const CHART: &str = "company:\n  providers:\n    sandbox: { local: {}, default_run_in: direct }\n  roles:\n    - { name: worker, sandbox: { enabled: true } }\n  seats:\n    - { handle: ext, kind: agent, role: worker, engine: external }\n    - { handle: local, kind: agent, role: worker }\n";

/// A node config with the bridge and the receiver on this listener, forwarding to `upstream`
/// with an ingest credential from the node's environment, and `chart`.
fn node_config(dir: &Path, upstream: &str, chart: &str) -> String {
    let config = dir.join("node.yaml");
    std::fs::write(
        &config,
        format!(
            "node:\n  http:\n    mcp_bridge_url: listener\n    otel_receiver_url: listener\n    otlp_upstream:\n      endpoint: \"{upstream}\"\n      headers: {{ Authorization: \"Bearer ${{T22_INGEST_TOKEN}}\" }}\n{chart}"
        ),
    )
    .expect("config");
    config.to_str().expect("utf-8").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_engine_answers_a_bridged_call_acting_as_the_runs_seat_and_the_record_keeps_it()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let collector = OtlpCollector::start().await;
    let config = node_config(dir.path(), collector.url(), CHART);
    let node = NodeProcess::start_with_env(
        "way-out",
        dir.path(),
        &["--config", &config],
        &[("T22_INGEST_TOKEN", "ingest-secret")],
    );
    let mut calls = engine_with_a_tool(&node, "ext").await;

    println!("--- phase: a job on an external engine's seat is handed the bridge and the receiver");
    let (turn, sandbox) = launch(&node, "ext", HANDS_OVER).await;
    let bridge_url = handed_over(&node, &sandbox, "bridge_url").await;
    let http = node.http_url();
    assert!(
        bridge_url.starts_with(&format!("{http}/mcp/bfr1.")),
        "{bridge_url}"
    );
    assert_eq!(
        handed_over(&node, &sandbox, "otlp_headers").await,
        "[]",
        "the box's OTLP headers are set empty"
    );

    println!("--- phase: the box lists its seat's tools and calls one");
    let mut mcp = McpClient::new(&bridge_url);
    let init = mcp.initialize().await;
    assert!(init.status.is_success(), "{init:?}");
    assert_eq!(
        init.body["result"]["serverInfo"]["name"], "boxfleet",
        "{init:?}"
    );
    let listed = mcp.request("tools/list", json!({})).await;
    let names: Vec<&str> = listed.body["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["lookup_ticket"], "{listed:?}");
    let called = mcp
        .request(
            "tools/call",
            json!({"name": "lookup_ticket", "arguments": {"id": "T-7"}}),
        )
        .await;
    assert_eq!(
        called.body["result"]["content"][0]["text"], "ticket T-7: open, assigned to ext",
        "{called:?}"
    );
    let call = calls.recv().await.expect("the engine got the call");
    assert_eq!(
        (
            call.seat.as_str(),
            call.turn_id.as_str(),
            call.tool.as_str()
        ),
        ("ext", turn.as_str(), "lookup_ticket")
    );

    println!("--- phase: the call is written down on the run's record");
    let run = record(&node, &turn).await.expect("the run");
    let log: Vec<&str> = run["bridge_calls"]
        .as_array()
        .map(|calls| calls.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        log.len() == 1 && log[0].contains("lookup_ticket") && log[0].contains("-> ok: ticket T-7"),
        "{log:?}"
    );

    println!("--- phase: a tool the engine does not serve is an error the agent reads");
    let unknown = mcp
        .request("tools/call", json!({"name": "rm_rf", "arguments": {}}))
        .await;
    assert_eq!(unknown.body["result"]["isError"], true, "{unknown:?}");

    println!(
        "--- phase: the box's telemetry reaches the collector, the ingest credential added outside"
    );
    let otlp_url = handed_over(&node, &sandbox, "otlp_url").await;
    let exported = reqwest::Client::new()
        .post(format!("{otlp_url}/v1/metrics"))
        .header("content-type", "application/x-protobuf")
        .body(Vec::<u8>::new())
        .send()
        .await
        .expect("export");
    assert_eq!(exported.status(), 200);
    let forwarded = boxfleet_tests::wait_for(
        "the export to reach the collector",
        Duration::from_secs(10),
        async || collector.exports().into_iter().next(),
    )
    .await;
    assert_eq!(forwarded.signal, "metrics");
    assert_eq!(
        forwarded.headers["authorization"], "Bearer ingest-secret",
        "the real credential, added by the node"
    );

    println!("--- phase: the run ends, and its bridge with it");
    std::fs::write(
        node.data_dir.join("boxes").join(&sandbox).join("home/go"),
        b"go",
    )
    .expect("go");
    boxfleet_tests::wait_until("the run to settle", Duration::from_secs(30), async || {
        record(&node, &turn).await.is_none()
    })
    .await;
    let after = McpClient::new(&bridge_url).initialize().await;
    assert_eq!(
        after.status, 410,
        "a box that outlived its run keeps no working key: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_expired_foreign_and_misrouted_tokens_are_refused_and_a_down_upstream_is_never_the_boxs()
 {
    let etcd = boxfleet_tests::EtcdServer::shared();
    let dir = tempfile::tempdir().expect("tempdir");
    let collector = OtlpCollector::start().await;
    let config = node_config(dir.path(), collector.url(), "");
    let prefix = format!("/t22-{}", uuid::Uuid::new_v4().simple());
    let keyring_file = dir.path().join("fleet-keyring.json");
    let args = |node: &str| -> Vec<String> {
        vec![
            "--config".into(),
            config.clone(),
            "--etcd".into(),
            etcd.client_url(),
            "--prefix".into(),
            prefix.clone(),
            "--keyring".into(),
            keyring_file.to_str().expect("utf-8").into(),
            "--boxes-dir".into(),
            dir.path()
                .join(node)
                .join("boxes")
                .to_str()
                .expect("utf-8")
                .into(),
        ]
    };
    for node in ["n1", "n2"] {
        std::fs::create_dir_all(dir.path().join(node)).expect("data dir");
    }
    let n1_args = args("n1");
    let n1 = NodeProcess::start_with_env(
        "n1",
        &dir.path().join("n1"),
        &n1_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("T22_INGEST_TOKEN", "ingest-secret")],
    );
    let seat = boxfleet_tests::fleet::seats_placed_on("n1", &["n1", "n2"], 1, "gate").remove(0);
    let n2_args = args("n2");
    let n2 = NodeProcess::start_with_env(
        "n2",
        &dir.path().join("n2"),
        &n2_args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("T22_INGEST_TOKEN", "ingest-secret")],
    );
    let (turn, sandbox) = launch(&n1, &seat, HANDS_OVER).await;
    let bridge_url = handed_over(&n1, &sandbox, "bridge_url").await;
    let otlp_url = handed_over(&n1, &sandbox, "otlp_url").await;
    let run = record(&n1, &turn).await.expect("the run");
    let launch_id = run["launch_id"].as_str().expect("launch").to_owned();
    let ring = Keyring::load(&keyring_file).expect("the fleet's keyring");
    let base = n1.http_url();
    let status_of = async |url: String| McpClient::new(&url).initialize().await;

    println!("--- phase: the box's own token is admitted");
    assert!(status_of(bridge_url.clone()).await.status.is_success());

    println!("--- phase: forged, expired, another audience's, another run's: refused");
    let mut forged = bridge_url.clone();
    let at = forged.len() - 3;
    forged.replace_range(
        at..at + 1,
        if &forged[at..at + 1] == "A" { "B" } else { "A" },
    );
    let expired = mint(&ring, &grant("mcp", &turn, &launch_id, -5));
    let telemetry = mint(&ring, &grant("otlp", &turn, &launch_id, 600));
    let other_run = mint(&ring, &grant("mcp", "turn-nobody", "launch-nobody", 600));
    let foreign = mint(
        &Keyring::generate(chrono::Utc::now()),
        &grant("mcp", &turn, &launch_id, 600),
    );
    for (what, url, status) in [
        ("forged", forged, 401),
        ("expired", format!("{base}/mcp/{expired}"), 401),
        ("a telemetry token", format!("{base}/mcp/{telemetry}"), 401),
        ("another key's", format!("{base}/mcp/{foreign}"), 401),
        ("another run's", format!("{base}/mcp/{other_run}"), 410),
    ] {
        let reply = status_of(url).await;
        assert_eq!(reply.status, status, "{what}: {reply:?}");
    }

    println!("--- phase: the right token at the wrong node: unresolved, not forged");
    let own_token = bridge_url.rsplit('/').next().expect("token").to_owned();
    let misrouted = status_of(format!("{}/mcp/{own_token}", n2.http_url())).await;
    assert_eq!(misrouted.status, 421, "{misrouted:?}");
    assert!(n2.log().contains("mcp_bridge_unresolved"), "{}", n2.log());

    println!(
        "--- phase: the receiver refuses a bridge token and another key's, and never reports a down upstream"
    );
    let client = reqwest::Client::new();
    let post = async |url: String| {
        client
            .post(url)
            .header("content-type", "application/x-protobuf")
            .body(Vec::<u8>::new())
            .send()
            .await
            .expect("post")
            .status()
    };
    let bridge_token = mint(&ring, &grant("mcp", &turn, &launch_id, 600));
    assert_eq!(
        post(format!("{base}/otlp/{bridge_token}/v1/metrics")).await,
        401
    );
    let foreign_otlp = mint(
        &Keyring::generate(chrono::Utc::now()),
        &grant("otlp", &turn, &launch_id, 600),
    );
    assert_eq!(
        post(format!("{base}/otlp/{foreign_otlp}/v1/logs")).await,
        401
    );
    assert_eq!(post(format!("{otlp_url}/v1/nonsense")).await, 404);
    collector.fail(true);
    assert_eq!(
        post(format!("{otlp_url}/v1/traces")).await,
        200,
        "a collector that is down is never the box's problem"
    );
    boxfleet_tests::wait_until(
        "the failed forward to be logged",
        Duration::from_secs(10),
        async || n1.log().contains("otlp_forward_refused"),
    )
    .await;
    std::fs::write(
        n1.data_dir.join("boxes").join(&sandbox).join("home/go"),
        b"go",
    )
    .expect("go");
}

/// The real Claude Code CLI in a `direct` box: the company's MCP server from npm (stdio) and
/// the tool bridge rendered into `--mcp-config`, the scripted model calling a tool on each and
/// then parking on a question; its OTLP export through the receiver to the collector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_claude_code_calls_a_real_mcp_server_and_its_seats_bridge_and_exports_through_the_receiver()
 {
    use boxfleet_tests::anthropic_standin::{AnthropicStandin, Script, StandinOptions, Turn};
    let dir = tempfile::tempdir().expect("tempdir");
    let cli = boxfleet_tests::claude_cli::claude_cli();
    let everything = boxfleet_tests::mcp_server::server_everything();
    let collector = OtlpCollector::start().await;
    let standin = AnthropicStandin::start(StandinOptions {
        script: Script::new(vec![
            // the CLI defers MCP tools behind its ToolSearch: a model loads their schemas first
            Turn::ToolUse {
                text: Some("Let me load the tools I need.".into()),
                name: "ToolSearch".into(),
                input: json!({"query": "select:mcp__everything__echo,mcp__boxfleet__boxfleet_run_task"}),
            },
            Turn::ToolUse {
                text: Some("First the everything server.".into()),
                name: "mcp__everything__echo".into(),
                input: json!({"message": "hello from the box"}),
            },
            Turn::ToolUse {
                text: Some("Now my seat's own tool.".into()),
                name: "mcp__boxfleet__boxfleet_run_task".into(),
                input: json!({}),
            },
            Turn::ToolUse {
                text: None,
                name: "Bash".into(),
                input: json!({"command": "boxfleet-ask 'Ship it?' --to requester", "description": "Ask whether to ship"}),
            },
            Turn::Text("Asked; waiting for the answer.".into()),
        ]),
        ..StandinOptions::default()
    });
    let config = dir.path().join("node.yaml");
    std::fs::write(
        &config,
        format!(
            r#"
node:
  http:
    mcp_bridge_url: listener
    otel_receiver_url: listener
    otlp_upstream:
      endpoint: "{collector}"
      headers: {{ Authorization: "Bearer ${{T22_INGEST_TOKEN}}" }}
company:
  mcp_servers:
    everything:
      transport: stdio
      command: "{everything}"
      args: [stdio]
  providers:
    llm:
      default: {{ provider: anthropic, model: claude-sonnet-4-5, api_key: "${{T22_GATEWAY_KEY}}", base_url: "{url}" }}
    sandbox:
      local: {{}}
      default_run_in: direct
      default_coding_agent: claude-code
  roles:
    - name: engineer
      sandbox:
        enabled: true
        mcp: {{ servers: [everything, not-in-the-company] }}
        env:
          IS_SANDBOX: "1"
          DISABLE_ERROR_REPORTING: "1"
          DISABLE_AUTOUPDATER: "1"
          OTEL_METRIC_EXPORT_INTERVAL: "1000"
          OTEL_LOGS_EXPORT_INTERVAL: "500"
  seats:
    - {{ handle: eng, role: engineer }}
"#,
            collector = collector.url(),
            everything = everything.display(),
            url = standin.url()
        ),
    )
    .expect("config");
    let node = NodeProcess::start_with_env(
        "claude-mcp",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
        &[
            ("BOXFLEET_CLAUDE_CLI", cli.to_str().expect("utf-8")),
            ("T22_GATEWAY_KEY", "gw-key-not-a-real-one"),
            ("T22_INGEST_TOKEN", "ingest-secret"),
        ],
    );

    println!("--- phase: the agent calls the npm server's echo, its seat's tool, then asks");
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--brief", "Try your tools."]);
    assert_eq!(code, 0, "{out}{err}\n{}", node.log());
    let (turn, _) = launched_turn_and_job(&out);
    let parked = boxfleet_tests::wait_for(
        "the run to park on its question",
        Duration::from_secs(120),
        async || {
            record(&node, &turn)
                .await
                .filter(|r| r["status"] == "awaiting_clarification")
        },
    )
    .await;
    assert!(
        node.log().contains("sandbox_mcp_server_skipped"),
        "a server the company does not carry is skipped with a warning: {}",
        node.log()
    );

    println!("--- phase: the CLI connected both servers and offered their tools to the model");
    let requests = standin.main_requests();
    let deferred = requests[0].body["messages"].to_string();
    for tool in ["mcp__everything__echo", "mcp__boxfleet__boxfleet_run_task"] {
        assert!(deferred.contains(tool), "{tool} offered: {deferred}");
    }
    let loaded: Vec<String> = requests[1].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for tool in ["mcp__everything__echo", "mcp__boxfleet__boxfleet_run_task"] {
        assert!(
            loaded.iter().any(|t| t == tool),
            "{tool} loaded: {loaded:?}"
        );
    }

    println!("--- phase: each tool's result reached the conversation");
    let results = |index: usize| requests[index].body["messages"].to_string();
    assert!(
        results(2).contains("Echo: hello from the box"),
        "the npm server answered: {}",
        results(2)
    );
    assert!(
        results(3).contains(&turn) && results(3).contains("Try your tools."),
        "the bridge answered with the run's task: {}",
        results(3)
    );

    println!("--- phase: the bridged call is on the run's record, and in the transcript");
    let log = parked["bridge_calls"].to_string();
    assert!(
        log.contains("boxfleet_run_task") && log.contains("-> ok"),
        "{log}"
    );
    let phase = node.phase_record(&turn, Duration::from_secs(10)).await;
    let transcript = phase["activity_transcript"].to_string();
    for line in [
        "[tool] mcp__everything__echo",
        "[tool] mcp__boxfleet__boxfleet_run_task",
    ] {
        assert!(transcript.contains(line), "{line} in {transcript}");
    }

    println!("--- phase: the CLI's telemetry reached the collector through the receiver");
    let export = boxfleet_tests::wait_for(
        "an export naming the run",
        Duration::from_secs(30),
        async || {
            collector.exports().into_iter().find(|e| {
                e.resource_attributes()
                    .iter()
                    .any(|a| a == &format!("boxfleet.turn_id={turn}"))
            })
        },
    )
    .await;
    assert_eq!(export.headers["authorization"], "Bearer ingest-secret");
    assert!(
        export
            .resource_attributes()
            .contains(&"boxfleet.agent_handle=eng".to_owned()),
        "{:?}",
        export.resource_attributes()
    );
}

/// The spec's example company document (`examples/company-mcp.yaml`: `mcp_servers`,
/// `mcp_env`, `role.sandbox.mcp`) loads and validates; a server whose credential the node's
/// environment lacks is said to be withheld, and the document is still valid.
#[test]
fn the_specs_example_company_document_validates_and_names_a_withheld_server() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/company-mcp.yaml");
    let validate = |atlassian: Option<&str>| {
        let mut command = std::process::Command::new(boxfleet_tests::node::boxfleet_bin());
        command
            .arg("validate")
            .arg(&example)
            .env("ANTHROPIC_API_KEY", "sk-ant-example")
            .env("GITHUB_TOKEN_SENIOR", "ghp_example")
            .env("NPM_TOKEN_SENIOR", "npm_example")
            .env_remove("ATLASSIAN_TOKEN")
            .env_remove("TEST_DB_HOST");
        if let Some(token) = atlassian {
            command.env("ATLASSIAN_TOKEN", token);
        }
        let output = command.output().expect("run validate");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = validate(Some("atl-example"));
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("valid"), "{out}");
    assert!(!err.contains("withheld"), "{err}");
    let (code, out, err) = validate(None);
    assert_eq!(code, Some(0), "still valid: {out}{err}");
    assert!(
        err.contains("\"atlassian\" is withheld") && err.contains("${ATLASSIAN_TOKEN}"),
        "{err}"
    );
}
