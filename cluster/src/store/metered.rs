//! A store that counts what it does (`boxfleet_store_txns_total` by outcome, their latency,
//! `boxfleet_events_published_total` for every event a txn commits to the outbox, and the
//! reads with the keys they returned). The
//! node wraps its store in one; everything else passes through untouched.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde::Deserialize;

use super::{Error, KeyValue, LeaseId, Op, Range, Revision, Store, Txn, TxnResponse, WatchStream};
use crate::metrics::{EventType, Outcome, ReadSeries, metrics};

/// `inner`, counted.
#[derive(Debug)]
pub struct Metered {
    inner: Arc<dyn Store>,
    /// the outbox's prefix (`{prefix}/events/`): a put under it is an event published
    events: String,
    /// the series of each read: get, range, range_keys
    gets: ReadSeries,
    ranges: ReadSeries,
    key_ranges: ReadSeries,
}

impl Metered {
    pub fn new(inner: Arc<dyn Store>, events_prefix: String) -> Self {
        let m = metrics();
        Metered {
            inner,
            events: events_prefix,
            gets: m.store_read_series("get"),
            ranges: m.store_read_series("range"),
            key_ranges: m.store_read_series("range_keys"),
        }
    }
}

/// The type of an event as the outbox holds it.
fn event_type(value: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: String,
    }
    serde_json::from_slice::<Typed>(value)
        .map(|t| t.kind)
        .unwrap_or_else(|_| "unknown".into())
}

#[async_trait]
impl Store for Metered {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        let got = self.inner.get(key).await;
        if let Ok(found) = &got {
            self.gets.read(usize::from(found.is_some()));
        }
        got
    }

    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        let got = self.inner.range(prefix).await;
        if let Ok(range) = &got {
            self.ranges.read(range.kvs.len());
        }
        got
    }

    async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        let got = self.inner.range_keys(prefix).await;
        if let Ok(range) = &got {
            self.key_ranges.read(range.kvs.len());
        }
        got
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        let events: Vec<String> = txn
            .success
            .iter()
            .filter_map(|op| match op {
                Op::Put { key, value, .. } if key.starts_with(&self.events) => {
                    Some(event_type(value))
                }
                _ => None,
            })
            .collect();
        let began = Instant::now();
        let result = self.inner.txn(txn).await;
        let m = metrics();
        m.store_txn_seconds.observe(began.elapsed().as_secs_f64());
        let outcome = match &result {
            Ok(response) if response.succeeded => {
                for kind in events {
                    m.events_published
                        .get_or_create(&EventType { r#type: kind })
                        .inc();
                }
                "applied"
            }
            Ok(_) => "compare_failed",
            Err(_) => "error",
        };
        m.store_txns
            .get_or_create(&Outcome {
                outcome: outcome.into(),
            })
            .inc();
        result
    }

    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        self.inner.lease_grant(ttl_seconds).await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, Error> {
        let kept = self.inner.lease_keep_alive(lease).await;
        metrics().renewed(match &kept {
            Ok(ttl) if *ttl > 0 => "renewed",
            Ok(_) => "lost",
            Err(_) => "failed",
        });
        kept
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), Error> {
        self.inner.lease_revoke(lease).await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>, Error> {
        self.inner.lease_time_to_live(lease).await
    }

    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        self.inner.watch(prefix, from_revision).await
    }

    fn health(&self) -> super::health::StoreHealth {
        self.inner.health()
    }

    fn max_request_bytes(&self) -> usize {
        self.inner.max_request_bytes()
    }
}
