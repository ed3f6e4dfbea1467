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
//! - **Durability.** Every call that writes is one redb write transaction committed with
//!   [`redb::Durability::Immediate`] (fsync) before the call returns, so a process killed at
//!   any moment reopens with every acknowledged write and no part of an unacknowledged one.
//! - **Ordering.** Commits are serialized by one lock, `Inner::commits`, held from the start of
//!   the redb transaction until its changes are broadcast to watchers. A watch subscribes to the
//!   broadcast while holding the same lock, then reads the backlog from `history`; a watcher
//!   checks that revisions arrive without a gap and refills from `history` when one is missed.
//!   `history` keeps the last [`EmbeddedOptions::history_revisions`] revisions: a watch from
//!   an older revision is refused by [`Store::watch`] itself with [`Error::Compacted`] (etcd's
//!   adapter reports it as the stream's first item), and a watch that falls behind the kept
//!   window later ends with it.
//! - **Leases.** A lease's TTL is persisted; its deadline lives in memory. A background task,
//!   holding only a [`Weak`] to the store, expires leases whose deadline passed exactly as
//!   [`Store::lease_revoke`] does. On reopen every surviving lease gets a fresh full TTL, as
//!   etcd grants on a leader change: a node that restarts does not lose its sessions for the
//!   time it was down, and a dead holder's lease still ends one TTL after the restart.
//! - **Blocking work** (redb reads, writes, fsync) runs on tokio's blocking pool.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, Table, TableDefinition};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::{
    Error, KeyValue, LeaseId, Op, OpResult, Range, Revision, Store, Txn, TxnResponse, WatchEvent,
    WatchStream, compare_holds,
};

/// How many revisions of history a store keeps for watches unless told otherwise.
pub const DEFAULT_HISTORY_REVISIONS: u64 = 100_000;

/// The file the store keeps in its data directory.
pub const FILE_NAME: &str = "store.redb";

/// How often the lease reaper looks for leases whose deadline passed.
const EXPIRY_INTERVAL: Duration = Duration::from_millis(200);

/// How many committed revisions a watch may fall behind before it re-reads them from history
/// (small in unit tests, so they reach the re-read path with few commits).
const BROADCAST_CAPACITY: usize = if cfg!(test) { 64 } else { 1024 };

/// How many revisions a watch reads from history at a time while catching up.
const BACKLOG_BATCH: i64 = 512;

/// The revision of an empty store, as in etcd: the first write gets revision 2.
const EMPTY_REVISION: Revision = 1;

const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
const LEASES: TableDefinition<i64, i64> = TableDefinition::new("leases");
const LEASE_KEYS: TableDefinition<(i64, &str), ()> = TableDefinition::new("lease_keys");
const HISTORY: TableDefinition<i64, &[u8]> = TableDefinition::new("history");
const META: TableDefinition<&str, i64> = TableDefinition::new("meta");

/// `meta` rows.
const META_REVISION: &str = "revision";
/// The oldest revision a watch may start from; history below it is gone.
const META_OLDEST: &str = "oldest";
const META_NEXT_LEASE: &str = "next_lease";
const META_FORMAT: &str = "format";
const FORMAT_VERSION: i64 = 1;

/// Tuning of an [`EmbeddedStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedOptions {
    /// How many of the latest revisions are kept for watches; a watch from an older revision
    /// gets [`Error::Compacted`]. Default [`DEFAULT_HISTORY_REVISIONS`]; at least 1.
    pub history_revisions: u64,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            history_revisions: DEFAULT_HISTORY_REVISIONS,
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

/// What the store's handles and its background work share.
struct Inner {
    db: Database,
    /// the redb file, named in every disk error
    path: PathBuf,
    /// history length to keep, at least 1
    history_revisions: i64,
    /// serializes every write and the watch subscriptions against them (see module docs)
    commits: Mutex<()>,
    /// every committed change set, in revision order, sent while `commits` is held
    changes: broadcast::Sender<Arc<Commit>>,
    /// live leases and their deadlines; taken after `commits` when both are needed
    leases: Mutex<HashMap<LeaseId, LeaseClock>>,
}

/// A lease's clock, in memory only.
#[derive(Debug, Clone, Copy)]
struct LeaseClock {
    ttl_seconds: i64,
    deadline: Instant,
}

/// The changes of one revision, as broadcast to watchers.
#[derive(Debug)]
struct Commit {
    revision: Revision,
    events: Vec<WatchEvent>,
}

/// A key's stored state (the key itself is the table key).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredKv {
    value: Vec<u8>,
    create_revision: Revision,
    mod_revision: Revision,
    version: i64,
    lease: LeaseId,
}

impl StoredKv {
    fn into_key_value(self, key: String) -> KeyValue {
        KeyValue {
            key,
            value: self.value,
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            lease: self.lease,
        }
    }

    fn from_key_value(kv: &KeyValue) -> Self {
        Self {
            value: kv.value.clone(),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            lease: kv.lease,
        }
    }
}

/// One change of a revision in `history` (the revision is the table key).
#[derive(Debug, Serialize, Deserialize)]
enum StoredEvent {
    Put { key: String, kv: StoredKv },
    Delete { key: String },
}

/// Why a lease is being ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseEnd {
    /// [`Store::lease_revoke`]: the lease must exist.
    Revoke,
    /// The reaper: only if the deadline is still passed (a keep-alive may have won the race).
    Expiry,
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
        let inner = tokio::task::spawn_blocking(move || Inner::open(&dir, &options))
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
    fn open(dir: &Path, options: &EmbeddedOptions) -> Result<Self, Error> {
        let path = dir.join(FILE_NAME);
        std::fs::create_dir_all(dir).map_err(|error| Error::Disk {
            path: dir.display().to_string(),
            message: format!(
                "could not create the data directory: {error}: check its parent exists and is writable, or use another --data-dir"
            ),
        })?;
        let db = Database::create(&path).map_err(|error| disk(&path, "open", error))?;
        let history_revisions = i64::try_from(options.history_revisions.max(1)).unwrap_or(i64::MAX);
        let (changes, _) = broadcast::channel(BROADCAST_CAPACITY);
        let inner = Self {
            db,
            path,
            history_revisions,
            commits: Mutex::new(()),
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

    /// Creates the tables of a new file, checks the format of an old one, and returns the
    /// persisted leases with their TTLs.
    fn prepare(&self) -> Result<Vec<(LeaseId, i64)>, Error> {
        let write = self.begin_write()?;
        let leases = {
            let mut meta = write
                .open_table(META)
                .map_err(|e| self.disk("open table meta", e))?;
            match self.meta(&meta, META_FORMAT)? {
                None => {
                    meta.insert(META_FORMAT, FORMAT_VERSION)
                        .map_err(|e| self.disk("write the format version", e))?;
                }
                Some(FORMAT_VERSION) => {}
                Some(other) => {
                    return Err(Error::Disk {
                        path: self.path.display().to_string(),
                        message: format!(
                            "the file has format {other}, this build reads format {FORMAT_VERSION}: run a matching boxfleet build, or use another --data-dir"
                        ),
                    });
                }
            }
            write
                .open_table(KV)
                .map_err(|e| self.disk("open table kv", e))?;
            write
                .open_table(LEASE_KEYS)
                .map_err(|e| self.disk("open table lease_keys", e))?;
            write
                .open_table(HISTORY)
                .map_err(|e| self.disk("open table history", e))?;
            let leases = write
                .open_table(LEASES)
                .map_err(|e| self.disk("open table leases", e))?;
            let mut found = Vec::new();
            for entry in leases.iter().map_err(|e| self.disk("read leases", e))? {
                let (id, ttl) = entry.map_err(|e| self.disk("read leases", e))?;
                found.push((id.value(), ttl.value()));
            }
            found
        };
        write
            .commit()
            .map_err(|e| self.disk("create the tables", e))?;
        Ok(leases)
    }

    fn disk(&self, doing: &str, error: impl Into<redb::Error>) -> Error {
        disk(&self.path, doing, error)
    }

    /// A commit that failed may still reach the disk (the data was written, its fsync failed):
    /// the caller must re-read before deciding, and the store should be reopened.
    fn commit_failed(&self, doing: &str, error: redb::CommitError) -> Error {
        Error::Indeterminate(format!(
            "embedded store at {}: {doing}: {error}: the write may or may not have landed; check the disk, restart the node",
            self.path.display()
        ))
    }

    fn lock_commits(&self) -> MutexGuard<'_, ()> {
        self.commits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lease_clocks(&self) -> MutexGuard<'_, HashMap<LeaseId, LeaseClock>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin_write(&self) -> Result<redb::WriteTransaction, Error> {
        let mut write = self
            .db
            .begin_write()
            .map_err(|e| self.disk("begin a write", e))?;
        write
            .set_durability(Durability::Immediate)
            .map_err(|e| self.disk("begin a write", e))?;
        Ok(write)
    }

    fn begin_read(&self) -> Result<redb::ReadTransaction, Error> {
        self.db
            .begin_read()
            .map_err(|e| self.disk("begin a read", e))
    }

    fn meta(
        &self,
        meta: &impl ReadableTable<&'static str, i64>,
        name: &str,
    ) -> Result<Option<i64>, Error> {
        Ok(meta
            .get(name)
            .map_err(|e| self.disk("read meta", e))?
            .map(|value| value.value()))
    }

    fn revision(&self, meta: &impl ReadableTable<&'static str, i64>) -> Result<Revision, Error> {
        Ok(self.meta(meta, META_REVISION)?.unwrap_or(EMPTY_REVISION))
    }

    fn oldest(&self, meta: &impl ReadableTable<&'static str, i64>) -> Result<Revision, Error> {
        Ok(self.meta(meta, META_OLDEST)?.unwrap_or(EMPTY_REVISION))
    }

    fn load(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        key: &str,
    ) -> Result<Option<KeyValue>, Error> {
        let Some(bytes) = kv.get(key).map_err(|e| self.disk("read a key", e))? else {
            return Ok(None);
        };
        let stored: StoredKv = decode(key, bytes.value())?;
        Ok(Some(stored.into_key_value(key.to_owned())))
    }

    /// The keys under `prefix`, in key order.
    fn load_prefix(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        prefix: &str,
    ) -> Result<Vec<KeyValue>, Error> {
        let mut found = Vec::new();
        for entry in kv
            .range::<&str>(prefix..)
            .map_err(|e| self.disk("read a prefix", e))?
        {
            let (key, bytes) = entry.map_err(|e| self.disk("read a prefix", e))?;
            let key = key.value();
            if !key.starts_with(prefix) {
                break;
            }
            let stored: StoredKv = decode(key, bytes.value())?;
            found.push(stored.into_key_value(key.to_owned()));
        }
        Ok(found)
    }

    fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        let read = self.begin_read()?;
        let kv = read
            .open_table(KV)
            .map_err(|e| self.disk("open table kv", e))?;
        self.load(&kv, key)
    }

    fn range(&self, prefix: &str) -> Result<Range, Error> {
        let read = self.begin_read()?;
        let kv = read
            .open_table(KV)
            .map_err(|e| self.disk("open table kv", e))?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        Ok(Range {
            kvs: self.load_prefix(&kv, prefix)?,
            revision: self.revision(&meta)?,
        })
    }

    /// A txn neither branch of which writes: one read snapshot, no lock.
    fn read_txn(&self, txn: &Txn) -> Result<TxnResponse, Error> {
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

    fn compares_hold(
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

    /// A txn that may write: one durable redb write transaction under `commits`.
    fn write_txn(&self, txn: &Txn) -> Result<TxnResponse, Error> {
        let _commits = self.lock_commits();
        let write = self.begin_write()?;
        let applied = {
            let mut tables = Tables::open(self, &write)?;
            let head = self.revision(&tables.meta)?;
            let succeeded = self.compares_hold(&tables.kv, txn)?;
            let ops = if succeeded {
                &txn.success
            } else {
                &txn.failure
            };
            self.check_ops(&tables, ops)?;
            let revision = head + 1;
            let mut results = Vec::with_capacity(ops.len());
            let mut events = Vec::new();
            for op in ops {
                results.push(tables.apply(self, op, revision, &mut events)?);
            }
            if !events.is_empty() {
                tables.record(self, revision, &events)?;
            }
            (succeeded, head, results, events)
        };
        let (succeeded, head, results, events) = applied;
        if events.is_empty() {
            write
                .abort()
                .map_err(|e| self.disk("abort a txn that changed nothing", e))?;
            return Ok(TxnResponse {
                succeeded,
                revision: head,
                results,
            });
        }
        let revision = head + 1;
        write
            .commit()
            .map_err(|e| self.commit_failed("commit a txn", e))?;
        self.announce(revision, events);
        Ok(TxnResponse {
            succeeded,
            revision,
            results,
        })
    }

    /// Refuses a branch that cannot apply, before anything of it is written.
    fn check_ops(&self, tables: &Tables<'_>, ops: &[Op]) -> Result<(), Error> {
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

    /// Sends a committed revision to the watchers. Called with `commits` held.
    fn announce(&self, revision: Revision, events: Vec<WatchEvent>) {
        // no receiver is not an error: nobody watches
        let _ = self.changes.send(Arc::new(Commit { revision, events }));
    }

    fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        let _commits = self.lock_commits();
        let write = self.begin_write()?;
        let id = {
            let mut meta = write
                .open_table(META)
                .map_err(|e| self.disk("open table meta", e))?;
            let mut leases = write
                .open_table(LEASES)
                .map_err(|e| self.disk("open table leases", e))?;
            let id = self.meta(&meta, META_NEXT_LEASE)?.unwrap_or(1);
            meta.insert(META_NEXT_LEASE, id + 1)
                .map_err(|e| self.disk("write the lease counter", e))?;
            leases
                .insert(id, ttl_seconds)
                .map_err(|e| self.disk("write a lease", e))?;
            id
        };
        write
            .commit()
            .map_err(|e| self.commit_failed("commit a lease", e))?;
        self.lease_clocks().insert(
            id,
            LeaseClock {
                ttl_seconds,
                deadline: Instant::now() + ttl_duration(ttl_seconds),
            },
        );
        Ok(id)
    }

    /// Ends a lease: deletes its keys at one revision, then the lease. Returns whether it
    /// ended it (an expiry that lost to a keep-alive does not).
    fn lease_end(&self, id: LeaseId, end: LeaseEnd) -> Result<bool, Error> {
        let _commits = self.lock_commits();
        if end == LeaseEnd::Expiry {
            let due = self
                .lease_clocks()
                .get(&id)
                .is_some_and(|clock| clock.deadline <= Instant::now());
            if !due {
                return Ok(false);
            }
        }
        let write = self.begin_write()?;
        let (revision, events) = {
            let mut tables = Tables::open(self, &write)?;
            let existed = tables
                .leases
                .remove(id)
                .map_err(|e| self.disk("remove a lease", e))?
                .is_some();
            if !existed {
                drop(tables);
                write
                    .abort()
                    .map_err(|e| self.disk("abort a lease revoke", e))?;
                self.lease_clocks().remove(&id);
                return match end {
                    LeaseEnd::Revoke => Err(Error::LeaseNotFound(id)),
                    LeaseEnd::Expiry => Ok(false),
                };
            }
            let mut attached = Vec::new();
            for entry in tables
                .lease_keys
                .range::<(i64, &str)>((id, "")..)
                .map_err(|e| self.disk("read a lease's keys", e))?
            {
                let (entry, _) = entry.map_err(|e| self.disk("read a lease's keys", e))?;
                let (lease, key) = entry.value();
                if lease != id {
                    break;
                }
                attached.push(key.to_owned());
            }
            let revision = self.revision(&tables.meta)? + 1;
            let mut events = Vec::new();
            for key in &attached {
                tables.delete(self, key, revision, &mut events)?;
            }
            if !events.is_empty() {
                tables.record(self, revision, &events)?;
            }
            (revision, events)
        };
        write
            .commit()
            .map_err(|e| self.commit_failed("commit a lease revoke", e))?;
        self.lease_clocks().remove(&id);
        if !events.is_empty() {
            tracing::debug!(lease = id, keys = events.len(), ?end, "lease ended");
            self.announce(revision, events);
        }
        Ok(true)
    }

    /// The leases whose deadline passed.
    fn due_leases(&self, now: Instant) -> Vec<LeaseId> {
        self.lease_clocks()
            .iter()
            .filter(|(_, clock)| clock.deadline <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    fn lease_keep_alive(&self, id: LeaseId) -> Result<i64, Error> {
        let now = Instant::now();
        match self.lease_clocks().get_mut(&id) {
            // a passed deadline is final: the reaper is about to end the lease
            Some(clock) if clock.deadline > now => {
                clock.deadline = now + ttl_duration(clock.ttl_seconds);
                Ok(clock.ttl_seconds)
            }
            _ => Err(Error::LeaseNotFound(id)),
        }
    }

    fn lease_time_to_live(&self, id: LeaseId) -> Option<i64> {
        let now = Instant::now();
        let clock = *self.lease_clocks().get(&id)?;
        let left = clock.deadline.checked_duration_since(now)?;
        if left.is_zero() {
            return None;
        }
        // rounded up, so a live lease never reports 0
        let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        Some(i64::try_from(seconds).unwrap_or(i64::MAX))
    }

    /// Subscribes to the commits and reads where they start, with no commit in between.
    /// Returns the receiver, the current revision and the oldest kept revision.
    fn subscribe(&self) -> Result<(broadcast::Receiver<Arc<Commit>>, Revision, Revision), Error> {
        let _commits = self.lock_commits();
        let receiver = self.changes.subscribe();
        let read = self.begin_read()?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        Ok((receiver, self.revision(&meta)?, self.oldest(&meta)?))
    }

    /// The changes under `prefix` of revisions `from..` (at most [`BACKLOG_BATCH`] of them, up
    /// to the current revision). Returns them, the last revision read, and the current revision.
    fn read_history(
        &self,
        prefix: &str,
        from: Revision,
    ) -> Result<(Vec<WatchEvent>, Revision, Revision), Error> {
        let read = self.begin_read()?;
        let meta = read
            .open_table(META)
            .map_err(|e| self.disk("open table meta", e))?;
        let history = read
            .open_table(HISTORY)
            .map_err(|e| self.disk("open table history", e))?;
        let head = self.revision(&meta)?;
        let oldest = self.oldest(&meta)?;
        if from < oldest {
            return Err(Error::Compacted {
                requested: from,
                oldest,
            });
        }
        let upto = head.min(from.saturating_add(BACKLOG_BATCH - 1));
        let mut events = Vec::new();
        if from <= upto {
            for entry in history
                .range(from..=upto)
                .map_err(|e| self.disk("read history", e))?
            {
                let (revision, bytes) = entry.map_err(|e| self.disk("read history", e))?;
                let revision = revision.value();
                let stored: Vec<StoredEvent> =
                    decode(&format!("history revision {revision}"), bytes.value())?;
                events.extend(
                    stored
                        .into_iter()
                        .map(|event| event.into_watch_event(revision))
                        .filter(|event| event.key().starts_with(prefix)),
                );
            }
        }
        Ok((events, upto.max(from - 1), head))
    }
}

impl StoredEvent {
    fn into_watch_event(self, revision: Revision) -> WatchEvent {
        match self {
            StoredEvent::Put { key, kv } => WatchEvent::Put(kv.into_key_value(key)),
            StoredEvent::Delete { key } => WatchEvent::Delete { key, revision },
        }
    }

    fn from_watch_event(event: &WatchEvent) -> Self {
        match event {
            WatchEvent::Put(kv) => StoredEvent::Put {
                key: kv.key.clone(),
                kv: StoredKv::from_key_value(kv),
            },
            WatchEvent::Delete { key, .. } => StoredEvent::Delete { key: key.clone() },
        }
    }
}

/// The tables a write opens, for the length of one redb write transaction.
struct Tables<'w> {
    kv: Table<'w, &'static str, &'static [u8]>,
    leases: Table<'w, i64, i64>,
    lease_keys: Table<'w, (i64, &'static str), ()>,
    history: Table<'w, i64, &'static [u8]>,
    meta: Table<'w, &'static str, i64>,
}

impl<'w> Tables<'w> {
    fn open(inner: &Inner, write: &'w redb::WriteTransaction) -> Result<Self, Error> {
        Ok(Self {
            kv: write
                .open_table(KV)
                .map_err(|e| inner.disk("open table kv", e))?,
            leases: write
                .open_table(LEASES)
                .map_err(|e| inner.disk("open table leases", e))?,
            lease_keys: write
                .open_table(LEASE_KEYS)
                .map_err(|e| inner.disk("open table lease_keys", e))?,
            history: write
                .open_table(HISTORY)
                .map_err(|e| inner.disk("open table history", e))?,
            meta: write
                .open_table(META)
                .map_err(|e| inner.disk("open table meta", e))?,
        })
    }

    /// Applies one op at `revision`, adding its changes to `events`.
    fn apply(
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
    fn delete(
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
    fn record(
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
        let floor = revision - inner.history_revisions + 1;
        if floor > inner.oldest(&self.meta)? {
            self.history
                .retain_in(..floor, |_, _| false)
                .map_err(|e| inner.disk("trim history", e))?;
            self.meta
                .insert(META_OLDEST, floor)
                .map_err(|e| inner.disk("write the oldest revision", e))?;
        }
        Ok(())
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

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        if txn.writes() {
            self.blocking(true, move |inner| inner.write_txn(&txn))
                .await
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
        if from_revision < 0 {
            return Err(Error::Invalid(format!(
                "a watch starts at a revision >= 0, not {from_revision}"
            )));
        }
        let (receiver, head, oldest) = self.blocking(false, Inner::subscribe).await?;
        let last = if from_revision == 0 {
            head
        } else if from_revision < oldest {
            return Err(Error::Compacted {
                requested: from_revision,
                oldest,
            });
        } else {
            from_revision - 1
        };
        let watcher = Watcher {
            store: Arc::downgrade(&self.inner),
            receiver,
            prefix: prefix.to_owned(),
            last,
            catch_up_to: head,
            refill: false,
            pending: VecDeque::new(),
            ended: false,
        };
        Ok(Box::pin(futures::stream::unfold(watcher, Watcher::next)))
    }
}

/// A watch's state: it owns no task, only a broadcast receiver and a [`Weak`] to the store,
/// so dropping it (or the store) leaves nothing running.
struct Watcher {
    store: Weak<Inner>,
    receiver: broadcast::Receiver<Arc<Commit>>,
    prefix: String,
    /// every revision up to this one was delivered (or did not touch the prefix)
    last: Revision,
    /// history must be read up to here before the broadcast is followed again
    catch_up_to: Revision,
    /// the broadcast dropped commits: re-read history up to the current revision
    refill: bool,
    /// events read but not yet delivered
    pending: VecDeque<WatchEvent>,
    /// an error was delivered; the stream ends
    ended: bool,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<WatchEvent, Error>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            if self.refill || self.last < self.catch_up_to {
                if let Err(error) = self.read_backlog().await {
                    self.ended = true;
                    return Some((Err(error), self));
                }
                continue;
            }
            match self.receiver.recv().await {
                Ok(commit) if commit.revision <= self.last => {}
                Ok(commit) if commit.revision == self.last + 1 => {
                    let prefix = &self.prefix;
                    self.pending.extend(
                        commit
                            .events
                            .iter()
                            .filter(|event| event.key().starts_with(prefix.as_str()))
                            .cloned(),
                    );
                    self.last = commit.revision;
                }
                // a gap: the missing revisions are in history (committed before this was sent)
                Ok(commit) => self.catch_up_to = commit.revision,
                Err(broadcast::error::RecvError::Lagged(_)) => self.refill = true,
                Err(broadcast::error::RecvError::Closed) => {
                    self.ended = true;
                    return Some((Err(closed()), self));
                }
            }
        }
    }

    async fn read_backlog(&mut self) -> Result<(), Error> {
        let store = self.store.upgrade().ok_or_else(closed)?;
        let prefix = self.prefix.clone();
        let from = self.last + 1;
        let (events, upto, head) =
            tokio::task::spawn_blocking(move || store.read_history(&prefix, from))
                .await
                .map_err(|error| {
                    Error::Unavailable(format!("embedded store watch read failed: {error}"))
                })??;
        self.pending.extend(events);
        self.last = self.last.max(upto);
        self.catch_up_to = self.catch_up_to.max(head);
        self.refill = false;
        Ok(())
    }
}

fn closed() -> Error {
    Error::Unavailable("the embedded store was closed; reopen it and watch again".into())
}

/// Expires leases whose deadline passed, until the store is dropped.
async fn reap_expired_leases(store: Weak<Inner>) {
    let mut tick = tokio::time::interval(EXPIRY_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = store.upgrade() else {
            return;
        };
        let due = inner.due_leases(Instant::now());
        if due.is_empty() {
            continue;
        }
        let ended = tokio::task::spawn_blocking(move || {
            due.into_iter()
                .map(|id| (id, inner.lease_end(id, LeaseEnd::Expiry)))
                .collect::<Vec<_>>()
        })
        .await;
        match ended {
            Ok(results) => {
                for (lease, result) in results {
                    if let Err(error) = result {
                        // retried on the next tick
                        tracing::warn!(lease, %error, "could not expire lease");
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "lease reaper task failed"),
        }
    }
}

fn ttl_duration(ttl_seconds: i64) -> Duration {
    Duration::from_secs(u64::try_from(ttl_seconds).unwrap_or(0))
}

fn encode<T: Serialize>(what: &str, value: &T) -> Result<Vec<u8>, Error> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).map_err(|error| {
        Error::Invalid(format!(
            "could not encode {what} for the embedded store: {error}"
        ))
    })
}

fn decode<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T, Error> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(value, _)| value)
        .map_err(|error| Error::Decode {
            key: what.to_owned(),
            message: error.to_string(),
        })
}

/// Names what went wrong with the redb file and what to do about it.
fn disk(path: &Path, doing: &str, error: impl Into<redb::Error>) -> Error {
    let error: redb::Error = error.into();
    let message = match &error {
        redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => format!(
            "{doing}: another process holds the store open: stop it, or use another --data-dir"
        ),
        redb::Error::ValueTooLarge(size) => {
            return Error::Invalid(format!(
                "a value of {size} bytes is larger than the embedded store accepts"
            ));
        }
        redb::Error::Corrupted(detail) => format!(
            "{doing}: the file is corrupted ({detail}): restore it from a backup, or move it aside to start empty"
        ),
        redb::Error::UpgradeRequired(version) => format!(
            "{doing}: the file has redb format {version}, older than this build reads: open it with the boxfleet build that wrote it, or move it aside"
        ),
        redb::Error::Io(io) => format!(
            "{doing}: {io}: check that the disk has space and the data dir is readable and writable"
        ),
        other => format!("{doing}: {other}"),
    };
    Error::Disk {
        path: path.display().to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use futures::StreamExt;

    use super::*;
    use crate::store::{Compare, CompareOp, StoreExt};

    async fn open(dir: &Path) -> EmbeddedStore {
        EmbeddedStore::open(dir).await.unwrap()
    }

    /// Reopens after a drop: the lease reaper may hold the file for an instant longer.
    async fn reopen(dir: &Path, options: EmbeddedOptions) -> EmbeddedStore {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match EmbeddedStore::open_with(dir, options.clone()).await {
                Ok(store) => return store,
                Err(error) if Instant::now() < deadline => {
                    tracing::debug!(%error, "store still open, retrying");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => panic!("reopen failed: {error}"),
            }
        }
    }

    async fn must_next(stream: &mut WatchStream) -> WatchEvent {
        tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("watch event in time")
            .expect("watch still open")
            .expect("watch event, not an error")
    }

    async fn wait_until<F, Fut>(what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check().await {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

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

    #[tokio::test]
    async fn lease_expiry_deletes_attached_keys_in_one_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let lease = store.lease_grant(1).await.unwrap();
        assert!(lease > 0);
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), Some(1));
        store
            .txn(Txn::new().and_then([
                Op::put_on_lease("s/a", "a", lease),
                Op::put_on_lease("s/b", "b", lease),
                Op::put_on_lease("s/c", "c", lease),
                Op::put("s/free", "free"),
            ]))
            .await
            .unwrap();
        // a put without a lease detaches the key
        store.put("s/c", b"kept".to_vec()).await.unwrap();
        assert_eq!(store.get("s/a").await.unwrap().unwrap().lease, lease);
        assert_eq!(store.get("s/c").await.unwrap().unwrap().lease, 0);
        let mut watch = store.watch("s/", 0).await.unwrap();
        let before = store.revision().await.unwrap();

        wait_until("the lease expired", || async {
            store.get("s/a").await.unwrap().is_none()
        })
        .await;
        let first = must_next(&mut watch).await;
        let second = must_next(&mut watch).await;
        assert_eq!(
            [first, second],
            [
                WatchEvent::Delete {
                    key: "s/a".into(),
                    revision: before + 1
                },
                WatchEvent::Delete {
                    key: "s/b".into(),
                    revision: before + 1
                },
            ]
        );
        assert_eq!(store.revision().await.unwrap(), before + 1);
        let keys: Vec<_> = store
            .range("s/")
            .await
            .unwrap()
            .kvs
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        assert_eq!(keys, ["s/c", "s/free"]);
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), None);
        assert!(matches!(
            store.lease_keep_alive(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        assert!(matches!(
            store.lease_revoke(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        // a put on the gone lease is refused whole
        let refused = store
            .txn(Txn::new().and_then([Op::put("s/x", "x"), Op::put_on_lease("s/y", "y", lease)]))
            .await;
        match refused {
            Err(Error::Invalid(message)) => {
                assert_eq!(message, "a put names a lease that expired or was revoked");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(store.get("s/x").await.unwrap().is_none());
        assert_eq!(store.revision().await.unwrap(), before + 1);
    }

    #[tokio::test]
    async fn keep_alive_holds_a_lease_and_revoke_ends_it_in_one_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let lease = store.lease_grant(1).await.unwrap();
        let other = store.lease_grant(30).await.unwrap();
        assert_ne!(lease, other);
        store
            .txn(Txn::new().and_then([
                Op::put_on_lease("k1", "1", lease),
                Op::put_on_lease("k2", "2", lease),
            ]))
            .await
            .unwrap();
        // kept alive past several TTLs
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert_eq!(store.lease_keep_alive(lease).await.unwrap(), 1);
        }
        assert!(store.get("k1").await.unwrap().is_some());

        let before = store.revision().await.unwrap();
        let mut watch = store.watch("", 0).await.unwrap();
        store.lease_revoke(lease).await.unwrap();
        assert_eq!(store.revision().await.unwrap(), before + 1);
        for key in ["k1", "k2"] {
            assert_eq!(
                must_next(&mut watch).await,
                WatchEvent::Delete {
                    key: key.into(),
                    revision: before + 1
                }
            );
        }
        assert_eq!(store.lease_time_to_live(lease).await.unwrap(), None);
        // revoking a lease with no keys changes no revision
        store.lease_revoke(other).await.unwrap();
        assert_eq!(store.revision().await.unwrap(), before + 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn watch_delivers_backlog_then_live_without_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        for n in 0..40 {
            store
                .put(&format!("w/{n:03}"), n.to_string().into_bytes())
                .await
                .unwrap();
            store.put("other/x", b"noise".to_vec()).await.unwrap();
        }
        // revisions 2..=81; w/ writes are at even revisions
        let mut watch = store.watch("w/", 10).await.unwrap();
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 40..400 {
                    store
                        .txn(Txn::new().and_then([
                            Op::put(format!("w/{n:03}"), n.to_string()),
                            Op::put("other/x", "noise"),
                        ]))
                        .await
                        .unwrap();
                }
            })
        };
        let mut expected = Vec::new();
        expected.extend((4..40).map(|n| (2 + 2 * n, format!("w/{n:03}"))));
        expected.extend((40..400).map(|n| (82 + (n - 40), format!("w/{n:03}"))));
        let last_revision = expected.last().unwrap().0;
        let mut seen = Vec::new();
        while seen.len() < expected.len() {
            let event = must_next(&mut watch).await;
            seen.push((event.revision(), event.key().to_owned()));
            // now and then stop reading until the writer is further ahead than the broadcast
            // holds, so the watch must refill from history while the writer goes on
            if seen.len() % 100 == 0 {
                let ahead = store.revision().await.unwrap() + BROADCAST_CAPACITY as i64 + 5;
                let target = ahead.min(last_revision);
                wait_until("the writer got ahead", || async {
                    store.revision().await.unwrap() >= target
                })
                .await;
            }
        }
        writer.await.unwrap();
        assert_eq!(seen, expected);
        // and nothing more
        assert!(
            tokio::time::timeout(Duration::from_millis(300), watch.next())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn watch_lagging_far_behind_refills_from_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let mut watch = store.watch("", 0).await.unwrap();
        let count = BROADCAST_CAPACITY as i64 * 2 + 17;
        for n in 0..count {
            store.put("k", n.to_string().into_bytes()).await.unwrap();
        }
        for n in 0..count {
            let event = must_next(&mut watch).await;
            assert_eq!(event.revision(), n + 2);
            let WatchEvent::Put(kv) = event else {
                panic!("put expected");
            };
            assert_eq!(kv.value, n.to_string().into_bytes());
            assert_eq!(kv.version, n + 1);
        }
    }

    #[tokio::test]
    async fn watch_below_kept_history_is_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_revisions: 5,
        };
        let store = EmbeddedStore::open_with(dir.path(), options).await.unwrap();
        // a fresh store keeps everything; these watches fall behind the kept window below
        let mut backlog = store.watch("", 1).await.unwrap();
        let mut live = store.watch("", 0).await.unwrap();
        store.put("k", vec![0]).await.unwrap();
        assert_eq!(must_next(&mut live).await.revision(), 2);
        for n in 1..20 {
            store.put("k", vec![n]).await.unwrap();
        }
        assert_eq!(store.revision().await.unwrap(), 21);
        match store.watch("", 16).await {
            Err(Error::Compacted { requested, oldest }) => {
                assert_eq!((requested, oldest), (16, 17));
            }
            Err(other) => panic!("expected Compacted, got {other}"),
            Ok(_) => panic!("expected Compacted, got a watch"),
        }
        let mut kept = store.watch("", 17).await.unwrap();
        for revision in 17..=21 {
            assert_eq!(must_next(&mut kept).await.revision(), revision);
        }

        // accepted at revision 1, its backlog was trimmed before it was read
        let end = backlog.next().await;
        assert!(
            matches!(
                end,
                Some(Err(Error::Compacted {
                    requested: 1,
                    oldest: 17
                }))
            ),
            "{end:?}"
        );
        assert!(backlog.next().await.is_none());

        // a live watch that falls further behind than the broadcast holds must refill from
        // history, which is gone too
        for n in 0..BROADCAST_CAPACITY + 10 {
            store.put("k", n.to_le_bytes().to_vec()).await.unwrap();
        }
        let mut delivered = 0;
        let end = loop {
            match live.next().await {
                Some(Ok(_)) => delivered += 1,
                other => break other,
            }
        };
        assert!(
            matches!(end, Some(Err(Error::Compacted { requested, .. })) if requested > 2),
            "{end:?} after {delivered} events"
        );
    }

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

    #[tokio::test]
    async fn dropping_the_store_ends_its_watches() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path()).await;
        let mut watch = store.watch("", 0).await.unwrap();
        drop(store);
        let end = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap();
        assert!(matches!(end, Some(Err(Error::Unavailable(_)))), "{end:?}");
        assert!(watch.next().await.is_none());
    }
}
