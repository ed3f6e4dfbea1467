//! Starting and stopping etcd processes: the binary, free ports, one [`Member`]'s process
//! (spawned so it dies with the test process), its log.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock, mpsc};

/// Lines of etcd's log quoted in a failure.
pub(crate) const LOG_TAIL_LINES: usize = 40;

/// One etcd member's process: its name, ports, directory (`data/` and `etcd.log`), and the
/// flags it is started with beyond its own name, directory and URLs.
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) client_port: u16,
    pub(crate) peer_port: u16,
    pub(crate) dir: PathBuf,
    /// `http` or `https` (the client URL's; peers always speak plain HTTP on loopback)
    pub(crate) scheme: &'static str,
    pub(crate) flags: Vec<String>,
    child: Mutex<Option<Child>>,
}

impl Member {
    pub(crate) fn new(
        name: String,
        dir: PathBuf,
        scheme: &'static str,
        (client_port, peer_port): (u16, u16),
    ) -> Member {
        Member {
            name,
            client_port,
            peer_port,
            dir,
            scheme,
            flags: Vec::new(),
            child: Mutex::new(None),
        }
    }

    /// `{scheme}://127.0.0.1:{client port}`.
    pub(crate) fn client_url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }

    /// `http://127.0.0.1:{peer port}`.
    pub(crate) fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir.join("etcd.log")
    }

    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path(), lines)
    }

    pub(crate) fn describe_log(&self) -> String {
        format!(
            "--- last lines of {} ---\n{}",
            self.log_path().display(),
            self.log_tail(LOG_TAIL_LINES)
        )
    }

    /// Starts the member's process (its data stays across kills).
    pub(crate) fn spawn(&self) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let client_url = self.client_url();
        let peer_url = self.peer_url();
        let mut command = Command::new(etcd_bin());
        command
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(&self.flags)
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        die_with_parent(&mut command);
        let child = spawn_from_spawner_thread(command)?;
        *self.child() = Some(child);
        Ok(())
    }

    /// SIGKILLs the process and reaps it; a no-op when it is not running.
    pub(crate) fn kill(&self) {
        if let Some(mut child) = self.child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process id, `None` while it is killed.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child().as_ref().map(Child::id)
    }

    /// How the process ended, if it did.
    pub(crate) fn exited(&self) -> Option<std::process::ExitStatus> {
        let mut child = self.child();
        match child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(status),
            _ => None,
        }
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to the running process.
    pub(crate) fn signal(&self, signal: &str) {
        let Some(pid) = self.pid() else {
            panic!("etcd member {} is not running", self.name);
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

    /// Whether every thread of the member's process is stopped (SIGSTOP taken): each task's
    /// state in `/proc/PID/task/*/stat` is `T`. Not running, or unreadable: `false`.
    pub(crate) fn stopped(&self) -> bool {
        let Some(pid) = self.pid() else {
            return false;
        };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return false;
        };
        let mut any = false;
        for task in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                return false;
            };
            // "PID (comm) STATE …": the state follows the last ')' (comm may hold one)
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            if !matches!(state, Some('T' | 't')) {
                return false;
            }
            any = true;
        }
        any
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether something accepts connections on a loopback port.
pub(crate) fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}

/// `$ETCD_BIN`, else `etcd` on `PATH`; panics with the remedy when neither exists.
pub(crate) fn etcd_bin() -> PathBuf {
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
pub(crate) fn base_dir() -> PathBuf {
    std::env::temp_dir().join("boxfleet-tests")
}

pub(crate) fn next_seq() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// Removes `etcd-{pid}-{n}` directories whose test process is gone (the shared etcd's
/// directory is never removed by its own process: statics are not dropped).
pub(crate) fn sweep_stale_dirs() {
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

/// Two distinct free loopback ports (client, peer), neither handed out before in this process
/// (see [`crate::node::free_port`]). They are free when this returns; the caller retries when
/// etcd finds one taken after all.
pub(crate) fn free_ports() -> (u16, u16) {
    (crate::node::free_port(), crate::node::free_port())
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
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
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
