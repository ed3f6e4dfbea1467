//! The store file as a whole: opened only when it is whole (not empty, not truncated, every
//! page matching its checksum), compacted when opened and again once the history shrank
//! enough, so the space a burst of large values took goes back to the disk.

use std::path::Path;

use redb::Database;

use super::CACHE_BYTES;
use super::inner::Inner;
use super::layout::disk;
use crate::store::Error;

impl Inner {
    /// Whether the history shrank enough that a compaction may be due (a cheap check for the
    /// background tick, before it takes the commit lock).
    pub(super) fn may_compact(&self) -> bool {
        self.history_shrunk
            .load(std::sync::atomic::Ordering::Relaxed)
            >= MIN_COMPACT_BYTES.min(self.compact_after_bytes)
    }

    /// [`compact_if_trimmed`](Self::compact_if_trimmed) from the background tick: a
    /// compaction skipped after the last commit (a read was open) is not left for a write that
    /// may never come.
    pub(super) fn compact_when_due(&self) {
        let _commits = self.lock_commits();
        self.compact_if_trimmed();
    }
}

/// The least dropped history a compaction waits for (a small file is not rewritten per commit).
const MIN_COMPACT_BYTES: u64 = 1 << 20;

impl Inner {
    /// Compacts a file that holds more free space than data. The dropped history
    /// [`compact_if_trimmed`](Self::compact_if_trimmed) counts is only part of what a file
    /// frees: the pages a delete or an overwrite gave back (an event past its retention, a
    /// settled run, a value rewritten) are seen here, from redb's own count of the pages in
    /// use, on the background tick (a count walks the file's trees, so it is not made per
    /// commit). Compacted when the free part is at least [`MIN_COMPACT_BYTES`] and at least
    /// the part in use.
    pub(super) fn compact_if_slack(&self) {
        let _commits = self.lock_commits();
        let Ok(len) = std::fs::metadata(&self.path).map(|m| m.len()) else {
            return;
        };
        if len < 2 * MIN_COMPACT_BYTES {
            return;
        }
        let in_use = {
            let db = self.database();
            let Ok(txn) = db.begin_write() else { return };
            let stats = txn.stats();
            let _ = txn.abort();
            match stats {
                Ok(stats) => stats.allocated_pages() * stats.page_size() as u64,
                Err(_) => return,
            }
        };
        if !slack_worth_compacting(len, in_use) {
            return;
        }
        let free = len - in_use;
        let Ok(mut db) = self.db.try_write() else {
            return;
        };
        match compact(&mut db) {
            Ok(_) => {
                self.history_shrunk
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
                tracing::info!(path = %self.path.display(), free, size, "store_compacted");
            }
            Err(redb::CompactionError::TransactionInProgress) => {}
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "store_compaction_failed")
            }
        }
    }
}

/// Whether a file of `len` bytes with `in_use` of them holding data is worth compacting: its
/// free part is at least [`MIN_COMPACT_BYTES`] and at least the part in use.
fn slack_worth_compacting(len: u64, in_use: u64) -> bool {
    let free = len.saturating_sub(in_use);
    free >= MIN_COMPACT_BYTES && free >= in_use
}

impl Inner {
    /// Counts a commit's history: `added` bytes written, `dropped` bytes trimmed. The history
    /// shrank by what it dropped beyond what it wrote, and a write takes back space a drop
    /// freed before the file grows, so the count is how far the history fell below the most
    /// it held since the last compaction. A history held at its bounds (a busy node's: each
    /// commit drops about as much as it writes) frees nothing and counts nothing. Counting
    /// every byte dropped compacted such a node's 140 MB file every 11 s of launches, each
    /// compaction holding every write for 1.0–1.4 s (issue 20's scale bench).
    pub(super) fn history_changed(&self, added: i64, dropped: i64) {
        use std::sync::atomic::Ordering;
        let net = dropped - added;
        if net == 0 {
            return;
        }
        let _ = self
            .history_shrunk
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |shrunk| {
                Some(if net > 0 {
                    shrunk.saturating_add(net as u64)
                } else {
                    shrunk.saturating_sub(net.unsigned_abs())
                })
            });
    }
}

/// Opens the database on a backend of its own instead of the file (a test's faults).
pub(super) type OnBackend =
    Box<dyn FnOnce(&redb::Builder) -> Result<Database, redb::DatabaseError> + Send>;

impl Inner {
    /// Compacts the file once the history shrank by `compact_after_bytes` since the last time
    /// ([`history_changed`](Self::history_changed)), or by an eighth of the file's size (1 MiB
    /// at least) when that is less — the history is only part of what a burst freed: the
    /// values its deletes freed are not counted — so the space a burst of large values took
    /// goes back to the disk. Called with `commits` held; skipped (and tried again later)
    /// while a read is open.
    pub(super) fn compact_if_trimmed(&self) {
        use std::sync::atomic::Ordering;
        let shrunk = self.history_shrunk.load(Ordering::Relaxed);
        if shrunk < MIN_COMPACT_BYTES.min(self.compact_after_bytes) {
            return;
        }
        let an_eighth = std::fs::metadata(&self.path).map_or(u64::MAX, |m| m.len() / 8);
        if shrunk
            < self
                .compact_after_bytes
                .min(an_eighth.max(MIN_COMPACT_BYTES))
        {
            return;
        }
        let Ok(mut db) = self.db.try_write() else {
            return;
        };
        match compact(&mut db) {
            Ok(_) => {
                self.history_shrunk.store(0, Ordering::Relaxed);
                let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
                tracing::info!(path = %self.path.display(), shrunk, size, "store_compacted");
            }
            Err(redb::CompactionError::TransactionInProgress) => {}
            Err(error) => {
                // tried again once the history shrank as much again, not at every tick
                self.history_shrunk.store(0, Ordering::Relaxed);
                tracing::warn!(path = %self.path.display(), %error, "store_compaction_failed");
            }
        }
    }
}

/// Opens the file only when it is whole: an empty one is refused (redb would start it as a new
/// store, every run, mail and event lost unsaid), and every page is checked against its
/// checksum (redb's integrity check on open), so a truncated or altered file is refused with
/// what and where rather than read as a smaller store. An open file is compacted, giving back
/// the space its freed pages hold.
pub(super) fn open_whole(path: &Path, backend: Option<OnBackend>) -> Result<Database, Error> {
    let refuse = |message: String| Error::Disk {
        path: path.display().to_string(),
        message,
    };
    match std::fs::metadata(path) {
        Ok(found) if found.len() == 0 => {
            return Err(refuse(
                "the store file is empty (0 bytes), so it is not the store it was: restore it from a backup, or move it aside to start an empty store".into(),
            ));
        }
        _ => {}
    }
    let mut builder = redb::Builder::new();
    builder
        .set_cache_size(CACHE_BYTES)
        .set_check_integrity_on_open(true);
    let opened = match backend {
        Some(on_backend) => on_backend(&builder),
        None => builder.create(path),
    };
    let mut db = opened.map_err(|error| match error {
            redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => refuse(format!(
                "the store file is not whole ({detail}): it was truncated or altered outside boxfleet; restore it from a backup, or move it aside to start an empty store"
            )),
            other => disk(path, "open", other),
        })?;
    compact(&mut db).map_err(|error| disk(path, "compact the file", error))?;
    Ok(db)
}

/// Compacts until redb finds nothing more to move (each pass moves what it can toward the
/// file's start and trims its end), at most a few passes.
fn compact(db: &mut Database) -> Result<(), redb::CompactionError> {
    for _ in 0..8 {
        if !db.compact()? {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::super::test_support::{open, reopen};
    use super::super::{EmbeddedOptions, EmbeddedStore, FILE_NAME};
    use super::slack_worth_compacting;
    use crate::store::{Error, Store, StoreExt};

    /// A file's contents in memory, whose writes fail as a full disk's do while `full` is set.
    #[derive(Debug)]
    struct FillingDisk {
        file: redb::backends::InMemoryBackend,
        full: Arc<AtomicBool>,
    }

    impl FillingDisk {
        fn refuse(&self) -> Result<(), std::io::Error> {
            if self.full.load(Ordering::SeqCst) {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            Ok(())
        }
    }

    impl redb::StorageBackend for FillingDisk {
        fn len(&self) -> Result<u64, std::io::Error> {
            self.file.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
            self.file.read(offset, out)
        }
        fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
            self.refuse()?;
            self.file.set_len(len)
        }
        fn sync_data(&self) -> Result<(), std::io::Error> {
            self.refuse()?;
            self.file.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
            self.refuse()?;
            self.file.write(offset, data)
        }
    }

    async fn store_with(dir: &std::path::Path, options: EmbeddedOptions) -> EmbeddedStore {
        EmbeddedStore::open_with(dir, options).await.unwrap()
    }

    fn file_size(store: &EmbeddedStore) -> u64 {
        std::fs::metadata(store.path()).unwrap().len()
    }

    #[tokio::test]
    async fn an_empty_store_file_is_refused_naming_what_and_where() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), b"").unwrap();
        match EmbeddedStore::open(dir.path()).await {
            Err(Error::Disk { path, message }) => {
                assert!(path.ends_with(FILE_NAME), "{path}");
                assert!(message.contains("empty (0 bytes)"), "{message}");
                assert!(message.contains("move it aside"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    async fn a_store_of_100_keys(dir: &std::path::Path) {
        let store = open(dir).await;
        for i in 0..100 {
            store
                .put(
                    &format!("runs/{i:03}"),
                    format!("value {i}").repeat(50).into_bytes(),
                )
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn a_truncated_store_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        a_store_of_100_keys(dir.path()).await;
        let path = dir.path().join(FILE_NAME);
        reopen(dir.path(), EmbeddedOptions::default()).await; // let go of the file
        let whole = std::fs::metadata(&path).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(whole / 2).unwrap();
        drop(file);
        match EmbeddedStore::open(dir.path()).await {
            Err(Error::Disk { path, message }) => {
                assert!(path.ends_with(FILE_NAME), "{path}");
                assert!(message.contains("not whole"), "{message}");
            }
            Ok(store) => panic!(
                "a file cut to half opened with {} keys",
                store.range("runs/").await.map_or(0, |r| r.kvs.len())
            ),
            Err(other) => panic!("expected a refusal naming the file, got {other:?}"),
        }
    }

    /// Bytes flipped anywhere in the file: it is refused, or every key reads back as written —
    /// never a smaller store read as the whole one.
    #[tokio::test]
    async fn flipped_bytes_are_refused_or_lose_nothing() {
        let mut refused = 0;
        for seed in 0..8u64 {
            let dir = tempfile::tempdir().unwrap();
            a_store_of_100_keys(dir.path()).await;
            reopen(dir.path(), EmbeddedOptions::default()).await;
            let path = dir.path().join(FILE_NAME);
            let mut bytes = std::fs::read(&path).unwrap();
            // splitmix64: the same flips for a seed on every run
            let mut state = seed;
            let mut next = || {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            };
            for _ in 0..200 {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] ^= 1 << (next() % 8);
            }
            std::fs::write(&path, &bytes).unwrap();
            match EmbeddedStore::open(dir.path()).await {
                Err(Error::Disk { message, .. }) => {
                    assert!(
                        message.contains("not whole") || message.contains("corrupt"),
                        "{message}"
                    );
                    refused += 1;
                }
                Ok(store) => {
                    let kvs = store.range("runs/").await.unwrap().kvs;
                    assert_eq!(kvs.len(), 100, "seed {seed}: keys silently gone");
                    for (i, kv) in kvs.iter().enumerate() {
                        assert_eq!(kv.value, format!("value {i}").repeat(50).into_bytes());
                    }
                }
                Err(other) => panic!("seed {seed}: expected a refusal, got {other:?}"),
            }
        }
        assert!(refused > 0, "200 flips in a 100-key file were never seen");
    }

    #[test]
    fn a_file_is_compacted_for_its_free_space_once_it_holds_more_free_than_data() {
        const MIB: u64 = 1 << 20;
        // the soak's end: 2.9 MiB on disk, 1.2 MiB of it in use
        assert!(slack_worth_compacting(29 * MIB / 10, 12 * MIB / 10));
        // half free and a megabyte of it: due
        assert!(slack_worth_compacting(2 * MIB, MIB));
        // free, but under a megabyte: a small file is not rewritten
        assert!(!slack_worth_compacting(MIB + MIB / 2, MIB / 2 + 1));
        // a megabyte free of a large file in use: not yet
        assert!(!slack_worth_compacting(9 * MIB, 8 * MIB));
        assert!(!slack_worth_compacting(MIB, 2 * MIB));
    }

    #[tokio::test]
    async fn a_file_holding_more_free_space_than_data_is_compacted_on_the_tick() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_bytes: 64 << 10,
            ..EmbeddedOptions::default()
        };
        let store = store_with(dir.path(), options).await;
        store.put("small", b"x".to_vec()).await.unwrap();
        for i in 0..24 {
            store
                .put(&format!("outbox/{i}"), vec![b'r'; 256 << 10])
                .await
                .unwrap();
        }
        for i in 0..24 {
            let key = format!("outbox/{i}");
            store
                .txn(crate::store::Txn::new().and_then([crate::store::Op::delete(&key)]))
                .await
                .unwrap();
        }
        // whatever the history count saw, the file's own free space decides from here
        store
            .inner
            .history_shrunk
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let inner = store.inner.clone();
        tokio::task::spawn_blocking(move || inner.compact_if_slack())
            .await
            .unwrap();
        let after = file_size(&store);
        assert!(
            after < 2 << 20,
            "6 MiB written and deleted: the file holds {after} bytes"
        );
        assert_eq!(store.get("small").await.unwrap().unwrap().value, b"x");
    }

    /// A history held at its bounds drops about what it writes: nothing of the file is freed,
    /// and nothing counts toward a compaction (which held every write of a busy node for a
    /// second); a history that shrinks counts what it shrank by.
    #[tokio::test]
    async fn a_history_held_at_its_bounds_counts_nothing_toward_a_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_revisions: 10,
            ..EmbeddedOptions::default()
        };
        let store = store_with(dir.path(), options).await;
        let shrunk = |store: &EmbeddedStore| {
            store
                .inner
                .history_shrunk
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        // 200 writes of 16 KiB: 3 MiB of history dropped, as much written
        for i in 0..200 {
            store
                .put(&format!("runs/{}", i % 20), vec![b'r'; 16 << 10])
                .await
                .unwrap();
        }
        assert!(
            shrunk(&store) < 32 << 10,
            "a history at its bound counted {} bytes",
            shrunk(&store)
        );
        // small writes from now on: the ten large revisions go, and the history shrank
        for i in 0..10 {
            store
                .put(&format!("small/{i}"), b"x".to_vec())
                .await
                .unwrap();
        }
        assert!(
            shrunk(&store) > 150 << 10,
            "the history shrank by ~160 KiB and counted {}",
            shrunk(&store)
        );
    }

    #[tokio::test]
    async fn history_is_held_to_its_bytes_and_the_file_gives_the_space_back() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_bytes: 2 << 20,
            compact_after_bytes: 4 << 20,
            ..EmbeddedOptions::default()
        };
        let store = store_with(dir.path(), options.clone()).await;
        store.put("small", b"x".to_vec()).await.unwrap();
        let idle = file_size(&store);
        // a burst of large values: 60 MiB written, 2 MiB of history kept. Each put drops
        // about as much history as it writes, so the history does not shrink and nothing is
        // compacted meanwhile: the file is held by redb taking back the pages the drops and
        // the overwrites freed — bounded (17 MB at most, measured), never the 120 MiB the
        // values and their history were
        let mut largest = 0;
        for i in 0..60u8 {
            store.put("outbox/big", vec![b'r'; 1 << 20]).await.unwrap();
            if i % 10 == 0 {
                store.put("outbox/other", vec![i; 16]).await.unwrap();
            }
            largest = largest.max(file_size(&store));
        }
        store
            .txn(crate::store::Txn::new().and_then([crate::store::Op::delete("outbox/big")]))
            .await
            .unwrap();
        let after = file_size(&store);
        assert!(
            largest < idle + (24 << 20),
            "the file grew from {idle} to {largest} bytes for 2 MiB of history"
        );
        // a watch from the first revision is refused: that history is gone
        assert!(matches!(
            store.watch("", 2).await.err(),
            Some(Error::Compacted { .. })
        ));
        // reopened, it is compacted again and still reads
        drop(store);
        let store = reopen(dir.path(), options).await;
        assert_eq!(store.get("small").await.unwrap().unwrap().value, b"x");
        let reopened = file_size(&store);
        assert!(
            reopened < idle + (4 << 20),
            "{after} bytes compacted to {reopened}"
        );
    }

    #[tokio::test]
    async fn history_older_than_its_span_goes_and_the_file_shrinks_back_without_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_seconds: 2,
            ..EmbeddedOptions::default()
        };
        let store = store_with(dir.path(), options).await;
        store.put("small", b"x".to_vec()).await.unwrap();
        let idle = file_size(&store);
        // 12 MiB written and deleted: well inside the count and byte bounds of history
        let burst = std::time::Instant::now();
        for _ in 0..12 {
            store.put("outbox/big", vec![b'r'; 1 << 20]).await.unwrap();
        }
        let first_big = store
            .get("outbox/big")
            .await
            .unwrap()
            .unwrap()
            .create_revision;
        store
            .txn(crate::store::Txn::new().and_then([crate::store::Op::delete("outbox/big")]))
            .await
            .unwrap();
        // on a slow disk the burst outlives the span, and is dropped while it is written
        if burst.elapsed() < std::time::Duration::from_secs(1) {
            assert!(file_size(&store) > idle + (8 << 20), "the burst is on disk");
        }
        // past the span, the next writes drop that history and give the space back
        tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
        store.put("small", b"y".to_vec()).await.unwrap();
        store.put("small", b"z".to_vec()).await.unwrap();
        let after = file_size(&store);
        assert!(
            after < idle + (2 << 20),
            "the file holds {after} bytes, {idle} before a burst older than the span"
        );
        assert!(
            matches!(
                store.watch("", first_big).await.err(),
                Some(Error::Compacted { .. })
            ),
            "a watch from inside the dropped span is refused"
        );
        let recent = store.get("small").await.unwrap().unwrap().mod_revision;
        assert!(
            store.watch("", recent).await.is_ok(),
            "the span's revisions stay"
        );
    }

    #[tokio::test]
    async fn a_store_gone_quiet_after_a_burst_still_drops_its_history_and_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let options = EmbeddedOptions {
            history_seconds: 2,
            ..EmbeddedOptions::default()
        };
        let store = store_with(dir.path(), options).await;
        store.put("small", b"x".to_vec()).await.unwrap();
        let idle = file_size(&store);
        for _ in 0..12 {
            store.put("outbox/big", vec![b'r'; 1 << 20]).await.unwrap();
        }
        let first_big = store
            .get("outbox/big")
            .await
            .unwrap()
            .unwrap()
            .create_revision;
        store
            .txn(crate::store::Txn::new().and_then([crate::store::Op::delete("outbox/big")]))
            .await
            .unwrap();
        // no write follows: the reaper's tick alone drops the history past its span (within
        // the span, a bucket, and a 5 s tick) and compacts the file
        // (60 s: CI's 2 cores run this beside 160 other tests, each tick's trim and compaction
        // waiting its turn for a blocking thread and the disk)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while file_size(&store) >= idle + (2 << 20) {
            assert!(
                std::time::Instant::now() < deadline,
                "a quiet store kept {} bytes of a burst older than its span ({idle} before)",
                file_size(&store)
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        assert!(
            matches!(
                store.watch("", first_big).await.err(),
                Some(Error::Compacted { .. })
            ),
            "the dropped span is gone from the watchable history"
        );
        let small = store.get("small").await;
        assert!(
            matches!(&small, Ok(Some(kv)) if kv.value == b"x"),
            "the key outside the burst stays: {small:?}"
        );
    }

    #[tokio::test]
    async fn a_full_disk_takes_the_store_down_for_good_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let full = Arc::new(AtomicBool::new(false));
        let disk = FillingDisk {
            file: redb::backends::InMemoryBackend::new(),
            full: Arc::clone(&full),
        };
        let store = EmbeddedStore::open_on(
            dir.path().to_path_buf(),
            EmbeddedOptions::default(),
            Some(Box::new(move |builder: &redb::Builder| {
                builder.create_with_backend(disk)
            })),
        )
        .await
        .unwrap();
        store.put("a", b"1".to_vec()).await.unwrap();
        assert!(!store.health().is_down());
        full.store(true, Ordering::SeqCst);
        let error = store.put("b", vec![b'x'; 1 << 20]).await.unwrap_err();
        assert!(
            matches!(error, Error::Disk { .. } | Error::Indeterminate(_)),
            "{error:?}"
        );
        assert!(
            store.health().is_down(),
            "a store that cannot write says so"
        );
        // space freed: redb takes no write until reopened, and the store stays down
        full.store(false, Ordering::SeqCst);
        assert!(store.put("c", b"3".to_vec()).await.is_err());
        assert!(store.health().is_down());
        match store.health().now() {
            crate::store::health::Reachability::Unreachable { error, .. } => {
                assert!(error.contains("until the node restarts"), "{error}");
            }
            other => panic!("expected down, got {other:?}"),
        }
    }
}
