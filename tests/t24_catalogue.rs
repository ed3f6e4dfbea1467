//! Scenario: the sandbox catalogue's rules through the `boxfleet` binary (issue 16; the spec's
//! "Enabling it" through "Sandbox backends"): the role's gate refused at launch naming the
//! role, no catalogue as no sandbox, `fake: true` answering every cell in-process, a node with
//! no company document a working single node on `direct`, and `boxfleet validate` refusing
//! each rule at its location.
//!
//! Each refusal of `validate` is also a unit test beside its rule (`catalogue::tests`); the
//! backends built only for reached cells is `cells::tests`.

use std::path::Path;
use std::time::Duration;

use boxfleet_tests::node::{NodeProcess, launched_turn, validate};

fn write(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write");
    path.to_str().expect("utf-8").to_owned()
}

const GATED: &str = r#"
company:
  providers:
    sandbox: { local: {}, default_run_in: direct }
  roles:
    - { name: writer }
    - { name: engineer, sandbox: { enabled: true } }
  seats:
    - { handle: w, role: writer }
    - { handle: e, role: engineer }
    - { handle: loose }
"#;

/// A seat whose role does not enable the sandbox, or that has no role, is refused at launch
/// (class `refused`) with the role named and the change to make; an enabled one launches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_refuses_a_role_that_does_not_enable_the_sandbox_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(dir.path(), "gated.yaml", GATED);
    let node = NodeProcess::start("gate", dir.path(), &["--config", &config]);
    assert!(
        node.log()
            .contains("sandbox cells: direct (default direct)"),
        "{}",
        node.log()
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "w", "--command", "true"]);
    assert_eq!(code, 1, "{out}{err}");
    let said = format!("{out}{err}");
    assert!(
        said.contains("refused (refused)")
            && said.contains("role \"writer\"")
            && said.contains("sandbox.enabled: true"),
        "{said}"
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "loose", "--command", "true"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(format!("{out}{err}").contains("has no role"), "{out}{err}");
    node.launch_settled(&["--seat", "e", "--command", "echo ok"])
        .await;
}

/// A company document with no `providers.sandbox` is no sandbox: the node says so at start
/// and refuses every launch, saying what to add. With no company document at all the node
/// runs the quickstart company: implicit seats on `direct`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_catalogue_is_no_sandbox_and_no_document_is_the_quickstart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "chart.yaml",
        "company:\n  seats:\n    - { handle: eng }\n",
    );
    let node = NodeProcess::start("bare", dir.path(), &["--config", &config]);
    assert!(
        node.log()
            .contains("no sandbox: company.providers.sandbox is absent"),
        "{}",
        node.log()
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "true"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("add providers.sandbox with local: or e2b:"),
        "{out}{err}"
    );
    drop(node);

    let quick = tempfile::tempdir().expect("tempdir");
    let node = NodeProcess::start("quick", quick.path(), &[]);
    assert!(
        node.log()
            .contains("sandbox cells: direct (default direct)"),
        "{}",
        node.log()
    );
    node.launch_settled(&["--seat", "anyone", "--command", "echo hi"])
        .await;
}

/// `fake: true` answers every cell with deterministic in-process boxes: a job launched on it
/// is collected from a fake box and never touches the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_true_answers_every_cell_in_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "fake.yaml",
        "company:\n  providers:\n    sandbox: { fake: true }\n  roles:\n    - { name: vm, sandbox: { enabled: true, run_in: e2b } }\n  seats:\n    - { handle: r, role: vm }\n",
    );
    let node = NodeProcess::start("fake", dir.path(), &["--config", &config]);
    assert!(node.log().contains("all fake"), "{}", node.log());
    let (code, out, err) = node.cli(&["launch", "--seat", "r", "--command", "echo hi"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("in box fake-"), "{out}");
    let turn = launched_turn(&out);
    let phase = node.phase_record(&turn, Duration::from_secs(90)).await;
    assert_eq!(phase["failed"], false, "{phase:#}");
    assert!(
        !dir.path().join(".boxfleet/boxes").exists()
            || std::fs::read_dir(dir.path().join(".boxfleet/boxes"))
                .expect("boxes dir")
                .next()
                .is_none(),
        "a fake box writes nothing on the host"
    );
}

/// `fake:` as a block: each call's latency and the job every run does. A job that runs 2 s
/// is collected after it, with the block's report and exit status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fake_block_sets_the_latency_and_the_job() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(
        dir.path(),
        "fake.yaml",
        "node: { poll_interval_seconds: 1 }\ncompany:\n  providers:\n    sandbox:\n      fake:\n        latency_ms: { create: 300, poll: 20 }\n        job: { seconds: 2, exit_code: 0, report: 'the fake fixed it' }\n",
    );
    let node = NodeProcess::start("fakeblock", dir.path(), &["--config", &config]);
    assert!(
        node.log().contains("fake boxes in memory"),
        "{}",
        node.log()
    );
    let began = std::time::Instant::now();
    let (code, out, err) = node.cli(&["launch", "--seat", "s", "--command", "make test", "--wait"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        began.elapsed() >= Duration::from_secs(2),
        "the job ran its 2 s: {out}"
    );
    assert!(out.contains("the fake fixed it"), "{out}");
    assert!(out.contains("succeeded"), "{out}");
}

/// `boxfleet validate` refuses each catalogue rule where it is written, with its remedy, and
/// exits non-zero.
#[test]
fn validate_refuses_each_catalogue_rule_at_its_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let validate = |body: &str| validate(&write(dir.path(), "bad.yaml", body), &[]);
    for (body, location, says) in [
        (
            "company:\n  providers:\n    sandbox: {}\n",
            "company.providers.sandbox:",
            "give it e2b:, local: or fake: true",
        ),
        (
            "company:\n  roles: [{ name: eng, sandbox: { enabled: true } }]\n",
            "company.roles[0].sandbox.enabled:",
            "no providers.sandbox",
        ),
        (
            "company:\n  providers:\n    sandbox: { local: {} }\n",
            "company.providers.sandbox.default_run_in:",
            "set default_run_in: direct",
        ),
        (
            "company:\n  providers:\n    sandbox: { local: {}, default_run_in: e2b }\n",
            "company.providers.sandbox.default_run_in:",
            "e2b:, is not configured",
        ),
        (
            "company:\n  providers:\n    sandbox: { local: {}, default_run_in: container }\n",
            "company.providers.sandbox.local.image:",
            "is needed",
        ),
        (
            "company:\n  providers:\n    sandbox: { local: { image: busybox }, default_run_in: direct }\n",
            "company.providers.sandbox.local.image:",
            "configures nothing",
        ),
        (
            "company:\n  providers:\n    sandbox: { fake: true, e2b: { api_key: k } }\n",
            "company.providers.sandbox.fake:",
            "replaces the backends",
        ),
    ] {
        let (ok, said) = validate(body);
        assert!(!ok, "{body} validated:\n{said}");
        assert!(
            said.contains(location) && said.contains(says),
            "{location} … {says} for\n{body}in:\n{said}"
        );
    }
    let (ok, said) = validate(GATED);
    assert!(ok, "{said}");
}

/// The spec's two shipped example companies, adapted to boxfleet (`examples/nimbus*.yaml`),
/// load and validate; a run variable the environment lacks is warned of, not refused.
#[test]
fn the_specs_two_example_companies_validate() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let path = |name: &str| examples.join(name).to_str().expect("utf-8").to_owned();
    let (ok, said) = validate(
        &path("nimbus.company.yaml"),
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-example"),
            ("SWE_GITLAB_TOKEN", "glpat-example"),
        ],
    );
    assert!(
        ok && said.contains("valid") && !said.contains("warning"),
        "{said}"
    );
    let (ok, said) = validate(
        &path("nimbus.company.yaml"),
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-example"),
            ("SWE_GITLAB_TOKEN", ""),
        ],
    );
    assert!(
        ok && said.contains("company.roles[0].sandbox.env.GITLAB_TOKEN: ${SWE_GITLAB_TOKEN}"),
        "{said}"
    );
    let (ok, said) = validate(&path("nimbus-claude-cli.company.yaml"), &[]);
    assert!(ok && said.contains("valid"), "{said}");
}
