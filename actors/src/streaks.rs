//! The waiter's gone-detection (spec, "A vanished sandbox can't orphan a run"): a run whose box
//! cannot be reached on consecutive polls is counted here, and once [`GONE_AFTER_FAILURES`]
//! failures span [`GONE_AFTER`] the box is declared gone and the completion fired anyway; the
//! collection then ends the run `collect_unreachable` past its own allowance, rather than a
//! dead box being polled for ever.
//!
//! The same streak rate-limits the warning: its first failure is logged
//! (`sandbox_connect_failed`), then at most one line per [`WARN_EVERY`] carrying how many
//! identical failures it stands for, so a box down for an hour logs a line a minute, not one a
//! tick. A poll that reaches the box ends the streak.
//!
//! The count is this node's, in memory: the spec's streak is the waiter's own, and a restart
//! starts it again (the collection's allowance, counted on the record, is what carries over).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Consecutive failed polls before a box may be declared gone.
pub const GONE_AFTER_FAILURES: u32 = 2;
/// How long those failures must span.
pub const GONE_AFTER: Duration = Duration::from_secs(60);
/// At most one warning line per streak this often.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// What one more failed poll comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// failed polls in this streak, this one included
    pub failures: u32,
    /// how long since the streak's first failure
    pub spanned: Duration,
    /// whether this failure is logged (the first, then one per [`WARN_EVERY`])
    pub log: bool,
    /// identical failures since the last line logged, this one included
    pub repeated: u32,
    /// whether the box is gone by the streak (and the completion fires)
    pub gone: bool,
    /// whether this is the failure that first declared it gone (logged once)
    pub newly_gone: bool,
}

#[derive(Debug)]
struct Streak {
    failures: u32,
    first_at: Instant,
    logged_at: Instant,
    unlogged: u32,
    gone: bool,
}

/// The poll-failure streaks of the runs this node polls, by turn.
#[derive(Debug, Default)]
pub struct Streaks {
    by_turn: Mutex<BTreeMap<String, Streak>>,
}

impl Streaks {
    /// One more failed poll of `turn_id` at `now`.
    pub fn failed(&self, turn_id: &str, now: Instant) -> Failure {
        let mut by_turn = self.by_turn.lock().unwrap_or_else(|p| p.into_inner());
        let streak = by_turn.entry(turn_id.to_owned()).or_insert(Streak {
            failures: 0,
            first_at: now,
            logged_at: now,
            unlogged: 0,
            gone: false,
        });
        streak.failures += 1;
        streak.unlogged += 1;
        let spanned = now.saturating_duration_since(streak.first_at);
        let log =
            streak.failures == 1 || now.saturating_duration_since(streak.logged_at) >= WARN_EVERY;
        let repeated = streak.unlogged;
        if log {
            streak.logged_at = now;
            streak.unlogged = 0;
        }
        let gone = streak.failures >= GONE_AFTER_FAILURES && spanned >= GONE_AFTER;
        let newly_gone = gone && !streak.gone;
        streak.gone |= gone;
        Failure {
            failures: streak.failures,
            spanned,
            log,
            repeated,
            gone,
            newly_gone,
        }
    }

    /// A poll of `turn_id` reached its box: the streak ends.
    pub fn reached(&self, turn_id: &str) {
        self.by_turn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(turn_id);
    }

    /// Forgets the runs no longer polled here (settled, parked, moved).
    pub fn keep_only(&self, polled: &std::collections::BTreeSet<String>) {
        self.by_turn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|turn_id, _| polled.contains(turn_id));
    }
}

/// Whether a warning keyed `key` may be logged now: at most once per `every` per key, so a
/// condition seen on every tick logs a line a minute rather than one a tick.
pub fn once_per(key: &str, every: Duration) -> bool {
    once_per_at(key, every, Instant::now())
}

fn once_per_at(key: &str, every: Duration, now: Instant) -> bool {
    static LAST: Mutex<Option<BTreeMap<String, Instant>>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let last = last.get_or_insert_with(BTreeMap::new);
    if last.len() > 4096 {
        last.retain(|_, at| now.saturating_duration_since(*at) < every);
    }
    match last.get(key) {
        Some(at) if now.saturating_duration_since(*at) < every => false,
        _ => {
            last.insert(key.to_owned(), now);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_failures_spanning_a_minute_declare_the_box_gone_and_not_before() {
        let streaks = Streaks::default();
        let start = Instant::now();
        let first = streaks.failed("t", start);
        assert!(first.log && !first.gone, "{first:?}");
        for second in 5..60 {
            let at = start + Duration::from_secs(second);
            let failure = streaks.failed("t", at);
            assert!(!failure.gone, "gone after {second}s: {failure:?}");
            assert!(
                !failure.log,
                "a repeat inside the minute is not logged again"
            );
        }
        let minute = streaks.failed("t", start + Duration::from_secs(60));
        assert!(minute.gone && minute.newly_gone && minute.log, "{minute:?}");
        assert_eq!(
            minute.repeated, 56,
            "the line stands for the failures it held back"
        );
        let later = streaks.failed("t", start + Duration::from_secs(65));
        assert!(later.gone && !later.newly_gone, "declared once: {later:?}");
    }

    #[test]
    fn a_poll_that_reaches_the_box_ends_the_streak() {
        let streaks = Streaks::default();
        let start = Instant::now();
        streaks.failed("t", start);
        streaks.reached("t");
        let after = streaks.failed("t", start + Duration::from_secs(90));
        assert_eq!(after.failures, 1, "a fresh streak");
        assert!(!after.gone);
    }

    #[test]
    fn a_repeated_warning_is_logged_once_a_minute() {
        let start = Instant::now();
        assert!(once_per_at("k", WARN_EVERY, start));
        assert!(!once_per_at(
            "k",
            WARN_EVERY,
            start + Duration::from_secs(59)
        ));
        assert!(once_per_at("other", WARN_EVERY, start), "keyed");
        assert!(once_per_at("k", WARN_EVERY, start + WARN_EVERY));
    }

    #[test]
    fn one_failure_however_old_is_not_a_streak() {
        let streaks = Streaks::default();
        let start = Instant::now();
        let only = streaks.failed("t", start);
        assert!(!only.gone);
        streaks.keep_only(&Default::default());
        let again = streaks.failed("t", start + Duration::from_secs(600));
        assert_eq!(again.failures, 1, "a run no longer polled was forgotten");
    }
}
