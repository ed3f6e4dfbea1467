//! # t01: the store conformance suite (DESIGN §5, §17)
//!
//! Scenario: boxfleet's correctness rests on a handful of store guarantees — revisions,
//! all-or-nothing multi-key compare txns, leases that delete their keys, prefix reads and
//! watches that resume from a revision without a gap. This suite proves each of them against
//! **both** stores, with the same check functions: every `check_*` below runs once as
//! `etcd_*` (a real etcd the harness starts; one shared etcd per test process, each test
//! under its own key prefix) and once as `embedded_*` (a fresh `EmbeddedStore` in a temp
//! dir). etcd is the reference: where a check passes on etcd and fails on the embedded store,
//! the embedded store diverges from the semantics boxfleet is written against.
//!
//! What it proves, check by check:
//! - `revisions`: each write that changes something bumps the revision by exactly one (a txn
//!   of several ops too); create/mod revision and version after put, overwrite, delete and
//!   recreate; txns, lease grants and revokes that change nothing leave it alone. Runs on a
//!   dedicated etcd, since the shared one's counter moves under other tests.
//! - `txn_compares`: every compare target × operator, absent keys read as 0 (and a value
//!   compare on one is false), all compares must hold, one branch applied atomically at one
//!   revision across several keys.
//! - `txn_ops`: `Get` results inside a txn see the branch's earlier ops; `Delete` counts;
//!   `DeletePrefix` deletes exactly the keys under the prefix.
//! - `cas_race`: N tasks doing read-modify-write with `Compare::unchanged`, retrying on
//!   failure, end with exactly N increments (and a two-key transfer keeps its sum).
//! - `lease_keep_alive`, `lease_revoke`, `lease_expiry`, `put_on_gone_lease`: leases keep
//!   their keys while kept alive, revoke and expiry delete exactly the attached keys, a gone
//!   lease is `LeaseNotFound`, and a txn that puts on one is a terminal error that writes
//!   nothing.
//! - `range_prefix`: only the keys under the prefix, in byte order, with the read's revision.
//! - `watch_from_revision`, `watch_from_now`: a watch from a revision in the middle of 50
//!   changes, while 50 more are written, delivers exactly the changes at and after that
//!   revision — in order, none missing or repeated, deletes (and a lease-expiry delete)
//!   included, with correct bookkeeping; a watch from 0 sees only what comes after it.
//! - `failpoints`: through `Faulty`, a write whose reply is lost has landed (a re-read shows
//!   it) and a refused write has not.
//! - `error_classes` (store-free) and `embedded_survives_restart` (embedded only).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::failpoint::{Faulty, REPLY_LOST};
use boxfleet_cluster::store::{
    Class, Compare, CompareOp, Error, KeyValue, Op, OpResult, Revision, Store, StoreExt, Target,
    Txn, TxnResponse, WatchEvent, WatchStream, compare_holds,
};
use boxfleet_tests::{EtcdServer, unique_prefix, wait_until};
use futures::StreamExt;

type Shared = Arc<dyn Store>;

/// Generates `etcd_$name` (shared real etcd) and `embedded_$name` (fresh embedded store) for
/// one check. `exclusive` gives the etcd test a dedicated etcd, for checks that count
/// revisions.
macro_rules! against_both {
    (exclusive $check:ident => $etcd:ident, $embedded:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $etcd() {
            let server = EtcdServer::start();
            let store: Shared = Arc::new(server.store().await);
            $check(store, unique_prefix(stringify!($etcd))).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $embedded() {
            let dir = tempfile::tempdir().expect("a temp dir");
            let store: Shared = Arc::new(open_embedded(dir.path()).await);
            $check(store, unique_prefix(stringify!($embedded))).await;
        }
    };
    ($check:ident => $etcd:ident, $embedded:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $etcd() {
            let store: Shared = Arc::new(EtcdServer::shared().store().await);
            $check(store, unique_prefix(stringify!($etcd))).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $embedded() {
            let dir = tempfile::tempdir().expect("a temp dir");
            let store: Shared = Arc::new(open_embedded(dir.path()).await);
            $check(store, unique_prefix(stringify!($embedded))).await;
        }
    };
}

against_both!(exclusive check_revisions => etcd_revisions, embedded_revisions);
against_both!(check_txn_compares => etcd_txn_compares, embedded_txn_compares);
against_both!(check_txn_ops => etcd_txn_ops, embedded_txn_ops);
against_both!(check_cas_race => etcd_cas_race, embedded_cas_race);
against_both!(check_lease_keep_alive => etcd_lease_keep_alive, embedded_lease_keep_alive);
against_both!(check_lease_revoke => etcd_lease_revoke, embedded_lease_revoke);
against_both!(check_lease_expiry => etcd_lease_expiry, embedded_lease_expiry);
against_both!(check_put_on_gone_lease => etcd_put_on_gone_lease, embedded_put_on_gone_lease);
against_both!(check_range_prefix => etcd_range_prefix, embedded_range_prefix);
against_both!(check_watch_from_revision => etcd_watch_from_revision, embedded_watch_from_revision);
against_both!(check_watch_from_now => etcd_watch_from_now, embedded_watch_from_now);
against_both!(check_failpoints => etcd_failpoints, embedded_failpoints);

// ---------------------------------------------------------------------------------------------
// small helpers: every store call states what it was doing when it fails

async fn open_embedded(dir: &std::path::Path) -> EmbeddedStore {
    EmbeddedStore::open(dir)
        .await
        .unwrap_or_else(|error| panic!("opening the embedded store in {}: {error}", dir.display()))
}

async fn txn(store: &dyn Store, txn: Txn) -> TxnResponse {
    let shown = format!("{txn:?}");
    store
        .txn(txn)
        .await
        .unwrap_or_else(|error| panic!("txn {shown}: {error}"))
}

/// Puts unconditionally; returns the write's revision.
async fn put(store: &dyn Store, key: &str, value: &str) -> Revision {
    let response = txn(store, Txn::new().and_then([Op::put(key, value)])).await;
    assert!(response.succeeded, "an unconditional txn succeeds");
    response.revision
}

async fn get(store: &dyn Store, key: &str) -> Option<KeyValue> {
    store
        .get(key)
        .await
        .unwrap_or_else(|error| panic!("get {key}: {error}"))
}

async fn must_get(store: &dyn Store, key: &str) -> KeyValue {
    get(store, key)
        .await
        .unwrap_or_else(|| panic!("{key} should exist"))
}

async fn revision(store: &dyn Store) -> Revision {
    store
        .revision()
        .await
        .unwrap_or_else(|error| panic!("reading the revision: {error}"))
}

fn value_of(kv: &KeyValue) -> &str {
    std::str::from_utf8(&kv.value).expect("test values are UTF-8")
}

/// (create_revision, mod_revision, version) — the bookkeeping a check states in one line.
fn book(kv: &KeyValue) -> (Revision, Revision, i64) {
    (kv.create_revision, kv.mod_revision, kv.version)
}

// ---------------------------------------------------------------------------------------------
// revisions

async fn check_revisions(store: Shared, prefix: String) {
    let store = &*store;
    let a = format!("{prefix}/a");
    let b = format!("{prefix}/b");
    let c = format!("{prefix}/c");

    assert_eq!(
        get(store, &a).await,
        None,
        "a key never written reads as None"
    );
    let r0 = revision(store).await;
    assert!(r0 >= 1, "a store's revision starts at 1 or more, got {r0}");
    let _ = get(store, &a).await;
    let range = store.range(&prefix).await.expect("range");
    assert_eq!(range.revision, r0, "a range reports the current revision");
    assert_eq!(revision(store).await, r0, "reads do not bump the revision");

    // create
    let r1 = put(store, &a, "1").await;
    assert_eq!(r1, r0 + 1, "a put bumps the revision by exactly one");
    let kv = must_get(store, &a).await;
    assert_eq!(book(&kv), (r1, r1, 1), "after create: {kv:?}");
    assert_eq!((value_of(&kv), kv.lease), ("1", 0));

    // overwrite
    let r2 = put(store, &a, "2").await;
    assert_eq!(r2, r1 + 1);
    let kv = must_get(store, &a).await;
    assert_eq!(book(&kv), (r1, r2, 2), "after overwrite: {kv:?}");
    assert_eq!(value_of(&kv), "2");

    // a write to another key leaves `a` alone
    let r3 = put(store, &b, "x").await;
    assert_eq!(r3, r2 + 1);
    assert_eq!(book(&must_get(store, &a).await), (r1, r2, 2));

    // several ops in one txn are one revision
    let response = txn(
        store,
        Txn::new().and_then([Op::put(&a, "3"), Op::put(&c, "y"), Op::delete(&b)]),
    )
    .await;
    let r4 = response.revision;
    assert_eq!(r4, r3 + 1, "a txn of three writes bumps the revision once");
    assert_eq!(
        response.results,
        vec![OpResult::Put, OpResult::Put, OpResult::Delete(1)]
    );
    assert_eq!(book(&must_get(store, &a).await), (r1, r4, 3));
    assert_eq!(book(&must_get(store, &c).await), (r4, r4, 1));
    assert_eq!(get(store, &b).await, None);

    // delete, then recreate: a new life, version 1 again
    let response = txn(store, Txn::new().and_then([Op::delete(&a)])).await;
    let r5 = response.revision;
    assert_eq!(r5, r4 + 1, "a delete bumps the revision by one");
    assert_eq!(response.results, vec![OpResult::Delete(1)]);
    assert_eq!(get(store, &a).await, None, "deleted");
    let r6 = put(store, &a, "again").await;
    assert_eq!(r6, r5 + 1);
    assert_eq!(
        book(&must_get(store, &a).await),
        (r6, r6, 1),
        "a recreated key starts over"
    );

    // txns that change nothing do not bump the revision (as in etcd)
    let response = txn(
        store,
        Txn::new()
            .when([Compare::value(&a, CompareOp::Equal, "not it")])
            .and_then([Op::put(&a, "never")]),
    )
    .await;
    assert!(!response.succeeded);
    assert_eq!(
        (response.revision, response.results.len()),
        (r6, 0),
        "a failed txn with an empty failure branch writes nothing"
    );
    let response = txn(store, Txn::new().and_then([Op::get(&a)])).await;
    assert_eq!(response.revision, r6, "a read-only txn");
    let response = txn(
        store,
        Txn::new().and_then([Op::delete(format!("{prefix}/absent"))]),
    )
    .await;
    assert_eq!(
        (response.revision, &response.results[..]),
        (r6, &[OpResult::Delete(0)][..]),
        "deleting an absent key changes nothing, so no new revision"
    );
    let response = txn(
        store,
        Txn::new().and_then([Op::DeletePrefix {
            prefix: format!("{prefix}/none/"),
        }]),
    )
    .await;
    assert_eq!(
        (response.revision, &response.results[..]),
        (r6, &[OpResult::Delete(0)][..]),
        "a DeletePrefix matching nothing"
    );

    // leases: granting, renewing and revoking a keyless lease are not writes to the keyspace
    let lease = store.lease_grant(30).await.expect("grant");
    store.lease_keep_alive(lease).await.expect("keep alive");
    assert_eq!(revision(store).await, r6, "lease grant and keep-alive");
    let empty = store.lease_grant(30).await.expect("grant");
    store.lease_revoke(empty).await.expect("revoke");
    assert_eq!(revision(store).await, r6, "revoking a lease with no keys");

    // revoking a lease with two keys deletes both at one revision
    let leased_1 = format!("{prefix}/leased/1");
    let leased_2 = format!("{prefix}/leased/2");
    let response = txn(
        store,
        Txn::new().and_then([
            Op::put_on_lease(&leased_1, "1", lease),
            Op::put_on_lease(&leased_2, "2", lease),
        ]),
    )
    .await;
    let r7 = response.revision;
    assert_eq!(r7, r6 + 1);
    store.lease_revoke(lease).await.expect("revoke");
    assert_eq!(
        revision(store).await,
        r7 + 1,
        "a revoke deletes its keys in one revision"
    );
    assert_eq!(get(store, &leased_1).await, None);
    assert_eq!(get(store, &leased_2).await, None);

    // a txn refused for its gone lease writes nothing, not even its other ops
    let refused = store
        .txn(Txn::new().and_then([
            Op::put(format!("{prefix}/beside"), "x"),
            Op::put_on_lease(&leased_1, "1", lease),
        ]))
        .await;
    assert!(refused.is_err(), "put on a revoked lease: {refused:?}");
    assert_eq!(
        revision(store).await,
        r7 + 1,
        "a refused txn writes nothing"
    );

    // a failure branch that writes is one revision too
    let response = txn(
        store,
        Txn::new()
            .when([Compare::absent(&a)])
            .and_then([Op::put(format!("{prefix}/then"), "x")])
            .or_else([
                Op::put(format!("{prefix}/else/1"), "x"),
                Op::put(format!("{prefix}/else/2"), "x"),
            ]),
    )
    .await;
    assert!(!response.succeeded);
    assert_eq!(response.revision, r7 + 2, "the failure branch's writes");
    assert_eq!(get(store, &format!("{prefix}/then")).await, None);
    let range = store
        .range(&format!("{prefix}/else/"))
        .await
        .expect("range");
    assert_eq!(range.kvs.len(), 2);
    assert!(range.kvs.iter().all(|kv| kv.mod_revision == r7 + 2));
    assert_eq!(range.revision, r7 + 2);
}

// ---------------------------------------------------------------------------------------------
// compare txns

async fn check_txn_compares(store: Shared, prefix: String) {
    let store = &*store;
    let a = format!("{prefix}/a");
    let b = format!("{prefix}/b");
    let c = format!("{prefix}/c"); // never written

    put(store, &a, "1").await;
    put(store, &b, "2").await;
    put(store, &b, "3").await;
    let kv_a = must_get(store, &a).await;
    let kv_b = must_get(store, &b).await;
    let (ra, rb_create, rb_mod) = (kv_a.mod_revision, kv_b.create_revision, kv_b.mod_revision);
    assert!(rb_create < rb_mod && kv_b.version == 2, "{kv_b:?}");

    use CompareOp::{Equal, Greater, Less, NotEqual};
    let cases: Vec<(Compare, bool)> = vec![
        // mod_revision
        (Compare::mod_revision(&a, Equal, ra), true),
        (Compare::mod_revision(&a, NotEqual, ra), false),
        (Compare::mod_revision(&a, NotEqual, ra + 1), true),
        (Compare::mod_revision(&a, Greater, ra - 1), true),
        (Compare::mod_revision(&a, Greater, ra), false),
        (Compare::mod_revision(&a, Less, ra + 1), true),
        (Compare::mod_revision(&a, Less, ra), false),
        (Compare::mod_revision(&b, Equal, rb_mod), true),
        (Compare::mod_revision(&b, Equal, rb_create), false),
        // create_revision
        (Compare::create_revision(&b, Equal, rb_create), true),
        (Compare::create_revision(&b, Equal, rb_mod), false),
        (Compare::create_revision(&b, Less, rb_mod), true),
        (Compare::create_revision(&b, Greater, rb_create), false),
        (Compare::create_revision(&b, NotEqual, 0), true),
        // version
        (Compare::version(&b, Equal, 2), true),
        (Compare::version(&b, Equal, 1), false),
        (Compare::version(&b, NotEqual, 2), false),
        (Compare::version(&b, Greater, 1), true),
        (Compare::version(&b, Greater, 2), false),
        (Compare::version(&b, Less, 3), true),
        (Compare::version(&b, Less, 2), false),
        // value (byte order)
        (Compare::value(&a, Equal, "1"), true),
        (Compare::value(&a, Equal, "10"), false),
        (Compare::value(&a, NotEqual, "1"), false),
        (Compare::value(&a, NotEqual, "2"), true),
        (Compare::value(&a, Greater, "0"), true),
        (Compare::value(&a, Greater, "1"), false),
        (Compare::value(&a, Less, "2"), true),
        (Compare::value(&a, Less, "10"), true),
        (Compare::value(&a, Less, "1"), false),
        // an absent key reads as 0 ...
        (Compare::mod_revision(&c, Equal, 0), true),
        (Compare::mod_revision(&c, Less, 1), true),
        (Compare::create_revision(&c, Equal, 0), true),
        (Compare::create_revision(&c, Greater, 0), false),
        (Compare::version(&c, Equal, 0), true),
        (Compare::version(&c, Greater, 0), false),
        (Compare::version(&c, NotEqual, 0), false),
        // ... and any value compare on it is false
        (Compare::value(&c, Equal, ""), false),
        (Compare::value(&c, NotEqual, "x"), false),
        (Compare::value(&c, Greater, ""), false),
        (Compare::value(&c, Less, "z"), false),
        // the helpers
        (Compare::absent(&c), true),
        (Compare::absent(&a), false),
        (Compare::unchanged(&a, Some(&kv_a)), true),
        (Compare::unchanged(&b, Some(&kv_a)), false),
        (Compare::unchanged(&c, None), true),
        (Compare::unchanged(&a, None), false),
    ];
    for (compare, expected) in cases {
        // the shared model agrees with the table...
        let current = match compare.key.as_str() {
            key if key == a => Some(&kv_a),
            key if key == b => Some(&kv_b),
            _ => None,
        };
        assert_eq!(
            compare_holds(&compare, current),
            expected,
            "compare_holds disagrees on {compare:?}"
        );
        // ...and so does the store, which applies the matching branch
        let response = txn(
            store,
            Txn::new()
                .when([compare.clone()])
                .and_then([Op::get(&a)])
                .or_else([Op::get(&b)]),
        )
        .await;
        assert_eq!(response.succeeded, expected, "{compare:?}");
        let branch_read = if expected { &kv_a } else { &kv_b };
        assert_eq!(
            response.results,
            vec![OpResult::Get(Some(branch_read.clone()))],
            "{compare:?} applied the other branch"
        );
    }

    // several compares: all must hold. Success writes three keys at one revision.
    let marker = format!("{prefix}/failed");
    let guarded = |kv_a: &KeyValue| {
        Txn::new()
            .when([
                Compare::unchanged(&a, Some(kv_a)),
                Compare::version(&b, Equal, 2),
                Compare::absent(&c),
                Compare::value(&a, Equal, "1"),
            ])
            .and_then([Op::put(&a, "10"), Op::put(&c, "new"), Op::delete(&b)])
            .or_else([
                Op::put(format!("{marker}/1"), "x"),
                Op::put(format!("{marker}/2"), "x"),
            ])
    };
    // the four hold but a fifth does not: the failure branch, and nothing of the success branch
    let response = txn(
        store,
        guarded(&kv_a).when([Compare::version(&b, Greater, 5)]),
    )
    .await;
    assert!(!response.succeeded, "one false compare fails the txn");
    let failed_at = response.revision;
    assert_eq!(response.results, vec![OpResult::Put, OpResult::Put]);
    for n in 1..=2 {
        let kv = must_get(store, &format!("{marker}/{n}")).await;
        assert_eq!(book(&kv), (failed_at, failed_at, 1));
    }
    assert_eq!(
        must_get(store, &a).await,
        kv_a,
        "the success branch did not touch a"
    );
    assert_eq!(must_get(store, &b).await, kv_b);
    assert_eq!(get(store, &c).await, None);

    // all four hold: the whole success branch at one revision
    let response = txn(store, guarded(&kv_a)).await;
    assert!(response.succeeded, "all compares hold");
    let done_at = response.revision;
    assert!(done_at > failed_at);
    assert_eq!(
        response.results,
        vec![OpResult::Put, OpResult::Put, OpResult::Delete(1)]
    );
    let new_a = must_get(store, &a).await;
    assert_eq!(
        (value_of(&new_a), book(&new_a)),
        ("10", (kv_a.create_revision, done_at, 2))
    );
    assert_eq!(book(&must_get(store, &c).await), (done_at, done_at, 1));
    assert_eq!(get(store, &b).await, None);
    assert_eq!(
        must_get(store, &format!("{marker}/1")).await.mod_revision,
        failed_at,
        "the failure branch did not run again"
    );

    // the same txn again: its reads are stale now, so it fails and writes the markers again
    let response = txn(store, guarded(&kv_a)).await;
    assert!(!response.succeeded, "a stale compare-and-set fails");
    assert_eq!(must_get(store, &a).await, new_a);
    assert_eq!(
        must_get(store, &format!("{marker}/2")).await.version,
        2,
        "the failure branch ran a second time"
    );
}

// ---------------------------------------------------------------------------------------------
// ops inside txns

async fn check_txn_ops(store: Shared, prefix: String) {
    let store = &*store;
    let fresh = format!("{prefix}/fresh");
    let old = format!("{prefix}/old");
    let doomed = format!("{prefix}/doomed");
    let absent = format!("{prefix}/absent");
    put(store, &old, "o").await;
    put(store, &doomed, "d").await;
    let kv_old = must_get(store, &old).await;

    // Get sees the branch's earlier ops; untouched keys as they were; absent as None
    let response = txn(
        store,
        Txn::new().and_then([
            Op::put(&fresh, "v1"),
            Op::get(&fresh),
            Op::get(&old),
            Op::get(&absent),
            Op::delete(&doomed),
            Op::get(&doomed),
            Op::delete(&absent),
        ]),
    )
    .await;
    let at = response.revision;
    let fresh_kv = KeyValue {
        key: fresh.clone(),
        value: b"v1".to_vec(),
        create_revision: at,
        mod_revision: at,
        version: 1,
        lease: 0,
    };
    assert_eq!(
        response.results,
        vec![
            OpResult::Put,
            OpResult::Get(Some(fresh_kv.clone())),
            OpResult::Get(Some(kv_old.clone())),
            OpResult::Get(None),
            OpResult::Delete(1),
            OpResult::Get(None),
            OpResult::Delete(0),
        ]
    );
    assert_eq!(must_get(store, &fresh).await, fresh_kv);
    assert_eq!(get(store, &doomed).await, None);

    // the failure branch's results are reported the same way
    let response = txn(
        store,
        Txn::new()
            .when([Compare::absent(&old)])
            .and_then([Op::delete(&old)])
            .or_else([Op::get(&old), Op::get(&fresh)]),
    )
    .await;
    assert!(!response.succeeded);
    assert_eq!(
        response.results,
        vec![OpResult::Get(Some(kv_old)), OpResult::Get(Some(fresh_kv))]
    );

    // DeletePrefix: exactly the keys under the prefix, at one revision
    let under = format!("{prefix}/d/");
    for key in ["1", "2", "3/x"] {
        put(store, &format!("{under}{key}"), "x").await;
    }
    let neighbours = [
        format!("{prefix}/d"),
        format!("{prefix}/dx"),
        format!("{prefix}/c/1"),
    ];
    for key in &neighbours {
        put(store, key, "keep").await;
    }
    let response = txn(
        store,
        Txn::new().and_then([
            Op::DeletePrefix {
                prefix: under.clone(),
            },
            Op::get(format!("{under}1")),
        ]),
    )
    .await;
    assert_eq!(
        response.results,
        vec![OpResult::Delete(3), OpResult::Get(None)]
    );
    assert!(
        store.range(&under).await.expect("range").kvs.is_empty(),
        "nothing left under {under}"
    );
    for key in &neighbours {
        assert_eq!(
            value_of(&must_get(store, key).await),
            "keep",
            "{key} is not under {under}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// the compare-and-set race

const RACERS: u64 = 16;

async fn check_cas_race(store: Shared, prefix: String) {
    let counter = format!("{prefix}/counter");
    let from = format!("{prefix}/from");
    let to = format!("{prefix}/to");
    put(&*store, &counter, "0").await;
    put(&*store, &from, "100").await;
    put(&*store, &to, "0").await;
    let conflicts = Arc::new(AtomicU64::new(0));

    let mut tasks = Vec::new();
    for _ in 0..RACERS {
        let (store, counter, from, to, conflicts) = (
            store.clone(),
            counter.clone(),
            from.clone(),
            to.clone(),
            conflicts.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let number = |kv: &KeyValue| -> u64 { value_of(kv).parse().expect("a number") };
            let mut revisions = Vec::new();
            // one increment: read, let the others read too, write if unchanged, else retry
            for attempt in 0.. {
                assert!(attempt < 10_000, "an increment never went through");
                let read = must_get(&*store, &counter).await;
                tokio::task::yield_now().await;
                let response = txn(
                    &*store,
                    Txn::new()
                        .when([Compare::unchanged(&counter, Some(&read))])
                        .and_then([Op::put(&counter, (number(&read) + 1).to_string())]),
                )
                .await;
                if response.succeeded {
                    revisions.push(response.revision);
                    break;
                }
                conflicts.fetch_add(1, Ordering::Relaxed);
            }
            // one transfer of a unit between two keys, guarded on both
            for attempt in 0.. {
                assert!(attempt < 10_000, "a transfer never went through");
                let (source, target) =
                    (must_get(&*store, &from).await, must_get(&*store, &to).await);
                tokio::task::yield_now().await;
                let response = txn(
                    &*store,
                    Txn::new()
                        .when([
                            Compare::unchanged(&from, Some(&source)),
                            Compare::unchanged(&to, Some(&target)),
                        ])
                        .and_then([
                            Op::put(&from, (number(&source) - 1).to_string()),
                            Op::put(&to, (number(&target) + 1).to_string()),
                        ]),
                )
                .await;
                if response.succeeded {
                    revisions.push(response.revision);
                    break;
                }
                conflicts.fetch_add(1, Ordering::Relaxed);
            }
            revisions
        }));
    }
    let mut revisions = Vec::new();
    for task in tasks {
        revisions.extend(task.await.expect("a racer panicked"));
    }

    let kv = must_get(&*store, &counter).await;
    assert_eq!(
        value_of(&kv),
        RACERS.to_string(),
        "every increment counted exactly once"
    );
    assert_eq!(kv.version, RACERS as i64 + 1, "one write per increment");
    let (source, target) = (must_get(&*store, &from).await, must_get(&*store, &to).await);
    assert_eq!(
        (value_of(&source), value_of(&target)),
        (
            (100 - RACERS).to_string().as_str(),
            RACERS.to_string().as_str()
        ),
        "the transfers kept the sum"
    );
    let written = revisions.len();
    revisions.sort_unstable();
    revisions.dedup();
    assert_eq!(
        revisions.len(),
        written,
        "each winning txn has its own revision"
    );
    assert!(
        conflicts.load(Ordering::Relaxed) > 0,
        "the racers never collided: the race was not exercised"
    );
}

// ---------------------------------------------------------------------------------------------
// leases

async fn check_lease_keep_alive(store: Shared, prefix: String) {
    let store = &*store;
    let key = format!("{prefix}/kept");
    let lease = store.lease_grant(2).await.expect("grant");
    assert_ne!(lease, 0, "0 never names a lease");
    let ttl = store.lease_time_to_live(lease).await.expect("ttl");
    assert!(
        matches!(ttl, Some(1..=2)),
        "a fresh 2 s lease has 1..=2 s left, got {ttl:?}"
    );
    txn(
        store,
        Txn::new().and_then([Op::put_on_lease(&key, "alive", lease)]),
    )
    .await;
    assert_eq!(must_get(store, &key).await.lease, lease);

    // twice the TTL, renewed every 500 ms
    let started = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_millis(500));
    while started.elapsed() < Duration::from_secs(4) {
        ticks.tick().await;
        let renewed = store.lease_keep_alive(lease).await.expect("keep alive");
        assert_eq!(renewed, 2, "a keep-alive renews to the full TTL");
    }
    let kv = must_get(store, &key).await;
    assert_eq!(
        (value_of(&kv), kv.lease),
        ("alive", lease),
        "kept alive past its TTL"
    );
    assert!(matches!(
        store.lease_time_to_live(lease).await.expect("ttl"),
        Some(1..)
    ));
    store.lease_revoke(lease).await.expect("revoke");
}

async fn check_lease_revoke(store: Shared, prefix: String) {
    let store = &*store;
    let lease = store.lease_grant(30).await.expect("grant");
    let other = store.lease_grant(30).await.expect("grant");
    assert_ne!(lease, other, "two grants, two leases");
    let on_lease = [format!("{prefix}/l/1"), format!("{prefix}/l/2")];
    let on_other = format!("{prefix}/other");
    let plain = format!("{prefix}/plain");
    txn(
        store,
        Txn::new().and_then([
            Op::put_on_lease(&on_lease[0], "1", lease),
            Op::put_on_lease(&on_lease[1], "2", lease),
            Op::put_on_lease(&on_other, "o", other),
            Op::put(&plain, "p"),
        ]),
    )
    .await;

    store.lease_revoke(lease).await.expect("revoke");
    for key in &on_lease {
        assert_eq!(get(store, key).await, None, "{key} went with its lease");
    }
    assert_eq!(
        must_get(store, &on_other).await.lease,
        other,
        "another lease's key stays"
    );
    assert_eq!(value_of(&must_get(store, &plain).await), "p");

    assert_eq!(store.lease_time_to_live(lease).await.expect("ttl"), None);
    let renew = store.lease_keep_alive(lease).await;
    assert!(
        matches!(renew, Err(Error::LeaseNotFound(_))),
        "keep-alive of a revoked lease: {renew:?}"
    );
    let again = store.lease_revoke(lease).await;
    assert!(
        matches!(again, Err(Error::LeaseNotFound(_))),
        "second revoke: {again:?}"
    );
    for error in [renew.err(), again.err()].into_iter().flatten() {
        assert_eq!(error.class(), Class::Terminal, "{error}");
    }
    store.lease_revoke(other).await.expect("revoke");
    assert_eq!(get(store, &on_other).await, None);
}

async fn check_lease_expiry(store: Shared, prefix: String) {
    let store = &*store;
    let key = format!("{prefix}/expiring");
    let plain = format!("{prefix}/plain");
    let granted = Instant::now();
    let lease = store.lease_grant(2).await.expect("grant");
    txn(
        store,
        Txn::new().and_then([Op::put_on_lease(&key, "x", lease), Op::put(&plain, "p")]),
    )
    .await;
    assert!(
        get(store, &key).await.is_some(),
        "present while the lease lives"
    );

    wait_until(
        "the key of an expired lease is deleted",
        Duration::from_secs(15),
        async || get(store, &key).await.is_none(),
    )
    .await;
    let lived = granted.elapsed();
    assert!(
        lived >= Duration::from_secs(1),
        "a 2 s lease ended after only {lived:?}"
    );
    assert_eq!(store.lease_time_to_live(lease).await.expect("ttl"), None);
    let renew = store.lease_keep_alive(lease).await;
    assert!(
        matches!(renew, Err(Error::LeaseNotFound(_))),
        "keep-alive of an expired lease: {renew:?}"
    );
    assert!(
        get(store, &plain).await.is_some(),
        "a key on no lease stays"
    );
}

async fn check_put_on_gone_lease(store: Shared, prefix: String) {
    let store = &*store;
    let lease = store.lease_grant(30).await.expect("grant");
    store.lease_revoke(lease).await.expect("revoke");
    let never = 0x7eed_0000_0000_1234_i64; // no store handed this out

    for gone in [lease, never] {
        let key = format!("{prefix}/on-{gone:x}");
        let beside = format!("{prefix}/beside-{gone:x}");
        let result = store
            .txn(Txn::new().and_then([Op::put(&beside, "x"), Op::put_on_lease(&key, "x", gone)]))
            .await;
        let Err(error) = result else {
            panic!("a put on gone lease {gone:x} was accepted: {result:?}");
        };
        assert!(!error.is_retryable(), "retrying cannot help: {error:?}");
        assert_eq!(
            error.class(),
            Class::Terminal,
            "nothing was written, and never will be: {error:?}"
        );
        assert_eq!(get(store, &key).await, None, "the put on the lease");
        assert_eq!(
            get(store, &beside).await,
            None,
            "the txn's other put (all or nothing)"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// prefix range

async fn check_range_prefix(store: Shared, prefix: String) {
    let store = &*store;
    let under = format!("{prefix}/r/");
    // written out of order; byte order puts "B" < "a" < "a-" < "a/1" < "a/2" < "b"
    let inside = ["b", "a/2", "B", "a", "a/1", "a-"];
    let outside = [
        format!("{prefix}/r"),
        format!("{prefix}/rx"),
        format!("{prefix}/q"),
    ];
    let mut last = 0;
    for (n, key) in inside.iter().enumerate() {
        last = put(store, &format!("{under}{key}"), &format!("v{n}")).await;
    }
    for key in &outside {
        last = put(store, key, "outside").await;
    }
    put(store, &format!("{under}a"), "rewritten").await;

    let range = store.range(&under).await.expect("range");
    let keys: Vec<&str> = range.kvs.iter().map(|kv| kv.key.as_str()).collect();
    let expected: Vec<String> = ["B", "a", "a-", "a/1", "a/2", "b"]
        .iter()
        .map(|key| format!("{under}{key}"))
        .collect();
    assert_eq!(keys, expected, "only keys under the prefix, in byte order");
    for kv in &range.kvs {
        assert_eq!(
            Some(kv),
            get(store, &kv.key).await.as_ref(),
            "a range reports each key as a get does"
        );
        assert!(range.revision >= kv.mod_revision);
    }
    assert!(range.revision > last, "the range saw the latest write");
    assert_eq!(value_of(&range.kvs[1]), "rewritten");

    // the keys alone: the same listing, book-keeping and revision, with no value
    let listing = store.range_keys(&under).await.expect("range keys");
    assert_eq!(listing.revision, range.revision);
    let stripped: Vec<KeyValue> = range
        .kvs
        .iter()
        .map(|kv| KeyValue {
            value: Vec::new(),
            ..kv.clone()
        })
        .collect();
    assert_eq!(
        listing.kvs, stripped,
        "range_keys is range without the values"
    );

    let empty = store
        .range(&format!("{prefix}/nothing/"))
        .await
        .expect("range");
    assert!(empty.kvs.is_empty());
    assert!(
        empty.revision >= range.revision,
        "an empty range still reports a revision"
    );
}

// ---------------------------------------------------------------------------------------------
// watches

/// What the keys under a watched prefix should look like, to derive the events a watch must
/// deliver for each txn.
#[derive(Default)]
struct Model {
    keys: BTreeMap<String, KeyValue>,
}

impl Model {
    /// Applies a txn's ops at `revision`; returns the events it must produce.
    fn apply(&mut self, ops: &[Op], revision: Revision) -> Vec<WatchEvent> {
        let mut events = Vec::new();
        for op in ops {
            match op {
                Op::Put { key, value, lease } => {
                    let before = self.keys.get(key);
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: before.map_or(revision, |kv| kv.create_revision),
                        mod_revision: revision,
                        version: before.map_or(1, |kv| kv.version + 1),
                        lease: *lease,
                    };
                    self.keys.insert(key.clone(), kv.clone());
                    events.push(WatchEvent::Put(kv));
                }
                Op::Delete { key } => {
                    if self.keys.remove(key).is_some() {
                        events.push(WatchEvent::Delete {
                            key: key.clone(),
                            revision,
                        });
                    }
                }
                Op::DeletePrefix { prefix } => {
                    let doomed: Vec<String> = self
                        .keys
                        .range(prefix.clone()..)
                        .take_while(|(key, _)| key.starts_with(prefix.as_str()))
                        .map(|(key, _)| key.clone())
                        .collect();
                    for key in doomed {
                        self.keys.remove(&key);
                        events.push(WatchEvent::Delete { key, revision });
                    }
                }
                Op::Get { .. } => {}
            }
        }
        events
    }
}

/// Writes `count` scripted changes under `under` — puts, overwrites, deletes, a two-key txn
/// and a `DeletePrefix` — each changing something; returns their events and revisions.
async fn write_changes(
    store: &dyn Store,
    model: &mut Model,
    under: &str,
    batch: usize,
    count: usize,
) -> (Vec<WatchEvent>, Vec<Revision>) {
    let mut events = Vec::new();
    let mut revisions = Vec::new();
    for i in 0..count {
        let n = batch * 1000 + i;
        let put_k = Op::put(format!("{under}k{}", i % 8), format!("v{n}"));
        let present = |sub: &str| {
            model
                .keys
                .keys()
                .find(|key| key.starts_with(&format!("{under}{sub}")))
                .cloned()
        };
        let ops = match i % 10 {
            3 | 7 => match present("k") {
                Some(key) => vec![Op::delete(key)],
                None => vec![put_k],
            },
            5 => vec![
                put_k,
                Op::put(format!("{under}sub/{}", i % 3), format!("s{n}")),
            ],
            9 => match present("sub/") {
                Some(_) => vec![Op::DeletePrefix {
                    prefix: format!("{under}sub/"),
                }],
                None => vec![put_k],
            },
            _ => vec![put_k],
        };
        let response = txn(store, Txn::new().and_then(ops.clone())).await;
        let produced = model.apply(&ops, response.revision);
        assert!(
            !produced.is_empty(),
            "every scripted change changes something"
        );
        events.extend(produced);
        revisions.push(response.revision);
    }
    (events, revisions)
}

/// Reads events until `done` says the collection is complete; panics on a stream error or
/// when `within` passes.
async fn collect_until(
    stream: &mut WatchStream,
    within: Duration,
    mut done: impl FnMut(&[WatchEvent]) -> bool,
) -> Vec<WatchEvent> {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    while !done(&got) {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(event))) => got.push(event),
            Ok(Some(Err(error))) => panic!("the watch broke after {} events: {error}", got.len()),
            Ok(None) => panic!("the watch ended after {} events", got.len()),
            Err(_) => panic!(
                "timed out after {within:?} with {} events, the last: {:?}",
                got.len(),
                got.last()
            ),
        }
    }
    got
}

/// Puts a fence key and reads until its event: everything before it is what the watch had
/// delivered, so extra or repeated events show up.
async fn read_to_fence(
    store: &dyn Store,
    stream: &mut WatchStream,
    fence: &str,
) -> Vec<WatchEvent> {
    put(store, fence, "fence").await;
    let mut got = collect_until(stream, Duration::from_secs(10), |got| {
        got.iter()
            .any(|event| matches!(event, WatchEvent::Put(kv) if kv.key == fence))
    })
    .await;
    let fence_event = got.pop();
    assert!(
        matches!(&fence_event, Some(WatchEvent::Put(kv)) if kv.key == fence),
        "the fence comes last: {fence_event:?}"
    );
    got
}

/// Asserts `got` is exactly `expected`: revisions never go back, and per revision the same
/// events (the order of events within one txn is not part of the contract).
fn assert_same_events(got: &[WatchEvent], mut expected: Vec<WatchEvent>) {
    for pair in got.windows(2) {
        assert!(
            pair[0].revision() <= pair[1].revision(),
            "revisions went back: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    let mut got = got.to_vec();
    let order = |event: &WatchEvent| (event.revision(), event.key().to_owned());
    got.sort_by_key(order);
    expected.sort_by_key(order);
    if got != expected {
        let missing: Vec<_> = expected.iter().filter(|e| !got.contains(e)).collect();
        let extra: Vec<_> = got.iter().filter(|e| !expected.contains(e)).collect();
        panic!(
            "the watch delivered {} events, {} expected\nmissing: {missing:#?}\nextra or wrong: {extra:#?}",
            got.len(),
            expected.len()
        );
    }
}

async fn check_watch_from_revision(store: Shared, prefix: String) {
    let under = format!("{prefix}/w/");
    let mut model = Model::default();
    let (first, revisions) = write_changes(&*store, &mut model, &under, 1, 50).await;
    let start = revisions[25];
    let mut expected: Vec<WatchEvent> = first
        .into_iter()
        .filter(|event| event.revision() >= start)
        .collect();

    // the second 50 changes (after a put on a short lease) are written while the watch
    // catches up on the first
    let leased = format!("{under}leased");
    let end = format!("{under}end");
    let lease = store.lease_grant(1).await.expect("grant");
    let writer = {
        let (store, under, leased, end) =
            (store.clone(), under.clone(), leased.clone(), end.clone());
        tokio::spawn(async move {
            let mut events = Vec::new();
            let ops = [Op::put_on_lease(&leased, "short", lease)];
            let response = txn(&*store, Txn::new().and_then(ops.clone())).await;
            events.extend(model.apply(&ops, response.revision));
            let (second, _) = write_changes(&*store, &mut model, &under, 2, 50).await;
            events.extend(second);
            let ops = [Op::put(&end, "end")];
            let response = txn(&*store, Txn::new().and_then(ops.clone())).await;
            events.extend(model.apply(&ops, response.revision));
            events
        })
    };
    let mut stream = store.watch(&under, start).await.expect("watch");
    let mut got = collect_until(&mut stream, Duration::from_secs(20), |got| {
        let saw_end = got
            .iter()
            .any(|e| matches!(e, WatchEvent::Put(kv) if kv.key == end));
        let saw_expiry = got
            .iter()
            .any(|e| matches!(e, WatchEvent::Delete { key, .. } if *key == leased));
        saw_end && saw_expiry
    })
    .await;
    expected.extend(writer.await.expect("the writer panicked"));
    got.extend(read_to_fence(&*store, &mut stream, &format!("{under}fence")).await);

    assert_eq!(
        got.first().map(WatchEvent::revision),
        Some(start),
        "the watch starts at the revision asked for"
    );
    // the lease's expiry is a delete at a revision of its own, after the put
    let expiries: Vec<&WatchEvent> = got
        .iter()
        .filter(|e| matches!(e, WatchEvent::Delete { key, .. } if *key == leased))
        .collect();
    assert_eq!(expiries.len(), 1, "one expiry delete: {expiries:?}");
    let expiry = expiries[0].clone();
    let put_at = expected
        .iter()
        .find(|e| e.key() == leased)
        .map(WatchEvent::revision)
        .expect("the leased put is expected");
    assert!(
        expiry.revision() > put_at,
        "{expiry:?} after the put at {put_at}"
    );
    assert!(
        expected.iter().all(|e| e.revision() != expiry.revision()),
        "the expiry has a revision of its own"
    );
    expected.push(expiry);
    assert_same_events(&got, expected);
}

async fn check_watch_from_now(store: Shared, prefix: String) {
    let store = &*store;
    let under = format!("{prefix}/w/");
    let mut model = Model::default();
    let old = format!("{under}old");
    let ops = [Op::put(&old, "before")];
    let response = txn(store, Txn::new().and_then(ops.clone())).await;
    model.apply(&ops, response.revision);
    let before = response.revision;

    let mut stream = store.watch(&under, 0).await.expect("watch");
    let mut expected = Vec::new();
    for ops in [
        vec![Op::put(format!("{under}new/1"), "1")],
        vec![Op::put(format!("{under}new/2"), "2"), Op::delete(&old)],
        vec![Op::put(format!("{under}new/1"), "1b")],
    ] {
        let response = txn(store, Txn::new().and_then(ops.clone())).await;
        expected.extend(model.apply(&ops, response.revision));
    }
    let got = read_to_fence(store, &mut stream, &format!("{under}fence")).await;
    assert!(
        got.iter().all(|event| event.revision() > before),
        "a watch from 0 sees nothing from before it: {got:#?}"
    );
    assert_same_events(&got, expected);
}

// ---------------------------------------------------------------------------------------------
// failpoints

async fn check_failpoints(store: Shared, prefix: String) {
    let faulty = Faulty::from_arc(store);
    let faults = faulty.faults();
    let key = format!("{prefix}/fp");

    // a lost reply: the write lands, the caller hears "indeterminate"
    faults.lose_next_reply(1);
    txn(&faulty, Txn::new().and_then([Op::get(&key)])).await;
    assert_eq!(
        faults.armed(),
        (1, 0),
        "a read-only txn does not use a fault up"
    );
    let create = Txn::new()
        .when([Compare::absent(&key)])
        .and_then([Op::put(&key, "mine")]);
    let error = faulty
        .txn(create.clone())
        .await
        .expect_err("the reply is lost");
    assert!(
        matches!(&error, Error::Indeterminate(message) if message == REPLY_LOST),
        "{error:?}"
    );
    assert_eq!(error.class(), Class::Indeterminate);
    assert_eq!(faults.replies_lost(), 1);
    let landed = must_get(&faulty, &key).await;
    assert_eq!(
        (value_of(&landed), landed.version),
        ("mine", 1),
        "the write whose reply was lost landed"
    );
    // why the caller must re-read: retrying the same create now fails its compare
    let retry = txn(&faulty, create).await;
    assert!(
        !retry.succeeded,
        "a blind retry of a landed create fails its compare"
    );

    // a refused write: nothing lands, the caller may retry
    faults.fail_next_writes(1);
    let error = faulty
        .txn(Txn::new().and_then([Op::put(&key, "refused")]))
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    assert_eq!(error.class(), Class::Retryable);
    assert_eq!(
        must_get(&faulty, &key).await,
        landed,
        "a refused write did not land"
    );
    txn(&faulty, Txn::new().and_then([Op::put(&key, "retried")])).await;
    assert_eq!(value_of(&must_get(&faulty, &key).await), "retried");

    // several lost replies, all landed: a counter bumped through lost replies
    let counter = format!("{prefix}/counter");
    faults.lose_next_reply(3);
    for n in 1..=4 {
        let result = faulty
            .txn(Txn::new().and_then([Op::put(&counter, n.to_string())]))
            .await;
        assert_eq!(result.is_err(), n <= 3, "write {n}: {result:?}");
        assert_eq!(
            must_get(&faulty, &counter).await.version,
            n,
            "write {n} landed"
        );
    }

    // aimed faults: only txns touching the prefix use them up
    let aimed = format!("{prefix}/aimed/");
    faults.only_under(&aimed);
    faults.fail_next_writes(1);
    put(&faulty, &format!("{prefix}/elsewhere"), "x").await;
    assert_eq!(faults.armed(), (0, 1));
    let refused = faulty
        .txn(Txn::new().and_then([Op::put(format!("{aimed}x"), "x")]))
        .await;
    assert!(refused.is_err_and(|error| error.is_retryable()));
    assert_eq!(get(&faulty, &format!("{aimed}x")).await, None);
    faults.clear();
    assert_eq!(faults.armed(), (0, 0));
    put(&faulty, &format!("{aimed}x"), "x").await;
}

// ---------------------------------------------------------------------------------------------
// store-free and embedded-only

#[test]
fn error_classes() {
    let second = Duration::from_secs(1);
    let cases = [
        (Error::Unavailable("down".into()), Class::Retryable),
        (Error::Indeterminate("lost".into()), Class::Indeterminate),
        (Error::Timeout(second, false), Class::Retryable),
        (Error::Timeout(second, true), Class::Indeterminate),
        (
            Error::Compacted {
                requested: 1,
                oldest: 2,
            },
            Class::Terminal,
        ),
        (Error::LeaseNotFound(7), Class::Terminal),
        (Error::Invalid("no".into()), Class::Terminal),
        (
            Error::Disk {
                path: "/x".into(),
                message: "full".into(),
            },
            Class::Terminal,
        ),
        (
            Error::Decode {
                key: "/k".into(),
                message: "bad".into(),
            },
            Class::Terminal,
        ),
    ];
    for (error, class) in cases {
        assert_eq!(error.class(), class, "{error:?}");
        assert_eq!(error.is_retryable(), class == Class::Retryable, "{error:?}");
        assert_eq!(
            error.is_indeterminate(),
            class == Class::Indeterminate,
            "{error:?}"
        );
    }
    // the lost-reply error names what the caller must do
    assert!(
        Error::Indeterminate("x".into())
            .to_string()
            .contains("re-read")
    );
    // targets are plain data
    assert_eq!(Compare::absent("/k").target, Target::CreateRevision(0));
}

/// The embedded store keeps every acknowledged write, and its revision, across a restart
/// (simulated by opening it on a runtime that is then dropped, as a process exit would).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_survives_restart() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let prefix = unique_prefix("embedded_survives_restart");
    let (before, written_at) = {
        let (path, prefix) = (dir.path().to_owned(), prefix.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().expect("a runtime");
            let result = runtime.block_on(async {
                let store = open_embedded(&path).await;
                put(&store, &format!("{prefix}/a"), "1").await;
                put(&store, &format!("{prefix}/a"), "2").await;
                put(&store, &format!("{prefix}/b"), "x").await;
                let first = put(&store, &format!("{prefix}/gone"), "x").await;
                txn(
                    &store,
                    Txn::new().and_then([Op::delete(format!("{prefix}/gone"))]),
                )
                .await;
                let range = store.range(&prefix).await.expect("range");
                (range, first)
            });
            drop(runtime);
            result
        })
        .join()
        .expect("the first life panicked")
    };

    let store = wait_for_reopen(dir.path()).await;
    let after = store.range(&prefix).await.expect("range");
    assert_eq!(after, before, "every key and the revision survive");
    let next = put(&store, &format!("{prefix}/c"), "y").await;
    assert_eq!(next, before.revision + 1, "the revision counter continues");

    // a watch from before the restart either replays that history exactly or says it is gone
    let replayed = match store.watch(&prefix, written_at).await {
        Err(Error::Compacted { .. }) => None,
        Err(error) => panic!("watch from {written_at} after reopen: {error}"),
        Ok(mut stream) => {
            let mut got = Vec::new();
            while got.len() < 3 {
                match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
                    Ok(Some(Ok(event))) => got.push(event),
                    Ok(Some(Err(Error::Compacted { .. }))) if got.is_empty() => break,
                    other => panic!("watch after reopen, after {got:?}: {other:?}"),
                }
            }
            (!got.is_empty()).then_some(got)
        }
    };
    if let Some(got) = replayed {
        {
            let expected = vec![
                WatchEvent::Put(KeyValue {
                    key: format!("{prefix}/gone"),
                    value: b"x".to_vec(),
                    create_revision: written_at,
                    mod_revision: written_at,
                    version: 1,
                    lease: 0,
                }),
                WatchEvent::Delete {
                    key: format!("{prefix}/gone"),
                    revision: written_at + 1,
                },
                WatchEvent::Put(must_get(&store, &format!("{prefix}/c")).await),
            ];
            assert_eq!(got, expected, "history replayed after the restart");
        }
    }
}

/// Reopens the embedded store; the first life's file lock may take a moment to go.
async fn wait_for_reopen(dir: &std::path::Path) -> EmbeddedStore {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match EmbeddedStore::open(dir).await {
            Ok(store) => return store,
            Err(error) if Instant::now() >= deadline => {
                panic!(
                    "the embedded store did not reopen within 5 s after its runtime was gone: {error}"
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
