//! Letting a box go that this node cannot reach: a local box lives on one host, and a run that
//! moved to a node on another host (its seat handed over after its node died) cannot kill it
//! there — nor read its absence from this node's disk as the box being gone, which would leave
//! it running (paused, billed, holding its checkout) and named by nothing. So the record stops
//! naming it and, in the same fenced write, names it under `stranded/{host}/` (I8); a node on
//! that host kills what is named there and forgets it (the waiter's tick).
//!
//! Decisions: `transition::ending` (strand_box). Store: `boxfleet_cluster::stranded`.

use boxfleet_cluster::record::RunRecord;
use boxfleet_cluster::runs::RunError;
use boxfleet_cluster::stranded;
use boxfleet_cluster::transition::{Fence, Refusal, Transition};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::error::Error;
use crate::boxes::BoxOp;

/// How a box a run let go of was reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimed {
    /// killed here; the record still names it until the caller's transition says so
    Killed,
    /// named for its host's nodes to kill; the record already stopped naming it
    Stranded,
}

impl Coordinator {
    /// Reclaims the box `sandbox_id` a run names (as its box, or as the one it owes a kill):
    /// killed here when this node reaches it, else stranded for its host.
    pub(super) async fn reclaim_box(
        &self,
        fence: &Fence,
        run: &RunRecord,
        sandbox_id: &str,
    ) -> Result<Reclaimed, Error> {
        if self.access.reachable(run).is_ok() {
            self.access
                .run_box_op(run, sandbox_id, BoxOp::Kill)
                .await
                .inspect_err(
                    |error| warn!(turn_id = %run.turn_id, sandbox_id, %error, "sandbox_kill_failed"),
                )?;
            return Ok(Reclaimed::Killed);
        }
        self.strand(fence, run, sandbox_id).await?;
        Ok(Reclaimed::Stranded)
    }

    /// Names a box on another host for a node there to kill, as the record stops naming it.
    pub(super) async fn strand(
        &self,
        fence: &Fence,
        run: &RunRecord,
        sandbox_id: &str,
    ) -> Result<(), Error> {
        let strand = Transition::StrandBox {
            sandbox_id: sandbox_id.to_owned(),
        };
        match self.runs.apply(fence, &run.turn_id, strand).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
            Err(error) => return Err(error.into()),
        }
        crash::point(crash::STRAND_AFTER_NAMED);
        info!(
            turn_id = %run.turn_id,
            sandbox_id,
            host = run.host.as_deref().unwrap_or_default(),
            node_host = %self.access.host,
            "sandbox_box_stranded"
        );
        Ok(())
    }

    /// Kills the boxes stranded on this node's host and forgets each one killed. A kill that
    /// fails keeps its entry for the next tick. The number killed.
    pub async fn kill_stranded_boxes(&self) -> Result<usize, Error> {
        let host = self.access.host.as_str();
        let owed = stranded::list(self.store.as_ref(), &self.keys, host).await?;
        let mut killed = 0;
        for (stranded, read_at) in owed {
            let sandbox_id = stranded.sandbox_id.as_str();
            let provider = match self
                .access
                .provider_at(&stranded.placement, stranded.boxes_dir.as_deref())
            {
                Ok(provider) => provider,
                Err(error) => {
                    warn!(sandbox_id, %error, "sandbox_stranded_box_unkillable");
                    continue;
                }
            };
            if let Err(error) = self.access.box_op(&provider, sandbox_id, BoxOp::Kill).await {
                warn!(sandbox_id, turn_id = %stranded.turn_id, %error, "sandbox_kill_failed");
                continue;
            }
            crash::point(crash::STRAND_AFTER_KILL);
            stranded::forget(self.store.as_ref(), &self.keys, &stranded, read_at).await?;
            info!(sandbox_id, turn_id = %stranded.turn_id, host, "sandbox_stranded_box_killed");
            killed += 1;
        }
        Ok(killed)
    }
}
