//! The coordination store (DESIGN §5): one trait, two implementations, one conformance suite.
//!
//! - [`etcd::EtcdStore`]: the fleet store, over etcd-client.
//! - [`embedded::EmbeddedStore`]: the single-node default, durable in a data directory.
//! - [`failpoint::Faulty`] (feature `failpoints`): wraps either to make a write land and its
//!   reply be lost, so tests can drive the indeterminate path.
//! - [`health::StoreHealth`]: whether the store can be reached, as its calls last found it.
//!
//! The semantics are etcd's: one global revision counter bumped by every write txn; each key
//! carries `create_revision`, `mod_revision` and `version`; a txn evaluates all compares
//! atomically and applies one branch; leases delete their keys on expiry; a watch from a
//! revision delivers every later change of its prefix in revision order, or refuses with
//! [`Error::Compacted`] when that history is gone.

pub mod embedded;
pub mod etcd;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod health;
pub mod metered;

use std::fmt;
use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;

pub use crate::error::{Class, Error};

/// A store revision. 0 means "never": the `create_revision` of an absent key.
pub type Revision = i64;
/// A lease id; `0` never names a lease.
pub type LeaseId = i64;

/// A key and its value with the store's bookkeeping.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    /// the revision of the write that created the key (since its last delete)
    pub create_revision: Revision,
    /// the revision of the key's last write
    pub mod_revision: Revision,
    /// how many times the key was written since it was created (1 after the create)
    pub version: i64,
    /// the lease the key is attached to, 0 for none
    pub lease: LeaseId,
}

impl fmt::Debug for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyValue")
            .field("key", &self.key)
            .field("value", &String::from_utf8_lossy(&self.value))
            .field("create_revision", &self.create_revision)
            .field("mod_revision", &self.mod_revision)
            .field("version", &self.version)
            .field("lease", &self.lease)
            .finish()
    }
}

/// What a compare looks at. An absent key has create/mod revision and version 0 and no
/// value (a value compare on an absent key is false, as in etcd).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    ModRevision(Revision),
    CreateRevision(Revision),
    Version(i64),
    Value(Vec<u8>),
}

/// How a compare relates the key's field to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Greater,
    Less,
}

/// One condition of a txn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub key: String,
    pub op: CompareOp,
    pub target: Target,
}

impl Compare {
    pub fn mod_revision(key: impl Into<String>, op: CompareOp, revision: Revision) -> Self {
        Self {
            key: key.into(),
            op,
            target: Target::ModRevision(revision),
        }
    }
    pub fn create_revision(key: impl Into<String>, op: CompareOp, revision: Revision) -> Self {
        Self {
            key: key.into(),
            op,
            target: Target::CreateRevision(revision),
        }
    }
    pub fn version(key: impl Into<String>, op: CompareOp, version: i64) -> Self {
        Self {
            key: key.into(),
            op,
            target: Target::Version(version),
        }
    }
    pub fn value(key: impl Into<String>, op: CompareOp, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            op,
            target: Target::Value(value.into()),
        }
    }
    /// The key does not exist.
    pub fn absent(key: impl Into<String>) -> Self {
        Self::create_revision(key, CompareOp::Equal, 0)
    }
    /// The key is exactly as it was read (never written since), or still absent when `kv` is
    /// `None`.
    pub fn unchanged(key: impl Into<String>, read: Option<&KeyValue>) -> Self {
        Self::mod_revision(key, CompareOp::Equal, read.map_or(0, |kv| kv.mod_revision))
    }
}

/// One operation of a txn branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Write `value`; attach the key to `lease` (0 = none).
    Put {
        key: String,
        value: Vec<u8>,
        lease: LeaseId,
    },
    /// Delete one key.
    Delete { key: String },
    /// Delete every key under a prefix.
    DeletePrefix { prefix: String },
    /// Read one key inside the txn.
    Get { key: String },
}

impl Op {
    pub fn put(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease: 0,
        }
    }
    pub fn put_on_lease(key: impl Into<String>, value: impl Into<Vec<u8>>, lease: LeaseId) -> Self {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease,
        }
    }
    pub fn delete(key: impl Into<String>) -> Self {
        Op::Delete { key: key.into() }
    }
    pub fn get(key: impl Into<String>) -> Self {
        Op::Get { key: key.into() }
    }
    /// Whether this operation writes.
    pub fn writes(&self) -> bool {
        !matches!(self, Op::Get { .. })
    }
}

/// A multi-key compare transaction: if every compare holds, `success` is applied, else
/// `failure`, atomically, at one revision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    pub compares: Vec<Compare>,
    pub success: Vec<Op>,
    pub failure: Vec<Op>,
}

impl Txn {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn when(mut self, compares: impl IntoIterator<Item = Compare>) -> Self {
        self.compares.extend(compares);
        self
    }
    pub fn and_then(mut self, ops: impl IntoIterator<Item = Op>) -> Self {
        self.success.extend(ops);
        self
    }
    pub fn or_else(mut self, ops: impl IntoIterator<Item = Op>) -> Self {
        self.failure.extend(ops);
        self
    }
    /// Whether either branch writes; a txn that cannot write is safe to retry blindly.
    pub fn writes(&self) -> bool {
        self.success.iter().chain(&self.failure).any(Op::writes)
    }
}

/// What one op of the applied branch returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Put,
    /// how many keys were deleted
    Delete(i64),
    /// the key as the txn saw it (after the branch's earlier ops)
    Get(Option<KeyValue>),
}

/// A txn's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResponse {
    /// whether the compares held (the success branch was applied)
    pub succeeded: bool,
    /// the store revision after the txn: the txn's own revision when it wrote
    pub revision: Revision,
    /// one result per op of the applied branch
    pub results: Vec<OpResult>,
}

/// A prefix read at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// the keys in key order
    pub kvs: Vec<KeyValue>,
    /// the store revision the read saw
    pub revision: Revision,
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The key was written; `kv.mod_revision` is the change's revision.
    Put(KeyValue),
    /// The key was deleted at `revision` (explicitly, or by its lease's expiry).
    Delete { key: String, revision: Revision },
}

impl WatchEvent {
    pub fn revision(&self) -> Revision {
        match self {
            WatchEvent::Put(kv) => kv.mod_revision,
            WatchEvent::Delete { revision, .. } => *revision,
        }
    }
    pub fn key(&self) -> &str {
        match self {
            WatchEvent::Put(kv) => &kv.key,
            WatchEvent::Delete { key, .. } => key,
        }
    }
}

/// The events of a watch in revision order. It ends with an `Err` when the watch breaks
/// (store closed, connection lost); the caller re-watches from its last revision + 1.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, Error>> + Send>>;

/// The coordination store. Every write boxfleet makes is a [`Txn`]; see the module docs for
/// the semantics both implementations share.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// Reads one key.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error>;
    /// Reads every key under `prefix` (possibly empty), in key order.
    async fn range(&self, prefix: &str) -> Result<Range, Error>;
    /// Every key under `prefix` with its revisions and no value, in key order: the listing a
    /// reader pages through (`Runs.Events`), so no reply holds a whole prefix's values.
    async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        let mut range = self.range(prefix).await?;
        for kv in &mut range.kvs {
            kv.value = Vec::new();
        }
        Ok(range)
    }
    /// Applies a compare transaction.
    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error>;
    /// Grants a lease that lives `ttl_seconds` unless kept alive.
    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error>;
    /// Renews a lease to its full TTL and returns that TTL; [`Error::LeaseNotFound`] when it
    /// expired or was revoked.
    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error>;
    /// Revokes a lease, deleting every key attached to it. Revoking a gone lease is an
    /// [`Error::LeaseNotFound`].
    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error>;
    /// The seconds a lease has left, `None` when it is gone.
    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error>;
    /// Watches every key under `prefix`, starting with the changes at `from_revision`
    /// (`0` = from now on).
    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error>;
    /// Whether the store can be reached, as its calls last found it. A store that cannot be
    /// cut off from its data (the embedded one) is always reachable.
    fn health(&self) -> health::StoreHealth {
        health::StoreHealth::new()
    }
    /// The largest request the store takes: one txn, all its ops together. An event is sized
    /// to fit it beside the record it rides with (DESIGN §15), never assumed to.
    fn max_request_bytes(&self) -> usize {
        DEFAULT_MAX_REQUEST_BYTES
    }
}

/// What a store takes in one request unless it says otherwise: an event of up to 8 MiB
/// (DESIGN §15) and the run record beside it.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;

/// Convenience reads and writes built on the trait.
#[async_trait]
pub trait StoreExt: Store {
    /// Writes one key unconditionally (tests and tools; boxfleet's own writes are fenced txns).
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<Revision, Error> {
        let response = self.txn(Txn::new().and_then([Op::put(key, value)])).await?;
        Ok(response.revision)
    }
    /// The store's current revision.
    async fn revision(&self) -> Result<Revision, Error> {
        // a read of a key nobody writes reports the store's revision
        let response = self.txn(Txn::new().and_then([Op::get("\u{0}")])).await?;
        Ok(response.revision)
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// Decides one compare against a key's current state; shared by the embedded store and the
/// test model so both read compares exactly as etcd does.
pub fn compare_holds(compare: &Compare, current: Option<&KeyValue>) -> bool {
    use std::cmp::Ordering;
    let ordering = match (&compare.target, current) {
        (Target::Value(_), None) => return false,
        (Target::Value(target), Some(kv)) => kv.value.as_slice().cmp(target.as_slice()),
        (Target::ModRevision(target), kv) => kv.map_or(0, |kv| kv.mod_revision).cmp(target),
        (Target::CreateRevision(target), kv) => kv.map_or(0, |kv| kv.create_revision).cmp(target),
        (Target::Version(target), kv) => kv.map_or(0, |kv| kv.version).cmp(target),
    };
    match compare.op {
        CompareOp::Equal => ordering == Ordering::Equal,
        CompareOp::NotEqual => ordering != Ordering::Equal,
        CompareOp::Greater => ordering == Ordering::Greater,
        CompareOp::Less => ordering == Ordering::Less,
    }
}
