//! Scenario: every configuration knob does what it says (issue 16), seen through the `boxfleet`
//! binary — the agentic-round cap from a launch and from a role, the pause TTL (0 never pauses,
//! absent is the default, a role's own), a setup command's default bound, the box's keepalive
//! window, and `boxfleet validate` refusing the values the knobs cannot take.
//!
//! The e2b template per coding agent is t06's `an_empty_template_picks_the_coding_agents_prebuilt_one`;
//! OpenCode's step cap and the container cell's state dir are unit tests beside their code.

use std::path::Path;
use std::time::{Duration, Instant};

use boxfleet_tests::e2b_standin::E2bStandIn;
use boxfleet_tests::node::{NodeProcess, launched_turn};

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write");
    path.to_str().expect("utf-8").to_owned()
}

/// A stand-in Claude Code CLI that answers with the arguments it was started with (the brief
/// comes on stdin and is read away): the round cap it was given is in the run's response.
const ARGV_CLAUDE: &str = r#"#!/bin/sh
cat >/dev/null
args=$(printf '%s ' "$@" | tr -d '"\\')
echo '{"type":"system","subtype":"init","model":"claude-sonnet-4-5"}'
printf '{"type":"result","subtype":"success","is_error":false,"result":"argv: %s","total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}\n' "$args"
"#;

const ROLES: &str = r#"
company:
  providers:
    llm:
      default: { provider: anthropic, model: claude-sonnet-4-5, api_key: sk-ant-t23 }
    sandbox:
      local: {}
      default_run_in: direct
      default_coding_agent: claude-code
      setup:
        - name: bound
          commands: ["tr '\\0' ' ' < /proc/$PPID/cmdline > ~/bound"]
  roles:
    - { name: plain, sandbox: { enabled: true } }
    - name: capped
      sandbox: { enabled: true, coding_agent: claude-code, max_turns: 3, pause_ttl_seconds: 0 }
    - name: patient
      sandbox: { enabled: true, pause_ttl_seconds: 45 }
  seats:
    - { handle: eng, role: plain }
    - { handle: cap, role: capped }
    - { handle: slow, role: patient }
"#;

const ASK: &str = r#"boxfleet-ask "carry on?" --to ops"#;

/// Waits until the run parks on its question and returns its record: `awaiting_clarification`
/// with its box paused, or `reseed` once the pause reaper let the box go (TTL 0 does at once).
async fn parked(node: &NodeProcess, turn: &str) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let record = node.record(turn).await;
        if let Some(record) = &record
            && (record["status"] == "awaiting_clarification"
                || (record["status"] == "reseed" && record["question"].is_object()))
        {
            return record.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{turn} never parked: {record:#?}\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn response(phase: &serde_json::Value) -> String {
    phase["response"].as_str().unwrap_or_default().to_owned()
}

/// `max_turns` from a launch wins over the role's; the role's is used when the launch names
/// none; a seat with no cap runs uncapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_comes_from_the_launch_then_the_role() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cli = dir.path().join("argv-claude");
    std::fs::write(&cli, ARGV_CLAUDE).expect("write cli");
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = write(dir.path(), "node.yaml", ROLES);
    let node = NodeProcess::start_with_env(
        "turns",
        dir.path(),
        &["--config", &config],
        &[("BOXFLEET_CLAUDE_CLI", cli.to_str().expect("utf-8"))],
    );
    let run = async |args: &[&str]| {
        let (code, out, err) = node.cli(args);
        assert_eq!(code, 0, "{out}{err}");
        let phase = node
            .phase_record(&launched_turn(&out), Duration::from_secs(60))
            .await;
        assert_eq!(phase["failed"], false, "{phase:#}");
        response(&phase)
    };
    let role = run(&["launch", "--seat", "cap", "--brief", "fix it"]).await;
    assert!(role.contains("--max-turns 3 "), "the role's cap: {role}");
    let launch = run(&[
        "launch",
        "--seat",
        "cap",
        "--brief",
        "fix it",
        "--max-turns",
        "7",
    ])
    .await;
    assert!(
        launch.contains("--max-turns 7 "),
        "the launch's cap: {launch}"
    );
    let none = run(&["launch", "--seat", "eng", "--brief", "fix it"]).await;
    assert!(
        none.contains("argv: ") && !none.contains("--max-turns"),
        "{none}"
    );
}

/// A role's `pause_ttl_seconds: 0` never pauses: the parked run's box goes at once. A role's
/// own TTL is on its runs; a seat under no TTL keeps the default (absent, not 0) and its
/// paused box. A setup command named no bound runs under the default 600 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pause_ttl_and_the_setup_bound_are_the_configured_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(dir.path(), "node.yaml", ROLES);
    let node = NodeProcess::start("pause", dir.path(), &["--config", &config]);
    let park = async |seat: &str| {
        let (code, out, err) = node.cli(&[
            "launch",
            "--seat",
            seat,
            "--runner",
            "command",
            "--command",
            ASK,
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let turn = launched_turn(&out);
        parked(&node, &turn).await
    };
    let box_dir = |record: &serde_json::Value| {
        dir.path()
            .join("boxes")
            .join(record["sandbox_id"].as_str().expect("a box"))
    };

    let default = park("eng").await;
    assert!(
        default.get("pause_ttl_seconds").is_none(),
        "absent is the default, not 0: {default:#}"
    );
    let bound = std::fs::read_to_string(box_dir(&default).join("home/bound")).expect("bound");
    assert!(
        bound.starts_with("timeout 600 "),
        "a setup command with no timeout_seconds is bounded at 600 s: {bound:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        box_dir(&default).exists(),
        "the default keeps the paused box"
    );

    let patient = park("slow").await;
    assert_eq!(patient["pause_ttl_seconds"], 45, "{patient:#}");

    let never = park("cap").await;
    assert_eq!(never["pause_ttl_seconds"], 0, "{never:#}");
    // the reaper may already have cleared the box from the row; its dir is named by the job
    let job: serde_json::Value =
        serde_json::from_str(never["job"].as_str().expect("job")).expect("job json");
    let job_dir = Path::new(job["handle"]["dir"].as_str().expect("dir"));
    let gone = job_dir
        .ancestors()
        .find(|p| p.parent() == Some(&dir.path().join("boxes")))
        .expect("a box dir")
        .to_path_buf();
    let started = Instant::now();
    while gone.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "0 never pauses: the box should be gone:\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `default_timeout_seconds` is the box's keepalive window: an E2B box is created, and kept
/// alive, with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_box_timeout_is_default_timeout_seconds() {
    let standin = E2bStandIn::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "node.yaml",
        &format!(
            "company:\n  providers:\n    sandbox: {{ default_timeout_seconds: 240, {} }}\n",
            standin.sandbox_config()
        ),
    );
    let node = NodeProcess::start("keepalive", dir.path(), &["--config", &config]);
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "sleep 4"]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&out);
    let started = Instant::now();
    let sandbox_id = loop {
        if let Some(id) = node
            .record(&turn)
            .await
            .and_then(|r| r["sandbox_id"].as_str().map(str::to_owned))
            .filter(|id| standin.keepalive(id).is_some())
        {
            break id;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no box:\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (timeout, _) = standin.keepalive(&sandbox_id).expect("the box");
    assert_eq!(timeout, 240, "made with default_timeout_seconds");
    let phase = node.phase_record(&turn, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
}

/// The values the knobs cannot take are refused with their location and a remedy.
#[test]
fn validate_refuses_what_the_knobs_cannot_take() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "bad.yaml",
        r#"
company:
  providers:
    sandbox: { default_pause_ttl_seconds: -5, default_timeout_seconds: 30 }
  roles:
    - name: eng
      sandbox: { enabled: true, pause_ttl_seconds: -1 }
"#,
    );
    let (ok, said) = boxfleet_tests::node::validate(&config, &[]);
    assert!(!ok, "{said}");
    for location in [
        "company.providers.sandbox.default_pause_ttl_seconds",
        "company.providers.sandbox.default_timeout_seconds",
        "company.roles[0].sandbox.pause_ttl_seconds",
    ] {
        assert!(said.contains(location), "{location} in:\n{said}");
    }
    assert!(said.contains("0 never pauses"), "{said}");
}
