//! The node's Prometheus metrics (issue 18), one registry per process, served at `/metrics`
//! by the node's HTTP listener. Every name starts `boxfleet_`; counters end `_total`, and
//! latencies are histograms in seconds.
//!
//! | metric | labels | moved by |
//! |---|---|---|
//! | `boxfleet_runs` (gauge) | `status` | the board, read at each scrape |
//! | `boxfleet_launches_total` | `outcome` (launched, refused), `class` | a launch's outcome |
//! | `boxfleet_polls_total` | `outcome` (running, done, failed) | the completion poll |
//! | `boxfleet_poll_seconds` | | one poll of one run's box |
//! | `boxfleet_collections_total` | `outcome` (succeeded, job_failed, failed), `reason` | a collection: of a job that succeeded, of one that failed (`reason`: the phase record's, empty for its exit status alone), or one that itself failed (`box_unread`, `retried`, `collect_unreachable`) |
//! | `boxfleet_store_txns_total` | `outcome` (applied, compare_failed, error) | every store txn |
//! | `boxfleet_store_txn_seconds` | | every store txn |
//! | `boxfleet_store_reads_total` | `call` (get, range, range_keys) | every store read |
//! | `boxfleet_store_keys_read_total` | `call` | the keys a store read returned |
//! | `boxfleet_store_retries_total` | | an etcd call passed on to another member |
//! | `boxfleet_lease_renewals_total` | `outcome` (renewed, lost, failed) | seat, session and duty leases |
//! | `boxfleet_seats_held` (gauge) | | the seats this node holds, from its seat table at each scrape |
//! | `boxfleet_actor_restarts_total` | `actor` | a supervisor restarting a child |
//! | `boxfleet_tail_requests_total` | | a viewer asking a run's tail here |
//! | `boxfleet_tail_readers` (gauge) | | viewers waiting on a box read now |
//! | `boxfleet_tail_box_reads_total` | `outcome` (read, paused, failed) | the tail reading a box |
//! | `boxfleet_events_published_total` | `type` | an event committed to the outbox |
//! | `boxfleet_redaction_bytes_total` | `what` (read, changed) | text passed through redaction, and the texts that held a secret |

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// One label, `outcome`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: String,
}

/// `outcome` and the class of a refusal or the reason of a failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeClass {
    pub outcome: String,
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeReason {
    pub outcome: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Status {
    pub status: String,
}

/// One label, `call`: which store read.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Call {
    pub call: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActorName {
    pub actor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventType {
    pub r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct What {
    pub what: String,
}

/// The statuses a run in flight can have (each exposed, at zero when no run has it).
const RUN_STATUSES: [&str; 7] = [
    "launching",
    "running",
    "resumed",
    "awaiting_clarification",
    "answered",
    "reseed",
    "ending",
];

/// Every metric the node keeps.
#[derive(Debug)]
pub struct Metrics {
    pub runs: Family<Status, Gauge>,
    pub launches: Family<OutcomeClass, Counter>,
    pub polls: Family<Outcome, Counter>,
    pub poll_seconds: Histogram,
    pub collections: Family<OutcomeReason, Counter>,
    pub store_txns: Family<Outcome, Counter>,
    pub store_txn_seconds: Histogram,
    pub store_reads: Family<Call, Counter>,
    pub store_keys_read: Family<Call, Counter>,
    pub store_retries: Counter,
    pub lease_renewals: Family<Outcome, Counter>,
    pub seats_held: Gauge,
    pub actor_restarts: Family<ActorName, Counter>,
    pub tail_requests: Counter,
    pub tail_readers: Gauge,
    pub tail_box_reads: Family<Outcome, Counter>,
    pub events_published: Family<EventType, Counter>,
    pub redaction_bytes: Family<What, Counter>,
    registry: Registry,
}

/// One store read's series: `boxfleet_store_reads_total` and `boxfleet_store_keys_read_total`
/// of its `call`.
#[derive(Debug, Clone)]
pub struct ReadSeries {
    reads: Counter,
    keys: Counter,
}

impl ReadSeries {
    /// A read that returned `keys` keys.
    pub fn read(&self, keys: usize) {
        self.reads.inc();
        self.keys.inc_by(keys as u64);
    }
}

/// The store's reads, as `boxfleet_store_reads_total` labels them.
const READ_CALLS: [&str; 3] = ["get", "range", "range_keys"];

fn latency() -> Histogram {
    // 1 ms to about 65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Metrics {
    /// The series of store reads of `call` (and the keys they return), resolved once by whoever
    /// counts them: a read is then two atomic adds, no label built.
    pub fn store_read_series(&self, call: &str) -> ReadSeries {
        let call = Call { call: call.into() };
        ReadSeries {
            reads: self.store_reads.get_or_create(&call).clone(),
            keys: self.store_keys_read.get_or_create(&call).clone(),
        }
    }

    fn new() -> Self {
        let m = Metrics {
            runs: Family::default(),
            launches: Family::default(),
            polls: Family::default(),
            poll_seconds: latency(),
            collections: Family::default(),
            store_txns: Family::default(),
            store_txn_seconds: latency(),
            store_reads: Family::default(),
            store_keys_read: Family::default(),
            store_retries: Counter::default(),
            lease_renewals: Family::default(),
            seats_held: Gauge::default(),
            actor_restarts: Family::default(),
            tail_requests: Counter::default(),
            tail_readers: Gauge::default(),
            tail_box_reads: Family::default(),
            events_published: Family::default(),
            redaction_bytes: Family::default(),
            registry: Registry::with_prefix("boxfleet"),
        };
        m.at_zero()
    }

    /// The series a family has before anything happened, exposed at zero so a dashboard (and
    /// an alert on `rate()`) finds them from the first scrape.
    fn at_zero(self) -> Self {
        let outcomes = |family: &Family<Outcome, Counter>, outcomes: &[&str]| {
            for outcome in outcomes {
                let _ = family.get_or_create(&Outcome {
                    outcome: (*outcome).into(),
                });
            }
        };
        let _ = self.launches.get_or_create(&OutcomeClass {
            outcome: "launched".into(),
            class: String::new(),
        });
        for class in ["unavailable", "busy", "refused", "budget"] {
            let _ = self.launches.get_or_create(&OutcomeClass {
                outcome: "refused".into(),
                class: class.into(),
            });
        }
        outcomes(&self.polls, &["running", "done", "failed"]);
        for outcome in ["succeeded", "job_failed"] {
            let _ = self.collections.get_or_create(&OutcomeReason {
                outcome: outcome.into(),
                reason: String::new(),
            });
        }
        outcomes(&self.store_txns, &["applied", "compare_failed", "error"]);
        for call in READ_CALLS {
            let call = Call { call: call.into() };
            let _ = self.store_reads.get_or_create(&call);
            let _ = self.store_keys_read.get_or_create(&call);
        }
        outcomes(&self.lease_renewals, &["renewed", "lost", "failed"]);
        outcomes(&self.tail_box_reads, &["read", "paused", "failed"]);
        for kind in [
            crate::events::kind::RUN_STARTED,
            crate::events::kind::CLARIFICATION_REQUESTED,
            crate::events::kind::PHASE_COMPLETED,
            crate::events::kind::RUN_FAILED,
        ] {
            let _ = self.events_published.get_or_create(&EventType {
                r#type: kind.into(),
            });
        }
        for what in ["read", "changed"] {
            let _ = self
                .redaction_bytes
                .get_or_create(&What { what: what.into() });
        }
        self.registered()
    }

    fn registered(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "runs",
            "Runs in flight on the fleet, by status",
            self.runs.clone(),
        );
        r.register(
            "launches",
            "Launches, by outcome and refusal class",
            self.launches.clone(),
        );
        r.register(
            "polls",
            "Completion polls of a run's box, by outcome",
            self.polls.clone(),
        );
        r.register(
            "poll_seconds",
            "One completion poll's latency",
            self.poll_seconds.clone(),
        );
        r.register(
            "collections",
            "Collections of a finished job: succeeded, job_failed (by the phase record's reason) or failed (the collection itself, by why)",
            self.collections.clone(),
        );
        r.register(
            "store_txns",
            "Store transactions, by outcome",
            self.store_txns.clone(),
        );
        r.register(
            "store_txn_seconds",
            "One store transaction's latency",
            self.store_txn_seconds.clone(),
        );
        r.register(
            "store_reads",
            "Store reads, by call",
            self.store_reads.clone(),
        );
        r.register(
            "store_keys_read",
            "The keys store reads returned, by call",
            self.store_keys_read.clone(),
        );
        r.register(
            "store_retries",
            "Store calls passed on to another etcd member",
            self.store_retries.clone(),
        );
        r.register(
            "lease_renewals",
            "Lease renewals (seat, session, duty), by outcome",
            self.lease_renewals.clone(),
        );
        r.register(
            "seats_held",
            "Seats this node holds",
            self.seats_held.clone(),
        );
        r.register(
            "actor_restarts",
            "Restarts of a supervised actor, by actor",
            self.actor_restarts.clone(),
        );
        r.register(
            "tail_requests",
            "Live-tail requests this node answered as a run's owner",
            self.tail_requests.clone(),
        );
        r.register(
            "tail_readers",
            "Viewers waiting on a box read now",
            self.tail_readers.clone(),
        );
        r.register(
            "tail_box_reads",
            "Box reads for the live tail, by outcome",
            self.tail_box_reads.clone(),
        );
        r.register(
            "events_published",
            "Lifecycle events committed to the outbox, by type",
            self.events_published.clone(),
        );
        r.register("redaction_bytes", "Bytes of text passed through redaction (read), and of the texts that held a secret (changed)", self.redaction_bytes.clone());
        self
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // writing into a String cannot fail
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    pub fn launched(&self, outcome: &str, class: &str) {
        self.launches
            .get_or_create(&OutcomeClass {
                outcome: outcome.into(),
                class: class.into(),
            })
            .inc();
    }

    pub fn polled(&self, outcome: &str, seconds: f64) {
        self.polls
            .get_or_create(&Outcome {
                outcome: outcome.into(),
            })
            .inc();
        self.poll_seconds.observe(seconds);
    }

    pub fn collected(&self, outcome: &str, reason: &str) {
        self.collections
            .get_or_create(&OutcomeReason {
                outcome: outcome.into(),
                reason: reason.into(),
            })
            .inc();
    }

    pub fn renewed(&self, outcome: &str) {
        self.lease_renewals
            .get_or_create(&Outcome {
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn restarted(&self, actor: &str) {
        self.actor_restarts
            .get_or_create(&ActorName {
                actor: actor.into(),
            })
            .inc();
    }

    pub fn tail_read(&self, outcome: &str) {
        self.tail_box_reads
            .get_or_create(&Outcome {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Brings the redaction counters up to the redactor's own totals (`read`: bytes passed
    /// through redaction; `changed`: bytes of the texts among them that held a secret).
    pub fn redacted_so_far(&self, read: u64, changed: u64) {
        for (what, total) in [("read", read), ("changed", changed)] {
            let counter = self
                .redaction_bytes
                .get_or_create(&What { what: what.into() });
            let behind = total.saturating_sub(counter.get());
            counter.inc_by(behind);
        }
    }

    /// Sets the runs gauge to `counts`, every status not named to zero.
    pub fn set_runs<'a>(&self, counts: impl IntoIterator<Item = (&'a str, i64)>) {
        self.runs.clear();
        for status in RUN_STATUSES {
            self.runs
                .get_or_create(&Status {
                    status: status.into(),
                })
                .set(0);
        }
        for (status, count) in counts {
            self.runs
                .get_or_create(&Status {
                    status: status.into(),
                })
                .set(count);
        }
    }
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_under_its_name_and_a_counter_moves() {
        let m = Metrics::new();
        m.launched("refused", "budget");
        m.polled("running", 0.004);
        m.redacted_so_far(100, 20);
        let text = m.encode();
        assert!(
            text.contains("boxfleet_launches_total{outcome=\"refused\",class=\"budget\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("boxfleet_redaction_bytes_total{what=\"changed\"} 20"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE boxfleet_poll_seconds histogram"),
            "{text}"
        );
        for name in [
            "store_retries_total",
            "seats_held",
            "tail_readers",
            "tail_requests_total",
        ] {
            assert!(
                text.contains(&format!("boxfleet_{name} ")),
                "{name}: {text}"
            );
        }
    }
}
