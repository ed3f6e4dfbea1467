//! A parked run's answer: the first qualifying reply is recorded (I4), claimed for its resume,
//! taken by the resumed turn (spent, I5), revived when its claim died before the take, or let
//! go — declined for this question, its copy owed back to the seat (I7) until that copy is
//! published and cleared.

use crate::events;
use crate::record::{Answer, Claim, ClaimKind, HandBack, RunRecord, Status};

use super::step::{Effect, Refusal, Step};

/// The first qualifying reply: posted at or after the question, never declined for it.
pub(super) fn record_answer(
    step: &Step<'_>,
    next: &mut RunRecord,
    answer: &Answer,
) -> Result<(), Refusal> {
    let current = step.current;
    match current.status {
        Status::AwaitingClarification | Status::Reseed => {}
        Status::Answered | Status::Resumed
            if current
                .answer
                .as_ref()
                .is_some_and(|a| a.delivery_id == answer.delivery_id) =>
        {
            return Err(Refusal::AlreadyRecorded);
        }
        Status::Answered => return Err(Refusal::AlreadyAnswered),
        _ => return Err(step.wrong_status("awaiting_clarification")),
    }
    if let Some(launch_id) = &answer.for_launch {
        step.same_launch(launch_id)?;
    }
    let question = current.question.as_ref().ok_or(Refusal::NoAnchor)?;
    if answer.posted_at < question.asked_at {
        return Err(Refusal::PostedBeforeQuestion);
    }
    if current.declined_answers.contains(&answer.delivery_id) {
        return Err(Refusal::Declined);
    }
    let mut answer = answer.clone();
    answer.recorded_at = step.now;
    answer.taken_at = None;
    next.answer = Some(answer);
    next.status = Status::Answered;
    next.epoch = step.fence.epoch;
    Ok(())
}

/// Claims the answered run for its resume; every claim counts as an attempt.
pub(super) fn claim_answer(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.require_status(Status::Answered)?;
    step.same_launch(launch_id)?;
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("an answered run carries no answer".into()))?;
    answer.attempts += 1;
    // what the answer became, said once however many claims its resume takes
    effects.push(answered_event(step.current, answer, "resumed", step.now));
    next.status = Status::Resumed;
    next.epoch = step.fence.epoch;
    next.claim = Some(Claim {
        kind: ClaimKind::Answer,
        launch_id: launch_id.to_owned(),
        from: Status::Answered,
        epoch: step.fence.epoch,
        claimed_at: step.now,
    });
    Ok(())
}

/// The last moment before the resumed turn runs: the answer is spent, its delivery worked.
pub(super) fn take(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
    launch_id: &str,
) -> Result<(), Refusal> {
    step.own_claim(launch_id, Some(ClaimKind::Answer))?;
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("an answer's claim carries no answer".into()))?;
    if answer.taken_at.is_some() {
        return Err(Refusal::AnswerTaken);
    }
    answer.taken_at = Some(step.now);
    effects.push(Effect::Spend {
        delivery_id: answer.delivery_id.clone(),
    });
    Ok(())
}

/// A dead claim gives its untaken answer back: at most [`MAX_ANSWER_REVIVALS`] times, and only
/// within one pause TTL of the first loss.
pub(super) fn revive(step: &Step<'_>, next: &mut RunRecord) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Resumed)?;
    let claim = current
        .claim
        .as_ref()
        .ok_or_else(|| Refusal::Invalid("a resumed run carries no claim".into()))?;
    if claim.kind != ClaimKind::Answer {
        return Err(step.wrong_status("resumed for an answer"));
    }
    let answer = next
        .answer
        .as_mut()
        .ok_or_else(|| Refusal::Invalid("an answer's claim carries no answer".into()))?;
    if answer.taken_at.is_some() {
        return Err(Refusal::AnswerTaken);
    }
    step.spend_revival(&mut answer.lost_claims, &mut answer.first_lost_at)?;
    next.status = Status::Answered;
    next.claim = None;
    next.epoch = step.fence.epoch;
    Ok(())
}

/// Declines the untaken answer for this question; the run parks again.
pub(super) fn let_go(
    step: &Step<'_>,
    next: &mut RunRecord,
    effects: &mut Vec<Effect>,
) -> Result<(), Refusal> {
    let current = step.current;
    step.require_status(Status::Answered)?;
    if !current.hand_back.is_empty() {
        return Err(Refusal::OwesHandBack);
    }
    if current.answer_taken() {
        return Err(Refusal::AnswerTaken);
    }
    // an answer by name let go is announced declined, so the person knows to answer again; a
    // chat reply let go becomes the ordinary message it is and records nothing
    if let Some(answer) = &current.answer
        && answer.route == crate::record::AnswerRoute::Operator
    {
        effects.push(answered_event(current, answer, "declined", step.now));
    }
    let_answer_go(next, effects);
    next.status = next.parked_status();
    Ok(())
}

/// The copies named were published to the seat's inbox; clearing none is already done.
pub(super) fn clear_hand_back(
    step: &Step<'_>,
    next: &mut RunRecord,
    delivery_ids: &[String],
) -> Result<(), Refusal> {
    next.hand_back
        .retain(|copy| !delivery_ids.contains(&copy.delivery_id));
    if next.hand_back.len() == step.current.hand_back.len() {
        return Err(Refusal::AlreadyDone);
    }
    Ok(())
}

/// Takes the untaken answer off the run into a copy owed to the seat; a taken one stays spent.
/// Either way its original delivery is recorded as worked. Returns whether a copy is owed.
/// An answer given by naming the run has no ordinary form to become: it gets no copy, only its
/// announcement (declined, or gone when its run ended, which the caller makes), so the person
/// knows to answer again.
pub(super) fn let_answer_go(record: &mut RunRecord, effects: &mut Vec<Effect>) -> bool {
    let Some(answer) = record.answer.take() else {
        return false;
    };
    effects.push(Effect::Spend {
        delivery_id: answer.delivery_id.clone(),
    });
    if answer.taken_at.is_some() {
        return false;
    }
    if answer.route == crate::record::AnswerRoute::Operator {
        if !record.declined_answers.contains(&answer.delivery_id) {
            record.declined_answers.push(answer.delivery_id.clone());
        }
        return false;
    }
    let copy = copy_of(&answer);
    for id in [&answer.delivery_id, &copy.delivery_id] {
        if !record.declined_answers.contains(id) {
            record.declined_answers.push(id.clone());
        }
    }
    record.hand_back.push(copy);
    true
}

/// `sandbox_run_answered`: the run, the route, who answered, and what the answer `became`;
/// its id is derived from the answer's delivery and the outcome, so it is announced once.
pub(super) fn answered_event(
    run: &RunRecord,
    answer: &crate::record::Answer,
    became: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Effect {
    let answered = events::Answered {
        turn_id: &run.turn_id,
        launch_id: &run.launch_id,
        seat: &run.seat,
        route: answer.route.as_str(),
        answered_by: &answer.from,
        given_by: answer.given_by.as_deref(),
        delivery_id: &answer.delivery_id,
        operator: answer.operator.as_ref(),
    };
    Effect::Announce(Box::new(answered.event(became, now)))
}

/// The copy of a reply owed back to the seat, its delivery id derived from the original's.
fn copy_of(answer: &Answer) -> HandBack {
    HandBack {
        delivery_id: format!(
            "copy-{}",
            events::derive_id(&["hand_back", &answer.delivery_id])
        ),
        original_delivery_id: answer.delivery_id.clone(),
        text: answer.text.clone(),
        from: answer.from.clone(),
        posted_at: answer.posted_at,
        conversation_key: answer.conversation_key.clone(),
        partition: answer.partition.clone(),
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, Utc};

    use crate::record::AnswerRoute;
    use crate::transition::{DEFAULT_PAUSE_TTL_SECONDS, MAX_ANSWER_REVIVALS};

    use crate::transition::test_support::*;
    use crate::transition::{Transition, decide};

    use super::*;

    fn record_answer(answer: Answer) -> Transition {
        Transition::RecordAnswer { answer }
    }

    #[test]
    fn an_answer_naming_an_older_job_is_refused_inside_the_write() {
        let current = awaiting();
        let mut answer = reply("d-old");
        answer.for_launch = Some("launch-older".into());
        assert!(matches!(
            decide_on(&current, record_answer(answer)),
            Err(Refusal::WrongLaunch { .. })
        ));
        let mut answer = reply("d-now");
        answer.for_launch = Some(current.launch_id.clone());
        assert!(decide_on(&current, record_answer(answer)).is_ok());
    }

    /// [`reply`] as the rule records it: stamped now, untaken, under the writer's lease.
    fn recorded(current: &RunRecord, delivery_id: &str, epoch: i64) -> RunRecord {
        let mut expected = stamped(current);
        let mut answer = reply(delivery_id);
        answer.recorded_at = now();
        expected.answer = Some(answer);
        expected.status = Status::Answered;
        expected.epoch = epoch;
        expected
    }

    #[test]
    fn the_first_reply_after_the_question_is_recorded_untaken() {
        let current = awaiting();
        let mut arriving = reply(DELIVERY);
        arriving.taken_at = Some(minutes_ago(1));
        let newer = fence_at(EPOCH + 1);
        assert_eq!(
            decide(Some(&current), &newer, &record_answer(arriving), now()),
            writes(recorded(&current, DELIVERY, EPOCH + 1), vec![])
        );
    }

    #[test]
    fn a_reply_to_a_reseeded_run_is_recorded() {
        let mut current = awaiting();
        current.status = Status::Reseed;
        current.sandbox_id = None;
        current.paused_at = None;
        assert_eq!(
            decide_on(&current, record_answer(reply(DELIVERY))),
            writes(recorded(&current, DELIVERY, EPOCH), vec![])
        );
    }

    #[test]
    fn a_reply_posted_at_the_instant_of_the_question_answers_it() {
        let current = awaiting();
        let mut arriving = reply(DELIVERY);
        arriving.posted_at = question().asked_at;
        let mut expected = recorded(&current, DELIVERY, EPOCH);
        if let Some(answer) = expected.answer.as_mut() {
            answer.posted_at = question().asked_at;
        }
        assert_eq!(
            decide_on(&current, record_answer(arriving)),
            writes(expected, vec![])
        );
    }

    #[test]
    fn a_repeat_of_the_recorded_reply_is_already_recorded() {
        for current in [answered(), claimed_for_answer()] {
            assert_eq!(
                decide_on(&current, record_answer(reply(DELIVERY))),
                Err(Refusal::AlreadyRecorded)
            );
        }
    }

    #[test]
    fn a_second_reply_finds_the_question_answered() {
        assert_eq!(
            decide_on(&answered(), record_answer(reply("delivery-2"))),
            Err(Refusal::AlreadyAnswered)
        );
    }

    #[test]
    fn a_reply_to_a_run_that_is_not_parked_is_refused_for_its_status() {
        for (current, found) in [
            (claimed_for_answer(), Status::Resumed),
            (running(), Status::Running),
        ] {
            assert_eq!(
                decide_on(&current, record_answer(reply("delivery-2"))),
                Err(Refusal::WrongStatus {
                    transition: "record_answer",
                    expected: "awaiting_clarification",
                    found,
                })
            );
        }
    }

    #[test]
    fn a_reply_needs_the_questions_anchor() {
        let mut current = awaiting();
        current.question = None;
        assert_eq!(
            decide_on(&current, record_answer(reply(DELIVERY))),
            Err(Refusal::NoAnchor)
        );
    }

    #[test]
    fn a_reply_posted_before_the_question_does_not_answer_it() {
        let mut early = reply(DELIVERY);
        early.posted_at = minutes_ago(31);
        assert_eq!(
            decide_on(&awaiting(), record_answer(early)),
            Err(Refusal::PostedBeforeQuestion)
        );
    }

    #[test]
    fn a_declined_reply_never_answers_this_question_again() {
        let mut current = awaiting();
        current.declined_answers = vec![DELIVERY.into()];
        assert_eq!(
            decide_on(&current, record_answer(reply(DELIVERY))),
            Err(Refusal::Declined)
        );
    }

    fn claim_answer(launch_id: &str) -> Transition {
        Transition::ClaimAnswer {
            launch_id: launch_id.into(),
        }
    }

    #[test]
    fn an_answered_run_is_claimed_for_its_resume_and_counts_an_attempt() {
        let current = answered();
        let newer = fence_at(EPOCH + 1);
        let mut expected = stamped(&current);
        if let Some(answer) = expected.answer.as_mut() {
            answer.attempts = 1;
        }
        expected.status = Status::Resumed;
        expected.epoch = EPOCH + 1;
        expected.claim = Some(Claim {
            kind: ClaimKind::Answer,
            launch_id: LAUNCH.into(),
            from: Status::Answered,
            epoch: EPOCH + 1,
            claimed_at: now(),
        });
        let announced = answered_event(&current, answer_of(&current), "resumed", now());
        assert_eq!(
            decide(Some(&current), &newer, &claim_answer(LAUNCH), now()),
            writes(expected, vec![announced])
        );
    }

    #[test]
    fn an_answer_is_claimed_only_when_answered_and_for_its_launch() {
        assert_eq!(
            decide_on(&awaiting(), claim_answer(LAUNCH)),
            Err(Refusal::WrongStatus {
                transition: "claim_answer",
                expected: "answered",
                found: Status::AwaitingClarification,
            })
        );
        assert_eq!(
            decide_on(&answered(), claim_answer(OLD_LAUNCH)),
            Err(Refusal::WrongLaunch {
                transition: "claim_answer",
                asked: OLD_LAUNCH.into(),
                current: LAUNCH.into(),
            })
        );
    }

    #[test]
    fn an_answered_run_without_its_answer_is_invalid() {
        let mut current = answered();
        current.answer = None;
        assert_eq!(
            decide_on(&current, claim_answer(LAUNCH)),
            Err(Refusal::Invalid("an answered run carries no answer".into()))
        );
    }

    fn take() -> Transition {
        Transition::Take {
            launch_id: LAUNCH.into(),
        }
    }

    #[test]
    fn the_resumed_turn_takes_its_answer_and_spends_the_delivery() {
        let current = claimed_for_answer();
        let mut expected = stamped(&current);
        if let Some(answer) = expected.answer.as_mut() {
            answer.taken_at = Some(now());
        }
        assert_eq!(
            decide_on(&current, take()),
            writes(
                expected,
                vec![Effect::Spend {
                    delivery_id: DELIVERY.into(),
                }]
            )
        );
    }

    #[test]
    fn a_taken_answer_is_spent() {
        assert_eq!(
            decide_on(&answer_taken(), take()),
            Err(Refusal::AnswerTaken)
        );
    }

    #[test]
    fn a_completion_claims_take_records_the_findings_taken_and_spends_nothing() {
        let taken = decide_on(&claimed_for_completion(), take()).expect("taken");
        assert!(taken.effects.is_empty(), "{taken:?}");
        let crate::transition::Next::Write(record) = taken.next else {
            panic!("a take writes the row");
        };
        assert!(record.completion_taken() && record.answer.is_none());
    }

    #[test]
    fn an_answer_claim_without_its_answer_is_invalid() {
        let mut current = claimed_for_answer();
        current.answer = None;
        assert_eq!(
            decide_on(&current, take()),
            Err(Refusal::Invalid(
                "an answer's claim carries no answer".into()
            ))
        );
    }

    /// Revive, decided by a reaper holding a newer lease than the claim's.
    fn revive_at(
        current: &RunRecord,
        at: DateTime<Utc>,
    ) -> Result<crate::transition::Decision, Refusal> {
        decide(Some(current), &fence_at(EPOCH + 1), &Transition::Revive, at)
    }

    fn revived(current: &RunRecord, lost_claims: u32, first_lost_at: DateTime<Utc>) -> RunRecord {
        let mut expected = stamped(current);
        if let Some(answer) = expected.answer.as_mut() {
            answer.lost_claims = lost_claims;
            answer.first_lost_at = Some(first_lost_at);
        }
        expected.status = Status::Answered;
        expected.claim = None;
        expected.epoch = EPOCH + 1;
        expected
    }

    #[test]
    fn a_dead_claim_gives_its_untaken_answer_back() {
        let current = claimed_for_answer();
        assert_eq!(
            revive_at(&current, now()),
            writes(revived(&current, 1, now()), vec![])
        );
    }

    #[test]
    fn a_later_revival_keeps_the_first_loss() {
        let mut current = claimed_for_answer();
        if let Some(answer) = current.answer.as_mut() {
            answer.lost_claims = 2;
            answer.first_lost_at = Some(minutes_ago(5));
        }
        assert_eq!(
            revive_at(&current, now()),
            writes(revived(&current, 3, minutes_ago(5)), vec![])
        );
    }

    #[test]
    fn an_answer_is_revived_at_most_max_answer_revivals_times() {
        let mut current = claimed_for_answer();
        if let Some(answer) = current.answer.as_mut() {
            answer.lost_claims = MAX_ANSWER_REVIVALS;
            answer.first_lost_at = Some(minutes_ago(1));
        }
        assert_eq!(
            revive_at(&current, now()),
            Err(Refusal::RevivalsSpent {
                lost_claims: MAX_ANSWER_REVIVALS,
            })
        );
    }

    #[test]
    fn an_answer_is_not_revived_a_pause_ttl_after_its_first_loss() {
        let first_lost_at = now() - Duration::seconds(DEFAULT_PAUSE_TTL_SECONDS as i64);
        let mut current = claimed_for_answer();
        if let Some(answer) = current.answer.as_mut() {
            answer.lost_claims = 1;
            answer.first_lost_at = Some(first_lost_at);
        }
        assert_eq!(
            revive_at(&current, now()),
            Err(Refusal::RevivalsSpent { lost_claims: 1 })
        );
        // a second earlier the window is still open
        let just_inside = now() - Duration::seconds(1);
        let mut expected = revived(&current, 2, first_lost_at);
        expected.updated_at = just_inside;
        assert_eq!(revive_at(&current, just_inside), writes(expected, vec![]));
    }

    #[test]
    fn the_runs_own_pause_ttl_bounds_its_revivals() {
        let mut current = claimed_for_answer();
        current.pause_ttl_seconds = Some(60);
        if let Some(answer) = current.answer.as_mut() {
            answer.lost_claims = 1;
            answer.first_lost_at = Some(minutes_ago(1));
        }
        assert_eq!(
            revive_at(&current, now()),
            Err(Refusal::RevivalsSpent { lost_claims: 1 })
        );
    }

    #[test]
    fn a_taken_answer_is_not_revived() {
        assert_eq!(revive_at(&answer_taken(), now()), Err(Refusal::AnswerTaken));
    }

    #[test]
    fn only_an_answers_claim_is_revived() {
        assert_eq!(
            revive_at(&answered(), now()),
            Err(Refusal::WrongStatus {
                transition: "revive",
                expected: "resumed",
                found: Status::Answered,
            })
        );
        // a completion's claim is revived too, by its own rule (transition::collect)
        assert!(revive_at(&claimed_for_completion(), now()).is_ok());
        let mut unclaimed = claimed_for_answer();
        unclaimed.claim = None;
        assert_eq!(
            revive_at(&unclaimed, now()),
            Err(Refusal::Invalid("a resumed run carries no claim".into()))
        );
    }

    /// `current` with its untaken answer let go: declined, its copy owed.
    fn let_go_of(current: &RunRecord) -> RunRecord {
        let mut expected = stamped(current);
        expected.answer = None;
        expected.declined_answers = vec![DELIVERY.into(), owed_copy().delivery_id];
        expected.hand_back = vec![owed_copy()];
        expected
    }

    fn spent() -> Vec<Effect> {
        vec![Effect::Spend {
            delivery_id: DELIVERY.into(),
        }]
    }

    fn answer_of(run: &RunRecord) -> &Answer {
        run.answer.as_ref().expect("an answer on the run")
    }

    /// A let-go's effects: an answer by name announced declined, then its delivery spent (a
    /// chat reply let go becomes the ordinary message it is, and records nothing).
    fn declined_and_spent(current: &RunRecord) -> Vec<Effect> {
        let answer = answer_of(current);
        let mut effects = Vec::new();
        if answer.route == AnswerRoute::Operator {
            effects.push(answered_event(current, answer, "declined", now()));
        }
        effects.extend(spent());
        effects
    }

    #[test]
    fn a_let_go_answer_is_declined_and_its_copy_owed_to_the_seat() {
        let current = answered();
        let mut expected = let_go_of(&current);
        expected.status = Status::AwaitingClarification;
        assert_eq!(
            decide_on(&current, Transition::LetGo),
            writes(expected, declined_and_spent(&current))
        );
    }

    #[test]
    fn a_let_go_answer_by_name_is_announced_declined_and_gets_no_copy() {
        let mut current = answered();
        if let Some(answer) = current.answer.as_mut() {
            answer.route = AnswerRoute::Operator;
        }
        let mut expected = stamped(&current);
        expected.answer = None;
        expected.declined_answers = vec![DELIVERY.into()];
        expected.status = Status::AwaitingClarification;
        assert_eq!(
            decide_on(&current, Transition::LetGo),
            writes(expected, declined_and_spent(&current))
        );
    }

    #[test]
    fn a_let_go_answer_of_a_run_without_its_box_parks_it_for_reseed() {
        let mut current = answered();
        current.sandbox_id = None;
        current.declined_answers = vec![DELIVERY.into()];
        let mut expected = let_go_of(&current);
        expected.status = Status::Reseed;
        // an id already declined is not declined twice
        assert_eq!(
            decide_on(&current, Transition::LetGo),
            writes(expected, declined_and_spent(&current))
        );
    }

    #[test]
    fn an_answer_is_not_let_go_while_a_copy_is_owed_or_once_taken() {
        let mut owing = answered();
        owing.hand_back = vec![owed_copy()];
        if let Some(answer) = owing.answer.as_mut() {
            answer.taken_at = Some(minutes_ago(1));
        }
        assert_eq!(
            decide_on(&owing, Transition::LetGo),
            Err(Refusal::OwesHandBack)
        );
        owing.hand_back.clear();
        assert_eq!(
            decide_on(&owing, Transition::LetGo),
            Err(Refusal::AnswerTaken)
        );
    }

    #[test]
    fn only_an_answered_run_lets_its_answer_go() {
        assert_eq!(
            decide_on(&claimed_for_answer(), Transition::LetGo),
            Err(Refusal::WrongStatus {
                transition: "let_go",
                expected: "answered",
                found: Status::Resumed,
            })
        );
    }

    fn clear(delivery_ids: &[&str]) -> Transition {
        Transition::ClearHandBack {
            delivery_ids: delivery_ids.iter().map(|id| (*id).to_owned()).collect(),
        }
    }

    #[test]
    fn published_copies_are_cleared_and_the_rest_stay_owed() {
        let mut current = awaiting();
        let mut other = owed_copy();
        other.delivery_id = "copy-other".into();
        current.hand_back = vec![owed_copy(), other.clone()];
        let mut expected = stamped(&current);
        expected.hand_back = vec![other];
        assert_eq!(
            decide_on(&current, clear(&[&owed_copy().delivery_id, "copy-unknown"])),
            writes(expected, vec![])
        );
    }

    #[test]
    fn clearing_copies_no_longer_owed_is_already_done() {
        let mut current = awaiting();
        current.hand_back = vec![owed_copy()];
        assert_eq!(
            decide_on(&current, clear(&["copy-unknown"])),
            Err(Refusal::AlreadyDone)
        );
        assert_eq!(
            decide_on(&awaiting(), clear(&[])),
            Err(Refusal::AlreadyDone)
        );
    }

    #[test]
    fn an_ending_runs_copies_are_cleared() {
        let mut current = ending(crate::record::EndingReason::Cancelled);
        current.hand_back = vec![owed_copy()];
        let mut expected = stamped(&current);
        expected.hand_back = Vec::new();
        assert_eq!(
            decide_on(&current, clear(&[&owed_copy().delivery_id])),
            writes(expected, vec![])
        );
    }
}
