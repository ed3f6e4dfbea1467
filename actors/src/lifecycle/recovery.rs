//! The recovery pass (the spec's "Recovery"; DESIGN §6 I9, I12): on acquiring a seat (boot
//! included) every run of the seat is fenced to the new lease first — the reap's fence — and
//! then each is taken over as its status says: a launch left half-open is reaped as
//! `abandoned_tail`; a claim whose node stopped before it settled is reaped, unless no turn
//! took what it claimed — an answer, or a finished job's findings (boxfleet's extension of the
//! spec's pass, I12) — which is revived within its bounds; an owed answer is resumed; a decided
//! ending is finished; a parked run's owed reply copies are published. Running jobs (a revived
//! completion's among them) are left to the poll, which the acquire triggers at once.
//!
//! Decisions: `transition::recovery` (fence_run), `transition::answer` (revive),
//! `transition::collect` (revive_completion).

use boxfleet_cluster::record::{ClaimKind, EndingReason, Status};
use boxfleet_cluster::runs::RunError;
use boxfleet_cluster::transition::{EndingGuard, Fence, Refusal, Transition};
use tracing::{info, warn};

use crate::boxes::BoxOp;
use crate::crash;
use crate::ports::BoxError;

use super::Coordinator;
use super::error::Error;

impl Coordinator {
    /// The recovery pass on acquiring a seat (boot included): fence every run to this lease
    /// first, then take each over as its status says.
    pub async fn recover(&self, fence: &Fence) -> Result<(), Error> {
        let span = crate::spans::open(
            crate::spans::Op::Recover,
            crate::spans::Ids {
                node: &self.node,
                seat: &fence.seat,
                ..crate::spans::Ids::default()
            },
        );
        tracing::Instrument::instrument(Box::pin(self.recover_fenced(fence)), span).await
    }

    async fn recover_fenced(&self, fence: &Fence) -> Result<(), Error> {
        let runs = self
            .runs
            .fence_seat_runs_for(fence, Some(&self.incarnation))
            .await?;
        if !runs.is_empty() {
            crash::point(crash::RECOVERY_AFTER_FENCE);
            // a test failpoint: the first pass of this process fails part way, after its fence
            if crate::workers::failpoint_once("recovery-fails-once") {
                return Err(Error::Store(boxfleet_cluster::Error::Unavailable(
                    "failpoint recovery-fails-once".into(),
                )));
            }
        }
        // the seat's awaiting count, which decides a delivery whose lookup cannot be made
        let awaiting = runs
            .iter()
            .filter(|run| {
                matches!(
                    run.record.status,
                    Status::AwaitingClarification | Status::Reseed
                )
            })
            .count();
        self.offers
            .seed_awaiting(&fence.seat, u32::try_from(awaiting).unwrap_or(u32::MAX));
        for run in runs {
            let record = &run.record;
            let turn_id = record.turn_id.as_str();
            if record.status == Status::Launching
                && self.work.launch_in_flight(&record.launch_id, fence.epoch)
            {
                // this node holds the seat under the same lease and the launch is running
                // here now (the pass re-runs as the seat's actor restarts): not abandoned
                info!(turn_id, launch_id = %record.launch_id, "sandbox_launch_in_flight_kept");
                continue;
            }
            match record.status {
                // a relaunch that died before its commit still carries its answer: re-seeded
                Status::Launching if record.answer.is_some() => {
                    self.kill_unnamed_boxes(record).await?;
                    self.revert_relaunch(fence, record).await?;
                }
                Status::Launching => {
                    self.kill_unnamed_boxes(record).await?;
                    self.end_run(
                        fence,
                        turn_id,
                        EndingReason::AbandonedTail,
                        "the launch's node stopped before the conversation was written",
                        EndingGuard::Any,
                    )
                    .await;
                }
                Status::Resumed => match record.claim.as_ref().map(|c| c.kind) {
                    Some(ClaimKind::Answer) if !record.answer_taken() => {
                        self.revive_answer(fence, turn_id).await?;
                    }
                    Some(ClaimKind::Completion) if !record.completion_taken() => {
                        self.revive_completion(fence, turn_id).await?;
                    }
                    _ => {
                        self.end_run(
                            fence,
                            turn_id,
                            EndingReason::AbandonedTail,
                            "the claim's node stopped before it settled",
                            EndingGuard::Any,
                        )
                        .await;
                    }
                },
                Status::Answered => self.drive_answer(fence, turn_id).await?,
                Status::Ending => self.finish_ending(fence, turn_id).await?,
                Status::AwaitingClarification | Status::Reseed => {
                    self.publish_hand_backs(fence, record).await?;
                }
                Status::Running => {}
            }
        }
        Ok(())
    }

    /// A launch whose node stopped before the box's id reached the row, on a backend that
    /// names its boxes itself: the boxes labelled with the launch are killed before the row is
    /// reaped or reverted, so nothing it started runs unnamed (I13). A lookup that fails keeps
    /// the row for the next recovery pass.
    pub(super) async fn kill_unnamed_boxes(
        &self,
        record: &boxfleet_cluster::record::RunRecord,
    ) -> Result<(), Error> {
        if record.sandbox_id.is_some() {
            return Ok(());
        }
        let turn_id = record.turn_id.as_str();
        let provider = self.access.provider_of(record)?;
        let found = provider
            .find_by_launch(turn_id, &record.launch_id)
            .await
            .inspect_err(|error| warn!(turn_id, %error, "sandbox_launch_box_lookup_failed"))?;
        for sandbox_id in found {
            provider
                .kill(&sandbox_id)
                .await
                .inspect_err(|error| warn!(turn_id, sandbox_id, %error, "sandbox_kill_failed"))?;
            info!(turn_id, sandbox_id, launch_id = %record.launch_id, "sandbox_unnamed_box_killed");
        }
        Ok(())
    }

    /// A relaunch whose node stopped before its conversation committed goes back to its
    /// answer, exactly as the run was before it, within the revival bounds; past them the run
    /// is reaped (I12). In the box the relaunch reused, what it started is stopped (by its
    /// launch's marker: the row may not name the job yet) and the answer reruns there; a box
    /// the relaunch made (a re-seed's) is killed, and a box gone or out of reach leaves the
    /// answer to re-seed.
    pub(super) async fn revert_relaunch(
        &self,
        fence: &Fence,
        record: &boxfleet_cluster::record::RunRecord,
    ) -> Result<(), Error> {
        let turn_id = record.turn_id.as_str();
        let reused = record
            .relaunched_from
            .as_ref()
            .and_then(|from| from.sandbox_id.as_deref());
        let keep_box = match record.sandbox_id.as_deref() {
            Some(sandbox_id)
                if Some(sandbox_id) == reused && self.access.reachable(record).is_ok() =>
            {
                self.stop_relaunch_in(record, sandbox_id).await?
            }
            Some(sandbox_id) => {
                self.reclaim_box(fence, record, sandbox_id).await?;
                false
            }
            None => {
                self.kill_unnamed_boxes(record).await?;
                false
            }
        };
        let revert = Transition::RevertRelaunch {
            launch_id: record.launch_id.clone(),
            keep_box,
        };
        let revival = Revival {
            revived: "sandbox_relaunch_reverted",
            spent: "sandbox_relaunch_not_reverted",
            reaped_because: "the answer's relaunch took its node down too often",
        };
        if self.revive_or_reap(fence, turn_id, revert, revival).await? {
            self.drive_answer(fence, turn_id).await?;
        }
        Ok(())
    }

    /// Stops what a dead relaunch started in the box it reused: every process its launch
    /// marked (the job its row names, when it got that far, among them). `true` when the box
    /// is kept for the answer's rerun; `false` when the box is gone (the answer re-seeds). A
    /// box that fails to answer keeps the row for the next pass.
    async fn stop_relaunch_in(
        &self,
        record: &boxfleet_cluster::record::RunRecord,
        sandbox_id: &str,
    ) -> Result<bool, Error> {
        let turn_id = record.turn_id.as_str();
        let provider = self.access.provider_of(record)?;
        let sandbox = match self
            .access
            .box_handle(&provider, sandbox_id, BoxOp::Connect)
            .await
        {
            Ok(sandbox) => sandbox,
            Err(BoxError::Gone(_)) => return Ok(false),
            Err(error) => {
                warn!(turn_id, sandbox_id, %error, "sandbox_relaunch_stop_failed");
                return Err(error.into());
            }
        };
        match sandbox.kill_launch(&record.launch_id).await {
            Ok(killed) => {
                info!(
                    turn_id,
                    sandbox_id,
                    launch_id = %record.launch_id,
                    killed,
                    "sandbox_relaunch_stopped"
                );
                Ok(true)
            }
            Err(BoxError::Gone(_)) => Ok(false),
            Err(error) => {
                warn!(turn_id, sandbox_id, %error, "sandbox_relaunch_stop_failed");
                Err(error.into())
            }
        }
    }

    /// A completion's claim whose node stopped before a turn took the findings: the run goes
    /// back to `running` and the next poll collects it again (charged and published once each,
    /// by its launch id), within the revival bounds; past them the run is reaped (I12).
    async fn revive_completion(&self, fence: &Fence, turn_id: &str) -> Result<(), Error> {
        let revival = Revival {
            revived: "sandbox_completion_revived",
            spent: "sandbox_completion_not_revived",
            reaped_because: "the completion's collection took its node down too often",
        };
        self.revive_or_reap(fence, turn_id, Transition::Revive, revival)
            .await?;
        Ok(())
    }

    /// An answer's claim whose node stopped before a turn took it: given back to the answer
    /// and resumed again, within the revival bounds; past them the run is reaped.
    async fn revive_answer(&self, fence: &Fence, turn_id: &str) -> Result<(), Error> {
        let revival = Revival {
            revived: "sandbox_answer_revived",
            spent: "sandbox_answer_not_revived",
            reaped_because: "the answer's resume took its node down too often",
        };
        if self
            .revive_or_reap(fence, turn_id, Transition::Revive, revival)
            .await?
        {
            self.drive_answer(fence, turn_id).await?;
        }
        Ok(())
    }

    /// Applies a revival (`Revive`, `RevertRelaunch`); a run whose revivals are spent is
    /// reaped as `abandoned_tail`. `true` when the run was revived.
    async fn revive_or_reap(
        &self,
        fence: &Fence,
        turn_id: &str,
        transition: Transition,
        revival: Revival,
    ) -> Result<bool, Error> {
        match self.runs.apply(fence, turn_id, transition).await {
            Ok(_) => {
                info!(turn_id, "{}", revival.revived);
                crash::point(crash::RECOVERY_AFTER_REVIVE);
                Ok(true)
            }
            Err(RunError::Refused(Refusal::RevivalsSpent { lost_claims })) => {
                info!(turn_id, lost_claims, "{}", revival.spent);
                self.end_run(
                    fence,
                    turn_id,
                    EndingReason::AbandonedTail,
                    revival.reaped_because,
                    EndingGuard::Any,
                )
                .await;
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// What a revival is called in the log, and why a run past its revivals is reaped.
struct Revival {
    revived: &'static str,
    spent: &'static str,
    reaped_because: &'static str,
}
