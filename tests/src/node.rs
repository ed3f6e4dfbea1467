//! `boxfleet node` processes for scenario tests: the built binary, started as a user starts
//! it, on a free loopback port, killed with SIGKILL or stopped, and started again on the
//! same data directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `boxfleet` program under test: this package's `boxfleet-under-test` binary, whose entry
/// point is the `boxfleet` binary's own (`boxfleet_node::main`), so a scenario runs exactly what
/// a user runs. Cargo builds a package's binaries before its integration tests and benchmarks, in
/// the same profile, into `target/{profile}` (the test binary itself is in `target/{profile}/deps`).
pub fn boxfleet_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/{profile}");
        let bin = profile_dir.join(format!(
            "boxfleet-under-test{}",
            std::env::consts::EXE_SUFFIX
        ));
        assert!(
            bin.exists(),
            "no boxfleet binary at {}: run the scenarios through `cargo test -p boxfleet-tests` \
             (or `cargo bench`), which builds it first",
            bin.display()
        );
        bin
    })
}

/// `--http-listen 127.0.0.1:0` unless `args` name the HTTP listener themselves: a test node's
/// HTTP listener takes an ephemeral port (the default, the gRPC port + 80, may be another test
/// node's), and a test that needs it names it.
fn http_listen<S: AsRef<str>>(args: &[S]) -> Vec<&'static str> {
    if args.iter().any(|a| a.as_ref() == "--http-listen") {
        Vec::new()
    } else {
        vec!["--http-listen", "127.0.0.1:0"]
    }
}

/// The ports [`free_port`] has handed out in this process. The tests of one binary run side by
/// side: a port bound and released for one test's node, or freed when a test kills its node,
/// is otherwise handed to another test's node too, which then fails to bind while its test
/// talks to the first test's node (and its clients to the wrong keyring).
static HANDED_OUT: std::sync::Mutex<Option<std::collections::HashSet<u16>>> =
    std::sync::Mutex::new(None);

/// A free loopback port (bound and released), never one this process was handed before.
///
/// It is taken from below the kernel's ephemeral range (`ip_local_port_range`), which a
/// listener on port 0 or an outgoing connection is given ports from: a node killed and
/// started again on its port found it taken by another test's connection or HTTP listener
/// (a t21 restart failed so in CI). Only an explicit bind takes a port down there, and this
/// process's are kept apart by the set of ports handed out.
pub fn free_port() -> u16 {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    let handed_out = handed_out.get_or_insert_with(Default::default);
    let (low, high) = below_ephemeral();
    let span = u32::from(high - low);
    // start somewhere of this process's own, so two test processes seldom try the same ports
    let mut at = (std::process::id().wrapping_mul(2_654_435_761) % span) as u16;
    for _ in 0..span {
        at = (at + 1) % (high - low);
        let port = low + at;
        if handed_out.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed_out.insert(port);
            return port;
        }
    }
    panic!("no free loopback port in {low}..{high}");
}

/// The ports [`free_port`] picks from: up to the start of the kernel's ephemeral range.
fn below_ephemeral() -> (u16, u16) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > 12_000 {
        (10_000, ephemeral_low)
    } else {
        // nearly every port is ephemeral: none is safe from it, any free one will do
        (10_000, 60_000)
    }
}

/// One `boxfleet node` process.
#[derive(Debug)]
pub struct NodeProcess {
    pub id: String,
    pub port: u16,
    pub data_dir: PathBuf,
    pub extra_args: Vec<String>,
    pub env: Vec<(String, String)>,
    child: Option<Child>,
    /// the log's length when the running process was spawned: its banner is past it
    log_from: usize,
}

impl NodeProcess {
    /// Starts `boxfleet node --id ID --listen 127.0.0.1:PORT --data-dir DIR --poll-interval 1`
    /// and waits until it serves.
    pub fn start(id: &str, data_dir: &Path, extra_args: &[&str]) -> NodeProcess {
        Self::start_with_env(id, data_dir, extra_args, &[])
    }

    /// [`NodeProcess::start`] with extra environment (e.g. `BOXFLEET_FAILPOINTS`).
    pub fn start_with_env(
        id: &str,
        data_dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> NodeProcess {
        let mut node = NodeProcess {
            id: id.to_owned(),
            port: free_port(),
            data_dir: data_dir.to_owned(),
            extra_args: extra_args.iter().map(|s| (*s).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            child: None,
            log_from: 0,
        };
        // the port was free when picked, but another process (a node's HTTP listener on port
        // 0, a client's outgoing socket) may take it before this node binds: a first start
        // that could not bind tries a new port (a restart keeps its port: clients know it)
        for _ in 0..3 {
            node.spawn_process();
            match node.wait_listening() {
                Ok(()) => return node,
                Err(_) if node.log()[node.log_from..].contains("is another node running there") => {
                    node.port = free_port();
                }
                Err(status) => panic!(
                    "boxfleet node exited with {status}; its log:\n{}",
                    node.log()
                ),
            }
        }
        panic!(
            "boxfleet node found no free port in 3 tries; its log:\n{}",
            node.log()
        )
    }

    pub fn addr(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        self.spawn_process();
        if let Err(status) = self.wait_listening() {
            panic!(
                "boxfleet node exited with {status}; its log:\n{}",
                self.log()
            );
        }
    }

    /// Starts the node's process (not waiting for it to listen).
    fn spawn_process(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join(format!("{}.log", self.id)))
            .expect("open node log");
        std::fs::create_dir_all(&self.data_dir).expect("data dir");
        self.log_from = self.log().len();
        let child = Command::new(boxfleet_bin())
            .args([
                "node",
                "--id",
                &self.id,
                "--listen",
                &format!("127.0.0.1:{}", self.port),
            ])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--poll-interval", "1"])
            .args(http_listen(&self.extra_args))
            .args(&self.extra_args)
            .env("BOXFLEET_LOG", "info")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn boxfleet node");
        self.child = Some(child);
        crate::grpc::register(&self.addr(), &self.token_file());
    }

    /// Waits until the node listens and has printed its banner (it writes its admin credential
    /// before it binds, and prints the banner once it is up); `Err` with its exit status when
    /// it died first. A connection alone is not enough: a socket connected to itself, or another
    /// process on the port, answers before this node has written anything.
    fn wait_listening(&mut self) -> Result<(), std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err()
            || !self
                .log()
                .get(self.log_from..)
                .is_some_and(|log| log.contains("listening on"))
        {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(status);
            }
            assert!(
                Instant::now() < deadline,
                "node {} did not listen; log:\n{}",
                self.id,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // something listens there: our node, unless it could not bind and another process
        // holds the port
        if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
            return Err(status);
        }
        Ok(())
    }

    /// The node's HTTP listener (`http://127.0.0.1:PORT`), as its log names it once bound.
    pub fn http_url(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            let bound = log
                .lines()
                .rev()
                .filter(|line| line.contains("node_http_listening"))
                .find_map(|line| {
                    let at = line.find("addr=")? + "addr=".len();
                    line[at..].split_whitespace().next().map(str::to_owned)
                });
            if let Some(addr) = bound {
                return format!("http://{addr}");
            }
            assert!(
                Instant::now() < deadline,
                "node {} named no HTTP listener; log:\n{log}",
                self.id
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The node's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join(format!("{}.log", self.id))).unwrap_or_default()
    }

    /// The node process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: the process dies with no chance to clean up.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGHUP: the node reads its config file again (live reload).
    pub fn hangup(&self) {
        let Some(pid) = self.pid() else {
            return;
        };
        #[allow(unsafe_code)]
        // SAFETY: signalling our own child by the pid we spawned it with
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGHUP);
        }
    }

    /// SIGTERM: the node stops its tree and closes its session (its seats are free at once),
    /// then exits; waits at most 20 s for it, then SIGKILLs it.
    pub fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        #[allow(unsafe_code)]
        // SAFETY: signalling our own child by the pid we spawned it with
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // a graceful stop that did not end in time: said, since what it left is then reaped
        println!(
            "node {} did not stop within 20 s of SIGTERM: killed",
            self.id
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Whether the node's process has exited (killed, crashed, or stopped by itself); a node
    /// not started, or killed by [`NodeProcess::kill`], counts as exited.
    pub fn has_exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Starts a terminated or killed node again on the same data directory and port.
    pub fn start_again(&mut self) {
        self.spawn();
    }

    /// [`NodeProcess::start_again`] for a node that may die while it starts (a crash point in
    /// its boot's recovery pass): `false` when it did, and may be started again.
    pub fn try_start_again(&mut self) -> bool {
        self.spawn_process();
        self.wait_listening().is_ok()
    }

    /// Starts the node again on the same data directory and port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// The admin credential the node writes in its data dir.
    pub fn token_file(&self) -> PathBuf {
        self.data_dir.join("admin.token")
    }

    /// Runs the CLI against this node, as its admin; returns (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let output = Command::new(boxfleet_bin())
            .args(args)
            .env("BOXFLEET_ADDR", self.addr())
            .env("BOXFLEET_TOKEN_FILE", self.token_file())
            .output()
            .expect("run the boxfleet CLI");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The phase record (`body.record`) among the JSON lines `launch --wait --json` printed;
/// panics, with what was printed, when there is none.
pub fn waited_phase_record(out: &str) -> serde_json::Value {
    out.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|event| event["type"] == "agent_phase_completed")
        .map(|event| event["body"]["record"].clone())
        .unwrap_or_else(|| panic!("no phase record in:\n{out}"))
}

/// The turn id in `boxfleet launch`'s line `launched TURN job LAUNCH in box BOX on NODE`.
pub fn launched_turn(launch_stdout: &str) -> String {
    launched_turn_and_job(launch_stdout).0
}

/// The turn and job ids in `boxfleet launch`'s line `launched TURN job LAUNCH in box BOX on
/// NODE`.
pub fn launched_turn_and_job(launch_stdout: &str) -> (String, String) {
    let words: Vec<&str> = launch_stdout.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "launched")
        .unwrap_or_else(|| panic!("no launch line in {launch_stdout:?}"));
    (words[at + 1].to_owned(), words[at + 3].to_owned())
}

/// `boxfleet validate FILE` with `env` set: whether it passed, and what it said (stdout, then
/// stderr).
pub fn validate(config: &str, env: &[(&str, &str)]) -> (bool, String) {
    let out = std::process::Command::new(boxfleet_bin())
        .args(["validate", config])
        .envs(env.iter().copied())
        .output()
        .expect("run validate");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

impl NodeProcess {
    /// `boxfleet launch ARGS` on this node, which must succeed, then the job's phase record
    /// once published (within a minute), which must not be a failure.
    pub async fn launch_settled(&self, args: &[&str]) -> serde_json::Value {
        let mut launch = vec!["launch"];
        launch.extend(args);
        let (code, out, err) = self.cli(&launch);
        assert_eq!(code, 0, "{out}{err}");
        let phase = self
            .phase_record(&launched_turn(&out), Duration::from_secs(60))
            .await;
        assert_eq!(phase["failed"], false, "{phase:#}");
        phase
    }

    /// The run's record as the node reads it (`Runs.Get`), or `None` once it settled.
    pub async fn record(&self, turn_id: &str) -> Option<serde_json::Value> {
        let mut runs = crate::grpc::runs(&self.addr()).await.expect("connect");
        let got = crate::grpc::get_turn(&mut runs, turn_id).await;
        (!got.record_json.is_empty())
            .then(|| serde_json::from_str(&got.record_json).expect("record JSON"))
    }

    /// The run's phase record (`agent_phase_completed`'s `body.record`), once it is published;
    /// after `within` it panics with the node's log.
    pub async fn phase_record(&self, turn_id: &str, within: Duration) -> serde_json::Value {
        let mut runs = crate::grpc::runs(&self.addr()).await.expect("connect");
        let started = Instant::now();
        loop {
            // not yet written (a launch still on its way) reads as empty
            let got = crate::grpc::get_turn(&mut runs, turn_id).await;
            if let Some(phase) = got
                .phase_records_json
                .iter()
                .chain(&got.events_json)
                .filter_map(|json| serde_json::from_str::<serde_json::Value>(json).ok())
                .find(|e| e["type"] == "agent_phase_completed")
            {
                return phase["body"]["record"].clone();
            }
            assert!(
                started.elapsed() < within,
                "no phase record for {turn_id} after {within:?}; node log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// A `boxfleet node` started exactly as a user types it: in `cwd`, with `args` and nothing
/// else (no `--data-dir`, no `--listen` unless `args` names them). Its log goes to `log`, which
/// the caller keeps outside `cwd` so the project directory holds only what the node made.
#[derive(Debug)]
pub struct UserNode {
    pub cwd: PathBuf,
    pub port: u16,
    log: PathBuf,
    child: Option<Child>,
    /// the credential the CLI is pointed at (`BOXFLEET_TOKEN_FILE`); `None`: it finds its own
    token_file: Option<PathBuf>,
}

impl UserNode {
    /// Starts the node and waits until `port` (the one `args` make it listen on, 7400 when
    /// they name none) serves.
    pub fn start(cwd: &Path, args: &[&str], port: u16, log: &Path) -> UserNode {
        let stderr = std::fs::File::create(log).expect("create node log");
        // a node on a port of its own gets an HTTP port of its own too (the default, its port
        // + 80, may be another test's)
        let http = if args.contains(&"--listen") {
            http_listen(args)
        } else {
            Vec::new()
        };
        let child = Command::new(boxfleet_bin())
            .arg("node")
            .args(args)
            .args(http)
            .current_dir(cwd)
            .env("BOXFLEET_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn boxfleet node");
        let mut node = UserNode {
            cwd: cwd.to_owned(),
            port,
            log: log.to_owned(),
            child: Some(child),
            token_file: None,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        // the listener is bound before the banner is printed: wait for both
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
            || !node.log().contains("listening on")
        {
            if let Some(Ok(Some(status))) = node.child.as_mut().map(Child::try_wait) {
                panic!(
                    "boxfleet node exited with {status}; its log:\n{}",
                    node.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the node did not listen on {port}; log:\n{}",
                node.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        node
    }

    /// What the node wrote to stderr so far (its banner first).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Points the CLI at the credential in `file` (relative to the node's directory), as a
    /// user passes `--token-file`.
    pub fn with_token_file(mut self, file: &Path) -> UserNode {
        self.token_file = Some(file.to_owned());
        self
    }

    /// Runs the CLI against this node from the node's directory, as the same user would;
    /// returns (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let mut cli = Command::new(boxfleet_bin());
        cli.args(args)
            .current_dir(&self.cwd)
            .env("BOXFLEET_ADDR", format!("http://127.0.0.1:{}", self.port))
            .env_remove("BOXFLEET_TOKEN")
            .env_remove("BOXFLEET_TOKEN_FILE");
        if let Some(file) = &self.token_file {
            cli.env("BOXFLEET_TOKEN_FILE", file);
        }
        let output = cli.output().expect("run the boxfleet CLI");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

impl Drop for UserNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
