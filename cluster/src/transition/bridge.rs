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

#[cfg(test)]
mod tests {
    use crate::transition::Transition;
    use crate::transition::test_support::*;

    use super::*;

    fn append(line: &str) -> Transition {
        Transition::AppendBridgeCall { line: line.into() }
    }

    #[test]
    fn a_bridge_call_is_appended_to_the_runs_log() {
        let mut current = running();
        current.bridge_calls = vec!["first".into()];
        let mut expected = stamped(&current);
        expected.bridge_calls = vec!["first".into(), "second".into()];
        assert_eq!(
            decide_on(&current, append("second")),
            writes(expected, vec![])
        );
    }

    #[test]
    fn past_its_bound_the_log_keeps_its_head_and_tail_and_counts_what_it_elided() {
        let full: Vec<String> = (0..BRIDGE_LOG_HEAD + BRIDGE_LOG_TAIL)
            .map(|n| format!("call-{n}"))
            .collect();
        let mut current = running();
        current.bridge_calls = full.clone();
        current.bridge_calls_elided = 3;
        let mut expected = stamped(&current);
        expected.bridge_calls = full[..BRIDGE_LOG_HEAD]
            .iter()
            .chain(&full[BRIDGE_LOG_HEAD + 1..])
            .cloned()
            .chain(["last".to_owned()])
            .collect();
        expected.bridge_calls_elided = 4;
        assert_eq!(
            decide_on(&current, append("last")),
            writes(expected, vec![])
        );
    }
}
