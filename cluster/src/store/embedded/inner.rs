//! What the embedded store's handles and its background work share: the open redb file, the
//! commit lock and the change broadcast the watches read, and the leases' clocks. The files
//! beside it (`layout`, `txn`, `leases`, `watch`) each add what they do to [`Inner`]; this file
//! names none of them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use redb::Database;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::store::health::StoreHealth;
use crate::store::{LeaseId, Revision, WatchEvent};

/// What the store's handles and its background work share.
pub(super) struct Inner {
    /// the open file; written through a shared guard, taken whole only to compact it
    pub(super) db: RwLock<Database>,
    /// the redb file, named in every disk error
    pub(super) path: PathBuf,
    /// history length to keep, at least 1
    pub(super) history_revisions: i64,
    /// history bytes to keep: past them the oldest revisions go, however few are kept
    pub(super) history_bytes: i64,
    /// seconds of history to keep (0: by count and bytes alone)
    pub(super) history_seconds: i64,
    /// how far the history's bytes fell below the most they were since the file was last
    /// compacted: the space its dropped entries freed that no entry written since took
    /// again (a history held at its bounds drops as much as it writes, and frees nothing)
    pub(super) history_shrunk: AtomicU64,
    /// how much dropped history makes a compaction
    pub(super) compact_after_bytes: u64,
    /// down for good once the file failed a write: redb takes no write after an I/O error
    pub(super) health: StoreHealth,
    /// serializes every write and the watch subscriptions against them (see module docs)
    pub(super) commits: Mutex<()>,
    /// the txns waiting for the next commit (`group.rs`)
    pub(super) queue: Mutex<Vec<super::group::Queued>>,
    /// how many write transactions were committed (each one fsync)
    pub(super) commits_made: AtomicU64,
    /// every committed change set, in revision order, sent while `commits` is held
    pub(super) changes: broadcast::Sender<Arc<Commit>>,
    /// live leases and their deadlines; taken after `commits` when both are needed
    pub(super) leases: Mutex<HashMap<LeaseId, LeaseClock>>,
}

impl Inner {
    pub(super) fn lock_commits(&self) -> MutexGuard<'_, ()> {
        self.commits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open file, to begin a transaction on.
    pub(super) fn database(&self) -> std::sync::RwLockReadGuard<'_, Database> {
        self.db.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How many committed revisions a watch may fall behind before it re-reads them from history
/// (small in unit tests, so they reach the re-read path with few commits).
pub(super) const BROADCAST_CAPACITY: usize = if cfg!(test) { 64 } else { 1024 };

/// The changes of one revision, as broadcast to watchers.
#[derive(Debug)]
pub(super) struct Commit {
    pub(super) revision: Revision,
    pub(super) events: Vec<WatchEvent>,
}

/// A lease's clock, in memory only.
#[derive(Debug, Clone, Copy)]
pub(super) struct LeaseClock {
    pub(super) ttl_seconds: i64,
    pub(super) deadline: Instant,
}

/// Why a lease is being ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeaseEnd {
    /// [`Store::lease_revoke`](crate::store::Store::lease_revoke): the lease must exist.
    Revoke,
    /// The reaper: only if the deadline is still passed (a keep-alive may have won the race).
    Expiry,
}

pub(super) fn ttl_duration(ttl_seconds: i64) -> Duration {
    Duration::from_secs(u64::try_from(ttl_seconds).unwrap_or(0))
}
