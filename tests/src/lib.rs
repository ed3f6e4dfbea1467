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
//!   - [`EtcdServer::start_secured`] starts one serving TLS, requiring a client certificate,
//!     with etcd's user auth on ([`Secured`]).
//! - [`EtcdCluster`]: a real etcd cluster of several members, each its own process, that a
//!   test kills, stops, restarts and asks for its leader.
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
pub mod counting;
pub mod crash_matrix;
pub mod e2b_standin;
pub mod engine;
pub mod etcd;
pub mod fleet;
pub mod git_server;
pub mod grpc;
pub mod launcher;
pub mod mcp_client;
pub mod mcp_server;
pub mod node;
pub mod npm;
pub mod otlp_collector;
pub mod probe;
pub mod proxy;
pub mod sim;
pub mod tls;

use std::time::Duration;

pub use boxfleet_cluster::store::etcd::EtcdStore;
pub use etcd::{ETCD_UP_WITHIN, EtcdCluster, EtcdServer, STORE_CALL_TIMEOUT, Secured};

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

#[cfg(test)]
mod tests {
    use super::*;
    use boxfleet_cluster::store::{Op, Store, Txn};
    use std::path::Path;
    use std::sync::atomic::Ordering;

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
