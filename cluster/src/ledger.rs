//! The completion ledger: `ledger/{delivery_id}` marks a delivery as worked, so a redelivered
//! copy is dropped rather than run twice. Entries ride a [`Retention::ledger`] lease: each
//! lives 30 to 31 days.
//!
//! [`Retention::ledger`]: crate::retention::Retention::ledger

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{LeaseId, Op, Store};
use crate::{Error, Keys};

/// A worked marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub delivery_id: String,
    pub worked_at: DateTime<Utc>,
}

/// The put that records `delivery_id` as worked, on the ledger's retention `lease`.
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
