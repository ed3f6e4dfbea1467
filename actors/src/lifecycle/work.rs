//! Work in progress on a seat: the launches, collections and answers a graceful release waits
//! for before it hands the seat over. A step counts itself with [`WorkInProgress::start`] and
//! is counted until its [`WorkGuard`] drops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tracing::warn;

/// The counts, by seat.
#[derive(Debug, Default)]
pub(crate) struct WorkInProgress {
    working: Arc<Mutex<HashMap<String, usize>>>,
    settled: Arc<tokio::sync::Notify>,
}

/// A launch, collection or answer in progress on a seat, counted until it drops.
#[derive(Debug)]
pub struct WorkGuard {
    working: Arc<Mutex<HashMap<String, usize>>>,
    settled: Arc<tokio::sync::Notify>,
    seat: String,
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        let mut working = self.working.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = working.get_mut(&self.seat) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                working.remove(&self.seat);
            }
        }
        drop(working);
        self.settled.notify_waiters();
    }
}

impl WorkInProgress {
    /// Counts one piece of work on `seat` until the guard drops.
    pub fn start(&self, seat: &str) -> WorkGuard {
        *self
            .working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(seat.to_owned())
            .or_default() += 1;
        WorkGuard {
            working: self.working.clone(),
            settled: self.settled.clone(),
            seat: seat.to_owned(),
        }
    }

    /// How many launches, collections and answers are in progress on `seat`.
    pub fn count(&self, seat: &str) -> usize {
        self.working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(seat)
            .copied()
            .unwrap_or(0)
    }

    /// Waits until nothing is in progress on `seat`, at most until `deadline`; past it the
    /// seat is logged as released unsettled.
    pub async fn settle(&self, seat: &str, deadline: tokio::time::Instant) {
        loop {
            let settled = self.settled.notified();
            if self.count(seat) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                warn!(seat, "seat_released_unsettled");
                return;
            }
        }
    }
}
