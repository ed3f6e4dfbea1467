//! Scenario: the seat's run entries (`cluster::seat_runs`, issue 20), which a launch reads to
//! learn whether its seat is busy instead of every run in the store. Each test runs on the
//! embedded store and on a real etcd.
//!
//! - Through a run's whole life the entry names the row's status, and it goes with the row.
//! - A run written before the entries existed (a raw row) gets one before the first list,
//!   and an entry whose run is gone is removed; the list then finds exactly the seat's runs.

mod support;

use std::sync::Arc;

use boxfleet_cluster::Keys;
use boxfleet_cluster::record::{EndingReason, Status};
use boxfleet_cluster::runs::{Outcome, Runs};
use boxfleet_cluster::seat_runs;
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::{Store, StoreExt};
use boxfleet_cluster::transition::{EndingGuard, Transition};
use boxfleet_tests::{EtcdServer, unique_prefix};
use support::*;

on_both_stores!(
    the_entry_follows_the_row_through_its_life,
    runs_from_before_the_entries_are_found_and_stale_entries_go,
);

/// The seat's entries as (turn, status).
async fn entries(world: &World) -> Vec<(String, Status)> {
    seat_runs::entries(world.store.as_ref(), &world.keys, SEAT)
        .await
        .expect("entries")
        .into_iter()
        .map(|entry| (entry.turn_id, entry.status))
        .collect()
}

/// Each entry names its row's status, and every row of the seat has one.
async fn assert_agree(world: &World) {
    let rows: Vec<(String, Status)> = world
        .runs
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|run| (run.record.turn_id, run.record.status))
        .collect();
    assert_eq!(entries(world).await, rows);
}

async fn the_entry_follows_the_row_through_its_life(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_run(&world, "t1", "l1").await;
    must_park(&world, "t2", "l2").await;
    assert_agree(&world).await;
    assert_eq!(
        entries(&world).await,
        [
            ("t1".to_owned(), Status::Running),
            ("t2".to_owned(), Status::AwaitingClarification)
        ]
    );
    // the busy seat is t1's: the parked run does not hold it
    let active = world.runs.list_active(SEAT).await.expect("active");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].record.turn_id, "t1");
    let end = Transition::DecideEnding {
        reason: EndingReason::Finished,
        detail: String::new(),
        guard: EndingGuard::Any,
        announce: None,
    };
    must_apply(&world, &fence, "t1", end).await;
    assert_agree(&world).await;
    let release = Transition::ReleaseBox {
        sandbox_id: "box-t1".into(),
    };
    must_apply(&world, &fence, "t1", release).await;
    assert_eq!(
        must_apply(&world, &fence, "t1", Transition::Finish).await,
        Outcome::Deleted
    );
    assert_agree(&world).await;
    assert_eq!(
        entries(&world).await,
        [("t2".to_owned(), Status::AwaitingClarification)]
    );
    assert!(
        world
            .runs
            .list_active(SEAT)
            .await
            .expect("active")
            .is_empty()
    );
}

async fn runs_from_before_the_entries_are_found_and_stale_entries_go(
    store: Arc<dyn Store>,
    prefix: &str,
) {
    let world = World::new(store.clone(), prefix).await;
    must_run(&world, "t1", "l1").await;
    // t0: a running row written before the entries existed; t9: an entry with no row
    let keys = Keys::new(prefix);
    let mut old = launching("t0", "l0");
    old.status = Status::Running;
    store
        .put(&keys.run("t0"), old.to_json())
        .await
        .expect("raw row");
    store
        .put(&keys.seat_run(SEAT, "t9"), b"running".to_vec())
        .await
        .expect("stale entry");
    // a process that has not listed yet backfills before its first list
    let fresh = Runs::new(world.store.clone(), keys.clone());
    let active: Vec<String> = fresh
        .list_active(SEAT)
        .await
        .expect("active")
        .into_iter()
        .map(|run| run.record.turn_id)
        .collect();
    assert_eq!(active, ["t0", "t1"]);
    assert_agree(&world).await;
    // the backfill is idempotent
    let again = seat_runs::backfill(world.store.as_ref(), &keys)
        .await
        .expect("backfill");
    assert_eq!(again, seat_runs::Backfilled::default());
}
