//! What boxfleet needs of an etcd cluster, checked against the one it is given (the README's
//! "Operating etcd"): a version that has what boxfleet uses, requests as large as boxfleet's
//! largest write, history that is compacted, and room to write. etcd does not report its
//! `--max-request-bytes` or `--quota-backend-bytes`, so the request size is probed and the
//! rest read from its status and alarms. Nothing here writes.

use etcd_client as etcd;

use super::EtcdStore;
use super::classify::Effect;
use crate::store::Error;

/// The largest single request boxfleet sends: an event of up to 8 MiB (DESIGN §15) goes in
/// one txn beside the run record it announces. etcd's default `--max-request-bytes` is 1.5 MiB.
pub const LARGEST_WRITE_BYTES: usize = 10 * 1024 * 1024;

/// What etcd's gRPC server takes on top of `--max-request-bytes` (etcd's `grpcOverheadBytes`):
/// a request is refused at the gRPC layer when it is larger than the two together.
const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

/// Room left for the probe's own framing (the key's tag and length), so a server whose limit
/// is exactly [`LARGEST_WRITE_BYTES`] takes it.
const PROBE_FRAMING_BYTES: usize = 64;

/// Past this many revisions with the first one still kept, the history is taken as never
/// compacted.
pub const UNCOMPACTED_REVISIONS_WARN: i64 = 100_000;

/// The oldest etcd whose API boxfleet uses throughout.
const OLDEST_VERSION: (u64, u64) = (3, 4);

/// What the check found: the cluster's version and size, and each way it falls short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitsCheck {
    /// the answering member's etcd version
    pub version: String,
    /// its database's size on disk, bytes (given back to the disk only by a defragment)
    pub db_size: i64,
    /// the part of it that holds keys and history, bytes (what compaction gives back)
    pub db_size_in_use: i64,
    /// the store revision now
    pub revision: i64,
    /// one sentence per shortfall, each naming the etcd setting that fixes it
    pub warnings: Vec<String>,
}

impl EtcdStore {
    /// Checks the cluster against what boxfleet needs (see the module doc).
    pub async fn check_limits(&self) -> Result<LimitsCheck, Error> {
        let status = self
            .members
            .call(Effect::Read, |client| async move {
                client.maintenance_client().status().await
            })
            .await?;
        let mut warnings = Vec::new();
        let version = status.version().to_owned();
        if !at_least(&version, OLDEST_VERSION) {
            warnings.push(format!(
                "etcd {version} is older than {}.{}: boxfleet needs etcd 3.4 or later",
                OLDEST_VERSION.0, OLDEST_VERSION.1
            ));
        }
        for error in status.errors() {
            warnings.push(format!("etcd reports: {error}"));
        }
        let alarms = self
            .members
            .call(Effect::Read, |client| async move {
                client
                    .maintenance_client()
                    .alarm(etcd::AlarmAction::Get, etcd::AlarmType::None, None)
                    .await
            })
            .await?;
        for alarm in alarms.alarms() {
            warnings.push(match alarm.alarm() {
                etcd::AlarmType::Nospace => format!(
                    "etcd member {:x} raised NOSPACE: its database reached --quota-backend-bytes \
                     and etcd takes no writes; compact, defragment, raise the quota and run \
                     `etcdctl alarm disarm`",
                    alarm.member_id()
                ),
                other => format!("etcd member {:x} raised {other:?}", alarm.member_id()),
            });
        }
        let limit = self.probe_request_limit().await?;
        if limit < LARGEST_WRITE_BYTES {
            warnings.push(format!(
                "etcd refuses requests over {} KiB: boxfleet writes an event of up to 8 MiB \
                 beside its run record in one txn, and sizes its events down to fit until then; \
                 start every member with --max-request-bytes={LARGEST_WRITE_BYTES}",
                limit / 1024
            ));
        }
        let revision = status.header().map_or(0, |header| header.revision());
        if revision > UNCOMPACTED_REVISIONS_WARN && self.keeps_first_revision().await? {
            warnings.push(format!(
                "etcd keeps every revision since the first ({revision} so far): nothing compacts \
                 its history, which grows until --quota-backend-bytes stops every write; run \
                 etcd with --auto-compaction-mode=periodic --auto-compaction-retention=1h"
            ));
        }
        Ok(LimitsCheck {
            version,
            db_size: status.db_size(),
            db_size_in_use: status.raft_used_db_size(),
            revision,
            warnings,
        })
    }

    /// The largest request etcd takes: a read of a key as large as boxfleet's largest write,
    /// which etcd's gRPC server refuses when `--max-request-bytes` is below
    /// [`LARGEST_WRITE_BYTES`], naming its own limit (`larger than max (A vs. B)`, B being
    /// `--max-request-bytes` and gRPC's overhead). A read writes nothing.
    pub(super) async fn probe_request_limit(&self) -> Result<usize, Error> {
        let key = vec![b'\x00'; LARGEST_WRITE_BYTES + GRPC_OVERHEAD_BYTES - PROBE_FRAMING_BYTES];
        let key = &key;
        // on a connection of its own: etcd may close the one a refused request came on
        match self
            .members
            .call_apart(|client| async move { client.kv_client().get(key.clone(), None).await })
            .await
        {
            Ok(_) => Ok(LARGEST_WRITE_BYTES),
            Err(Error::Invalid(message)) if message.contains("--max-request-bytes") => {
                Ok(refused_limit(&message))
            }
            Err(error) => Err(error),
        }
    }

    /// Whether revision 1 can still be read (no compaction has ever run).
    async fn keeps_first_revision(&self) -> Result<bool, Error> {
        match self
            .members
            .call(Effect::Read, |client| async move {
                let options = etcd::GetOptions::new().with_revision(1);
                client.kv_client().get("\u{0}", Some(options)).await
            })
            .await
        {
            Ok(_) => Ok(true),
            Err(Error::Compacted { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// etcd's `--max-request-bytes` as a refusal states it (`larger than max (A vs. B)`, B with
/// gRPC's overhead on top); etcd's default, 1.5 MiB, when the refusal states none.
fn refused_limit(message: &str) -> usize {
    let stated = message
        .split(" vs. ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|number| number.trim().parse::<usize>().ok());
    match stated {
        Some(limit) => limit.saturating_sub(GRPC_OVERHEAD_BYTES).max(64 * 1024),
        None => ETCD_DEFAULT_REQUEST_BYTES,
    }
}

/// etcd's own `--max-request-bytes` default.
pub(super) const ETCD_DEFAULT_REQUEST_BYTES: usize = 1536 * 1024;

/// Whether `version` (`3.4.23`) is at least `oldest`; an unreadable one passes.
fn at_least(version: &str, oldest: (u64, u64)) -> bool {
    let mut parts = version.split('.').map(|part| part.parse::<u64>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= oldest,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_states_the_limit_it_holds_to() {
        let refused = "status: ResourceExhausted, message: \"grpc: received message larger than max (11010000 vs. 2097152)\"";
        assert_eq!(refused_limit(refused), 1536 * 1024);
        assert_eq!(refused_limit("request is too large"), 1536 * 1024);
    }

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert!(at_least("3.4.23", (3, 4)));
        assert!(at_least("3.5.0", (3, 4)));
        assert!(at_least("4.0.0", (3, 4)));
        assert!(!at_least("3.3.27", (3, 4)));
        assert!(at_least("unknown", (3, 4)));
    }
}
