//! Spend counters: `spend/{scope}/{window}` for the seat and company scopes over day, week
//! and month windows. A job's charge lands once per share (I3): the run record says which
//! shares landed, and each share's counters move in the same txn as that mark.

use chrono::{DateTime, Datelike, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use crate::record::Usage;
use crate::store::Store;
use crate::transition::Share;
use crate::{Error, Keys};

/// One window's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_micros: u64,
    /// how many job charges were added
    pub charges: u64,
}

impl Counter {
    pub fn plus(mut self, usage: &Usage) -> Self {
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cost_micros += usage.cost_micros;
        self.charges += 1;
        self
    }
}

/// The scope a share is counted under (`seat` names the seat, or for the task share the work
/// item).
pub fn scope(share: Share, seat: &str) -> String {
    match share {
        Share::Seat => format!("seat-{seat}"),
        Share::Company => "company".to_owned(),
        // a work item is the engine's text: named in the key by its digest
        Share::Task => {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(seat.as_bytes());
            let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
            format!("task-{hex}")
        }
    }
}

/// The one window a task's spend is counted in: a task has no day, week or month.
pub const TASK_WINDOW: &str = "total";

/// The day, ISO week and month windows `at` falls in, on UTC's clock.
pub fn windows(at: DateTime<Utc>) -> [String; 3] {
    windows_on(at, FixedOffset::east_opt(0).expect("UTC"))
}

/// The day, ISO week and month windows `at` falls in on the company's clock (`clock`, its
/// offset from UTC): a window turns at the company's midnight.
pub fn windows_on(at: DateTime<Utc>, clock: FixedOffset) -> [String; 3] {
    let at = at.with_timezone(&clock);
    let week = at.iso_week();
    [
        format!("day-{}", at.format("%Y-%m-%d")),
        format!("week-{}-W{:02}", week.year(), week.week()),
        format!("month-{}", at.format("%Y-%m")),
    ]
}

/// Reads one window's counter with its revision (0 when absent).
pub async fn read(
    store: &dyn Store,
    keys: &Keys,
    scope: &str,
    window: &str,
) -> Result<(Counter, i64), Error> {
    let key = keys.spend(scope, window);
    match store.get(&key).await? {
        None => Ok((Counter::default(), 0)),
        Some(kv) => {
            let counter = serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
                key,
                message: error.to_string(),
            })?;
            Ok((counter, kv.mod_revision))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn windows_name_day_iso_week_and_month() {
        let at = Utc
            .with_ymd_and_hms(2026, 11, 29, 6, 0, 0)
            .single()
            .expect("valid");
        assert_eq!(
            windows(at),
            ["day-2026-11-29", "week-2026-W48", "month-2026-11"]
        );
    }
}
