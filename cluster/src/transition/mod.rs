//! The run state machine's decisions, without I/O (DESIGN §6).
//!
//! [`decide`] takes the record as read, the writer's seat lease and one [`Transition`], and
//! returns the next record (or its deletion) plus the effects that must land in the same txn
//! (announcements, ledger spends) — or a [`Refusal`] naming why the transition does not apply.
//! [`crate::runs::Runs`] performs a decision as one fenced compare-and-set. Every transition
//! is decided here and nowhere else; anything unexpected fails closed.
//!
//! The rules that cut across transitions:
//! - a writer must hold the seat's lease (epoch > 0) and that lease must not be older than the
//!   one stamped on the row: a node that lost the seat writes nothing (I9);
//! - once an ending is decided the row takes no write but the ones that finish it (I6);
//! - a claim's own writes (take, hand-back, relaunch, park) carry the claim's lease (I5).
//!
//! [`decide`] checks those, in that order, then hands the transition to the rule that decides
//! it. Each rule is a function named after its transition, in the file of what it does:
//!
//! | file          | decides                                                               |
//! |---------------|-----------------------------------------------------------------------|
//! | `launch.rs`   | `open_launch`, `attach_box`, `commit_suspension`, `relaunch`          |
//! | `collect.rs`  | `claim_completion`, `hand_back_claim`, `charge`, `publish_phase`, `park`, `mark_paused` |
//! | `answer.rs`   | `record_answer`, `claim_answer`, `take`, `revive`, `let_go`, `clear_hand_back` |
//! | `ending.rs`   | `decide_ending`, `release_box`, `finish`, `expire_pause`, `box_reclaimed`, `strand_box` |
//! | `recovery.rs` | `fence_run`, and [`check_record`]: the invariants every stored row holds |
//! | `bridge.rs`   | `append_bridge_call`                                                  |
//! | `guards.rs`   | the checks rules share: the status, the job, the writer's own claim   |
//! | `step.rs`     | the vocabulary: `Fence`, `Transition`, `Refusal`, `Effect`, `Decision`, `Step` |
//!
//! A rule reads the `Step` (the row as read, the lease, the transition, the instant) and edits
//! the next record — a copy of the row, stamped with the instant — and the effects; it returns
//! the first [`Refusal`] that applies, checked in a fixed order, and writes nothing then.

mod answer;
mod bridge;
mod collect;
mod ending;
mod guards;
mod launch;
mod recovery;
mod step;

use chrono::{DateTime, Utc};

use crate::record::{ClaimKind, RunRecord};

pub use collect::{COLLECT_ATTEMPTS, COLLECT_SPAN, collect_allowance_spent};
pub use recovery::check_record;
use step::Step;
pub use step::{
    DEFAULT_PAUSE_TTL_SECONDS, Decision, Effect, EndingGuard, Fence, MAX_ANSWER_REVIVALS, Next,
    Refusal, Share, Transition,
};

/// Decides `transition` on the row as read (`None`: absent) for a writer holding `fence`.
///
/// The cross-cutting refusals come first, in this order: no lease, no row (only a launch opens
/// one), another seat's row, a newer lease on the row, a decided ending. Then the transition's
/// own rule decides on a copy of the row stamped `now`.
pub fn decide(
    current: Option<&RunRecord>,
    fence: &Fence,
    transition: &Transition,
    now: DateTime<Utc>,
) -> Result<Decision, Refusal> {
    if fence.epoch <= 0 {
        return Err(Refusal::NoLease);
    }
    let Some(current) = current else {
        return launch::open_launch(fence, transition, now);
    };
    if current.seat != fence.seat {
        return Err(Refusal::WrongSeat(current.seat.clone()));
    }
    if current.epoch > fence.epoch {
        return Err(Refusal::Fenced {
            row: current.epoch,
            writer: fence.epoch,
        });
    }
    if let Some(ending) = &current.ending {
        let finishes = matches!(
            transition,
            Transition::ClearHandBack { .. }
                | Transition::ReleaseBox { .. }
                | Transition::BoxReclaimed { .. }
                | Transition::StrandBox { .. }
                | Transition::Finish
        );
        if !finishes {
            return Err(Refusal::EndingDecided(ending.reason));
        }
    }
    let step = Step {
        current,
        fence,
        transition,
        now,
    };
    let mut next = current.clone();
    next.updated_at = now;
    let mut effects = Vec::new();
    match transition {
        Transition::OpenLaunch { .. } => return Err(Refusal::Exists),
        Transition::AttachBox {
            launch_id,
            sandbox_id,
            placement,
            job,
            host,
            boxes_dir,
        } => launch::attach_box(
            &step,
            &mut next,
            launch_id,
            (sandbox_id, placement),
            job,
            (host, boxes_dir),
        )?,
        Transition::CommitSuspension {
            launch_id,
            conversation,
        } => launch::commit_suspension(&step, &mut next, &mut effects, launch_id, conversation)?,
        Transition::ClaimCompletion { launch_id } => {
            collect::claim_completion(&step, &mut next, launch_id)?
        }
        Transition::HandBackClaim {
            launch_id,
            collect_failed,
        } => collect::hand_back_claim(&step, &mut next, launch_id, *collect_failed)?,
        Transition::Charge {
            launch_id,
            share,
            usage,
        } => collect::charge(&step, &mut next, &mut effects, launch_id, *share, usage)?,
        Transition::PublishPhase { launch_id, phase } => {
            collect::publish_phase(&step, &mut next, &mut effects, launch_id, phase)?
        }
        Transition::Park {
            launch_id,
            question,
        } => collect::park(&step, &mut next, &mut effects, launch_id, question)?,
        Transition::RecordAnswer { answer } => answer::record_answer(&step, &mut next, answer)?,
        Transition::ClaimAnswer { launch_id } => {
            answer::claim_answer(&step, &mut next, &mut effects, launch_id)?
        }
        Transition::Take { launch_id } if step.claim_kind() == Some(ClaimKind::Completion) => {
            collect::take_completion(&step, &mut next, launch_id)?
        }
        Transition::Take { launch_id } => answer::take(&step, &mut next, &mut effects, launch_id)?,
        Transition::Revive if step.claim_kind() == Some(ClaimKind::Completion) => {
            collect::revive_completion(&step, &mut next)?
        }
        Transition::Revive => answer::revive(&step, &mut next)?,
        Transition::RevertRelaunch {
            launch_id,
            keep_box,
        } => launch::revert_relaunch(&step, &mut next, launch_id, *keep_box)?,
        Transition::LetGo => answer::let_go(&step, &mut next, &mut effects)?,
        Transition::ClearHandBack { delivery_ids } => {
            answer::clear_hand_back(&step, &mut next, delivery_ids)?
        }
        Transition::DecideEnding {
            reason,
            detail,
            guard,
            announce,
        } => {
            ending::decide_ending(&step, &mut next, &mut effects, *reason, detail, guard)?;
            if let Some(event) = announce {
                effects.push(Effect::Announce(event.clone()));
            }
        }
        Transition::ReleaseBox { sandbox_id } => ending::release_box(&step, &mut next, sandbox_id)?,
        Transition::Finish => return ending::finish(&step),
        Transition::RefuseResume { launch_id } => {
            collect::refuse_resume(&step, &mut next, launch_id)?
        }
        Transition::ExpirePause { sandbox_id } => {
            ending::expire_pause(&step, &mut next, sandbox_id)?
        }
        Transition::BoxReclaimed { sandbox_id } => {
            ending::box_reclaimed(&step, &mut next, sandbox_id)?
        }
        Transition::StrandBox { sandbox_id } => {
            ending::strand_box(&step, &mut next, &mut effects, sandbox_id)?
        }
        Transition::MarkPaused { sandbox_id } => {
            collect::mark_paused(&step, &mut next, sandbox_id)?
        }
        Transition::Relaunch {
            launch_id,
            new_launch_id,
            brief,
        } => launch::relaunch(
            &step,
            &mut next,
            &mut effects,
            launch_id,
            new_launch_id,
            brief,
        )?,
        Transition::FenceRun { owner } => recovery::fence_run(&step, &mut next, owner)?,
        Transition::AppendBridgeCall { line } => bridge::append_bridge_call(&mut next, line),
    }
    Ok(Decision {
        next: Next::Write(Box::new(next)),
        effects,
    })
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests {
    //! The refusals that cut across transitions, and the names refusals carry.

    use super::test_support::*;
    use super::*;
    use crate::record::{EndingReason, Status};

    #[test]
    fn a_writer_without_a_lease_writes_nothing() {
        for epoch in [0, -1] {
            let fence = fence_at(epoch);
            let open = Transition::OpenLaunch {
                record: Box::new(launching()),
            };
            assert_eq!(decide(None, &fence, &open, now()), Err(Refusal::NoLease));
            assert_eq!(
                decide(Some(&running()), &fence, &Transition::Revive, now()),
                Err(Refusal::NoLease)
            );
        }
    }

    #[test]
    fn a_missing_row_takes_only_a_launch() {
        for transition in one_of_each().into_iter().skip(1) {
            assert_eq!(
                decide(None, &fence(), &transition, now()),
                Err(Refusal::Missing),
                "{}",
                transition.name()
            );
        }
    }

    #[test]
    fn a_launch_of_a_row_that_exists_is_refused() {
        let open = Transition::OpenLaunch {
            record: Box::new(launching()),
        };
        assert_eq!(decide_on(&running(), open), Err(Refusal::Exists));
    }

    #[test]
    fn another_seats_row_is_refused_before_its_lease_is_compared() {
        let mut current = running();
        current.seat = "ops".into();
        current.epoch = EPOCH + 1;
        assert_eq!(
            decide_on(&current, Transition::Revive),
            Err(Refusal::WrongSeat("ops".into()))
        );
    }

    #[test]
    fn a_writer_with_an_older_lease_than_the_row_is_fenced() {
        let mut current = ending(EndingReason::Cancelled);
        current.epoch = EPOCH + 1;
        // before the ending is looked at, and for the writes that finish an ending too
        for transition in [Transition::Revive, Transition::Finish] {
            assert_eq!(
                decide_on(&current, transition),
                Err(Refusal::Fenced {
                    row: EPOCH + 1,
                    writer: EPOCH,
                })
            );
        }
    }

    #[test]
    fn a_writer_with_a_newer_lease_than_the_row_may_write() {
        let current = running();
        let line = Transition::AppendBridgeCall {
            line: "call".into(),
        };
        let mut expected = stamped(&current);
        expected.bridge_calls = vec!["call".into()];
        assert_eq!(
            decide(Some(&current), &fence_at(EPOCH + 2), &line, now()),
            writes(expected, vec![])
        );
    }

    #[test]
    fn an_ending_run_takes_no_write_but_the_ones_that_finish_it() {
        let current = ending(EndingReason::LaunchFailed);
        for transition in one_of_each() {
            let finishes = matches!(
                transition,
                Transition::ClearHandBack { .. }
                    | Transition::ReleaseBox { .. }
                    | Transition::BoxReclaimed { .. }
                    | Transition::Finish
            );
            let decided = decide_on(&current, transition.clone());
            if finishes {
                assert_ne!(
                    decided,
                    Err(Refusal::EndingDecided(EndingReason::LaunchFailed)),
                    "{}",
                    transition.name()
                );
            } else {
                assert_eq!(
                    decided,
                    Err(Refusal::EndingDecided(EndingReason::LaunchFailed)),
                    "{}",
                    transition.name()
                );
            }
        }
    }

    #[test]
    fn every_transition_is_named_by_its_rule() {
        let names: Vec<_> = one_of_each().iter().map(Transition::name).collect();
        assert_eq!(
            names,
            [
                "open_launch",
                "attach_box",
                "commit_suspension",
                "claim_completion",
                "hand_back_claim",
                "charge",
                "publish_phase",
                "park",
                "record_answer",
                "claim_answer",
                "take",
                "revive",
                "let_go",
                "clear_hand_back",
                "decide_ending",
                "release_box",
                "refuse_resume",
                "finish",
                "expire_pause",
                "box_reclaimed",
                "mark_paused",
                "relaunch",
                "revert_relaunch",
                "fence_run",
                "append_bridge_call",
            ]
        );
    }

    #[test]
    fn a_refusal_says_what_is_wrong() {
        let cases = [
            (
                Refusal::NoLease,
                "sandbox_seat_not_held: no seat lease held",
            ),
            (
                Refusal::Fenced { row: 8, writer: 7 },
                "sandbox_seat_not_held: the run is fenced by a newer lease (8 > 7)",
            ),
            (
                Refusal::WrongStatus {
                    transition: "take",
                    expected: "resumed",
                    found: Status::Answered,
                },
                "take needs status resumed, the run is answered",
            ),
            (
                Refusal::WrongLaunch {
                    transition: "park",
                    asked: "l0".into(),
                    current: "l1".into(),
                },
                "park is for job l0, the run is on job l1",
            ),
            (
                Refusal::EndingDecided(EndingReason::Cancelled),
                "an ending is decided (cancelled); the run takes no other write",
            ),
            (
                Refusal::WrongBox {
                    asked: "b2".into(),
                    found: Some("b1".into()),
                },
                "the record names box Some(\"b1\"), not b2",
            ),
        ];
        for (refusal, text) in cases {
            assert_eq!(refusal.to_string(), text);
        }
    }
}
