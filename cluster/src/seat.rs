//! Seat leases and node sessions (DESIGN §5).
//!
//! A node holds one session lease, kept alive at ttl/3. It acquires a seat by creating
//! `seats/{seat}/holder` on that lease; the seat's **epoch** is that key's create_revision, and
//! every write on the seat's behalf compares it ([`fence_compare`]). When the session lease
//! lapses the holder keys go with it, so a node cut off from the store loses its seats without
//! doing anything, and its writes stop landing at once.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{Compare, CompareOp, KeyValue, LeaseId, Op, OpResult, Store, Txn};
use crate::transition::Fence;
use crate::{Error, Keys, keys::check_id};

/// Who holds a seat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub node: String,
    /// distinguishes a node's restarts: a new process is a new incarnation
    pub incarnation: String,
}

/// A node's registration under `nodes/{node}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node: String,
    pub addr: String,
    pub incarnation: String,
    pub started_at: DateTime<Utc>,
    pub build: String,
    /// the host the node runs on: nodes on one host share its local boxes
    #[serde(default)]
    pub host: String,
    /// a draining node is placed no seats and is releasing the ones it holds
    #[serde(default)]
    pub draining: bool,
    /// the node listens beyond loopback without TLS (`--insecure-listen`): its calls and
    /// credentials cross the network in the clear
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// the node serves TLS (`https://` reaches it)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
}

/// The outcome of an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// This holder has the seat under `fence`.
    Held(Fence),
    /// Another holder has it.
    HeldBy { holder: Holder, epoch: i64 },
}

/// The compare every fenced write carries: the writer's holder key is still the one it created.
pub fn fence_compare(keys: &Keys, fence: &Fence) -> Compare {
    Compare::create_revision(keys.seat_holder(&fence.seat), CompareOp::Equal, fence.epoch)
}

/// Registers a node on its session lease.
pub async fn register_node(
    store: &dyn Store,
    keys: &Keys,
    info: &NodeInfo,
    session: LeaseId,
) -> Result<(), Error> {
    check_id("node", &info.node)?;
    let value = serde_json::to_vec(info).unwrap_or_default();
    store
        .txn(Txn::new().and_then([Op::put_on_lease(keys.node(&info.node), value, session)]))
        .await?;
    Ok(())
}

/// The nodes whose sessions are alive.
pub async fn nodes(store: &dyn Store, keys: &Keys) -> Result<Vec<NodeInfo>, Error> {
    let range = store.range(&keys.nodes()).await?;
    range
        .kvs
        .iter()
        .map(|kv| {
            serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
                key: kv.key.clone(),
                message: error.to_string(),
            })
        })
        .collect()
}

/// How many times an acquire whose outcome was unknown, and re-read as not landed, is sent again.
const ACQUIRE_RETRIES: u32 = 2;

/// Acquires `seat` for `holder` on its session lease. Idempotent for the same holder: a
/// second acquire (say after a lost reply) returns the epoch it already has.
pub async fn acquire(
    store: &dyn Store,
    keys: &Keys,
    seat: &str,
    holder: &Holder,
    session: LeaseId,
) -> Result<Acquire, Error> {
    check_id("seat", seat)?;
    let key = keys.seat_holder(seat);
    let value = serde_json::to_vec(holder).unwrap_or_default();
    let txn = Txn::new()
        .when([Compare::absent(key.clone())])
        .and_then([Op::put_on_lease(key.clone(), value, session)])
        .or_else([Op::get(key.clone())]);
    let mut tries = 0;
    let response = loop {
        match store.txn(txn.clone()).await {
            Ok(response) => break response,
            Err(error) if error.is_indeterminate() => {
                // resolve by re-reading: the key is ours if the write landed. A linearizable
                // read that finds it absent (a leader answered it) means the write did not
                // land, and the create-if-absent is safe to send again: one that landed after
                // all fails its compare and reads back as ours.
                match store.get(&key).await? {
                    Some(kv) => return held_or_not(seat, &key, holder, session, kv),
                    None if tries < ACQUIRE_RETRIES => tries += 1,
                    None => return Err(error),
                }
            }
            Err(error) => return Err(error),
        }
    };
    if response.succeeded {
        return Ok(Acquire::Held(Fence {
            seat: seat.to_owned(),
            epoch: response.revision,
        }));
    }
    let Some(OpResult::Get(Some(kv))) = response.results.into_iter().next() else {
        // released between the compare and the read: the caller simply tries again
        return Err(Error::Unavailable(format!(
            "seat {seat} changed hands during acquire"
        )));
    };
    held_or_not(seat, &key, holder, session, kv)
}

/// Reads a holder key: ours (same holder on the same session lease) or somebody else's.
fn held_or_not(
    seat: &str,
    key: &str,
    holder: &Holder,
    session: LeaseId,
    kv: crate::store::KeyValue,
) -> Result<Acquire, Error> {
    let current: Holder = serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
        key: key.to_owned(),
        message: error.to_string(),
    })?;
    if current == *holder && kv.lease == session {
        return Ok(Acquire::Held(Fence {
            seat: seat.to_owned(),
            epoch: kv.create_revision,
        }));
    }
    Ok(Acquire::HeldBy {
        holder: current,
        epoch: kv.create_revision,
    })
}

/// One held seat, as `seats/{seat}/holder` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub seat: String,
    pub holder: Holder,
    pub epoch: i64,
    pub lease: LeaseId,
}

/// Every held seat, by seat.
pub async fn holders(
    store: &dyn Store,
    keys: &Keys,
) -> Result<std::collections::BTreeMap<String, Held>, Error> {
    let range = store.range(&keys.seats()).await?;
    holders_in(keys, &range.kvs)
}

/// The held seats among `kvs`, a listing of the seats' prefix, by seat.
pub fn holders_in(
    keys: &Keys,
    kvs: &[KeyValue],
) -> Result<std::collections::BTreeMap<String, Held>, Error> {
    let mut held = std::collections::BTreeMap::new();
    for kv in kvs {
        if let Some(one) = held_at(keys, kv)? {
            held.insert(one.seat.clone(), one);
        }
    }
    Ok(held)
}

/// The holder `kv` records, when it is a seat's holder key.
pub fn held_at(keys: &Keys, kv: &KeyValue) -> Result<Option<Held>, Error> {
    let Some(seat) = seat_of(keys, &kv.key, SeatKey::Holder) else {
        return Ok(None);
    };
    let holder: Holder = serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
        key: kv.key.clone(),
        message: error.to_string(),
    })?;
    Ok(Some(Held {
        seat: seat.to_owned(),
        holder,
        epoch: kv.create_revision,
        lease: kv.lease,
    }))
}

/// Which of a seat's keys [`seat_of`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatKey {
    /// `seats/{seat}/holder`
    Holder,
    /// `seats/{seat}/inbox/{seq}`: a message waiting in its inbox
    Mail,
    /// `seats/{seat}/retiring`: the seat left the company's agent seats, since the time it holds
    Retiring,
}

/// The seat `key` belongs to, when it is that seat's key of the kind asked.
pub fn seat_of<'k>(keys: &Keys, key: &'k str, kind: SeatKey) -> Option<&'k str> {
    let rest = key.strip_prefix(&keys.seats())?;
    let (seat, tail) = rest.split_once('/')?;
    let matches = match kind {
        SeatKey::Holder => tail == "holder",
        SeatKey::Mail => tail.starts_with("inbox/"),
        SeatKey::Retiring => tail == "retiring",
    };
    (matches && !seat.is_empty()).then_some(seat)
}

/// Releases the seat if `fence` still holds it; `false` when it did not.
pub async fn release(store: &dyn Store, keys: &Keys, fence: &Fence) -> Result<bool, Error> {
    let response = store
        .txn(
            Txn::new()
                .when([fence_compare(keys, fence)])
                .and_then([Op::delete(keys.seat_holder(&fence.seat))]),
        )
        .await?;
    Ok(response.succeeded)
}

/// Whether `fence` still holds its seat.
pub async fn holds(store: &dyn Store, keys: &Keys, fence: &Fence) -> Result<bool, Error> {
    let current = store.get(&keys.seat_holder(&fence.seat)).await?;
    Ok(current.is_some_and(|kv| kv.create_revision == fence.epoch))
}

/// The seat's holder and epoch, if held.
pub async fn holder(
    store: &dyn Store,
    keys: &Keys,
    seat: &str,
) -> Result<Option<(Holder, i64)>, Error> {
    let Some(kv) = store.get(&keys.seat_holder(seat)).await? else {
        return Ok(None);
    };
    let holder = serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
        key: kv.key.clone(),
        message: error.to_string(),
    })?;
    Ok(Some((holder, kv.create_revision)))
}

/// A node's session: the lease its registration and every seat it holds ride on.
#[derive(Debug, Clone)]
pub struct Session {
    pub lease: LeaseId,
    pub ttl_seconds: i64,
    pub info: NodeInfo,
}

impl Session {
    /// Grants the session lease and registers the node on it.
    pub async fn open(
        store: &dyn Store,
        keys: &Keys,
        info: NodeInfo,
        ttl_seconds: i64,
    ) -> Result<Self, Error> {
        let lease = store.lease_grant(ttl_seconds).await?;
        register_node(store, keys, &info, lease).await?;
        Ok(Self {
            lease,
            ttl_seconds,
            info,
        })
    }

    /// Renews the session (call every ttl/3). [`Error::LeaseNotFound`] means the session is
    /// over: every seat it held is lost, and the node must open a new session.
    pub async fn renew(&self, store: &dyn Store) -> Result<i64, Error> {
        store.lease_keep_alive(self.lease).await
    }

    /// Ends the session, releasing every seat it holds at once.
    pub async fn close(&self, store: &dyn Store) -> Result<(), Error> {
        match store.lease_revoke(self.lease).await {
            Ok(()) | Err(Error::LeaseNotFound(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
