//! History by age, the way etcd's periodic auto-compaction keeps it: besides its count and
//! byte bounds, `history` keeps only the revisions of the last
//! [`EmbeddedOptions::history_seconds`](super::EmbeddedOptions::history_seconds). A write notes
//! in `meta` the first revision of each time bucket it falls in (`history_at/{unix second}`,
//! buckets of a sixtieth of the kept span, so about sixty notes); a bucket that ended more than
//! the span ago is old, and the revisions before the first bucket that is not, go.

use std::time::{SystemTime, UNIX_EPOCH};

use redb::{ReadableTable, Table};

use super::inner::Inner;
use super::layout::Tables;
use crate::store::{Error, Revision};

/// `meta` rows `history_at/{unix second, 12 digits}` → the first revision written from then.
const HISTORY_AT: &str = "history_at/";
/// The first key past every `history_at/` row (`'/' + 1`).
const HISTORY_AT_END: &str = "history_at0";

fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

impl Inner {
    /// Notes `written` as written now (when a write is being recorded) and returns the oldest
    /// revision the kept span holds (`0` when the span is unbounded), dropping the notes of
    /// the buckets that are old. With no write (`None`) and every note old, nothing of the
    /// history is young: the floor is `i64::MAX`, and only the latest revision stays.
    pub(super) fn age_floor(
        &self,
        meta: &mut Table<'_, &'static str, i64>,
        written: Option<Revision>,
    ) -> Result<Revision, Error> {
        let keep = self.history_seconds;
        if keep <= 0 {
            return Ok(0);
        }
        let now = unix_seconds();
        let bucket = (keep / 60).max(1);
        if let Some(revision) = written {
            let note = format!("{HISTORY_AT}{:012}", now - now.rem_euclid(bucket));
            if self.meta(meta, &note)?.is_none() {
                meta.insert(note.as_str(), revision)
                    .map_err(|e| self.disk("note the history's clock", e))?;
            }
        }
        // a bucket is old once all of it is: the floor is the first note that is not
        let mut old = Vec::new();
        let mut floor = if written.is_some() { 0 } else { i64::MAX };
        for entry in meta
            .range::<&str>(HISTORY_AT..HISTORY_AT_END)
            .map_err(|e| self.disk("read the history's clock", e))?
        {
            let (key, first) = entry.map_err(|e| self.disk("read the history's clock", e))?;
            let at: i64 = key.value()[HISTORY_AT.len()..].parse().unwrap_or(0);
            if at + bucket > now - keep {
                floor = first.value();
                break;
            }
            old.push(key.value().to_owned());
        }
        for key in old {
            meta.remove(key.as_str())
                .map_err(|e| self.disk("drop a note of the history's clock", e))?;
        }
        Ok(floor)
    }

    /// The history older than the kept span, dropped though no write comes to carry it (the
    /// lease reaper's tick): etcd's periodic compaction runs on its clock, not on writes, so a
    /// store that went quiet after a burst still gives the burst's history — and, compacted,
    /// its space — back. Returns the bytes dropped.
    pub(super) fn trim_aged_history(&self) -> Result<i64, Error> {
        // a store down for good takes no write: its health already says so, once
        if self.history_seconds <= 0 || self.health.is_down() {
            return Ok(0);
        }
        let _commits = self.lock_commits();
        let write = self.begin_write()?;
        let trimmed = {
            let mut tables = Tables::open(self, &write)?;
            let latest = self.revision(&tables.meta)?;
            let floor = self.age_floor(&mut tables.meta, None)?;
            tables.trim_history(self, latest, floor, 0)?
        };
        if trimmed == 0 {
            write
                .abort()
                .map_err(|e| self.disk("abort a history trim", e))?;
            return Ok(0);
        }
        write
            .commit()
            .map_err(|e| self.commit_failed("commit a history trim", e))?;
        self.compact_if_trimmed();
        Ok(trimmed)
    }
}
