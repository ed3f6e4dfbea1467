//! Scenario: the real Claude Code CLI (npm `@anthropic-ai/claude-code`, pinned in
//! `boxfleet_tests::claude_cli`) run by boxfleet in a `direct` box, against a local stand-in
//! of the Anthropic Messages API that scripts a Bash and a Write tool call and a final text
//! naming a `Delivered:` branch. The node is configured as a user configures one: a
//! `providers.llm` entry with the stand-in's `base_url`, and a role whose code work runs on
//! claude-code. The collected phase record is checked: tokens with both cache shares, cost,
//! transcript lines, refs and the model receipt — and, when the stand-in serves another model
//! than the one asked for, `mismatch` and a failed run.

use std::path::Path;
use std::time::Duration;

use boxfleet_tests::anthropic_standin::{
    AnthropicStandin, DELIVERED_BRANCH, Script, StandinOptions, Usage,
};
use boxfleet_tests::node::{NodeProcess, launched_turn};

const REQUESTED: &str = "claude-sonnet-4-5";

/// A node whose seat `eng` runs claude-code on the stand-in, and the stand-in.
fn fleet(
    dir: &Path,
    served_model: Option<&str>,
    mismatch: &str,
) -> (NodeProcess, AnthropicStandin) {
    let cli = boxfleet_tests::claude_cli::claude_cli();
    let outside = dir.join("written");
    std::fs::create_dir_all(&outside).expect("mkdir");
    let standin = AnthropicStandin::start(StandinOptions {
        served_model: served_model.map(str::to_owned),
        usage: Usage::default(),
        script: Script::bash_write_deliver(&outside),
    });
    let config = dir.join("node.yaml");
    std::fs::write(
        &config,
        format!(
            r#"
company:
  providers:
    llm:
      default:
        provider: anthropic
        model: {REQUESTED}
        api_key: "${{T09_GATEWAY_KEY}}"
        base_url: "{url}"
    sandbox:
      local: {{}}
      default_run_in: direct
      default_coding_agent: claude-code
      model_mismatch: {mismatch}
  roles:
    - name: engineer
      sandbox:
        enabled: true
        env:
          IS_SANDBOX: "1"
          DISABLE_TELEMETRY: "1"
          DISABLE_ERROR_REPORTING: "1"
          DISABLE_AUTOUPDATER: "1"
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
          MAX_THINKING_TOKENS: "1024"
  seats:
    - {{ handle: eng, role: engineer }}
"#,
            url = standin.url()
        ),
    )
    .expect("write config");
    let node = NodeProcess::start_with_env(
        "claude",
        dir,
        &["--config", config.to_str().expect("utf-8")],
        &[
            ("BOXFLEET_CLAUDE_CLI", cli.to_str().expect("utf-8")),
            ("T09_GATEWAY_KEY", "gw-key-not-a-real-one"),
        ],
    );
    (node, standin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_in_a_direct_box_and_its_phase_record_is_honest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (node, standin) = fleet(dir.path(), None, "fail");
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--brief",
        "Write a greeting to bash.txt, write notes.md, and say what you delivered.",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&out);
    let phase = node.phase_record(&turn, Duration::from_secs(180)).await;
    println!("{phase:#}");

    assert_eq!(phase["failed"], false, "{phase:#}\n{}", node.log());
    // three turns, each reporting the stand-in's usage; input includes both cache shares
    let usage = Usage::default();
    let turns = 3;
    assert_eq!(
        phase["cache_read_tokens"],
        turns * usage.cache_read_input_tokens,
        "{phase:#}"
    );
    assert_eq!(
        phase["cache_write_tokens"],
        turns * usage.cache_creation_input_tokens,
        "{phase:#}"
    );
    assert_eq!(
        phase["input_tokens"],
        turns
            * (usage.input_tokens
                + usage.cache_read_input_tokens
                + usage.cache_creation_input_tokens),
        "{phase:#}"
    );
    assert!(phase["output_tokens"].as_u64().is_some_and(|n| n > 0));
    assert!(
        phase["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{phase:#}"
    );
    let transcript: Vec<String> = phase["activity_transcript"]
        .as_array()
        .expect("a transcript")
        .iter()
        .map(|l| l.as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        transcript
            .iter()
            .any(|l| l.contains("Bash") && l.contains("echo hello from bash")),
        "{transcript:?}"
    );
    assert!(
        transcript
            .iter()
            .any(|l| l.contains("Write") && l.contains("notes.md")),
        "{transcript:?}"
    );
    // what the agent said is there, in order around its calls; a tool's output and a
    // call's own content never are
    for said in [
        "I'll start by running a command.",
        "Now I'll write the notes.",
        "Done: bash.txt and notes.md are written.",
    ] {
        assert!(
            transcript.iter().any(|l| l == said),
            "{said}: {transcript:?}"
        );
    }
    let said_at = |text: &str| transcript.iter().position(|l| l == text);
    assert!(
        said_at("I'll start by running a command.")
            < transcript.iter().position(|l| l.contains("[tool] Bash")),
        "{transcript:?}"
    );
    let all = transcript.join("\n");
    for never in [
        "File created successfully",
        "Written by the stand-in",
        "[ended]",
        "STANDIN-THINKING",
    ] {
        assert!(!all.contains(never), "{never} in {transcript:?}");
    }
    // the model did think (the CLI asked for it, the stand-in answered with it): only the
    // transcript leaves it out
    assert!(
        standin.main_requests().iter().any(|r| r
            .body
            .get("thinking")
            .is_some_and(|t| t["type"] == "enabled")),
        "the CLI asked for thinking: {}",
        standin.request_log()
    );
    assert!(
        phase["session_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "Claude Code's session is kept: {phase:#}"
    );
    assert!(
        phase.get("error").is_none(),
        "no error on a success: {phase:#}"
    );
    assert_eq!(phase["work_key"], serde_json::Value::Null, "{phase:#}");
    assert_eq!(
        phase["delivered_refs"],
        serde_json::json!([DELIVERED_BRANCH])
    );
    assert_eq!(
        phase["model"],
        serde_json::json!({
            "requested": REQUESTED,
            "effective": REQUESTED,
            "source": "stream:assistant",
            "status": "known"
        }),
        "{phase:#}"
    );
    assert!(
        dir.path().join("written/notes.md").exists(),
        "the Write tool call really ran"
    );
    // the entry's key and endpoint reached the CLI: the stand-in was asked three times
    assert_eq!(
        standin.main_requests().len(),
        3,
        "{}",
        standin.request_log()
    );
    assert!(
        standin
            .main_requests()
            .iter()
            .all(|r| r.model.as_deref() == Some(REQUESTED)),
        "the model is always sent to the box"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_model_served_is_a_mismatch_and_the_run_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (node, _standin) = fleet(dir.path(), Some("claude-haiku-4-5"), "fail");
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--brief", "Do the work."]);
    assert_eq!(code, 0, "{out}{err}");
    let phase = node
        .phase_record(&launched_turn(&out), Duration::from_secs(180))
        .await;
    assert_eq!(phase["model"]["status"], "mismatch", "{phase:#}");
    assert_eq!(phase["model"]["requested"], REQUESTED);
    assert_eq!(phase["model"]["effective"], "claude-haiku-4-5");
    assert_eq!(phase["failed"], true, "{phase:#}");
    assert_eq!(phase["reason"], "model_mismatch", "{phase:#}");
    assert!(
        phase["error"]
            .as_str()
            .is_some_and(|e| e.contains("claude-haiku-4-5") && e.contains(REQUESTED)),
        "{phase:#}"
    );
    // tokens are still charged for the work done
    assert!(phase["input_tokens"].as_u64().is_some_and(|n| n > 0));
}
