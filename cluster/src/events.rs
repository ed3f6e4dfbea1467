//! The events outbox (DESIGN §5): `events/{event_id}`, written in the same txn as the decision
//! it announces. An event's id is derived from what it announces, and it is created only when
//! absent, so a repeat after a crash is the same event (I10). Subscribers read `events/` by
//! revision, or watch it from a revision.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::{Compare, KeyValue, LeaseId, Op, Revision, Store};
use crate::{Error, Keys};

/// The event kinds boxfleet announces (the spec's names).
pub mod kind {
    pub const RUN_STARTED: &str = "sandbox_run_started";
    pub const RUN_FAILED: &str = "sandbox_run_failed";
    pub const CLARIFICATION_REQUESTED: &str = "sandbox_clarification_requested";
    pub const PHASE_COMPLETED: &str = "agent_phase_completed";
    /// the built-in engine's reply to a finished turn (its findings)
    pub const TURN_REPLIED: &str = "turn_replied";
    /// a seat's message deferred past its bound, moved to the seat's dead letters
    pub const MESSAGE_DEAD_LETTERED: &str = "seat_message_dead_lettered";
    /// what a person's answer became (resumed, declined), once per answer and outcome
    pub const RUN_ANSWERED: &str = "sandbox_run_answered";
    /// a node put a revision of its config file in force (live reload)
    pub const CONFIG_APPLIED: &str = "config_applied";
    /// a node refused a revision of its config file, changing nothing
    pub const CONFIG_REFUSED: &str = "config_refused";
    /// A node vanished from the fleet without stopping (its session lease expired).
    pub const NODE_LOST: &str = "node_lost";
    /// A node began to drain (placed no seats; it releases the ones it holds).
    pub const NODE_DRAINING: &str = "node_draining";
    /// A seat was acquired from a node that was lost (not handed over).
    pub const SEAT_TAKEN_OVER: &str = "seat_taken_over";
}

/// One announcement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub turn_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub launch_id: String,
    pub seat: String,
    pub at: DateTime<Utc>,
    /// the event's own fields, in the spec's names
    #[serde(default)]
    pub body: serde_json::Value,
}

impl Event {
    /// An event whose id is derived from `identity`: the same parts give the same id.
    pub fn new(
        kind: &str,
        identity: &[&str],
        turn_id: &str,
        launch_id: &str,
        seat: &str,
        at: DateTime<Utc>,
        body: serde_json::Value,
    ) -> Self {
        let mut parts = vec![kind];
        parts.extend_from_slice(identity);
        Self {
            id: derive_id(&parts),
            kind: kind.to_owned(),
            turn_id: turn_id.to_owned(),
            launch_id: launch_id.to_owned(),
            seat: seat.to_owned(),
            at,
            body,
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|error| panic!("event serializes: {error}"))
    }
}

/// An answer and its run, for `sandbox_run_answered`: what the answer became is announced once
/// per answer and outcome (the id is derived from the answer's delivery and the outcome).
#[derive(Debug, Clone, Copy)]
pub struct Answered<'a> {
    pub turn_id: &'a str,
    pub launch_id: &'a str,
    pub seat: &'a str,
    /// `chat` or `operator`
    pub route: &'a str,
    pub answered_by: &'a str,
    pub given_by: Option<&'a str>,
    pub delivery_id: &'a str,
    /// an answer by name's `answered_by_kind` and `operator_id`
    pub operator: Option<&'a crate::record::Operator>,
}

impl Answered<'_> {
    /// `became`: resumed, not_awaiting, gone or declined.
    pub fn event(&self, became: &str, at: DateTime<Utc>) -> Event {
        Event::new(
            kind::RUN_ANSWERED,
            &[self.turn_id, self.delivery_id, became],
            self.turn_id,
            self.launch_id,
            self.seat,
            at,
            serde_json::json!({
                "route": self.route,
                "answered_by": self.answered_by,
                "given_by": self.given_by,
                "delivery_id": self.delivery_id,
                "answered_by_kind": self.operator.map(|o| o.answered_by_kind.as_str()),
                "operator_id": self.operator.map(|o| o.operator_id.as_str()),
                "became": became,
            }),
        )
    }

    /// The id of the event announcing that the answer `became` this.
    pub fn event_id(&self, became: &str) -> String {
        derive_id(&[kind::RUN_ANSWERED, self.turn_id, self.delivery_id, became])
    }
}

/// A stable id from its parts: 32 hex digits of their SHA-256 (parts separated unambiguously).
pub fn derive_id(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hex::encode(&hash.finalize()[..16])
}

/// The most an event is, whole (DESIGN §15): a broker refuses one larger.
pub const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// Room kept in a request for what rides beside its events: keys, compares, a spend's ops.
pub const REQUEST_OVERHEAD_BYTES: usize = 64 * 1024;

/// The compare and the put that create an event only if it is not there yet, on the outbox's
/// retention `lease`. The event is held to `max_bytes` (and to [`MAX_EVENT_BYTES`]) by
/// [`fit`], so a store that takes smaller requests than the event would need still takes it.
/// Beside it goes its key in the turn's index ([`Keys::turn_event`]), on the same lease.
pub fn create(keys: &Keys, event: &Event, lease: LeaseId, max_bytes: usize) -> (Compare, [Op; 2]) {
    let key = keys.event(&event.id);
    (
        Compare::absent(key.clone()),
        [
            Op::put_on_lease(key, fit(event, max_bytes), lease),
            Op::put_on_lease(
                keys.turn_event(&event.turn_id, &event.id),
                Vec::new(),
                lease,
            ),
        ],
    )
}

/// The event's JSON in at most `max_bytes` (and [`MAX_EVENT_BYTES`]): while it is larger, its
/// body's longest text is cut to half, keeping its start and saying on a line of its own how
/// many bytes were left out and why. The event's identity and every short field are kept;
/// telemetry never fails the write it rides (spec: "telemetry never fails the resume").
pub fn fit(event: &Event, max_bytes: usize) -> Vec<u8> {
    let max_bytes = max_bytes.min(MAX_EVENT_BYTES);
    let mut json = event.to_json();
    if json.len() <= max_bytes {
        return json;
    }
    let mut event = event.clone();
    while json.len() > max_bytes {
        let over = json.len() - max_bytes;
        let Some(longest) = longest_text(&mut event.body) else {
            break;
        };
        if longest.len() < 1024 {
            break; // nothing left worth cutting: the store's refusal names the write
        }
        // JSON can grow a text six-fold, so cut what is over, and at least half
        let keep = longest.len().saturating_sub(over).min(longest.len() / 2);
        let mut end = keep;
        while !longest.is_char_boundary(end) {
            end -= 1;
        }
        let left = longest.len() - end;
        longest.truncate(end);
        longest.push_str(&format!(
            "\n[… {left} bytes left out so the event fits the store's {max_bytes}-byte requests]"
        ));
        json = event.to_json();
    }
    json
}

/// The longest string anywhere in `value`.
fn longest_text(value: &mut serde_json::Value) -> Option<&mut String> {
    use serde_json::Value;
    match value {
        Value::String(text) => Some(text),
        Value::Array(items) => items
            .iter_mut()
            .filter_map(longest_text)
            .max_by_key(|text| text.len()),
        Value::Object(fields) => fields
            .values_mut()
            .filter_map(longest_text)
            .max_by_key(|text| text.len()),
        _ => None,
    }
}

/// An event read back, with the revision it was written at.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub revision: Revision,
    pub event: Event,
}

fn decode(kv: &KeyValue) -> Result<Stored, Error> {
    let event = serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
        key: kv.key.clone(),
        message: error.to_string(),
    })?;
    Ok(Stored {
        revision: kv.create_revision,
        event,
    })
}

/// How many events one read of a backlog fetches (etcd takes at most 128 ops in one txn,
/// `--max-txn-ops`).
const PAGE_EVENTS: usize = 100;

/// The events written at or after a revision, listed by key alone (no values) and in revision
/// order, to be read a page at a time: a listing of the whole outbox holds its keys, never its
/// bodies.
#[derive(Debug, Clone)]
pub struct Backlog {
    /// the store's revision when the listing was taken (a watch continues from the next one)
    pub revision: Revision,
    keys: Vec<String>,
}

impl Backlog {
    /// Lists the outbox's events created at or after `from_revision`.
    pub async fn list(
        store: &dyn Store,
        keys: &Keys,
        from_revision: Revision,
    ) -> Result<Self, Error> {
        let listing = store.range_keys(&keys.events()).await?;
        let mut found: Vec<(Revision, String)> = listing
            .kvs
            .into_iter()
            .filter(|kv| kv.create_revision >= from_revision)
            .map(|kv| (kv.create_revision, kv.key))
            .collect();
        found.sort();
        Ok(Self {
            revision: listing.revision,
            keys: found.into_iter().map(|(_, key)| key).collect(),
        })
    }

    /// How many events the listing names.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the listing names no event.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The listed events, a page read at a time as the stream is polled. An event whose
    /// retention ended after the listing is skipped; one that does not decode ends its item
    /// with the error.
    pub fn stream(
        self,
        store: Arc<dyn Store>,
    ) -> impl futures::Stream<Item = Result<Stored, Error>> + Send + 'static {
        let pages: Vec<Vec<String>> = self
            .keys
            .chunks(PAGE_EVENTS)
            .map(<[String]>::to_vec)
            .collect();
        futures::stream::iter(pages)
            .then(move |page| {
                let store = store.clone();
                async move { read_page(store.as_ref(), &page).await }
            })
            .flat_map(|page| {
                let items: Vec<Result<Stored, Error>> = match page {
                    Ok(page) => page,
                    Err(error) => vec![Err(error)],
                };
                futures::stream::iter(items)
            })
    }
}

/// Reads the events at `event_keys` in one txn, each decoded in turn; a gone key is skipped.
async fn read_page(
    store: &dyn Store,
    event_keys: &[String],
) -> Result<Vec<Result<Stored, Error>>, Error> {
    let gets: Vec<Op> = event_keys.iter().cloned().map(Op::get).collect();
    let read = store.txn(crate::store::Txn::new().and_then(gets)).await?;
    Ok(read
        .results
        .iter()
        .filter_map(|result| match result {
            crate::store::OpResult::Get(Some(kv)) => Some(decode(kv)),
            _ => None,
        })
        .collect())
}

/// Every event written at or after `from_revision`, in revision order.
pub async fn read_from(
    store: &dyn Store,
    keys: &Keys,
    from_revision: Revision,
) -> Result<Vec<Stored>, Error> {
    let backlog = Backlog::list(store, keys, from_revision).await?;
    read_all(store, &backlog.keys).await
}

/// The events at `event_keys`, a page at a time, in the order named; a gone key is skipped.
async fn read_all(store: &dyn Store, event_keys: &[String]) -> Result<Vec<Stored>, Error> {
    let mut events = Vec::with_capacity(event_keys.len());
    for page in event_keys.chunks(PAGE_EVENTS) {
        for stored in read_page(store, page).await? {
            events.push(stored?);
        }
    }
    Ok(events)
}

/// Every event of `turn_id`, in revision order, read through the turn's index: a `show` of a
/// turn reads its own events, never the outbox. An outbox written before the index existed
/// holds events the index does not name: when the index names none, the outbox is read.
pub async fn read_turn(
    store: &dyn Store,
    keys: &Keys,
    turn_id: &str,
) -> Result<Vec<Stored>, Error> {
    let index = store.range_keys(&keys.turn_events(turn_id)).await?;
    if index.kvs.is_empty() {
        let mut all = read_from(store, keys, 0).await?;
        all.retain(|stored| stored.event.turn_id == turn_id);
        return Ok(all);
    }
    let prefix = keys.turn_events(turn_id);
    let event_keys: Vec<String> = index
        .kvs
        .iter()
        .filter_map(|kv| kv.key.strip_prefix(&prefix))
        .map(|id| keys.event(id))
        .collect();
    let mut events = read_all(store, &event_keys).await?;
    events.sort_by_key(|stored| stored.revision);
    Ok(events)
}

/// Decodes a watched put of an event key.
pub fn from_watch(kv: &KeyValue) -> Result<Stored, Error> {
    decode(kv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_past_the_stores_request_limit_is_cut_to_fit_and_says_so() {
        let body = serde_json::json!({
            "record": {"response": "r".repeat(3 << 20), "notes": "q".repeat(100),
                       "activity_transcript": ["\u{1}".repeat(1 << 20)]},
            "succeeded": true,
        });
        let event = Event::new(
            kind::TURN_REPLIED,
            &["t"],
            "t",
            "l",
            "s",
            crate::clock::now(),
            body,
        );
        let limit = 1536 * 1024;
        let json = fit(&event, limit);
        assert!(json.len() <= limit, "{} over {limit}", json.len());
        let fitted: Event = serde_json::from_slice(&json).expect("still an event");
        assert_eq!((&fitted.id, &fitted.kind), (&event.id, &event.kind));
        assert_eq!(fitted.body["record"]["notes"], "q".repeat(100));
        assert_eq!(fitted.body["succeeded"], true);
        let response = fitted.body["record"]["response"].as_str().expect("text");
        assert!(
            response.ends_with("-byte requests]"),
            "says what it left out"
        );
        // one that fits is untouched, and no event is ever past the broker's cap
        assert_eq!(fit(&fitted, limit), json);
        assert!(fit(&event, usize::MAX).len() <= MAX_EVENT_BYTES);
    }

    #[tokio::test]
    async fn a_turns_events_are_read_through_its_index_and_an_unindexed_outbox_still_reads() {
        use crate::store::{StoreExt, Txn};
        let dir = tempfile::tempdir().expect("dir");
        let store = crate::store::embedded::EmbeddedStore::open(dir.path())
            .await
            .expect("store");
        let keys = Keys::new("/t");
        let lease = store.lease_grant(600).await.expect("lease");
        for (turn, n) in [("turn-a", 3), ("turn-b", 2), ("turn-a", 4)] {
            let event = Event::new(
                kind::RUN_FAILED,
                &[turn, &n.to_string()],
                turn,
                "l",
                "s",
                crate::clock::now(),
                serde_json::json!({"n": n}),
            );
            let (compare, puts) = create(&keys, &event, lease, usize::MAX);
            store
                .txn(Txn::new().when([compare]).and_then(puts))
                .await
                .expect("write");
        }
        // written before the index existed: in the outbox alone
        let old = Event::new(
            kind::RUN_FAILED,
            &["turn-c"],
            "turn-c",
            "l",
            "s",
            crate::clock::now(),
            serde_json::json!({}),
        );
        store
            .put(&keys.event(&old.id), old.to_json())
            .await
            .expect("write");
        let a = read_turn(&store, &keys, "turn-a").await.expect("read");
        let bodies: Vec<_> = a.iter().map(|s| s.event.body["n"].clone()).collect();
        assert_eq!(bodies, [serde_json::json!(3), serde_json::json!(4)]);
        assert!(a[0].revision < a[1].revision);
        assert_eq!(
            read_turn(&store, &keys, "turn-b")
                .await
                .expect("read")
                .len(),
            1
        );
        assert_eq!(
            read_turn(&store, &keys, "turn-c").await.expect("read")[0]
                .event
                .id,
            old.id
        );
        assert!(
            read_turn(&store, &keys, "turn-z")
                .await
                .expect("read")
                .is_empty()
        );
    }

    #[test]
    fn ids_are_derived_from_what_is_announced() {
        let at = crate::clock::now();
        let a = Event::new(
            kind::RUN_FAILED,
            &["t", "x"],
            "t",
            "l",
            "s",
            at,
            Default::default(),
        );
        let b = Event::new(
            kind::RUN_FAILED,
            &["t", "x"],
            "t",
            "l",
            "s",
            at,
            Default::default(),
        );
        let c = Event::new(
            kind::RUN_FAILED,
            &["tx", ""],
            "t",
            "l",
            "s",
            at,
            Default::default(),
        );
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, c.id, "parts are separated unambiguously");
    }
}

#[cfg(test)]
mod backlog_tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Range, Txn, TxnResponse, WatchStream};

    /// The embedded store, counting what a reader asks of it.
    #[derive(Debug)]
    struct Counted {
        inner: EmbeddedStore,
        whole_ranges: AtomicUsize,
        largest_read: AtomicUsize,
    }

    #[async_trait]
    impl Store for Counted {
        async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
            self.inner.get(key).await
        }
        async fn range(&self, prefix: &str) -> Result<Range, Error> {
            self.whole_ranges.fetch_add(1, Ordering::SeqCst);
            self.inner.range(prefix).await
        }
        async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
            self.inner.range_keys(prefix).await
        }
        async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
            if !txn.writes() {
                self.largest_read
                    .fetch_max(txn.success.len(), Ordering::SeqCst);
            }
            self.inner.txn(txn).await
        }
        async fn lease_grant(&self, ttl: i64) -> Result<LeaseId, Error> {
            self.inner.lease_grant(ttl).await
        }
        async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error> {
            self.inner.lease_keep_alive(lease).await
        }
        async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error> {
            self.inner.lease_revoke(lease).await
        }
        async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error> {
            self.inner.lease_time_to_live(lease).await
        }
        async fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream, Error> {
            self.inner.watch(prefix, from).await
        }
    }

    #[tokio::test]
    async fn a_backlog_is_listed_by_key_and_read_a_page_at_a_time_in_revision_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Counted {
            inner: EmbeddedStore::open(dir.path()).await.unwrap(),
            whole_ranges: AtomicUsize::new(0),
            largest_read: AtomicUsize::new(0),
        });
        let keys = Keys::new("/t");
        let lease = store.lease_grant(600).await.unwrap();
        let mut written = Vec::new();
        for n in 0..250 {
            let event = Event::new(
                kind::RUN_STARTED,
                &[&n.to_string()],
                &format!("turn-{n}"),
                "l",
                "s",
                crate::clock::now(),
                serde_json::json!({"n": n, "pad": "x".repeat(4096)}),
            );
            let (compare, ops) = create(&keys, &event, lease, 1 << 20);
            let done = store
                .txn(Txn::new().when([compare]).and_then(ops))
                .await
                .unwrap();
            written.push((done.revision, event.id));
        }
        let listing = store.range_keys(&keys.events()).await.unwrap();
        assert_eq!(listing.kvs.len(), 250);
        assert!(
            listing.kvs.iter().all(|kv| kv.value.is_empty()),
            "keys alone"
        );

        let from = written[40].0;
        let backlog = Backlog::list(store.as_ref(), &keys, from).await.unwrap();
        assert_eq!(backlog.len(), 210);
        // an event whose retention ends after the listing is skipped, never an error
        let gone = &written[100].1;
        store
            .txn(Txn::new().and_then([Op::delete(keys.event(gone))]))
            .await
            .unwrap();
        let read: Vec<Stored> = backlog
            .stream(store.clone())
            .map(Result::unwrap)
            .collect()
            .await;
        let expected: Vec<&String> = written[40..]
            .iter()
            .filter(|(_, id)| id != gone)
            .map(|(_, id)| id)
            .collect();
        let got: Vec<&String> = read.iter().map(|stored| &stored.event.id).collect();
        assert_eq!(got, expected, "every listed event once, in revision order");
        assert_eq!(
            store.whole_ranges.load(Ordering::SeqCst),
            0,
            "no whole read"
        );
        assert!(store.largest_read.load(Ordering::SeqCst) <= PAGE_EVENTS);
        assert_eq!(
            read_from(store.as_ref(), &keys, from).await.unwrap().len(),
            209
        );
    }
}
