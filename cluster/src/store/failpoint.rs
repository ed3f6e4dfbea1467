//! Failpoints (feature `failpoints`): [`Faulty`] wraps any [`Store`] and, when armed through
//! its [`Faults`] handle, makes writing txns fail the two ways a real store can:
//!
//! - [`Faults::lose_next_reply`]: the txn is **applied** to the inner store, then the caller
//!   gets [`Error::Indeterminate`] (`"failpoint: reply lost"`), as when etcd commits a write
//!   and the connection drops before the answer arrives. The caller must re-read.
//! - [`Faults::fail_next_writes`]: the txn is **not** applied and the caller gets
//!   [`Error::Unavailable`], as when the store refuses before applying. A retry is safe.
//! - [`Faults::time_out_next_writes`]: the txn is **not** applied, yet the caller gets
//!   [`Error::Indeterminate`], as when a call to a member that died is timed out: a re-read
//!   finds nothing, and the caller must decide whether to send it again.
//!
//! Only txns that can write ([`Txn::writes`]) are faulted; reads, read-only txns, leases and
//! watches pass straight through. [`Faults::only_under`] narrows the faults to txns touching
//! keys under one prefix, so a test can aim at one component while others share the store.
//! When both kinds are armed, refusals are used up first.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{Error, KeyValue, LeaseId, Op, Range, Revision, Store, Txn, TxnResponse, WatchStream};

/// The message of the error a lost reply returns.
pub const REPLY_LOST: &str = "failpoint: reply lost";
/// The message of the error a timed-out, unapplied write returns.
pub const WRITE_TIMED_OUT: &str = "failpoint: write timed out";
/// The message of the error a refused write returns.
pub const WRITE_REFUSED: &str = "failpoint: write refused";

/// The handle that arms a [`Faulty`] store's faults; clones share the same faults.
#[derive(Clone, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// writing txns still to be applied with their reply lost
    lose_replies: u64,
    /// writing txns still to be refused unapplied
    fail_writes: u64,
    /// writing txns still to be timed out unapplied
    time_out_writes: u64,
    /// faults apply only to txns touching a key under this prefix
    only_under: Option<String>,
    /// replies lost so far (the txn landed)
    replies_lost: u64,
    /// writes refused so far
    writes_failed: u64,
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Faults").field(&*self.state()).finish()
    }
}

/// What to do to one txn.
enum Fault {
    None,
    Refuse,
    LoseReply,
    TimeOut,
}

impl Faults {
    /// A handle with nothing armed.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next `n` writing txns are applied to the inner store and then answer
    /// [`Error::Indeterminate`]. Replaces what was armed before.
    pub fn lose_next_reply(&self, n: u64) {
        self.state().lose_replies = n;
    }

    /// The next `n` writing txns answer [`Error::Unavailable`] without being applied.
    /// Replaces what was armed before.
    pub fn fail_next_writes(&self, n: u64) {
        self.state().fail_writes = n;
    }

    /// The next `n` writing txns answer [`Error::Indeterminate`] without being applied.
    pub fn time_out_next_writes(&self, n: u64) {
        self.state().time_out_writes = n;
    }

    /// Faults only txns with a compare or an op on a key under `prefix` (or a delete of a
    /// prefix covering it); other txns pass through and do not use up armed faults.
    pub fn only_under(&self, prefix: impl Into<String>) {
        self.state().only_under = Some(prefix.into());
    }

    /// Disarms everything (the counts of what happened are kept).
    pub fn clear(&self) {
        let mut state = self.state();
        state.lose_replies = 0;
        state.fail_writes = 0;
        state.time_out_writes = 0;
        state.only_under = None;
    }

    /// How many writes landed and had their reply lost so far.
    pub fn replies_lost(&self) -> u64 {
        self.state().replies_lost
    }

    /// How many writes were refused unapplied so far.
    pub fn writes_failed(&self) -> u64 {
        self.state().writes_failed
    }

    /// Faults still armed: (replies to lose, writes to refuse).
    pub fn armed(&self) -> (u64, u64) {
        let state = self.state();
        (state.lose_replies, state.fail_writes)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the fault this txn gets, if any, using it up.
    fn take(&self, txn: &Txn) -> Fault {
        if !txn.writes() {
            return Fault::None;
        }
        let mut state = self.state();
        if let Some(prefix) = &state.only_under
            && !touches(txn, prefix)
        {
            return Fault::None;
        }
        if state.fail_writes > 0 {
            state.fail_writes -= 1;
            state.writes_failed += 1;
            Fault::Refuse
        } else if state.time_out_writes > 0 {
            state.time_out_writes -= 1;
            Fault::TimeOut
        } else if state.lose_replies > 0 {
            state.lose_replies -= 1;
            Fault::LoseReply
        } else {
            Fault::None
        }
    }

    /// A lost reply's txn landed.
    fn landed(&self) {
        self.state().replies_lost += 1;
    }

    /// A lost reply's txn failed in the inner store, so nothing landed: the fault goes back
    /// for the next writing txn.
    fn give_back(&self) {
        self.state().lose_replies += 1;
    }
}

/// Whether the txn reads or writes a key under `prefix`.
fn touches(txn: &Txn, prefix: &str) -> bool {
    txn.compares
        .iter()
        .any(|compare| compare.key.starts_with(prefix))
        || txn.success.iter().chain(&txn.failure).any(|op| match op {
            Op::Put { key, .. } | Op::Delete { key } | Op::Get { key } => key.starts_with(prefix),
            Op::DeletePrefix { prefix: deleted } => {
                deleted.starts_with(prefix) || prefix.starts_with(deleted.as_str())
            }
        })
}

/// A store whose writing txns fail as its [`Faults`] say; everything else goes to the inner
/// store unchanged.
pub struct Faulty<S: ?Sized> {
    inner: Arc<S>,
    faults: Faults,
}

impl<S: ?Sized + fmt::Debug> fmt::Debug for Faulty<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faulty")
            .field("inner", &self.inner)
            .field("faults", &self.faults)
            .finish()
    }
}

impl<S: Store> Faulty<S> {
    /// Wraps `inner` with nothing armed.
    pub fn new(inner: S) -> Self {
        Self::from_arc(Arc::new(inner))
    }
}

impl<S: Store + ?Sized> Faulty<S> {
    /// Wraps a store that is shared (e.g. an `Arc<dyn Store>`) with nothing armed.
    pub fn from_arc(inner: Arc<S>) -> Self {
        Self {
            inner,
            faults: Faults::new(),
        }
    }

    /// The handle that arms this store's faults.
    pub fn faults(&self) -> Faults {
        self.faults.clone()
    }

    /// The wrapped store, for reads that must not go through the failpoints.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for Faulty<S> {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        self.inner.get(key).await
    }

    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        self.inner.range(prefix).await
    }

    async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        self.inner.range_keys(prefix).await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        match self.faults.take(&txn) {
            Fault::None => self.inner.txn(txn).await,
            Fault::Refuse => Err(Error::Unavailable(WRITE_REFUSED.into())),
            Fault::TimeOut => Err(Error::Indeterminate(WRITE_TIMED_OUT.into())),
            Fault::LoseReply => match self.inner.txn(txn).await {
                Ok(_) => {
                    self.faults.landed();
                    Err(Error::Indeterminate(REPLY_LOST.into()))
                }
                Err(error) => {
                    if !error.is_indeterminate() {
                        self.faults.give_back();
                    }
                    Err(error)
                }
            },
        }
    }

    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        self.inner.lease_grant(ttl_seconds).await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error> {
        self.inner.lease_keep_alive(lease).await
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error> {
        self.inner.lease_revoke(lease).await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error> {
        self.inner.lease_time_to_live(lease).await
    }

    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        self.inner.watch(prefix, from_revision).await
    }

    fn health(&self) -> super::health::StoreHealth {
        self.inner.health()
    }
    fn max_request_bytes(&self) -> usize {
        self.inner.max_request_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_used_up_in_order_and_only_by_writes() {
        let faults = Faults::new();
        faults.lose_next_reply(1);
        faults.fail_next_writes(1);
        let read = Txn::new().and_then([Op::get("/a")]);
        let write = Txn::new().and_then([Op::put("/a", "1")]);
        assert!(matches!(faults.take(&read), Fault::None));
        assert!(matches!(faults.take(&write), Fault::Refuse));
        assert!(matches!(faults.take(&write), Fault::LoseReply));
        assert!(matches!(faults.take(&write), Fault::None));
        assert_eq!(faults.writes_failed(), 1);
        assert_eq!(faults.armed(), (0, 0));
    }

    #[test]
    fn only_under_narrows_the_faults() {
        let faults = Faults::new();
        faults.only_under("/runs/");
        faults.fail_next_writes(1);
        let elsewhere = Txn::new().and_then([Op::put("/seats/x", "1")]);
        let covering = Txn::new().and_then([Op::DeletePrefix { prefix: "/".into() }]);
        assert!(matches!(faults.take(&elsewhere), Fault::None));
        assert!(matches!(faults.take(&covering), Fault::Refuse));
    }
}
