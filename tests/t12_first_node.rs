//! Scenario: a new user's first node. `cd my-project && boxfleet node` with no flags at all
//! (so the data dir is the default `./.boxfleet`, relative to where the node was started), then
//! a command job launched with `--wait`: it succeeds and its report comes back. Then the same
//! with a relative `--data-dir` and a relative `--boxes-dir` that climbs out of the project,
//! from a directory whose name has a space in it.
//!
//! Every test on `main` passed an absolute `--data-dir`, which is why a relative one failing
//! every job ("the job's process group died without an exit status") went unseen: the box's
//! home, handed to the job as `HOME` while the job ran *in* that home, named a directory
//! inside itself.

use std::path::Path;

use boxfleet_tests::node::{UserNode, free_port};

/// The port a node with no `--listen` serves on (`node.listen`'s default).
const DEFAULT_PORT: u16 = 7400;

/// The job: says hello, and reports where it ran and what `HOME` it was given. (Not as
/// `pwd=…`: `pwd` is a password's key to the redactor, which would hide the value.)
const JOB: &str =
    r#"echo hello; printf 'ok\nran_in=%s\nhome=%s\n' "$(pwd)" "$HOME" > "$BOXFLEET_REPORT""#;

/// Launches [`JOB`] with `--wait` and returns what `launch` printed, after checking it
/// succeeded with its report.
fn must_run_a_job(node: &UserNode) -> String {
    let (code, stdout, stderr) = node.cli(&["launch", "--seat", "eng", "--command", JOB, "--wait"]);
    assert_eq!(
        code,
        0,
        "launch --wait exited {code}\nstdout:\n{stdout}\nstderr:\n{stderr}\nnode log:\n{}",
        node.log()
    );
    assert!(
        stdout.contains("outcome       succeeded"),
        "the job did not succeed:\n{stdout}\nnode log:\n{}",
        node.log()
    );
    assert!(
        stdout.contains("    ok\n"),
        "its report came back:\n{stdout}"
    );
    stdout
}

/// The value the job's report gives `key` (`ran_in`, `home`).
fn reported(stdout: &str, key: &str) -> String {
    let prefix = format!("{key}=");
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {key}= in the report:\n{stdout}"))
        .to_owned()
}

/// The job ran in its box's home, under `boxes`, and was given that home as an absolute `HOME`.
fn must_have_run_in_a_box_under(stdout: &str, boxes: &Path) {
    let ran_in = reported(stdout, "ran_in");
    let home = reported(stdout, "home");
    assert_eq!(ran_in, home, "the job runs in its home");
    assert!(Path::new(&home).is_absolute(), "HOME is absolute: {home}");
    // the box itself is gone by now (the built-in engine settled the run and reclaimed it)
    let boxes = boxes.canonicalize().expect("the boxes dir exists");
    let home = Path::new(&home);
    assert!(
        home.starts_with(&boxes),
        "the box's home {} is under {}",
        home.display(),
        boxes.display()
    );
}

#[test]
fn boxfleet_node_with_no_flags_runs_jobs() {
    if std::net::TcpListener::bind(("127.0.0.1", DEFAULT_PORT)).is_err() {
        panic!(
            "port {DEFAULT_PORT} is in use: this test starts `boxfleet node` with no flags, which \
             listens there; stop whatever holds it (`ss -ltnp 'sport = :{DEFAULT_PORT}'`)"
        );
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    // the banner prints paths as the kernel resolves them (a linked /tmp included)
    let root = scratch.path().canonicalize().expect("canonical tempdir");
    let project = root.join("my-project");
    std::fs::create_dir(&project).expect("project dir");

    println!("--- phase: `boxfleet node` in a fresh project directory, no flags");
    let node = UserNode::start(&project, &[], DEFAULT_PORT, &root.join("node.log"));
    let data_dir = project.join(".boxfleet");
    let banner = node.log();
    assert!(
        banner.contains(&format!("embedded store in {}", data_dir.display())),
        "the banner names the data dir absolute: {banner}"
    );
    assert!(
        banner.contains(&format!(
            "direct boxes in {}",
            data_dir.join("boxes").display()
        )),
        "the banner names the boxes dir absolute: {banner}"
    );

    println!("--- phase: a command job, launched and waited for");
    let stdout = must_run_a_job(&node);
    must_have_run_in_a_box_under(&stdout, &data_dir.join("boxes"));
}

#[test]
fn relative_data_and_boxes_dirs_run_jobs() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path().canonicalize().expect("canonical tempdir");
    let project = root.join("my project");
    std::fs::create_dir(&project).expect("project dir");
    let port = free_port();

    println!("--- phase: a node on a relative --data-dir and a --boxes-dir outside the project");
    let listen = format!("127.0.0.1:{port}");
    let node = UserNode::start(
        &project,
        &[
            "--listen",
            &listen,
            "--data-dir",
            "reldata",
            "--boxes-dir",
            "../shared-boxes",
        ],
        port,
        &root.join("node.log"),
    )
    // the admin credential is in the data dir the node was given, as the banner says
    .with_token_file(Path::new("reldata/admin.token"));
    let banner = node.log();
    assert!(
        banner.contains(&format!(
            "embedded store in {}",
            project.join("reldata").display()
        )),
        "the banner names the data dir absolute: {banner}"
    );
    assert!(
        banner.contains(&format!(
            "direct boxes in {}",
            root.join("shared-boxes").display()
        )),
        "the banner names the boxes dir absolute: {banner}"
    );

    println!("--- phase: a command job, launched and waited for");
    let stdout = must_run_a_job(&node);
    must_have_run_in_a_box_under(&stdout, &root.join("shared-boxes"));
    assert!(
        project.join("reldata/store").is_dir(),
        "the embedded store is in the relative data dir"
    );
}
