//! The box contract (`boxfleet_sandbox::contract`) against `fake` and `direct`, and the
//! checks particular to each.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{BoxError, BoxSpec, JobHandle, Provider, Sandbox};
use boxfleet_sandbox::contract::{Harness, spec, wait_until_done};
use boxfleet_sandbox::direct::{JobIdentity, ProcStat, proc};
use boxfleet_sandbox::{DirectProvider, FakeNode, FakeProvider, ScriptedJob};

const NO_ENV: &std::collections::BTreeMap<String, String> = &std::collections::BTreeMap::new();

boxfleet_sandbox::box_contract!(fake_box, FakeHarness::new());
boxfleet_sandbox::box_contract!(direct_box, DirectHarness::new());

// ---------------------------------------------------------------------------------------------
// fake

struct FakeHarness {
    fake: FakeProvider,
}

impl FakeHarness {
    fn new() -> Self {
        FakeHarness {
            fake: FakeProvider::new(),
        }
    }
}

#[async_trait]
impl Harness for FakeHarness {
    fn provider(&self) -> Arc<dyn Provider> {
        Arc::new(self.fake.clone())
    }
    fn long_job(&self) -> String {
        self.fake
            .script(ScriptedJob::new(u32::MAX, 0).output("started\n"));
        "sleep 30".into()
    }
    fn short_job(&self, _dir: &str, exit: i32) -> String {
        self.fake
            .script(ScriptedJob::new(2, exit).output("hello\n"));
        "echo hello".into()
    }
    async fn put_symlink(&self, sandbox: &dyn Sandbox, path: &str, target: &str) {
        self.fake
            .put(sandbox.id(), path, FakeNode::Symlink(target.into()))
            .expect("put");
    }
    async fn put_fifo(&self, sandbox: &dyn Sandbox, path: &str) {
        self.fake
            .put(sandbox.id(), path, FakeNode::Fifo)
            .expect("put");
    }
    async fn put_dir(&self, sandbox: &dyn Sandbox, path: &str) {
        self.fake
            .put(sandbox.id(), path, FakeNode::Dir)
            .expect("put");
    }
    async fn put_sparse(&self, sandbox: &dyn Sandbox, path: &str, len: u64) {
        self.fake
            .put(sandbox.id(), path, FakeNode::Sparse(len))
            .expect("put");
    }
    async fn job_stopped(&self, sandbox: &dyn Sandbox, _job: &JobHandle) -> bool {
        self.fake.is_paused(sandbox.id()).unwrap_or(false)
    }
    async fn recorded_paused(&self, sandbox_id: &str) -> bool {
        self.fake.is_paused(sandbox_id).unwrap_or(false)
    }
    async fn keepalive(&self, sandbox_id: &str) -> (u64, String) {
        let k = self.fake.keepalive(sandbox_id).expect("box exists");
        (k.timeout.as_secs(), format!("{:020}", k.stamps))
    }
    fn recycled(&self, job: &JobHandle) -> JobHandle {
        let (front, start) = job.id.rsplit_once(':').expect("fake id");
        let start: u64 = start.parse().expect("start time");
        JobHandle {
            id: format!("{front}:{}", start + 1),
            dir: job.dir.clone(),
        }
    }
    async fn no_process_left(&self, _job: &JobHandle) -> bool {
        true
    }
    fn runs_host_processes(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn fake_counts_what_it_was_asked() {
    let fake = FakeProvider::new();
    let sandbox = fake.create(&spec()).await.expect("create");
    sandbox.pause().await.expect("pause");
    fake.attach(sandbox.id()).await.expect("attach");
    assert_eq!(fake.is_paused(sandbox.id()), Some(true));
    fake.connect(sandbox.id()).await.expect("connect");
    fake.kill(sandbox.id()).await.expect("kill");
    fake.kill(sandbox.id()).await.expect("kill gone");
    let c = fake.counters();
    assert_eq!(
        (c.creates, c.pauses, c.attaches, c.attaches_not_woken),
        (1, 1, 1, 1)
    );
    assert_eq!(
        (c.connects, c.resumes, c.kills, c.kills_of_gone),
        (1, 1, 2, 1)
    );
}

#[tokio::test]
async fn fake_job_finishes_after_its_polls_and_writes_its_files() {
    let fake = FakeProvider::new();
    let sandbox = fake.create(&spec()).await.expect("create");
    fake.script(
        ScriptedJob::new(2, 5)
            .file("{dir}/extra", "x")
            .file(".boxfleet/report.md", "done")
            .output("o\n"),
    );
    let job = sandbox
        .start_background("x", NO_ENV, ".boxfleet/jobs/j")
        .await
        .expect("start");
    assert_eq!(
        sandbox
            .read_file(".boxfleet/jobs/j/stdout.log")
            .await
            .expect("read"),
        Some(b"o\n".to_vec())
    );
    assert!(sandbox.job_running(&job).await.expect("poll 1"));
    assert_eq!(
        sandbox
            .read_file(".boxfleet/jobs/j/done")
            .await
            .expect("read"),
        None
    );
    assert!(sandbox.job_running(&job).await.expect("poll 2"));
    // finished on its second poll: the files are there before anyone sees it dead
    assert_eq!(
        sandbox
            .read_file(".boxfleet/jobs/j/done")
            .await
            .expect("read"),
        Some(b"5\n".to_vec())
    );
    assert_eq!(
        sandbox
            .read_file(".boxfleet/jobs/j/extra")
            .await
            .expect("read"),
        Some(b"x".to_vec())
    );
    assert_eq!(
        sandbox
            .read_file(".boxfleet/report.md")
            .await
            .expect("read"),
        Some(b"done".to_vec())
    );
    assert!(!sandbox.job_running(&job).await.expect("poll 3"));
    assert_eq!(fake.job_polls(sandbox.id(), &job), Some(2));
}

/// `providers.sandbox.fake`'s block: each kind of call takes its latency, and a job with no
/// script runs the default job — for its time, then it writes its report where its
/// environment's `BOXFLEET_REPORT` points.
#[tokio::test]
async fn fake_calls_take_their_latency_and_the_default_job_runs_for_its_time() {
    use boxfleet_sandbox::fake::Pace;
    let pace = Pace {
        create: Duration::from_millis(120),
        poll: Duration::from_millis(60),
        ..Pace::default()
    };
    let fake = FakeProvider::new()
        .with_pace(pace)
        .with_default_job(ScriptedJob::timed(
            Duration::from_millis(400),
            3,
            Some("all green\n".into()),
        ));
    let began = std::time::Instant::now();
    let sandbox = fake.create(&spec()).await.expect("create");
    assert!(
        began.elapsed() >= Duration::from_millis(120),
        "create took its latency"
    );
    let env: std::collections::BTreeMap<String, String> = [(
        "BOXFLEET_REPORT".to_owned(),
        "/home/user/.boxfleet/report.md".to_owned(),
    )]
    .into();
    let job = sandbox
        .start_background("x", &env, ".boxfleet/jobs/j")
        .await
        .expect("start");
    let polled = std::time::Instant::now();
    assert!(sandbox.job_running(&job).await.expect("poll"));
    assert!(
        polled.elapsed() >= Duration::from_millis(60),
        "a poll took its latency"
    );
    let mut polls = 1;
    while sandbox.job_running(&job).await.expect("poll") {
        polls += 1;
        assert!(polls < 100, "the job never finished");
    }
    assert!(
        polled.elapsed() >= Duration::from_millis(400),
        "it ran for its time"
    );
    assert_eq!(
        sandbox
            .read_file(".boxfleet/jobs/j/done")
            .await
            .expect("read"),
        Some(b"3\n".to_vec())
    );
    assert_eq!(
        sandbox
            .read_file(".boxfleet/report.md")
            .await
            .expect("read"),
        Some(b"all green\n".to_vec())
    );
}

// ---------------------------------------------------------------------------------------------
// direct

struct DirectHarness {
    _dir: tempfile::TempDir,
    direct: DirectProvider,
}

impl Drop for DirectHarness {
    /// Kills every box a failed check left behind, so no job outlives the test run.
    fn drop(&mut self) {
        let direct = self.direct.clone();
        let boxes = self._dir.path().join("boxes");
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            for entry in std::fs::read_dir(boxes).into_iter().flatten().flatten() {
                if let Some(id) = entry.file_name().to_str() {
                    let _ = rt.block_on(direct.kill(id));
                }
            }
        })
        .join();
    }
}

impl DirectHarness {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let direct = DirectProvider::new(dir.path());
        DirectHarness { _dir: dir, direct }
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn session_of(job: &JobHandle) -> Vec<ProcStat> {
    let identity = JobIdentity::parse(&job.id).expect("direct id");
    proc::session_members(identity.pid).expect("scan /proc")
}

#[async_trait]
impl Harness for DirectHarness {
    fn provider(&self) -> Arc<dyn Provider> {
        Arc::new(self.direct.clone())
    }
    fn long_job(&self) -> String {
        // a child process too, so a signal must reach the group, not just the leader
        "echo started; sleep 30 & wait".into()
    }
    fn short_job(&self, dir: &str, exit: i32) -> String {
        let dir = quote(dir);
        format!(
            "sleep 0.2; printf 'hello\\n' >{dir}/stdout.log; printf '%s\\n' {exit} >{dir}/done; exit {exit}"
        )
    }
    async fn put_symlink(&self, sandbox: &dyn Sandbox, path: &str, target: &str) {
        std::os::unix::fs::symlink(target, format!("{}/{path}", sandbox.home())).expect("symlink");
    }
    async fn put_fifo(&self, sandbox: &dyn Sandbox, path: &str) {
        let status = std::process::Command::new("mkfifo")
            .arg(format!("{}/{path}", sandbox.home()))
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
    }
    async fn put_dir(&self, sandbox: &dyn Sandbox, path: &str) {
        std::fs::create_dir_all(format!("{}/{path}", sandbox.home())).expect("mkdir");
    }
    async fn put_sparse(&self, sandbox: &dyn Sandbox, path: &str, len: u64) {
        let file = format!("{}/{path}", sandbox.home());
        if let Some(parent) = std::path::Path::new(&file).parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::File::create(&file)
            .expect("create")
            .set_len(len)
            .expect("set_len");
    }
    async fn job_stopped(&self, _sandbox: &dyn Sandbox, job: &JobHandle) -> bool {
        // a signal lands asynchronously: give it a moment either way, answer what it settled at
        let mut last = false;
        for _ in 0..40 {
            let members = session_of(job);
            let stopped = !members.is_empty() && members.iter().all(ProcStat::is_stopped);
            let running = !members.is_empty() && members.iter().all(|m| !m.is_stopped());
            if stopped || running {
                last = stopped;
                if stopped {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        last
    }
    async fn recorded_paused(&self, sandbox_id: &str) -> bool {
        match self.direct.records(sandbox_id).await {
            Ok(record) => record.paused,
            Err(_) => false,
        }
    }
    async fn keepalive(&self, sandbox_id: &str) -> (u64, String) {
        let record = self.direct.records(sandbox_id).await.expect("records");
        (
            record.timeout_seconds,
            record
                .keepalive_at
                .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        )
    }
    fn recycled(&self, job: &JobHandle) -> JobHandle {
        let identity = JobIdentity::parse(&job.id).expect("direct id");
        let wrong = JobIdentity {
            start_time: identity.start_time + 1,
            ..identity
        };
        JobHandle {
            id: wrong.to_string(),
            dir: job.dir.clone(),
        }
    }
    async fn no_process_left(&self, job: &JobHandle) -> bool {
        for _ in 0..80 {
            if session_of(job).is_empty() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }
}

#[tokio::test]
async fn direct_attach_leaves_the_process_state_t() {
    let h = DirectHarness::new();
    let sandbox = h.direct.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background("sleep 30", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    let pid = JobIdentity::parse(&job.id).expect("id").pid;
    sandbox.pause().await.expect("pause");
    let _attached = h.direct.attach(sandbox.id()).await.expect("attach");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stat = ProcStat::read(pid).expect("read").expect("alive");
    assert_eq!(stat.state, 'T', "attach did not wake the job");
    h.direct.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn a_direct_pause_stops_what_left_the_jobs_session_and_a_resume_continues_it() {
    let h = DirectHarness::new();
    let sandbox = h.direct.create(&spec()).await.expect("create");
    let pid_file = format!("{}/escapee.pid", sandbox.home());
    let command = format!("setsid sh -c 'echo $$ > {pid_file}; exec sleep 30' & wait");
    sandbox
        .start_background(&command, NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    let mut escapee = None;
    for _ in 0..200 {
        escapee = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok());
        if escapee.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let escapee = escapee.expect("the escapee wrote its pid");
    let state = || {
        ProcStat::read(escapee)
            .ok()
            .flatten()
            .map(|stat| stat.state)
    };
    sandbox.pause().await.expect("pause");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(state(), Some('T'), "the paused box's escapee is stopped");
    h.direct
        .connect(sandbox.id())
        .await
        .expect("connect resumes");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_ne!(state(), Some('T'), "and continued with the box");
    h.direct.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn direct_jobs_see_only_the_allowlisted_environment() {
    // the test process's own environment (CARGO_*, its PATH, …) is what must not leak
    let h = DirectHarness::new();
    let mut box_spec = spec();
    box_spec.env.insert("FROM_BOX".into(), "box value".into());
    let sandbox = h.direct.create(&box_spec).await.expect("create");
    let mut env = std::collections::BTreeMap::new();
    env.insert("FROM_CALLER".into(), "it's \"quoted\"".into());
    let out = sandbox
        .exec("env | sort", &env, Duration::from_secs(10))
        .await
        .expect("exec");
    assert_eq!(out.exit_code, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n))
        .collect();
    for name in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TERM",
                "TMPDIR",
                "XDG_CACHE_HOME",
                "XDG_CONFIG_HOME",
                "XDG_DATA_HOME",
                "XDG_STATE_HOME",
                "FROM_BOX",
                "BOXFLEET_SANDBOX_ID",
                "FROM_CALLER",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD"
            ]
            .contains(name),
            "unexpected variable {name} in {text}"
        );
    }
    assert!(text.contains(&format!("HOME={}", sandbox.home())));
    assert!(text.contains("FROM_CALLER=it's \"quoted\""));
    assert!(text.contains("FROM_BOX=box value"));
    assert!(text.contains("TERM=dumb"));
    let pwd = sandbox
        .exec("pwd", &Default::default(), Duration::from_secs(10))
        .await
        .expect("exec");
    assert_eq!(String::from_utf8_lossy(&pwd.stdout).trim(), sandbox.home());
    h.direct.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn direct_exec_is_bounded_and_kills_its_group() {
    let h = DirectHarness::new();
    let sandbox = h.direct.create(&spec()).await.expect("create");
    let marker = format!("{}/late", sandbox.home());
    let started = std::time::Instant::now();
    let result = sandbox
        .exec(
            &format!("(sleep 2; touch {}) & sleep 30", quote(&marker)),
            &Default::default(),
            Duration::from_millis(300),
        )
        .await;
    assert!(matches!(result, Err(BoxError::Failed(_))), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !std::path::Path::new(&marker).exists(),
        "the group was killed, the background child too"
    );
    let out = sandbox
        .exec(
            "echo out; echo err >&2; exit 7",
            &Default::default(),
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    assert_eq!(
        (out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()),
        (7, &b"out\n"[..], &b"err\n"[..])
    );
    h.direct.kill(sandbox.id()).await.expect("kill");
}

#[tokio::test]
async fn direct_job_outlives_the_provider_and_a_new_one_finds_it() {
    let h = DirectHarness::new();
    let sandbox = h.direct.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background("sleep 30", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    let id = sandbox.id().to_owned();
    drop(sandbox);
    let again = DirectProvider::new(h._dir.path());
    let attached = again.attach(&id).await.expect("attach from a new provider");
    assert!(attached.job_running(&job).await.expect("job_running"));
    let record = again.records(&id).await.expect("records");
    assert_eq!(record.jobs.len(), 1);
    assert_eq!(record.jobs[0].id, job.id);
    again.kill(&id).await.expect("kill");
    assert!(h.no_process_left(&job).await);
    assert!(!h.direct.box_dir(&id).exists());
}

/// A crash-orphaned box is reaped on the next create only when nothing runs in it and nothing
/// touched it for its timeout; a box with a live (or stopped) job, one touched within its
/// timeout, and a paused one are kept.
#[tokio::test]
async fn direct_reaps_only_genuinely_orphaned_boxes_on_the_next_create() {
    let h = DirectHarness::new();
    let short = BoxSpec {
        timeout_seconds: 1,
        ..spec()
    };
    // nothing runs, untouched past its timeout: reaped
    let idle = h.direct.create(&short).await.expect("create");
    let done = idle
        .start_background("true", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    // a live job, untouched: kept
    let busy = h.direct.create(&short).await.expect("create");
    let live = busy
        .start_background("sleep 30", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    // nothing runs, but touched within a long timeout: kept
    let touched = h.direct.create(&spec()).await.expect("create");
    // paused, nothing runs, untouched: kept (its pause TTL owns that wait)
    let parked = h.direct.create(&short).await.expect("create");
    parked.pause().await.expect("pause");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(!idle.job_running(&done).await.expect("job_running"));

    let reaped = h.direct.reap_orphans().await;
    assert_eq!(reaped, vec![idle.id().to_owned()]);
    assert!(!h.direct.box_dir(idle.id()).exists());
    for kept in [&busy, &touched, &parked] {
        assert!(h.direct.box_dir(kept.id()).exists(), "{} kept", kept.id());
    }
    // and create runs the same reaper
    busy.kill_job(&live).await.expect("kill_job");
    wait_until_done(busy.as_ref(), &live).await;
    let _new = h.direct.create(&spec()).await.expect("create");
    assert!(!h.direct.box_dir(busy.id()).exists(), "reaped by create");
    h.direct.kill(touched.id()).await.expect("kill");
    h.direct.kill(parked.id()).await.expect("kill");
}

/// Run only as a child of `direct_job_outlives_the_node_process`: makes a box with a paused job,
/// prints where it is, and exits.
#[tokio::test]
async fn node_process_that_starts_a_job_and_exits() {
    let Ok(data_dir) = std::env::var("BOXFLEET_CONTRACT_CHILD_DIR") else {
        return;
    };
    let direct = DirectProvider::new(data_dir);
    let sandbox = direct.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background("sleep 30", NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    sandbox.pause().await.expect("pause");
    println!("BOX {} JOB {}", sandbox.id(), job.id);
}

#[tokio::test]
async fn direct_job_outlives_the_node_process() {
    let h = DirectHarness::new();
    let out = tokio::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "node_process_that_starts_a_job_and_exits",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BOXFLEET_CONTRACT_CHILD_DIR", h._dir.path())
        .output()
        .await
        .expect("the child node runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find("BOX ").expect("the child said where its box is");
    let words: Vec<&str> = text[at..].split_whitespace().collect();
    let (box_id, job) = (
        words[1],
        JobHandle {
            id: words[3].to_owned(),
            dir: String::new(),
        },
    );
    // the node that started it is gone: the job is still there, and still stopped (its exit
    // did not orphan the group into a SIGHUP + SIGCONT)
    let attached = h.direct.attach(box_id).await.expect("attach");
    assert!(attached.job_running(&job).await.expect("job_running"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = JobIdentity::parse(&job.id).expect("id").pid;
    assert_eq!(
        ProcStat::read(pid).expect("read").expect("alive").state,
        'T'
    );
    let connected = h.direct.connect(box_id).await.expect("connect");
    assert!(!h.job_stopped(connected.as_ref(), &job).await);
    assert!(connected.job_running(&job).await.expect("job_running"));
    h.direct.kill(box_id).await.expect("kill");
    assert!(h.no_process_left(&job).await);
}

/// A directory on the way to a file that is swapped for a link to somewhere outside the box,
/// over and over while the engine writes and reads through it: every write lands inside the
/// box or is refused, never outside, and nothing outside is read. A check of each directory
/// before an open by path would lose this race; the walk down from the box's own descriptor
/// (`O_NOFOLLOW` at every step) cannot.
#[tokio::test]
async fn direct_writes_stay_in_the_home_while_a_directory_is_swapped_for_a_link() {
    let h = DirectHarness::new();
    let sandbox = h.direct.create(&spec()).await.expect("create");
    let outside = tempfile::tempdir().expect("outside dir");
    std::fs::write(outside.path().join("secret.txt"), b"outside").expect("secret");
    let home = PathBuf::from(sandbox.home());
    std::fs::create_dir_all(home.join("deep/d")).expect("dir");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, dir, target) = (
            stop.clone(),
            home.join("deep/d"),
            outside.path().to_path_buf(),
        );
        std::thread::spawn(move || {
            let aside = dir.with_file_name("d.aside");
            let mut swaps = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // the real directory goes aside, a link to outside takes its place, and back
                if std::fs::rename(&dir, &aside).is_ok() {
                    let _ = std::os::unix::fs::symlink(&target, &dir);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&dir);
                    let _ = std::fs::rename(&aside, &dir);
                    swaps += 1;
                }
            }
            swaps
        })
    };
    let (mut landed, mut refused) = (0, 0);
    for i in 0..400 {
        match sandbox
            .write_file(&format!("deep/d/w{i}.txt"), b"inside")
            .await
        {
            Ok(()) => landed += 1,
            Err(_) => refused += 1,
        }
        if let Ok(Some(bytes)) = sandbox.read_file("deep/d/secret.txt").await {
            panic!(
                "read {:?} from outside the box",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    let escaped: Vec<_> = std::fs::read_dir(outside.path())
        .expect("list outside")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name())
        .filter(|name| name != "secret.txt")
        .collect();
    assert!(escaped.is_empty(), "written outside the box: {escaped:?}");
    assert!(swaps > 0, "the directory was never swapped");
    assert_eq!(landed + refused, 400);
    h.direct.kill(sandbox.id()).await.expect("kill");
}

/// A link deep in a path is refused by name and nothing is made beyond it.
#[tokio::test]
async fn direct_refuses_a_link_deep_in_a_path_and_makes_nothing_beyond_it() {
    let h = DirectHarness::new();
    let sandbox = h.direct.create(&spec()).await.expect("create");
    let outside = tempfile::tempdir().expect("outside dir");
    let home = PathBuf::from(sandbox.home());
    std::fs::create_dir_all(home.join("a/b")).expect("dir");
    std::os::unix::fs::symlink(outside.path(), home.join("a/b/c")).expect("link");
    match sandbox.write_file("a/b/c/d/e.txt", b"x").await {
        Err(BoxError::NotRegular { what, .. }) => {
            assert!(
                what.contains("a/b/c") && what.contains("symbolic link"),
                "{what}"
            )
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("list").count(),
        0,
        "nothing is made beyond the link"
    );
    // and the path below the link reads as refused, not as absent
    assert!(matches!(
        sandbox.read_tail("a/b/c/d/e.txt", 0, 10).await,
        Err(BoxError::NotRegular { .. })
    ));
    h.direct.kill(sandbox.id()).await.expect("kill");
}

/// A boxes dir named with `.` and `..` in it (`/srv/project/../boxes`): the box's home is the
/// directory it means, so the files a runner installs in it are not refused as lying outside
/// it, and a job started there runs with that home, absolute.
#[tokio::test]
async fn a_boxes_dir_named_through_dot_dot_holds_working_boxes() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("project")).expect("project dir");
    let direct = DirectProvider::in_boxes_dir(dir.path().join("project/./../boxes"));
    let sandbox = direct.create(&spec()).await.expect("create");
    assert!(
        !sandbox.home().contains("/.."),
        "the home is normal: {}",
        sandbox.home()
    );
    sandbox
        .write_file(".boxfleet/bin/tool", b"#!/bin/sh\n")
        .await
        .expect("a file in the home is the home's");
    let out = sandbox
        .exec(r#"printf '%s' "$HOME""#, NO_ENV, Duration::from_secs(10))
        .await
        .expect("exec");
    assert_eq!(String::from_utf8_lossy(&out.stdout), sandbox.home());
    assert!(
        PathBuf::from(sandbox.home()).starts_with(dir.path().join("boxes")),
        "{}",
        sandbox.home()
    );
    direct.kill(sandbox.id()).await.expect("kill");
}
