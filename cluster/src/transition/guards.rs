//! The checks rules share: the run is in the status the transition needs, on the job and box it
//! names, and — for a claim's own writes — under the claim this writer took (I5).

use chrono::{DateTime, Duration, Utc};

use crate::record::{Claim, ClaimKind, Status};

use super::step::{DEFAULT_PAUSE_TTL_SECONDS, MAX_ANSWER_REVIVALS, Refusal, Step};

impl Step<'_> {
    /// Spends one revival of something a dead node lost (an answer's claim, a completion's, a
    /// relaunch): at most [`MAX_ANSWER_REVIVALS`], and only within one pause TTL of the first
    /// loss (I12). `lost_claims` and `first_lost_at` are the counters it is kept in.
    pub(super) fn spend_revival(
        &self,
        lost_claims: &mut u32,
        first_lost_at: &mut Option<DateTime<Utc>>,
    ) -> Result<(), Refusal> {
        let pause_ttl = self
            .current
            .pause_ttl_seconds
            .unwrap_or(DEFAULT_PAUSE_TTL_SECONDS);
        let window_passed = first_lost_at.is_some_and(|first| {
            self.now.signed_duration_since(first) >= Duration::seconds(pause_ttl as i64)
        });
        if *lost_claims >= MAX_ANSWER_REVIVALS || window_passed {
            return Err(Refusal::RevivalsSpent {
                lost_claims: *lost_claims,
            });
        }
        *lost_claims += 1;
        first_lost_at.get_or_insert(self.now);
        Ok(())
    }

    /// The refusal for a run in the wrong status; `expected` names the status (or statuses)
    /// the transition applies to.
    pub(super) fn wrong_status(&self, expected: &'static str) -> Refusal {
        Refusal::WrongStatus {
            transition: self.transition.name(),
            expected,
            found: self.current.status,
        }
    }

    /// What the run's claim (if any) was taken for.
    pub(super) fn claim_kind(&self) -> Option<ClaimKind> {
        self.current.claim.as_ref().map(|claim| claim.kind)
    }

    /// Refuses unless the run is in `status`.
    pub(super) fn require_status(&self, status: Status) -> Result<(), Refusal> {
        if self.current.status == status {
            Ok(())
        } else {
            Err(self.wrong_status(status.as_str()))
        }
    }

    /// Refuses unless the run is on job `asked`: a write for an older job writes nothing.
    pub(super) fn same_launch(&self, asked: &str) -> Result<(), Refusal> {
        if asked == self.current.launch_id {
            Ok(())
        } else {
            Err(Refusal::WrongLaunch {
                transition: self.transition.name(),
                asked: asked.to_owned(),
                current: self.current.launch_id.clone(),
            })
        }
    }

    /// Refuses unless the record names box `asked`.
    pub(super) fn same_box(&self, asked: &str) -> Result<(), Refusal> {
        if self.current.sandbox_id.as_deref() == Some(asked) {
            Ok(())
        } else {
            Err(Refusal::WrongBox {
                asked: asked.to_owned(),
                found: self.current.sandbox_id.clone(),
            })
        }
    }

    /// The claim this writer holds on the run for `launch_id`, of `kind` when given.
    pub(super) fn own_claim(
        &self,
        launch_id: &str,
        kind: Option<ClaimKind>,
    ) -> Result<&Claim, Refusal> {
        self.require_status(Status::Resumed)?;
        self.same_launch(launch_id)?;
        let claim = self
            .current
            .claim
            .as_ref()
            .ok_or_else(|| Refusal::Invalid("a resumed run carries no claim".into()))?;
        if kind.is_some_and(|kind| kind != claim.kind) || claim.launch_id != launch_id {
            return Err(Refusal::WrongLaunch {
                transition: self.transition.name(),
                asked: launch_id.to_owned(),
                current: claim.launch_id.clone(),
            });
        }
        if claim.epoch != self.fence.epoch {
            return Err(Refusal::NotClaimant);
        }
        Ok(claim)
    }
}

#[cfg(test)]
mod tests {
    //! The claim guard, once for every claim's own write: each is refused the same way.

    use crate::record::{EndingReason, Usage};
    use crate::transition::test_support::*;
    use crate::transition::{EndingGuard, Share, Transition, decide};

    use super::*;

    /// Every write that only the claim's own holder makes, for `launch_id`.
    fn claim_writes(launch_id: &str) -> Vec<Transition> {
        let launch_id = launch_id.to_owned();
        vec![
            Transition::HandBackClaim {
                launch_id: launch_id.clone(),
                collect_failed: false,
            },
            Transition::Charge {
                launch_id: launch_id.clone(),
                share: Share::Seat,
                usage: Usage::default(),
            },
            Transition::PublishPhase {
                launch_id: launch_id.clone(),
                phase: serde_json::json!({}),
            },
            Transition::Relaunch {
                launch_id: launch_id.clone(),
                new_launch_id: "launch-2".into(),
                brief: String::new(),
            },
            Transition::DecideEnding {
                reason: EndingReason::ClaimUnreverted,
                detail: String::new(),
                guard: EndingGuard::Claim {
                    launch_id: launch_id.clone(),
                },
                announce: None,
            },
        ]
    }

    /// The claim writes of one kind of claim: parking a completion, taking an answer.
    /// The claim writes only one kind of claim takes (a take is either kind's: it records an
    /// answer's take or the findings').
    fn kind_writes(launch_id: &str) -> [(Transition, ClaimKind); 1] {
        [(
            Transition::Park {
                launch_id: launch_id.into(),
                question: question(),
            },
            ClaimKind::Completion,
        )]
    }

    fn all_claim_writes(launch_id: &str) -> Vec<Transition> {
        let mut all = claim_writes(launch_id);
        all.extend(kind_writes(launch_id).map(|(transition, _)| transition));
        all.push(Transition::Take {
            launch_id: launch_id.into(),
        });
        all
    }

    #[test]
    fn a_claims_own_write_is_refused_to_a_writer_that_is_not_its_claimant() {
        // a newer lease than the claim's passes the fence but is not the claimant
        for current in [claimed_for_completion(), answer_taken()] {
            for transition in claim_writes(LAUNCH) {
                assert_eq!(
                    decide(Some(&current), &fence_at(EPOCH + 1), &transition, now()),
                    Err(Refusal::NotClaimant),
                    "{}",
                    transition.name()
                );
            }
        }
        for (transition, needs) in kind_writes(LAUNCH) {
            let current = match needs {
                ClaimKind::Completion => claimed_for_completion(),
                ClaimKind::Answer => claimed_for_answer(),
            };
            assert_eq!(
                decide(Some(&current), &fence_at(EPOCH + 1), &transition, now()),
                Err(Refusal::NotClaimant),
                "{}",
                transition.name()
            );
        }
    }

    #[test]
    fn a_claims_own_write_needs_a_resumed_run() {
        for transition in all_claim_writes(LAUNCH) {
            assert_eq!(
                decide_on(&running(), transition.clone()),
                Err(Refusal::WrongStatus {
                    transition: transition.name(),
                    expected: "resumed",
                    found: Status::Running,
                })
            );
        }
    }

    #[test]
    fn a_claims_own_write_for_an_old_job_is_refused_before_the_claim_is_read() {
        let mut unclaimed = claimed_for_completion();
        unclaimed.claim = None;
        for transition in all_claim_writes(OLD_LAUNCH) {
            assert_eq!(
                decide_on(&unclaimed, transition.clone()),
                Err(Refusal::WrongLaunch {
                    transition: transition.name(),
                    asked: OLD_LAUNCH.into(),
                    current: LAUNCH.into(),
                })
            );
        }
    }

    #[test]
    fn a_resumed_run_without_its_claim_is_invalid() {
        let mut unclaimed = claimed_for_completion();
        unclaimed.claim = None;
        for transition in all_claim_writes(LAUNCH) {
            assert_eq!(
                decide_on(&unclaimed, transition),
                Err(Refusal::Invalid("a resumed run carries no claim".into()))
            );
        }
    }

    #[test]
    fn a_claim_taken_for_another_job_than_the_run_is_on_is_not_this_writers() {
        let mut stale = claimed_for_completion();
        if let Some(claim) = stale.claim.as_mut() {
            claim.launch_id = OLD_LAUNCH.into();
        }
        for transition in all_claim_writes(LAUNCH) {
            assert_eq!(
                decide_on(&stale, transition.clone()),
                Err(Refusal::WrongLaunch {
                    transition: transition.name(),
                    asked: LAUNCH.into(),
                    current: OLD_LAUNCH.into(),
                })
            );
        }
    }

    #[test]
    fn a_claim_write_of_the_other_kind_of_claim_is_refused_as_another_job() {
        for (transition, needs) in kind_writes(LAUNCH) {
            let current = match needs {
                ClaimKind::Completion => claimed_for_answer(),
                ClaimKind::Answer => claimed_for_completion(),
            };
            assert_eq!(
                decide_on(&current, transition.clone()),
                Err(Refusal::WrongLaunch {
                    transition: transition.name(),
                    asked: LAUNCH.into(),
                    current: LAUNCH.into(),
                })
            );
        }
    }
}
