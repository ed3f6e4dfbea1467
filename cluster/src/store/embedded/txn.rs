//! Reads and txns: a read-only txn on one read snapshot; for a writing txn (committed with the
//! others beside it, `group.rs`), its compares, the branch they pick, each op applied at the
//! next revision and the revision's changes recorded in history.

use redb::ReadableTable;

use super::inner::Inner;
use super::layout::{
    KV, META, META_HISTORY_BYTES, META_OLDEST, META_REVISION, StoredEvent, StoredKv, Tables, encode,
};
use crate::store::{
    Error, KeyValue, Op, OpResult, Range, Revision, Txn, TxnResponse, WatchEvent, compare_holds,
};

impl Inner {
    pub(super) fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        let read = self.begin_read()?;
        let kv = read
            .open_table(KV)
            .map_err(|e| self.disk("open table kv", e))?;
        self.load(&kv, key)
    }

    pub(super) fn range(&self, prefix: &str) -> Result<Range, Error> {
        self.read_range(prefix, true)
    }

    /// [`range`](Self::range) without the values: each value is decoded and dropped in turn.
    pub(super) fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        self.read_range(prefix, false)
    }

    /// Every key under `prefix` on one read snapshot, with its value or without.
    fn read_range(&self, prefix: &str, with_values: bool) -> Result<Range, Error> {
        let read = self.begin_read()?;
        let kv = read
            .open_table(KV)
            .map_err(|e| self.disk("open table kv", e))?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        let kvs = if with_values {
            self.load_prefix(&kv, prefix)?
        } else {
            self.load_prefix_keys(&kv, prefix)?
        };
        Ok(Range {
            kvs,
            revision: self.revision(&meta)?,
        })
    }

    /// A txn neither branch of which writes: one read snapshot, no lock.
    pub(super) fn read_txn(&self, txn: &Txn) -> Result<TxnResponse, Error> {
        let read = self.begin_read()?;
        let kv = read
            .open_table(KV)
            .map_err(|e| self.disk("open table kv", e))?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        let revision = self.revision(&meta)?;
        let succeeded = self.compares_hold(&kv, txn)?;
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                Op::Get { key } => results.push(OpResult::Get(self.load(&kv, key)?)),
                // txn.writes() was false
                Op::Put { .. } | Op::Delete { .. } | Op::DeletePrefix { .. } => {
                    return Err(Error::Invalid("a read-only txn holds a write".into()));
                }
            }
        }
        Ok(TxnResponse {
            succeeded,
            revision,
            results,
        })
    }

    pub(super) fn compares_hold(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        txn: &Txn,
    ) -> Result<bool, Error> {
        for compare in &txn.compares {
            if !compare_holds(compare, self.load(kv, &compare.key)?.as_ref()) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Refuses a branch that cannot apply, before anything of it is written.
    pub(super) fn check_ops(&self, tables: &Tables<'_>, ops: &[Op]) -> Result<(), Error> {
        for op in ops {
            match op {
                Op::Put { key, .. } | Op::Delete { key } if key.is_empty() => {
                    return Err(Error::Invalid("a txn names an empty key".into()));
                }
                Op::Put { lease, .. } if *lease != 0 => {
                    let exists = tables
                        .leases
                        .get(*lease)
                        .map_err(|e| self.disk("read a lease", e))?
                        .is_some();
                    if !exists {
                        return Err(Error::Invalid(
                            "a put names a lease that expired or was revoked".into(),
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Tables<'_> {
    /// Applies one op at `revision`, adding its changes to `events`.
    pub(super) fn apply(
        &mut self,
        inner: &Inner,
        op: &Op,
        revision: Revision,
        events: &mut Vec<WatchEvent>,
    ) -> Result<OpResult, Error> {
        match op {
            Op::Put { key, value, lease } => {
                let before = inner.load(&self.kv, key)?;
                let kv = KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                    create_revision: before.as_ref().map_or(revision, |kv| kv.create_revision),
                    mod_revision: revision,
                    version: before.as_ref().map_or(0, |kv| kv.version) + 1,
                    lease: *lease,
                };
                let bytes = encode(key, &StoredKv::from_key_value(&kv))?;
                self.kv
                    .insert(key.as_str(), bytes.as_slice())
                    .map_err(|e| inner.disk("write a key", e))?;
                let old_lease = before.as_ref().map_or(0, |kv| kv.lease);
                if old_lease != 0 && old_lease != *lease {
                    self.lease_keys
                        .remove((old_lease, key.as_str()))
                        .map_err(|e| inner.disk("detach a key from its lease", e))?;
                }
                if *lease != 0 {
                    self.lease_keys
                        .insert((*lease, key.as_str()), ())
                        .map_err(|e| inner.disk("attach a key to its lease", e))?;
                }
                events.push(WatchEvent::Put(kv));
                Ok(OpResult::Put)
            }
            Op::Delete { key } => Ok(OpResult::Delete(i64::from(
                self.delete(inner, key, revision, events)?,
            ))),
            Op::DeletePrefix { prefix } => {
                let keys: Vec<String> = inner
                    .load_prefix(&self.kv, prefix)?
                    .into_iter()
                    .map(|kv| kv.key)
                    .collect();
                let mut deleted = 0;
                for key in &keys {
                    deleted += i64::from(self.delete(inner, key, revision, events)?);
                }
                Ok(OpResult::Delete(deleted))
            }
            Op::Get { key } => Ok(OpResult::Get(inner.load(&self.kv, key)?)),
        }
    }

    /// Deletes one key at `revision`; returns whether it existed.
    pub(super) fn delete(
        &mut self,
        inner: &Inner,
        key: &str,
        revision: Revision,
        events: &mut Vec<WatchEvent>,
    ) -> Result<bool, Error> {
        let Some(before) = inner.load(&self.kv, key)? else {
            return Ok(false);
        };
        self.kv
            .remove(key)
            .map_err(|e| inner.disk("delete a key", e))?;
        if before.lease != 0 {
            self.lease_keys
                .remove((before.lease, key))
                .map_err(|e| inner.disk("detach a key from its lease", e))?;
        }
        events.push(WatchEvent::Delete {
            key: key.to_owned(),
            revision,
        });
        Ok(true)
    }

    /// Makes `revision` the store's revision, records its changes in history and drops the
    /// history that falls out of the kept window.
    pub(super) fn record(
        &mut self,
        inner: &Inner,
        revision: Revision,
        events: &[WatchEvent],
    ) -> Result<(), Error> {
        self.meta
            .insert(META_REVISION, revision)
            .map_err(|e| inner.disk("write the revision", e))?;
        let stored: Vec<StoredEvent> = events.iter().map(StoredEvent::from_watch_event).collect();
        let bytes = encode(&format!("history revision {revision}"), &stored)?;
        self.history
            .insert(revision, bytes.as_slice())
            .map_err(|e| inner.disk("write history", e))?;
        // the kept window: the last history_revisions revisions, those of the last
        // history_seconds, and no more than history_bytes of them (the latest always kept)
        let floor = (revision - inner.history_revisions + 1)
            .max(inner.age_floor(&mut self.meta, Some(revision))?);
        self.trim_history(inner, revision, floor, bytes.len() as i64)?;
        Ok(())
    }
}

/// How much under its bounds a trim takes the history, as a share of each bound (none for a
/// bound under [`TRIM_SLACK`]): a history trimmed by one revision per commit rewrote the
/// tree's oldest pages in every commit — 15% of a commit at its bounds, and launches 20%
/// slower on a node whose history was full than on a fresh one (issue 20's scale bench).
/// Trimmed a thirty-second at a time, as etcd compacts on its period rather than per write,
/// the history holds between the bound less a thirty-second and the bound.
pub(super) const TRIM_SLACK: i64 = 32;

impl Tables<'_> {
    /// Drops the history below `floor`, and the oldest past `history_bytes` (`added` bytes were
    /// just written), never `latest`'s own revision; once one of them is passed, a
    /// [`TRIM_SLACK`]th more of the revisions' and the bytes' bounds goes with it. Counts what
    /// was written and dropped toward the next compaction (`Inner::history_changed`). Returns
    /// the bytes dropped.
    pub(super) fn trim_history(
        &mut self,
        inner: &Inner,
        latest: Revision,
        floor: Revision,
        added: i64,
    ) -> Result<i64, Error> {
        let mut kept_bytes = inner.meta(&self.meta, META_HISTORY_BYTES)?.unwrap_or(0) + added;
        let mut oldest = inner.oldest(&self.meta)?;
        let mut trimmed = 0;
        // past a bound, the history goes down to the bound less its slack
        let (mut floor, mut most_bytes, mut past_a_bound) = (floor, inner.history_bytes, false);
        while oldest < latest {
            let first = match self
                .history
                .first()
                .map_err(|e| inner.disk("read history", e))?
            {
                // never the latest revision
                Some((first, _)) if first.value() < latest => first.value(),
                _ => break,
            };
            if first >= floor && kept_bytes <= most_bytes {
                break;
            }
            if !past_a_bound {
                past_a_bound = true;
                floor = floor.saturating_add(inner.history_revisions / TRIM_SLACK);
                most_bytes -= inner.history_bytes / TRIM_SLACK;
            }
            let size = self
                .history
                .remove(first)
                .map_err(|e| inner.disk("trim history", e))?
                .map_or(0, |value| value.value().len() as i64);
            kept_bytes -= size;
            trimmed += size;
            oldest = first + 1;
        }
        self.meta
            .insert(META_HISTORY_BYTES, kept_bytes.max(0))
            .map_err(|e| inner.disk("write the history's size", e))?;
        if oldest > inner.oldest(&self.meta)? {
            self.meta
                .insert(META_OLDEST, oldest)
                .map_err(|e| inner.disk("write the oldest revision", e))?;
        }
        inner.history_changed(added, trimmed);
        Ok(trimmed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::test_support::open;
    use crate::store::{Compare, CompareOp, Op, OpResult, Store, StoreExt, Txn, compare_holds};

    #[tokio::test]
    async fn revisions_bump_once_per_txn_that_changes_something() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        assert_eq!(store.revision().await.unwrap(), 1, "an empty store is at 1");

        // one txn, three puts: one revision shared by all
        let response = store
            .txn(Txn::new().and_then([Op::put("a", "1"), Op::put("b", "1"), Op::put("c", "1")]))
            .await
            .unwrap();
        assert!(response.succeeded);
        assert_eq!(response.revision, 2);
        assert_eq!(response.results, vec![OpResult::Put; 3]);
        for key in ["a", "b", "c"] {
            let kv = store.get(key).await.unwrap().unwrap();
            assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 2, 1));
        }

        // a failed compare with an empty failure branch changes nothing
        let response = store
            .txn(
                Txn::new()
                    .when([Compare::absent("a")])
                    .and_then([Op::put("a", "2")]),
            )
            .await
            .unwrap();
        assert!(!response.succeeded);
        assert_eq!(response.revision, 2);
        assert!(response.results.is_empty());

        // deletes of nothing change nothing
        let response = store
            .txn(Txn::new().and_then([
                Op::delete("missing"),
                Op::DeletePrefix {
                    prefix: "zzz/".into(),
                },
            ]))
            .await
            .unwrap();
        assert_eq!(response.revision, 2);
        assert_eq!(
            response.results,
            vec![OpResult::Delete(0), OpResult::Delete(0)]
        );

        // the failure branch applies when a compare fails, and its get sees its own put
        let response = store
            .txn(
                Txn::new()
                    .when([Compare::value("a", CompareOp::Equal, "nope")])
                    .and_then([Op::put("x", "never")])
                    .or_else([Op::put("a", "2"), Op::get("a")]),
            )
            .await
            .unwrap();
        assert!(!response.succeeded);
        assert_eq!(response.revision, 3);
        let OpResult::Get(Some(a)) = &response.results[1] else {
            panic!("get result: {:?}", response.results);
        };
        assert_eq!(
            (a.value.as_slice(), a.version, a.mod_revision),
            (&b"2"[..], 2, 3)
        );
        assert!(store.get("x").await.unwrap().is_none());

        // a prefix delete is one revision
        store.put("p/1", b"1".to_vec()).await.unwrap();
        store.put("p/2", b"2".to_vec()).await.unwrap();
        store.put("q", b"q".to_vec()).await.unwrap();
        assert_eq!(store.revision().await.unwrap(), 6);
        let response = store
            .txn(Txn::new().and_then([Op::DeletePrefix {
                prefix: "p/".into(),
            }]))
            .await
            .unwrap();
        assert_eq!(response.revision, 7);
        assert_eq!(response.results, vec![OpResult::Delete(2)]);
        let range = store.range("").await.unwrap();
        assert_eq!(range.revision, 7);
        let keys: Vec<_> = range.kvs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c", "q"]);

        // a read-only txn reports the current revision
        let response = store
            .txn(Txn::new().and_then([Op::get("q")]))
            .await
            .unwrap();
        assert_eq!(response.revision, 7);
        assert!(matches!(&response.results[0], OpResult::Get(Some(kv)) if kv.value == b"q"));
    }

    #[tokio::test]
    async fn recreate_after_delete_restarts_version_and_create_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        assert_eq!(store.put("k", b"1".to_vec()).await.unwrap(), 2);
        assert_eq!(store.put("k", b"2".to_vec()).await.unwrap(), 3);
        let kv = store.get("k").await.unwrap().unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));

        let response = store
            .txn(Txn::new().and_then([Op::delete("k")]))
            .await
            .unwrap();
        assert_eq!(response.revision, 4);
        assert_eq!(response.results, vec![OpResult::Delete(1)]);
        assert!(store.get("k").await.unwrap().is_none());

        assert_eq!(store.put("k", b"3".to_vec()).await.unwrap(), 5);
        let kv = store.get("k").await.unwrap().unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (5, 5, 1));
        assert!(compare_holds(
            &Compare::create_revision("k", CompareOp::Equal, 5),
            Some(&kv)
        ));
    }

    /// The oldest revision a watch may start from, read as a watch from the first revision
    /// would be refused.
    async fn oldest(store: &super::super::EmbeddedStore) -> i64 {
        match store.watch("", 1).await {
            Err(crate::Error::Compacted { oldest, .. }) => oldest,
            Err(other) => panic!("expected Compacted, got {other}"),
            Ok(_) => 1,
        }
    }

    /// Past its bound, the history goes down a thirty-second under it at once — one trim per
    /// thirty-second of the bound, not one per commit — and never holds more than its bound.
    #[tokio::test]
    async fn history_past_its_bound_is_trimmed_a_slack_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let options = super::super::EmbeddedOptions {
            history_revisions: 320,
            history_seconds: 0,
            ..Default::default()
        };
        let store = super::super::EmbeddedStore::open_with(dir.path(), options)
            .await
            .unwrap();
        let (bound, slack) = (320, 320 / super::TRIM_SLACK);
        let mut oldests = Vec::new();
        for i in 0..400 {
            let revision = store
                .put(&format!("k/{}", i % 7), vec![b'v'; 64])
                .await
                .unwrap();
            let oldest = oldest(&store).await;
            let held = revision - oldest.max(2) + 1;
            assert!(held <= bound, "{held} revisions held at {revision}");
            if revision > bound + 1 {
                assert!(
                    held > bound - slack - 1,
                    "{held} revisions held at {revision}"
                );
            }
            if oldests.last() != Some(&oldest) {
                oldests.push(oldest);
            }
        }
        // revisions 2..=401: the first trim at 322 (to 13), then every eleven revisions
        assert_eq!(
            oldests.first(),
            Some(&1),
            "nothing trimmed before the bound"
        );
        assert_eq!(oldests.get(1), Some(&13), "{oldests:?}");
        assert!(
            oldests.windows(2).skip(1).all(|w| w[1] - w[0] == slack + 1),
            "{oldests:?}"
        );
    }
}
