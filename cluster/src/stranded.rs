//! Stranded boxes: a local box (`direct`, `container`) lives on one host, and only a node on
//! that host can reach it. When a run moves to a node on another host — its seat handed over
//! after its node died — and that node must let the box go (the run ends, its pause expires, or
//! an answer re-seeds it in a box of its own), it cannot kill the box, and must never read the
//! box's absence from its own disk as the box being gone. So the write that makes the record
//! stop naming the box names it here instead, under the box's host (I8: the box is never named
//! by nothing), and a node on that host kills it and forgets it ([`list`], [`forget`]).
//!
//! `stranded/{host}/{sandbox_id}` carries no lease: a host that comes back weeks later still
//! finds what it owes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{Compare, CompareOp, Op, Revision, Store, Txn};
use crate::{Error, Keys};

/// A local box its run let go of on a host the letting node could not reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrandedBox {
    pub sandbox_id: String,
    /// the host the box lives on: a node there kills it
    pub host: String,
    /// the box's cell (`direct`, `container`)
    pub placement: String,
    /// where on the host the box lives (the launching node's boxes dir)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boxes_dir: Option<String>,
    /// the run that let it go, for the log
    pub turn_id: String,
    pub stranded_at: DateTime<Utc>,
}

/// The put that names `stranded` for its host, in the txn of the transition that lets it go.
pub fn strand_op(keys: &Keys, stranded: &StrandedBox) -> Op {
    let value = serde_json::to_vec(stranded).unwrap_or_default();
    Op::put(
        keys.stranded_box(&stranded.host, &stranded.sandbox_id),
        value,
    )
}

/// The boxes stranded on `host`, each with the revision [`forget`] compares against. An entry
/// that does not decode is skipped (and left for an operator: it names a box all the same).
pub async fn list(
    store: &dyn Store,
    keys: &Keys,
    host: &str,
) -> Result<Vec<(StrandedBox, Revision)>, Error> {
    let range = store.range(&keys.stranded_boxes(host)).await?;
    Ok(range
        .kvs
        .iter()
        .filter_map(|kv| {
            serde_json::from_slice(&kv.value)
                .ok()
                .map(|stranded| (stranded, kv.mod_revision))
        })
        .collect())
}

/// Forgets a stranded box once it is killed: deleted only as it was read (a box stranded
/// again meanwhile, under the same id, is kept).
pub async fn forget(
    store: &dyn Store,
    keys: &Keys,
    stranded: &StrandedBox,
    read_at: Revision,
) -> Result<bool, Error> {
    let key = keys.stranded_box(&stranded.host, &stranded.sandbox_id);
    let txn = Txn::new()
        .when([Compare::mod_revision(&key, CompareOp::Equal, read_at)])
        .and_then([Op::delete(&key)]);
    Ok(store.txn(txn).await?.succeeded)
}
