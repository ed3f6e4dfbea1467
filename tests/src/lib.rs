//! # boxfleet's integration harness
//!
//! What the scenario tests (`tests/tNN_<area>.rs`) stand on (DESIGN §17):
//!
//! - [`EtcdServer`]: a **real** etcd on loopback, never a mock.
//!   - [`EtcdServer::shared`] starts one etcd per test process, on free ports, with its data in
//!     a fresh directory; every test of the process talks to it, each under its own
//!     [`unique_prefix`], so tests never see each other's keys (but do see each other's
//!     revisions: the revision counter is global, so a test on the shared etcd must not assume
//!     that its writes get consecutive revisions).
//!   - [`EtcdServer::start`] starts a *dedicated* etcd for a test that kills, pauses or restarts
//!     it, or that needs the revision counter to itself; dropping it kills it.
//!   - The etcd binary is `$ETCD_BIN`, else `etcd` on `PATH` (Debian: `apt-get install
//!     etcd-server`). When there is none, the harness panics saying so: a store test never
//!     skips silently.
//!   - etcd is spawned with `PR_SET_PDEATHSIG = SIGKILL` from a spawner thread that lives as
//!     long as the test process, so no etcd outlives the test binary, even on `kill -9`.
//!     Its output goes to `etcd.log` in its directory (see [`EtcdServer::log_path`]), never to
//!     the test's stdout; failures to come up quote the log's tail. Directories left by earlier
//!     test processes that have exited are swept on the next start.
//! - [`unique_prefix`]: `/t/{name}/{uuid}`, the key prefix a test owns.
//! - [`wait_until`] / [`wait_for`] / [`poll_until`]: poll a condition with a bound instead of
//!   sleeping; a timeout panics naming what was awaited.

pub mod anthropic_standin;
pub mod claude_cli;
pub mod e2b_standin;
pub mod fleet;
pub mod grpc;
pub mod node;
pub mod proxy;
pub mod tls;

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock, mpsc};
use std::time::{Duration, Instant};

pub use boxfleet_cluster::store::etcd::EtcdStore;

/// How long a started etcd has to answer a get before the harness gives up on it.
pub const ETCD_UP_WITHIN: Duration = Duration::from_secs(30);
/// The call timeout of the stores [`EtcdServer::store`] hands out.
pub const STORE_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times a start is retried when the ports picked were taken before etcd bound them.
const START_ATTEMPTS: usize = 5;
/// Lines of etcd's log quoted in a failure.
const LOG_TAIL_LINES: usize = 40;

/// A real etcd process on loopback, with its own data directory.
///
/// The shared one ([`EtcdServer::shared`]) lives until the test process exits; a dedicated one
/// ([`EtcdServer::start`]) until it is dropped.
pub struct EtcdServer {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// holds `data/` and `etcd.log`
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    dedicated: bool,
}

impl std::fmt::Debug for EtcdServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdServer")
            .field("name", &self.name)
            .field("endpoints", &self.endpoints())
            .field("dir", &self.dir)
            .field("dedicated", &self.dedicated)
            .finish()
    }
}

impl EtcdServer {
    /// The etcd every test of this process shares, started on first use.
    ///
    /// Panics when no etcd binary is found or it does not come up within
    /// [`ETCD_UP_WITHIN`].
    pub fn shared() -> &'static EtcdServer {
        static SHARED: OnceLock<EtcdServer> = OnceLock::new();
        SHARED.get_or_init(|| Self::launch(false))
    }

    /// Starts a dedicated etcd, for a test that kills, pauses or restarts it. Dropping it kills
    /// it and removes its directory (kept, and named on stderr, when the test is panicking).
    pub fn start() -> EtcdServer {
        Self::launch(true)
    }

    /// The client URLs, as [`EtcdStore::connect`] takes them.
    pub fn endpoints(&self) -> Vec<String> {
        vec![self.client_url()]
    }

    /// `http://127.0.0.1:{client port}`.
    pub fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The directory holding etcd's `data/` and `etcd.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where etcd's stdout and stderr go.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("etcd.log")
    }

    /// The last `lines` lines of etcd's log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path(), lines)
    }

    /// The etcd process id, `None` while it is killed.
    pub fn pid(&self) -> Option<u32> {
        self.child().as_ref().map(Child::id)
    }

    /// A store connected to this etcd, with a call timeout of [`STORE_CALL_TIMEOUT`].
    pub async fn store(&self) -> EtcdStore {
        self.store_with_timeout(STORE_CALL_TIMEOUT).await
    }

    /// A store connected to this etcd whose calls are bounded by `call_timeout`.
    pub async fn store_with_timeout(&self, call_timeout: Duration) -> EtcdStore {
        match EtcdStore::connect(&self.endpoints(), call_timeout).await {
            Ok(store) => store,
            Err(error) => panic!(
                "could not connect to the test etcd at {}: {error}\n{}",
                self.client_url(),
                self.describe_log()
            ),
        }
    }

    /// Kills a dedicated etcd with SIGKILL and reaps it; its data stays for [`restart`].
    ///
    /// [`restart`]: EtcdServer::restart
    pub fn kill(&self) {
        self.assert_dedicated("kill");
        if let Some(mut child) = self.child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed dedicated etcd again, on the same ports and data, and waits until it
    /// answers. Kills it first if it is still running.
    pub async fn restart(&self) {
        self.assert_dedicated("restart");
        self.kill();
        if let Err(error) = self.spawn() {
            panic!("could not restart etcd: {error}");
        }
        if let Err(error) = self.wait_ready().await {
            panic!(
                "restarted etcd did not come up: {error}\n{}",
                self.describe_log()
            );
        }
    }

    /// Freezes a dedicated etcd (SIGSTOP): connections stay open but nothing is answered, as
    /// when a partition cuts a node off from the store.
    pub fn pause(&self) {
        self.assert_dedicated("pause");
        self.signal("-STOP");
    }

    /// Thaws a paused dedicated etcd (SIGCONT).
    pub fn resume(&self) {
        self.assert_dedicated("resume");
        self.signal("-CONT");
    }

    fn launch(dedicated: bool) -> EtcdServer {
        let bin = etcd_bin();
        sweep_stale_dirs();
        let mut last_error = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let seq = next_seq();
            let dir = base_dir().join(format!("etcd-{}-{seq}", std::process::id()));
            if let Err(error) = fs::create_dir_all(&dir) {
                panic!("could not create {}: {error}", dir.display());
            }
            let (client_port, peer_port) = free_ports();
            let server = EtcdServer {
                name: format!("boxfleet-test-{seq}"),
                client_port,
                peer_port,
                dir,
                child: Mutex::new(None),
                dedicated,
            };
            if let Err(error) = server.spawn_bin(&bin) {
                panic!(
                    "could not start {}: {error} (install etcd with `apt-get install \
                     etcd-server`, or set ETCD_BIN to an etcd v3 binary)",
                    bin.display()
                );
            }
            match server.wait_ready_blocking() {
                Ok(()) => return server,
                Err(error) => {
                    let log = server.log_tail(LOG_TAIL_LINES);
                    let port_taken = log.contains("address already in use");
                    last_error = format!("{error}\n{}", server.describe_log());
                    if port_taken && attempt < START_ATTEMPTS {
                        continue; // dropping `server` kills it and removes its directory
                    }
                    // keep the directory (and its log) of the start that failed for good
                    server.stop_and_remove(true);
                    std::mem::forget(server);
                    break;
                }
            }
        }
        panic!("etcd did not come up within {ETCD_UP_WITHIN:?}: {last_error}");
    }

    fn spawn(&self) -> io::Result<()> {
        self.spawn_bin(&etcd_bin())
    }

    fn spawn_bin(&self, bin: &Path) -> io::Result<()> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let peer_url = format!("http://127.0.0.1:{}", self.peer_port);
        let client_url = self.client_url();
        let mut command = Command::new(bin);
        command
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .arg("--initial-cluster")
            .arg(format!("{}={peer_url}", self.name))
            .args(["--initial-cluster-state", "new"])
            .arg("--initial-cluster-token")
            .arg(format!("{}-{}", self.name, std::process::id()))
            // a lone member elects itself fast, and etcd's minimum lease TTL
            // (1.5 election timeouts, rounded up) stays at 1 s
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        die_with_parent(&mut command);
        let child = spawn_from_spawner_thread(command)?;
        *self.child() = Some(child);
        Ok(())
    }

    /// Waits until etcd answers a get, or it exits, or [`ETCD_UP_WITHIN`] passes.
    async fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + ETCD_UP_WITHIN;
        let endpoints = self.endpoints();
        loop {
            if let Some(status) = self.exited() {
                return Err(format!("etcd exited with {status}"));
            }
            let probe = async {
                let store = EtcdStore::connect(&endpoints, Duration::from_secs(2))
                    .await
                    .map_err(|error| format!("connect: {error}"))?;
                boxfleet_cluster::Store::get(&store, "/boxfleet-tests/probe")
                    .await
                    .map_err(|error| format!("get: {error}"))
            };
            let last_error = match probe.await {
                Ok(_) => return Ok(()),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "no answer within {ETCD_UP_WITHIN:?} (last: {last_error})"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// [`wait_ready`](Self::wait_ready) from a sync caller, which may itself be on a tokio
    /// runtime: runs on a thread of its own with a runtime of its own.
    fn wait_ready_blocking(&self) -> Result<(), String> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|error| format!("could not build a runtime: {error}"))?;
                    runtime.block_on(self.wait_ready())
                })
                .join()
                .unwrap_or_else(|_| Err("the readiness probe panicked".into()))
        })
    }

    fn exited(&self) -> Option<std::process::ExitStatus> {
        let mut child = self.child();
        match child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(status),
            _ => None,
        }
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn signal(&self, signal: &str) {
        let Some(pid) = self.pid() else {
            panic!("etcd is not running");
        };
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status();
        match status {
            Ok(status) if status.success() => {}
            other => panic!("kill {signal} {pid} failed: {other:?}"),
        }
    }

    fn assert_dedicated(&self, what: &str) {
        assert!(
            self.dedicated,
            "{what} on the shared etcd would break every other test; use EtcdServer::start()"
        );
    }

    fn describe_log(&self) -> String {
        format!(
            "--- last lines of {} ---\n{}",
            self.log_path().display(),
            self.log_tail(LOG_TAIL_LINES)
        )
    }

    fn stop_and_remove(&self, keep: bool) {
        if let Some(mut child) = self.child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if keep {
            eprintln!(
                "boxfleet-tests: kept etcd's directory {} (log: {})",
                self.dir.display(),
                self.log_path().display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop_and_remove(std::thread::panicking());
    }
}

/// The key prefix a test owns on a shared store: `/t/{name}/{uuid}`.
pub fn unique_prefix(name: &str) -> String {
    format!("/t/{name}/{}", uuid::Uuid::new_v4().simple())
}

/// Polls `condition` until it is true; panics naming `what` when `timeout` passes first (a
/// probe that hangs past the deadline counts as not true).
///
/// ```ignore
/// wait_until("the lease's key is gone", Duration::from_secs(15), async || {
///     store.get(&key).await.unwrap().is_none()
/// })
/// .await;
/// ```
///
/// The async closure may borrow from the test, but its future is not `Send`: await it in the
/// test's own task. Inside a `tokio::spawn`ed task, use [`poll_until`].
pub async fn wait_until(what: &str, timeout: Duration, mut condition: impl AsyncFnMut() -> bool) {
    wait_for(what, timeout, async || condition().await.then_some(())).await
}

/// Polls `probe` until it returns `Some`, and returns that; panics naming `what` when
/// `timeout` passes first. Not `Send`, like [`wait_until`].
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let mut poll = Poll::new(timeout);
    loop {
        if let Ok(Some(value)) = tokio::time::timeout_at(poll.deadline, probe()).await {
            return value;
        }
        poll.pause(what).await;
    }
}

/// [`wait_until`] for a spawned task: `condition` returns a future that owns what it uses
/// (`move || { let store = store.clone(); async move { .. } }`), so the wait is `Send`.
pub async fn poll_until<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut poll = Poll::new(timeout);
    loop {
        if let Ok(true) = tokio::time::timeout_at(poll.deadline, condition()).await {
            return;
        }
        poll.pause(what).await;
    }
}

/// The pacing of the polling helpers: 10 ms doubling to 200 ms, never past the deadline.
struct Poll {
    started: tokio::time::Instant,
    deadline: tokio::time::Instant,
    pause: Duration,
}

impl Poll {
    fn new(timeout: Duration) -> Self {
        let started = tokio::time::Instant::now();
        Self {
            started,
            deadline: started + timeout,
            pause: Duration::from_millis(10),
        }
    }

    /// Sleeps before the next poll, or panics when the deadline has passed.
    async fn pause(&mut self, what: &str) {
        let now = tokio::time::Instant::now();
        if now >= self.deadline {
            panic!(
                "timed out after {:?} waiting until {what}",
                now.duration_since(self.started)
            );
        }
        tokio::time::sleep(self.pause.min(self.deadline - now)).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(200));
    }
}

/// `$ETCD_BIN`, else `etcd` on `PATH`; panics with the remedy when neither exists.
fn etcd_bin() -> PathBuf {
    const REMEDY: &str = "install it with `apt-get install etcd-server` (Debian/Ubuntu), or set \
                          ETCD_BIN to an etcd v3 binary";
    if let Some(bin) = std::env::var_os("ETCD_BIN") {
        let bin = PathBuf::from(bin);
        if !bin.is_file() {
            panic!(
                "ETCD_BIN={} is not a file; {REMEDY}; the store tests need a real etcd",
                bin.display()
            );
        }
        return bin;
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("etcd"))
            .find(|candidate| candidate.is_file())
    });
    match found {
        Some(bin) => bin,
        None => panic!(
            "no `etcd` on PATH and ETCD_BIN is unset; {REMEDY}; the store tests need a real etcd"
        ),
    }
}

/// Where the etcd directories go: `$TMPDIR/boxfleet-tests`.
fn base_dir() -> PathBuf {
    std::env::temp_dir().join("boxfleet-tests")
}

fn next_seq() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// Removes `etcd-{pid}-{n}` directories whose test process is gone (the shared etcd's
/// directory is never removed by its own process: statics are not dropped).
fn sweep_stale_dirs() {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        let Ok(entries) = fs::read_dir(base_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|name| name.strip_prefix("etcd-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    });
}

/// Two distinct free loopback ports (client, peer). They are free when this returns; the
/// caller retries when etcd finds one taken after all.
fn free_ports() -> (u16, u16) {
    let bind = || {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| Ok((listener.local_addr()?.port(), listener)))
            .unwrap_or_else(|error| panic!("could not bind a loopback port: {error}"))
    };
    // both listeners are held until both ports are read, so the ports differ
    let (client, _client_listener) = bind();
    let (peer, _peer_listener) = bind();
    (client, peer)
}

/// Makes the kernel SIGKILL the child when the thread that spawned it exits, which for the
/// spawner thread means when the test process exits.
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(libc::pid_t::MAX);
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec. It calls only prctl(2) and
    // getppid(2), which are async-signal-safe, touches no locks and does not allocate (the
    // errors are raw OS errors).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // the test process died between fork and prctl: nobody will send the signal
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Spawns `command` from the spawner thread, which never exits: `PR_SET_PDEATHSIG` fires
/// when the *thread* that forked the child exits, so spawning from a test's thread (or a
/// tokio worker that retires) would kill etcd too early.
fn spawn_from_spawner_thread(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, receiver) = mpsc::channel::<SpawnJob>();
        let started = std::thread::Builder::new()
            .name("boxfleet-tests-etcd-spawner".into())
            .spawn(move || {
                for job in receiver {
                    job();
                }
                // the sender lives in a static, so the loop above never ends; if it did, this
                // thread must still outlive the children it spawned
                loop {
                    std::thread::park();
                }
            });
        if let Err(error) = started {
            panic!("could not start the etcd spawner thread: {error}");
        }
        Mutex::new(jobs)
    });
    let (reply, answer) = mpsc::channel();
    let mut command = command;
    let job: SpawnJob = Box::new(move || {
        let _ = reply.send(command.spawn());
    });
    spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(job)
        .map_err(|_| io::Error::other("the etcd spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the etcd spawner thread dropped the spawn"))?
}

/// The last `lines` lines of a log file (reads at most its last 64 KiB).
fn log_tail(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 64 * 1024;
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let length = file.metadata()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(WINDOW)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("(could not read {}: {error})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boxfleet_cluster::store::{Op, Store, Txn};

    async fn put(store: &EtcdStore, key: &str, value: &str) {
        let written = store
            .txn(Txn::new().and_then([Op::put(key, value)]))
            .await
            .map(|response| response.succeeded);
        assert!(matches!(written, Ok(true)), "put {key}: {written:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dedicated_etcd_pauses_restarts_with_its_data_and_dies_when_dropped() {
        let server = EtcdServer::start();
        let pid = server.pid().expect("running");
        let store = server.store_with_timeout(Duration::from_millis(500)).await;
        put(&store, "/harness/a", "1").await;

        server.pause();
        let frozen = store.get("/harness/a").await;
        assert!(frozen.is_err(), "a paused etcd answers nothing: {frozen:?}");
        server.resume();
        wait_until(
            "the resumed etcd answers",
            Duration::from_secs(10),
            async || store.get("/harness/a").await.is_ok(),
        )
        .await;

        server.kill();
        assert_eq!(server.pid(), None);
        server.restart().await;
        let store = server.store().await;
        let kept = store
            .get("/harness/a")
            .await
            .expect("get")
            .map(|kv| kv.value);
        assert_eq!(
            kept.as_deref(),
            Some(&b"1"[..]),
            "the data survives a restart"
        );

        let dir = server.dir().to_owned();
        drop(server);
        assert!(
            !dir.exists(),
            "a dropped dedicated etcd removes its directory"
        );
        // killed and reaped by `kill` before the restart
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "the first etcd process is gone"
        );
    }

    #[tokio::test]
    async fn the_polling_helpers_wait_and_name_what_they_waited_for() {
        use futures::FutureExt;
        let timed_out = std::panic::AssertUnwindSafe(wait_until(
            "pigs fly",
            Duration::from_millis(50),
            async || false,
        ))
        .catch_unwind()
        .await;
        let message = timed_out
            .expect_err("times out")
            .downcast::<String>()
            .map(|message| *message)
            .unwrap_or_default();
        assert!(message.contains("waiting until pigs fly"), "{message}");

        let mut polls = 0;
        let value = wait_for("the third poll", Duration::from_secs(5), async || {
            polls += 1;
            (polls == 3).then_some(polls)
        })
        .await;
        assert_eq!(value, 3);

        // poll_until's wait can run in a spawned task
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiter = tokio::spawn({
            let flag = flag.clone();
            async move {
                poll_until("the flag is up", Duration::from_secs(5), move || {
                    let flag = flag.clone();
                    async move { flag.load(Ordering::SeqCst) }
                })
                .await;
            }
        });
        flag.store(true, Ordering::SeqCst);
        waiter.await.expect("poll_until saw the flag");
    }

    #[test]
    fn unique_prefixes_differ() {
        let (a, b) = (unique_prefix("x"), unique_prefix("x"));
        assert!(a.starts_with("/t/x/") && b.starts_with("/t/x/"));
        assert_ne!(a, b);
    }
}
