//! Whether the store can be reached: one shared, watchable answer a node reads to report its
//! health (`NOT_SERVING` while the store is down), to log the start and the end of an outage
//! once each, and to keep its periodic duties from warning every second about what it
//! already said.
//!
//! The store marks itself down only when a whole call failed for want of the store — every
//! member tried for the call's whole bound (a lost quorum, every member dead or cut off) —
//! never on one member's refusal or one write whose reply was lost, and up again on the first
//! call that succeeds.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

/// The store's reachability as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reachability {
    /// The last call reached the store (or none has failed yet).
    Reachable,
    /// Calls fail for want of the store since `since`; `error` is the first failure's.
    Unreachable { since: SystemTime, error: String },
}

/// A shared handle on a store's reachability; clones see one state.
#[derive(Debug, Clone)]
pub struct StoreHealth {
    state: Arc<watch::Sender<Reachability>>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl StoreHealth {
    /// A new handle, reachable.
    pub fn new() -> Self {
        Self {
            state: Arc::new(watch::Sender::new(Reachability::Reachable)),
        }
    }

    /// A call succeeded: the store is reachable. `Some(how long it was down)` when this ends
    /// an outage.
    pub fn mark_reachable(&self) -> Option<Duration> {
        let mut ended = None;
        self.state.send_if_modified(|state| match state {
            Reachability::Reachable => false,
            Reachability::Unreachable { since, .. } => {
                ended = Some(since.elapsed().unwrap_or_default());
                *state = Reachability::Reachable;
                true
            }
        });
        ended
    }

    /// A whole call failed for want of the store. `true` when this starts an outage (the
    /// first failure's error is kept; later ones change nothing).
    pub fn mark_unreachable(&self, error: &str) -> bool {
        self.state.send_if_modified(|state| match state {
            Reachability::Unreachable { .. } => false,
            Reachability::Reachable => {
                *state = Reachability::Unreachable {
                    since: SystemTime::now(),
                    error: error.to_owned(),
                };
                true
            }
        })
    }

    /// The state now.
    pub fn now(&self) -> Reachability {
        self.state.borrow().clone()
    }

    /// Whether the store is known to be down.
    pub fn is_down(&self) -> bool {
        matches!(*self.state.borrow(), Reachability::Unreachable { .. })
    }

    /// A receiver that wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<Reachability> {
        self.state.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_starts_once_and_ends_once() {
        let health = StoreHealth::new();
        let mut seen = health.subscribe();
        assert!(!health.is_down());
        assert_eq!(health.mark_reachable(), None, "no outage to end");
        assert!(health.mark_unreachable("no leader"));
        assert!(!health.mark_unreachable("no leader again"), "already down");
        assert!(seen.has_changed().unwrap_or(false));
        match health.now() {
            Reachability::Unreachable { error, .. } => assert_eq!(error, "no leader"),
            other => panic!("expected unreachable, got {other:?}"),
        }
        seen.mark_unchanged();
        assert!(health.mark_reachable().is_some());
        assert_eq!(health.mark_reachable(), None, "already up");
        assert!(!health.is_down());
        assert!(seen.has_changed().unwrap_or(false));
    }
}
