//! One span per operation on a run (issue 18): a launch, a poll, a collection, an answer, a
//! settle and a recovery, each carrying the node, seat, turn, launch and sandbox ids, and each
//! a child of the run's trace context — the launch's own `TRACEPARENT` when it carried a
//! valid one, else one derived from the turn — which is also what the run's box is given, so
//! the box's own spans (through the OTLP receiver) nest under the same turn.
//!
//! They are `tracing` spans (target `boxfleet::span`); the node exports them as OpenTelemetry
//! spans when a trace endpoint is configured, and they cost a span's bookkeeping otherwise.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use sha2::{Digest, Sha256};
use tracing::{Span, field};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The operations a span is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Launch,
    Poll,
    Collect,
    Answer,
    Settle,
    Recover,
}

/// The ids a span carries (empty: not known for this operation).
#[derive(Debug, Clone, Copy, Default)]
pub struct Ids<'a> {
    pub node: &'a str,
    pub seat: &'a str,
    pub turn_id: &'a str,
    pub launch_id: &'a str,
    pub sandbox_id: &'a str,
    /// the launch's own trace context (`TRACEPARENT`), if it carried one
    pub trace: Option<&'a str>,
}

macro_rules! op_span {
    ($name:literal, $ids:expr) => {
        tracing::info_span!(
            target: "boxfleet::span",
            $name,
            otel.name = $name,
            node = $ids.node,
            seat = $ids.seat,
            turn_id = $ids.turn_id,
            launch_id = $ids.launch_id,
            sandbox_id = $ids.sandbox_id,
            outcome = field::Empty,
        )
    };
}

/// The span of `op` on the run `ids` names, a child of the run's trace (a recovery, which is
/// the seat's and no one run's, starts a trace of its own).
pub fn open(op: Op, ids: Ids<'_>) -> Span {
    let span = match op {
        Op::Launch => op_span!("boxfleet.launch", ids),
        Op::Poll => op_span!("boxfleet.poll", ids),
        Op::Collect => op_span!("boxfleet.collect", ids),
        Op::Answer => op_span!("boxfleet.answer", ids),
        Op::Settle => op_span!("boxfleet.settle", ids),
        Op::Recover => op_span!("boxfleet.recover", ids),
    };
    if !ids.turn_id.is_empty()
        && let Some(parent) = remote_context(&traceparent(ids.turn_id, ids.trace))
    {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
    span
}

/// The run's W3C trace context: the launch's own when it is valid, else one derived from the
/// turn (every job of a turn, and every operation on it, under one trace and one parent).
pub fn traceparent(turn_id: &str, trace: Option<&str>) -> String {
    if let Some(trace) = trace.filter(|t| valid_traceparent(t)) {
        return trace.to_owned();
    }
    let hex = |text: &str, bytes: usize| -> String {
        let digest = Sha256::digest(text.as_bytes());
        hex::encode(&digest[..bytes])
    };
    format!(
        "00-{}-{}-01",
        hex(&format!("boxfleet trace/{turn_id}"), 16),
        hex(&format!("boxfleet span/{turn_id}"), 8)
    )
}

/// `00-{32 hex}-{16 hex}-{2 hex}`, in lower case, the ids not all zero.
pub fn valid_traceparent(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    parts.len() == 4
        && parts[0] == "00"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0')
}

/// The span context a valid traceparent names, as a remote parent.
fn remote_context(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.split('-').skip(1);
    let trace_id = TraceId::from_hex(parts.next()?).ok()?;
    let span_id = SpanId::from_hex(parts.next()?).ok()?;
    let flags = u8::from_str_radix(parts.next()?, 16).ok()?;
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}

impl crate::lifecycle::Coordinator {
    /// The span of `op` on the run `record` holds, on this node.
    pub(crate) fn span_of(&self, op: Op, record: &boxfleet_cluster::record::RunRecord) -> Span {
        open(
            op,
            Ids {
                node: &self.node,
                seat: &record.seat,
                turn_id: &record.turn_id,
                launch_id: &record.launch_id,
                sandbox_id: record.sandbox_id.as_deref().unwrap_or_default(),
                trace: record.trace.as_deref(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launchs_own_trace_is_kept_and_a_bad_one_replaced_by_the_turns() {
        let turn = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(traceparent("t-1", Some(turn)), turn);
        let made = traceparent("t-1", Some("not a trace"));
        assert!(valid_traceparent(&made) && made != turn, "{made}");
        assert_eq!(made, traceparent("t-1", None), "derived from the turn");
        assert_ne!(made, traceparent("t-2", None));
        let parent = remote_context(turn).expect("a context");
        assert_eq!(
            parent.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(parent.is_sampled() && parent.is_remote());
    }
}
