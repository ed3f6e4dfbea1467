//! Work in progress on a seat: the launches, collections and answers a graceful release waits
//! for before it hands the seat over. A step counts itself with [`WorkInProgress::start`] and
//! is counted until its [`WorkGuard`] drops. A launch (or relaunch) is also known by its launch
//! id until its [`LaunchGuard`] drops, so a recovery pass this node re-runs under the same lease
//! (a seat actor's restart) passes over the `launching` row of a launch happening right now
//! instead of reaping it as abandoned (spec: "one on a seat this node already owns is a launch
//! happening right now"). A launch whose commit landed stays known ([`LaunchGuard::committed`]),
//! so a pass that read its row while it was still launching does not act on that stale read:
//! it used to revert a relaunch that had just committed, stopping the job it had started.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use tracing::warn;

/// The counts, by seat.
#[derive(Debug, Default)]
pub(crate) struct WorkInProgress {
    working: Arc<Mutex<BTreeMap<String, usize>>>,
    settled: Arc<tokio::sync::Notify>,
    /// the launches in flight in this process: (launch id, the seat's epoch they run under)
    launching: Arc<Mutex<BTreeSet<(String, i64)>>>,
    /// the last launches whose commit landed in this process, newest last
    committed: Arc<Mutex<VecDeque<(String, i64)>>>,
    /// the seats whose hand-over stops what is still in progress on them
    interrupted: Arc<Mutex<BTreeSet<String>>>,
    interrupt: Arc<tokio::sync::Notify>,
}

/// How many committed launches a process remembers: far more than one recovery pass can have
/// read while they were launching.
const COMMITTED_KEPT: usize = 4096;

/// A launch in flight under one epoch of its seat, known until it drops.
#[derive(Debug)]
pub struct LaunchGuard {
    launching: Arc<Mutex<BTreeSet<(String, i64)>>>,
    committed: Arc<Mutex<VecDeque<(String, i64)>>>,
    key: (String, i64),
}

impl LaunchGuard {
    /// The launch's commit landed: it stays known to this process as this node's own.
    pub fn committed(self) {
        let mut committed = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        committed.push_back(self.key.clone());
        while committed.len() > COMMITTED_KEPT {
            committed.pop_front();
        }
    }
}

impl Drop for LaunchGuard {
    fn drop(&mut self) {
        self.launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}

/// A launch, collection or answer in progress on a seat, counted until it drops.
#[derive(Debug)]
pub struct WorkGuard {
    working: Arc<Mutex<BTreeMap<String, usize>>>,
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

    /// Knows launch `launch_id`, running under the seat's `epoch`, as in flight until the
    /// guard drops.
    pub fn start_launch(&self, launch_id: &str, epoch: i64) -> LaunchGuard {
        let key = (launch_id.to_owned(), epoch);
        self.launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone());
        LaunchGuard {
            launching: self.launching.clone(),
            committed: self.committed.clone(),
            key,
        }
    }

    /// Whether launch `launch_id` is this process's own under `epoch`, in flight or committed:
    /// a `launching` row of it is a launch happening right now (or a read from before its
    /// commit), not one a stopped node left.
    pub fn launch_in_flight(&self, launch_id: &str, epoch: i64) -> bool {
        let key = (launch_id.to_owned(), epoch);
        self.launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
            || self
                .committed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&key)
    }

    /// Tells the work on `seat` that can stop (a collection's reads) to stop, until
    /// [`WorkInProgress::resume`]: its seat's hand-over waited long enough.
    pub fn interrupt(&self, seat: &str) {
        self.interrupted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(seat.to_owned());
        self.interrupt.notify_waiters();
    }

    /// The hand-over of `seat` is over: work on it is no longer stopped.
    pub fn resume(&self, seat: &str) {
        self.interrupted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(seat);
    }

    /// Resolves once the work on `seat` is told to stop.
    pub async fn interrupted(&self, seat: &str) {
        loop {
            let told = self.interrupt.notified();
            if self
                .interrupted
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(seat)
            {
                return;
            }
            told.await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_launch_stays_this_nodes_own_and_a_dropped_one_does_not() {
        let work = WorkInProgress::default();
        let committed = work.start_launch("launch-1", 7);
        let dropped = work.start_launch("launch-2", 7);
        assert!(work.launch_in_flight("launch-1", 7));
        assert!(work.launch_in_flight("launch-2", 7));
        committed.committed();
        drop(dropped);
        // a recovery pass that read launch-1's row before its commit leaves it alone; a launch
        // that stopped before its commit (a panic, a cancelled call) is the pass's to reap
        assert!(work.launch_in_flight("launch-1", 7));
        assert!(!work.launch_in_flight("launch-2", 7));
        // under another lease it is not this node's launch
        assert!(!work.launch_in_flight("launch-1", 8));
    }
}
