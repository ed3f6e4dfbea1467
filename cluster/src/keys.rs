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

    pub fn seats(&self) -> String {
        format!("{}/seats/", self.prefix)
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

    pub fn waiter_duty(&self) -> String {
        format!("{}/duty/waiter", self.prefix)
    }

    /// The last path segment of a key (the id it was built from).
    pub fn last_segment(key: &str) -> &str {
        key.rsplit('/').next().unwrap_or(key)
    }
}

/// Refuses an id that cannot be a key segment: empty, over 256 bytes, or holding `/`,
/// whitespace or control characters.
pub fn check_id(what: &'static str, id: &str) -> Result<(), Error> {
    let bad = id.is_empty()
        || id.len() > 256
        || id
            .chars()
            .any(|c| c == '/' || c.is_whitespace() || c.is_control());
    if bad {
        return Err(Error::Invalid(format!(
            "{what} {id:?} cannot name a key: use 1-256 characters without '/', spaces or control characters"
        )));
    }
    Ok(())
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
}
