//! Leases: granted and persisted with their TTL, their deadlines kept in memory, kept alive,
//! and ended — revoked, or expired by a background reaper — by deleting their keys at one
//! revision.

use std::collections::HashMap;
use std::sync::{MutexGuard, PoisonError, Weak};
use std::time::Duration;

use redb::ReadableTable;
use tokio::time::Instant;

use super::inner::{Inner, LeaseClock, LeaseEnd, ttl_duration};
use super::layout::{LEASES, META, META_NEXT_LEASE, Tables};
use crate::store::{Error, LeaseId};

/// How often the lease reaper looks for leases whose deadline passed.
pub(super) const EXPIRY_INTERVAL: Duration = Duration::from_millis(200);
/// How many expiry ticks apart the reaper tries a compaction a commit skipped (5 s).
const COMPACT_EVERY_TICKS: u64 = 25;
/// Every how many ticks (once a minute) the file's free space is counted.
const SLACK_EVERY_TICKS: u64 = 300;
/// A tick's trim that dropped this much (1 MiB) counts the file's free space at once.
const SLACK_AFTER_TRIMMED_BYTES: i64 = 1 << 20;

impl Inner {
    pub(super) fn lease_clocks(&self) -> MutexGuard<'_, HashMap<LeaseId, LeaseClock>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        let _commits = self.lock_commits();
        let write = self.begin_write()?;
        let id = {
            let mut meta = write
                .open_table(META)
                .map_err(|e| self.disk("open table meta", e))?;
            let mut leases = write
                .open_table(LEASES)
                .map_err(|e| self.disk("open table leases", e))?;
            let id = self.meta(&meta, META_NEXT_LEASE)?.unwrap_or(1);
            meta.insert(META_NEXT_LEASE, id + 1)
                .map_err(|e| self.disk("write the lease counter", e))?;
            leases
                .insert(id, ttl_seconds)
                .map_err(|e| self.disk("write a lease", e))?;
            id
        };
        write
            .commit()
            .map_err(|e| self.commit_failed("commit a lease", e))?;
        self.lease_clocks().insert(
            id,
            LeaseClock {
                ttl_seconds,
                deadline: Instant::now() + ttl_duration(ttl_seconds),
            },
        );
        Ok(id)
    }

    /// Ends a lease: deletes its keys at one revision, then the lease. Returns whether it
    /// ended it (an expiry that lost to a keep-alive does not).
    pub(super) fn lease_end(&self, id: LeaseId, end: LeaseEnd) -> Result<bool, Error> {
        let _commits = self.lock_commits();
        if end == LeaseEnd::Expiry {
            let due = self
                .lease_clocks()
                .get(&id)
                .is_some_and(|clock| clock.deadline <= Instant::now());
            if !due {
                return Ok(false);
            }
        }
        let write = self.begin_write()?;
        let (revision, events) = {
            let mut tables = Tables::open(self, &write)?;
            let existed = tables
                .leases
                .remove(id)
                .map_err(|e| self.disk("remove a lease", e))?
                .is_some();
            if !existed {
                drop(tables);
                write
                    .abort()
                    .map_err(|e| self.disk("abort a lease revoke", e))?;
                self.lease_clocks().remove(&id);
                return match end {
                    LeaseEnd::Revoke => Err(Error::LeaseNotFound(id)),
                    LeaseEnd::Expiry => Ok(false),
                };
            }
            let mut attached = Vec::new();
            for entry in tables
                .lease_keys
                .range::<(i64, &str)>((id, "")..)
                .map_err(|e| self.disk("read a lease's keys", e))?
            {
                let (entry, _) = entry.map_err(|e| self.disk("read a lease's keys", e))?;
                let (lease, key) = entry.value();
                if lease != id {
                    break;
                }
                attached.push(key.to_owned());
            }
            let revision = self.revision(&tables.meta)? + 1;
            let mut events = Vec::new();
            for key in &attached {
                tables.delete(self, key, revision, &mut events)?;
            }
            if !events.is_empty() {
                tables.record(self, revision, &events)?;
            }
            (revision, events)
        };
        write
            .commit()
            .map_err(|e| self.commit_failed("commit a lease revoke", e))?;
        self.lease_clocks().remove(&id);
        if !events.is_empty() {
            tracing::debug!(lease = id, keys = events.len(), ?end, "lease ended");
            self.announce(revision, events);
        }
        // an expiry is often the last write for a while: the history it dropped goes back now
        self.compact_if_trimmed();
        Ok(true)
    }

    /// The leases whose deadline passed.
    pub(super) fn due_leases(&self, now: Instant) -> Vec<LeaseId> {
        self.lease_clocks()
            .iter()
            .filter(|(_, clock)| clock.deadline <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    pub(super) fn lease_keep_alive(&self, id: LeaseId) -> Result<i64, Error> {
        let now = Instant::now();
        match self.lease_clocks().get_mut(&id) {
            // a passed deadline is final: the reaper is about to end the lease
            Some(clock) if clock.deadline > now => {
                clock.deadline = now + ttl_duration(clock.ttl_seconds);
                Ok(clock.ttl_seconds)
            }
            _ => Err(Error::LeaseNotFound(id)),
        }
    }

    pub(super) fn lease_time_to_live(&self, id: LeaseId) -> Option<i64> {
        let now = Instant::now();
        let clock = *self.lease_clocks().get(&id)?;
        let left = clock.deadline.checked_duration_since(now)?;
        if left.is_zero() {
            return None;
        }
        // rounded up, so a live lease never reports 0
        let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        Some(i64::try_from(seconds).unwrap_or(i64::MAX))
    }
}

/// Expires leases whose deadline passed, until the store is dropped.
pub(super) async fn reap_expired_leases(store: Weak<Inner>) {
    let mut tick = tokio::time::interval(EXPIRY_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tick.tick().await;
        ticks += 1;
        let Some(inner) = store.upgrade() else {
            return;
        };
        let due = inner.due_leases(Instant::now());
        if due.is_empty() {
            // every few seconds: the history past its age goes though no write came, and a
            // compaction a commit skipped is tried again
            if ticks.is_multiple_of(COMPACT_EVERY_TICKS) {
                let _ = tokio::task::spawn_blocking(move || {
                    let trimmed = inner.trim_aged_history().unwrap_or_else(|error| {
                        tracing::warn!(%error, "store_history_trim_failed");
                        0
                    });
                    if inner.may_compact() {
                        inner.compact_when_due();
                    } else if ticks.is_multiple_of(SLACK_EVERY_TICKS)
                        || trimmed >= SLACK_AFTER_TRIMMED_BYTES
                    {
                        // a burst its own commits trimmed as it was written counted nothing
                        // (each dropped about what it added), so its freed space is seen here:
                        // at once when this trim dropped its tail, not a minute later
                        inner.compact_if_slack();
                    }
                })
                .await;
            }
            continue;
        }
        let ended = tokio::task::spawn_blocking(move || {
            due.into_iter()
                .map(|id| (id, inner.lease_end(id, LeaseEnd::Expiry)))
                .collect::<Vec<_>>()
        })
        .await;
        match ended {
            Ok(results) => {
                for (lease, result) in results {
                    if let Err(error) = result {
                        // retried on the next tick
                        tracing::warn!(lease, %error, "could not expire lease");
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "lease reaper task failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::super::test_support::{must_next, open, wait_until};
    use crate::store::{Error, Op, Store, StoreExt, Txn, WatchEvent};

    #[tokio::test]
    async fn lease_expiry_deletes_attached_keys_in_one_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let lease = store.lease_grant(1).await.unwrap();
        assert!(lease > 0);
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), Some(1));
        store
            .txn(Txn::new().and_then([
                Op::put_on_lease("s/a", "a", lease),
                Op::put_on_lease("s/b", "b", lease),
                Op::put_on_lease("s/c", "c", lease),
                Op::put("s/free", "free"),
            ]))
            .await
            .unwrap();
        // a put without a lease detaches the key
        store.put("s/c", b"kept".to_vec()).await.unwrap();
        assert_eq!(store.get("s/a").await.unwrap().unwrap().lease, lease);
        assert_eq!(store.get("s/c").await.unwrap().unwrap().lease, 0);
        let mut watch = store.watch("s/", 0).await.unwrap();
        let before = store.revision().await.unwrap();

        wait_until("the lease expired", || async {
            store.get("s/a").await.unwrap().is_none()
        })
        .await;
        let first = must_next(&mut watch).await;
        let second = must_next(&mut watch).await;
        assert_eq!(
            [first, second],
            [
                WatchEvent::Delete {
                    key: "s/a".into(),
                    revision: before + 1
                },
                WatchEvent::Delete {
                    key: "s/b".into(),
                    revision: before + 1
                },
            ]
        );
        assert_eq!(store.revision().await.unwrap(), before + 1);
        let keys: Vec<_> = store
            .range("s/")
            .await
            .unwrap()
            .kvs
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        assert_eq!(keys, ["s/c", "s/free"]);
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), None);
        assert!(matches!(
            store.lease_keep_alive(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        assert!(matches!(
            store.lease_revoke(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        // a put on the gone lease is refused whole
        let refused = store
            .txn(Txn::new().and_then([Op::put("s/x", "x"), Op::put_on_lease("s/y", "y", lease)]))
            .await;
        match refused {
            Err(Error::Invalid(message)) => {
                assert_eq!(message, "a put names a lease that expired or was revoked");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(store.get("s/x").await.unwrap().is_none());
        assert_eq!(store.revision().await.unwrap(), before + 1);
    }

    #[tokio::test]
    async fn keep_alive_holds_a_lease_and_revoke_ends_it_in_one_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let lease = store.lease_grant(1).await.unwrap();
        let other = store.lease_grant(30).await.unwrap();
        assert_ne!(lease, other);
        store
            .txn(Txn::new().and_then([
                Op::put_on_lease("k1", "1", lease),
                Op::put_on_lease("k2", "2", lease),
            ]))
            .await
            .unwrap();
        // kept alive past several TTLs
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert_eq!(store.lease_keep_alive(lease).await.unwrap(), 1);
        }
        assert!(store.get("k1").await.unwrap().is_some());

        let before = store.revision().await.unwrap();
        let mut watch = store.watch("", 0).await.unwrap();
        store.lease_revoke(lease).await.unwrap();
        assert_eq!(store.revision().await.unwrap(), before + 1);
        for key in ["k1", "k2"] {
            assert_eq!(
                must_next(&mut watch).await,
                WatchEvent::Delete {
                    key: key.into(),
                    revision: before + 1
                }
            );
        }
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), None);
        // revoking a lease with no keys changes no revision
        store.lease_revoke(other).await.unwrap();
        assert_eq!(store.revision().await.unwrap(), before + 1);
    }
}
