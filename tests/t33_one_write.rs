//! Scenario: several transitions of one run as one write (`Runs::apply_steps`, issue 20), which
//! an answer to an idle seat's run uses to be recorded and claimed for its resume at once.
//! Each test runs on the embedded store and on a real etcd.
//!
//! - The steps are decided in turn and land together: the answer recorded, the run claimed,
//!   the seat's entry and the announcement in the same txn.
//! - A refusal of any step writes nothing, and a row that moved since the caller read it is
//!   read again and decided anew (another answer that won is not overwritten).

mod support;

use std::sync::Arc;

use boxfleet_cluster::events;
use boxfleet_cluster::record::{ClaimKind, Status};
use boxfleet_cluster::runs::{Outcome, RunError};
use boxfleet_cluster::seat_runs;
use boxfleet_cluster::store::Store;
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::transition::{Refusal, Transition};
use boxfleet_tests::{EtcdServer, unique_prefix};
use support::*;

on_both_stores!(
    an_answer_is_recorded_and_claimed_in_one_write,
    a_refused_step_writes_nothing_and_a_moved_row_is_decided_anew,
);

fn record(delivery: &str, posted: i64) -> Transition {
    Transition::RecordAnswer {
        answer: answer(delivery, at(posted)),
    }
}

fn claim(launch: &str) -> Transition {
    Transition::ClaimAnswer {
        launch_id: launch.into(),
    }
}

async fn read(world: &World, turn: &str) -> boxfleet_cluster::runs::Versioned {
    world
        .runs
        .read(turn)
        .await
        .expect("read")
        .expect("the run exists")
}

async fn answered_events(world: &World) -> usize {
    events::read_from(world.store.as_ref(), &world.keys, 0)
        .await
        .expect("read events")
        .iter()
        .filter(|stored| stored.event.kind == events::kind::RUN_ANSWERED)
        .count()
}

/// Break tried: write only the first step's record → the run stays `answered`, unclaimed.
async fn an_answer_is_recorded_and_claimed_in_one_write(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_park(&world, "t1", "l1").await;
    let parked = read(&world, "t1").await;
    let steps = [record("d1", 20), claim("l1")];
    let written = world
        .runs
        .apply_steps(
            &fence,
            "t1",
            Some(Box::new(parked)),
            (&steps[0], &steps[1..]),
            at(21),
        )
        .await
        .expect("the steps apply");
    let Outcome::Written(claimed) = written else {
        panic!("the run is written, not deleted");
    };
    let stored = read(&world, "t1").await;
    assert_eq!(stored.mod_revision, claimed.mod_revision, "one write");
    assert_eq!(stored.record.status, Status::Resumed);
    assert_eq!(
        stored
            .record
            .answer
            .as_ref()
            .map(|a| a.delivery_id.as_str()),
        Some("d1"),
        "the answer is on the row the claim is"
    );
    assert_eq!(
        stored.record.claim.as_ref().map(|c| c.kind),
        Some(ClaimKind::Answer)
    );
    let entries = seat_runs::entries(world.store.as_ref(), &world.keys, SEAT)
        .await
        .expect("entries");
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].status,
        Status::Resumed,
        "the entry rode the write"
    );
    assert_eq!(answered_events(&world).await, 1, "announced once, resumed");
}

/// Break tried: decide the steps on `known` without comparing its revision → the second
/// answer overwrites the first.
async fn a_refused_step_writes_nothing_and_a_moved_row_is_decided_anew(
    store: Arc<dyn Store>,
    prefix: &str,
) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();

    // --- phase: the claim names another job: refused, and the answer is not written either
    must_park(&world, "t1", "l1").await;
    let before = read(&world, "t1").await;
    let steps = [record("d1", 20), claim("l0")];
    let refused = world
        .runs
        .apply_steps(
            &fence,
            "t1",
            Some(Box::new(before.clone())),
            (&steps[0], &steps[1..]),
            at(21),
        )
        .await
        .expect_err("a step is refused");
    assert!(
        matches!(
            refused,
            RunError::Refused(Refusal::WrongLaunch { .. } | Refusal::WrongStatus { .. })
        ),
        "{refused:?}"
    );
    let after = read(&world, "t1").await;
    assert_eq!(after.mod_revision, before.mod_revision, "nothing written");
    assert!(after.record.answer.is_none());

    // --- phase: another answer wins after the caller read the row: the steps are decided on
    // the row as it is now, and refused there
    let stale = read(&world, "t1").await;
    must_apply(&world, &fence, "t1", record("d2", 22)).await;
    let steps = [record("d3", 23), claim("l1")];
    let lost = world
        .runs
        .apply_steps(
            &fence,
            "t1",
            Some(Box::new(stale)),
            (&steps[0], &steps[1..]),
            at(24),
        )
        .await
        .expect_err("the question is answered already");
    assert_eq!(
        lost.to_string(),
        RunError::Refused(Refusal::AlreadyAnswered).to_string()
    );
    let now = read(&world, "t1").await;
    assert_eq!(
        now.record.answer.as_ref().map(|a| a.delivery_id.as_str()),
        Some("d2"),
        "the first answer stands"
    );
    assert_eq!(now.record.status, Status::Answered);
    assert_eq!(answered_events(&world).await, 0, "nothing resumed");
}
