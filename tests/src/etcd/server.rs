//! [`EtcdServer`]: one real etcd on loopback — the shared one, a dedicated one a test may
//! kill, pause and restart, or a secured one (TLS, client certificates, etcd's user auth).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use boxfleet_cluster::store::etcd::{EtcdOptions, EtcdStore, EtcdTls};

use super::bounds::{ETCD_UP_WITHIN, STORE_CALL_TIMEOUT, block_on_own_runtime};
use super::process::{LOG_TAIL_LINES, Member, base_dir, free_ports, next_seq, sweep_stale_dirs};

/// How many times a start is retried when the ports picked were taken before etcd bound them.
const START_ATTEMPTS: usize = 5;

/// A real etcd process on loopback, with its own data directory.
///
/// The shared one ([`EtcdServer::shared`]) lives until the test process exits; a dedicated one
/// ([`EtcdServer::start`]) until it is dropped.
pub struct EtcdServer {
    member: Member,
    dedicated: bool,
    /// how a client reaches it (TLS and user for a secured one)
    access: EtcdOptions,
}

impl std::fmt::Debug for EtcdServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdServer")
            .field("name", &self.member.name)
            .field("endpoints", &self.endpoints())
            .field("dir", &self.member.dir)
            .field("dedicated", &self.dedicated)
            .finish()
    }
}

/// What a secured etcd is started with: the certificate it serves (and checks clients
/// against, by its CA) and the user boxfleet logs in as.
#[derive(Debug, Clone)]
pub struct Secured {
    pub tls: crate::tls::TlsFiles,
    pub user: String,
    pub password: String,
}

impl EtcdServer {
    /// The etcd every test of this process shares, started on first use.
    ///
    /// Panics when no etcd binary is found or it does not come up within
    /// [`ETCD_UP_WITHIN`].
    pub fn shared() -> &'static EtcdServer {
        static SHARED: OnceLock<EtcdServer> = OnceLock::new();
        SHARED.get_or_init(|| Self::launch(false, None, &[]))
    }

    /// Starts a dedicated etcd, for a test that kills, pauses or restarts it. Dropping it kills
    /// it and removes its directory (kept, and named on stderr, when the test is panicking).
    pub fn start() -> EtcdServer {
        Self::launch(true, None, &[])
    }

    /// [`EtcdServer::start`] with etcd `flags` beside the harness's own (`--max-request-bytes
    /// 10485760`, …).
    pub fn start_with_flags(flags: &[&str]) -> EtcdServer {
        Self::launch(true, None, flags)
    }

    /// Starts a dedicated etcd that serves `https://` with `secured.tls`'s certificate,
    /// requires a client certificate its CA signed (`--client-cert-auth`), and has etcd's
    /// auth enabled with a `root` user and `secured.user`, who may read and write every key.
    pub fn start_secured(secured: &Secured) -> EtcdServer {
        Self::launch(true, Some(secured), &[])
    }

    /// The client URLs, as [`EtcdStore::connect`] takes them.
    pub fn endpoints(&self) -> Vec<String> {
        vec![self.client_url()]
    }

    /// `http(s)://127.0.0.1:{client port}`.
    pub fn client_url(&self) -> String {
        self.member.client_url()
    }

    /// The directory holding etcd's `data/` and `etcd.log`.
    pub fn dir(&self) -> &Path {
        &self.member.dir
    }

    /// Where etcd's stdout and stderr go.
    pub fn log_path(&self) -> PathBuf {
        self.member.log_path()
    }

    /// The last `lines` lines of etcd's log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.member.log_tail(lines)
    }

    /// The etcd process id, `None` while it is killed.
    pub fn pid(&self) -> Option<u32> {
        self.member.pid()
    }

    /// A store connected to this etcd, with a call timeout of [`STORE_CALL_TIMEOUT`].
    pub async fn store(&self) -> EtcdStore {
        self.store_with_timeout(STORE_CALL_TIMEOUT).await
    }

    /// A store connected to this etcd whose calls are bounded by `call_timeout`.
    pub async fn store_with_timeout(&self, call_timeout: Duration) -> EtcdStore {
        let options = EtcdOptions {
            call_timeout,
            ..self.access.clone()
        };
        match EtcdStore::connect_with(options).await {
            Ok(store) => store,
            Err(error) => panic!(
                "could not connect to the test etcd at {}: {error}\n{}",
                self.client_url(),
                self.member.describe_log()
            ),
        }
    }

    /// Kills a dedicated etcd with SIGKILL and reaps it; its data stays for [`restart`].
    ///
    /// [`restart`]: EtcdServer::restart
    pub fn kill(&self) {
        self.assert_dedicated("kill");
        self.member.kill();
    }

    /// Starts a killed dedicated etcd again, on the same ports and data, and waits until it
    /// answers. Kills it first if it is still running.
    pub async fn restart(&self) {
        self.assert_dedicated("restart");
        self.member.kill();
        if let Err(error) = self.member.spawn() {
            panic!("could not restart etcd: {error}");
        }
        if let Err(error) = self.wait_ready().await {
            panic!(
                "restarted etcd did not come up: {error}\n{}",
                self.member.describe_log()
            );
        }
    }

    /// Freezes a dedicated etcd (SIGSTOP): connections stay open but nothing is answered, as
    /// when a partition cuts a node off from the store.
    pub fn pause(&self) {
        self.assert_dedicated("pause");
        self.member.signal("-STOP");
        // a thread running on a busy machine stops only when next scheduled: until every one
        // of them is stopped, a call could still be answered (CI saw a get answered after the
        // signal)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.member.stopped() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Thaws a paused dedicated etcd (SIGCONT).
    pub fn resume(&self) {
        self.assert_dedicated("resume");
        self.member.signal("-CONT");
    }

    fn launch(dedicated: bool, secured: Option<&Secured>, flags: &[&str]) -> EtcdServer {
        sweep_stale_dirs();
        let mut last_error = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let seq = next_seq();
            let dir = base_dir().join(format!("etcd-{}-{seq}", std::process::id()));
            let scheme = if secured.is_some() { "https" } else { "http" };
            let mut member = Member::new(format!("boxfleet-test-{seq}"), dir, scheme, free_ports());
            member.flags = lone_member_flags(&member);
            member
                .flags
                .extend(flags.iter().map(|flag| flag.to_string()));
            if let Some(secured) = secured {
                member.flags.extend(tls_flags(&secured.tls));
            }
            let server = EtcdServer {
                access: EtcdOptions {
                    tls: secured.map(|s| client_tls(&s.tls)),
                    ..EtcdOptions::plain(&[member.client_url()], STORE_CALL_TIMEOUT)
                },
                member,
                dedicated,
            };
            if let Err(error) = server.member.spawn() {
                panic!(
                    "could not start etcd: {error} (install etcd with `apt-get install \
                     etcd-server`, or set ETCD_BIN to an etcd v3 binary)"
                );
            }
            match block_on_own_runtime(server.wait_ready()) {
                Ok(()) => {
                    let Some(secured) = secured else {
                        return server;
                    };
                    return block_on_own_runtime(server.enable_auth(secured))
                        .unwrap_or_else(|error| panic!("could not enable etcd's auth: {error}"));
                }
                Err(error) => {
                    let log = server.log_tail(LOG_TAIL_LINES);
                    let port_taken = log.contains("address already in use");
                    last_error = format!("{error}\n{}", server.member.describe_log());
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

    /// Adds `root` and `secured.user` (granted every key), turns etcd's auth on, and from
    /// then on connects as that user.
    async fn enable_auth(mut self, secured: &Secured) -> Result<EtcdServer, String> {
        let options = etcd_client::ConnectOptions::new().with_tls(
            etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(
                    fs::read(&secured.tls.ca).map_err(|e| e.to_string())?,
                ))
                .identity(etcd_client::Identity::from_pem(
                    fs::read(&secured.tls.cert).map_err(|e| e.to_string())?,
                    fs::read(&secured.tls.key).map_err(|e| e.to_string())?,
                )),
        );
        let mut client = etcd_client::Client::connect([self.client_url()], Some(options))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let step = |what: &'static str| move |e: etcd_client::Error| format!("{what}: {e}");
        client
            .user_add("root", "root-password", None)
            .await
            .map_err(step("user add root"))?;
        client
            .user_grant_role("root", "root")
            .await
            .map_err(step("grant root"))?;
        client
            .role_add("boxfleet")
            .await
            .map_err(step("role add"))?;
        let everything = etcd_client::Permission::read_write("").with_all_keys();
        client
            .role_grant_permission("boxfleet", everything)
            .await
            .map_err(step("grant every key"))?;
        client
            .user_add(secured.user.clone(), secured.password.clone(), None)
            .await
            .map_err(step("user add"))?;
        client
            .user_grant_role(secured.user.clone(), "boxfleet")
            .await
            .map_err(step("grant role"))?;
        client.auth_enable().await.map_err(step("auth enable"))?;
        self.access.user = Some((secured.user.clone(), secured.password.clone()));
        Ok(self)
    }

    /// Waits until etcd answers a get, or it exits, or [`ETCD_UP_WITHIN`] passes.
    async fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + ETCD_UP_WITHIN;
        loop {
            if let Some(status) = self.member.exited() {
                return Err(format!("etcd exited with {status}"));
            }
            let options = EtcdOptions {
                call_timeout: Duration::from_secs(2),
                ..self.access.clone()
            };
            let last_error = match EtcdStore::connect_with(options).await {
                Ok(_) => return Ok(()),
                Err(error) => error.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(format!(
                    "no answer within {ETCD_UP_WITHIN:?} (last: {last_error})"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn assert_dedicated(&self, what: &str) {
        assert!(
            self.dedicated,
            "{what} on the shared etcd would break every other test; use EtcdServer::start()"
        );
    }

    fn stop_and_remove(&self, keep: bool) {
        self.member.kill();
        if keep {
            eprintln!(
                "boxfleet-tests: kept etcd's directory {} (log: {})",
                self.member.dir.display(),
                self.log_path().display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.member.dir);
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop_and_remove(std::thread::panicking());
    }
}

/// A one-member cluster: it elects itself fast, and etcd's minimum lease TTL (1.5 election
/// timeouts, rounded up) stays at 1 s.
fn lone_member_flags(member: &Member) -> Vec<String> {
    vec![
        "--initial-cluster".into(),
        format!("{}={}", member.name, member.peer_url()),
        "--initial-cluster-state".into(),
        "new".into(),
        "--initial-cluster-token".into(),
        format!("{}-{}", member.name, std::process::id()),
        "--heartbeat-interval".into(),
        "50".into(),
        "--election-timeout".into(),
        "500".into(),
    ]
}

/// etcd serving TLS on its client URL and requiring a client certificate signed by the CA.
fn tls_flags(tls: &crate::tls::TlsFiles) -> Vec<String> {
    vec![
        "--cert-file".into(),
        tls.cert.display().to_string(),
        "--key-file".into(),
        tls.key.display().to_string(),
        "--trusted-ca-file".into(),
        tls.ca.display().to_string(),
        "--client-cert-auth".into(),
    ]
}

/// The client side of [`tls_flags`]: the CA, and the same certificate as the client's.
fn client_tls(tls: &crate::tls::TlsFiles) -> EtcdTls {
    let read = |path: &Path| {
        fs::read(path).unwrap_or_else(|error| panic!("read {}: {error}", path.display()))
    };
    EtcdTls {
        ca: read(&tls.ca),
        identity: Some((read(&tls.cert), read(&tls.key))),
    }
}
