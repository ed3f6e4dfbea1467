//! The checks rules share: the run is in the status the transition needs, on the job and box it
//! names, and — for a claim's own writes — under the claim this writer took (I5).

use crate::record::{Claim, ClaimKind, Status};

use super::{Refusal, Step};

impl Step<'_> {
    /// The refusal for a run in the wrong status; `expected` names the status (or statuses)
    /// the transition applies to.
    pub(super) fn wrong_status(&self, expected: &'static str) -> Refusal {
        Refusal::WrongStatus {
            transition: self.transition.name(),
            expected,
            found: self.current.status,
        }
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
