//! The restart budget ([`Intensity`]) and its sliding window: a supervisor keeps the instants
//! of its recent restarts, oldest first, and [`note_restart`] says whether one more still fits.
//! Decided without I/O: the caller passes the time.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// The restart budget: at most `max_restarts` restarts within any `period`. One more and the
/// supervisor gives up and escalates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intensity {
    pub max_restarts: u32,
    pub period: Duration,
}

impl Default for Intensity {
    /// 5 restarts in 10 s.
    fn default() -> Self {
        Self {
            max_restarts: 5,
            period: Duration::from_secs(10),
        }
    }
}

/// Records one restart at `now` in `restarts` (the instants still inside the period, oldest
/// first, older ones dropped); false when it is one too many for `intensity`.
pub(super) fn note_restart(
    restarts: &mut VecDeque<Instant>,
    intensity: Intensity,
    now: Instant,
) -> bool {
    restarts.push_back(now);
    while restarts
        .front()
        .is_some_and(|&at| now.duration_since(at) > intensity.period)
    {
        restarts.pop_front();
    }
    restarts.len() <= intensity.max_restarts as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_in_a_second() -> Intensity {
        Intensity {
            max_restarts: 3,
            period: Duration::from_secs(1),
        }
    }

    /// A window holding the whole budget, every restart at `at`.
    fn full_at(at: Instant) -> VecDeque<Instant> {
        let mut restarts = VecDeque::new();
        for _ in 0..3 {
            assert!(note_restart(&mut restarts, three_in_a_second(), at));
        }
        restarts
    }

    #[test]
    fn the_restart_past_the_budget_is_refused() {
        let now = Instant::now();
        let mut restarts = full_at(now);
        assert!(!note_restart(&mut restarts, three_in_a_second(), now));
    }

    #[test]
    fn restarts_older_than_the_period_leave_the_window() {
        let start = Instant::now();
        let mut restarts = full_at(start);
        // exactly one period later the old ones still count (the window is inclusive)
        let at_edge = start + Duration::from_secs(1);
        assert!(!note_restart(&mut restarts, three_in_a_second(), at_edge));
        let later = start + Duration::from_millis(1001);
        assert!(note_restart(&mut restarts, three_in_a_second(), later));
        assert_eq!(restarts.len(), 2);
    }

    #[test]
    fn a_zero_budget_refuses_the_first_restart() {
        let zero = Intensity {
            max_restarts: 0,
            period: Duration::from_secs(1),
        };
        assert!(!note_restart(&mut VecDeque::new(), zero, Instant::now()));
    }

    #[test]
    fn the_default_is_five_in_ten_seconds() {
        assert_eq!(
            Intensity::default(),
            Intensity {
                max_restarts: 5,
                period: Duration::from_secs(10),
            }
        );
    }
}
