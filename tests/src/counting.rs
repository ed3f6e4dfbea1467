//! A store that counts and times the calls made through it: gets, txns, and the rest (a
//! range, a lease call, a watch). The benchmarks read how many round trips a step of the
//! lifecycle makes, and how long they took.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use boxfleet_cluster::Error;
use boxfleet_cluster::store::{
    KeyValue, LeaseId, Op, Range, Revision, Store, Txn, TxnResponse, WatchStream,
};

#[derive(Debug, Default)]
pub struct CallStats {
    pub gets: AtomicU64,
    pub get_ns: AtomicU64,
    pub txns: AtomicU64,
    pub txn_ns: AtomicU64,
    pub others: AtomicU64,
    pub other_ns: AtomicU64,
    /// each call since the last reset, a line each (`get KEY`, `range PREFIX`, `txn KEY…`), so
    /// a bench can say where a step's round trips go
    pub calls: std::sync::Mutex<Vec<String>>,
}

#[derive(Debug, Clone, Copy)]
pub struct CallSnapshot {
    pub gets: u64,
    pub get_ns: u64,
    pub txns: u64,
    pub txn_ns: u64,
    pub others: u64,
    pub other_ns: u64,
}

impl CallStats {
    pub fn reset(&self) {
        for counter in [
            &self.gets,
            &self.get_ns,
            &self.txns,
            &self.txn_ns,
            &self.others,
            &self.other_ns,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        self.calls_made().clear();
    }

    /// The calls since the last reset, a line each.
    pub fn calls_made(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn snapshot(&self) -> CallSnapshot {
        CallSnapshot {
            gets: self.gets.load(Ordering::Relaxed),
            get_ns: self.get_ns.load(Ordering::Relaxed),
            txns: self.txns.load(Ordering::Relaxed),
            txn_ns: self.txn_ns.load(Ordering::Relaxed),
            others: self.others.load(Ordering::Relaxed),
            other_ns: self.other_ns.load(Ordering::Relaxed),
        }
    }
}

fn record(count: &AtomicU64, nanos: &AtomicU64, started: Instant) {
    count.fetch_add(1, Ordering::Relaxed);
    let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    nanos.fetch_add(elapsed, Ordering::Relaxed);
}

#[derive(Debug)]
pub struct Counting {
    pub inner: Arc<dyn Store>,
    pub stats: Arc<CallStats>,
}

impl Counting {
    /// Times one call into the inner store and counts it in `which`.
    async fn timed<T>(&self, which: (&AtomicU64, &AtomicU64), call: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let result = call.await;
        record(which.0, which.1, started);
        result
    }

    fn note(&self, call: String) {
        self.stats.calls_made().push(call);
    }

    fn gets(&self) -> (&AtomicU64, &AtomicU64) {
        (&self.stats.gets, &self.stats.get_ns)
    }

    fn txns(&self) -> (&AtomicU64, &AtomicU64) {
        (&self.stats.txns, &self.stats.txn_ns)
    }

    fn others(&self) -> (&AtomicU64, &AtomicU64) {
        (&self.stats.others, &self.stats.other_ns)
    }
}

#[async_trait::async_trait]
impl Store for Counting {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        self.note(format!("get {key}"));
        self.timed(self.gets(), self.inner.get(key)).await
    }
    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        self.note(format!("range {prefix}"));
        self.timed(self.others(), self.inner.range(prefix)).await
    }
    async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        self.note(format!("range (keys) {prefix}"));
        self.timed(self.others(), self.inner.range_keys(prefix))
            .await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        let keys: Vec<String> = txn
            .success
            .iter()
            .map(|op| match op {
                Op::Put { key, .. } => format!("put {key}"),
                Op::Delete { key } => format!("delete {key}"),
                Op::DeletePrefix { prefix } => format!("delete {prefix}*"),
                Op::Get { key } => format!("get {key}"),
            })
            .collect();
        self.note(format!("txn {}", keys.join(" ")));
        self.timed(self.txns(), self.inner.txn(txn)).await
    }
    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        self.timed(self.others(), self.inner.lease_grant(ttl_seconds))
            .await
    }
    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error> {
        self.timed(self.others(), self.inner.lease_keep_alive(lease))
            .await
    }
    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error> {
        self.timed(self.others(), self.inner.lease_revoke(lease))
            .await
    }
    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error> {
        self.timed(self.others(), self.inner.lease_time_to_live(lease))
            .await
    }
    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        self.timed(self.others(), self.inner.watch(prefix, from_revision))
            .await
    }
    fn health(&self) -> boxfleet_cluster::store::health::StoreHealth {
        self.inner.health()
    }
    fn max_request_bytes(&self) -> usize {
        self.inner.max_request_bytes()
    }
}
