//! The `command` runner against a real direct box: real processes, a real shell.

use std::path::Path;
use std::time::{Duration, Instant};

use boxfleet_actors::ports::{Collected, JobState, LaunchSpec, Provider, Runner};
use boxfleet_agents::CommandRunner;
use boxfleet_agents::layout;
mod support;

use support::{TestBox, run, wait_done, which};

fn launch(launch_id: &str, command: &str, timeout_seconds: Option<u64>) -> LaunchSpec {
    LaunchSpec {
        turn_id: "t-1".into(),
        launch_id: launch_id.into(),
        seat: "ada".into(),
        command: Some(command.into()),
        timeout_seconds,
        ..LaunchSpec::default()
    }
}

async fn run_command(b: &TestBox, command: &str) -> (JobState, Collected) {
    run(&CommandRunner::new(), b, &launch("l-1", command, None)).await
}

const REPORTING: &str = r#"echo "step one"
echo "step two as $BOXFLEET_AGENT_HANDLE"
command -v boxfleet-ask
cat >"$BOXFLEET_REPORT" <<'REPORT'
# Findings

All checks pass.

- Delivered: https://git.example.com/acme/app/pull/7
Delivered: **`feature/login`**
Delivered: https://user:secret@git.example.com/acme/app.git
Delivered: https://git.example.com/acme/app/pull/7
REPORT
"#;

fn check_reporting(state: JobState, c: &Collected, home: &str) {
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert_eq!(c.exit_code, Some(0));
    assert!(c.report.contains("All checks pass."), "{}", c.report);
    assert_eq!(
        c.delivered_refs,
        vec!["https://git.example.com/acme/app/pull/7", "feature/login"]
    );
    assert_eq!(
        c.transcript,
        vec![
            "step one".to_owned(),
            "step two as ada".to_owned(),
            layout::ask_shim(home)
        ]
    );
    assert!(c.read_errors.is_empty(), "{:?}", c.read_errors);
    assert_eq!(c.question, None);
    assert!(c.succeeded());
}

#[tokio::test]
async fn a_reporting_command_is_collected() {
    let b = TestBox::new().await;
    let (state, c) = run_command(&b, REPORTING).await;
    check_reporting(state, &c, b.home());
    assert_eq!(c.stderr_tail, "");
}

#[tokio::test]
async fn a_failing_command_gives_its_exit_code_and_stderr() {
    let b = TestBox::new().await;
    let (state, c) = run_command(
        &b,
        "echo partial output\necho 'something broke: disk full' >&2\nexit 3",
    )
    .await;
    assert_eq!(state, JobState::Done { exit_code: Some(3) });
    assert_eq!(c.exit_code, Some(3));
    assert!(
        c.stderr_tail.contains("something broke: disk full"),
        "{}",
        c.stderr_tail
    );
    // no report written: stdout's end stands in for it
    assert_eq!(c.report, "partial output\n");
    assert!(!c.succeeded());
}

#[tokio::test]
async fn the_checks_own_deadline_exits_124() {
    let b = TestBox::new().await;
    let started = Instant::now();
    let (state, c) = run(
        &CommandRunner::new(),
        &b,
        &launch("l-1", "sleep 5", Some(1)),
    )
    .await;
    assert_eq!(
        state,
        JobState::Done {
            exit_code: Some(124)
        }
    );
    assert_eq!(c.exit_code, Some(124));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_killed_group_reads_as_done_without_an_exit_code() {
    let b = TestBox::new().await;
    let runner = CommandRunner::new();
    runner.install(b.sandbox.as_ref()).await.expect("install");
    let job = runner
        .start(
            b.sandbox.as_ref(),
            &launch("l-1", "echo begun\nsleep 30", None),
        )
        .await
        .expect("start");
    assert_eq!(
        runner.poll(b.sandbox.as_ref(), &job).await.expect("poll"),
        JobState::Running
    );
    b.sandbox.kill_job(&job).await.expect("kill_job");
    let state = wait_done(&runner, b.sandbox.as_ref(), &job).await;
    assert_eq!(state, JobState::Done { exit_code: None });
    let c = runner
        .collect(b.sandbox.as_ref(), &job)
        .await
        .expect("collect");
    assert_eq!(c.exit_code, None);
    assert!(
        c.read_errors.is_empty(),
        "an absent done marker is no read error: {:?}",
        c.read_errors
    );
    assert!(!c.succeeded());
}

#[tokio::test]
async fn ask_with_a_branch_is_recorded_and_tells_the_job_to_stop() {
    let b = TestBox::new().await;
    let (state, c) = run_command(&b, "boxfleet-ask \"Which database, Postgres or it's SQLite?\" --to manager --branch wip/db-choice").await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    let asked = c.question.expect("a question");
    assert_eq!(asked.question, "Which database, Postgres or it's SQLite?");
    assert_eq!(asked.audience, "manager");
    assert_eq!(asked.branch.as_deref(), Some("wip/db-choice"));
    assert!(
        c.transcript
            .iter()
            .any(|l| l.contains("recorded") && l.contains("Stop now")),
        "{:?}",
        c.transcript
    );
}

#[tokio::test]
async fn ask_defaults_and_bad_usage() {
    let b = TestBox::new().await;
    // outside any repository: no branch; the audience defaults to the requester
    let (_, c) = run_command(&b, "boxfleet-ask 'Is the spec right?'").await;
    let asked = c.question.expect("a question");
    assert_eq!((asked.audience.as_str(), asked.branch), ("requester", None));

    let (state, c) = run_command(&b, "boxfleet-ask; echo \"rc=$?\"; boxfleet-ask q --to; echo \"rc=$?\"; boxfleet-ask --bogus q; echo \"rc=$?\"; boxfleet-ask a b; echo \"rc=$?\"").await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert_eq!(c.transcript, vec!["rc=2", "rc=2", "rc=2", "rc=2"]);
    assert!(
        c.stderr_tail.contains("usage: boxfleet-ask"),
        "{}",
        c.stderr_tail
    );
    assert_eq!(
        c.question, None,
        "install cleared the previous job's question and bad usage recorded none"
    );
}

#[tokio::test]
async fn ask_without_a_branch_reads_it_from_git() {
    if which("git").is_none() {
        eprintln!("git is not installed: skipped");
        return;
    }
    let b = TestBox::new().await;
    let git = "git -c user.email=ada@example.com -c user.name=Ada -c init.defaultBranch=main";
    // on a branch with no upstream: the branch itself
    let local = format!(
        "set -e\n{git} init -q repo\ncd repo\n{git} checkout -q -b feat/local\n{git} commit -q --allow-empty -m init\nboxfleet-ask 'Local?' --to team"
    );
    let (state, c) = run_command(&b, &local).await;
    assert_eq!(
        state,
        JobState::Done { exit_code: Some(0) },
        "{}",
        c.stderr_tail
    );
    let asked = c.question.expect("a question");
    assert_eq!(
        (asked.audience.as_str(), asked.branch.as_deref()),
        ("team", Some("feat/local"))
    );

    // pushed under another name: the name it has on the remote, without the remote
    let pushed = format!(
        "set -e\n{git} init -q --bare origin.git\ncd repo\n{git} remote add origin ../origin.git\n{git} push -q -u origin feat/local:wip/pushed-name\nboxfleet-ask 'Pushed?'"
    );
    let (state, c) = run_command(&b, &pushed).await;
    assert_eq!(
        state,
        JobState::Done { exit_code: Some(0) },
        "{}",
        c.stderr_tail
    );
    assert_eq!(
        c.question.expect("a question").branch.as_deref(),
        Some("wip/pushed-name")
    );

    // a detached HEAD: no branch
    let detached = format!("set -e\ncd repo\n{git} checkout -q --detach\nboxfleet-ask 'Detached?'");
    let (_, c) = run_command(&b, &detached).await;
    assert_eq!(c.question.expect("a question").branch, None);
}

#[tokio::test]
async fn a_report_replaced_by_a_link_is_a_read_error_and_the_rest_is_collected() {
    let b = TestBox::new().await;
    let (state, c) = run_command(&b, "echo progress\necho 'Delivered: feature/x'\nln -s /etc/hostname \"$BOXFLEET_REPORT\"\necho warn >&2").await;
    assert_eq!(state, JobState::Done { exit_code: Some(0) });
    assert_eq!(c.exit_code, Some(0));
    assert_eq!(c.read_errors.len(), 1, "{:?}", c.read_errors);
    assert!(
        c.read_errors[0].starts_with("report"),
        "{:?}",
        c.read_errors
    );
    assert!(
        c.read_errors[0].contains("symbolic link"),
        "{:?}",
        c.read_errors
    );
    // never read as absent: no stand-in report from stdout, no refs from it
    assert_eq!(c.report, "");
    assert!(c.delivered_refs.is_empty());
    assert_eq!(c.transcript, vec!["progress", "Delivered: feature/x"]);
    assert_eq!(c.stderr_tail, "warn\n");
    assert!(!c.succeeded());
}

#[tokio::test]
async fn follow_from_an_offset_returns_only_new_output() {
    let b = TestBox::new().await;
    let runner = CommandRunner::new();
    runner.install(b.sandbox.as_ref()).await.expect("install");
    let command = "echo first\nwhile [ ! -e go ]; do sleep 0.05; done\necho 'second, café'";
    let job = runner
        .start(b.sandbox.as_ref(), &launch("l-1", command, None))
        .await
        .expect("start");
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        let f = runner
            .follow(b.sandbox.as_ref(), &job, 0)
            .await
            .expect("follow");
        if !f.text.is_empty() || Instant::now() > deadline {
            break f;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(
        (first.text.as_str(), first.start, first.end),
        ("first\n", 0, 6)
    );
    let nothing_new = runner
        .follow(b.sandbox.as_ref(), &job, first.end)
        .await
        .expect("follow");
    assert_eq!(
        (
            nothing_new.text.as_str(),
            nothing_new.start,
            nothing_new.end
        ),
        ("", 6, 6)
    );
    b.sandbox.write_file("go", b"").await.expect("write");
    assert_eq!(
        wait_done(&runner, b.sandbox.as_ref(), &job).await,
        JobState::Done { exit_code: Some(0) }
    );
    let second = runner
        .follow(b.sandbox.as_ref(), &job, first.end)
        .await
        .expect("follow");
    assert_eq!(second.text, "second, café\n");
    assert_eq!(
        (second.start, second.end),
        (6, 6 + "second, café\n".len() as u64)
    );
}

#[tokio::test]
async fn install_clears_the_previous_jobs_markers_and_keeps_the_rest() {
    let b = TestBox::new().await;
    let (_, first) = run_command(
        &b,
        "echo '# old report' >\"$BOXFLEET_REPORT\"\necho keep >kept.txt\nboxfleet-ask 'old?'",
    )
    .await;
    assert!(first.question.is_some());
    CommandRunner::new()
        .install(b.sandbox.as_ref())
        .await
        .expect("install");
    let s = b.sandbox.as_ref();
    assert_eq!(
        s.read_file(&layout::report(b.home())).await.expect("read"),
        None
    );
    assert_eq!(
        s.read_file(&format!("{}/question", layout::ask_dir(b.home())))
            .await
            .expect("read"),
        None
    );
    assert_eq!(
        s.read_file(&layout::in_job(&layout::job_dir(b.home(), "l-1"), "done"))
            .await
            .expect("read"),
        None
    );
    assert_eq!(
        s.read_file("kept.txt").await.expect("read"),
        Some(b"keep\n".to_vec())
    );
    let shim = std::fs::metadata(layout::ask_shim(b.home())).expect("the shim is there");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(shim.permissions().mode() & 0o777, 0o755);
}

#[tokio::test]
async fn the_command_is_never_on_argv() {
    let b = TestBox::new().await;
    let runner = CommandRunner::new();
    runner.install(b.sandbox.as_ref()).await.expect("install");
    let marker = "BOXFLEET-ARGV-CANARY-4711";
    let job = runner
        .start(
            b.sandbox.as_ref(),
            &launch("l-1", &format!("sleep 30 # {marker}"), Some(60)),
        )
        .await
        .expect("start");
    tokio::time::sleep(Duration::from_millis(300)).await;
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            assert!(
                !String::from_utf8_lossy(&cmdline).contains(marker),
                "on argv: {}",
                String::from_utf8_lossy(&cmdline)
            );
        }
    }
    b.sandbox.kill_job(&job).await.expect("kill_job");
}

/// The wrapper and the shim run under each POSIX shell that is installed here.
async fn under_shell(shell: &[&str]) {
    let program = shell[0];
    let found = if Path::new(program).is_absolute() {
        Path::new(program).is_file()
    } else {
        which(program).is_some()
    };
    if !found {
        eprintln!("{program} is not installed: skipped");
        return;
    }
    let b = TestBox::new().await;
    let runner = CommandRunner::with_shell(shell.iter().copied());
    let (state, c) = run(&runner, &b, &launch("l-1", REPORTING, None)).await;
    check_reporting(state, &c, b.home());
    let (state, c) = run(&runner, &b, &launch("l-2", "sleep 5", Some(1))).await;
    assert_eq!(
        (state, c.exit_code),
        (
            JobState::Done {
                exit_code: Some(124)
            },
            Some(124)
        )
    );
    // the shim itself under that shell too (its #! names /bin/sh)
    let ask = format!(
        "{} \"$(command -v boxfleet-ask)\" 'q?' --to=team --branch=b1",
        shell.join(" ")
    );
    let (_, c) = run(&runner, &b, &launch("l-3", &ask, None)).await;
    let asked = c.question.expect("a question");
    assert_eq!(
        (asked.audience.as_str(), asked.branch.as_deref()),
        ("team", Some("b1"))
    );
}

#[tokio::test]
async fn the_wrapper_runs_under_dash() {
    under_shell(&["/bin/dash"]).await;
}

#[tokio::test]
async fn the_wrapper_runs_under_bash_posix() {
    under_shell(&["bash", "--posix"]).await;
}

#[tokio::test]
async fn the_wrapper_runs_under_busybox_ash() {
    under_shell(&["busybox", "ash"]).await;
}

#[tokio::test]
async fn the_ask_shim_parses_under_each_shell() {
    let b = TestBox::new().await;
    CommandRunner::new()
        .install(b.sandbox.as_ref())
        .await
        .expect("install");
    let shim = layout::ask_shim(b.home());
    for shell in [
        &["/bin/dash"][..],
        &["bash", "--posix"],
        &["busybox", "ash"],
    ] {
        if which(shell[0].trim_start_matches("/bin/")).is_none() && !Path::new(shell[0]).is_file() {
            continue;
        }
        let status = std::process::Command::new(shell[0])
            .args(&shell[1..])
            .arg("-n")
            .arg(&shim)
            .status()
            .expect("runs");
        assert!(status.success(), "{shell:?} -n {shim}");
    }
}

#[tokio::test]
async fn the_runner_drives_a_scripted_fake_box_too() {
    use boxfleet_sandbox::{FakeProvider, ScriptedJob};
    let fake = FakeProvider::new();
    let sandbox = fake.create(&Default::default()).await.expect("create");
    let runner = CommandRunner::new();
    runner.install(sandbox.as_ref()).await.expect("install");
    assert!(fake.exec_log(sandbox.id())[0].starts_with("chmod 755 "));
    fake.script(
        ScriptedJob::new(2, 0)
            .output("working\nstill working\n")
            .file(
                ".boxfleet/report.md",
                "Found it.\n\nDelivered: `fix/bug-1`\n",
            ),
    );
    let job = runner
        .start(sandbox.as_ref(), &launch("l-1", "make check", Some(30)))
        .await
        .expect("start");
    let command = sandbox
        .read_file(&layout::in_job(&job.dir, "command.sh"))
        .await
        .expect("read");
    assert_eq!(command, Some(b"make check\n".to_vec()));
    assert_eq!(
        runner.poll(sandbox.as_ref(), &job).await.expect("poll"),
        JobState::Running
    );
    assert_eq!(
        runner.poll(sandbox.as_ref(), &job).await.expect("poll"),
        JobState::Running
    );
    assert_eq!(
        runner.poll(sandbox.as_ref(), &job).await.expect("poll"),
        JobState::Done { exit_code: Some(0) }
    );
    let c = runner
        .collect(sandbox.as_ref(), &job)
        .await
        .expect("collect");
    assert_eq!(c.delivered_refs, vec!["fix/bug-1"]);
    assert_eq!(c.transcript, vec!["working", "still working"]);
    assert!(c.succeeded());
    let f = runner
        .follow(sandbox.as_ref(), &job, 8)
        .await
        .expect("follow");
    assert_eq!((f.text.as_str(), f.start), ("still working\n", 8));
}
