//! The 29/30-day rule for a resumed half's operation ids (`ops/{unit}`).
//!
//! Operation ids derive from the instant a unit of work began, and the operation ledger keeps
//! rows thirty days. A resume more than [`REBASE_AFTER_DAYS`] after its work began mints its ids
//! at the attempt instead and records that instant under the unit, so a later attempt (on this
//! node, the seat's next owner, or after a restart) within the same 29 days derives the same
//! ids. Every attempt is judged against its own clock.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::retention::Retention;
use crate::store::{Compare, Op, Store, Txn};
use crate::{Error, Keys, keys::check_id};

/// A resume this long after its work began is rebased (a day short of the ledger's thirty).
pub const REBASE_AFTER_DAYS: i64 = 29;

/// The record under `ops/{unit}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rebase {
    pub unit: String,
    pub instant: DateTime<Utc>,
}

/// The instant an attempt mints its operation ids at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mint {
    /// the work's own start: within the window
    Began(DateTime<Utc>),
    /// a recorded rebase instant another attempt made, still within the window
    Inherited(DateTime<Utc>),
    /// this attempt's own instant, now recorded (`turn_rebased`)
    Rebased(DateTime<Utc>),
}

impl Mint {
    pub fn instant(self) -> DateTime<Utc> {
        match self {
            Mint::Began(at) | Mint::Inherited(at) | Mint::Rebased(at) => at,
        }
    }
}

fn within(instant: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now.signed_duration_since(instant) < Duration::days(REBASE_AFTER_DAYS)
}

/// Decides the instant an attempt at `now` mints its ids at for `unit`, whose work began at
/// `began`, recording a rebase when one is needed.
pub async fn mint(
    store: &dyn Store,
    keys: &Keys,
    retention: &Retention,
    unit: &str,
    began: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Mint, Error> {
    check_id("unit", unit)?;
    if within(began, now) {
        return Ok(Mint::Began(began));
    }
    let key = keys.ops(unit);
    for _ in 0..4 {
        let read = store.get(&key).await?;
        if let Some(kv) = &read {
            let rebase: Rebase =
                serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
                    key: key.clone(),
                    message: error.to_string(),
                })?;
            if within(rebase.instant, now) {
                return Ok(Mint::Inherited(rebase.instant));
            }
        }
        let lease = retention.lease(store, now).await?;
        let record = Rebase {
            unit: unit.to_owned(),
            instant: now,
        };
        let value = serde_json::to_vec(&record).unwrap_or_default();
        let txn = Txn::new()
            .when([Compare::unchanged(&key, read.as_ref())])
            .and_then([Op::put_on_lease(&key, value, lease)]);
        match store.txn(txn).await {
            Ok(response) if response.succeeded => return Ok(Mint::Rebased(now)),
            // another attempt recorded first: read and inherit it
            Ok(_) => continue,
            Err(error) if error.is_indeterminate() => continue,
            Err(Error::Invalid(message)) if message.contains("lease") => retention.forget(),
            Err(error) => return Err(error),
        }
    }
    Err(Error::Unavailable(format!(
        "ops/{unit} kept changing while a rebase was recorded"
    )))
}
