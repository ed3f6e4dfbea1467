//! The scale bench's in-process part: one seat's recovery pass over `seat_runs` runs, and the
//! board's reconcile over `all_runs`, on a store through [`Counting`] so the store calls are
//! counted as well as timed.
//!
//! The runs are written raw (a running row and its seat entry, fifty runs per txn): the pass
//! and the reconcile read what the lifecycle writes, and writing ten thousand runs through
//! their transitions would take most of the bench. The pass is what a seat's new holder runs
//! (`Runs::fence_seat_runs_for`, the recovery pass's fence on every run of the seat); the
//! reconcile is the board's (`Runs::list`, every run in the store, decoded).

use std::sync::Arc;
use std::time::{Duration, Instant};

use boxfleet_cluster::Keys;
use boxfleet_cluster::record::{RunRecord, Status};
use boxfleet_cluster::runs::Runs;
use boxfleet_cluster::seat::{self, Acquire, Holder};
use boxfleet_cluster::store::{Op, Store, Txn};
use boxfleet_tests::counting::{CallSnapshot, CallStats, Counting};

/// What one measured step took.
pub struct Step {
    pub took: Duration,
    pub calls: CallSnapshot,
}

/// A seat's recovery pass over `seat_runs` runs, and the board's reconcile over `all_runs`.
pub struct Measured {
    pub recovery: Step,
    pub reconcile: Step,
    pub reconciled: usize,
}

const SEAT: &str = "recovered-seat";
/// Runs written per txn (two ops each; etcd takes 128 ops in one txn).
const PER_TXN: usize = 50;

fn holder(node: &str) -> Holder {
    Holder {
        node: node.to_owned(),
        incarnation: format!("{node}-1"),
    }
}

async fn hold(
    store: &dyn Store,
    keys: &Keys,
    seat: &str,
    node: &str,
) -> (i64, boxfleet_cluster::transition::Fence) {
    let session = store.lease_grant(60).await.expect("session lease");
    match seat::acquire(store, keys, seat, &holder(node), session)
        .await
        .expect("acquire")
    {
        Acquire::Held(fence) => (session, fence),
        Acquire::HeldBy { holder, .. } => panic!("{seat} is held by {holder:?}"),
    }
}

/// Writes `count` running rows on `seat(i)`, with their entries.
async fn write_runs(store: &dyn Store, keys: &Keys, count: usize, seat: impl Fn(usize) -> String) {
    let now = chrono::Utc::now();
    for first in (0..count).step_by(PER_TXN) {
        let mut ops = Vec::new();
        for i in first..(first + PER_TXN).min(count) {
            let seat = seat(i);
            let turn = format!("turn-{seat}-{i}");
            let mut record =
                RunRecord::launching(&turn, format!("launch-{i}"), &seat, "command", now);
            record.status = Status::Running;
            record.sandbox_id = Some(format!("box-{i}"));
            ops.push(Op::put(keys.run(&turn), record.to_json()));
            ops.push(Op::put(
                keys.seat_run(&seat, &turn),
                Status::Running.as_str(),
            ));
        }
        store
            .txn(Txn::new().and_then(ops))
            .await
            .expect("write runs");
    }
}

pub async fn measure(
    store: Arc<dyn Store>,
    prefix: &str,
    seat_runs: usize,
    all_runs: usize,
) -> Measured {
    let stats = Arc::new(CallStats::default());
    let counted: Arc<dyn Store> = Arc::new(Counting {
        inner: store,
        stats: stats.clone(),
    });
    let keys = Keys::new(prefix);
    let (old_session, _) = hold(counted.as_ref(), &keys, SEAT, "old").await;
    write_runs(counted.as_ref(), &keys, seat_runs, |_| SEAT.to_owned()).await;
    let others = all_runs.saturating_sub(seat_runs);
    write_runs(counted.as_ref(), &keys, others, |i| {
        format!("other-{}", i % 100)
    })
    .await;
    let runs = Runs::new(counted.clone(), keys.clone());
    // the process's one backfill, outside the measured steps
    runs.list_active("warm-up").await.expect("warm up");
    // the old holder dies; a new one takes the seat and runs its recovery pass
    counted.lease_revoke(old_session).await.expect("revoke");
    let (_, fence) = hold(counted.as_ref(), &keys, SEAT, "new").await;
    stats.reset();
    let began = Instant::now();
    let fenced = runs
        .fence_seat_runs_for(&fence, Some("new-1"))
        .await
        .expect("the recovery pass");
    let recovery = Step {
        took: began.elapsed(),
        calls: stats.snapshot(),
    };
    assert_eq!(
        fenced.len(),
        seat_runs,
        "the pass fenced every run of the seat"
    );
    stats.reset();
    let began = Instant::now();
    let listed = runs.list().await.expect("the reconcile's read");
    let reconcile = Step {
        took: began.elapsed(),
        calls: stats.snapshot(),
    };
    assert_eq!(
        listed.len(),
        seat_runs + others,
        "the reconcile read every run"
    );
    Measured {
        recovery,
        reconcile,
        reconciled: listed.len(),
    }
}
