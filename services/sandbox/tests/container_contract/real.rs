//! What only a real runtime can answer: the job runs under the runtime's init (not as
//! PID 1), a pause freezes every process of the box and a resume thaws them, a box's files are
//! the engine user's on the host whether the runtime is rootful or rootless, and the whole
//! podman cell passes as a plain user on rootless podman.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::*;

/// How many lines the box's ticker has written so far (0 before it starts).
fn ticks(h: &ContainerHarness, sandbox: &dyn Sandbox) -> usize {
    std::fs::read_to_string(h.host_home(sandbox).join("ticks"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

async fn until_ticking_past(h: &ContainerHarness, sandbox: &dyn Sandbox, past: usize) -> usize {
    for _ in 0..100 {
        let now = ticks(h, sandbox);
        if now > past {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the box's ticker never got past {past} lines");
}

/// The job is a child of the runtime's init, a pause stops its clock and a resume restarts
/// it, and nothing of the box is left after its kill.
async fn the_job_runs_under_init_and_a_pause_freezes_it(kind: RuntimeKind) {
    let h = ContainerHarness::real(kind);
    if !h.real {
        return;
    }
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let id = sandbox.id().to_owned();
    let container = format!("boxfleet-{id}");
    let dir = format!("{}/.boxfleet/jobs/ticker", sandbox.home());
    let job = "tr '\\0' ' ' </proc/1/cmdline >pid1; echo $$ >job-pid; \
               i=0; while [ $i -lt 1200 ]; do i=$((i+1)); echo $i >>ticks; sleep 0.05; done";
    sandbox
        .start_background(job, &BTreeMap::new(), &dir)
        .await
        .expect("start");
    let before = until_ticking_past(&h, sandbox.as_ref(), 2).await;
    let home = h.host_home(sandbox.as_ref());
    let init = std::fs::read_to_string(home.join("pid1")).expect("pid1");
    let init_name = match kind {
        RuntimeKind::Podman => "podman-init",
        RuntimeKind::Docker => "docker-init",
    };
    assert!(
        init.contains(init_name),
        "PID 1 in the box is the runtime's init ({init_name}), not the job: {init:?}"
    );
    let job_pid: u32 = std::fs::read_to_string(home.join("job-pid"))
        .expect("job-pid")
        .trim()
        .parse()
        .expect("a pid");
    assert_ne!(job_pid, 1, "the job is not PID 1");
    assert!(before > 0);

    sandbox.pause().await.expect("pause");
    assert_eq!(h.status(&container).as_deref(), Some("paused"));
    let frozen_at = ticks(&h, sandbox.as_ref());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        ticks(&h, sandbox.as_ref()),
        frozen_at,
        "a paused box's job wrote nothing for 1.5 s (it ticks every 50 ms)"
    );
    h.provider.connect(&id).await.expect("connect resumes");
    assert_eq!(h.status(&container).as_deref(), Some("running"));
    until_ticking_past(&h, sandbox.as_ref(), frozen_at).await;

    h.provider.kill(&id).await.expect("kill");
    assert_eq!(h.status(&container), None, "the container is gone");
    assert!(
        !h.provider.box_dir(&id).exists(),
        "the box's directory is gone"
    );
}

#[tokio::test]
async fn podman_runs_the_job_under_its_init_and_a_pause_freezes_it() {
    the_job_runs_under_init_and_a_pause_freezes_it(RuntimeKind::Podman).await
}

#[tokio::test]
async fn docker_runs_the_job_under_its_init_and_a_pause_freezes_it() {
    the_job_runs_under_init_and_a_pause_freezes_it(RuntimeKind::Docker).await
}

/// A rootful runtime runs the box as the engine's uid:gid (`--user`); a rootless one is
/// left to map its root to the engine's user (no `--user`). Either way a file the job writes
/// in its home is the engine user's on the host.
#[tokio::test]
async fn podman_boxes_write_as_the_engine_user_rootful_or_rootless() {
    let h = ContainerHarness::real(RuntimeKind::Podman);
    if !h.real {
        return;
    }
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let out = sandbox
        .exec(
            "echo x > mine; id -u",
            &BTreeMap::new(),
            Duration::from_secs(20),
        )
        .await
        .expect("exec");
    assert_eq!(out.exit_code, 0, "{out:?}");
    let record = h.provider.records(sandbox.id()).await.expect("records");
    let rootless = std::env::var("BOXFLEET_ROOTLESS_EXPECTED").as_deref() == Ok("1");
    if rootless {
        assert_eq!(
            record.user, None,
            "rootless: the user is left to the runtime"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    } else {
        assert_eq!(record.user.as_deref(), Some(engine_ids().as_str()));
    }
    let owner = std::fs::metadata(h.host_home(sandbox.as_ref()).join("mine"))
        .expect("the job's file on the host")
        .uid();
    let me = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    assert_eq!(owner, me, "the job's file is the engine user's on the host");
    h.provider.kill(sandbox.id()).await.expect("kill");
}

/// Whether this host's cgroups are v2 alone (a rootless runtime can freeze a container only
/// there: on v1 or a hybrid layout it has no cgroup of its own).
fn cgroup_v2_only() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// The contract's checks that pause a box: what a rootless runtime cannot do without cgroup v2.
const PAUSING: [&str; 6] = [
    "attach_never_wakes",
    "a_recycled_pid_is_not_the_job",
    "connect_resumes",
    "kill_never_resumes_and_gone_is_success",
    "pause_and_resume",
    "a_pause_freezes_it",
];

/// Rootless podman on cgroup v1 (this machine's hybrid layout) cannot pause: the pause is
/// refused with a sentence that says why, what it means for the run and what to do, and the
/// box is left running, not marked paused, and still killed cleanly.
#[tokio::test]
async fn podman_as_a_plain_user_without_cgroup_v2_cannot_pause_and_says_why() {
    if std::env::var("BOXFLEET_ROOTLESS_EXPECTED").as_deref() != Ok("1") || cgroup_v2_only() {
        return; // rootful, or a host where rootless podman pauses: the contract covers it
    }
    let h = ContainerHarness::real(RuntimeKind::Podman);
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let id = sandbox.id().to_owned();
    match sandbox.pause().await {
        Err(BoxError::Failed(why)) => {
            assert!(why.contains("cgroup v2"), "{why}");
            assert!(why.contains("keeps running"), "{why}");
            assert!(why.contains("rootful"), "{why}");
        }
        other => panic!("a rootless pause on cgroup v1 is refused: {other:?}"),
    }
    assert!(!h.recorded_paused(&id).await, "not recorded paused");
    assert_eq!(
        h.status(&format!("boxfleet-{id}")).as_deref(),
        Some("running")
    );
    h.provider.kill(&id).await.expect("kill");
    assert!(!h.provider.box_dir(&id).exists());
}

/// The podman cell, run again by a plain user on rootless podman: this test binary, copied
/// where that user may run it, under `runuser` (`BOXFLEET_ROOTLESS_TEST_USER`, a user with
/// subordinate ids and the test image in its own storage; `.ci/containers` makes it).
#[tokio::test]
async fn the_podman_cell_passes_as_a_plain_user_on_rootless_podman() {
    if std::env::var("BOXFLEET_ROOTLESS_EXPECTED").is_ok() {
        return; // this is the run as that user
    }
    let Ok(user) = std::env::var("BOXFLEET_ROOTLESS_TEST_USER") else {
        assert!(
            !real_runtimes_required(),
            "the rootless check needs BOXFLEET_ROOTLESS_TEST_USER; `bash .ci/run` as root makes the user"
        );
        eprintln!("BOXFLEET_ROOTLESS_TEST_USER unset: rootless podman is not checked");
        return;
    };
    let real = RealRuntime::from_env(RuntimeKind::Podman)
        .unwrap_or_else(|unset| panic!("the rootless check needs {unset}"));
    let passwd = std::process::Command::new("getent")
        .args(["passwd", &user])
        .output()
        .expect("getent runs");
    let entry = String::from_utf8_lossy(&passwd.stdout).into_owned();
    let home = entry
        .trim()
        .split(':')
        .nth(5)
        .unwrap_or_else(|| panic!("no user {user}: {entry:?}"))
        .to_owned();
    let staged = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let exe = staged.path().join("container_contract");
    std::fs::copy(std::env::current_exe().expect("this test binary"), &exe).expect("copy");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut run = std::process::Command::new("runuser");
    run.args(["-u", &user, "--", "env", "-i"])
        .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .arg(format!("HOME={home}"))
        .arg("TMPDIR=/tmp")
        .arg(format!("BOXFLEET_CONTAINER_TEST_IMAGE={}", real.image))
        .arg("BOXFLEET_CONTAINER_TESTS=required")
        .arg("BOXFLEET_ROOTLESS_EXPECTED=1")
        // rootless podman's default network is slirp4netns, which needs /dev/net/tun; a CI
        // container may not give a plain user that (here: "open(/dev/net/tun): Permission
        // denied"), and the contract needs no network
        .arg("BOXFLEET_CONTAINER_TEST_NETWORK=none");
    for (key, value) in &real.runtime_env {
        run.arg(format!("{key}={value}"));
        if key == "CONTAINERS_CONF" {
            run.arg(format!("BOXFLEET_CONTAINER_TEST_CONF={value}"));
        }
    }
    run.arg(&exe).args([
        "podman",
        "--skip",
        "the_podman_cell_passes",
        "--test-threads",
        "2",
    ]);
    let mut expected = 16;
    if !cgroup_v2_only() {
        for check in PAUSING {
            run.args(["--skip", check]);
        }
        expected -= PAUSING.len();
    }
    let out = run
        .current_dir(staged.path())
        .output()
        .expect("runuser runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the podman cell failed as {user} on rootless podman:\n{stdout}\n{stderr}"
    );
    let passed: usize = stdout
        .lines()
        .find_map(|line| line.strip_prefix("test result: ok. "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        passed >= expected,
        "the whole podman cell ran as {user} ({passed} passed):\n{stdout}"
    );
    assert!(
        !stdout.contains("stand-in") && !stderr.contains("runs on the stand-in"),
        "{stderr}"
    );
}
