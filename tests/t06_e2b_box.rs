//! The `e2b` backend against the stand-in E2B (`boxfleet_tests::e2b_standin`): the box
//! contract's checks, and the faults a real E2B shows — 5xx, a slow control plane, a box gone
//! behind the client's back, a box the provider paused, a wrong API key — and that a box's
//! access token never lands in its files or in the handle's `Debug`.
//!
//! Two of the contract's checks are replaced here by E2B's own: `attach_never_wakes` and
//! `pause_and_resume` expect a paused box to be attached and read as it is (true of `direct`
//! and `fake`), but a paused E2B box is a snapshot with no envd to read it through, and the
//! spec has attach refuse it ("a reader never wakes a box"). The replacements check that a
//! paused box is refused — by attach, and by every in-box act through a handle held from
//! before the pause — without ever being resumed, and never read as a finished job.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use boxfleet_actors::ports::{BoxError, JobHandle, Provider, Sandbox};
use boxfleet_sandbox::contract::{self, Harness, spec};
use boxfleet_sandbox::e2b::{E2bConfig, E2bProvider};
use boxfleet_tests::e2b_standin::E2bStandIn;

const NO_ENV: &std::collections::BTreeMap<String, String> = &std::collections::BTreeMap::new();

struct E2bHarness {
    standin: E2bStandIn,
    provider: E2bProvider,
}

impl E2bHarness {
    async fn new() -> Self {
        Self::with(|_| {}).await
    }

    async fn with(tune: impl FnOnce(&mut E2bConfig)) -> Self {
        let standin = E2bStandIn::start().await;
        let mut config = standin.config();
        tune(&mut config);
        let provider = E2bProvider::new(config).expect("the e2b provider builds");
        E2bHarness { standin, provider }
    }

    fn home_of(&self, sandbox: &dyn Sandbox, path: &str) -> PathBuf {
        let file = self.standin.box_home(sandbox.id()).join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).expect("parent dirs");
        }
        file
    }
}

/// The job's leader: its pid and start time.
fn identity(job: &JobHandle) -> (u32, u64) {
    let (pid, start) = job.id.split_once(':').expect("pid:start_time");
    (
        pid.parse().expect("a pid"),
        start.parse().expect("a start time"),
    )
}

/// The leader's state letter, when the pid is still that job.
fn state_of(job: &JobHandle) -> Option<char> {
    let (pid, start) = identity(job);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    (fields.get(19)?.parse::<u64>().ok()? == start).then(|| fields[0].chars().next())?
}

#[async_trait]
impl Harness for E2bHarness {
    fn provider(&self) -> Arc<dyn Provider> {
        Arc::new(self.provider.clone())
    }
    fn reads_paused_boxes(&self) -> bool {
        false
    }
    fn long_job(&self) -> String {
        "sleep 120".into()
    }
    fn short_job(&self, dir: &str, exit: i32) -> String {
        format!("echo hello > '{dir}/stdout.log'; echo {exit} > '{dir}/done'; exit {exit}")
    }
    async fn put_symlink(&self, sandbox: &dyn Sandbox, path: &str, target: &str) {
        std::os::unix::fs::symlink(target, self.home_of(sandbox, path)).expect("symlink");
    }
    async fn put_fifo(&self, sandbox: &dyn Sandbox, path: &str) {
        let status = std::process::Command::new("mkfifo")
            .arg(self.home_of(sandbox, path))
            .status()
            .expect("mkfifo runs");
        assert!(status.success(), "mkfifo");
    }
    async fn put_dir(&self, sandbox: &dyn Sandbox, path: &str) {
        std::fs::create_dir_all(self.home_of(sandbox, path)).expect("dir");
    }
    async fn put_sparse(&self, sandbox: &dyn Sandbox, path: &str, len: u64) {
        let file = std::fs::File::create(self.home_of(sandbox, path)).expect("create");
        file.set_len(len).expect("set_len");
    }
    async fn job_stopped(&self, _sandbox: &dyn Sandbox, job: &JobHandle) -> bool {
        for _ in 0..40 {
            if state_of(job) == Some('T') {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }
    async fn recorded_paused(&self, sandbox_id: &str) -> bool {
        self.standin.is_paused(sandbox_id).unwrap_or(false)
    }
    async fn keepalive(&self, sandbox_id: &str) -> (u64, String) {
        let (timeout, stamps) = self.standin.keepalive(sandbox_id).expect("box exists");
        (timeout, format!("{stamps:020}"))
    }
    fn recycled(&self, job: &JobHandle) -> JobHandle {
        let (pid, start) = identity(job);
        JobHandle {
            id: format!("{pid}:{}", start + 1),
            dir: job.dir.clone(),
        }
    }
    async fn no_process_left(&self, job: &JobHandle) -> bool {
        for _ in 0..40 {
            if matches!(state_of(job), None | Some('Z') | Some('X')) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }
}

// every check of the contract; a paused E2B box refuses reads (`reads_paused_boxes`)
boxfleet_sandbox::box_contract!(e2b_box, E2bHarness::new().await);

/// What the contract cannot see: the stand-in counts resumes, and no act on a paused box —
/// attach, keepalive, a read, a write, a command — made one; connect makes exactly one.
#[tokio::test]
async fn nothing_but_connect_resumes_a_paused_box() {
    let h = E2bHarness::new().await;
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    sandbox.pause().await.expect("pause");
    let _ = provider.attach(sandbox.id()).await;
    let _ = sandbox.set_timeout(Duration::from_secs(60)).await;
    let _ = sandbox.job_running(&job).await;
    let _ = sandbox.read_file("kept.txt").await;
    let _ = sandbox.write_file("x.txt", b"x").await;
    let _ = sandbox.exec("true", NO_ENV, Duration::from_secs(5)).await;
    assert_eq!(h.standin.resumes(), 0, "no act woke the box");
    let resumed = provider.connect(sandbox.id()).await.expect("connect");
    assert_eq!(h.standin.resumes(), 1);
    resumed.kill_job(&job).await.expect("kill_job");
    contract::wait_until_done(resumed.as_ref(), &job).await;
    provider.kill(sandbox.id()).await.expect("kill");
}

// ---------------------------------------------------------------------------------------------
// faults

#[tokio::test]
async fn server_errors_are_unreachable_and_pass_when_they_stop() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    h.standin.fail_next(2);
    for _ in 0..2 {
        match h.provider.attach(sandbox.id()).await {
            Err(BoxError::Unreachable(message)) => {
                assert!(message.contains("503"), "names the status: {message}");
                assert!(
                    message.contains("injected fault"),
                    "quotes the body: {message}"
                );
            }
            other => panic!(
                "a 5xx is unreachable: {:?}",
                other.map(|s| s.id().to_owned())
            ),
        }
    }
    let attached = h
        .provider
        .attach(sandbox.id())
        .await
        .expect("attach after the faults");
    // envd's 5xx: unreachable too, never "absent"
    attached.write_file("a.txt", b"a").await.expect("write");
    h.standin.fail_next(1);
    assert!(matches!(
        attached.read_file("a.txt").await,
        Err(BoxError::Unreachable(_))
    ));
    assert_eq!(
        attached.read_file("a.txt").await.expect("read"),
        Some(b"a".to_vec())
    );
    h.standin.fail_next(1);
    assert!(matches!(
        h.provider.kill(sandbox.id()).await,
        Err(BoxError::Unreachable(_))
    ));
    h.provider.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn a_slow_control_plane_is_unreachable_within_its_budget() {
    let budget = Duration::from_millis(300);
    let h = E2bHarness::with(|c| c.control_budget = budget).await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    h.standin.delay(Duration::from_secs(5));
    let started = Instant::now();
    for result in [
        h.provider.attach(sandbox.id()).await.map(|_| ()),
        h.provider.connect(sandbox.id()).await.map(|_| ()),
        h.provider.kill(sandbox.id()).await,
        sandbox.set_timeout(Duration::from_secs(60)).await,
        sandbox.pause().await,
    ] {
        match result {
            Err(BoxError::Unreachable(message)) => {
                assert!(message.contains("did not answer within"), "{message}")
            }
            other => panic!("a slow control plane is unreachable, got {other:?}"),
        }
    }
    let took = started.elapsed();
    assert!(
        took < budget * 5 + Duration::from_secs(1),
        "five calls took {took:?}, about five budgets"
    );
    h.standin.delay(Duration::ZERO);
    h.provider.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn a_box_gone_behind_the_clients_back_is_gone() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background("sleep 120", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    h.standin.vanish(sandbox.id());
    assert!(h.no_process_left(&job).await);
    assert!(matches!(
        h.provider.attach(sandbox.id()).await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        h.provider.connect(sandbox.id()).await,
        Err(BoxError::Gone(_))
    ));
    // the handle held from before: every act says gone, never "absent" or "not running"
    assert!(matches!(
        sandbox.read_file("x").await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        sandbox.job_running(&job).await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        sandbox.exec("true", NO_ENV, Duration::from_secs(5)).await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        sandbox.set_timeout(Duration::from_secs(5)).await,
        Err(BoxError::Gone(_))
    ));
    h.provider
        .kill(sandbox.id())
        .await
        .expect("killing a gone box is success");
}

#[tokio::test]
async fn a_box_the_provider_paused_is_refused_by_attach_with_no_resume() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background("sleep 120", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    h.standin.pause_behind(sandbox.id());
    for _ in 0..3 {
        assert!(matches!(
            h.provider.attach(sandbox.id()).await,
            Err(BoxError::Unreachable(_))
        ));
    }
    assert!(matches!(
        sandbox.job_running(&job).await,
        Err(BoxError::Unreachable(_))
    ));
    assert_eq!(h.standin.resumes(), 0, "attach never woke it");
    assert_eq!(h.standin.is_paused(sandbox.id()), Some(true));
    assert!(h.job_stopped(sandbox.as_ref(), &job).await);
    h.provider
        .kill(sandbox.id())
        .await
        .expect("kill never resumes");
    assert_eq!(h.standin.resumes(), 0);
}

#[tokio::test]
async fn connect_takes_both_200_and_201() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let running = h
        .provider
        .connect(sandbox.id())
        .await
        .expect("200: it was running");
    assert_eq!(h.standin.resumes(), 0);
    let out = running
        .exec("echo up", NO_ENV, Duration::from_secs(10))
        .await
        .expect("exec");
    assert_eq!(out.stdout, b"up\n");
    sandbox.pause().await.expect("pause");
    let resumed = h
        .provider
        .connect(sandbox.id())
        .await
        .expect("201: it was resumed");
    assert_eq!(h.standin.resumes(), 1);
    let out = resumed
        .exec("echo again", NO_ENV, Duration::from_secs(10))
        .await
        .expect("exec");
    assert_eq!(out.stdout, b"again\n");
    h.provider.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn a_wrong_api_key_fails_naming_the_key() {
    let h = E2bHarness::with(|c| c.api_key = "e2b_not_the_key".into()).await;
    for result in [
        h.provider.create(&spec()).await.map(|_| ()),
        h.provider.attach("abc123").await.map(|_| ()),
        h.provider.kill("abc123").await,
    ] {
        match result {
            Err(BoxError::Failed(message)) => {
                assert!(message.contains("API key"), "{message}");
                assert!(message.contains("401"), "{message}");
                assert!(
                    !message.contains("e2b_not_the_key"),
                    "never quotes it: {message}"
                );
            }
            other => panic!("a wrong key is a failure naming it, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_template_with_an_old_envd_is_refused_and_its_box_killed() {
    let h = E2bHarness::new().await;
    h.standin.set_envd_version("0.1.9");
    match h.provider.create(&spec()).await {
        Err(BoxError::Failed(message)) => {
            assert!(message.contains("0.2.0"), "{message}");
            assert!(message.contains("rebuild"), "{message}");
        }
        other => panic!(
            "an old envd is refused, got {:?}",
            other.map(|s| s.id().to_owned())
        ),
    }
    assert!(
        h.provider.list().await.expect("list").is_empty(),
        "its box was killed"
    );
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files_under(&entry.path(), out);
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
}

#[tokio::test]
async fn the_access_token_is_never_written_or_shown() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    sandbox
        .write_file("notes/a.txt", b"a")
        .await
        .expect("write");
    let dir = format!("{}/.boxfleet/jobs/env", sandbox.home());
    let job = sandbox
        .start_background(
            &format!("env > '{dir}/env.txt'; ps -ef > '{dir}/ps.txt'"),
            NO_ENV,
            &dir,
        )
        .await
        .expect("start");
    contract::wait_until_done(sandbox.as_ref(), &job).await;
    sandbox
        .exec("env > env-exec.txt", NO_ENV, Duration::from_secs(10))
        .await
        .expect("exec");
    let attached = h.provider.attach(sandbox.id()).await.expect("attach");
    let connected = h.provider.connect(sandbox.id()).await.expect("connect");
    let tokens = h.standin.tokens();
    assert_eq!(tokens.len(), 1);
    let token = &tokens[0];
    let mut files = Vec::new();
    files_under(&h.standin.boxes_root(), &mut files);
    assert!(files.len() >= 4, "the box has files: {files:?}");
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).expect("read")).into_owned();
        assert!(
            !text.contains(token.as_str()),
            "{} holds the token",
            file.display()
        );
    }
    for shown in [
        format!("{sandbox:?}"),
        format!("{attached:?}"),
        format!("{connected:?}"),
        format!("{:?}", h.provider),
    ] {
        assert!(
            !shown.contains(token.as_str()),
            "Debug shows the token: {shown}"
        );
        assert!(
            !shown.contains(boxfleet_tests::e2b_standin::API_KEY),
            "Debug shows the key"
        );
    }
    h.provider.kill(sandbox.id()).await.expect("kill");
}

// ---------------------------------------------------------------------------------------------
// commands

#[tokio::test]
async fn exec_runs_to_completion_with_its_env_and_output() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let env = [("GREETING".to_owned(), "hi there".to_owned())].into();
    let out = sandbox
        .exec(
            "echo \"$GREETING\"; echo oops >&2; pwd; exit 3",
            &env,
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    assert_eq!(out.exit_code, 3);
    assert_eq!(out.stderr, b"oops\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("hi there\n"), "{stdout}");
    let killed = sandbox
        .exec("kill -9 $$", NO_ENV, Duration::from_secs(10))
        .await
        .expect("exec");
    assert_eq!(killed.exit_code, 137, "a SIGKILL reads as 128 + 9");
    h.provider.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn a_silent_command_is_killed_at_the_silence_bound() {
    let silence = Duration::from_millis(500);
    let h = E2bHarness::with(|c| c.output_silence = silence).await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let started = Instant::now();
    match sandbox
        .exec("sleep 30", NO_ENV, Duration::from_secs(60))
        .await
    {
        Err(BoxError::Unreachable(message)) => {
            assert!(message.contains("printed nothing"), "{message}")
        }
        other => panic!("silence is unreachable, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the silence"
    );
    // output keeps a command alive past the silence bound
    let out = sandbox
        .exec(
            "for i in 1 2 3 4; do echo $i; sleep 0.3; done",
            NO_ENV,
            Duration::from_secs(60),
        )
        .await
        .expect("a talking command runs on");
    assert_eq!(out.stdout, b"1\n2\n3\n4\n");
    // the caller's own timeout is a failure, as direct's
    assert!(matches!(
        sandbox
            .exec("sleep 30", NO_ENV, Duration::from_millis(200))
            .await,
        Err(BoxError::Failed(_))
    ));
    h.provider.kill(sandbox.id()).await.expect("kill");
}

/// E2B kills a running box once its timeout passes with no keepalive: a box kept alive
/// (`set_timeout`, what `Sandbox.SetTimeout` means) lives on past its first timeout, one left
/// alone is gone — its job dead, every act on it `Gone`, its kill a success — and a paused box
/// does not time out while paused.
#[tokio::test]
async fn a_box_left_past_its_timeout_is_gone_and_a_kept_alive_one_lives() {
    let h = E2bHarness::new().await;
    let timed = |timeout_seconds| boxfleet_actors::ports::BoxSpec {
        timeout_seconds,
        ..spec()
    };
    let started = Instant::now();
    let kept = h.provider.create(&timed(3)).await.expect("create kept");
    kept.set_timeout(Duration::from_secs(120))
        .await
        .expect("keepalive");
    let parked = h.provider.create(&timed(3)).await.expect("create parked");
    parked.pause().await.expect("pause");
    let left = h.provider.create(&timed(1)).await.expect("create left");
    let job = left
        .start_background("sleep 120", NO_ENV, ".boxfleet/jobs/left")
        .await
        .expect("start");
    let (pid, _) = identity(&job);
    // the box left alone goes at its timeout; the others' first timeouts pass too
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.standin.expired() == 0 || started.elapsed() < Duration::from_secs(4) {
        assert!(
            Instant::now() < deadline,
            "the box left alone never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(matches!(
        h.provider.attach(left.id()).await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        left.job_running(&job).await,
        Err(BoxError::Gone(_))
    ));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the expired box's job is dead"
    );
    h.provider
        .kill(left.id())
        .await
        .expect("killing an expired box is success");

    let alive = h.provider.attach(kept.id()).await.expect("attach kept");
    let out = alive
        .exec("echo still-here", NO_ENV, Duration::from_secs(5))
        .await
        .expect("exec");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "still-here");

    // paused past its timeout, it is still there; a connect resumes it with a new timeout
    let resumed = h
        .provider
        .connect(parked.id())
        .await
        .expect("connect parked");
    assert_eq!(h.standin.resumes(), 1);
    resumed
        .exec("true", NO_ENV, Duration::from_secs(5))
        .await
        .expect("the resumed box answers");
    assert_eq!(h.standin.expired(), 1, "only the box left alone expired");
    for sandbox in [&kept, &parked] {
        h.provider.kill(sandbox.id()).await.expect("kill");
    }
}

/// A box carries its launch in its metadata, and `find_by_launch` finds exactly the boxes made
/// for that launch, running or paused (E2B's `GET /v2/sandboxes?metadata=…&state=…`), never one
/// of another launch or turn, and none once it is killed.
#[tokio::test]
async fn a_box_is_found_by_the_launch_it_was_made_for() {
    let h = E2bHarness::new().await;
    let of = |turn: &str, launch: &str| boxfleet_actors::ports::BoxSpec {
        turn_id: turn.into(),
        launch_id: launch.into(),
        ..spec()
    };
    let mine = h
        .provider
        .create(&of("turn-a", "launch-a"))
        .await
        .expect("create");
    let other = h
        .provider
        .create(&of("turn-a", "launch-b"))
        .await
        .expect("create");
    let elsewhere = h
        .provider
        .create(&of("turn-b", "launch-a"))
        .await
        .expect("create");
    let found = h
        .provider
        .find_by_launch("turn-a", "launch-a")
        .await
        .expect("list");
    assert_eq!(found, vec![mine.id().to_owned()]);
    mine.pause().await.expect("pause");
    let found = h
        .provider
        .find_by_launch("turn-a", "launch-a")
        .await
        .expect("list");
    assert_eq!(found, vec![mine.id().to_owned()], "a paused box is found");
    h.provider.kill(mine.id()).await.expect("kill");
    assert!(
        h.provider
            .find_by_launch("turn-a", "launch-a")
            .await
            .expect("list")
            .is_empty()
    );
    for sandbox in [other, elsewhere] {
        h.provider.kill(sandbox.id()).await.expect("kill");
    }
}

/// With no template configured each box is made from the prebuilt template of its coding
/// agent (E2B's `claude` and `opencode` carry the CLI; a plain command gets `base`); a
/// configured template is used for every box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_template_picks_the_coding_agents_prebuilt_one() {
    let unset = E2bHarness::with(|config| config.template = String::new()).await;
    for (agent, template) in [
        ("claude-code", "claude"),
        ("opencode", "opencode"),
        ("command", "base"),
    ] {
        let spec = boxfleet_actors::ports::BoxSpec {
            coding_agent: agent.into(),
            ..spec()
        };
        let sandbox = unset.provider.create(&spec).await.expect("create");
        assert_eq!(
            unset.standin.template(sandbox.id()).as_deref(),
            Some(template),
            "{agent}"
        );
        unset.provider.kill(sandbox.id()).await.expect("kill");
    }
    let set = E2bHarness::new().await;
    let spec = boxfleet_actors::ports::BoxSpec {
        coding_agent: "claude-code".into(),
        ..spec()
    };
    let sandbox = set.provider.create(&spec).await.expect("create");
    assert_eq!(
        set.standin.template(sandbox.id()).as_deref(),
        Some("boxfleet-standin"),
        "a configured template is every box's"
    );
    set.provider.kill(sandbox.id()).await.expect("kill");
}

/// The E2B behaviours the stand-in answers as E2B does (issue 14), each against its source.
#[path = "t06_e2b_box/behaves.rs"]
mod behaves;
