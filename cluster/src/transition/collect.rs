//! Collecting a finished job: its completion is claimed at most once (`running → resumed`, I2),
//! its charge and phase record land once each (I3), and the claim either parks the run on its
//! question, is handed back, or (elsewhere) relaunches or ends it. The box's pause after
//! collection is marked here too.

use chrono::{DateTime, Utc};

use crate::events::{self, Event};
use crate::record::{Charged, Claim, ClaimKind, Question, RunRecord, Status, Usage};

use super::step::{Effect, Refusal, Share, Step};

/// At most once per job: the claim every later write of the collection carries (I2, I5).
pub(super) fn claim_completion(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.require_status(Status::Running)?;
    step.same_launch(launch_id)?;
    next.status = Status::Resumed;
    next.epoch = step.fence.epoch;
    next.claim = Some(Claim {
        kind: ClaimKind::Completion,
        launch_id: launch_id.to_owned(),
        from: Status::Running,
        epoch: step.fence.epoch,
        claimed_at: step.now,
    });
    Ok(())
}

/// The resumed turn takes the findings at the last moment before it runs: from here its
/// writes may reach outside the engine, so a claim lost with its node is never revived.
pub(super) fn take_completion(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.own_claim(launch_id, Some(ClaimKind::Completion))?;
    if step.current.completion_taken() {
        return Err(Refusal::AlreadyDone);
    }
    next.completion
        .get_or_insert_with(Default::default)
        .taken_launch_id = Some(launch_id.to_owned());
    Ok(())
}

/// A completion claim whose node stopped before a turn took it goes back to `running`, so the
/// completion is collected again (charged and published once each, by the job's launch id):
/// at most [`MAX_ANSWER_REVIVALS`] times, within one pause TTL of the first loss (I12).
pub(super) fn revive_completion(step: &Step<'_>, next: &mut RunRecord) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Resumed)?;
    let claim = current
        .claim
        .as_ref()
        .ok_or_else(|| Refusal::Invalid("a resumed run carries no claim".into()))?;
    if current.completion_taken() {
        return Err(Refusal::CompletionTaken);
    }
    let revivals = next.completion.get_or_insert_with(Default::default);
    step.spend_revival(&mut revivals.lost_claims, &mut revivals.first_lost_at)?;
    next.status = claim.from;
    next.claim = None;
    next.epoch = step.fence.epoch;
    Ok(())
}

/// Back to the status the claim was taken from; an answer's claim gives its answer back untaken.
pub(super) fn hand_back_claim(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
    collect_failed: bool,
) -> Result<(), Refusal> {
    let claim = step.own_claim(launch_id, None)?;
    next.status = claim.from;
    if claim.from == Status::Answered
        && let Some(answer) = next.answer.as_mut()
    {
        answer.taken_at = None;
        // the answer's retry window runs from its first failed resume (spec line 444)
        answer.first_failed_at.get_or_insert(step.now);
    }
    next.claim = None;
    if collect_failed {
        next.collect_failures += 1;
        next.collect_failed_since.get_or_insert(step.now);
    }
    Ok(())
}

/// The engine refused to resume the findings of a completion's claim: the claim goes back as a
/// hand-back gives it (the next poll collects the job again, charged and published once each),
/// and the refusal is counted on the row, so the bound holds across nodes and restarts.
pub(super) fn refuse_resume(
    step: &Step<'_>,
    next: &mut RunRecord,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.own_claim(launch_id, Some(ClaimKind::Completion))?;
    hand_back_claim(step, next, launch_id, false)?;
    next.resume_refusals += 1;
    Ok(())
}

/// The collect-failure allowance (spec, Failure modes): the poll's own for an unreachable box,
/// at least [`COLLECT_ATTEMPTS`] consecutive failed reads spanning [`COLLECT_SPAN`]. `true` when
/// one more failed read at `now` spends it, so the run is ended `collect_unreachable` rather
/// than handed back; the count is on the record, so another node or a restart carries it on.
pub fn collect_allowance_spent(record: &RunRecord, now: DateTime<Utc>) -> bool {
    let attempts = record.collect_failures + 1;
    let spanned = record
        .collect_failed_since
        .is_some_and(|first| now - first >= COLLECT_SPAN);
    attempts >= COLLECT_ATTEMPTS && spanned
}

/// Failed reads of a finished job's box before it is given up on (with [`COLLECT_SPAN`]).
pub const COLLECT_ATTEMPTS: u32 = 2;
/// How long the failed reads must span before the box is given up on.
pub const COLLECT_SPAN: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// One share of the job's charge, once per job (I3); a charge left from an older job restarts.
pub(super) fn charge(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    share: Share,
    usage: &Usage,
) -> Result<(), Refusal> {
    step.own_claim(launch_id, None)?;
    // a collection that charges has read the box: the failures before it no longer count
    next.collect_failures = 0;
    next.collect_failed_since = None;
    let charged = next.charged.get_or_insert_with(|| Charged {
        launch_id: launch_id.to_owned(),
        ..Charged::default()
    });
    if charged.launch_id != launch_id {
        *charged = Charged {
            launch_id: launch_id.to_owned(),
            ..Charged::default()
        };
    }
    let landed = match share {
        Share::Seat => &mut charged.seat,
        Share::Company => &mut charged.company,
        Share::Task => &mut charged.task,
    };
    if *landed {
        return Err(Refusal::AlreadyDone);
    }
    *landed = true;
    charged.input_tokens = usage.input_tokens;
    charged.output_tokens = usage.output_tokens;
    charged.cost_micros = usage.cost_micros;
    effects.push(Effect::AddSpend {
        share,
        usage: *usage,
    });
    Ok(())
}

/// The job's phase record, announced once per job (I3).
pub(super) fn publish_phase(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    phase: &serde_json::Value,
) -> Result<(), Refusal> {
    let current = step.current;
    step.own_claim(launch_id, None)?;
    if current.phase_published.as_deref() == Some(launch_id) {
        return Err(Refusal::AlreadyDone);
    }
    next.phase_published = Some(launch_id.to_owned());
    // the run record carries the job's model receipt, as its phase record says it
    if let Some(model) = phase
        .get("model")
        .and_then(|model| serde_json::from_value(model.clone()).ok())
    {
        next.model = Some(model);
    }
    effects.push(Effect::Announce(Box::new(Event::new(
        events::kind::PHASE_COMPLETED,
        &[&current.turn_id, launch_id],
        &current.turn_id,
        launch_id,
        &current.seat,
        step.now,
        serde_json::json!({ "phase": "sandbox", "backend": "sandbox", "record": phase }),
    ))));
    Ok(())
}

/// A completion that asked a question parks on it, announced as
/// `sandbox_clarification_requested`: `resumed → awaiting_clarification`.
pub(super) fn park(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
    question: &Question,
) -> Result<(), Refusal> {
    let current = step.current;
    step.own_claim(launch_id, Some(ClaimKind::Completion))?;
    next.status = Status::AwaitingClarification;
    next.claim = None;
    next.answer = None;
    next.question = Some(question.clone());
    effects.push(Effect::Announce(Box::new(Event::new(
        events::kind::CLARIFICATION_REQUESTED,
        &[&current.turn_id, launch_id, &question.asked_at.to_rfc3339()],
        &current.turn_id,
        launch_id,
        &current.seat,
        step.now,
        serde_json::json!({
            "question": question.text,
            "audience": question.audience,
            "audience_handles": question.audience_handles,
            "audience_fallback": question.audience_fallback,
            "conversation_key": current.conversation_key,
            "work_item": current.work_item,
            "branch": question.branch,
        }),
    ))));
    Ok(())
}

/// The box the record names was paused after collection.
pub(super) fn mark_paused(
    step: &Step<'_>,
    next: &mut RunRecord,
    sandbox_id: &str,
) -> Result<(), Refusal> {
    if !matches!(
        step.current.status,
        Status::Resumed | Status::AwaitingClarification | Status::Answered
    ) {
        return Err(step.wrong_status("resumed"));
    }
    step.same_box(sandbox_id)?;
    next.paused_at = Some(step.now);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::events::kind;
    use crate::transition::MAX_ANSWER_REVIVALS;
    use crate::transition::test_support::*;
    use crate::transition::{Transition, decide};

    use super::*;
    use crate::record::CompletionClaims;

    fn claim_completion(launch_id: &str) -> Transition {
        Transition::ClaimCompletion {
            launch_id: launch_id.into(),
        }
    }

    #[test]
    fn a_completion_is_claimed_once_per_launch_under_the_writers_lease() {
        let current = running();
        let newer = fence_at(EPOCH + 2);
        let mut expected = stamped(&current);
        expected.status = Status::Resumed;
        expected.epoch = EPOCH + 2;
        expected.claim = Some(Claim {
            kind: ClaimKind::Completion,
            launch_id: LAUNCH.into(),
            from: Status::Running,
            epoch: EPOCH + 2,
            claimed_at: now(),
        });
        let claimed = decide(Some(&current), &newer, &claim_completion(LAUNCH), now());
        assert_eq!(claimed, writes(expected.clone(), vec![]));
        // the claimed run is no longer running: a second claim claims nothing
        assert_eq!(
            decide(Some(&expected), &newer, &claim_completion(LAUNCH), now()),
            Err(Refusal::WrongStatus {
                transition: "claim_completion",
                expected: "running",
                found: Status::Resumed,
            })
        );
    }

    #[test]
    fn a_claim_for_an_old_launch_claims_nothing() {
        assert_eq!(
            decide_on(&running(), claim_completion(OLD_LAUNCH)),
            Err(Refusal::WrongLaunch {
                transition: "claim_completion",
                asked: OLD_LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
    }

    fn hand_back(launch_id: &str, collect_failed: bool) -> Transition {
        Transition::HandBackClaim {
            launch_id: launch_id.into(),
            collect_failed,
        }
    }

    #[test]
    fn a_handed_back_completion_claim_returns_the_run_to_running() {
        let current = claimed_for_completion();
        let mut expected = stamped(&current);
        expected.status = Status::Running;
        expected.claim = None;
        assert_eq!(
            decide_on(&current, hand_back(LAUNCH, false)),
            writes(expected, vec![])
        );
    }

    #[test]
    fn a_refused_findings_resume_goes_back_counted_and_only_a_completions_can() {
        let mut current = claimed_for_completion();
        current.resume_refusals = 3;
        let mut expected = stamped(&current);
        expected.status = Status::Running;
        expected.claim = None;
        expected.resume_refusals = 4;
        let refuse = Transition::RefuseResume {
            launch_id: LAUNCH.into(),
        };
        assert_eq!(
            decide_on(&current, refuse.clone()),
            writes(expected, vec![])
        );
        assert!(
            matches!(
                decide_on(&claimed_for_answer(), refuse),
                Err(Refusal::WrongLaunch { .. })
            ),
            "an answer's resume goes back through its own bounded retries"
        );
    }

    #[test]
    fn a_failed_collection_is_counted_when_its_claim_goes_back() {
        let mut current = claimed_for_completion();
        current.collect_failures = 1;
        let mut expected = stamped(&current);
        expected.status = Status::Running;
        expected.claim = None;
        expected.collect_failures = 2;
        expected.collect_failed_since = Some(now());
        assert_eq!(
            decide_on(&current, hand_back(LAUNCH, true)),
            writes(expected, vec![])
        );
    }

    #[test]
    fn the_collect_allowance_is_two_failed_reads_spanning_a_minute() {
        let mut run = claimed_for_completion();
        assert!(!collect_allowance_spent(&run, now()), "no failure yet");
        run.collect_failures = 1;
        run.collect_failed_since = Some(now());
        let within = now() + chrono::TimeDelta::seconds(59);
        assert!(!collect_allowance_spent(&run, within), "inside the minute");
        let past = now() + COLLECT_SPAN;
        assert!(
            collect_allowance_spent(&run, past),
            "two reads over a minute"
        );
        run.collect_failures = 0;
        run.collect_failed_since = None;
        assert!(
            !collect_allowance_spent(&run, past + COLLECT_SPAN),
            "a collection that read the box started the count again"
        );
    }

    #[test]
    fn a_collection_that_charges_read_the_box_and_clears_the_failures() {
        let mut current = claimed_for_completion();
        current.collect_failures = 3;
        current.collect_failed_since = Some(now());
        let charge = Transition::Charge {
            launch_id: LAUNCH.into(),
            share: Share::Seat,
            usage: Usage::default(),
        };
        let next = match decide_on(&current, charge) {
            Ok(crate::transition::Decision {
                next: crate::transition::Next::Write(next),
                ..
            }) => next,
            other => panic!("a charge is written: {other:?}"),
        };
        assert_eq!(next.collect_failures, 0);
        assert_eq!(next.collect_failed_since, None);
    }

    #[test]
    fn a_handed_back_answer_claim_returns_the_answer_untaken() {
        let current = answer_taken();
        let mut expected = stamped(&current);
        expected.status = Status::Answered;
        expected.claim = None;
        if let Some(answer) = expected.answer.as_mut() {
            answer.taken_at = None;
            // its retry window starts at its first failed resume (spec line 444)
            answer.first_failed_at = Some(crate::transition::test_support::now());
        }
        assert_eq!(
            decide_on(&current, hand_back(LAUNCH, false)),
            writes(expected, vec![])
        );
    }

    #[test]
    fn only_the_claimant_hands_a_claim_back_for_its_own_job() {
        let newer = fence_at(EPOCH + 1);
        assert_eq!(
            decide(
                Some(&claimed_for_completion()),
                &newer,
                &hand_back(LAUNCH, false),
                now()
            ),
            Err(Refusal::NotClaimant)
        );
        assert_eq!(
            decide_on(&claimed_for_completion(), hand_back(OLD_LAUNCH, false)),
            Err(Refusal::WrongLaunch {
                transition: "hand_back_claim",
                asked: OLD_LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
    }

    fn usage(input_tokens: u64) -> Usage {
        Usage {
            input_tokens,
            output_tokens: 20,
            cache_read_tokens: 30,
            cache_write_tokens: 40,
            cost_micros: 500,
        }
    }

    fn charge(share: Share, usage: Usage) -> Transition {
        Transition::Charge {
            launch_id: LAUNCH.into(),
            share,
            usage,
        }
    }

    #[test]
    fn each_share_of_a_charge_lands_once_per_job() {
        let current = claimed_for_completion();
        let mut seat_landed = stamped(&current);
        seat_landed.charged = Some(Charged {
            launch_id: LAUNCH.into(),
            seat: true,
            company: false,
            input_tokens: 10,
            output_tokens: 20,
            cost_micros: 500,
            task: false,
        });
        let seat = decide_on(&current, charge(Share::Seat, usage(10)));
        assert_eq!(
            seat,
            writes(
                seat_landed.clone(),
                vec![Effect::AddSpend {
                    share: Share::Seat,
                    usage: usage(10),
                }]
            )
        );

        let mut both_landed = seat_landed.clone();
        if let Some(charged) = both_landed.charged.as_mut() {
            charged.company = true;
            charged.input_tokens = 11;
        }
        assert_eq!(
            decide_on(&seat_landed, charge(Share::Company, usage(11))),
            writes(
                both_landed.clone(),
                vec![Effect::AddSpend {
                    share: Share::Company,
                    usage: usage(11),
                }]
            )
        );

        for share in [Share::Seat, Share::Company] {
            assert_eq!(
                decide_on(&both_landed, charge(share, usage(10))),
                Err(Refusal::AlreadyDone)
            );
        }
    }

    #[test]
    fn a_charge_left_from_an_older_job_starts_over() {
        let mut current = claimed_for_completion();
        current.charged = Some(Charged {
            launch_id: OLD_LAUNCH.into(),
            seat: true,
            company: true,
            input_tokens: 1,
            output_tokens: 1,
            cost_micros: 1,
            task: false,
        });
        let mut expected = stamped(&current);
        expected.charged = Some(Charged {
            launch_id: LAUNCH.into(),
            seat: true,
            company: false,
            input_tokens: 10,
            output_tokens: 20,
            cost_micros: 500,
            task: false,
        });
        assert_eq!(
            decide_on(&current, charge(Share::Seat, usage(10))),
            writes(
                expected,
                vec![Effect::AddSpend {
                    share: Share::Seat,
                    usage: usage(10),
                }]
            )
        );
    }

    #[test]
    fn a_charge_needs_the_writers_own_claim() {
        assert_eq!(
            decide_on(&running(), charge(Share::Seat, usage(10))),
            Err(Refusal::WrongStatus {
                transition: "charge",
                expected: "resumed",
                found: Status::Running,
            })
        );
    }

    fn publish(launch_id: &str) -> Transition {
        Transition::PublishPhase {
            launch_id: launch_id.into(),
            phase: serde_json::json!({"exit": 0}),
        }
    }

    fn phase_completed() -> Effect {
        announced(
            kind::PHASE_COMPLETED,
            &[TURN, LAUNCH],
            LAUNCH,
            serde_json::json!({"phase": "sandbox", "backend": "sandbox", "record": {"exit": 0}}),
        )
    }

    #[test]
    fn the_phase_record_is_announced_once_per_job() {
        let current = claimed_for_completion();
        let mut expected = stamped(&current);
        expected.phase_published = Some(LAUNCH.into());
        let announcement = phase_completed();
        assert_eq!(
            decide_on(&current, publish(LAUNCH)),
            writes(expected.clone(), vec![announcement])
        );
        assert_eq!(
            decide_on(&expected, publish(LAUNCH)),
            Err(Refusal::AlreadyDone)
        );
    }

    #[test]
    fn the_run_record_carries_the_phase_records_model_receipt() {
        let current = claimed_for_completion();
        let receipt = crate::phase::ModelReceipt::new(
            Some("zai-coding-plan/glm-5.2"),
            Some("openai-compat/zai-coding-plan/glm-5.2"),
            Some("opencode:session"),
        );
        let phase = serde_json::json!({"exit": 0, "model": receipt});
        let publish = Transition::PublishPhase {
            launch_id: LAUNCH.into(),
            phase: phase.clone(),
        };
        let mut expected = stamped(&current);
        expected.phase_published = Some(LAUNCH.into());
        expected.model = Some(receipt);
        let announcement = announced(
            kind::PHASE_COMPLETED,
            &[TURN, LAUNCH],
            LAUNCH,
            serde_json::json!({"phase": "sandbox", "backend": "sandbox", "record": phase}),
        );
        assert_eq!(
            decide_on(&current, publish),
            writes(expected, vec![announcement])
        );
    }

    #[test]
    fn a_phase_record_published_for_an_older_job_does_not_stop_this_one() {
        let mut current = claimed_for_completion();
        current.phase_published = Some(OLD_LAUNCH.into());
        let mut expected = stamped(&current);
        expected.phase_published = Some(LAUNCH.into());
        let announcement = phase_completed();
        assert_eq!(
            decide_on(&current, publish(LAUNCH)),
            writes(expected, vec![announcement])
        );
    }

    fn park(launch_id: &str) -> Transition {
        Transition::Park {
            launch_id: launch_id.into(),
            question: question(),
        }
    }

    #[test]
    fn a_completion_that_asks_parks_on_its_question_and_announces_it() {
        let mut current = claimed_for_completion();
        current.answer = Some(reply("stale"));
        let mut expected = stamped(&current);
        expected.status = Status::AwaitingClarification;
        expected.claim = None;
        expected.answer = None;
        expected.question = Some(question());
        let asked_at = question().asked_at.to_rfc3339();
        let announcement = announced(
            kind::CLARIFICATION_REQUESTED,
            &[TURN, LAUNCH, &asked_at],
            LAUNCH,
            serde_json::json!({
                "question": "which branch?",
                "audience": "lead",
                "audience_handles": ["lead"],
                "audience_fallback": false,
                "conversation_key": "conv-1",
                "work_item": "WI-7",
                "branch": "fix/build",
            }),
        );
        assert_eq!(
            decide_on(&current, park(LAUNCH)),
            writes(expected, vec![announcement])
        );
    }

    #[test]
    fn an_answers_claim_does_not_park() {
        assert_eq!(
            decide_on(&answer_taken(), park(LAUNCH)),
            Err(Refusal::WrongLaunch {
                transition: "park",
                asked: LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
    }

    fn mark_paused(sandbox_id: &str) -> Transition {
        Transition::MarkPaused {
            sandbox_id: sandbox_id.into(),
        }
    }

    #[test]
    fn a_collected_box_is_marked_paused() {
        for current in [claimed_for_completion(), awaiting(), answered()] {
            let mut expected = stamped(&current);
            expected.paused_at = Some(now());
            assert_eq!(
                decide_on(&current, mark_paused(BOX)),
                writes(expected, vec![])
            );
        }
    }

    #[test]
    fn a_box_is_marked_paused_only_after_collection() {
        assert_eq!(
            decide_on(&running(), mark_paused(BOX)),
            Err(Refusal::WrongStatus {
                transition: "mark_paused",
                expected: "resumed",
                found: Status::Running,
            })
        );
    }

    #[test]
    fn another_box_is_not_marked_paused() {
        assert_eq!(
            decide_on(&awaiting(), mark_paused(OTHER_BOX)),
            Err(Refusal::WrongBox {
                asked: OTHER_BOX.into(),
                found: Some(BOX.into()),
            })
        );
    }

    fn take(launch_id: &str) -> Transition {
        Transition::Take {
            launch_id: launch_id.into(),
        }
    }

    #[test]
    fn a_turn_takes_the_findings_once_and_a_taken_claim_is_never_revived() {
        let current = claimed_for_completion();
        let mut expected = stamped(&current);
        expected.completion = Some(CompletionClaims {
            taken_launch_id: Some(LAUNCH.into()),
            ..CompletionClaims::default()
        });
        assert_eq!(
            decide_on(&current, take(LAUNCH)),
            writes(expected.clone(), vec![])
        );
        assert_eq!(
            decide_on(&expected, take(LAUNCH)),
            Err(Refusal::AlreadyDone)
        );
        assert_eq!(
            decide_on(&expected, Transition::Revive),
            Err(Refusal::CompletionTaken)
        );
    }

    #[test]
    fn an_untaken_completion_claim_goes_back_to_running_within_its_bounds() {
        let current = claimed_for_completion();
        let mut expected = stamped(&current);
        expected.status = Status::Running;
        expected.claim = None;
        expected.completion = Some(CompletionClaims {
            taken_launch_id: None,
            lost_claims: 1,
            first_lost_at: Some(now()),
        });
        assert_eq!(
            decide_on(&current, Transition::Revive),
            writes(expected, vec![])
        );
        // three lost claims spend the revivals
        let mut spent = claimed_for_completion();
        spent.completion = Some(CompletionClaims {
            taken_launch_id: None,
            lost_claims: MAX_ANSWER_REVIVALS,
            first_lost_at: Some(minutes_ago(1)),
        });
        assert_eq!(
            decide_on(&spent, Transition::Revive),
            Err(Refusal::RevivalsSpent {
                lost_claims: MAX_ANSWER_REVIVALS
            })
        );
        // and so does one pause TTL since the first loss
        let mut late = claimed_for_completion();
        late.completion = Some(CompletionClaims {
            taken_launch_id: None,
            lost_claims: 1,
            first_lost_at: Some(minutes_ago(31)),
        });
        assert_eq!(
            decide_on(&late, Transition::Revive),
            Err(Refusal::RevivalsSpent { lost_claims: 1 })
        );
    }
}
