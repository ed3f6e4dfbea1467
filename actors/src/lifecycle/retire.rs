//! The removed seat (the spec's `sandbox_run_failed` with reason `seat_removed`): a seat this
//! node holds that is no longer one of the company's agent seats — removed from the chart, or
//! made a person's — is given a retirement grace ([`RETIREMENT_GRACE`], 24 hours, from the
//! first placement pass that found it missing, recorded in the store so a restart or another
//! holder does not start it again). A seat made an agent's again within the grace is kept,
//! its mark cleared. Past the grace its runs are ended `seat_removed`, each announced once, and
//! its boxes reclaimed. Its mail is kept, unworked while the seat is not an agent's (see the
//! pump), so nothing is lost should the seat come back.
//!
//! Decisions: `transition::ending` (decide_ending).

use std::time::Duration;

use boxfleet_cluster::record::{EndingReason, Status};
use boxfleet_cluster::store::{Compare, Op, Txn};
use boxfleet_cluster::transition::{EndingGuard, Fence};
use chrono::{DateTime, Utc};
use tracing::{info, warn};

use super::Coordinator;
use super::error::Error;

/// How long a seat that left the company's agent seats keeps its runs.
pub const RETIREMENT_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// The grace in force: [`RETIREMENT_GRACE`], or `BOXFLEET_SEAT_RETIREMENT_GRACE_SECONDS` (a
/// knob for tests and for operators who want it shorter).
fn grace() -> Duration {
    std::env::var("BOXFLEET_SEAT_RETIREMENT_GRACE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(RETIREMENT_GRACE, Duration::from_secs)
}

/// How often the placement pass looks for removed seats: every minute, or twice within a
/// shorter grace.
fn check_every() -> Duration {
    (grace() / 2).min(Duration::from_secs(60))
}

impl Coordinator {
    /// Whether the placement pass looks for removed seats now (and notes that it does).
    pub(super) fn retirement_check_due(&self) -> bool {
        let mut checked = self
            .retirement_checked
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        if checked.is_some_and(|at| now.duration_since(at) < check_every()) {
            return false;
        }
        *checked = Some(now);
        true
    }

    /// Whether `seat` takes work: one of the company's agent seats.
    pub(super) fn seat_is_agents(&self, seat: &str) -> bool {
        self.company().is_agent_seat(seat)
    }

    /// The placement pass's look at a seat this node holds: a removed seat's retirement grace
    /// is started, or, once it has passed, its runs are ended `seat_removed`.
    pub async fn retire_if_removed(&self, fence: &Fence) -> Result<(), Error> {
        let seat = fence.seat.as_str();
        let key = self.keys.seat_retiring(seat);
        if self.seat_is_agents(seat) {
            if self.store.get(&key).await?.is_some() {
                self.store
                    .txn(Txn::new().and_then([Op::delete(&key)]))
                    .await?;
                info!(seat, "seat_retirement_cancelled");
            }
            return Ok(());
        }
        let now = boxfleet_cluster::clock::now();
        let since = match self.store.get(&key).await? {
            Some(kv) => std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map_or(now, |at| at.with_timezone(&Utc)),
            None => {
                let txn = Txn::new()
                    .when([Compare::absent(&key)])
                    .and_then([Op::put(&key, now.to_rfc3339().into_bytes())]);
                self.store.txn(txn).await?;
                warn!(seat, grace_seconds = grace().as_secs(), "seat_retiring");
                now
            }
        };
        if (now - since).to_std().unwrap_or_default() < grace() {
            return Ok(());
        }
        for run in self.runs.list_by_seat(seat).await? {
            if run.record.status == Status::Ending {
                continue;
            }
            let detail = format!(
                "seat {seat} left the company's agent seats (removed from the chart, or made a \
                 person's) and was not made an agent's again within its retirement grace"
            );
            self.end_run(
                fence,
                &run.record.turn_id,
                EndingReason::SeatRemoved,
                &detail,
                EndingGuard::Any,
            )
            .await;
        }
        Ok(())
    }
}
