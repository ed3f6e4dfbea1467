//! The bounds on offering a seat's chat delivery to its parked runs (the spec's "Mid-run
//! clarification", lines 440–452): what a node keeps in memory about the offers it makes.
//!
//! - **The reserve.** Every hand-back of a delivery spends one of its deliveries, so the offer
//!   stops while [`ANSWER_RESERVE`] are still left ([`reserve_reached`]), read on the message's
//!   own count, and those are kept for the ordinary route (`sandbox_answer_headroom_reserved`).
//! - **Attempts per process.** A delivery whose answer could not be recorded (the store failed
//!   or could not say) is handed back and offered again, at most [`MAX_RECORD_ATTEMPTS`] times
//!   inside one process and at most the parked run's pause TTL from its first failure; past
//!   either it is let go to the ordinary route (`sandbox_answer_record_exhausted`, or
//!   `sandbox_answer_lookup_exhausted` when the lookup itself failed).
//! - **The awaiting count.** A lookup that cannot be made is decided by the seat's awaiting
//!   count, held here: seeded by the recovery pass as the node takes the seat and moved by this
//!   node's own parks, answers and let-gos. No awaiting run: not mine (the ordinary route, so an
//!   unreadable store never swallows an ordinary message); an awaiting run: handed back.
//! - **Stalled inboxes.** A seat whose inbox stopped on a hand-back is pumped again after the
//!   node's next session renew, which is when the delivery is offered again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use boxfleet_cluster::inbox::{MAX_DELIVERIES, Message};
use tokio::time::Instant;

/// Deliveries of a message kept for the ordinary route: the offer stops while this many are left.
pub const ANSWER_RESERVE: u32 = 5;
/// Offers of one message whose answer could not be recorded, inside one process.
pub const MAX_RECORD_ATTEMPTS: u32 = 10;

/// Whether `message` has spent all but the reserve of its deliveries (the offer stops).
pub fn reserve_reached(message: &Message) -> bool {
    message.delivery_count + ANSWER_RESERVE >= MAX_DELIVERIES
}

/// What a failed offer leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// handed back, to be offered again (this many attempts made)
    Again { attempts: u32 },
    /// every attempt the budget allowed was made: let go to the ordinary route
    Exhausted { attempts: u32 },
}

/// The node's memory of its offers.
#[derive(Debug, Default)]
pub(crate) struct Offers {
    /// failed offers of a delivery in this process: (attempts, first failure)
    failures: Mutex<BTreeMap<String, (u32, Instant)>>,
    /// each held seat's runs awaiting a reply, as this node knows it
    awaiting: Mutex<BTreeMap<String, u32>>,
    /// seats whose inbox stopped on a hand-back, to pump after the next renew
    stalled: Mutex<BTreeSet<String>>,
}

impl Offers {
    /// Counts a failed offer of `delivery_id`; `window` is the parked run's pause TTL.
    pub fn failed(&self, delivery_id: &str, window: Duration) -> AfterFailure {
        self.failed_at(delivery_id, window, Instant::now())
    }

    fn failed_at(&self, delivery_id: &str, window: Duration, now: Instant) -> AfterFailure {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let (attempts, first) = failures.entry(delivery_id.to_owned()).or_insert((0, now));
        *attempts += 1;
        let attempts = *attempts;
        if attempts >= MAX_RECORD_ATTEMPTS || now.duration_since(*first) >= window {
            failures.remove(delivery_id);
            return AfterFailure::Exhausted { attempts };
        }
        AfterFailure::Again { attempts }
    }

    /// The offer of `delivery_id` came to something: its count is forgotten.
    pub fn settled(&self, delivery_id: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(delivery_id);
    }

    /// The seat's awaiting count as the recovery pass found it.
    pub fn seed_awaiting(&self, seat: &str, count: u32) {
        self.awaiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(seat.to_owned(), count);
    }

    /// One of the seat's runs parked (or went back to its question).
    pub fn parked(&self, seat: &str) {
        *self
            .awaiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(seat.to_owned())
            .or_default() += 1;
    }

    /// One of the seat's parked runs was answered.
    pub fn answered(&self, seat: &str) {
        if let Some(count) = self
            .awaiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(seat)
        {
            *count = count.saturating_sub(1);
        }
    }

    /// Whether, as this node knows it, a run of `seat` awaits a reply.
    pub fn awaiting(&self, seat: &str) -> bool {
        self.awaiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(seat)
            .is_some_and(|count| *count > 0)
    }

    /// `seat`'s inbox stopped on a hand-back.
    pub fn stall(&self, seat: &str) {
        self.stalled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(seat.to_owned());
    }

    /// Whether `seat`'s inbox stopped and waits to be pumped again.
    pub fn stalled(&self, seat: &str) -> bool {
        self.stalled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(seat)
    }

    /// The seats whose inboxes stopped (and forgets them).
    pub fn take_stalled(&self) -> Vec<String> {
        std::mem::take(&mut *self.stalled.lock().unwrap_or_else(|p| p.into_inner()))
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_is_handed_back_at_most_ten_times_in_a_process() {
        let offers = Offers::default();
        let now = Instant::now();
        let window = Duration::from_secs(1800);
        for attempts in 1..MAX_RECORD_ATTEMPTS {
            assert_eq!(
                offers.failed_at("d1", window, now),
                AfterFailure::Again { attempts }
            );
        }
        assert_eq!(
            offers.failed_at("d1", window, now),
            AfterFailure::Exhausted { attempts: 10 }
        );
        assert_eq!(
            offers.failed_at("d2", window, now),
            AfterFailure::Again { attempts: 1 },
            "each delivery has its own count"
        );
    }

    #[test]
    fn an_offer_failing_past_the_pause_ttl_is_let_go() {
        let offers = Offers::default();
        let first = Instant::now();
        let window = Duration::from_secs(60);
        assert_eq!(
            offers.failed_at("d1", window, first),
            AfterFailure::Again { attempts: 1 }
        );
        assert_eq!(
            offers.failed_at("d1", window, first + Duration::from_secs(61)),
            AfterFailure::Exhausted { attempts: 2 }
        );
    }

    #[test]
    fn the_awaiting_count_follows_the_nodes_own_parks_and_answers() {
        let offers = Offers::default();
        assert!(!offers.awaiting("s"), "nothing known: nothing awaits");
        offers.seed_awaiting("s", 1);
        assert!(offers.awaiting("s"));
        offers.answered("s");
        assert!(!offers.awaiting("s"));
        offers.answered("s");
        offers.parked("s");
        assert!(offers.awaiting("s"), "never below zero");
    }

    #[test]
    fn the_offer_stops_with_five_deliveries_left() {
        let message = |delivery_count| Message {
            seq: 1,
            delivery: boxfleet_cluster::inbox::Delivery {
                delivery_id: "d".into(),
                conversation_key: None,
                partition: None,
                from: "ada".into(),
                text: "yes".into(),
                posted_at: boxfleet_cluster::clock::now(),
                answer_given: None,
            },
            delivery_count,
            enqueued_at: boxfleet_cluster::clock::now(),
            mod_revision: 1,
        };
        assert!(!reserve_reached(&message(
            MAX_DELIVERIES - ANSWER_RESERVE - 1
        )));
        assert!(reserve_reached(&message(MAX_DELIVERIES - ANSWER_RESERVE)));
    }
}
