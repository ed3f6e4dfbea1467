//! Budgets as the lifecycle applies them (the spec's "Budgets", lines 551–560; the caps are
//! `company.budgets`). A coding run is post-charged, so the caps refuse what comes next:
//!
//! - the pre-flight floor: a launch whose seat has fewer tokens left than the floor (2,000) in
//!   any window, its own or the company's, is refused (class `budget`), and so is one whose
//!   budget could not be read — launching on an unknown budget is how a company finds its
//!   ceiling by spending past it;
//! - the budget park: while a seat's budget refuses, its inbox offers nothing — a reply to its
//!   parked question, a delivery — and holds it until the window turns (or a reload raises
//!   the cap), then offers it;
//! - after a charge, a counter past its cap is said (`sandbox_spend_over_budget`); the charge
//!   stands, recorded in full.
//!
//! Layout: the headroom of a seat (its tightest window) → the floor → the park → the charge's
//! after-note.

use chrono::{DateTime, Datelike, Duration as Days, FixedOffset, NaiveTime, TimeZone, Utc};
use tracing::{info, warn};

use boxfleet_cluster::spend;
use boxfleet_config::budget::Caps;

use super::Coordinator;
use super::error::Error;

/// The window with the least left, among every capped window of the seat's and the
/// company's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightest {
    /// `seat eng` or `the company`
    pub scope: String,
    /// `day`, `week` or `month`
    pub kind: &'static str,
    pub used: u64,
    pub cap: u64,
    /// when the window turns over, on the company's clock
    pub turns_at: DateTime<FixedOffset>,
}

impl Tightest {
    pub fn remaining(&self) -> u64 {
        self.cap.saturating_sub(self.used)
    }
}

impl std::fmt::Display for Tightest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} has {} tokens left in its {} window ({} of {} used; it turns at {})",
            self.scope,
            self.remaining(),
            self.kind,
            self.used,
            self.cap,
            self.turns_at.to_rfc3339()
        )
    }
}

/// When the window of `kind` that `now` is in turns over, on `clock`.
pub fn turns_at(kind: &str, now: DateTime<Utc>, clock: FixedOffset) -> DateTime<FixedOffset> {
    let local = now.with_timezone(&clock).date_naive();
    let next = match kind {
        "day" => local + Days::days(1),
        "week" => local + Days::days(7 - i64::from(local.weekday().num_days_from_monday())),
        _ => {
            let (year, month) = if local.month() == 12 {
                (local.year() + 1, 1)
            } else {
                (local.year(), local.month() + 1)
            };
            local
                .with_day(1)
                .and_then(|d| d.with_year(year))
                .and_then(|d| d.with_month(month))
                .unwrap_or(local)
        }
    };
    clock
        .from_local_datetime(&next.and_time(NaiveTime::MIN))
        .single()
        .unwrap_or_else(|| now.with_timezone(&clock))
}

impl Coordinator {
    /// The tightest capped window of `seat`'s and the company's, or `None` when no cap is
    /// written for either. A counter that cannot be read is an error.
    pub async fn tightest_window(
        &self,
        seat: &str,
    ) -> Result<Option<Tightest>, boxfleet_cluster::Error> {
        let company = self.company();
        let budgets = &company.budgets;
        let clock = budgets.offset();
        let now = boxfleet_cluster::clock::now();
        let windows = spend::windows_on(now, clock);
        let scopes: [(String, String, Caps); 2] = [
            (
                spend::scope(boxfleet_cluster::transition::Share::Seat, seat),
                format!("seat {seat}"),
                budgets.caps_for(seat),
            ),
            (
                "company".to_owned(),
                "the company".to_owned(),
                budgets.company,
            ),
        ];
        let mut tightest: Option<Tightest> = None;
        for (scope, name, caps) in scopes {
            for (kind, cap) in caps.written() {
                let window = match kind {
                    "day" => &windows[0],
                    "week" => &windows[1],
                    _ => &windows[2],
                };
                let (counter, _) =
                    spend::read(self.store.as_ref(), &self.keys, &scope, window).await?;
                let candidate = Tightest {
                    scope: name.clone(),
                    kind,
                    used: counter.input_tokens + counter.output_tokens,
                    cap,
                    turns_at: turns_at(kind, now, clock),
                };
                if tightest
                    .as_ref()
                    .is_none_or(|t| candidate.remaining() < t.remaining())
                {
                    tightest = Some(candidate);
                }
            }
        }
        Ok(tightest)
    }

    /// The pre-flight floor: refused (`budget`) when the seat's tightest window has less left
    /// than the floor, or when its budget could not be read.
    pub(super) async fn budget_floor(&self, seat: &str) -> Result<(), Error> {
        let company = self.company();
        if !company.budgets.any() {
            return Ok(());
        }
        let floor = company.budgets.floor();
        match self.tightest_window(seat).await {
            Err(error) => Err(Error::Budget(format!(
                "seat {seat}'s budget could not be read ({error}), and a launch on an unknown budget is refused: try again once the store answers"
            ))),
            Ok(Some(tight)) if tight.remaining() < floor => Err(Error::Budget(format!(
                "{tight}, under the {floor} a coding run needs to start (company.budgets.min_tokens): launch again after the window turns, or raise the cap"
            ))),
            Ok(_) => Ok(()),
        }
    }

    /// The budget park: whether `seat`'s budget refuses now (below the floor, or unreadable),
    /// so its inbox holds what would resume it. Said once as it begins and as it ends.
    pub(super) async fn budget_parked(&self, seat: &str) -> bool {
        let refusing = self.budget_floor(seat).await;
        let mut held = self.budget_held.lock().unwrap_or_else(|p| p.into_inner());
        match refusing {
            Err(why) => {
                if held.insert(seat.to_owned()) {
                    warn!(seat, %why, "sandbox_budget_park");
                }
                true
            }
            Ok(()) => {
                if held.remove(seat) {
                    info!(seat, "sandbox_budget_park_lifted");
                }
                false
            }
        }
    }

    /// The seats whose inbox the budget park holds (pumped again after a reload).
    pub fn budget_parked_seats(&self) -> Vec<String> {
        let held = self.budget_held.lock().unwrap_or_else(|p| p.into_inner());
        held.iter().cloned().collect()
    }

    /// After a charge: a counter the run took past its cap is said; the charge stands.
    pub(super) async fn note_over_budget(&self, seat: &str, turn_id: &str) {
        if !self.company().budgets.any() {
            return;
        }
        match self.tightest_window(seat).await {
            Ok(Some(tight)) if tight.used >= tight.cap => {
                warn!(seat, turn_id, scope = %tight.scope, window = tight.kind, used = tight.used, cap = tight.cap, "sandbox_spend_over_budget");
            }
            Ok(_) => {}
            Err(error) => warn!(seat, turn_id, %error, "sandbox_budget_unread"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_turn_at_the_companys_midnight() {
        let clock = FixedOffset::west_opt(5 * 3600).expect("offset");
        // 2026-12-03 (a Thursday) 03:00 UTC is still 2026-12-02 22:00 on the company's clock
        let now = Utc
            .with_ymd_and_hms(2026, 12, 3, 3, 0, 0)
            .single()
            .expect("time");
        assert_eq!(
            turns_at("day", now, clock).to_rfc3339(),
            "2026-12-03T00:00:00-05:00"
        );
        assert_eq!(
            turns_at("week", now, clock).to_rfc3339(),
            "2026-12-07T00:00:00-05:00"
        );
        assert_eq!(
            turns_at("month", now, clock).to_rfc3339(),
            "2027-01-01T00:00:00-05:00"
        );
        assert_eq!(spend::windows_on(now, clock)[0], "day-2026-12-02");
    }
}
