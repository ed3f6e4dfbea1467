//! The simulation's store: etcd's data model in memory, on simulated time, with its faults
//! decided by the seed.
//!
//! What it keeps of etcd (each from etcd's API reference, `etcd.io/docs/v3.5/learning/api`):
//! one revision counter for the whole store, bumped once by every txn that writes; a key's
//! `create_revision`, `mod_revision` and `version`; a txn's compares all evaluated against the
//! state before it, then its success or failure ops applied in order at one revision; a put on
//! a lease that does not exist refused ("requested lease not found"); a lease's keys deleted
//! when it expires (its TTL from its grant or last keep-alive) or is revoked; a watch from a
//! revision replaying every change under its prefix since, then following, in revision order.
//!
//! Its faults, each drawn from the seed ([`Faults`]): a write refused before it applies
//! (`Unavailable`: a member lost), a write applied whose reply is lost and one not applied
//! whose call timed out (both `Indeterminate`), a read refused, a lease keep-alive refused (a
//! lease lapses when enough are), a watch cut (its stream ends with an error) or delayed, and
//! every call slowed by a simulated delay. A node's [`SimClient`] also carries the node's
//! life: once the simulation kills the node, every call it makes — and the one it is in, which
//! may or may not have applied — never returns, as a SIGKILLed process's never do.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_cluster::store::{
    Error, KeyValue, LeaseId, Op, OpResult, Range, Revision, Store, Target, Txn, TxnResponse,
    WatchEvent, WatchStream, compare_holds,
};
use rand::Rng;
use rand::rngs::StdRng;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How often each fault is drawn, per call (0: never). The simulation turns them off for its
/// quiet end, when every run must settle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    pub write_refused: f64,
    pub reply_lost: f64,
    pub write_timed_out: f64,
    pub read_refused: f64,
    pub keep_alive_refused: f64,
    pub watch_cut: f64,
    pub watch_delayed: f64,
    /// the longest simulated delay of one call
    pub slow_call: Duration,
}

impl Faults {
    pub const NONE: Faults = Faults {
        write_refused: 0.0,
        reply_lost: 0.0,
        write_timed_out: 0.0,
        read_refused: 0.0,
        keep_alive_refused: 0.0,
        watch_cut: 0.0,
        watch_delayed: 0.0,
        slow_call: Duration::ZERO,
    };

    /// A seed's faults: each kind at a rate of its own, up to a few percent of calls.
    pub fn drawn(rng: &mut StdRng) -> Faults {
        let mut rate = |most: f64| {
            if rng.random_bool(0.3) {
                0.0
            } else {
                rng.random_range(0.0..most)
            }
        };
        Faults {
            write_refused: rate(0.04),
            reply_lost: rate(0.03),
            write_timed_out: rate(0.02),
            read_refused: rate(0.03),
            keep_alive_refused: rate(0.2),
            watch_cut: rate(0.05),
            watch_delayed: rate(0.2),
            slow_call: Duration::from_millis(rng.random_range(0..300)),
        }
    }
}

/// A write that landed on a run's record: the invariants read these.
#[derive(Debug, Clone)]
pub struct Landed {
    pub revision: Revision,
    pub key: String,
    /// the value written, `None` for a delete
    pub value: Option<Vec<u8>>,
    /// the node whose client made the write
    pub node: String,
}

#[derive(Debug)]
struct Lease {
    ttl: i64,
    expires_at: Instant,
    keys: BTreeSet<String>,
}

#[derive(Debug)]
struct Watcher {
    prefix: String,
    tx: mpsc::UnboundedSender<Result<WatchEvent, Error>>,
}

#[derive(Debug, Default)]
struct World {
    /// where the fleet's keys live (`{prefix}/runs/…`, `{prefix}/seats/…/holder`)
    prefix: String,
    /// what the writes broke as they landed: a run written under an epoch its seat's holder
    /// key does not have, two incarnations holding one seat in one epoch
    violations: Vec<String>,
    /// each (seat, epoch)'s holder incarnation
    epochs: BTreeMap<(String, i64), String>,
    revision: Revision,
    kvs: BTreeMap<String, KeyValue>,
    leases: BTreeMap<LeaseId, Lease>,
    next_lease: LeaseId,
    /// every change, in revision order (the simulation keeps its whole history)
    history: Vec<WatchEvent>,
    watchers: Vec<Watcher>,
    /// every write, for the invariants
    landed: Vec<Landed>,
}

/// The store every simulated node shares.
#[derive(Debug)]
pub struct SimStore {
    world: Mutex<World>,
    rng: Arc<Mutex<StdRng>>,
    faults: Mutex<Faults>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SimStore {
    pub fn new(rng: Arc<Mutex<StdRng>>, faults: Faults, prefix: &str) -> Arc<SimStore> {
        Arc::new(SimStore {
            world: Mutex::new(World {
                next_lease: 0x1000,
                prefix: prefix.to_owned(),
                ..World::default()
            }),
            rng,
            faults: Mutex::new(faults),
        })
    }

    /// The faults drawn from here on.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.faults) = faults;
    }

    fn faults(&self) -> Faults {
        *lock(&self.faults)
    }

    fn draw(&self, p: f64) -> bool {
        p > 0.0 && lock(&self.rng).random_bool(p.min(1.0))
    }

    fn delay(&self) -> Duration {
        let most = self.faults().slow_call;
        if most.is_zero() {
            return Duration::ZERO;
        }
        Duration::from_millis(lock(&self.rng).random_range(0..=most.as_millis() as u64))
    }

    /// What the writes broke as they landed (see `World::check_write`).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.world).violations.clone()
    }

    /// Every write that landed, in revision order.
    pub fn landed(&self) -> Vec<Landed> {
        lock(&self.world).landed.clone()
    }

    /// What is under `prefix` now (no fault, no delay: the simulation's own look).
    pub fn snapshot(&self, prefix: &str) -> Vec<KeyValue> {
        let mut world = lock(&self.world);
        world.expire(Instant::now());
        world
            .kvs
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv.clone())
            .collect()
    }

    /// Expires the leases whose TTL ran out (the simulation calls it as time passes).
    pub fn expire_leases(&self) {
        lock(&self.world).expire(Instant::now());
    }
}

impl World {
    /// The write invariants, checked as each write lands: a run's record is written (or
    /// deleted) only by a txn fenced to its seat's holder key as it is now — the txn compares
    /// the key's create_revision, the epoch, and landed, so the epoch it carried is current (no
    /// write lands under a stale epoch, nor under none) — and one seat's epoch is one
    /// incarnation's (no two nodes act for one seat in one epoch).
    fn check_write(
        &mut self,
        txn: &Txn,
        succeeded: bool,
        key: &str,
        value: Option<&[u8]>,
        revision: Revision,
    ) {
        let runs = format!("{}/runs/", self.prefix);
        let seats = format!("{}/seats/", self.prefix);
        if let Some(turn) = key.strip_prefix(&runs) {
            let written = value.or_else(|| self.kvs.get(key).map(|kv| kv.value.as_slice()));
            let Some(record) =
                written.and_then(|v| boxfleet_cluster::record::RunRecord::from_json(key, v).ok())
            else {
                self.violations
                    .push(format!("r{revision}: run {turn} written undecodable"));
                return;
            };
            let holder = format!("{seats}{}/holder", record.seat);
            let fenced = succeeded
                && txn.compares.iter().any(|c| {
                    c.key == holder
                        && matches!(c.target, Target::CreateRevision(epoch) if epoch > 0)
                });
            if !fenced {
                let what = if value.is_some() {
                    "written"
                } else {
                    "deleted"
                };
                self.violations.push(format!(
                    "r{revision}: run {turn} ({}) {what} by a txn not fenced to seat {}'s holder \
                     key: a write landed under no epoch or a stale one",
                    record.status, record.seat
                ));
            }
        } else if let Some(value) = value
            && let Some(seat) = key
                .strip_prefix(&seats)
                .and_then(|rest| rest.strip_suffix("/holder"))
        {
            let epoch = self.kvs.get(key).map_or(revision, |kv| kv.create_revision);
            let holder: Option<boxfleet_cluster::seat::Holder> = serde_json::from_slice(value).ok();
            let incarnation = holder.map(|h| h.incarnation).unwrap_or_default();
            let entry = self
                .epochs
                .entry((seat.to_owned(), epoch))
                .or_insert_with(|| incarnation.clone());
            if *entry != incarnation {
                let first = entry.clone();
                self.violations.push(format!(
                    "r{revision}: seat {seat}'s epoch {epoch} held by {first} and then {incarnation}: \
                     two nodes acting for one seat in one epoch"
                ));
            }
        }
    }

    fn emit(&mut self, event: WatchEvent) {
        self.watchers.retain(|w| !w.tx.is_closed());
        for watcher in &self.watchers {
            if event.key().starts_with(&watcher.prefix) {
                let _ = watcher.tx.send(Ok(event.clone()));
            }
        }
        self.history.push(event);
    }

    fn delete_key(&mut self, key: &str, revision: Revision) -> bool {
        let Some(old) = self.kvs.remove(key) else {
            return false;
        };
        if old.lease != 0
            && let Some(lease) = self.leases.get_mut(&old.lease)
        {
            lease.keys.remove(key);
        }
        self.emit(WatchEvent::Delete {
            key: key.to_owned(),
            revision,
        });
        true
    }

    fn expire(&mut self, now: Instant) {
        let due: Vec<LeaseId> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.expires_at <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.revoke(id);
        }
    }

    fn revoke(&mut self, id: LeaseId) -> bool {
        let Some(lease) = self.leases.remove(&id) else {
            return false;
        };
        if !lease.keys.is_empty() {
            self.revision += 1;
            let revision = self.revision;
            for key in lease.keys {
                self.kvs.remove(&key);
                self.emit(WatchEvent::Delete { key, revision });
            }
        }
        true
    }

    fn apply(&mut self, txn: &Txn, node: &str) -> Result<TxnResponse, Error> {
        let succeeded = txn
            .compares
            .iter()
            .all(|c| compare_holds(c, self.kvs.get(&c.key)));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        for op in ops {
            if let Op::Put { lease, .. } = op
                && *lease != 0
                && !self.leases.contains_key(lease)
            {
                return Err(Error::LeaseNotFound(*lease));
            }
        }
        let writes = ops.iter().any(Op::writes);
        let revision = if writes {
            self.revision + 1
        } else {
            self.revision
        };
        let mut results = Vec::new();
        let mut wrote = false;
        for op in ops {
            match op {
                Op::Get { key } => results.push(OpResult::Get(self.kvs.get(key).cloned())),
                Op::Put { key, value, lease } => {
                    let old = self.kvs.get(key).cloned();
                    if let Some(old) = &old
                        && old.lease != 0
                        && let Some(l) = self.leases.get_mut(&old.lease)
                    {
                        l.keys.remove(key);
                    }
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: old.as_ref().map_or(revision, |o| o.create_revision),
                        mod_revision: revision,
                        version: old.as_ref().map_or(1, |o| o.version + 1),
                        lease: *lease,
                    };
                    if *lease != 0
                        && let Some(l) = self.leases.get_mut(lease)
                    {
                        l.keys.insert(key.clone());
                    }
                    self.check_write(txn, succeeded, key, Some(value), revision);
                    self.kvs.insert(key.clone(), kv.clone());
                    self.emit(WatchEvent::Put(kv));
                    self.landed.push(Landed {
                        revision,
                        key: key.clone(),
                        value: Some(value.clone()),
                        node: node.to_owned(),
                    });
                    wrote = true;
                    results.push(OpResult::Put);
                }
                Op::Delete { key } => {
                    if self.kvs.contains_key(key) {
                        self.check_write(txn, succeeded, key, None, revision);
                    }
                    let deleted = self.delete_key(key, revision);
                    if deleted {
                        self.landed.push(Landed {
                            revision,
                            key: key.clone(),
                            value: None,
                            node: node.to_owned(),
                        });
                        wrote = true;
                    }
                    results.push(OpResult::Delete(i64::from(deleted)));
                }
                Op::DeletePrefix { prefix } => {
                    let keys: Vec<String> = self
                        .kvs
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(prefix.as_str()))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in &keys {
                        self.delete_key(key, revision);
                        self.landed.push(Landed {
                            revision,
                            key: key.clone(),
                            value: None,
                            node: node.to_owned(),
                        });
                    }
                    wrote |= !keys.is_empty();
                    results.push(OpResult::Delete(keys.len() as i64));
                }
            }
        }
        // etcd bumps the revision for a txn that writes, even one whose deletes found nothing
        if writes {
            self.revision = revision;
        }
        let _ = wrote;
        Ok(TxnResponse {
            succeeded,
            revision: self.revision,
            results,
        })
    }
}

/// One node process's client of the [`SimStore`]: its calls fail as the seed decides, and
/// once the node is killed they never return.
#[derive(Debug, Clone)]
pub struct SimClient {
    store: Arc<SimStore>,
    node: String,
    alive: Arc<AtomicBool>,
}

impl SimClient {
    pub fn new(store: Arc<SimStore>, node: &str, alive: Arc<AtomicBool>) -> SimClient {
        SimClient {
            store,
            node: node.to_owned(),
            alive,
        }
    }

    /// `SIM_CALLS=1`: every call the nodes make, in order, to stderr (two runs of one seed
    /// that part show where by the first line their call logs differ).
    fn log_call(&self, what: &str, key: &str) {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *ON.get_or_init(|| std::env::var_os("SIM_CALLS").is_some()) {
            eprintln!("sim call {} {what} {key}", self.node);
        }
    }

    /// The call's simulated latency; a dead node's call never comes back.
    async fn enter(&self) {
        let delay = self.store.delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.hang_if_dead().await;
    }

    async fn hang_if_dead(&self) {
        if !self.alive.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }

    fn world(&self) -> MutexGuard<'_, World> {
        let mut world = lock(&self.store.world);
        world.expire(Instant::now());
        world
    }

    fn read_refused(&self) -> Result<(), Error> {
        if self.store.draw(self.store.faults().read_refused) {
            return Err(Error::Unavailable(
                "simulated: a member is unreachable".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Store for SimClient {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        self.log_call("get", key);
        self.enter().await;
        self.read_refused()?;
        Ok(self.world().kvs.get(key).cloned())
    }

    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        self.log_call("range", prefix);
        self.enter().await;
        self.read_refused()?;
        let world = self.world();
        let kvs = world
            .kvs
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv.clone())
            .collect();
        Ok(Range {
            kvs,
            revision: world.revision,
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        let first = txn
            .success
            .first()
            .map_or(String::new(), |op| format!("{op:?}"));
        self.log_call("txn", &first.chars().take(80).collect::<String>());
        self.enter().await;
        let faults = self.store.faults();
        if !txn.writes() {
            self.read_refused()?;
            return self.world().apply(&txn, &self.node);
        }
        if self.store.draw(faults.write_refused) {
            return Err(Error::Unavailable(
                "simulated: the write was refused".into(),
            ));
        }
        if self.store.draw(faults.write_timed_out) {
            return Err(Error::Indeterminate(
                "simulated: the call timed out before the write applied".into(),
            ));
        }
        let applied = self.world().apply(&txn, &self.node)?;
        // the node may die with the write applied and its reply unread
        self.hang_if_dead().await;
        if self.store.draw(faults.reply_lost) {
            return Err(Error::Indeterminate(
                "simulated: the write applied and its reply was lost".into(),
            ));
        }
        Ok(applied)
    }

    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        self.log_call("lease_grant", "");
        self.enter().await;
        let mut world = self.world();
        world.next_lease += 1;
        let id = world.next_lease;
        world.leases.insert(
            id,
            Lease {
                ttl: ttl_seconds,
                expires_at: Instant::now() + Duration::from_secs(ttl_seconds.max(1) as u64),
                keys: BTreeSet::new(),
            },
        );
        Ok(id)
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error> {
        self.log_call("lease_keep_alive", &lease.to_string());
        self.enter().await;
        if self.store.draw(self.store.faults().keep_alive_refused) {
            return Err(Error::Unavailable(
                "simulated: the keep-alive was refused".into(),
            ));
        }
        let mut world = self.world();
        let Some(found) = world.leases.get_mut(&lease) else {
            return Err(Error::LeaseNotFound(lease));
        };
        found.expires_at = Instant::now() + Duration::from_secs(found.ttl.max(1) as u64);
        Ok(found.ttl)
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error> {
        self.log_call("lease_revoke", &lease.to_string());
        self.enter().await;
        if self.world().revoke(lease) {
            Ok(())
        } else {
            Err(Error::LeaseNotFound(lease))
        }
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error> {
        self.log_call("lease_time_to_live", &lease.to_string());
        self.enter().await;
        self.read_refused()?;
        let world = self.world();
        Ok(world.leases.get(&lease).map(|l| {
            l.expires_at
                .saturating_duration_since(Instant::now())
                .as_secs() as i64
        }))
    }

    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        self.log_call("watch", prefix);
        self.enter().await;
        self.read_refused()?;
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut world = self.world();
            if from_revision > 0 {
                for event in world.history.iter() {
                    if event.revision() >= from_revision && event.key().starts_with(prefix) {
                        let _ = tx.send(Ok(event.clone()));
                    }
                }
            }
            world.watchers.push(Watcher {
                prefix: prefix.to_owned(),
                tx,
            });
        }
        // the stream a node reads: delayed or cut as the seed decides, and silent once the
        // node is dead
        let store = self.store.clone();
        let alive = self.alive.clone();
        let stream = futures::stream::unfold(
            (rx, store, alive, false),
            |(mut rx, store, alive, cut)| async move {
                if cut {
                    return None;
                }
                let event = rx.recv().await?;
                let faults = store.faults();
                if store.draw(faults.watch_delayed) {
                    let delay = store.delay().max(Duration::from_millis(50));
                    tokio::time::sleep(delay).await;
                }
                if !alive.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                if store.draw(faults.watch_cut) {
                    let error = Err(Error::Unavailable("simulated: the watch was cut".into()));
                    return Some((error, (rx, store, alive, true)));
                }
                Some((event, (rx, store, alive, false)))
            },
        );
        Ok(Box::pin(stream))
    }
}
