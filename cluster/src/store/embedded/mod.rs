//! `EmbeddedStore`: the single-node store, durable in a data directory (DESIGN §5).
//!
//! It keeps etcd's semantics (see the [module docs](super)) in one redb file,
//! `<data dir>/store.redb`:
//!
//! | table        | key                 | value                                         |
//! |--------------|---------------------|-----------------------------------------------|
//! | `kv`         | key                 | the key's value and bookkeeping (bincode)     |
//! | `leases`     | lease id            | its TTL in seconds                            |
//! | `lease_keys` | (lease id, key)     | `()`: which keys a lease deletes when it ends |
//! | `history`    | revision            | that revision's changes (bincode), for watches |
//! | `meta`       | `revision`, ...     | the counters                                  |
//!
//! How it holds together:
//!
//! - **Durability.** Every call that writes is committed in a redb write transaction with
//!   [`redb::Durability::Immediate`] (fsync) before the call returns, so a process killed at
//!   any moment reopens with every acknowledged write and no part of an unacknowledged one.
//!   Txns that arrive while a commit is on its way to disk are committed together, each at its
//!   own revision, with one fsync (group commit, `group.rs`), as etcd batches its entries.
//! - **Ordering.** Commits are serialized by one lock, `Inner::commits`, held from the start of
//!   the redb transaction until its changes are broadcast to watchers. A watch subscribes to the
//!   broadcast while holding the same lock, then reads the backlog from `history`; a watcher
//!   checks that revisions arrive without a gap and refills from `history` when one is missed.
//!   `history` keeps the last [`EmbeddedOptions::history_revisions`] revisions: a watch from
//!   an older revision is refused by [`Store::watch`] itself with [`Error::Compacted`] (etcd's
//!   adapter reports it as the stream's first item), and a watch that falls behind the kept
//!   window later ends with it.
//! - **Leases.** A lease's TTL is persisted; its deadline lives in memory. A background task,
//!   holding only a [`Weak`](std::sync::Weak) to the store, expires leases whose deadline
//!   passed exactly as [`Store::lease_revoke`] does. On reopen every surviving lease gets a fresh full TTL, as
//!   etcd grants on a leader change: a node that restarts does not lose its sessions for the
//!   time it was down, and a dead holder's lease still ends one TTL after the restart.
//! - **Blocking work** (redb reads, writes, fsync) runs on tokio's blocking pool.
//!
//! Layout: this file opens the store and dispatches each [`Store`] call to the blocking pool;
//! `layout.rs` is the redb file (tables, encoding, disk errors), `txn.rs` reads and txns,
//! `group.rs` commits writing txns together, `leases.rs` leases and their expiry, `watch.rs` the
//! broadcast of commits and the watches.

mod group;
mod history_age;
mod inner;
mod layout;
mod leases;
mod txn;
mod watch;
mod whole;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::{Error, KeyValue, LeaseId, Range, Revision, Store, Txn, TxnResponse, WatchStream};
use inner::{BROADCAST_CAPACITY, Inner, LeaseClock, LeaseEnd, ttl_duration};
use leases::reap_expired_leases;
use whole::{OnBackend, open_whole};

/// How many revisions of history a store keeps for watches unless told otherwise.
pub const DEFAULT_HISTORY_REVISIONS: u64 = 100_000;

/// How many bytes of history a store keeps unless told otherwise: past them the oldest
/// revisions go, as etcd's auto-compaction drops them by age or count, so a burst of large
/// values cannot grow the file without end.
pub const DEFAULT_HISTORY_BYTES: u64 = 64 * 1024 * 1024;

/// How long history is kept for watches unless told otherwise, as etcd's periodic
/// auto-compaction keeps it (`--auto-compaction-retention=1h`, which the README advises).
pub const DEFAULT_HISTORY_SECONDS: u64 = 3600;

/// Memory redb caches the file in. Its own default is 1 GiB, which a node fills with every
/// large value it ever wrote and never gives back; 16 MiB was most of what a node kept after
/// a burst of large reports (the soak bench), and a node's working set (seats, runs, the
/// ledger's recent rows) is a few hundred KiB.
pub const CACHE_BYTES: usize = 4 * 1024 * 1024;

/// History dropped since the last compaction past which the file is compacted again, giving
/// the space back to the disk.
pub const COMPACT_AFTER_BYTES: u64 = 64 * 1024 * 1024;

/// The file the store keeps in its data directory.
pub const FILE_NAME: &str = "store.redb";

/// Tuning of an [`EmbeddedStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedOptions {
    /// How many of the latest revisions are kept for watches; a watch from an older revision
    /// gets [`Error::Compacted`]. Once passed, a thirty-second of it goes at once (the history
    /// holds between it less a thirty-second and it; `txn::TRIM_SLACK`). Default
    /// [`DEFAULT_HISTORY_REVISIONS`]; at least 1.
    pub history_revisions: u64,
    /// How many bytes of history are kept, however few revisions that is (the latest is
    /// always kept); trimmed a thirty-second under it at once, as the revisions are. Default
    /// [`DEFAULT_HISTORY_BYTES`].
    pub history_bytes: u64,
    /// How many seconds of history are kept, however many revisions and bytes that is (the
    /// latest is always kept; 0: by count and bytes alone). Default
    /// [`DEFAULT_HISTORY_SECONDS`].
    pub history_seconds: u64,
    /// History dropped since the last compaction past which the file is compacted again.
    /// Default [`COMPACT_AFTER_BYTES`].
    pub compact_after_bytes: u64,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            history_revisions: DEFAULT_HISTORY_REVISIONS,
            history_bytes: DEFAULT_HISTORY_BYTES,
            history_seconds: DEFAULT_HISTORY_SECONDS,
            compact_after_bytes: COMPACT_AFTER_BYTES,
        }
    }
}

/// The single-node store: etcd's semantics, durable in one redb file. Clones share the store;
/// the file is closed (and the lease reaper stops) when the last clone is dropped.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Opens (creating if needed) the store in `dir`, with default options.
    pub async fn open(dir: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(dir, EmbeddedOptions::default()).await
    }

    /// Opens (creating if needed) the store in `dir`: the directory and its `store.redb`.
    ///
    /// Fails with [`Error::Disk`] when another process holds the store open. Every lease found
    /// in the file restarts with its full TTL.
    pub async fn open_with(dir: impl AsRef<Path>, options: EmbeddedOptions) -> Result<Self, Error> {
        let dir = dir.as_ref().to_path_buf();
        Self::open_on(dir, options, None).await
    }

    /// [`EmbeddedStore::open_with`] on `backend` instead of the file itself (a test's faults).
    async fn open_on(
        dir: std::path::PathBuf,
        options: EmbeddedOptions,
        backend: Option<OnBackend>,
    ) -> Result<Self, Error> {
        let inner = tokio::task::spawn_blocking(move || Inner::open(&dir, &options, backend))
            .await
            .map_err(|error| {
                Error::Unavailable(format!("opening the embedded store: {error}"))
            })??;
        let inner = Arc::new(inner);
        tokio::spawn(reap_expired_leases(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The store's redb file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `work` on the blocking pool. `writes` says whether a lost outcome may have written.
    async fn blocking<T, F>(&self, writes: bool, work: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, Error> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || work(&inner)).await {
            Ok(result) => result,
            Err(error) if writes => Err(Error::Indeterminate(format!(
                "embedded store write task failed: {error}"
            ))),
            Err(error) => Err(Error::Unavailable(format!(
                "embedded store read task failed: {error}"
            ))),
        }
    }
}

impl Inner {
    fn open(
        dir: &Path,
        options: &EmbeddedOptions,
        backend: Option<OnBackend>,
    ) -> Result<Self, Error> {
        let path = dir.join(FILE_NAME);
        std::fs::create_dir_all(dir).map_err(|error| Error::Disk {
            path: dir.display().to_string(),
            message: format!(
                "could not create the data directory: {error}: check its parent exists and is writable, or use another --data-dir"
            ),
        })?;
        let db = open_whole(&path, backend)?;
        let history_revisions = i64::try_from(options.history_revisions.max(1)).unwrap_or(i64::MAX);
        let history_bytes = i64::try_from(options.history_bytes).unwrap_or(i64::MAX);
        let (changes, _) = broadcast::channel(BROADCAST_CAPACITY);
        let inner = Self {
            db: std::sync::RwLock::new(db),
            path,
            history_revisions,
            history_bytes,
            history_seconds: i64::try_from(options.history_seconds).unwrap_or(i64::MAX),
            history_shrunk: std::sync::atomic::AtomicU64::new(0),
            compact_after_bytes: options.compact_after_bytes,
            health: super::health::StoreHealth::new(),
            commits: Mutex::new(()),
            queue: Mutex::new(Vec::new()),
            commits_made: std::sync::atomic::AtomicU64::new(0),
            changes,
            leases: Mutex::new(HashMap::new()),
        };
        let ttls = inner.prepare()?;
        let now = Instant::now();
        *inner.lease_clocks() = ttls
            .into_iter()
            .map(|(id, ttl_seconds)| {
                let deadline = now + ttl_duration(ttl_seconds);
                (
                    id,
                    LeaseClock {
                        ttl_seconds,
                        deadline,
                    },
                )
            })
            .collect();
        Ok(inner)
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        let key = key.to_owned();
        self.blocking(false, move |inner| inner.get(&key)).await
    }

    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        let prefix = prefix.to_owned();
        self.blocking(false, move |inner| inner.range(&prefix))
            .await
    }

    async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        let prefix = prefix.to_owned();
        self.blocking(false, move |inner| inner.range_keys(&prefix))
            .await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        if txn.writes() {
            self.blocking(true, move |inner| inner.write_txn(txn)).await
        } else {
            self.blocking(false, move |inner| inner.read_txn(&txn))
                .await
        }
    }

    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        if ttl_seconds <= 0 {
            return Err(Error::Invalid(format!(
                "a lease needs a positive TTL, not {ttl_seconds} seconds"
            )));
        }
        self.blocking(true, move |inner| inner.lease_grant(ttl_seconds))
            .await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error> {
        // memory only: no disk work
        self.inner.lease_keep_alive(lease)
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error> {
        self.blocking(true, move |inner| {
            inner.lease_end(lease, LeaseEnd::Revoke).map(|_| ())
        })
        .await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error> {
        Ok(self.inner.lease_time_to_live(lease))
    }

    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        self.watch_from(prefix, from_revision).await
    }

    fn health(&self) -> super::health::StoreHealth {
        self.inner.health.clone()
    }

    fn max_request_bytes(&self) -> usize {
        super::DEFAULT_MAX_REQUEST_BYTES
    }
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::test_support::{must_next, open, reopen};
    use super::*;
    use crate::store::{Op, StoreExt};

    #[tokio::test]
    async fn reopen_keeps_data_revision_history_and_leases() {
        let dir = tempfile::tempdir().unwrap();
        let (lease, revision) = {
            let store = open(dir.path()).await;
            let lease = store.lease_grant(60).await.unwrap();
            store
                .txn(Txn::new().and_then([Op::put("a", "1"), Op::put_on_lease("b", "2", lease)]))
                .await
                .unwrap();
            store.put("a", b"3".to_vec()).await.unwrap();
            (lease, store.revision().await.unwrap())
        };
        assert_eq!(revision, 3);

        let store = reopen(dir.path(), EmbeddedOptions::default()).await;
        assert_eq!(store.revision().await.unwrap(), 3);
        let a = store.get("a").await.unwrap().unwrap();
        assert_eq!(
            (a.value.as_slice(), a.create_revision, a.version),
            (&b"3"[..], 2, 2)
        );
        let b = store.get("b").await.unwrap().unwrap();
        assert_eq!(b.lease, lease);
        // the lease survived with a fresh full TTL
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), Some(60));
        assert_eq!(store.lease_keep_alive(lease).await.unwrap(), 60);
        // ids keep counting up
        assert!(store.lease_grant(5).await.unwrap() > lease);
        // the history is still there to watch from
        let mut watch = store.watch("", 2).await.unwrap();
        let events = [must_next(&mut watch).await, must_next(&mut watch).await];
        assert_eq!(
            events
                .iter()
                .map(|e| (e.revision(), e.key()))
                .collect::<Vec<_>>(),
            [(2, "a"), (2, "b")]
        );
        assert_eq!(must_next(&mut watch).await.revision(), 3);
        // and the revocation still deletes what the lease holds
        store.lease_revoke(lease).await.unwrap();
        assert!(store.get("b").await.unwrap().is_none());
        assert_eq!(store.revision().await.unwrap(), 4);
    }

    #[tokio::test]
    async fn a_second_open_of_the_same_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        match EmbeddedStore::open(dir.path()).await {
            Err(Error::Disk { path, message }) => {
                assert!(path.ends_with(FILE_NAME), "{path}");
                assert!(
                    message.contains("another process holds the store open"),
                    "{message}"
                );
            }
            other => panic!("expected a disk error, got {other:?}"),
        }
        assert!(format!("{store:?}").contains(FILE_NAME));
    }
}
