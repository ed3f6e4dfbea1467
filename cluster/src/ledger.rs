//! The completion ledger: `ledger/{delivery_id}` marks a delivery as worked, so a redelivered
//! copy is dropped rather than run twice. Entries live on a shared 30-day lease: a lease is
//! granted once a day and every entry of that day rides it, so an entry lives 30 to 31 days.

use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{LeaseId, Op, Store};
use crate::{Error, Keys};

/// How long a ledger entry is kept.
pub const LEDGER_TTL_SECONDS: i64 = 30 * 24 * 3600;
/// How long one ledger lease takes new entries.
const LEASE_REUSE_SECONDS: i64 = 24 * 3600;

/// A worked marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub delivery_id: String,
    pub worked_at: DateTime<Utc>,
}

/// The ledger's shared lease, granted lazily and renewed daily.
#[derive(Debug, Default)]
pub struct Ledger {
    lease: Mutex<Option<(LeaseId, DateTime<Utc>)>>,
}

impl Ledger {
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease today's entries ride.
    pub async fn lease(&self, store: &dyn Store, now: DateTime<Utc>) -> Result<LeaseId, Error> {
        if let Some((lease, granted)) = *self.lock()
            && now.signed_duration_since(granted).num_seconds() < LEASE_REUSE_SECONDS
        {
            return Ok(lease);
        }
        let lease = store
            .lease_grant(LEDGER_TTL_SECONDS + LEASE_REUSE_SECONDS)
            .await?;
        *self.lock() = Some((lease, now));
        Ok(lease)
    }

    /// Drops the cached lease (a txn found it gone).
    pub fn forget_lease(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(LeaseId, DateTime<Utc>)>> {
        self.lease
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The put that records `delivery_id` as worked.
pub fn spend_op(keys: &Keys, delivery_id: &str, lease: LeaseId, now: DateTime<Utc>) -> Op {
    let entry = Entry {
        delivery_id: delivery_id.to_owned(),
        worked_at: now,
    };
    let value = serde_json::to_vec(&entry).unwrap_or_default();
    Op::put_on_lease(keys.ledger(delivery_id), value, lease)
}

/// Whether `delivery_id` was worked.
pub async fn is_worked(store: &dyn Store, keys: &Keys, delivery_id: &str) -> Result<bool, Error> {
    Ok(store.get(&keys.ledger(delivery_id)).await?.is_some())
}
