//! The box contract (DESIGN §9, §17): one set of generic checks that every backend passes —
//! create, attach never wakes, connect resumes, kill never resumes and treats gone as
//! success, a background job, keepalive, pause/resume, bounded whole-file reads, ranged tail
//! reads, regular files only, a recycled job identity. A backend's test supplies a
//! [`Harness`] and runs every check with [`box_contract!`](crate::box_contract):
//!
//! ```ignore
//! boxfleet_sandbox::box_contract!(direct_box, DirectHarness::new());
//! ```
//!
//! Built with the `contract` feature (dev-dependencies turn it on).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{BoxError, BoxSpec, JobHandle, MAX_FILE_BYTES, Provider, Sandbox};

const NO_ENV: &std::collections::BTreeMap<String, String> = &std::collections::BTreeMap::new();

/// What the generic checks need of a backend beyond the ports.
#[async_trait]
pub trait Harness: Send + Sync {
    fn provider(&self) -> Arc<dyn Provider>;
    /// A command for a job that runs until it is killed (the fake: scripted not to finish).
    fn long_job(&self) -> String;
    /// A command for a job that prints `hello` to `{dir}/stdout.log`, writes `exit` to
    /// `{dir}/done` and exits with it, finishing within a few polls.
    fn short_job(&self, dir: &str, exit: i32) -> String;
    async fn put_symlink(&self, sandbox: &dyn Sandbox, path: &str, target: &str);
    async fn put_fifo(&self, sandbox: &dyn Sandbox, path: &str);
    async fn put_dir(&self, sandbox: &dyn Sandbox, path: &str);
    async fn put_sparse(&self, sandbox: &dyn Sandbox, path: &str, len: u64);
    /// Whether the job's processes are stopped (waits a little for a signal to land).
    async fn job_stopped(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> bool;
    /// Whether the backend's own record says the box is paused.
    async fn recorded_paused(&self, sandbox_id: &str) -> bool;
    /// The box's recorded timeout, and a keepalive stamp that grows with each keepalive.
    async fn keepalive(&self, sandbox_id: &str) -> (u64, String);
    /// The same job's identity with a wrong start time: a pid the kernel handed out again.
    fn recycled(&self, job: &JobHandle) -> JobHandle;
    /// Whether the box's jobs are all gone from the host (the fake: nothing to check).
    async fn no_process_left(&self, job: &JobHandle) -> bool;
    /// Whether a paused box is read as it lies (a local box: its files are on the host and
    /// its jobs' liveness is the kernel's), or refuses every in-box act, reads included, until
    /// a connect resumes it (E2B: a paused box is a snapshot with nothing running to answer).
    /// Either way attach never wakes it.
    fn reads_paused_boxes(&self) -> bool {
        true
    }
    /// Whether the box's processes are this host's, seen in its `/proc` (the fake: none run).
    fn runs_host_processes(&self) -> bool {
        true
    }
}

/// `result` is the refusal of an act on a paused box: unreachable, saying the box is paused.
fn refused_paused<T>(what: &str, result: Result<T, BoxError>) {
    match result {
        Err(BoxError::Unreachable(message)) => assert!(message.contains("paused"), "{message}"),
        Err(other) => panic!("{what} on a paused box is unreachable, got {other:?}"),
        Ok(_) => panic!("{what} on a paused box is unreachable, got an answer"),
    }
}

pub fn spec() -> BoxSpec {
    BoxSpec {
        turn_id: "t-1".into(),
        seat: "ada".into(),
        env: Default::default(),
        timeout_seconds: 900,
        sandbox_id: None,
        launch_id: "launch-contract".into(),
        coding_agent: "command".into(),
    }
}

pub async fn wait_until_done(sandbox: &dyn Sandbox, job: &JobHandle) {
    for _ in 0..400 {
        if !sandbox.job_running(job).await.expect("job_running answers") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the job did not finish");
}

// ---------------------------------------------------------------------------------------------
// the checks

pub async fn creates_a_box(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    assert!(!sandbox.id().is_empty());
    assert!(
        sandbox.home().starts_with('/'),
        "home is absolute: {}",
        sandbox.home()
    );
    sandbox
        .write_file("notes/hello.txt", b"hi")
        .await
        .expect("write");
    let again = provider.attach(sandbox.id()).await.expect("attach");
    assert_eq!(
        again.read_file("notes/hello.txt").await.expect("read"),
        Some(b"hi".to_vec())
    );
    let absolute = format!("{}/notes/hello.txt", sandbox.home());
    assert_eq!(
        again.read_file(&absolute).await.expect("read absolute"),
        Some(b"hi".to_vec())
    );
    assert_eq!(
        again.read_file("~/notes/hello.txt").await.expect("read ~"),
        Some(b"hi".to_vec())
    );
    assert_eq!(
        again
            .read_file("notes/absent.txt")
            .await
            .expect("read absent"),
        None
    );
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn attach_never_wakes(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    sandbox.pause().await.expect("pause");
    assert!(
        h.job_stopped(sandbox.as_ref(), &job).await,
        "paused job is stopped"
    );
    if h.reads_paused_boxes() {
        let attached = provider
            .attach(sandbox.id())
            .await
            .expect("attach succeeds on a paused box");
        // reads do not wake it
        assert!(
            attached.job_running(&job).await.expect("job_running"),
            "a stopped job is alive"
        );
        let _ = attached
            .read_file(".boxfleet/jobs/a/stdout.log")
            .await
            .expect("read");
        let _ = attached
            .read_tail(".boxfleet/jobs/a/stdout.log", 0, 1024)
            .await
            .expect("tail");
        attached
            .set_timeout(Duration::from_secs(60))
            .await
            .expect("keepalive on a paused box");
        // what would need it running is refused, not done by waking it
        assert!(matches!(
            attached.exec("true", NO_ENV, Duration::from_secs(5)).await,
            Err(BoxError::Unreachable(_))
        ));
        assert!(matches!(
            attached.write_file("x.txt", b"x").await,
            Err(BoxError::Unreachable(_))
        ));
    } else {
        match provider.attach(sandbox.id()).await {
            Err(BoxError::Unreachable(message)) => {
                assert!(message.contains("paused"), "{message}");
                assert!(message.contains("never wakes"), "{message}");
            }
            other => panic!(
                "attach refuses a paused box: {:?}",
                other.map(|s| s.id().to_owned())
            ),
        }
        // the keepalive is a control-plane act and does not wake it either
        sandbox
            .set_timeout(Duration::from_secs(60))
            .await
            .expect("keepalive on a paused box");
    }
    assert!(
        h.recorded_paused(sandbox.id()).await,
        "still paused after attach"
    );
    assert!(
        h.job_stopped(sandbox.as_ref(), &job).await,
        "still stopped after attach"
    );
    provider.kill(sandbox.id()).await.expect("kill");
    if !h.reads_paused_boxes() {
        assert!(h.no_process_left(&job).await);
    }
}

pub async fn connect_resumes(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    sandbox.pause().await.expect("pause");
    assert!(h.job_stopped(sandbox.as_ref(), &job).await);
    let connected = provider.connect(sandbox.id()).await.expect("connect");
    assert!(
        !h.recorded_paused(sandbox.id()).await,
        "connect resumed the box"
    );
    assert!(
        !h.job_stopped(sandbox.as_ref(), &job).await,
        "the job runs again"
    );
    assert!(connected.job_running(&job).await.expect("job_running"));
    connected
        .write_file("x.txt", b"x")
        .await
        .expect("writes work again");
    // connecting a running box is fine too
    provider.connect(sandbox.id()).await.expect("connect again");
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn kill_never_resumes_and_gone_is_success(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    sandbox.pause().await.expect("pause");
    provider
        .kill(sandbox.id())
        .await
        .expect("kill a paused box");
    assert!(
        h.no_process_left(&job).await,
        "the killed box's job is gone"
    );
    provider
        .kill(sandbox.id())
        .await
        .expect("killing a gone box is success");
    assert!(matches!(
        provider.attach(sandbox.id()).await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        provider.connect(sandbox.id()).await,
        Err(BoxError::Gone(_))
    ));
    assert!(matches!(
        sandbox.read_file("x").await,
        Err(BoxError::Gone(_))
    ));
}

pub async fn runs_a_background_job(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let dir = format!("{}/.boxfleet/jobs/short", sandbox.home());
    let job = sandbox
        .start_background(&h.short_job(&dir, 3), NO_ENV, &dir)
        .await
        .expect("start");
    assert_eq!(job.dir, dir);
    assert!(!job.id.is_empty());
    wait_until_done(sandbox.as_ref(), &job).await;
    assert!(
        !sandbox.job_running(&job).await.expect("job_running"),
        "a finished job stays finished"
    );
    assert_eq!(
        sandbox
            .read_file(&format!("{dir}/done"))
            .await
            .expect("done"),
        Some(b"3\n".to_vec())
    );
    let out = sandbox
        .read_tail(&format!("{dir}/stdout.log"), 0, 1024)
        .await
        .expect("stdout");
    assert_eq!(out.bytes, b"hello\n");
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn the_job_outlives_being_polled(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    for _ in 0..5 {
        assert!(sandbox.job_running(&job).await.expect("job_running"));
        let attached = provider.attach(sandbox.id()).await.expect("attach");
        assert!(attached.job_running(&job).await.expect("job_running"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sandbox.kill_job(&job).await.expect("kill_job");
    wait_until_done(sandbox.as_ref(), &job).await;
    assert!(h.no_process_left(&job).await);
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn keepalive(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let (timeout, first) = h.keepalive(sandbox.id()).await;
    assert_eq!(timeout, 900);
    tokio::time::sleep(Duration::from_millis(5)).await;
    sandbox
        .set_timeout(Duration::from_secs(123))
        .await
        .expect("set_timeout");
    let (timeout, second) = h.keepalive(sandbox.id()).await;
    assert_eq!(timeout, 123);
    assert!(
        second > first,
        "the keepalive stamp moved: {first} -> {second}"
    );
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn pause_and_resume(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    sandbox
        .write_file("kept.txt", b"kept")
        .await
        .expect("write");
    sandbox.pause().await.expect("pause");
    assert!(h.recorded_paused(sandbox.id()).await);
    assert!(h.job_stopped(sandbox.as_ref(), &job).await);
    if h.reads_paused_boxes() {
        assert!(
            sandbox.job_running(&job).await.expect("job_running"),
            "a paused job is alive, not done"
        );
        assert_eq!(
            sandbox.read_file("kept.txt").await.expect("read"),
            Some(b"kept".to_vec())
        );
        assert!(matches!(
            sandbox
                .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/b")
                .await,
            Err(BoxError::Unreachable(_))
        ));
    } else {
        // a paused job is never read as finished: its liveness is unknown, not false
        refused_paused("job_running", sandbox.job_running(&job).await);
        refused_paused("read_file", sandbox.read_file("kept.txt").await);
        refused_paused("read_tail", sandbox.read_tail("kept.txt", 0, 9).await);
        refused_paused("write_file", sandbox.write_file("x.txt", b"x").await);
        refused_paused(
            "exec",
            sandbox.exec("true", NO_ENV, Duration::from_secs(5)).await,
        );
        refused_paused(
            "start_background",
            sandbox
                .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/b")
                .await,
        );
    }
    sandbox.pause().await.expect("pausing twice is fine");
    let resumed = provider.connect(sandbox.id()).await.expect("connect");
    assert!(!h.job_stopped(resumed.as_ref(), &job).await);
    if !h.reads_paused_boxes() {
        assert!(resumed.job_running(&job).await.expect("job_running"));
        assert_eq!(
            sandbox
                .read_file("kept.txt")
                .await
                .expect("the old handle reads again"),
            Some(b"kept".to_vec())
        );
    }
    resumed.kill_job(&job).await.expect("kill_job");
    wait_until_done(resumed.as_ref(), &job).await;
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn whole_file_reads_are_bounded(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let body = vec![7u8; 1024 * 1024];
    sandbox
        .write_file("big/one-mib", &body)
        .await
        .expect("write");
    assert_eq!(
        sandbox.read_file("big/one-mib").await.expect("read"),
        Some(body)
    );
    h.put_sparse(sandbox.as_ref(), "big/at-bound", MAX_FILE_BYTES)
        .await;
    let at = sandbox
        .read_file("big/at-bound")
        .await
        .expect("a file at the bound reads whole");
    assert_eq!(at.map(|b| b.len() as u64), Some(MAX_FILE_BYTES));
    let past = 33 * 1024 * 1024;
    h.put_sparse(sandbox.as_ref(), "big/past-bound", past).await;
    match sandbox.read_file("big/past-bound").await {
        Err(BoxError::TooLarge { path, size, limit }) => {
            assert_eq!(path, "big/past-bound");
            assert_eq!(size, past);
            assert_eq!(limit, MAX_FILE_BYTES);
        }
        other => panic!(
            "a file past the bound is refused, not clipped: {:?}",
            other.map(|o| o.map(|b| b.len()))
        ),
    }
    // a stream is read from its end regardless of its size
    let tail = sandbox
        .read_tail("big/past-bound", 0, 10)
        .await
        .expect("tail of a big file");
    assert_eq!(
        (tail.offset, tail.len, tail.bytes.len()),
        (past - 10, past, 10)
    );
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn ranged_tail_reads(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    sandbox
        .write_file("log.txt", b"0123456789")
        .await
        .expect("write");
    let from4 = sandbox.read_tail("log.txt", 4, 100).await.expect("tail");
    assert_eq!(
        (from4.bytes.as_slice(), from4.offset, from4.len),
        (&b"456789"[..], 4, 10)
    );
    let last3 = sandbox.read_tail("log.txt", 0, 3).await.expect("tail");
    assert_eq!(
        (last3.bytes.as_slice(), last3.offset, last3.len),
        (&b"789"[..], 7, 10)
    );
    let at_end = sandbox.read_tail("log.txt", 10, 100).await.expect("tail");
    assert_eq!((at_end.bytes.len(), at_end.offset, at_end.len), (0, 10, 10));
    let past = sandbox.read_tail("log.txt", 50, 100).await.expect("tail");
    assert_eq!((past.bytes.len(), past.len), (0, 10));
    let absent = sandbox
        .read_tail("nothing.log", 0, 100)
        .await
        .expect("tail of nothing");
    assert_eq!((absent.bytes.len(), absent.len), (0, 0));
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn links_and_pipes_are_refused(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let bound = Duration::from_secs(5);
    sandbox
        .write_file("real.txt", b"real")
        .await
        .expect("write");
    h.put_symlink(sandbox.as_ref(), "link.txt", "real.txt")
        .await;
    h.put_symlink(sandbox.as_ref(), "dangling.txt", "nowhere/created.txt")
        .await;
    h.put_symlink(sandbox.as_ref(), "linkdir", "/tmp").await;
    h.put_fifo(sandbox.as_ref(), "pipe").await;
    h.put_dir(sandbox.as_ref(), "adir").await;
    let refused = |result: Result<(), BoxError>, what: &str| match result {
        Err(BoxError::NotRegular { what: said, .. }) => {
            assert!(said.contains(what), "{said} names {what}")
        }
        other => panic!("expected a refusal naming {what}, got {other:?}"),
    };
    for (path, what) in [
        ("link.txt", "symbolic link"),
        ("dangling.txt", "symbolic link"),
        ("pipe", "named pipe"),
        ("adir", "directory"),
    ] {
        let read = tokio::time::timeout(bound, sandbox.read_file(path))
            .await
            .expect("a read never waits");
        refused(read.map(|_| ()), what);
        let tail = tokio::time::timeout(bound, sandbox.read_tail(path, 0, 10))
            .await
            .expect("a tail never waits");
        refused(tail.map(|_| ()), what);
        let write = tokio::time::timeout(bound, sandbox.write_file(path, b"w"))
            .await
            .expect("a write never waits");
        refused(write, what);
    }
    refused(
        sandbox.read_file("linkdir/x").await.map(|_| ()),
        "symbolic link",
    );
    refused(sandbox.write_file("linkdir/x", b"w").await, "symbolic link");
    // nothing was followed: the link's target is untouched, the dangling one's never made
    assert_eq!(
        sandbox.read_file("real.txt").await.expect("read"),
        Some(b"real".to_vec())
    );
    assert_eq!(
        sandbox
            .read_file("nowhere/created.txt")
            .await
            .expect("read"),
        None
    );
    // paths that leave the box are refused
    assert!(sandbox.read_file("../escape").await.is_err());
    assert!(
        sandbox
            .write_file("/etc/boxfleet-escape", b"x")
            .await
            .is_err()
    );
    assert!(sandbox.read_file("/etc/passwd").await.is_err());
    provider.kill(sandbox.id()).await.expect("kill");
}

pub async fn a_recycled_pid_is_not_the_job(h: &dyn Harness) {
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let job = sandbox
        .start_background(&h.long_job(), NO_ENV, ".boxfleet/jobs/a")
        .await
        .expect("start");
    let stranger = h.recycled(&job);
    assert_ne!(stranger.id, job.id);
    assert!(
        !sandbox.job_running(&stranger).await.expect("job_running"),
        "a wrong start time is not the job"
    );
    sandbox
        .kill_job(&stranger)
        .await
        .expect("kill_job of a recycled pid is a no-op");
    assert!(
        sandbox.job_running(&job).await.expect("job_running"),
        "the real job was not signalled"
    );
    sandbox.pause().await.expect("pause");
    provider.kill(sandbox.id()).await.expect("kill");
}

/// The live (not zombie) processes on this host whose command line is `sleep {seconds}`.
fn sleeping(seconds: u64) -> Vec<u32> {
    let wanted = format!("sleep\0{seconds}\0");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !cmdline.ends_with(wanted.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if !matches!(state, Some('Z') | Some('X') | None) {
            found.push(pid);
        }
    }
    found
}

/// Every process a job started dies with its box: one that left the job's session, one left
/// behind in the background, and one re-parented after it killed its own parent (issue 13:
/// on `main` all of them kept running with ppid 1 after their box was deleted).
pub async fn escaped_processes_die_with_the_box(h: &dyn Harness) {
    if !h.runs_host_processes() {
        return;
    }
    let provider = h.provider();
    let sandbox = provider.create(&spec()).await.expect("create");
    let base = 100_000
        + (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos() as u64
            % 800_000)
            * 3;
    let (left, behind, orphan) = (base, base + 1, base + 2);
    let command = format!(
        "setsid sleep {left} & sleep {behind} & sh -c 'kill -9 $PPID; exec sleep {orphan}' & wait"
    );
    sandbox
        .start_background(&command, NO_ENV, ".boxfleet/jobs/escape")
        .await
        .expect("start");
    let all_running = || {
        [left, behind, orphan]
            .iter()
            .all(|s| !sleeping(*s).is_empty())
    };
    for _ in 0..200 {
        if all_running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(all_running(), "the three processes started");
    provider.kill(sandbox.id()).await.expect("kill");
    let mut left_over = Vec::new();
    for _ in 0..120 {
        left_over = [left, behind, orphan]
            .iter()
            .filter(|s| !sleeping(**s).is_empty())
            .copied()
            .collect();
        if left_over.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        left_over.is_empty(),
        "still running after the box was killed: sleep {left_over:?} (of {left} setsid, {behind} background, {orphan} re-parented)"
    );
}

/// Every check of the contract, one `#[tokio::test]` each, in a module named `$module`, each
/// run against a fresh `$harness` (an expression that makes a [`Harness`]).
#[macro_export]
macro_rules! box_contract {
    ($module:ident, $harness:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn creates_a_box() {
                let harness = $harness;
                $crate::contract::creates_a_box(&harness).await
            }
            #[tokio::test]
            async fn attach_never_wakes() {
                let harness = $harness;
                $crate::contract::attach_never_wakes(&harness).await
            }
            #[tokio::test]
            async fn connect_resumes() {
                let harness = $harness;
                $crate::contract::connect_resumes(&harness).await
            }
            #[tokio::test]
            async fn kill_never_resumes_and_gone_is_success() {
                let harness = $harness;
                $crate::contract::kill_never_resumes_and_gone_is_success(&harness).await
            }
            #[tokio::test]
            async fn runs_a_background_job() {
                let harness = $harness;
                $crate::contract::runs_a_background_job(&harness).await
            }
            #[tokio::test]
            async fn the_job_outlives_being_polled() {
                let harness = $harness;
                $crate::contract::the_job_outlives_being_polled(&harness).await
            }
            #[tokio::test]
            async fn keepalive() {
                let harness = $harness;
                $crate::contract::keepalive(&harness).await
            }
            #[tokio::test]
            async fn pause_and_resume() {
                let harness = $harness;
                $crate::contract::pause_and_resume(&harness).await
            }
            #[tokio::test]
            async fn whole_file_reads_are_bounded() {
                let harness = $harness;
                $crate::contract::whole_file_reads_are_bounded(&harness).await
            }
            #[tokio::test]
            async fn ranged_tail_reads() {
                let harness = $harness;
                $crate::contract::ranged_tail_reads(&harness).await
            }
            #[tokio::test]
            async fn links_and_pipes_are_refused() {
                let harness = $harness;
                $crate::contract::links_and_pipes_are_refused(&harness).await
            }
            #[tokio::test]
            async fn escaped_processes_die_with_the_box() {
                let harness = $harness;
                $crate::contract::escaped_processes_die_with_the_box(&harness).await
            }
            #[tokio::test]
            async fn a_recycled_pid_is_not_the_job() {
                let harness = $harness;
                $crate::contract::a_recycled_pid_is_not_the_job(&harness).await
            }
        }
    };
}
