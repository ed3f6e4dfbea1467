//! `EtcdStore`: the fleet's store, over etcd-client.
//!
//! Errors are classed here, where etcd is called: a read that fails is retryable; a write
//! that fails after it may have been sent is indeterminate (etcd answers "request timed out"
//! or drops the connection for writes that did land); a refusal etcd states is terminal.
//! Every call is bounded by `call_timeout`.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client as etcd;
use futures::StreamExt;

use super::{
    Compare, CompareOp, Error, KeyValue, LeaseId, Op, OpResult, Range, Revision, Store, Target,
    Txn, TxnResponse, WatchEvent, WatchStream,
};

/// The default bound on one etcd call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A store backed by an etcd v3 cluster.
#[derive(Clone)]
pub struct EtcdStore {
    client: etcd::Client,
    call_timeout: Duration,
    endpoints: Vec<String>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("call_timeout", &self.call_timeout)
            .finish()
    }
}

/// Whether the failed call could have written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Effect {
    Read,
    Write,
}

impl EtcdStore {
    /// Connects to `endpoints` (`http://host:port`), bounded by `call_timeout`.
    pub async fn connect(endpoints: &[String], call_timeout: Duration) -> Result<Self, Error> {
        let options = etcd::ConnectOptions::new()
            .with_connect_timeout(call_timeout)
            .with_timeout(call_timeout)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5));
        let client = tokio::time::timeout(
            call_timeout,
            etcd::Client::connect(endpoints, Some(options)),
        )
        .await
        .map_err(|_| Error::Timeout(call_timeout, false))?
        .map_err(|error| classify(error, Effect::Read))?;
        Ok(Self {
            client,
            call_timeout,
            endpoints: endpoints.to_vec(),
        })
    }

    async fn bounded<T, F>(&self, effect: Effect, call: F) -> Result<T, Error>
    where
        F: std::future::Future<Output = Result<T, etcd::Error>>,
    {
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(result) => result.map_err(|error| classify(error, effect)),
            Err(_) => Err(Error::Timeout(self.call_timeout, effect == Effect::Write)),
        }
    }
}

/// Sorts an etcd error into the store's classes.
fn classify(error: etcd::Error, effect: Effect) -> Error {
    use tonic::Code;
    let unknown_outcome = |message: String| match effect {
        Effect::Read => Error::Unavailable(message),
        Effect::Write => Error::Indeterminate(message),
    };
    match error {
        etcd::Error::GRpcStatus(status) => {
            let message = format!("{}: {}", status.code(), status.message());
            match status.code() {
                Code::NotFound if status.message().contains("lease not found") => {
                    Error::LeaseNotFound(0)
                }
                Code::OutOfRange if status.message().contains("compacted") => Error::Compacted {
                    requested: 0,
                    oldest: 0,
                },
                // etcd refused before applying: nothing was written
                Code::ResourceExhausted => Error::Unavailable(message),
                Code::Unavailable if status.message().contains("no leader") => {
                    Error::Unavailable(message)
                }
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Unknown
                | Code::Internal
                | Code::Aborted => unknown_outcome(message),
                _ => Error::Invalid(message),
            }
        }
        etcd::Error::TransportError(error) => unknown_outcome(format!("transport: {error}")),
        etcd::Error::IoError(error) => unknown_outcome(format!("io: {error}")),
        // etcd-client's own word for a keep-alive of an expired or revoked lease
        etcd::Error::LeaseKeepAliveError(message) if message == "lease not found" => {
            Error::LeaseNotFound(0)
        }
        etcd::Error::LeaseKeepAliveError(message) => Error::Unavailable(message),
        etcd::Error::WatchError(message) => Error::Unavailable(message),
        other => Error::Invalid(other.to_string()),
    }
}

fn key_value(kv: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

fn compare(compare: Compare) -> etcd::Compare {
    let op = match compare.op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Greater => etcd::CompareOp::Greater,
        CompareOp::Less => etcd::CompareOp::Less,
    };
    match compare.target {
        Target::ModRevision(revision) => etcd::Compare::mod_revision(compare.key, op, revision),
        Target::CreateRevision(revision) => {
            etcd::Compare::create_revision(compare.key, op, revision)
        }
        Target::Version(version) => etcd::Compare::version(compare.key, op, version),
        Target::Value(value) => etcd::Compare::value(compare.key, op, value),
    }
}

fn txn_op(op: Op) -> etcd::TxnOp {
    match op {
        Op::Put { key, value, lease } => {
            let options = (lease != 0).then(|| etcd::PutOptions::new().with_lease(lease));
            etcd::TxnOp::put(key, value, options)
        }
        Op::Delete { key } => etcd::TxnOp::delete(key, None),
        Op::DeletePrefix { prefix } => {
            etcd::TxnOp::delete(prefix, Some(etcd::DeleteOptions::new().with_prefix()))
        }
        Op::Get { key } => etcd::TxnOp::get(key, None),
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        let mut kv = self.client.kv_client();
        let response = self.bounded(Effect::Read, kv.get(key, None)).await?;
        Ok(response.kvs().first().map(key_value))
    }

    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        let mut kv = self.client.kv_client();
        let options = etcd::GetOptions::new().with_prefix();
        let response = self
            .bounded(Effect::Read, kv.get(prefix, Some(options)))
            .await?;
        let revision = response.header().map_or(0, |header| header.revision());
        Ok(Range {
            kvs: response.kvs().iter().map(key_value).collect(),
            revision,
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        let effect = if txn.writes() {
            Effect::Write
        } else {
            Effect::Read
        };
        let request = etcd::Txn::new()
            .when(txn.compares.into_iter().map(compare).collect::<Vec<_>>())
            .and_then(txn.success.into_iter().map(txn_op).collect::<Vec<_>>())
            .or_else(txn.failure.into_iter().map(txn_op).collect::<Vec<_>>());
        let mut kv = self.client.kv_client();
        let response = match self.bounded(effect, kv.txn(request)).await {
            Err(Error::LeaseNotFound(_)) => {
                return Err(Error::Invalid(
                    "a put names a lease that expired or was revoked".into(),
                ));
            }
            other => other?,
        };
        let results = response
            .op_responses()
            .into_iter()
            .map(|op| match op {
                etcd::TxnOpResponse::Put(_) => OpResult::Put,
                etcd::TxnOpResponse::Delete(delete) => OpResult::Delete(delete.deleted()),
                etcd::TxnOpResponse::Get(get) => OpResult::Get(get.kvs().first().map(key_value)),
                etcd::TxnOpResponse::Txn(_) => OpResult::Put,
            })
            .collect();
        Ok(TxnResponse {
            succeeded: response.succeeded(),
            revision: response.header().map_or(0, |header| header.revision()),
            results,
        })
    }

    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        let mut lease = self.client.lease_client();
        let response = self
            .bounded(Effect::Write, lease.grant(ttl_seconds, None))
            .await?;
        Ok(response.id())
    }

    async fn lease_keep_alive(&self, id: LeaseId) -> Result<i64, Error> {
        let mut lease = self.client.lease_client();
        let ttl = match self
            .bounded(Effect::Read, async move {
                let (mut keeper, mut responses) = lease.keep_alive(id).await?;
                keeper.keep_alive().await?;
                match responses.message().await? {
                    Some(response) => Ok(response.ttl()),
                    None => Err(etcd::Error::LeaseKeepAliveError(
                        "keep-alive stream closed".into(),
                    )),
                }
            })
            .await
        {
            Err(Error::LeaseNotFound(_)) => return Err(Error::LeaseNotFound(id)),
            other => other?,
        };
        if ttl <= 0 {
            return Err(Error::LeaseNotFound(id));
        }
        Ok(ttl)
    }

    async fn lease_revoke(&self, id: LeaseId) -> Result<(), Error> {
        let mut lease = self.client.lease_client();
        match self.bounded(Effect::Write, lease.revoke(id)).await {
            Ok(_) => Ok(()),
            Err(Error::LeaseNotFound(_)) => Err(Error::LeaseNotFound(id)),
            Err(error) => Err(error),
        }
    }

    async fn lease_time_to_live(&self, id: LeaseId) -> Result<Option<i64>, Error> {
        let mut lease = self.client.lease_client();
        match self
            .bounded(Effect::Read, lease.time_to_live(id, None))
            .await
        {
            Ok(response) if response.ttl() > 0 => Ok(Some(response.ttl())),
            Ok(_) | Err(Error::LeaseNotFound(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        let mut watch = self.client.watch_client();
        let mut options = etcd::WatchOptions::new().with_prefix();
        if from_revision > 0 {
            options = options.with_start_revision(from_revision);
        }
        let stream = self
            .bounded(Effect::Read, watch.watch(prefix, Some(options)))
            .await?;
        let events = futures::stream::unfold(
            (stream, from_revision, false),
            |(mut stream, requested, done)| async move {
                if done {
                    return None;
                }
                let batch: Vec<Result<WatchEvent, Error>> = match stream.message().await {
                    Ok(Some(response)) if response.compact_revision() > 0 => {
                        vec![Err(Error::Compacted {
                            requested,
                            oldest: response.compact_revision(),
                        })]
                    }
                    Ok(Some(response)) if response.canceled() => vec![Err(Error::Unavailable(
                        format!("watch canceled: {}", response.cancel_reason()),
                    ))],
                    Ok(Some(response)) => response
                        .events()
                        .iter()
                        .filter_map(|event| {
                            let kv = event.kv()?;
                            Some(Ok(match event.event_type() {
                                etcd::EventType::Put => WatchEvent::Put(key_value(kv)),
                                etcd::EventType::Delete => WatchEvent::Delete {
                                    key: String::from_utf8_lossy(kv.key()).into_owned(),
                                    revision: kv.mod_revision(),
                                },
                            }))
                        })
                        .collect(),
                    Ok(None) => vec![Err(Error::Unavailable("watch stream closed".into()))],
                    Err(error) => vec![Err(classify(error, Effect::Read))],
                };
                let ends = batch.iter().any(Result::is_err);
                Some((futures::stream::iter(batch), (stream, requested, ends)))
            },
        )
        .flatten();
        Ok(Box::pin(events))
    }
}
