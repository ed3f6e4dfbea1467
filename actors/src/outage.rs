//! Logging a failure of periodic work while the store is down: the node says once when an
//! outage starts and once when it ends (`store_unreachable`, `store_reachable_again`); each
//! duty that ticks meanwhile (placement every second, the poll, the board's watch and
//! reconcile, the session's renewal) would otherwise say it again on every tick.

use boxfleet_cluster::Store;
use tracing::{debug, warn};

/// Logs `event` with `error`: a warning, or a debug line while the store is known down.
pub fn duty_failed(store: &dyn Store, event: &'static str, error: &dyn std::fmt::Display) {
    if store.health().is_down() {
        debug!(%error, "{event}");
    } else {
        warn!(%error, "{event}");
    }
}
