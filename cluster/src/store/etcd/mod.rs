//! `EtcdStore`: the fleet's store, over etcd-client, on an etcd cluster of one or more members.
//!
//! - `members`: one client per member and the loop every call goes through — a member that
//!   is dead or has no leader is passed over, a read whose answer is lost goes to the next
//!   member, a write whose answer is lost is indeterminate (the caller re-reads), every call
//!   bounded by `call_timeout` (I11);
//! - `classify`: what each etcd-client error means for the call;
//! - `convert`: our types to etcd's and back;
//! - `watch`: a watch on one member as our stream;
//! - [`limits`]: what boxfleet needs of etcd, checked against the cluster it is given.
//!
//! Every client asks etcd to *require a leader*: a member cut off from the quorum refuses
//! at once ("no leader") instead of serving a stale read or holding a write, so the call goes
//! to a member that can serve it. Lease keep-alives are one round trip each, made through the
//! same loop, so a session lease lives across a member's death and a leader election.

mod classify;
mod convert;
pub mod limits;
mod members;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client as etcd;

use super::health::StoreHealth;
use super::{Error, KeyValue, LeaseId, Range, Revision, Store, Txn, TxnResponse, WatchStream};
use classify::Effect;
use convert::key_value;
use members::Members;

/// The default bound on one etcd call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP/2 keep-alive on every member's connection: a member that stops answering is
/// noticed within interval + timeout even while no call is waiting on it.
const KEEP_ALIVE: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(5));

/// How to reach an etcd cluster.
#[derive(Clone)]
pub struct EtcdOptions {
    /// the members' client URLs, all `http://` or all `https://`
    pub endpoints: Vec<String>,
    /// the bound on one call, every attempt and pause included
    pub call_timeout: Duration,
    /// for `https://` endpoints
    pub tls: Option<EtcdTls>,
    /// etcd's username/password auth
    pub user: Option<(String, String)>,
}

impl std::fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("endpoints", &self.endpoints)
            .field("call_timeout", &self.call_timeout)
            .field("tls", &self.tls.as_ref().map(|tls| tls.identity.is_some()))
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .finish()
    }
}

/// TLS to etcd: the CA its server certificates are checked against, and the client
/// certificate to present when etcd asks for one (`--client-cert-auth`).
#[derive(Clone)]
pub struct EtcdTls {
    /// PEM
    pub ca: Vec<u8>,
    /// PEM certificate and key
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca", &format_args!("{} bytes", self.ca.len()))
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

impl EtcdOptions {
    /// Plain `http://` endpoints, no auth.
    pub fn plain(endpoints: &[String], call_timeout: Duration) -> Self {
        Self {
            endpoints: endpoints.to_vec(),
            call_timeout,
            tls: None,
            user: None,
        }
    }

    fn connect_options(&self) -> etcd::ConnectOptions {
        let attempt = members::attempt_timeout(self.call_timeout);
        let mut options = etcd::ConnectOptions::new()
            .with_connect_timeout(attempt)
            .with_timeout(attempt)
            .with_keep_alive(KEEP_ALIVE.0, KEEP_ALIVE.1)
            .with_require_leader(true);
        if let Some(tls) = &self.tls {
            let mut config =
                etcd::TlsOptions::new().ca_certificate(etcd::Certificate::from_pem(&tls.ca));
            if let Some((cert, key)) = &tls.identity {
                config = config.identity(etcd::Identity::from_pem(cert, key));
            }
            options = options.with_tls(config);
        }
        if let Some((name, password)) = &self.user {
            options = options
                .with_user(name.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        options
    }
}

/// The largest reply boxfleet reads from etcd in one message: a range of the outbox or a
/// watch's batch holds many events of up to 8 MiB each, past the gRPC client's 4 MiB default.
const MAX_REPLY_BYTES: usize = 512 * 1024 * 1024;

/// A store backed by an etcd v3 cluster.
#[derive(Clone)]
pub struct EtcdStore {
    members: Arc<Members>,
    health: StoreHealth,
    /// the largest request etcd takes, as probed at connect (`limits.rs`)
    max_request: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("members", &self.members)
            .finish()
    }
}

impl EtcdStore {
    /// Connects to plain `http://host:port` endpoints, bounded by `call_timeout`.
    pub async fn connect(endpoints: &[String], call_timeout: Duration) -> Result<Self, Error> {
        Self::connect_with(EtcdOptions::plain(endpoints, call_timeout)).await
    }

    /// Connects as `options` say. Members are connected on first use; this checks the
    /// options and that some member answers.
    pub async fn connect_with(options: EtcdOptions) -> Result<Self, Error> {
        if options.endpoints.is_empty() {
            return Err(Error::Invalid("no etcd endpoint given".into()));
        }
        let secure = options.endpoints.iter().any(|e| e.starts_with("https://"));
        let plain = options.endpoints.iter().any(|e| e.starts_with("http://"));
        match (secure, plain, options.tls.is_some()) {
            (true, true, _) => {
                return Err(Error::Invalid(
                    "the etcd endpoints mix http:// and https://; use one scheme for all".into(),
                ));
            }
            (true, false, false) => {
                return Err(Error::Invalid(
                    "https:// etcd endpoints need the CA that signed etcd's certificates \
                     (store.tls.ca)"
                        .into(),
                ));
            }
            (false, _, true) => {
                return Err(Error::Invalid(
                    "store.tls is given but the etcd endpoints are http://; write them as \
                     https://"
                        .into(),
                ));
            }
            _ => {}
        }
        let health = StoreHealth::new();
        let members = Arc::new(Members::new(
            &options.endpoints,
            options.connect_options(),
            options.call_timeout,
            health.clone(),
        ));
        let store = Self {
            members,
            health,
            max_request: Arc::new(std::sync::atomic::AtomicUsize::new(
                limits::LARGEST_WRITE_BYTES,
            )),
        };
        // one read: refuses bad credentials or certificates now, not at the first launch
        match store.get("\u{0}").await {
            Ok(_) => {
                // unprobed (the member went away meanwhile), etcd's own default is assumed
                let limit = match store.probe_request_limit().await {
                    Ok(limit) => limit,
                    Err(error) => {
                        tracing::warn!(%error, "store_request_limit_unprobed");
                        limits::ETCD_DEFAULT_REQUEST_BYTES
                    }
                };
                store
                    .max_request
                    .store(limit, std::sync::atomic::Ordering::Relaxed);
                Ok(store)
            }
            Err(Error::Unavailable(message)) if options.tls.is_some() => {
                Err(Error::Unavailable(format!(
                    "{message} (over TLS: a handshake etcd refuses looks like a dropped \
                     connection; check store.tls's ca, cert and key against etcd's \
                     --trusted-ca-file and --client-cert-auth)"
                )))
            }
            Err(error) => Err(error),
        }
    }

    /// The members' endpoints.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.endpoints()
    }

    /// The bound on one call.
    pub fn call_timeout(&self) -> Duration {
        self.members.call_timeout()
    }
}

impl EtcdStore {
    /// One prefix read with `options` (a whole prefix, or its keys alone).
    async fn range_with(&self, prefix: &str, options: etcd::GetOptions) -> Result<Range, Error> {
        let options = &options;
        let response = self
            .members
            .call(Effect::Read, |client| async move {
                client
                    .kv_client()
                    .max_decoding_message_size(MAX_REPLY_BYTES)
                    .get(prefix, Some(options.clone()))
                    .await
            })
            .await?;
        let revision = response.header().map_or(0, |header| header.revision());
        Ok(Range {
            kvs: response.kvs().iter().map(key_value).collect(),
            revision,
        })
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, Error> {
        let response = self
            .members
            .call(Effect::Read, |client| async move {
                client
                    .kv_client()
                    .max_decoding_message_size(MAX_REPLY_BYTES)
                    .get(key, None)
                    .await
            })
            .await?;
        Ok(response.kvs().first().map(key_value))
    }

    async fn range(&self, prefix: &str) -> Result<Range, Error> {
        self.range_with(prefix, etcd::GetOptions::new().with_prefix())
            .await
    }

    async fn range_keys(&self, prefix: &str) -> Result<Range, Error> {
        let options = etcd::GetOptions::new().with_prefix().with_keys_only();
        self.range_with(prefix, options).await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, Error> {
        let effect = if txn.writes() {
            Effect::Write
        } else {
            Effect::Read
        };
        let txn = &txn;
        let response = self
            .members
            .call(effect, |client| async move {
                client
                    .kv_client()
                    .max_decoding_message_size(MAX_REPLY_BYTES)
                    .max_encoding_message_size(MAX_REPLY_BYTES)
                    .txn(convert::txn(txn.clone()))
                    .await
            })
            .await;
        match response {
            Ok(response) => Ok(convert::txn_response(&response)),
            Err(Error::LeaseNotFound(_)) => Err(Error::Invalid(
                "a put names a lease that expired or was revoked".into(),
            )),
            Err(error) => Err(error),
        }
    }

    async fn lease_grant(&self, ttl_seconds: i64) -> Result<LeaseId, Error> {
        let response = self
            .members
            .call(Effect::Write, |client| async move {
                client.lease_client().grant(ttl_seconds, None).await
            })
            .await?;
        Ok(response.id())
    }

    async fn lease_keep_alive(&self, id: LeaseId) -> Result<i64, Error> {
        // a keep-alive only extends: repeating it is harmless, so it may go member to member
        let ttl = self
            .members
            .call(Effect::Read, |client| async move {
                let (mut keeper, mut responses) = client.lease_client().keep_alive(id).await?;
                keeper.keep_alive().await?;
                match responses.message().await? {
                    Some(response) => Ok(response.ttl()),
                    None => Err(etcd::Error::LeaseKeepAliveError(
                        "keep-alive stream closed".into(),
                    )),
                }
            })
            .await
            .map_err(|error| match error {
                Error::LeaseNotFound(_) => Error::LeaseNotFound(id),
                other => other,
            })?;
        if ttl <= 0 {
            return Err(Error::LeaseNotFound(id));
        }
        Ok(ttl)
    }

    async fn lease_revoke(&self, id: LeaseId) -> Result<(), Error> {
        match self
            .members
            .call(Effect::Write, |client| async move {
                client.lease_client().revoke(id).await
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::LeaseNotFound(_)) => Err(Error::LeaseNotFound(id)),
            Err(error) => Err(error),
        }
    }

    async fn lease_time_to_live(&self, id: LeaseId) -> Result<Option<i64>, Error> {
        match self
            .members
            .call(Effect::Read, |client| async move {
                client.lease_client().time_to_live(id, None).await
            })
            .await
        {
            Ok(response) if response.ttl() > 0 => Ok(Some(response.ttl())),
            Ok(_) | Err(Error::LeaseNotFound(_)) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, Error> {
        let (stream, member) = self
            .members
            .call_at(Effect::Read, |client| async move {
                let mut options = etcd::WatchOptions::new().with_prefix();
                if from_revision > 0 {
                    options = options.with_start_revision(from_revision);
                }
                client
                    .watch_client()
                    .max_decoding_message_size(MAX_REPLY_BYTES)
                    .watch(prefix, Some(options))
                    .await
            })
            .await?;
        Ok(watch::events(
            stream,
            from_revision,
            self.members.clone(),
            member,
        ))
    }

    fn health(&self) -> StoreHealth {
        self.health.clone()
    }

    fn max_request_bytes(&self) -> usize {
        self.max_request.load(std::sync::atomic::Ordering::Relaxed)
    }
}
