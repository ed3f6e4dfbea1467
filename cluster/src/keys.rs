//! The whole key schema (DESIGN §5), in one file. Every key boxfleet writes is built here,
//! under a configurable prefix (default `/boxfleet/v1`).
//!
//! | key | value | notes |
//! |---|---|---|
//! | `nodes/{node}` | node info | on the node's session lease |
//! | `seats/{seat}/holder` | `{node, incarnation}` | on the holder's session lease; epoch = its create_revision |
//! | `seats/{seat}/inbox/{seq}` | delivery | durable ordered mailbox, `seq` zero-padded |
//! | `seats/{seat}/inbox-seq` | next seq | the mailbox's sequence counter |
//! | `seats/{seat}/inbox-id/{delivery_id}` | seq | same-id dedupe of enqueued deliveries |
//! | `seats/{seat}/dead/{seq}` | delivery | dead letters (past the delivery bound) |
//! | `runs/{turn_id}` | run record | no TTL: a parked run can wait weeks |
//! | `ledger/{delivery_id}` | worked marker | on a 30-day lease |
//! | `ops/{unit}` | rebased instant | the 29/30-day rule |
//! | `spend/{scope}/{window}` | counters | seat and company scopes; day, week, month windows |
//! | `events/{event_id}` | event | the outbox; written in the decision's txn |
//! | `duty/waiter` | claimant | on the claimant's lease |
//! | `stranded/{host}/{sandbox_id}` | stranded box | a local box for a node on `host` to kill; no TTL |
//!
//! Ids are checked where they enter ([`check_id`]): a `/` in a seat handle would otherwise let
//! one seat's keys land under another's.

use crate::Error;

/// Builds keys under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix` (e.g. `/boxfleet/v1`; a trailing `/` is dropped).
    pub fn new(prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        while prefix.ends_with('/') {
            prefix.pop();
        }
        Self { prefix }
    }

    /// The prefix every key lives under.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn nodes(&self) -> String {
        format!("{}/nodes/", self.prefix)
    }
    pub fn node(&self, node: &str) -> String {
        format!("{}/nodes/{node}", self.prefix)
    }

    /// The nodes found gone without stopping (`node_lost`), each kept as long as events.
    pub fn lost_nodes(&self) -> String {
        format!("{}/lost/", self.prefix)
    }
    pub fn lost_node(&self, node: &str) -> String {
        format!("{}/lost/{node}", self.prefix)
    }

    pub fn seats(&self) -> String {
        format!("{}/seats/", self.prefix)
    }
    /// When the seat was first found missing from the company's agent seats (its retirement
    /// grace runs from it).
    pub fn seat_retiring(&self, seat: &str) -> String {
        format!("{}/seats/{seat}/retiring", self.prefix)
    }
    pub fn seat_holder(&self, seat: &str) -> String {
        format!("{}/seats/{seat}/holder", self.prefix)
    }
    pub fn inbox(&self, seat: &str) -> String {
        format!("{}/seats/{seat}/inbox/", self.prefix)
    }
    pub fn inbox_message(&self, seat: &str, seq: u64) -> String {
        format!("{}/seats/{seat}/inbox/{seq:020}", self.prefix)
    }
    pub fn inbox_seq(&self, seat: &str) -> String {
        format!("{}/seats/{seat}/inbox-seq", self.prefix)
    }
    pub fn inbox_id(&self, seat: &str, delivery_id: &str) -> String {
        format!("{}/seats/{seat}/inbox-id/{delivery_id}", self.prefix)
    }
    pub fn dead_letters(&self, seat: &str) -> String {
        format!("{}/seats/{seat}/dead/", self.prefix)
    }
    pub fn dead_letter(&self, seat: &str, seq: u64) -> String {
        format!("{}/seats/{seat}/dead/{seq:020}", self.prefix)
    }

    pub fn runs(&self) -> String {
        format!("{}/runs/", self.prefix)
    }
    pub fn run(&self, turn_id: &str) -> String {
        format!("{}/runs/{turn_id}", self.prefix)
    }

    /// Every seat's run entries ([`crate::seat_runs`]).
    pub fn all_seat_runs(&self) -> String {
        format!("{}/seat_runs/", self.prefix)
    }
    /// One seat's run entries.
    pub fn seat_runs(&self, seat: &str) -> String {
        format!("{}/seat_runs/{seat}/", self.prefix)
    }
    /// A run's entry under its seat.
    pub fn seat_run(&self, seat: &str, turn_id: &str) -> String {
        format!("{}/seat_runs/{seat}/{turn_id}", self.prefix)
    }

    pub fn ledger(&self, delivery_id: &str) -> String {
        format!("{}/ledger/{delivery_id}", self.prefix)
    }

    pub fn ops(&self, unit: &str) -> String {
        format!("{}/ops/{unit}", self.prefix)
    }

    pub fn spend(&self, scope: &str, window: &str) -> String {
        format!("{}/spend/{scope}/{window}", self.prefix)
    }

    pub fn events(&self) -> String {
        format!("{}/events/", self.prefix)
    }
    pub fn event(&self, event_id: &str) -> String {
        format!("{}/events/{event_id}", self.prefix)
    }
    /// The outbox's index by turn: one empty key per event, on the event's own lease, so a
    /// turn's events are read without reading the outbox.
    pub fn turn_events(&self, turn_id: &str) -> String {
        format!("{}/turn_events/{turn_id}/", self.prefix)
    }
    pub fn turn_event(&self, turn_id: &str, event_id: &str) -> String {
        format!("{}/turn_events/{turn_id}/{event_id}", self.prefix)
    }

    pub fn waiter_duty(&self) -> String {
        format!("{}/duty/waiter", self.prefix)
    }

    /// The local boxes of `host` that runs moved away from, for a node there to kill.
    pub fn stranded_boxes(&self, host: &str) -> String {
        format!("{}/stranded/{host}/", self.prefix)
    }
    pub fn stranded_box(&self, host: &str, sandbox_id: &str) -> String {
        format!("{}/stranded/{host}/{sandbox_id}", self.prefix)
    }

    /// The last path segment of a key (the id it was built from).
    pub fn last_segment(key: &str) -> &str {
        key.rsplit('/').next().unwrap_or(key)
    }
}

/// The longest id.
pub const MAX_ID_CHARS: usize = 128;

/// The one grammar of every id boxfleet keys on or shows (a turn, a seat, a launch, a node, a
/// delivery, a unit of work): 1 to [`MAX_ID_CHARS`] ASCII letters, digits, `.`, `_`, `-`, `:`,
/// `@` or `+`, not starting with `.` or `-`, and without `..`. So an id never escapes its key's
/// segment (`/`), never climbs a path (`..`), and never carries a control or bidi character
/// that would make one board row read as another.
pub fn id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        return Some("it is empty");
    }
    if id.chars().count() > MAX_ID_CHARS {
        return Some("it is longer than 128 characters");
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-:@+".contains(c))
    {
        return Some(
            "it holds a character other than ASCII letters, digits, '.', '_', '-', ':', '@' and '+'",
        );
    }
    if id.starts_with('.') || id.starts_with('-') {
        return Some("it starts with '.' or '-'");
    }
    if id.contains("..") {
        return Some("it holds '..'");
    }
    None
}

/// Refuses an id outside the grammar of [`id_problem`], naming the rule it breaks.
pub fn check_id(what: &'static str, id: &str) -> Result<(), Error> {
    let Some(problem) = id_problem(id) else {
        return Ok(());
    };
    // the id itself is shown escaped and cut, so a refusal cannot smuggle what it refuses
    let shown: String = id.chars().take(48).collect();
    let more = if id.chars().count() > 48 { "…" } else { "" };
    Err(Error::Invalid(format!(
        "{what} {shown:?}{more} is not an id: {problem}; use 1-128 ASCII letters, digits, '.', '_', '-', ':', '@' or '+', not starting with '.' or '-' and without '..'"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_keys_sort_in_sequence_order() {
        let keys = Keys::new("/boxfleet/v1/");
        assert_eq!(keys.run("t1"), "/boxfleet/v1/runs/t1");
        assert!(keys.inbox_message("s", 9) < keys.inbox_message("s", 10));
        assert!(keys.inbox_message("s", 10).starts_with(&keys.inbox("s")));
        // a seat's inbox prefix never covers another seat's keys
        assert!(!keys.inbox_message("ab", 1).starts_with(&keys.inbox("a")));
    }

    #[test]
    fn ids_that_would_escape_their_segment_are_refused() {
        assert!(check_id("seat", "eng-1").is_ok());
        for bad in ["", "a/b", "a b", "a\nb"] {
            assert!(check_id("seat", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn one_grammar_for_every_id_refused_by_the_rule_it_breaks() {
        for good in [
            "eng",
            "turn-3f2a",
            "launch-1",
            "ada@example.com",
            "copy-ab12",
            "work:ENG-7",
            "1700000000.0001",
            "a+b",
        ] {
            assert_eq!(id_problem(good), None, "{good}");
        }
        let long = "a".repeat(129);
        for (bad, rule) in [
            ("", "empty"),
            ("..", "starts with"),
            ("a..b", "'..'"),
            (".hidden", "starts with"),
            ("-flag", "starts with"),
            ("eng\u{202e}gne", "other than ASCII"),
            ("tab\there", "other than ASCII"),
            ("nul\0", "other than ASCII"),
            ("é", "other than ASCII"),
            (long.as_str(), "longer than 128"),
        ] {
            let problem = id_problem(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(problem.contains(rule), "{bad:?}: {problem}");
        }
        let refused = check_id("turn_id", &"x/".repeat(5000))
            .expect_err("refused")
            .to_string();
        assert!(
            refused.len() < 400,
            "a refusal does not echo 10 KB: {}",
            refused.len()
        );
        let bidi = check_id("seat", "a\u{202e}b")
            .expect_err("bidi")
            .to_string();
        assert!(bidi.contains("\\u{202e}"), "escaped, not shown: {bidi}");
    }
}
