//! The waiter's poll duty (`duty/waiter`): one node at a time polls the fleet's remote boxes.
//! The duty rides a lease of its own, renewed on every tick; a peer takes it only once it
//! lapses, so two nodes never poll one box at once.

use crate::seat::Holder;
use crate::store::{Compare, LeaseId, Op, OpResult, Store, Txn};
use crate::{Error, Keys};

/// Who has the duty after a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Duty {
    /// This node has it, on `lease`, for `ttl_seconds` from now.
    Mine { lease: LeaseId, ttl_seconds: i64 },
    /// A peer has it.
    Peer(Holder),
}

/// Claims or renews the waiter duty for `holder`. `held` is the lease of the duty this node
/// held after its last claim, if any.
pub async fn claim_waiter(
    store: &dyn Store,
    keys: &Keys,
    holder: &Holder,
    held: Option<LeaseId>,
    ttl_seconds: i64,
) -> Result<Duty, Error> {
    let key = keys.waiter_duty();
    if let Some(lease) = held {
        match store.lease_keep_alive(lease).await {
            Ok(ttl_seconds) => {
                if let Some(kv) = store.get(&key).await?
                    && kv.lease == lease
                {
                    return Ok(Duty::Mine { lease, ttl_seconds });
                }
            }
            Err(Error::LeaseNotFound(_)) => {}
            Err(error) => return Err(error),
        }
    }
    let lease = store.lease_grant(ttl_seconds).await?;
    let value = serde_json::to_vec(holder).unwrap_or_default();
    let txn = Txn::new()
        .when([Compare::absent(&key)])
        .and_then([Op::put_on_lease(&key, value, lease)])
        .or_else([Op::get(&key)]);
    let response = store.txn(txn).await?;
    if response.succeeded {
        return Ok(Duty::Mine { lease, ttl_seconds });
    }
    // the lease granted for the claim is not needed; it would lapse by itself anyway
    let _ = store.lease_revoke(lease).await;
    match response.results.into_iter().next() {
        Some(OpResult::Get(Some(kv))) => {
            let peer: Holder =
                serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
                    key: key.clone(),
                    message: error.to_string(),
                })?;
            Ok(Duty::Peer(peer))
        }
        _ => Err(Error::Unavailable(
            "the waiter duty changed hands during the claim".into(),
        )),
    }
}
