//! Scenario: the run record's invariants (DESIGN §6, I1–I10), each as a test that fails when
//! the invariant is broken. Every test runs twice: on the embedded store and on a real etcd.
//!
//! I11 (nothing blocks forever) is shown where the bounds live: every etcd call is bounded by
//! its call timeout (t01) and every retry loop in `cluster` is counted.

mod support;

use std::sync::Arc;

use boxfleet_cluster::events;
use boxfleet_cluster::inbox::{Delivery, Enqueued};
use boxfleet_cluster::record::{EndingReason, Status, Usage};
use boxfleet_cluster::runs::{Outcome, RunError};
use boxfleet_cluster::spend;
use boxfleet_cluster::store::Store;
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::transition::{EndingGuard, Refusal, Share, Transition};
use boxfleet_tests::{EtcdServer, unique_prefix};
use support::*;

on_both_stores!(
    i1_a_launching_run_is_never_polled_claimed_or_resumed,
    i2_a_completion_is_claimed_at_most_once_per_launch,
    i3_tokens_are_charged_and_the_phase_published_once_per_job,
    i4_the_first_qualifying_answer_wins,
    i5_take_revival_and_ending_exclude_each_other,
    i6_a_decided_ending_takes_no_other_write,
    i7_a_row_owing_a_reply_is_never_deleted,
    i8_the_box_is_reclaimed_before_the_record_is_deleted,
    i9_a_node_without_the_seat_writes_nothing,
    i10_every_event_is_announced_once,
    inbox_acks_dedupes_defers_and_dead_letters,
    seat_leases_acquire_renew_release_and_expire,
    ops_ids_are_rebased_past_29_days_and_inherited,
    waiter_duty_is_held_by_one_node_until_it_lapses,
);

fn claim(launch: &str) -> Transition {
    Transition::ClaimCompletion {
        launch_id: launch.into(),
    }
}

async fn event_count(world: &World, kind: &str) -> usize {
    events::read_from(world.store.as_ref(), &world.keys, 0)
        .await
        .expect("read events")
        .iter()
        .filter(|stored| stored.event.kind == kind)
        .count()
}

/// Break tried: let `ClaimCompletion` accept `launching` → the claim below lands.
async fn i1_a_launching_run_is_never_polled_claimed_or_resumed(
    store: Arc<dyn Store>,
    prefix: &str,
) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    let record = Box::new(launching("t1", "l1"));
    must_apply(&world, &fence, "t1", Transition::OpenLaunch { record }).await;

    // --- phase: a completion fired inside the launch window claims nothing
    let refusal = must_refuse(&world, &fence, "t1", claim("l1")).await;
    assert!(
        matches!(
            refusal,
            Refusal::WrongStatus {
                found: Status::Launching,
                ..
            }
        ),
        "{refusal}"
    );
    let answer_claim = Transition::ClaimAnswer {
        launch_id: "l1".into(),
    };
    must_refuse(&world, &fence, "t1", answer_claim).await;
    let take = Transition::Take {
        launch_id: "l1".into(),
    };
    must_refuse(&world, &fence, "t1", take).await;

    // --- phase: the poll's list leaves it out
    let polled = world.runs.list_running().await.expect("list running");
    assert!(
        polled.is_empty(),
        "a launching run was listed for polling: {polled:?}"
    );
    assert_eq!(must_status(&world, "t1").await, Status::Launching);
}

/// Break tried: drop the launch_id check in `ClaimCompletion` → the stale claim lands; drop the
/// row CAS in `Runs::attempt` → two of the racing claims land.
async fn i2_a_completion_is_claimed_at_most_once_per_launch(store: Arc<dyn Store>, prefix: &str) {
    let world = Arc::new(World::new(store, prefix).await);
    must_run(&world, "t1", "l1").await;

    // --- phase: eight claimers race for one completion
    let mut racers = Vec::new();
    for _ in 0..8 {
        let world = world.clone();
        racers.push(tokio::spawn(async move {
            let fence = world.fence().clone();
            world.runs.apply(&fence, "t1", claim("l1")).await
        }));
    }
    let mut won = 0;
    for racer in racers {
        match racer.await.expect("join") {
            Ok(_) => won += 1,
            Err(RunError::Refused(_)) => {}
            Err(error) => panic!("unexpected: {error}"),
        }
    }
    assert_eq!(won, 1, "a completion was claimed {won} times");

    // --- phase: a duplicate for the old job after a relaunch claims nothing
    let fence = world.fence().clone();
    let relaunch = Transition::Relaunch {
        launch_id: "l1".into(),
        new_launch_id: "l2".into(),
        brief: "follow-up".into(),
    };
    must_apply(&world, &fence, "t1", relaunch).await;
    let commit = Transition::CommitSuspension {
        launch_id: "l2".into(),
        conversation: b"c2".to_vec(),
    };
    must_apply(&world, &fence, "t1", commit).await;
    let refusal = must_refuse(&world, &fence, "t1", claim("l1")).await;
    assert!(matches!(refusal, Refusal::WrongLaunch { .. }), "{refusal}");
    must_apply(&world, &fence, "t1", claim("l2")).await;
}

/// Break tried: skip the `AlreadyDone` check for a landed share → the retried charge counts
/// twice; skip the phase check → two phase events.
async fn i3_tokens_are_charged_and_the_phase_published_once_per_job(
    store: Arc<dyn Store>,
    prefix: &str,
) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_run(&world, "t1", "l1").await;
    must_apply(&world, &fence, "t1", claim("l1")).await;
    let usage = Usage {
        input_tokens: 1000,
        output_tokens: 200,
        cost_micros: 5000,
        ..Usage::default()
    };
    let charge = |share| Transition::Charge {
        launch_id: "l1".into(),
        share,
        usage,
    };

    // --- phase: the seat share lands, its reply is lost; the retry finds it landed
    world.faults.lose_next_reply(1);
    must_apply(&world, &fence, "t1", charge(Share::Seat)).await;
    let again = must_refuse(&world, &fence, "t1", charge(Share::Seat)).await;
    assert_eq!(again, Refusal::AlreadyDone);

    // --- phase: the company share fails outright, is retried, and lands once
    world.faults.fail_next_writes(1);
    let failed = world
        .runs
        .apply_at(&fence, "t1", charge(Share::Company), at(100))
        .await;
    assert!(
        failed.is_ok(),
        "a retryable failure is retried inside apply: {failed:?}"
    );
    must_refuse(&world, &fence, "t1", charge(Share::Company)).await;

    let record = world
        .runs
        .read("t1")
        .await
        .expect("read")
        .expect("exists")
        .record;
    let charged = record.charged.expect("charge recorded");
    assert!(
        charged.seat && charged.company,
        "both shares recorded: {charged:?}"
    );
    for share in [Share::Seat, Share::Company] {
        let scope = spend::scope(share, SEAT);
        for window in spend::windows(at(100)) {
            let (counter, _) = spend::read(world.store.as_ref(), &world.keys, &scope, &window)
                .await
                .expect("read counter");
            assert_eq!(counter.charges, 1, "{scope}/{window} charged {counter:?}");
            assert_eq!(counter.input_tokens, 1000);
        }
    }

    // --- phase: the phase record is published once across a lost reply and a retry
    let publish = Transition::PublishPhase {
        launch_id: "l1".into(),
        phase: serde_json::json!({"report": "done"}),
    };
    world.faults.lose_next_reply(1);
    must_apply(&world, &fence, "t1", publish.clone()).await;
    must_refuse(&world, &fence, "t1", publish).await;
    assert_eq!(event_count(&world, events::kind::PHASE_COMPLETED).await, 1);
}

/// Break tried: accept `Answered` in `RecordAnswer` → the second reply overwrites the first;
/// drop the `asked_at` comparison → the early message answers.
async fn i4_the_first_qualifying_answer_wins(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_park(&world, "t1", "l1").await;
    let record = |id: &str, posted| Transition::RecordAnswer {
        answer: answer(id, posted),
    };

    // --- phase: a message written while the job ran (before asked_at) answers nothing
    let early = must_refuse(&world, &fence, "t1", record("d0", at(5))).await;
    assert_eq!(early, Refusal::PostedBeforeQuestion);

    // --- phase: the first reply after the question wins; a second loses the CAS
    must_apply(&world, &fence, "t1", record("d1", at(20))).await;
    let second = must_refuse(&world, &fence, "t1", record("d2", at(21))).await;
    assert_eq!(second, Refusal::AlreadyAnswered);
    let copy = must_refuse(&world, &fence, "t1", record("d1", at(20))).await;
    assert_eq!(
        copy,
        Refusal::AlreadyRecorded,
        "a copy of the answer is recognised"
    );

    // --- phase: the answer is on the row before the delivery is acked
    let delivery = Delivery {
        delivery_id: "d1".into(),
        conversation_key: Some("dm-alice".into()),
        partition: None,
        from: "alice".into(),
        text: "postgres".into(),
        posted_at: at(20),
        answer_given: None,
    };
    let queued = world.inbox.enqueue(SEAT, &delivery).await.expect("enqueue");
    assert!(matches!(queued, Enqueued::Queued { .. }));
    let head = world.inbox.head(SEAT).await.expect("head").expect("queued");
    let run = world
        .runs
        .read("t1")
        .await
        .expect("read")
        .expect("exists")
        .record;
    assert_eq!(
        run.answer.as_ref().map(|a| a.delivery_id.as_str()),
        Some("d1")
    );
    world.inbox.ack(&fence, &head).await.expect("ack");
    let redelivered = world.inbox.enqueue(SEAT, &delivery).await.expect("enqueue");
    assert_eq!(
        redelivered,
        Enqueued::AlreadyWorked,
        "the ledger drops the redelivered copy"
    );
}

/// Break tried: let `Revive` ignore `taken_at` → a revived run also had its answer taken;
/// let `Take` run on an ending row → the answer is used and handed back.
async fn i5_take_revival_and_ending_exclude_each_other(store: Arc<dyn Store>, prefix: &str) {
    let world = Arc::new(World::new(store, prefix).await);
    let fence = world.fence().clone();
    let take = || Transition::Take {
        launch_id: "l1".into(),
    };
    let end = || Transition::DecideEnding {
        reason: EndingReason::AbandonedTail,
        detail: String::new(),
        guard: EndingGuard::Any,
        announce: None,
    };

    // --- phase: take first → revival refused, the ending hands nothing back
    must_claim_answer(&world, "t1", "l1").await;
    must_apply(&world, &fence, "t1", take()).await;
    assert_eq!(
        must_refuse(&world, &fence, "t1", Transition::Revive).await,
        Refusal::AnswerTaken
    );
    let ended = must_apply(&world, &fence, "t1", end()).await;
    let ended = ended.record().expect("written").clone();
    assert!(
        ended.hand_back.is_empty(),
        "a taken answer is spent, never handed back"
    );

    // --- phase: revival first → the take has no claim to take under
    must_claim_answer(&world, "t2", "l1").await;
    must_apply(&world, &fence, "t2", Transition::Revive).await;
    let refused = must_refuse(&world, &fence, "t2", take()).await;
    assert!(matches!(refused, Refusal::WrongStatus { .. }), "{refused}");

    // --- phase: ending first → no take; the reply goes back once
    must_claim_answer(&world, "t3", "l1").await;
    must_apply(&world, &fence, "t3", end()).await;
    let refused = must_refuse(&world, &fence, "t3", take()).await;
    assert!(matches!(refused, Refusal::EndingDecided(_)), "{refused}");
    let row = world
        .runs
        .read("t3")
        .await
        .expect("read")
        .expect("exists")
        .record;
    assert_eq!(row.hand_back.len(), 1);

    // --- phase: all three race, many times; exactly the consistent outcomes appear
    for round in 0..6 {
        let turn = format!("race{round}");
        must_claim_answer(&world, &turn, "l1").await;
        let (a, b, c) = tokio::join!(
            world.runs.apply(&fence, &turn, take()),
            world.runs.apply(&fence, &turn, Transition::Revive),
            world.runs.apply(&fence, &turn, end()),
        );
        let row = world
            .runs
            .read(&turn)
            .await
            .expect("read")
            .expect("exists")
            .record;
        let taken = a.is_ok();
        let revived = b.is_ok();
        assert!(
            !(taken && revived),
            "take and revival both landed on {turn}"
        );
        if c.is_ok() {
            // the ending decided whether the reply goes back, from what landed before it
            let ending = row.ending.expect("ending");
            assert_eq!(ending.reply_goes_back, !taken, "{turn}: taken={taken}");
            assert_eq!(row.hand_back.len(), usize::from(!taken));
        }
    }
}

/// Break tried: drop the ending check at the top of `decide` → the claim below lands on an
/// ending row.
async fn i6_a_decided_ending_takes_no_other_write(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_run(&world, "t1", "l1").await;
    let end = Transition::DecideEnding {
        reason: EndingReason::CollectUnreachable,
        detail: "box gone".into(),
        guard: EndingGuard::Any,
        announce: None,
    };
    must_apply(&world, &fence, "t1", end).await;
    let writes = [
        claim("l1"),
        Transition::HandBackClaim {
            launch_id: "l1".into(),
            collect_failed: false,
        },
        Transition::RecordAnswer {
            answer: answer("d1", at(20)),
        },
        Transition::Park {
            launch_id: "l1".into(),
            question: question(at(10)),
        },
        Transition::Relaunch {
            launch_id: "l1".into(),
            new_launch_id: "l2".into(),
            brief: String::new(),
        },
        Transition::DecideEnding {
            reason: EndingReason::Finished,
            detail: String::new(),
            guard: EndingGuard::Any,
            announce: None,
        },
        Transition::FenceRun { owner: None },
    ];
    for write in writes {
        let name = write.name();
        let refusal = must_refuse(&world, &fence, "t1", write).await;
        assert!(
            matches!(
                refusal,
                Refusal::EndingDecided(EndingReason::CollectUnreachable)
            ),
            "{name}: {refusal}"
        );
    }
    let row = world
        .runs
        .read("t1")
        .await
        .expect("read")
        .expect("exists")
        .record;
    assert_eq!(
        row.ending.map(|e| e.reason),
        Some(EndingReason::CollectUnreachable)
    );
}

/// Break tried: drop the `OwesHandBack` check in `Finish` → the row is deleted with the
/// reply on it.
async fn i7_a_row_owing_a_reply_is_never_deleted(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_claim_answer(&world, "t1", "l1").await;
    let end = Transition::DecideEnding {
        reason: EndingReason::ResumeBroken,
        detail: String::new(),
        guard: EndingGuard::Claim {
            launch_id: "l1".into(),
        },
        announce: None,
    };
    let row = must_apply(&world, &fence, "t1", end).await;
    let row = row.record().expect("written").clone();
    assert_eq!(row.hand_back.len(), 1, "the untaken reply is owed back");
    let release = Transition::ReleaseBox {
        sandbox_id: "box-t1".into(),
    };
    must_apply(&world, &fence, "t1", release).await;

    // --- phase: the delete is refused while the copy is owed
    assert_eq!(
        must_refuse(&world, &fence, "t1", Transition::Finish).await,
        Refusal::OwesHandBack
    );

    // --- phase: publish the copy, clear it, then the delete lands
    let copy = &row.hand_back[0];
    let delivery = Delivery {
        delivery_id: copy.delivery_id.clone(),
        conversation_key: copy.conversation_key.clone(),
        partition: copy.partition.clone(),
        from: copy.from.clone(),
        text: copy.text.clone(),
        posted_at: copy.posted_at,
        answer_given: None,
    };
    world
        .inbox
        .enqueue(SEAT, &delivery)
        .await
        .expect("publish copy");
    let again = world
        .inbox
        .enqueue(SEAT, &delivery)
        .await
        .expect("republish copy");
    assert_eq!(
        again,
        Enqueued::Duplicate,
        "a repeated publish is the same message"
    );
    let clear = Transition::ClearHandBack {
        delivery_ids: vec![copy.delivery_id.clone()],
    };
    must_apply(&world, &fence, "t1", clear).await;
    assert_eq!(
        must_apply(&world, &fence, "t1", Transition::Finish).await,
        Outcome::Deleted
    );
    // the original delivery is spent: a late redelivery of it never runs as a turn
    let original = Delivery {
        delivery_id: "d1".into(),
        ..delivery
    };
    let late = world.inbox.enqueue(SEAT, &original).await.expect("enqueue");
    assert_eq!(late, Enqueued::AlreadyWorked);
}

/// Break tried: drop the `BoxNotReclaimed` check in `Finish` → the record is deleted while it
/// still names the box.
async fn i8_the_box_is_reclaimed_before_the_record_is_deleted(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    must_run(&world, "t1", "l1").await;
    let end = Transition::DecideEnding {
        reason: EndingReason::Finished,
        detail: String::new(),
        guard: EndingGuard::Any,
        announce: None,
    };
    must_apply(&world, &fence, "t1", end).await;
    let refusal = must_refuse(&world, &fence, "t1", Transition::Finish).await;
    assert_eq!(refusal, Refusal::BoxNotReclaimed("box-t1".into()));
    // a failed reclaim writes nothing: the record keeps the id
    let row = world
        .runs
        .read("t1")
        .await
        .expect("read")
        .expect("exists")
        .record;
    assert_eq!(row.sandbox_id.as_deref(), Some("box-t1"));
    let wrong = Transition::ReleaseBox {
        sandbox_id: "box-other".into(),
    };
    must_refuse(&world, &fence, "t1", wrong).await;
    let release = Transition::ReleaseBox {
        sandbox_id: "box-t1".into(),
    };
    must_apply(&world, &fence, "t1", release).await;
    assert_eq!(
        must_apply(&world, &fence, "t1", Transition::Finish).await,
        Outcome::Deleted
    );
}

/// Break tried: drop `fence_compare` from `Runs::attempt` → the old holder's claim lands after
/// the handoff.
async fn i9_a_node_without_the_seat_writes_nothing(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let old = world.fence().clone();
    must_park(&world, "t1", "l1").await;
    must_run(&world, "t2", "l1").await;

    // --- phase: the old holder's session ends; a new holder acquires and fences the runs
    world
        .store
        .lease_revoke(world.node.session)
        .await
        .expect("revoke old session");
    let new = join(&world.store, &world.keys, "b").await;
    assert!(new.fence.epoch > old.epoch);
    let fenced = world.runs.fence_seat_runs(&new.fence).await.expect("fence");
    assert_eq!(fenced.len(), 2);
    assert!(fenced.iter().all(|run| run.record.epoch == new.fence.epoch));
    let before = world.runs.list().await.expect("list");

    // --- phase: every write the old holder tries is refused, and nothing moved
    let attempts = [
        (
            "t1",
            Transition::RecordAnswer {
                answer: answer("d1", at(20)),
            },
        ),
        ("t2", claim("l1")),
        (
            "t2",
            Transition::DecideEnding {
                reason: EndingReason::AbandonedTail,
                detail: String::new(),
                guard: EndingGuard::Any,
                announce: None,
            },
        ),
        (
            "t3",
            Transition::OpenLaunch {
                record: Box::new(launching("t3", "l1")),
            },
        ),
    ];
    for (turn, write) in attempts {
        let name = write.name();
        match world.runs.apply_at(&old, turn, write, at(100)).await {
            Err(RunError::SeatNotHeld { .. }) | Err(RunError::Refused(Refusal::Fenced { .. })) => {}
            other => panic!("{name} by the old holder must be refused, got {other:?}"),
        }
    }
    assert_eq!(
        world.runs.list().await.expect("list"),
        before,
        "the old holder moved a row"
    );
    let message = Delivery {
        delivery_id: "m1".into(),
        conversation_key: None,
        partition: None,
        from: "bob".into(),
        text: "hi".into(),
        posted_at: at(1),
        answer_given: None,
    };
    world.inbox.enqueue(SEAT, &message).await.expect("enqueue");
    let head = world.inbox.head(SEAT).await.expect("head").expect("queued");
    assert!(
        world.inbox.ack(&old, &head).await.is_err(),
        "old holder acked a message"
    );

    // --- phase: the new holder writes as usual
    let answer_now = Transition::RecordAnswer {
        answer: answer("d1", at(20)),
    };
    must_apply(&world, &new.fence, "t1", answer_now).await;
    world
        .inbox
        .ack(&new.fence, &head)
        .await
        .expect("new holder acks");
}

/// Break tried: drop the create-if-absent compare in `events::create` → the repeated decision
/// after a lost reply writes the event twice (its revision moves and the count of writes
/// seen by a watch doubles).
async fn i10_every_event_is_announced_once(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    let from = boxfleet_cluster::StoreExt::revision(world.store.as_ref())
        .await
        .expect("rev");

    // --- phase: a launch whose reply is lost is the same launch and the same announcement
    world.faults.lose_next_reply(1);
    let record = Box::new(launching("t1", "l1"));
    must_apply(&world, &fence, "t1", Transition::OpenLaunch { record }).await;
    assert_eq!(event_count(&world, events::kind::RUN_STARTED).await, 1);

    // --- phase: an ending decided twice at one instant announces one failure
    let end = Transition::DecideEnding {
        reason: EndingReason::LaunchFailed,
        detail: "no box".into(),
        guard: EndingGuard::Any,
        announce: None,
    };
    world.faults.lose_next_reply(1);
    must_apply(&world, &fence, "t1", end.clone()).await;
    must_refuse(&world, &fence, "t1", end).await;
    assert_eq!(event_count(&world, events::kind::RUN_FAILED).await, 1);

    // --- phase: the engine repeats the launch after the run ended: the same announcement
    let release = Transition::ReleaseBox {
        sandbox_id: "none".into(),
    };
    must_refuse(&world, &fence, "t1", release).await;
    must_apply(&world, &fence, "t1", Transition::Finish).await;
    let record = Box::new(launching("t1", "l1"));
    must_apply(&world, &fence, "t1", Transition::OpenLaunch { record }).await;
    assert_eq!(event_count(&world, events::kind::RUN_STARTED).await, 1);

    // --- phase: no event key was ever written twice
    let stored = events::read_from(world.store.as_ref(), &world.keys, from)
        .await
        .expect("read");
    for event in &stored {
        let kv = world
            .store
            .get(&world.keys.event(&event.event.id))
            .await
            .expect("get");
        assert_eq!(
            kv.expect("event").version,
            1,
            "event {} rewritten",
            event.event.kind
        );
    }
}

/// The inbox: ordered, same-id dedupe, defer keeps the place, dead letter past 25.
async fn inbox_acks_dedupes_defers_and_dead_letters(store: Arc<dyn Store>, prefix: &str) {
    let world = World::new(store, prefix).await;
    let fence = world.fence().clone();
    let message = |id: &str| Delivery {
        delivery_id: id.into(),
        conversation_key: Some("c".into()),
        partition: None,
        from: "bob".into(),
        text: format!("message {id}"),
        posted_at: at(1),
        answer_given: None,
    };
    for id in ["m1", "m2", "m3"] {
        let queued = world
            .inbox
            .enqueue(SEAT, &message(id))
            .await
            .expect("enqueue");
        assert!(matches!(queued, Enqueued::Queued { .. }));
    }
    assert_eq!(
        world
            .inbox
            .enqueue(SEAT, &message("m2"))
            .await
            .expect("dup"),
        Enqueued::Duplicate
    );

    // --- phase: defer keeps the head in place and counts its deliveries
    let head = world.inbox.head(SEAT).await.expect("head").expect("m1");
    assert_eq!(head.delivery.delivery_id, "m1");
    world.inbox.defer(&fence, &head).await.expect("defer");
    let head = world.inbox.head(SEAT).await.expect("head").expect("m1");
    assert_eq!(
        (head.delivery.delivery_id.as_str(), head.delivery_count),
        ("m1", 1)
    );
    // a stale copy of the message is refused
    let stale = world.inbox.list(SEAT).await.expect("list")[0].clone();
    world.inbox.defer(&fence, &stale).await.expect("defer");
    assert!(
        world.inbox.defer(&fence, &head).await.is_err(),
        "stale defer landed"
    );

    // --- phase: past 25 deliveries the message moves to the dead letters
    loop {
        let head = world.inbox.head(SEAT).await.expect("head").expect("m1");
        if head.delivery.delivery_id != "m1" {
            break;
        }
        world.inbox.defer(&fence, &head).await.expect("defer");
    }
    let dead = world.inbox.dead_letters(SEAT).await.expect("dead letters");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].delivery_count,
        boxfleet_cluster::inbox::MAX_DELIVERIES + 1
    );
    let order: Vec<String> = world
        .inbox
        .list(SEAT)
        .await
        .expect("list")
        .into_iter()
        .map(|m| m.delivery.delivery_id)
        .collect();
    assert_eq!(order, ["m2", "m3"]);
}

/// Seat leases: epoch = the holder key's create_revision; acquire is idempotent for its holder;
/// a renewed session outlives its TTL; release and expiry free the seat for another node.
async fn seat_leases_acquire_renew_release_and_expire(store: Arc<dyn Store>, prefix: &str) {
    use boxfleet_cluster::seat::{self, Acquire, Holder, NodeInfo, Session};
    use std::time::Duration;
    let keys = boxfleet_cluster::Keys::new(prefix);
    let info = |node: &str| NodeInfo {
        node: node.into(),
        addr: "127.0.0.1:7400".into(),
        incarnation: format!("{node}-1"),
        started_at: at(0),
        build: "test".into(),
        host: "test-host".into(),
        draining: false,
        insecure: false,
        tls: false,
    };
    let holder = |node: &str| Holder {
        node: node.into(),
        incarnation: format!("{node}-1"),
    };

    // --- phase: a acquires; the epoch is the holder key's create_revision; again is the same
    let a = Session::open(store.as_ref(), &keys, info("a"), 2)
        .await
        .expect("session a");
    let Acquire::Held(fence) = seat::acquire(store.as_ref(), &keys, SEAT, &holder("a"), a.lease)
        .await
        .expect("acquire")
    else {
        panic!("a free seat is acquired");
    };
    let kv = store
        .get(&keys.seat_holder(SEAT))
        .await
        .expect("get")
        .expect("holder key");
    assert_eq!(kv.create_revision, fence.epoch);
    let again = seat::acquire(store.as_ref(), &keys, SEAT, &holder("a"), a.lease).await;
    assert_eq!(again.expect("re-acquire"), Acquire::Held(fence.clone()));

    // --- phase: b is refused while a renews past its TTL
    let b = Session::open(store.as_ref(), &keys, info("b"), 2)
        .await
        .expect("session b");
    for _ in 0..6 {
        a.renew(store.as_ref()).await.expect("renew a");
        b.renew(store.as_ref()).await.expect("renew b");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let refused = seat::acquire(store.as_ref(), &keys, SEAT, &holder("b"), b.lease).await;
    assert!(matches!(refused.expect("acquire"), Acquire::HeldBy { .. }));
    assert!(
        seat::holds(store.as_ref(), &keys, &fence)
            .await
            .expect("holds")
    );
    let nodes = seat::nodes(store.as_ref(), &keys).await.expect("nodes");
    assert_eq!(nodes.len(), 2);

    // --- phase: an acquire timed out unapplied (re-read: absent) is sent again, and one
    // whose reply was lost after it landed reads back as held; either way, one holder
    let faulty = boxfleet_cluster::store::failpoint::Faulty::from_arc(store.clone());
    let faults = faulty.faults();
    let other = "seat-timed-out";
    faults.time_out_next_writes(1);
    let timed_out = seat::acquire(&faulty, &keys, other, &holder("a"), a.lease).await;
    assert!(
        matches!(timed_out, Ok(Acquire::Held(_))),
        "an unapplied acquire is sent again: {timed_out:?}"
    );
    let lost = "seat-reply-lost";
    faults.lose_next_reply(1);
    let landed = seat::acquire(&faulty, &keys, lost, &holder("a"), a.lease).await;
    assert!(
        matches!(landed, Ok(Acquire::Held(_))),
        "a landed acquire reads back as held: {landed:?}"
    );
    for released in [other, lost] {
        let Ok(Acquire::Held(fence)) =
            seat::acquire(store.as_ref(), &keys, released, &holder("a"), a.lease).await
        else {
            panic!("{released} is a's");
        };
        assert!(
            seat::release(store.as_ref(), &keys, &fence)
                .await
                .expect("release")
        );
    }

    // --- phase: a releases; b acquires under a newer epoch; a's fence no longer holds
    assert!(
        seat::release(store.as_ref(), &keys, &fence)
            .await
            .expect("release")
    );
    let Acquire::Held(b_fence) = seat::acquire(store.as_ref(), &keys, SEAT, &holder("b"), b.lease)
        .await
        .expect("acquire")
    else {
        panic!("a released seat is acquired");
    };
    assert!(b_fence.epoch > fence.epoch);
    assert!(
        !seat::holds(store.as_ref(), &keys, &fence)
            .await
            .expect("holds")
    );
    assert!(
        !seat::release(store.as_ref(), &keys, &fence)
            .await
            .expect("stale release")
    );

    // --- phase: b stops renewing; its session expires and takes the seat with it
    boxfleet_tests::wait_until(
        "b's session to expire",
        Duration::from_secs(20),
        async || {
            a.renew(store.as_ref()).await.is_ok()
                && seat::holder(store.as_ref(), &keys, SEAT)
                    .await
                    .expect("holder")
                    .is_none()
        },
    )
    .await;
    assert!(
        b.renew(store.as_ref()).await.is_err(),
        "an expired session renews"
    );
    let nodes = seat::nodes(store.as_ref(), &keys).await.expect("nodes");
    assert_eq!(
        nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    a.close(store.as_ref()).await.expect("close");
}

/// The 29/30-day rule: within 29 days an attempt mints at the work's start; past it, the first
/// attempt records its own instant and later attempts inside 29 days of that inherit it.
async fn ops_ids_are_rebased_past_29_days_and_inherited(store: Arc<dyn Store>, prefix: &str) {
    use boxfleet_cluster::ops::{self, Mint};
    use boxfleet_cluster::retention::Retention;
    use chrono::Duration;
    let keys = boxfleet_cluster::Keys::new(prefix);
    let retention = Retention::ledger();
    let began = at(0);
    let day = |n: i64| began + Duration::days(n);
    let mint = |now| ops::mint(store.as_ref(), &keys, &retention, "work-1", began, now);
    assert_eq!(mint(day(28)).await.expect("mint"), Mint::Began(began));
    assert_eq!(mint(day(30)).await.expect("mint"), Mint::Rebased(day(30)));
    // a failed resume retried later, anywhere, derives the ids the attempt before it derived
    assert_eq!(mint(day(40)).await.expect("mint"), Mint::Inherited(day(30)));
    // past 29 days of the recorded instant, the attempt rebases again
    assert_eq!(mint(day(60)).await.expect("mint"), Mint::Rebased(day(60)));
}

/// The waiter duty: one holder at a time, renewed by its holder, taken by a peer once lapsed.
async fn waiter_duty_is_held_by_one_node_until_it_lapses(store: Arc<dyn Store>, prefix: &str) {
    use boxfleet_cluster::duty::{self, Duty};
    use boxfleet_cluster::seat::Holder;
    use std::time::Duration;
    let keys = boxfleet_cluster::Keys::new(prefix);
    let a = Holder {
        node: "a".into(),
        incarnation: "1".into(),
    };
    let b = Holder {
        node: "b".into(),
        incarnation: "1".into(),
    };
    let Duty::Mine { lease, .. } = duty::claim_waiter(store.as_ref(), &keys, &a, None, 2)
        .await
        .expect("claim")
    else {
        panic!("a free duty is claimed");
    };
    let peer = duty::claim_waiter(store.as_ref(), &keys, &b, None, 2)
        .await
        .expect("claim");
    assert_eq!(peer, Duty::Peer(a.clone()));
    let renewed = duty::claim_waiter(store.as_ref(), &keys, &a, Some(lease), 2).await;
    assert!(matches!(renewed.expect("renew"), Duty::Mine { lease: l, .. } if l == lease));
    // a stops renewing; b takes the duty once it lapses
    boxfleet_tests::wait_until(
        "the duty to lapse to b",
        Duration::from_secs(20),
        async || {
            matches!(
                duty::claim_waiter(store.as_ref(), &keys, &b, None, 30).await,
                Ok(Duty::Mine { .. })
            )
        },
    )
    .await;
    let told = duty::claim_waiter(store.as_ref(), &keys, &a, Some(lease), 2).await;
    assert_eq!(told.expect("claim"), Duty::Peer(b));
}
