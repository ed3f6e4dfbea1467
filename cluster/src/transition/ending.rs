//! How a run ends: the ending is decided once and its terms never change (I6), a loss is
//! announced as `sandbox_run_failed`, the box is released (I8), and the row is deleted only
//! with its box reclaimed and nothing owed to the seat (I7). A parked run whose pause TTL
//! passed loses its box too, but not its question: it goes to re-seed.

use crate::events::{self, Event};
use crate::record::{Ending, EndingReason, RunRecord, Status};
use crate::stranded::StrandedBox;

use super::answer::{answered_event, let_answer_go};
use super::step::{Decision, Effect, EndingGuard, Next, Refusal, Step};

/// Decides the ending; an untaken answer on the run goes back to the seat as a copy.
pub(super) fn decide_ending(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    reason: EndingReason,
    detail: &str,
    guard: &EndingGuard,
) -> Result<(), Refusal> {
    let (current, now) = (step.current, step.now);
    match guard {
        EndingGuard::Claim { launch_id } => {
            step.own_claim(launch_id, None)?;
        }
        EndingGuard::Launching { launch_id } => {
            step.require_status(Status::Launching)?;
            step.same_launch(launch_id)?;
        }
        EndingGuard::Any => {}
    }
    // an answer by name no turn took, let go with its run, is announced gone (no copy of it
    // goes back: it has no ordinary form to become)
    if let Some(answer) = &current.answer
        && answer.taken_at.is_none()
        && answer.route == crate::record::AnswerRoute::Operator
    {
        effects.push(answered_event(current, answer, "gone", now));
    }
    let reply_goes_back = let_answer_go(next, effects);
    let mut ending = Ending {
        reason,
        detail: detail.to_owned(),
        decided_at: now,
        epoch: step.fence.epoch,
        event_id: String::new(),
        reply_goes_back,
    };
    if reason.is_failure() {
        let event = Event::new(
            events::kind::RUN_FAILED,
            &[&current.turn_id, reason.as_str(), &now.to_rfc3339()],
            &current.turn_id,
            &current.launch_id,
            &current.seat,
            now,
            serde_json::json!({
                "reason": reason.as_str(),
                "detail": detail,
                "reply_went_back": reply_goes_back,
                "sandbox_id": current.sandbox_id,
            }),
        );
        ending.event_id = event.id.clone();
        effects.push(Effect::Announce(Box::new(event)));
    }
    next.status = Status::Ending;
    next.epoch = step.fence.epoch;
    next.ending = Some(ending);
    Ok(())
}

/// The ending run's box was killed: the record stops naming it.
pub(super) fn release_box(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Ending)?;
    match &current.sandbox_id {
        None => return Err(Refusal::AlreadyDone),
        Some(id) if id != sandbox_id => {
            return Err(Refusal::WrongBox {
                asked: sandbox_id.to_owned(),
                found: current.sandbox_id.clone(),
            });
        }
        Some(_) => {}
    }
    next.sandbox_id = None;
    next.job = None;
    next.paused_at = None;
    Ok(())
}

/// Deletes the ended row; the one rule whose decision is no record.
pub(super) fn finish(step: &Step<'_>) -> Result<Decision, Refusal> {
    let current = step.current;
    step.require_status(Status::Ending)?;
    if !current.hand_back.is_empty() {
        return Err(Refusal::OwesHandBack);
    }
    if let Some(id) = current
        .sandbox_id
        .as_ref()
        .or(current.reclaim_owed.as_ref())
    {
        return Err(Refusal::BoxNotReclaimed(id.clone()));
    }
    Ok(Decision {
        next: Next::Delete,
        effects: Vec::new(),
    })
}

/// The pause TTL passed: the box is released from the run and owed its kill, which comes after
/// this write (an answer's claim that lands first keeps its box); a question parks on as
/// re-seed, an answer stays answered (its resume re-seeds).
pub(super) fn expire_pause(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    let current = step.current;
    if !matches!(
        current.status,
        Status::AwaitingClarification | Status::Answered
    ) {
        return Err(step.wrong_status("awaiting_clarification"));
    }
    step.same_box(sandbox_id)?;
    // one owed kill at a time: an earlier one is finished first
    if let Some(owed) = &current.reclaim_owed {
        return Err(Refusal::BoxNotReclaimed(owed.clone()));
    }
    // the job's description (runner, command) stays: the re-seed relaunches it
    next.sandbox_id = None;
    next.reclaim_owed = Some(sandbox_id.to_owned());
    next.paused_at = None;
    if current.status == Status::AwaitingClarification {
        next.status = Status::Reseed;
    }
    Ok(())
}

/// The released box the run owed was killed: the record stops naming it.
pub(super) fn box_reclaimed(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    match &step.current.reclaim_owed {
        Some(owed) if owed == sandbox_id => {
            next.reclaim_owed = None;
            Ok(())
        }
        Some(owed) => Err(Refusal::WrongBox {
            asked: sandbox_id.to_owned(),
            found: Some(owed.clone()),
        }),
        None => Err(Refusal::AlreadyDone),
    }
}

/// A local box on a host the writer cannot reach is let go of (the record stops naming it) and
/// named, in the same write, for a node on that host to kill. The box the record names is let
/// go of only where nothing runs in it for the run any more — an ending, a claim being worked
/// (an answer re-seeds in a box of its own), a relaunch that died before it committed — and
/// the box a released run owes a kill whatever the status.
pub(super) fn strand_box(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    let current = step.current;
    let Some(host) = current.host.clone() else {
        return Err(Refusal::Invalid(format!(
            "box {sandbox_id} is not a local box: only a box on one host is stranded there"
        )));
    };
    if current.sandbox_id.as_deref() == Some(sandbox_id) {
        if !matches!(
            current.status,
            Status::Ending | Status::Resumed | Status::Launching
        ) {
            return Err(step.wrong_status("ending, resumed or launching"));
        }
        next.sandbox_id = None;
        next.paused_at = None;
        // an ended run's job goes with its box; a re-seed keeps the job's description (runner,
        // command): it relaunches it
        if current.status == Status::Ending {
            next.job = None;
        }
    } else if current.reclaim_owed.as_deref() == Some(sandbox_id) {
        next.reclaim_owed = None;
    } else if current.sandbox_id.is_none() && current.reclaim_owed.is_none() {
        return Err(Refusal::AlreadyDone);
    } else {
        return Err(Refusal::WrongBox {
            asked: sandbox_id.to_owned(),
            found: current.sandbox_id.clone(),
        });
    }
    effects.push(Effect::Strand(Box::new(StrandedBox {
        sandbox_id: sandbox_id.to_owned(),
        host,
        placement: current.placement.clone().unwrap_or_default(),
        boxes_dir: current.boxes_dir.clone(),
        turn_id: current.turn_id.clone(),
        stranded_at: step.now,
    })));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::events::kind;
    use crate::transition::test_support::*;
    use crate::transition::{Transition, decide};

    use super::*;

    fn decide_ending(reason: EndingReason, guard: EndingGuard) -> Transition {
        Transition::DecideEnding {
            reason,
            detail: "it broke".into(),
            guard,
            announce: None,
        }
    }

    fn terms(reason: EndingReason, event_id: String, reply_goes_back: bool) -> Ending {
        Ending {
            reason,
            detail: "it broke".into(),
            decided_at: now(),
            epoch: EPOCH + 1,
            event_id,
            reply_goes_back,
        }
    }

    fn run_failed(reason: EndingReason, reply_went_back: bool) -> Event {
        Event::new(
            kind::RUN_FAILED,
            &[TURN, reason.as_str(), &now().to_rfc3339()],
            TURN,
            LAUNCH,
            SEAT,
            now(),
            serde_json::json!({
                "reason": reason.as_str(),
                "detail": "it broke",
                "reply_went_back": reply_went_back,
                "sandbox_id": BOX,
            }),
        )
    }

    #[test]
    fn a_loss_is_decided_under_the_writers_lease_and_announced() {
        let current = running();
        let event = run_failed(EndingReason::AbandonedTail, false);
        let mut expected = stamped(&current);
        expected.status = Status::Ending;
        expected.epoch = EPOCH + 1;
        expected.ending = Some(terms(EndingReason::AbandonedTail, event.id.clone(), false));
        assert_eq!(
            decide(
                Some(&current),
                &fence_at(EPOCH + 1),
                &decide_ending(EndingReason::AbandonedTail, EndingGuard::Any),
                now()
            ),
            writes(expected, vec![Effect::Announce(Box::new(event))])
        );
    }

    #[test]
    fn an_ending_gives_an_untaken_answer_back_to_the_seat() {
        let current = answered();
        let event = run_failed(EndingReason::Cancelled, true);
        let mut expected = stamped(&current);
        expected.status = Status::Ending;
        expected.epoch = EPOCH + 1;
        expected.answer = None;
        expected.declined_answers = vec![DELIVERY.into(), owed_copy().delivery_id];
        expected.hand_back = vec![owed_copy()];
        expected.ending = Some(terms(EndingReason::Cancelled, event.id.clone(), true));
        assert_eq!(
            decide(
                Some(&current),
                &fence_at(EPOCH + 1),
                &decide_ending(EndingReason::Cancelled, EndingGuard::Any),
                now()
            ),
            writes(
                expected,
                vec![
                    Effect::Spend {
                        delivery_id: DELIVERY.into(),
                    },
                    Effect::Announce(Box::new(event)),
                ]
            )
        );
    }

    #[test]
    fn a_finished_run_spends_its_taken_answer_and_is_not_announced() {
        let current = answer_taken();
        let mut expected = stamped(&current);
        expected.status = Status::Ending;
        expected.answer = None;
        let mut ending = terms(EndingReason::Finished, String::new(), false);
        ending.epoch = EPOCH;
        expected.ending = Some(ending);
        let guard = EndingGuard::Claim {
            launch_id: LAUNCH.into(),
        };
        assert_eq!(
            decide_on(&current, decide_ending(EndingReason::Finished, guard)),
            writes(
                expected,
                vec![Effect::Spend {
                    delivery_id: DELIVERY.into(),
                }]
            )
        );
    }

    #[test]
    fn an_ending_guarded_by_a_claim_needs_the_writers_own_claim() {
        let guard = || EndingGuard::Claim {
            launch_id: LAUNCH.into(),
        };
        assert_eq!(
            decide_on(
                &running(),
                decide_ending(EndingReason::CollectUnreachable, guard())
            ),
            Err(Refusal::WrongStatus {
                transition: "decide_ending",
                expected: "resumed",
                found: Status::Running,
            })
        );
        let mut relaunched = claimed_for_completion();
        relaunched.launch_id = "launch-2".into();
        assert_eq!(
            decide_on(
                &relaunched,
                decide_ending(EndingReason::CollectUnreachable, guard())
            ),
            Err(Refusal::WrongLaunch {
                transition: "decide_ending",
                asked: LAUNCH.into(),
                current: "launch-2".into(),
            })
        );
        assert_eq!(
            decide(
                Some(&claimed_for_completion()),
                &fence_at(EPOCH + 1),
                &decide_ending(EndingReason::CollectUnreachable, guard()),
                now()
            ),
            Err(Refusal::NotClaimant)
        );
    }

    fn release(sandbox_id: &str) -> Transition {
        Transition::ReleaseBox {
            sandbox_id: sandbox_id.into(),
        }
    }

    #[test]
    fn the_ending_runs_box_is_released() {
        let mut current = ending(EndingReason::Cancelled);
        current.paused_at = Some(minutes_ago(2));
        let mut expected = stamped(&current);
        expected.sandbox_id = None;
        expected.job = None;
        expected.paused_at = None;
        assert_eq!(decide_on(&current, release(BOX)), writes(expected, vec![]));
    }

    #[test]
    fn a_released_box_is_released_once_and_only_the_box_named() {
        let mut released = ending(EndingReason::Cancelled);
        released.sandbox_id = None;
        assert_eq!(
            decide_on(&released, release(BOX)),
            Err(Refusal::AlreadyDone)
        );
        assert_eq!(
            decide_on(&ending(EndingReason::Cancelled), release(OTHER_BOX)),
            Err(Refusal::WrongBox {
                asked: OTHER_BOX.into(),
                found: Some(BOX.into()),
            })
        );
    }

    #[test]
    fn a_box_is_released_only_once_the_run_is_ending() {
        assert_eq!(
            decide_on(&running(), release(BOX)),
            Err(Refusal::WrongStatus {
                transition: "release_box",
                expected: "ending",
                found: Status::Running,
            })
        );
    }

    #[test]
    fn an_ended_run_with_its_box_reclaimed_and_nothing_owed_is_deleted() {
        let mut current = ending(EndingReason::Finished);
        current.sandbox_id = None;
        assert_eq!(
            decide_on(&current, Transition::Finish),
            Ok(Decision {
                next: Next::Delete,
                effects: vec![],
            })
        );
    }

    #[test]
    fn an_ended_run_that_owes_a_copy_or_names_its_box_is_kept() {
        let mut current = ending(EndingReason::Cancelled);
        current.hand_back = vec![owed_copy()];
        // the copy owed is named before the box
        assert_eq!(
            decide_on(&current, Transition::Finish),
            Err(Refusal::OwesHandBack)
        );
        current.hand_back.clear();
        assert_eq!(
            decide_on(&current, Transition::Finish),
            Err(Refusal::BoxNotReclaimed(BOX.into()))
        );
    }

    #[test]
    fn only_an_ending_run_is_finished() {
        assert_eq!(
            decide_on(&running(), Transition::Finish),
            Err(Refusal::WrongStatus {
                transition: "finish",
                expected: "ending",
                found: Status::Running,
            })
        );
    }

    fn expire(sandbox_id: &str) -> Transition {
        Transition::ExpirePause {
            sandbox_id: sandbox_id.into(),
        }
    }

    #[test]
    fn a_parked_question_whose_pause_expired_goes_to_reseed() {
        let current = awaiting();
        let mut expected = stamped(&current);
        expected.sandbox_id = None;
        expected.paused_at = None;
        expected.reclaim_owed = Some(BOX.into());
        expected.status = Status::Reseed;
        // the job's description stays for the re-seed
        assert_eq!(decide_on(&current, expire(BOX)), writes(expected, vec![]));
    }

    #[test]
    fn an_answered_run_whose_pause_expired_stays_answered() {
        let current = answered();
        let mut expected = stamped(&current);
        expected.sandbox_id = None;
        expected.paused_at = None;
        expected.reclaim_owed = Some(BOX.into());
        assert_eq!(decide_on(&current, expire(BOX)), writes(expected, vec![]));
    }

    #[test]
    fn a_pause_expires_only_for_a_parked_run_and_its_own_box() {
        assert_eq!(
            decide_on(&claimed_for_completion(), expire(BOX)),
            Err(Refusal::WrongStatus {
                transition: "expire_pause",
                expected: "awaiting_clarification",
                found: Status::Resumed,
            })
        );
        assert_eq!(
            decide_on(&awaiting(), expire(OTHER_BOX)),
            Err(Refusal::WrongBox {
                asked: OTHER_BOX.into(),
                found: Some(BOX.into()),
            })
        );
    }

    fn reclaimed(sandbox_id: &str) -> Transition {
        Transition::BoxReclaimed {
            sandbox_id: sandbox_id.into(),
        }
    }

    #[test]
    fn a_released_box_stays_named_until_its_kill_is_confirmed() {
        let mut current = awaiting();
        current.status = Status::Reseed;
        current.sandbox_id = None;
        current.reclaim_owed = Some(BOX.into());
        let mut expected = stamped(&current);
        expected.reclaim_owed = None;
        assert_eq!(
            decide_on(&current, reclaimed(BOX)),
            writes(expected.clone(), vec![])
        );
        assert_eq!(
            decide_on(&current, reclaimed(OTHER_BOX)),
            Err(Refusal::WrongBox {
                asked: OTHER_BOX.into(),
                found: Some(BOX.into()),
            })
        );
        assert_eq!(
            decide_on(&expected, reclaimed(BOX)),
            Err(Refusal::AlreadyDone)
        );
    }

    #[test]
    fn an_owed_kill_is_finished_before_another_pause_expires_or_the_row_goes() {
        let mut current = awaiting();
        current.reclaim_owed = Some(OTHER_BOX.into());
        assert_eq!(
            decide_on(&current, expire(BOX)),
            Err(Refusal::BoxNotReclaimed(OTHER_BOX.into()))
        );
        let mut ended = ending(EndingReason::Cancelled);
        ended.sandbox_id = None;
        ended.reclaim_owed = Some(OTHER_BOX.into());
        assert_eq!(
            decide_on(&ended, Transition::Finish),
            Err(Refusal::BoxNotReclaimed(OTHER_BOX.into()))
        );
        let mut expected = stamped(&ended);
        expected.reclaim_owed = None;
        assert_eq!(
            decide_on(&ended, reclaimed(OTHER_BOX)),
            writes(expected, vec![])
        );
    }

    fn strand(sandbox_id: &str) -> Transition {
        Transition::StrandBox {
            sandbox_id: sandbox_id.into(),
        }
    }

    fn on_host_a(mut record: RunRecord) -> RunRecord {
        record.host = Some("host-a".into());
        record.placement = Some("direct".into());
        record.boxes_dir = Some("/srv/a/boxes".into());
        record
    }

    fn stranded_on_a(sandbox_id: &str) -> Effect {
        Effect::Strand(Box::new(StrandedBox {
            sandbox_id: sandbox_id.into(),
            host: "host-a".into(),
            placement: "direct".into(),
            boxes_dir: Some("/srv/a/boxes".into()),
            turn_id: TURN.into(),
            stranded_at: now(),
        }))
    }

    #[test]
    fn a_box_on_another_host_is_let_go_of_and_named_for_that_host_in_the_same_write() {
        // an ending: the record stops naming the box and its job
        let current = on_host_a(ending(EndingReason::Cancelled));
        let mut expected = stamped(&current);
        expected.sandbox_id = None;
        expected.job = None;
        assert_eq!(
            decide_on(&current, strand(BOX)),
            writes(expected, vec![stranded_on_a(BOX)])
        );
        // an answer's claim that re-seeds: the job's description stays for the relaunch
        let current = on_host_a(claimed_for_answer());
        let mut expected = stamped(&current);
        expected.sandbox_id = None;
        assert_eq!(
            decide_on(&current, strand(BOX)),
            writes(expected, vec![stranded_on_a(BOX)])
        );
        // the box a released run owes a kill, whatever the status
        let mut current = on_host_a(awaiting());
        current.sandbox_id = None;
        current.status = Status::Reseed;
        current.reclaim_owed = Some(OTHER_BOX.into());
        let mut expected = stamped(&current);
        expected.reclaim_owed = None;
        assert_eq!(
            decide_on(&current, strand(OTHER_BOX)),
            writes(expected, vec![stranded_on_a(OTHER_BOX)])
        );
    }

    #[test]
    fn a_box_is_stranded_only_where_nothing_runs_in_it_for_the_run_and_only_a_local_one() {
        assert_eq!(
            decide_on(&on_host_a(running()), strand(BOX)),
            Err(Refusal::WrongStatus {
                transition: "strand_box",
                expected: "ending, resumed or launching",
                found: Status::Running,
            })
        );
        assert_eq!(
            decide_on(&on_host_a(awaiting()), strand(BOX)),
            Err(Refusal::WrongStatus {
                transition: "strand_box",
                expected: "ending, resumed or launching",
                found: Status::AwaitingClarification,
            })
        );
        let mut remote = ending(EndingReason::Cancelled);
        remote.host = None;
        assert!(matches!(
            decide_on(&remote, strand(BOX)),
            Err(Refusal::Invalid(_))
        ));
        assert_eq!(
            decide_on(
                &on_host_a(ending(EndingReason::Cancelled)),
                strand(OTHER_BOX)
            ),
            Err(Refusal::WrongBox {
                asked: OTHER_BOX.into(),
                found: Some(BOX.into()),
            })
        );
        let mut let_go = on_host_a(ending(EndingReason::Cancelled));
        let_go.sandbox_id = None;
        assert_eq!(decide_on(&let_go, strand(BOX)), Err(Refusal::AlreadyDone));
    }
}
