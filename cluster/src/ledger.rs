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

/// The ledger's name for a launch of `turn_id` at `iteration` as job `launch_id`: a launch is
/// idempotent per (turn, iteration) while the ledger remembers it (DESIGN §6 I13). `/` never
/// occurs in an id, so the parts read back unambiguously.
pub fn launch_entry(turn_id: &str, iteration: u32, launch_id: &str) -> String {
    format!("launch/{turn_id}/{iteration}/{launch_id}")
}

/// The job an earlier launch of `turn_id` at `iteration` started, if the ledger remembers one.
pub async fn earlier_launch(
    store: &dyn Store,
    keys: &Keys,
    turn_id: &str,
    iteration: u32,
) -> Result<Option<String>, Error> {
    let prefix = keys.ledger(&format!("launch/{turn_id}/{iteration}/"));
    let range = store.range(&prefix).await?;
    Ok(range
        .kvs
        .first()
        .and_then(|kv| kv.key.strip_prefix(&prefix).map(str::to_owned)))
}

/// Whether `delivery_id` was worked.
pub async fn is_worked(store: &dyn Store, keys: &Keys, delivery_id: &str) -> Result<bool, Error> {
    Ok(store.get(&keys.ledger(delivery_id)).await?.is_some())
}
