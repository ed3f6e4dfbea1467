//! Rolling retention leases: keys that must live a bounded time (ledger entries, events) ride
//! a shared lease granted once per `reuse` period with a TTL of `keep + reuse`, so each key
//! lives between `keep` and `keep + reuse` and the store holds a handful of leases, not one
//! per key. `reuse` is a day, or a seventh of `keep` when that is shorter (a short retention
//! is not stretched by a day's lease).

use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::Error;
use crate::store::{LeaseId, Store};

/// How long a completion-ledger entry is kept.
pub const LEDGER_KEEP_SECONDS: i64 = 30 * 24 * 3600;
/// How long an announced event is kept in the outbox.
pub const EVENTS_KEEP_SECONDS: i64 = 7 * 24 * 3600;
/// How long one retention lease takes new keys, at most.
const REUSE_SECONDS: i64 = 24 * 3600;

/// A lease shared by every key written in one `reuse` period.
#[derive(Debug)]
pub struct Retention {
    keep_seconds: i64,
    reuse_seconds: i64,
    current: Mutex<Option<(LeaseId, DateTime<Utc>)>>,
}

impl Retention {
    /// Keys are kept at least `keep_seconds`.
    pub fn new(keep_seconds: i64) -> Self {
        Self {
            keep_seconds,
            reuse_seconds: (keep_seconds / 7).clamp(1, REUSE_SECONDS),
            current: Mutex::new(None),
        }
    }

    /// The completion ledger's retention (30 days).
    pub fn ledger() -> Self {
        Self::new(LEDGER_KEEP_SECONDS)
    }

    /// The events outbox's default retention (7 days).
    pub fn events() -> Self {
        Self::new(EVENTS_KEEP_SECONDS)
    }

    /// The lease keys written at `now` ride, granted anew once the current one is `reuse` old.
    pub async fn lease(&self, store: &dyn Store, now: DateTime<Utc>) -> Result<LeaseId, Error> {
        if let Some((lease, granted)) = *self.lock()
            && now.signed_duration_since(granted).num_seconds() < self.reuse_seconds
        {
            return Ok(lease);
        }
        let lease = store
            .lease_grant(self.keep_seconds + self.reuse_seconds)
            .await?;
        *self.lock() = Some((lease, now));
        Ok(lease)
    }

    /// Drops the cached lease (a txn found it gone: revoked, or expired while a node slept).
    pub fn forget(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(LeaseId, DateTime<Utc>)>> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
