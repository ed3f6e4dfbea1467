//! Scenario: what a launch is planned with, as a user sees it through the `boxfleet` binary —
//! setup steps provisioning a new box (and a failing step tearing it down before any brief),
//! a model the box could not route refused before any box starts, and the model receipt on
//! the phase record.

use std::path::Path;
use std::time::Duration;

use boxfleet_tests::node::{NodeProcess, launched_turn};

fn write_config(dir: &Path, yaml: &str) -> String {
    let path = dir.join("node.yaml");
    std::fs::write(&path, yaml).expect("write config");
    path.to_str().expect("utf-8").to_owned()
}

/// The boxes on disk made for `seat` (each box's `records/box.json` names its seat).
fn boxes_of(dir: &Path, seat: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.join("boxes")) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read_to_string(entry.path().join("records/box.json"))
                .ok()
                .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                .is_some_and(|record| record["seat"] == seat)
        })
        .count()
}

const SETUP: &str = r#"
company:
  providers:
    sandbox:
      local: {}
      default_run_in: direct
      setup:
        - name: npm
          files:
            ".npmrc": "//registry.example/:_authToken=${NPM_TOKEN}"
            "~/tools/./tool.conf": "${TOOL_CONF}"
          env: { NPM_TOKEN: "${T07_NPM_TOKEN}" }
          commands: ["test -f ~/.npmrc", "echo provisioned > ~/provisioned"]
          brief: "npm is signed in through ~/.npmrc."
  roles:
    - { name: worker, sandbox: { enabled: true } }
    - name: broken
      sandbox:
        enabled: true
        setup:
          - name: toolchain
            commands: ["echo 'no toolchain here' >&2; exit 3"]
  seats:
    - { handle: eng, role: worker }
    - { handle: ops, role: broken }
"#;

/// A new box gets the steps' files and commands before the job; the step's env reaches the
/// job; a failing step names itself and its command, and leaves no box behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_steps_provision_a_new_box_and_a_failing_one_tears_it_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), SETUP);
    let node = NodeProcess::start_with_env(
        "setup",
        dir.path(),
        &["--config", &config],
        &[("T07_NPM_TOKEN", "npm_t07"), ("TOOL_CONF", "answer = 42\n")],
    );

    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--command",
        "cat ~/.npmrc ~/tools/tool.conf ~/provisioned; echo \"token=$NPM_TOKEN\" > \"$BOXFLEET_REPORT\"",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&out);
    let phase = node.phase_record(&turn, Duration::from_secs(60)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
    let transcript = phase["activity_transcript"].to_string();
    assert!(
        transcript.contains("//registry.example/:_authToken=${NPM_TOKEN}"),
        "a file body's ${{…}} is the box's, written as is: {transcript}"
    );
    assert!(
        transcript.contains("answer = 42"),
        "a whole ${{VAR}} body is the value: {transcript}"
    );
    assert!(transcript.contains("provisioned"), "{transcript}");
    assert!(
        phase["response"]
            .as_str()
            .is_some_and(|r| r.contains("token=npm_t07")),
        "the step's env reaches the job: {phase:#}"
    );

    let (code, out, err) = node.cli(&["launch", "--seat", "ops", "--command", "true"]);
    assert_ne!(code, 0, "a failing step fails the launch: {out}");
    let said = format!("{out}{err}");
    assert!(said.contains("sandbox_setup_failed"), "{said}");
    assert!(
        said.contains("setup step \"toolchain\": command #1 failed (exit 3)"),
        "{said}"
    );
    assert!(said.contains("no toolchain here"), "{said}");
    assert_eq!(
        boxes_of(dir.path(), "ops"),
        0,
        "the half-provisioned box is torn down"
    );
}

/// Claude Code with no credential, or on an OpenAI-wire entry, is refused at launch, naming
/// the entry and the remedies, before any box exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_box_could_not_route_is_refused_before_any_box() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        r#"
company:
  providers:
    llm:
      oai: { provider: openai, model: gpt-5, api_key: k }
    sandbox: { local: {}, default_run_in: direct }
  roles:
    - { name: worker, sandbox: { enabled: true } }
    - name: oai-eng
      llm_sandbox: oai
      sandbox: { enabled: true, coding_agent: claude-code }
  seats:
    - { handle: eng, role: worker }
    - { handle: bob, role: oai-eng }
"#,
    );
    let node = NodeProcess::start("models", dir.path(), &["--config", &config]);

    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--runner",
        "claude-code",
        "--brief",
        "fix it",
        "--model",
        "claude-sonnet-4-5",
    ]);
    assert_ne!(code, 0, "{out}");
    let said = format!("{out}{err}");
    assert!(
        said.contains("SandboxModelError") && said.contains("no credential"),
        "{said}"
    );

    let (code, out, err) = node.cli(&["launch", "--seat", "bob", "--brief", "fix it"]);
    assert_ne!(code, 0, "{out}");
    let said = format!("{out}{err}");
    assert!(said.contains("providers.llm.oai"), "{said}");
    assert!(said.contains("coding_agent: opencode"), "{said}");
    assert_eq!(
        boxes_of(dir.path(), "eng") + boxes_of(dir.path(), "bob"),
        0,
        "no box was made"
    );
}

/// A command names no model: the receipt sends what was asked and says the model that ran is
/// unknown — never `known` on the launch's word alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_is_never_known_on_the_launchs_word() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("receipt", dir.path(), &[]);
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--command",
        "true",
        "--model",
        "claude-sonnet-4-5",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let phase = node
        .phase_record(&launched_turn(&out), Duration::from_secs(60))
        .await;
    assert_eq!(
        phase["model"],
        serde_json::json!({
            "requested": "claude-sonnet-4-5",
            "effective": null,
            "source": null,
            "status": "unknown"
        }),
        "{phase:#}"
    );
}

/// A Claude Code login on this host (a `claude-code` entry) is seeded into the box, and the
/// login the run refreshed is written back when the run is collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_login_is_seeded_and_a_refreshed_one_written_back() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let login = dir.path().join("login");
    std::fs::create_dir_all(&login).expect("mkdir");
    std::fs::write(login.join(".credentials.json"), "v1").expect("login");
    // a stand-in CLI that refreshes its login the way Claude Code's OAuth refresh does
    let cli = dir.path().join("fake-claude");
    std::fs::write(
        &cli,
        r#"#!/bin/sh
cat >/dev/null
seen=$(cat "$HOME/.claude/.credentials.json")
printf '%s' "refreshed-after-$seen" > "$HOME/.claude/.credentials.json"
echo '{"type":"system","subtype":"init","model":"sonnet"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}'
"#,
    )
    .expect("write cli");
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = write_config(
        dir.path(),
        &format!(
            "company:\n  providers:\n    llm:\n      default: {{ provider: claude-code, model: sonnet, login_dir: \"{}\" }}\n    sandbox: {{ default_coding_agent: claude-code, local: {{}}, default_run_in: direct }}\n",
            login.display()
        ),
    );
    let node = NodeProcess::start_with_env(
        "login",
        dir.path(),
        &["--config", &config],
        &[("BOXFLEET_CLAUDE_CLI", cli.to_str().expect("utf-8"))],
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--brief", "refresh"]);
    assert_eq!(code, 0, "{out}{err}");
    let phase = node
        .phase_record(&launched_turn(&out), Duration::from_secs(60))
        .await;
    assert_eq!(phase["failed"], false, "{phase:#}");
    assert_eq!(
        std::fs::read_to_string(login.join(".credentials.json")).expect("login"),
        "refreshed-after-v1",
        "the box got the seed, and its refresh went back"
    );
    assert!(
        node.log().contains("local_sandbox_credential_written_back"),
        "{}",
        node.log()
    );
}
