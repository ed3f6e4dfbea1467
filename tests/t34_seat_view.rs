//! Scenario: the placement pass's view of the seats (`cluster::seat_view`, issue 20), kept in
//! memory by a watch instead of read whole every second. Each test runs on the embedded store
//! and on a real etcd.
//!
//! - Through holders acquired, released and lapsed with their session (many in one revision),
//!   mail queued and taken, and runs opened and ended, the view comes to say what a fresh read
//!   says, and every seat freed is told.
//! - Whatever the view says complete is in it: once it is complete through a fence's epoch, it
//!   holds that fence's holder (the pass judges a fence by the view only then); once it is
//!   complete through a lapsed session's revision, it holds none of that session's holders,
//!   though their changes reach it one at a time.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use boxfleet_cluster::inbox::Delivery;
use boxfleet_cluster::seat::{self, Acquire, Holder};
use boxfleet_cluster::seat_view::{Known, SeatView};
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::{LeaseId, Store, StoreExt};
use boxfleet_cluster::transition::Fence;
use boxfleet_tests::{EtcdServer, unique_prefix};
use support::*;

on_both_stores!(
    the_view_says_what_a_fresh_read_says,
    a_view_complete_through_an_epoch_holds_its_holder,
);

/// A view kept by its watch for as long as the test runs, and how many seats it saw freed.
struct Kept {
    view: Arc<SeatView>,
    freed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn keep(world: &World) -> Kept {
    let view = Arc::new(SeatView::default());
    let freed = Arc::new(AtomicUsize::new(0));
    let (store, keys, runs) = (world.store.clone(), world.keys.clone(), world.runs.clone());
    let task = tokio::spawn({
        let (view, freed) = (view.clone(), freed.clone());
        async move {
            view.keep(store.as_ref(), &keys, &runs, || {
                freed.fetch_add(1, Ordering::SeqCst);
            })
            .await;
        }
    });
    Kept { view, freed, task }
}

/// Waits until the view says what a fresh read says; panics with both after 10 s.
async fn converges(world: &World, kept: &Kept, after: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = Known::read(world.store.as_ref(), &world.keys, &world.runs)
            .await
            .expect("read the seats");
        let seen = kept.view.look(Clone::clone);
        if seen.as_ref().is_some_and(|seen| seen.agrees_with(&read)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {after}, the view never came to say what the store says:\nview {seen:#?}\nstore {read:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `seat` acquired on `session` as node `node`.
async fn hold(world: &World, seat: &str, node: &str, session: LeaseId) -> Fence {
    let holder = Holder {
        node: node.to_owned(),
        incarnation: format!("{node}-1"),
    };
    match seat::acquire(world.store.as_ref(), &world.keys, seat, &holder, session)
        .await
        .expect("acquire")
    {
        Acquire::Held(fence) => fence,
        Acquire::HeldBy { holder, .. } => panic!("{seat} already held by {holder:?}"),
    }
}

fn mail(id: &str) -> Delivery {
    Delivery {
        delivery_id: id.to_owned(),
        conversation_key: None,
        partition: None,
        from: "ops".into(),
        text: "a message".into(),
        posted_at: t0(),
        answer_given: None,
    }
}

async fn the_view_says_what_a_fresh_read_says(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store.clone(), prefix).await;
    let kept = keep(&world);
    converges(&world, &kept, "the load").await;

    // another node's session holds twenty seats; one is released under its fence
    let other = store.lease_grant(30).await.expect("a second session");
    let mut fences = Vec::new();
    for i in 0..20 {
        fences.push(hold(&world, &format!("seat-{i}"), "b", other).await);
    }
    assert!(
        seat::release(store.as_ref(), &world.keys, &fences[0])
            .await
            .expect("release")
    );
    // mail for a seat nobody holds, twice, and a run opened and parked on the world's seat
    world
        .inbox
        .enqueue("mailed", &mail("d1"))
        .await
        .expect("mail");
    world
        .inbox
        .enqueue("mailed", &mail("d2"))
        .await
        .expect("mail");
    must_run(&world, "t1", "l1").await;
    must_park(&world, "t2", "l2").await;
    converges(&world, &kept, "the holders, the mail and the runs").await;
    assert_eq!(kept.freed.load(Ordering::SeqCst), 1, "the released seat");
    let seats: std::collections::BTreeSet<String> = kept
        .view
        .look(|known| known.seats().map(str::to_owned).collect())
        .expect("a view");
    assert!(seats.contains("mailed") && seats.contains(SEAT) && seats.contains("seat-19"));
    assert!(
        !seats.contains("seat-0"),
        "released, with no runs or mail: {seats:?}"
    );

    // the other session lapses: its nineteen holders go in one revision
    store.lease_revoke(other).await.expect("revoke");
    converges(&world, &kept, "the session lapsed").await;
    assert_eq!(
        kept.freed.load(Ordering::SeqCst),
        20,
        "every seat freed is told"
    );

    // the mail is taken off the inbox; a third run parks and is answered
    let mailed = hold(&world, "mailed", "a", world.node.session).await;
    for message in world.inbox.list("mailed").await.expect("the inbox") {
        world.inbox.ack(&mailed, &message).await.expect("ack");
    }
    must_claim_answer(&world, "t3", "l3").await;
    converges(&world, &kept, "the mail taken").await;
    let mailed_has_mail = kept
        .view
        .look(|known| known.seats().any(|seat| seat == "mailed"))
        .expect("a view");
    assert!(mailed_has_mail, "still held");
    assert!(
        seat::release(store.as_ref(), &world.keys, &mailed)
            .await
            .expect("release")
    );
    converges(&world, &kept, "the mailed seat released").await;
    let gone = kept
        .view
        .look(|known| !known.seats().any(|seat| seat == "mailed"))
        .expect("a view");
    assert!(
        gone,
        "no holder, no mail and no runs: not a seat the pass places"
    );
}

async fn a_view_complete_through_an_epoch_holds_its_holder(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store.clone(), prefix).await;
    let kept = keep(&world);
    converges(&world, &kept, "the load").await;
    let session = store.lease_grant(30).await.expect("a session");
    // fifty seats acquired one after another while the view is looked at all the while
    let (fences_tx, mut fences_rx) = tokio::sync::mpsc::unbounded_channel();
    let writer = tokio::spawn({
        let world_store = world.store.clone();
        let keys = world.keys.clone();
        async move {
            for i in 0..50 {
                let holder = Holder {
                    node: "b".into(),
                    incarnation: "b-1".into(),
                };
                let seat = format!("seat-{i}");
                match seat::acquire(world_store.as_ref(), &keys, &seat, &holder, session)
                    .await
                    .expect("acquire")
                {
                    Acquire::Held(fence) => fences_tx.send(fence).expect("the test listens"),
                    Acquire::HeldBy { holder, .. } => panic!("{seat} held by {holder:?}"),
                }
            }
        }
    });
    let mut fences: Vec<Fence> = Vec::new();
    let mut looks = 0u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        while let Ok(fence) = fences_rx.try_recv() {
            fences.push(fence);
        }
        let done = writer.is_finished() && fences.len() == 50;
        if done {
            // one more write to the seats' prefix: everything before it is complete
            world
                .inbox
                .enqueue("mailed", &mail("last"))
                .await
                .expect("mail");
        }
        // every fence the view says it is complete through is in it
        let complete = kept
            .view
            .look(|known| {
                fences
                    .iter()
                    .filter(|fence| known.complete_through() >= fence.epoch)
                    .inspect(|fence| {
                        let held = known.holders().get(&fence.seat);
                        assert!(
                            held.is_some_and(|held| held.epoch == fence.epoch),
                            "complete through {} without {} (epoch {}): {held:?}",
                            known.complete_through(),
                            fence.seat,
                            fence.epoch
                        );
                    })
                    .count()
            })
            .unwrap_or(0);
        looks += 1;
        if done {
            converges(&world, &kept, "the last write").await;
            let complete = kept
                .view
                .look(|known| {
                    fences
                        .iter()
                        .all(|fence| known.complete_through() >= fence.epoch)
                })
                .expect("a view");
            assert!(
                complete,
                "complete through every fence once a later write is in"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fifty seats were not acquired in time ({complete} complete)"
        );
        tokio::task::yield_now().await;
    }
    writer.await.expect("the writer");
    assert!(
        looks > 50,
        "the view was looked at while it changed ({looks} looks)"
    );

    // the session lapses: its fifty holders go in one revision, and their changes reach the
    // view one by one; a view complete through that revision holds none of them
    let revoke = tokio::spawn({
        let store = world.store.clone();
        async move { store.lease_revoke(session).await.expect("revoke") }
    });
    let held_on = |known: &Known| {
        known
            .holders()
            .values()
            .filter(|held| held.lease == session)
            .count()
    };
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let look = kept
            .view
            .look(|known| (known.complete_through(), held_on(known)))
            .expect("a view");
        seen.push(look);
        if revoke.is_finished() && look.1 == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the holders never went: {look:?}"
        );
        tokio::task::yield_now().await;
    }
    revoke.await.expect("the revoke");
    let revoked_at = world.store.revision().await.expect("the revision");
    for (complete, left) in &seen {
        assert!(
            *complete < revoked_at || *left == 0,
            "complete through {complete} (the revoke was {revoked_at}) with {left} of its holders left"
        );
    }
}
