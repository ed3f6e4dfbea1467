//! What waits for an external engine (DESIGN §8.2): the work of seats whose engine is not
//! attached, or whose stream is full. Bounded by what it holds: one turn per seat (a seat has
//! one turn out at a time), one resume per run, and at most [`MAX_WAITING_NOTICES`] notices
//! (the oldest dropped first, logged; a notice's durable record is the run's event).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use boxfleet_actors::lifecycle::EngineDown;
use tracing::{info, warn};

/// Notices (a run ended, a job parked) kept for an engine that is not there.
pub const MAX_WAITING_NOTICES: usize = 1024;

/// How often what waits is offered again while work keeps arriving.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct Held {
    turns: HashMap<String, EngineDown>,
    resumes: HashMap<String, EngineDown>,
    notices: VecDeque<EngineDown>,
    last_sweep: Option<Instant>,
}

/// Work waiting for an engine.
#[derive(Debug, Default)]
pub struct Waiting {
    held: Mutex<Held>,
}

impl Waiting {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `work` until an engine can take it.
    pub fn add(&self, work: EngineDown) {
        let mut held = self.held();
        match work {
            EngineDown::Turn { ref seat, .. } => {
                info!(seat, "engine_turn_waiting");
                held.turns.insert(seat.clone(), work);
            }
            EngineDown::Resume(ref resume) => {
                info!(seat = %resume.seat, turn_id = %resume.turn_id, "engine_resume_waiting");
                held.resumes.insert(resume.turn_id.clone(), work);
            }
            EngineDown::Ended(_) | EngineDown::Parked(_) => {
                if held.notices.len() >= MAX_WAITING_NOTICES
                    && let Some(dropped) = held.notices.pop_front()
                {
                    warn!(
                        seat = dropped.seat(),
                        bound = MAX_WAITING_NOTICES,
                        "engine_notice_dropped"
                    );
                }
                held.notices.push_back(work);
            }
        }
    }

    /// Everything that waits, notices first (oldest first), then resumes, then turns.
    pub fn take_all(&self) -> Vec<EngineDown> {
        let mut held = self.held();
        held.last_sweep = Some(Instant::now());
        let mut all: Vec<EngineDown> = held.notices.drain(..).collect();
        all.extend(held.resumes.drain().map(|(_, work)| work));
        all.extend(held.turns.drain().map(|(_, work)| work));
        all
    }

    pub fn len(&self) -> usize {
        let held = self.held();
        held.turns.len() + held.resumes.len() + held.notices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether what waits is due to be offered again (at most every [`SWEEP_EVERY`]).
    pub fn sweep_due(&self) -> bool {
        let held = self.held();
        let waiting =
            !(held.turns.is_empty() && held.resumes.is_empty() && held.notices.is_empty());
        waiting && held.last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boxfleet_actors::lifecycle::{Ended, Parked};

    fn notice(n: usize) -> EngineDown {
        EngineDown::Ended(Box::new(Ended {
            seat: "eng".into(),
            turn_id: format!("turn-{n}"),
            launch_id: "launch-1".into(),
            reason: "collect_unreachable".into(),
            detail: String::new(),
        }))
    }

    #[test]
    fn notices_are_bounded_and_the_oldest_go_first() {
        let waiting = Waiting::default();
        for n in 0..MAX_WAITING_NOTICES + 5 {
            waiting.add(notice(n));
        }
        assert_eq!(waiting.len(), MAX_WAITING_NOTICES);
        let all = waiting.take_all();
        assert_eq!(all.first(), Some(&notice(5)));
        assert!(waiting.is_empty());
    }

    #[test]
    fn a_seat_keeps_one_waiting_turn_and_a_run_one_resume() {
        let waiting = Waiting::default();
        let parked = |turn: &str| {
            EngineDown::Parked(Box::new(Parked {
                seat: "eng".into(),
                turn_id: turn.into(),
                launch_id: "l".into(),
                question: "q".into(),
                audience: "requester".into(),
            }))
        };
        waiting.add(parked("a"));
        assert!(waiting.sweep_due());
        let _ = waiting.take_all();
        assert!(!waiting.sweep_due(), "nothing waits");
    }
}
