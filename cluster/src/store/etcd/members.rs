//! The etcd members a store talks to, and the one loop every call goes through.
//!
//! etcd-client's own balancing (one channel over every endpoint) keeps sending calls to a
//! member that is dead: its channel spreads requests over endpoints without taking a refused
//! connection as a reason to go elsewhere, so with one member of three down a third of the
//! calls fail — the fleet was down while etcd was up. This layer keeps one client per member,
//! connected on first use, and sends each call to the member that answered last:
//!
//! - a member that refuses a connection, or has no leader to serve the call, has taken
//!   nothing: the call goes to the next member;
//! - a read whose answer is lost (connection reset, attempt bound) goes to the next member;
//! - a write whose answer is lost is indeterminate at once — it may have landed, and only a
//!   re-read can say (the caller's, which comes back through this loop to a live member);
//! - one round over every member that takes nothing is followed by a pause (50 ms doubling to
//!   500 ms), and the whole call is bounded by the call timeout (I11); each attempt by a third
//!   of it, so a member that hangs (frozen, cut off mid-stream) costs one attempt, not the call.
//!
//! The store's [`StoreHealth`] is marked unreachable when a call used its whole bound without
//! any member taking it, and reachable on the next call that succeeds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::classify::{Effect, Failure, classify, lost};
use crate::store::Error;
use crate::store::health::StoreHealth;

/// The first pause after a round in which no member took the call.
const FIRST_ROUND_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between rounds.
const MAX_ROUND_PAUSE: Duration = Duration::from_millis(500);
/// The shortest bound on one attempt.
const MIN_ATTEMPT: Duration = Duration::from_millis(500);

/// One member: its endpoint and its client, connected on first use (a client with a user
/// authenticates as it connects, which needs the member up).
struct Member {
    endpoint: String,
    client: OnceCell<etcd::Client>,
}

/// Every member of the cluster, the one calls go to first, and the bounds.
pub(super) struct Members {
    members: Vec<Member>,
    /// the index of the member that answered last
    preferred: AtomicUsize,
    options: etcd::ConnectOptions,
    call_timeout: Duration,
    attempt_timeout: Duration,
    health: StoreHealth,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members")
            .field("endpoints", &self.endpoints())
            .field("preferred", &self.preferred.load(Ordering::Relaxed))
            .field("call_timeout", &self.call_timeout)
            .finish()
    }
}

/// The bound on one attempt of a call bounded by `call_timeout`.
pub(super) fn attempt_timeout(call_timeout: Duration) -> Duration {
    (call_timeout / 3).max(MIN_ATTEMPT).min(call_timeout)
}

impl Members {
    pub(super) fn new(
        endpoints: &[String],
        options: etcd::ConnectOptions,
        call_timeout: Duration,
        health: StoreHealth,
    ) -> Self {
        Self {
            members: endpoints
                .iter()
                .map(|endpoint| Member {
                    endpoint: endpoint.clone(),
                    client: OnceCell::new(),
                })
                .collect(),
            preferred: AtomicUsize::new(0),
            options,
            call_timeout,
            attempt_timeout: attempt_timeout(call_timeout),
            health,
        }
    }

    pub(super) fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.endpoint.clone()).collect()
    }

    pub(super) fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Makes `op` on a member's client, member after member, as the module doc says.
    pub(super) async fn call<T, F, Fut>(&self, effect: Effect, op: F) -> Result<T, Error>
    where
        F: FnMut(etcd::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd::Error>>,
    {
        self.call_at(effect, op).await.map(|(value, _)| value)
    }

    /// [`Members::call`], also saying which member answered (a watch reports its end there).
    pub(super) async fn call_at<T, F, Fut>(
        &self,
        effect: Effect,
        mut op: F,
    ) -> Result<(T, usize), Error>
    where
        F: FnMut(etcd::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd::Error>>,
    {
        let count = self.members.len().max(1);
        let deadline = Instant::now() + self.call_timeout;
        let first = self.preferred.load(Ordering::Relaxed) % count;
        let mut pause = FIRST_ROUND_PAUSE;
        let mut last = String::from("no member was tried");
        for attempt in 0.. {
            let index = (first + attempt) % count;
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let bound = self.attempt_timeout.min(deadline - now);
            let endpoint = &self.members[index].endpoint;
            let outcome = tokio::time::timeout(bound, async {
                let client = self.client(index).await?;
                op(client).await
            })
            .await;
            let failure = match outcome {
                Ok(Ok(value)) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    self.health.mark_reachable();
                    return Ok((value, index));
                }
                Ok(Err(error)) => classify(error),
                Err(_) => Failure::Lost(format!("no answer within {bound:?}")),
            };
            match failure {
                Failure::Final(error) => {
                    // the store answered: it is reachable, whatever it said
                    self.health.mark_reachable();
                    return Err(error);
                }
                Failure::Lost(message) if effect == Effect::Write => {
                    self.passed_over(index);
                    return Err(lost(effect, format!("etcd member {endpoint}: {message}")));
                }
                Failure::Lost(message) | Failure::NotSent(message) => {
                    tracing::debug!(endpoint, %message, "etcd_member_passed_over");
                    self.passed_over(index);
                    last = format!("{endpoint}: {message}");
                }
            }
            if (attempt + 1) % count == 0 {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                tokio::time::sleep(pause.min(deadline - now)).await;
                pause = (pause * 2).min(MAX_ROUND_PAUSE);
            }
        }
        let message = format!(
            "no etcd member took the call within {:?} ({} tried; last: {last})",
            self.call_timeout, count
        );
        self.health.mark_unreachable(&message);
        Err(Error::Unavailable(message))
    }

    /// Makes `op` once on a client of its own to the member calls go to first, dropped after:
    /// a probe etcd refuses by closing its connection (a request past its size limit) leaves
    /// the members' own connections as they were.
    pub(super) async fn call_apart<T, F, Fut>(&self, op: F) -> Result<T, Error>
    where
        F: FnOnce(etcd::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd::Error>>,
    {
        let count = self.members.len().max(1);
        let endpoint = &self.members[self.preferred.load(Ordering::Relaxed) % count].endpoint;
        let outcome = tokio::time::timeout(self.call_timeout, async {
            let client = etcd::Client::connect([endpoint], Some(self.options.clone())).await?;
            op(client).await
        })
        .await;
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => match classify(error) {
                Failure::Final(error) => Err(error),
                Failure::Lost(message) | Failure::NotSent(message) => Err(Error::Unavailable(
                    format!("etcd member {endpoint}: {message}"),
                )),
            },
            Err(_) => Err(Error::Unavailable(format!(
                "etcd member {endpoint}: no answer within {:?}",
                self.call_timeout
            ))),
        }
    }

    /// A member failed a call (or a watch on it ended): calls go to the next one first.
    pub(super) fn passed_over(&self, index: usize) {
        crate::metrics::metrics().store_retries.inc();
        let count = self.members.len().max(1);
        let _ = self.preferred.compare_exchange(
            index,
            (index + 1) % count,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The member's client, connecting it on first use.
    async fn client(&self, index: usize) -> Result<etcd::Client, etcd::Error> {
        let member = &self.members[index];
        member
            .client
            .get_or_try_init(|| {
                etcd::Client::connect([&member.endpoint], Some(self.options.clone()))
            })
            .await
            .cloned()
    }
}

/// Shared by the store and its watches.
pub(super) type SharedMembers = Arc<Members>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_is_a_third_of_the_call_but_never_under_half_a_second_nor_over_the_call() {
        assert_eq!(
            attempt_timeout(Duration::from_secs(9)),
            Duration::from_secs(3)
        );
        assert_eq!(
            attempt_timeout(Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        assert_eq!(
            attempt_timeout(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
    }

    #[tokio::test]
    async fn with_no_member_listening_a_read_is_unavailable_within_its_bound_and_the_store_is_down()
    {
        // two loopback ports nobody listens on: every attempt is refused at once
        let dead: Vec<String> = (0..2)
            .map(|_| {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                format!("http://{}", listener.local_addr().expect("addr"))
            })
            .collect();
        let health = StoreHealth::new();
        let members = Members::new(
            &dead,
            etcd::ConnectOptions::new(),
            Duration::from_millis(800),
            health.clone(),
        );
        let started = std::time::Instant::now();
        let result = members
            .call(Effect::Read, |client| async move {
                client.kv_client().get("k", None).await
            })
            .await;
        let error = result.expect_err("nobody listens");
        assert!(error.is_retryable(), "{error}");
        assert!(error.to_string().contains("2 tried"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(3), "bounded");
        assert!(health.is_down());
    }

    #[tokio::test]
    async fn a_write_to_a_member_that_refuses_the_connection_goes_to_the_next() {
        let dead = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("http://{}", listener.local_addr().expect("addr"))
        };
        let members = Members::new(
            &[dead.clone(), dead],
            etcd::ConnectOptions::new(),
            Duration::from_millis(600),
            StoreHealth::new(),
        );
        let tried = std::sync::Mutex::new(Vec::new());
        let error = members
            .call(Effect::Write, |client| {
                tried.lock().expect("lock").push(());
                async move { client.kv_client().put("k", "v", None).await }
            })
            .await
            .expect_err("nobody listens");
        // never sent: retried (not indeterminate), over both members
        assert!(error.is_retryable(), "{error}");
        assert!(tried.lock().expect("lock").len() >= 2);
    }
}
