//! The tool bridge's call log on the run: bounded, its first and last calls kept and the
//! middle counted as elided.

use crate::record::{BRIDGE_LOG_HEAD, BRIDGE_LOG_TAIL, RunRecord};

/// Appends one call; past the bound the oldest call after the head goes.
pub(super) fn append_bridge_call(next: &mut RunRecord, line: &str) {
    next.bridge_calls.push(line.to_owned());
    if next.bridge_calls.len() > BRIDGE_LOG_HEAD + BRIDGE_LOG_TAIL {
        next.bridge_calls.remove(BRIDGE_LOG_HEAD);
        next.bridge_calls_elided += 1;
    }
}
