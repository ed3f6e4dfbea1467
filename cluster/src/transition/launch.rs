//! A job's launch: the row opens as `launching`, names its box and job, takes the suspended
//! conversation (`launching → running`), and a resumed turn relaunches in the same box
//! (`resumed → launching`). Each launch is announced as `sandbox_run_started`.

use chrono::{DateTime, Utc};

use crate::events::{self, Event};
use crate::record::{ClaimKind, RelaunchedFrom, RunRecord, Status};

use super::step::{Decision, Effect, Fence, Next, Refusal, Step, Transition};

/// Opens the row: the only transition of an absent row.
pub(super) fn open_launch(
    fence: &Fence,
    transition: &Transition,
    now: DateTime<Utc>,
) -> Result<Decision, Refusal> {
    let Transition::OpenLaunch { record } = transition else {
        return Err(Refusal::Missing);
    };
    if record.status != Status::Launching {
        return Err(Refusal::Invalid(format!(
            "a launch opens its row as launching, not {}",
            record.status
        )));
    }
    if record.seat != fence.seat {
        return Err(Refusal::WrongSeat(record.seat.clone()));
    }
    let mut record = record.as_ref().clone();
    record.epoch = fence.epoch;
    record.created_at = now;
    record.updated_at = now;
    record.launched_at = Some(now);
    let effects = vec![started_event(&record, now)];
    Ok(Decision {
        next: Next::Write(Box::new(record)),
        effects,
    })
}

pub(super) fn attach_box(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
    (sandbox_id, placement): (&str, &str),
    job: &Option<String>,
    (host, boxes_dir): (&Option<String>, &Option<String>),
) -> Result<(), Refusal> {
    step.require_status(Status::Launching)?;
    step.same_launch(launch_id)?;
    next.sandbox_id = Some(sandbox_id.to_owned());
    next.placement = Some(placement.to_owned());
    next.job = job.clone();
    // where the box lives is the box's: a re-seed's new box may be on another host than the
    // one the run's last box was on
    next.host = host.clone();
    next.boxes_dir = boxes_dir.clone();
    Ok(())
}

/// The job runs and the conversation is on the row: the launch is what the caller is told it
/// is, so the completion ledger remembers it (30 days) and a repeat of it gets this job, never
/// a second (DESIGN §6 I13). A launch that failed before this told its caller to try again.
pub(super) fn commit_suspension(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    conversation: &[u8],
) -> Result<(), Refusal> {
    step.require_status(Status::Launching)?;
    step.same_launch(launch_id)?;
    effects.push(Effect::Spend {
        delivery_id: crate::ledger::launch_entry(&next.turn_id, next.iteration, launch_id),
    });
    // a relaunch's answer is used from here: the job runs with it
    next.answer = None;
    next.question = None;
    next.relaunched_from = None;
    next.conversation = Some(conversation.to_vec());
    next.status = Status::Running;
    Ok(())
}

/// A new job in the same box: everything of the old job's goes, the iteration counts up.
pub(super) fn relaunch(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    new_launch_id: &str,
    brief: &str,
) -> Result<(), Refusal> {
    let claim = step.own_claim(launch_id, None)?;
    if new_launch_id == launch_id {
        return Err(Refusal::Invalid("a relaunch needs a new launch id".into()));
    }
    // a turn that relaunches without a separate take takes its answer here, in the same write
    // (the built-in engine's answer turn is the relaunch itself): the delivery is spent as a
    // take spends it, and no crash can fall between the two
    if claim.kind == ClaimKind::Answer
        && !step.current.answer_taken()
        && let Some(answer) = &step.current.answer
    {
        effects.push(Effect::Spend {
            delivery_id: answer.delivery_id.clone(),
        });
    }
    // an answer's relaunch keeps what it replaces until its conversation commits: a relaunch
    // whose node stops before then goes back to exactly it (revert_relaunch)
    next.relaunched_from = (claim.kind == ClaimKind::Answer).then(|| {
        Box::new(RelaunchedFrom {
            launch_id: step.current.launch_id.clone(),
            iteration: step.current.iteration,
            brief: step.current.brief.clone(),
            launched_at: step.current.launched_at,
            conversation: step.current.conversation.clone(),
            job: step.current.job.clone(),
            sandbox_id: step.current.sandbox_id.clone(),
            declined_answers: step.current.declined_answers.clone(),
            charged: step.current.charged.clone(),
            phase_published: step.current.phase_published.clone(),
            model: step.current.model.clone(),
            paused_at: step.current.paused_at,
        })
    });
    next.status = Status::Launching;
    next.launch_id = new_launch_id.to_owned();
    next.launched_at = Some(step.now);
    next.iteration += 1;
    next.brief = brief.to_owned();
    next.claim = None;
    // the answer and its question stay until the conversation commits: a relaunch whose node
    // stops before then goes back to them (revert_relaunch) rather than losing the answer
    if let Some(answer) = next.answer.as_mut() {
        answer.taken_at.get_or_insert(step.now);
    }
    next.declined_answers.clear();
    next.conversation = None;
    next.charged = None;
    next.phase_published = None;
    next.paused_at = None;
    next.collect_failures = 0;
    next.collect_failed_since = None;
    next.resume_refusals = 0;
    next.model = None;
    effects.push(started_event(next, step.now));
    Ok(())
}

/// A relaunch that died before its conversation committed (the row still carries the answer it
/// relaunched with): back to `answered`, untaken, exactly as the row was before the relaunch —
/// its job (the command the answer reruns), its conversation, its iteration — so the answer is
/// resumed again. `keep_box`: the box the relaunch reused still exists and the caller stopped
/// what the relaunch started in it, so the answer reruns there; otherwise the caller killed the
/// box (or it was gone) and the answer re-seeds. At most [`MAX_ANSWER_REVIVALS`] times within
/// one pause TTL of the first loss (I12).
pub(super) fn revert_relaunch(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
    keep_box: bool,
) -> Result<(), Refusal> {
    step.require_status(Status::Launching)?;
    step.same_launch(launch_id)?;
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("a first launch has no answer to go back to".into()))?;
    step.spend_revival(&mut answer.lost_claims, &mut answer.first_lost_at)?;
    answer.taken_at = None;
    next.status = Status::Answered;
    next.epoch = step.fence.epoch;
    match next.relaunched_from.take() {
        Some(from) => {
            let RelaunchedFrom {
                launch_id,
                iteration,
                brief,
                launched_at,
                conversation,
                job,
                sandbox_id,
                declined_answers,
                charged,
                phase_published,
                model,
                paused_at,
            } = *from;
            next.sandbox_id = sandbox_id.filter(|_| keep_box);
            next.launch_id = launch_id;
            next.iteration = iteration;
            next.brief = brief;
            next.launched_at = launched_at;
            next.conversation = conversation;
            next.job = job;
            next.declined_answers = declined_answers;
            next.charged = charged;
            next.phase_published = phase_published;
            next.model = model;
            next.paused_at = paused_at;
        }
        // a row an older build relaunched: only its box is undone (the job it names still
        // carries the runner and the command a relaunch reuses)
        None if keep_box => {}
        None => next.sandbox_id = None,
    }
    Ok(())
}

fn started_event(record: &RunRecord, now: DateTime<Utc>) -> Effect {
    Effect::Announce(Box::new(Event::new(
        events::kind::RUN_STARTED,
        &[&record.turn_id, &record.launch_id],
        &record.turn_id,
        &record.launch_id,
        &record.seat,
        now,
        serde_json::json!({
            "coding_agent": record.coding_agent,
            "work_item": record.work_item,
            "task": record.task,
            "iteration": record.iteration,
        }),
    )))
}

#[cfg(test)]
mod tests {
    use crate::events::kind;
    use crate::record::{Charged, ModelReceipt};
    use crate::transition::MAX_ANSWER_REVIVALS;
    use crate::transition::test_support::*;

    use super::*;

    fn started(launch_id: &str, iteration: u32) -> Effect {
        announced(
            kind::RUN_STARTED,
            &[TURN, launch_id],
            launch_id,
            serde_json::json!({
                "coding_agent": "claude",
                "work_item": "WI-7",
                "task": "fix the build",
                "iteration": iteration,
            }),
        )
    }

    #[test]
    fn a_launch_opens_its_row_under_the_writers_lease_and_announces_the_start() {
        let mut record = launching();
        record.epoch = 0;
        let open = Transition::OpenLaunch {
            record: Box::new(record.clone()),
        };
        let mut expected = record;
        expected.epoch = 9;
        expected.created_at = now();
        expected.updated_at = now();
        expected.launched_at = Some(now());
        assert_eq!(
            crate::transition::decide(None, &fence_at(9), &open, now()),
            writes(expected, vec![started(LAUNCH, 0)])
        );
    }

    #[test]
    fn a_launch_opens_its_row_as_launching_and_for_the_writers_seat_only() {
        let mut not_launching = launching();
        not_launching.status = Status::Running;
        not_launching.seat = "ops".into();
        let mut other_seat = launching();
        other_seat.seat = "ops".into();
        let open = |record: RunRecord| {
            crate::transition::decide(
                None,
                &fence(),
                &Transition::OpenLaunch {
                    record: Box::new(record),
                },
                now(),
            )
        };
        // the status is checked first
        assert_eq!(
            open(not_launching),
            Err(Refusal::Invalid(
                "a launch opens its row as launching, not running".into()
            ))
        );
        assert_eq!(open(other_seat), Err(Refusal::WrongSeat("ops".into())));
    }

    fn attach(launch_id: &str) -> Transition {
        Transition::AttachBox {
            launch_id: launch_id.into(),
            sandbox_id: BOX.into(),
            placement: "local".into(),
            job: Some("job-1".into()),
            host: None,
            boxes_dir: None,
        }
    }

    #[test]
    fn a_box_is_attached_to_the_launch_it_was_started_for() {
        let current = launching();
        let mut expected = stamped(&current);
        expected.sandbox_id = Some(BOX.into());
        expected.placement = Some("local".into());
        expected.job = Some("job-1".into());
        assert_eq!(
            decide_on(&current, attach(LAUNCH)),
            writes(expected, vec![])
        );
    }

    #[test]
    fn a_box_is_attached_only_while_launching() {
        // the status is checked before the launch
        assert_eq!(
            decide_on(&running(), attach(OLD_LAUNCH)),
            Err(Refusal::WrongStatus {
                transition: "attach_box",
                expected: "launching",
                found: Status::Running,
            })
        );
    }

    #[test]
    fn a_box_for_an_old_launch_is_not_attached() {
        assert_eq!(
            decide_on(&launching(), attach(OLD_LAUNCH)),
            Err(Refusal::WrongLaunch {
                transition: "attach_box",
                asked: OLD_LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
    }

    fn commit(launch_id: &str) -> Transition {
        Transition::CommitSuspension {
            launch_id: launch_id.into(),
            conversation: b"suspended".to_vec(),
        }
    }

    #[test]
    fn the_suspension_commits_the_conversation_and_the_ledger_remembers_the_launch() {
        let mut current = launching();
        current.sandbox_id = Some(BOX.into());
        let mut expected = stamped(&current);
        expected.conversation = Some(b"suspended".to_vec());
        expected.status = Status::Running;
        assert_eq!(
            decide_on(&current, commit(LAUNCH)),
            writes(
                expected,
                vec![Effect::Spend {
                    delivery_id: format!("launch/{TURN}/0/{LAUNCH}")
                }]
            )
        );
    }

    #[test]
    fn a_suspension_commits_only_while_launching() {
        assert_eq!(
            decide_on(&running(), commit(LAUNCH)),
            Err(Refusal::WrongStatus {
                transition: "commit_suspension",
                expected: "launching",
                found: Status::Running,
            })
        );
    }

    #[test]
    fn a_suspension_for_an_old_launch_commits_nothing() {
        assert_eq!(
            decide_on(&launching(), commit(OLD_LAUNCH)),
            Err(Refusal::WrongLaunch {
                transition: "commit_suspension",
                asked: OLD_LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
    }

    fn relaunch(launch_id: &str, new_launch_id: &str) -> Transition {
        Transition::Relaunch {
            launch_id: launch_id.into(),
            new_launch_id: new_launch_id.into(),
            brief: "go on".into(),
        }
    }

    #[test]
    fn a_completed_job_relaunches_a_new_job_in_the_same_box() {
        let mut current = claimed_for_completion();
        current.brief = "first".into();
        current.charged = Some(Charged {
            launch_id: LAUNCH.into(),
            seat: true,
            company: true,
            ..Charged::default()
        });
        current.phase_published = Some(LAUNCH.into());
        current.paused_at = Some(minutes_ago(1));
        current.collect_failures = 2;
        current.model = Some(ModelReceipt::default());
        let mut expected = stamped(&current);
        expected.status = Status::Launching;
        expected.launch_id = "launch-2".into();
        // the new job's own start: its phase record counts from here, not from the row's
        expected.launched_at = Some(now());
        expected.iteration = 1;
        expected.brief = "go on".into();
        expected.claim = None;
        expected.conversation = None;
        expected.charged = None;
        expected.phase_published = None;
        expected.paused_at = None;
        expected.collect_failures = 0;
        expected.model = None;
        // the box, the job handle and the seat's lease stay
        assert_eq!(
            decide_on(&current, relaunch(LAUNCH, "launch-2")),
            writes(expected, vec![started("launch-2", 1)])
        );
    }

    #[test]
    fn a_resumed_answer_relaunches_once_its_turn_took_it() {
        let mut current = answer_taken();
        current.declined_answers = vec!["delivery-0".into()];
        let mut expected = stamped(&current);
        expected.status = Status::Launching;
        expected.launch_id = "launch-2".into();
        // the new job's own start: its phase record counts from here, not from the row's
        expected.launched_at = Some(now());
        expected.iteration = 1;
        expected.brief = "go on".into();
        expected.claim = None;
        // the answer and its question stay on the row until the conversation commits
        expected.declined_answers = Vec::new();
        expected.conversation = None;
        // and so does what the relaunch replaces, for a revert to go back to
        expected.relaunched_from = Some(Box::new(RelaunchedFrom {
            launch_id: current.launch_id.clone(),
            iteration: current.iteration,
            brief: current.brief.clone(),
            launched_at: current.launched_at,
            conversation: current.conversation.clone(),
            job: current.job.clone(),
            sandbox_id: current.sandbox_id.clone(),
            declined_answers: current.declined_answers.clone(),
            charged: current.charged.clone(),
            phase_published: current.phase_published.clone(),
            model: current.model.clone(),
            paused_at: current.paused_at,
        }));
        assert_eq!(
            decide_on(&current, relaunch(LAUNCH, "launch-2")),
            writes(expected.clone(), vec![started("launch-2", 1)])
        );
    }

    #[test]
    fn a_relaunch_takes_an_untaken_answer_in_the_same_write() {
        let relaunched =
            decide_on(&claimed_for_answer(), relaunch(LAUNCH, "launch-2")).expect("relaunched");
        let delivery = claimed_for_answer().answer.expect("an answer").delivery_id;
        assert!(
            relaunched.effects.contains(&Effect::Spend {
                delivery_id: delivery
            }),
            "{relaunched:?}"
        );
    }

    #[test]
    fn a_relaunch_needs_a_new_launch_id() {
        assert_eq!(
            decide_on(&claimed_for_completion(), relaunch(LAUNCH, LAUNCH)),
            Err(Refusal::Invalid("a relaunch needs a new launch id".into()))
        );
    }

    #[test]
    fn a_relaunch_needs_the_writers_own_claim() {
        assert_eq!(
            decide_on(&running(), relaunch(LAUNCH, "launch-2")),
            Err(Refusal::WrongStatus {
                transition: "relaunch",
                expected: "resumed",
                found: Status::Running,
            })
        );
        assert_eq!(
            decide_on(&claimed_for_completion(), relaunch(OLD_LAUNCH, "launch-2")),
            Err(Refusal::WrongLaunch {
                transition: "relaunch",
                asked: OLD_LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
        let newer = fence_at(EPOCH + 1);
        assert_eq!(
            crate::transition::decide(
                Some(&claimed_for_completion()),
                &newer,
                &relaunch(LAUNCH, "launch-2"),
                now()
            ),
            Err(Refusal::NotClaimant)
        );
    }

    #[test]
    fn a_relaunch_that_died_before_its_commit_goes_back_to_its_answer_within_bounds() {
        let claimed = answer_taken();
        let Ok(Decision {
            next: Next::Write(relaunched),
            ..
        }) = decide_on(&claimed, relaunch(LAUNCH, "launch-2"))
        else {
            panic!("relaunched");
        };
        let revert = || Transition::RevertRelaunch {
            launch_id: "launch-2".into(),
            keep_box: false,
        };
        let Ok(Decision {
            next: Next::Write(reverted),
            effects,
        }) = decide_on(&relaunched, revert())
        else {
            panic!("reverted");
        };
        assert!(effects.is_empty());
        assert_eq!(reverted.status, Status::Answered);
        assert_eq!(
            reverted.sandbox_id, None,
            "the answer re-seeds: its box was killed"
        );
        // the run is back exactly as before the relaunch: its job (the command the answer
        // reruns), its launch, its iteration, its conversation
        assert_eq!(
            reverted.job, claimed.job,
            "the job the answer reruns is kept"
        );
        assert_eq!(reverted.launch_id, claimed.launch_id);
        assert_eq!(reverted.iteration, claimed.iteration);
        assert_eq!(reverted.conversation, claimed.conversation);
        assert_eq!(reverted.brief, claimed.brief);
        assert!(reverted.relaunched_from.is_none());
        // the box the relaunch reused still exists and what it started there was stopped:
        // the answer reruns in it
        let Ok(Decision {
            next: Next::Write(kept),
            ..
        }) = decide_on(
            &relaunched,
            Transition::RevertRelaunch {
                launch_id: "launch-2".into(),
                keep_box: true,
            },
        )
        else {
            panic!("reverted, keeping the box");
        };
        assert_eq!(kept.sandbox_id, claimed.sandbox_id);
        assert_eq!(kept.job, claimed.job);
        let answer = reverted.answer.as_ref().expect("the answer is kept");
        assert_eq!((answer.taken_at, answer.lost_claims), (None, 1));
        // the commit uses the answer up: nothing to go back to after it
        let committed = decide_on(
            &relaunched,
            Transition::CommitSuspension {
                launch_id: "launch-2".into(),
                conversation: b"c".to_vec(),
            },
        )
        .expect("committed");
        let Next::Write(committed) = committed.next else {
            panic!("written");
        };
        assert!(committed.answer.is_none() && committed.question.is_none());
        // a first launch has no answer; three lost relaunches spend the revivals
        assert!(matches!(
            decide_on(
                &launching(),
                Transition::RevertRelaunch {
                    launch_id: LAUNCH.into(),
                    keep_box: false,
                }
            ),
            Err(Refusal::Invalid(_))
        ));
        let mut spent = relaunched.clone();
        if let Some(answer) = spent.answer.as_mut() {
            answer.lost_claims = MAX_ANSWER_REVIVALS;
        }
        assert_eq!(
            decide_on(&spent, revert()),
            Err(Refusal::RevivalsSpent {
                lost_claims: MAX_ANSWER_REVIVALS
            })
        );
    }
}
