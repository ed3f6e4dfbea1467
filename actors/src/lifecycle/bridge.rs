//! The tool bridge's record of a run's calls (the spec's "The tool bridge": every call is
//! written down where a resume can read it): each bridged call is appended to the run's own
//! record as one redacted line, in a fenced write; the log keeps its first and last calls and
//! counts the middle it drops (`transition::bridge`). A call that could not be written down is
//! logged and still answered: the box's call happened either way.
//!
//! Decisions: `transition::bridge` (append_bridge_call).

use boxfleet_cluster::transition::Transition;
use tracing::warn;

use super::Coordinator;
use super::text::cut;

/// The most of a call's arguments or result a line shows (the transcript's tool preview).
pub const PREVIEW_BYTES: usize = 160;

/// One bridged call as the run's log shows it: when, the tool, what it was given and what it
/// returned (each redacted whole, then cut to its preview), and whether it failed.
pub fn bridge_call_line(tool: &str, arguments: &str, failed: bool, result: &str) -> String {
    let preview = |text: &str| {
        let flat = boxfleet_redact::redact(text).replace(['\n', '\r'], " ");
        let mut end = flat.len().min(PREVIEW_BYTES);
        while !flat.is_char_boundary(end) {
            end -= 1;
        }
        if end < flat.len() {
            format!("{}…", &flat[..end])
        } else {
            flat
        }
    };
    format!(
        "{} {tool} {} -> {}: {}",
        boxfleet_cluster::clock::now().format("%Y-%m-%dT%H:%M:%SZ"),
        preview(arguments),
        if failed { "error" } else { "ok" },
        preview(result)
    )
}

impl Coordinator {
    /// Appends a bridged call of `turn_id` (a run of `seat`) to the run's log.
    pub async fn record_bridge_call(&self, seat: &str, turn_id: &str, line: &str) {
        let fence = match self.seat_fence(seat).await {
            Ok(fence) => fence,
            Err(error) => {
                warn!(turn_id, %error, "mcp_bridge_call_unrecorded");
                return;
            }
        };
        let append = Transition::AppendBridgeCall {
            line: cut(line, 2 * PREVIEW_BYTES + 128),
        };
        if let Err(error) = self.runs.apply(&fence, turn_id, append).await {
            warn!(turn_id, %error, "mcp_bridge_call_unrecorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_line_is_redacted_flat_and_cut_to_its_previews() {
        let line = bridge_call_line(
            "search",
            "{\"q\": \"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\"}",
            false,
            &"x".repeat(500),
        );
        assert!(!line.contains("ghp_0123456789"), "{line}");
        assert!(line.contains(" search "), "{line}");
        assert!(line.contains("-> ok: "), "{line}");
        assert!(line.ends_with('…'), "{line}");
        let failed = bridge_call_line("t", "{}", true, "no\nsuch");
        assert!(failed.ends_with("-> error: no such"), "{failed}");
    }
}
