//! The seat's runs, by key: `{prefix}/seat_runs/{seat}/{turn_id}` → the run's status. A
//! launch asks whether its seat is busy, a seat's new holder fences the seat's runs, and
//! neither may read every run of the store to find the few of one seat: at 10,000 runs that
//! read was most of a launch's cost (issue 20: 554 launches/s on a fresh node, 24/s beside
//! 2,000 runs).
//!
//! Every write of a run ([`crate::runs::Runs::apply`]) carries its entry in the same fenced
//! txn — put with every write of the row, deleted with the row — so the entry
//! and the row can never disagree once a txn lands. Runs written before the index existed
//! get their entries from [`backfill`], once per process before the index is first read:
//! each put compares the run's mod_revision with the one read (a run that moved under it
//! was written by a txn that carried its own entry), each stale entry's delete compares
//! that its run is absent.

use crate::record::{RunRecord, Status};
use crate::runs::{Versioned, decode};
use crate::store::{Compare, CompareOp, KeyValue, Op, OpResult, Store, Txn};
use crate::{Error, Keys};

/// How many keys one txn reads (etcd takes at most 128 ops in one txn, `--max-txn-ops`).
const READ_PAGE: usize = 100;

/// The ops that keep a run's entry with its row: every write of the row puts its entry (so a
/// run written before the index existed has one from its next write on, whatever the
/// backfill saw), and a deleted row takes its entry with it.
pub(crate) fn entry_ops(
    keys: &Keys,
    read: Option<&RunRecord>,
    next: Option<&RunRecord>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    if let Some(read) = read
        && next.is_none_or(|next| next.seat != read.seat)
    {
        ops.push(Op::delete(keys.seat_run(&read.seat, &read.turn_id)));
    }
    if let Some(next) = next {
        ops.push(Op::put(
            keys.seat_run(&next.seat, &next.turn_id),
            next.status.as_str(),
        ));
    }
    ops
}

/// A run's entry: its turn and its status as the entry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub turn_id: String,
    pub status: Status,
}

fn status_of(value: &[u8]) -> Option<Status> {
    let word = std::str::from_utf8(value).ok()?;
    serde_json::from_value(serde_json::Value::String(word.to_owned())).ok()
}

/// The entries of one seat's runs, in turn-id order.
pub async fn entries(store: &dyn Store, keys: &Keys, seat: &str) -> Result<Vec<Entry>, Error> {
    let range = store.range(&keys.seat_runs(seat)).await?;
    range.kvs.iter().map(entry_of).collect()
}

/// Every run's entry, in key order (by seat, then turn).
pub async fn all_entries(store: &dyn Store, keys: &Keys) -> Result<Vec<Entry>, Error> {
    let range = store.range(&keys.all_seat_runs()).await?;
    range.kvs.iter().map(entry_of).collect()
}

fn entry_of(kv: &KeyValue) -> Result<Entry, Error> {
    let status = status_of(&kv.value).ok_or_else(|| {
        Error::Invalid(format!(
            "{} holds no run status: {:?}",
            kv.key,
            String::from_utf8_lossy(&kv.value)
        ))
    })?;
    Ok(Entry {
        turn_id: Keys::last_segment(&kv.key).to_owned(),
        status,
    })
}

/// The seat whose run entry `key` is (`seat_runs/{seat}/{turn}`).
pub fn seat_of_entry<'k>(keys: &Keys, key: &'k str) -> Option<&'k str> {
    let (seat, turn) = key.strip_prefix(&keys.all_seat_runs())?.split_once('/')?;
    (!seat.is_empty() && !turn.is_empty()).then_some(seat)
}

/// The runs of `turns`, read a page of keys per txn; a run gone since it was listed is left
/// out.
pub async fn read_runs(
    store: &dyn Store,
    keys: &Keys,
    turns: &[String],
) -> Result<Vec<Versioned>, Error> {
    let mut runs = Vec::with_capacity(turns.len());
    for page in turns.chunks(READ_PAGE) {
        let gets = page.iter().map(|turn| Op::get(keys.run(turn)));
        let response = store.txn(Txn::new().and_then(gets)).await?;
        for result in response.results {
            if let OpResult::Get(Some(kv)) = result {
                runs.push(decode(&kv)?);
            }
        }
    }
    Ok(runs)
}

/// What a backfill did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backfilled {
    /// entries written for runs that had none (or a stale status)
    pub written: usize,
    /// entries deleted whose run is gone
    pub removed: usize,
}

/// Gives every run its entry and removes entries whose run is gone. Idempotent; each write a
/// compare-and-set on the run's row.
pub async fn backfill(store: &dyn Store, keys: &Keys) -> Result<Backfilled, Error> {
    let runs = store.range(&keys.runs()).await?;
    let entries = store.range(&keys.all_seat_runs()).await?;
    let held: std::collections::HashMap<&str, &KeyValue> =
        entries.kvs.iter().map(|kv| (kv.key.as_str(), kv)).collect();
    let mut done = Backfilled::default();
    let mut listed = std::collections::HashSet::new();
    for kv in &runs.kvs {
        let run = decode(kv)?;
        let key = keys.seat_run(&run.record.seat, &run.record.turn_id);
        let current = held.get(key.as_str()).and_then(|kv| status_of(&kv.value));
        listed.insert(key.clone());
        if current == Some(run.record.status) {
            continue;
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(
                &kv.key,
                CompareOp::Equal,
                kv.mod_revision,
            )])
            .and_then([Op::put(key, run.record.status.as_str())]);
        // a run that moved since the read was written with its entry
        if store.txn(txn).await?.succeeded {
            done.written += 1;
        }
    }
    for kv in &entries.kvs {
        if listed.contains(&kv.key) {
            continue;
        }
        let turn_id = Keys::last_segment(&kv.key);
        let txn = Txn::new()
            .when([Compare::absent(keys.run(turn_id))])
            .and_then([Op::delete(&kv.key)]);
        if store.txn(txn).await?.succeeded {
            done.removed += 1;
        }
    }
    Ok(done)
}
