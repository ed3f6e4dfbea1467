//! Recovery after a seat changes hands: the new holder fences each run with its lease, so the
//! old holder's writes are refused from then on (I9). And the record-level invariants every
//! stored row satisfies, which recovery and the property tests check.

use crate::record::{RunRecord, Status};

use super::step::{Refusal, Step};

/// Stamps the writer's lease on the run, and the writer as its owner when it names one.
pub(super) fn fence_run(
    step: &Step<'_>,
    next: &mut RunRecord,
    owner: &Option<String>,
) -> Result<(), Refusal> {
    if step.current.epoch == step.fence.epoch {
        return Err(Refusal::AlreadyDone);
    }
    next.epoch = step.fence.epoch;
    if let Some(owner) = owner {
        next.owner = Some(owner.clone());
    }
    Ok(())
}

/// The record-level invariants every stored row satisfies; the property tests check them
/// after every step.
pub fn check_record(record: &RunRecord) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{} ({}): {what}", record.turn_id, record.status));
    match record.status {
        Status::Launching if record.claim.is_some() => return fail("launching with a claim"),
        Status::Resumed if record.claim.is_none() => return fail("resumed without a claim"),
        Status::Answered if record.answer.is_none() => return fail("answered without an answer"),
        Status::Ending if record.ending.is_none() => return fail("ending without terms"),
        Status::AwaitingClarification | Status::Reseed if record.question.is_none() => {
            return fail("parked without a question");
        }
        Status::AwaitingClarification | Status::Reseed if record.answer.is_some() => {
            return fail("parked while holding an answer");
        }
        _ => {}
    }
    if record.status != Status::Ending && record.ending.is_some() {
        return fail("ending terms on a run that is not ending");
    }
    if record.status == Status::Reseed && record.sandbox_id.is_some() {
        return fail("re-seed still naming a box");
    }
    if let Some(claim) = &record.claim
        && claim.epoch > record.epoch
    {
        return fail("a claim under a lease newer than the row's");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::record::{Claim, ClaimKind, EndingReason};
    use crate::transition::test_support::*;
    use crate::transition::{Transition, decide};

    use super::*;

    fn fence_run(owner: Option<&str>) -> Transition {
        Transition::FenceRun {
            owner: owner.map(str::to_owned),
        }
    }

    #[test]
    fn a_seats_new_holder_fences_the_run_with_its_lease_and_owns_it() {
        let mut current = claimed_for_completion();
        current.owner = Some("node-a".into());
        let mut expected = stamped(&current);
        expected.epoch = EPOCH + 1;
        expected.owner = Some("node-b".into());
        // the claim keeps the lease it was taken under: its holder's writes are now refused
        assert_eq!(
            decide(
                Some(&current),
                &fence_at(EPOCH + 1),
                &fence_run(Some("node-b")),
                now()
            ),
            writes(expected, vec![])
        );
    }

    #[test]
    fn a_fence_that_names_no_owner_keeps_the_runs_owner() {
        let mut current = running();
        current.owner = Some("node-a".into());
        let mut expected = stamped(&current);
        expected.epoch = EPOCH + 1;
        assert_eq!(
            decide(
                Some(&current),
                &fence_at(EPOCH + 1),
                &fence_run(None),
                now()
            ),
            writes(expected, vec![])
        );
    }

    #[test]
    fn a_run_already_fenced_by_this_lease_is_not_fenced_again() {
        assert_eq!(
            decide_on(&running(), fence_run(Some("node-b"))),
            Err(Refusal::AlreadyDone)
        );
    }

    #[test]
    fn every_run_built_by_the_transitions_holds_the_record_invariants() {
        for record in [
            launching(),
            running(),
            claimed_for_completion(),
            awaiting(),
            answered(),
            claimed_for_answer(),
            answer_taken(),
            ending(EndingReason::Cancelled),
        ] {
            assert_eq!(check_record(&record), Ok(()), "{}", record.status);
        }
    }

    #[test]
    fn a_record_that_breaks_an_invariant_is_named_with_what_it_breaks() {
        let claim = claimed_for_completion().claim;
        let mut launching_claimed = launching();
        launching_claimed.claim = claim.clone();
        let mut resumed_unclaimed = claimed_for_completion();
        resumed_unclaimed.claim = None;
        let mut answered_empty = answered();
        answered_empty.answer = None;
        let mut ending_without_terms = ending(EndingReason::Cancelled);
        ending_without_terms.ending = None;
        let mut parked_without_question = awaiting();
        parked_without_question.question = None;
        let mut reseed_with_answer = answered();
        reseed_with_answer.status = Status::Reseed;
        reseed_with_answer.sandbox_id = None;
        let mut running_with_terms = running();
        running_with_terms.ending = ending(EndingReason::Cancelled).ending;
        let mut reseed_with_box = awaiting();
        reseed_with_box.status = Status::Reseed;
        let mut newer_claim = claimed_for_completion();
        newer_claim.claim = Some(Claim {
            kind: ClaimKind::Completion,
            launch_id: LAUNCH.into(),
            from: Status::Running,
            epoch: EPOCH + 1,
            claimed_at: now(),
        });
        let cases = [
            (
                launching_claimed,
                "turn-1 (launching): launching with a claim",
            ),
            (
                resumed_unclaimed,
                "turn-1 (resumed): resumed without a claim",
            ),
            (
                answered_empty,
                "turn-1 (answered): answered without an answer",
            ),
            (
                ending_without_terms,
                "turn-1 (ending): ending without terms",
            ),
            (
                parked_without_question,
                "turn-1 (awaiting_clarification): parked without a question",
            ),
            (
                reseed_with_answer,
                "turn-1 (reseed): parked while holding an answer",
            ),
            (
                running_with_terms,
                "turn-1 (running): ending terms on a run that is not ending",
            ),
            (
                reseed_with_box,
                "turn-1 (reseed): re-seed still naming a box",
            ),
            (
                newer_claim,
                "turn-1 (resumed): a claim under a lease newer than the row's",
            ),
        ];
        for (record, problem) in cases {
            assert_eq!(check_record(&record), Err(problem.to_owned()));
        }
    }
}
