//! Scenario: OpenCode's subscription path (issue 16; the spec's lines 247 and 263–265) through
//! the `boxfleet` binary: an `opencode` cli-agent entry's exported login is seeded into a
//! direct box, imported by the run before its server starts, exported back by the run, and
//! written back over the shared login by compare-and-swap when the box is torn down; the
//! entry's model reaches the run exactly as written.
//!
//! OpenCode 2 is not on the registries these machines reach (only 1.x, which the runner
//! refuses), so the CLI is the runner tests' stand-in (`services/agents/tests/fixtures/
//! fake-opencode.sh`: `serve` prints where it listens and a minted password as 2.0.32 does,
//! `auth import FILE` / `auth export` stand for the login's import and export the spec
//! describes). The pairing and remote-box rules are `plan::tests`.

use std::path::Path;
use std::time::{Duration, Instant};

use boxfleet_tests::node::{NodeProcess, launched_turn};

const OLD: &str = "[{\"provider\":\"anthropic\",\"refresh\":\"old\"}]\n";
const ROTATED: &str = "[{\"provider\":\"anthropic\",\"refresh\":\"rotated\"}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opencode_login_is_seeded_imported_and_written_back() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../services/agents/tests/fixtures");
    let dir = tempfile::tempdir().expect("tempdir");
    let login = dir.path().join("opencode-login");
    let record = dir.path().join("record");
    std::fs::create_dir_all(&login).expect("login dir");
    std::fs::create_dir_all(&record).expect("record dir");
    std::fs::write(login.join("exported-credentials"), OLD).expect("login");
    let config = dir.path().join("node.yaml");
    std::fs::write(
        &config,
        format!(
            r#"
company:
  providers:
    llm:
      default: {{ provider: opencode, model: anthropic/claude-sonnet-4-5, login_dir: "{login}" }}
    sandbox: {{ local: {{}}, default_run_in: direct, default_coding_agent: opencode }}
  roles:
    - name: eng
      sandbox:
        enabled: true
        env: {{ FAKE_RECORD: "{record}", FAKE_STREAM: "{events}", FAKE_SESSION: "{session}" }}
  seats:
    - {{ handle: eng, role: eng }}
"#,
            login = login.display(),
            record = record.display(),
            events = fixtures.join("opencode-events.jsonl").display(),
            session = fixtures.join("opencode-session.json").display(),
        ),
    )
    .expect("config");
    use std::os::unix::fs::PermissionsExt;
    let cli = dir.path().join("opencode");
    std::fs::copy(fixtures.join("fake-opencode.sh"), &cli).expect("the stand-in CLI");
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let node = NodeProcess::start_with_env(
        "opencode",
        dir.path(),
        &["--config", config.to_str().expect("utf-8")],
        &[("BOXFLEET_OPENCODE_CLI", cli.to_str().expect("utf-8"))],
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--brief", "fix the build"]);
    assert_eq!(code, 0, "{out}{err}");
    let phase = node
        .phase_record(&launched_turn(&out), Duration::from_secs(60))
        .await;
    assert_eq!(phase["failed"], false, "{phase:#}\n{}", node.log());
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        read(&record.join("imported")),
        OLD,
        "the run imported the seeded login"
    );
    let argv = read(&record.join("run-argv"));
    assert!(
        argv.contains("--model\nanthropic/claude-sonnet-4-5\n"),
        "the entry's model as written: {argv}"
    );
    // the box's teardown writes the refreshed login back over the shared one
    let started = Instant::now();
    while read(&login.join("exported-credentials")) != ROTATED {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the refreshed login was not written back:\n{}",
            node.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
