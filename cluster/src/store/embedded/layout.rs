//! The redb file: its tables, how a key's bookkeeping and a revision's changes are encoded in
//! them (bincode), creating the tables of a new file and checking the format of an old one,
//! reading keys, and the disk errors the file reports, each naming what to do.

use std::path::Path;

use redb::{Durability, ReadableDatabase, ReadableTable, Table, TableDefinition};
use serde::{Deserialize, Serialize};

use super::inner::Inner;
use crate::store::{Error, KeyValue, LeaseId, Revision, WatchEvent};

/// The revision of an empty store, as in etcd: the first write gets revision 2.
pub(super) const EMPTY_REVISION: Revision = 1;

pub(super) const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("kv");
pub(super) const LEASES: TableDefinition<i64, i64> = TableDefinition::new("leases");
pub(super) const LEASE_KEYS: TableDefinition<(i64, &str), ()> = TableDefinition::new("lease_keys");
pub(super) const HISTORY: TableDefinition<i64, &[u8]> = TableDefinition::new("history");
pub(super) const META: TableDefinition<&str, i64> = TableDefinition::new("meta");

/// `meta` rows.
pub(super) const META_REVISION: &str = "revision";
/// The oldest revision a watch may start from; history below it is gone.
pub(super) const META_OLDEST: &str = "oldest";
pub(super) const META_NEXT_LEASE: &str = "next_lease";
/// The bytes `history` holds, kept with every write (a file from before it is summed once).
pub(super) const META_HISTORY_BYTES: &str = "history_bytes";
pub(super) const META_FORMAT: &str = "format";
pub(super) const FORMAT_VERSION: i64 = 1;

/// A key's stored state (the key itself is the table key).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct StoredKv {
    pub(super) value: Vec<u8>,
    pub(super) create_revision: Revision,
    pub(super) mod_revision: Revision,
    pub(super) version: i64,
    pub(super) lease: LeaseId,
}

impl StoredKv {
    pub(super) fn into_key_value(self, key: String) -> KeyValue {
        KeyValue {
            key,
            value: self.value,
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            lease: self.lease,
        }
    }

    pub(super) fn from_key_value(kv: &KeyValue) -> Self {
        Self {
            value: kv.value.clone(),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            lease: kv.lease,
        }
    }
}

/// One change of a revision in `history` (the revision is the table key).
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum StoredEvent {
    Put { key: String, kv: StoredKv },
    Delete { key: String },
}

impl Inner {
    /// Creates the tables of a new file, checks the format of an old one, and returns the
    /// persisted leases with their TTLs.
    pub(super) fn prepare(&self) -> Result<Vec<(LeaseId, i64)>, Error> {
        let write = self.begin_write()?;
        let leases = {
            let mut meta = write
                .open_table(META)
                .map_err(|e| self.disk("open table meta", e))?;
            match self.meta(&meta, META_FORMAT)? {
                None => {
                    meta.insert(META_FORMAT, FORMAT_VERSION)
                        .map_err(|e| self.disk("write the format version", e))?;
                }
                Some(FORMAT_VERSION) => {}
                Some(other) => {
                    return Err(Error::Disk {
                        path: self.path.display().to_string(),
                        message: format!(
                            "the file has format {other}, this build reads format {FORMAT_VERSION}: run a matching boxfleet build, or use another --data-dir"
                        ),
                    });
                }
            }
            write
                .open_table(KV)
                .map_err(|e| self.disk("open table kv", e))?;
            write
                .open_table(LEASE_KEYS)
                .map_err(|e| self.disk("open table lease_keys", e))?;
            let history = write
                .open_table(HISTORY)
                .map_err(|e| self.disk("open table history", e))?;
            if self.meta(&meta, META_HISTORY_BYTES)?.is_none() {
                let mut bytes = 0i64;
                for entry in history.iter().map_err(|e| self.disk("read history", e))? {
                    let (_, value) = entry.map_err(|e| self.disk("read history", e))?;
                    bytes += value.value().len() as i64;
                }
                meta.insert(META_HISTORY_BYTES, bytes)
                    .map_err(|e| self.disk("write the history's size", e))?;
            }
            let leases = write
                .open_table(LEASES)
                .map_err(|e| self.disk("open table leases", e))?;
            let mut found = Vec::new();
            for entry in leases.iter().map_err(|e| self.disk("read leases", e))? {
                let (id, ttl) = entry.map_err(|e| self.disk("read leases", e))?;
                found.push((id.value(), ttl.value()));
            }
            found
        };
        write
            .commit()
            .map_err(|e| self.disk("create the tables", e))?;
        Ok(leases)
    }

    pub(super) fn disk(&self, doing: &str, error: impl Into<redb::Error>) -> Error {
        let error: redb::Error = error.into();
        let failed_io = matches!(error, redb::Error::Io(_) | redb::Error::PreviousIo);
        let error = disk(&self.path, doing, error);
        if failed_io {
            self.failed(&error);
        }
        error
    }

    /// The file failed an I/O: redb takes no write after one until it is reopened, so the
    /// store is down for good and says so (the node stops non-zero, for its supervisor to
    /// restart it; gRPC health says `NOT_SERVING` meanwhile).
    pub(super) fn failed(&self, error: &Error) {
        self.health.mark_unreachable(&format!(
            "{error}; the embedded store takes no write until the node restarts"
        ));
    }

    /// A commit that failed may still reach the disk (the data was written, its fsync failed):
    /// the caller must re-read before deciding, and the store should be reopened.
    pub(super) fn commit_failed(&self, doing: &str, error: redb::CommitError) -> Error {
        let error = Error::Indeterminate(format!(
            "embedded store at {}: {doing}: {error}: the write may or may not have landed; check the disk, restart the node",
            self.path.display()
        ));
        self.failed(&error);
        error
    }

    pub(super) fn begin_write(&self) -> Result<redb::WriteTransaction, Error> {
        let mut write = self
            .database()
            .begin_write()
            .map_err(|e| self.disk("begin a write", e))?;
        write
            .set_durability(Durability::Immediate)
            .map_err(|e| self.disk("begin a write", e))?;
        Ok(write)
    }

    pub(super) fn begin_read(&self) -> Result<redb::ReadTransaction, Error> {
        self.database()
            .begin_read()
            .map_err(|e| self.disk("begin a read", e))
    }

    pub(super) fn meta(
        &self,
        meta: &impl ReadableTable<&'static str, i64>,
        name: &str,
    ) -> Result<Option<i64>, Error> {
        Ok(meta
            .get(name)
            .map_err(|e| self.disk("read meta", e))?
            .map(|value| value.value()))
    }

    pub(super) fn revision(
        &self,
        meta: &impl ReadableTable<&'static str, i64>,
    ) -> Result<Revision, Error> {
        Ok(self.meta(meta, META_REVISION)?.unwrap_or(EMPTY_REVISION))
    }

    pub(super) fn oldest(
        &self,
        meta: &impl ReadableTable<&'static str, i64>,
    ) -> Result<Revision, Error> {
        Ok(self.meta(meta, META_OLDEST)?.unwrap_or(EMPTY_REVISION))
    }

    pub(super) fn load(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        key: &str,
    ) -> Result<Option<KeyValue>, Error> {
        let Some(bytes) = kv.get(key).map_err(|e| self.disk("read a key", e))? else {
            return Ok(None);
        };
        let stored: StoredKv = decode(key, bytes.value())?;
        Ok(Some(stored.into_key_value(key.to_owned())))
    }

    /// The keys under `prefix`, in key order.
    pub(super) fn load_prefix(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        prefix: &str,
    ) -> Result<Vec<KeyValue>, Error> {
        self.scan_prefix(kv, prefix, |kv| kv)
    }

    /// [`load_prefix`](Self::load_prefix) with every value dropped as it is read.
    pub(super) fn load_prefix_keys(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        prefix: &str,
    ) -> Result<Vec<KeyValue>, Error> {
        self.scan_prefix(kv, prefix, |kv| KeyValue {
            value: Vec::new(),
            ..kv
        })
    }

    fn scan_prefix(
        &self,
        kv: &impl ReadableTable<&'static str, &'static [u8]>,
        prefix: &str,
        keep: impl Fn(KeyValue) -> KeyValue,
    ) -> Result<Vec<KeyValue>, Error> {
        let mut found = Vec::new();
        for entry in kv
            .range::<&str>(prefix..)
            .map_err(|e| self.disk("read a prefix", e))?
        {
            let (key, bytes) = entry.map_err(|e| self.disk("read a prefix", e))?;
            let key = key.value();
            if !key.starts_with(prefix) {
                break;
            }
            let stored: StoredKv = decode(key, bytes.value())?;
            found.push(keep(stored.into_key_value(key.to_owned())));
        }
        Ok(found)
    }
}

impl StoredEvent {
    pub(super) fn into_watch_event(self, revision: Revision) -> WatchEvent {
        match self {
            StoredEvent::Put { key, kv } => WatchEvent::Put(kv.into_key_value(key)),
            StoredEvent::Delete { key } => WatchEvent::Delete { key, revision },
        }
    }

    pub(super) fn from_watch_event(event: &WatchEvent) -> Self {
        match event {
            WatchEvent::Put(kv) => StoredEvent::Put {
                key: kv.key.clone(),
                kv: StoredKv::from_key_value(kv),
            },
            WatchEvent::Delete { key, .. } => StoredEvent::Delete { key: key.clone() },
        }
    }
}

/// The tables a write opens, for the length of one redb write transaction.
pub(super) struct Tables<'w> {
    pub(super) kv: Table<'w, &'static str, &'static [u8]>,
    pub(super) leases: Table<'w, i64, i64>,
    pub(super) lease_keys: Table<'w, (i64, &'static str), ()>,
    pub(super) history: Table<'w, i64, &'static [u8]>,
    pub(super) meta: Table<'w, &'static str, i64>,
}

impl<'w> Tables<'w> {
    pub(super) fn open(inner: &Inner, write: &'w redb::WriteTransaction) -> Result<Self, Error> {
        Ok(Self {
            kv: write
                .open_table(KV)
                .map_err(|e| inner.disk("open table kv", e))?,
            leases: write
                .open_table(LEASES)
                .map_err(|e| inner.disk("open table leases", e))?,
            lease_keys: write
                .open_table(LEASE_KEYS)
                .map_err(|e| inner.disk("open table lease_keys", e))?,
            history: write
                .open_table(HISTORY)
                .map_err(|e| inner.disk("open table history", e))?,
            meta: write
                .open_table(META)
                .map_err(|e| inner.disk("open table meta", e))?,
        })
    }
}

pub(super) fn encode<T: Serialize>(what: &str, value: &T) -> Result<Vec<u8>, Error> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).map_err(|error| {
        Error::Invalid(format!(
            "could not encode {what} for the embedded store: {error}"
        ))
    })
}

pub(super) fn decode<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T, Error> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(value, _)| value)
        .map_err(|error| Error::Decode {
            key: what.to_owned(),
            message: error.to_string(),
        })
}

/// Names what went wrong with the redb file and what to do about it.
pub(super) fn disk(path: &Path, doing: &str, error: impl Into<redb::Error>) -> Error {
    let error: redb::Error = error.into();
    let message = match &error {
        redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => format!(
            "{doing}: another process holds the store open: stop it, or use another --data-dir"
        ),
        redb::Error::ValueTooLarge(size) => {
            return Error::Invalid(format!(
                "a value of {size} bytes is larger than the embedded store accepts"
            ));
        }
        redb::Error::Corrupted(detail) => format!(
            "{doing}: the file is corrupted ({detail}): restore it from a backup, or move it aside to start empty"
        ),
        redb::Error::UpgradeRequired(version) => format!(
            "{doing}: the file has redb format {version}, older than this build reads: open it with the boxfleet build that wrote it, or move it aside"
        ),
        redb::Error::Io(io) => format!(
            "{doing}: {io}: check that the disk has space and the data dir is readable and writable"
        ),
        other => format!("{doing}: {other}"),
    };
    Error::Disk {
        path: path.display().to_string(),
        message,
    }
}
