//! History by age, the way etcd's periodic auto-compaction keeps it: besides its count and
//! byte bounds, `history` keeps only the revisions of the last
//! [`EmbeddedOptions::history_seconds`](super::EmbeddedOptions::history_seconds). A write notes
//! in `meta` the first revision of each time bucket it falls in (`history_at/{unix second}`,
//! buckets of a sixtieth of the kept span, so about sixty notes); a bucket that ended more than
//! the span ago is old, and the revisions before the first bucket that is not, go.

use std::time::{SystemTime, UNIX_EPOCH};

use redb::{ReadableTable, Table};

use super::inner::Inner;
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
    /// Notes `revision` as written now and returns the oldest revision the kept span holds
    /// (`0` when the span is unbounded), dropping the notes of the buckets that are old.
    pub(super) fn age_floor(
        &self,
        meta: &mut Table<'_, &'static str, i64>,
        revision: Revision,
    ) -> Result<Revision, Error> {
        let keep = self.history_seconds;
        if keep <= 0 {
            return Ok(0);
        }
        let now = unix_seconds();
        let bucket = (keep / 60).max(1);
        let note = format!("{HISTORY_AT}{:012}", now - now.rem_euclid(bucket));
        if self.meta(meta, &note)?.is_none() {
            meta.insert(note.as_str(), revision)
                .map_err(|e| self.disk("note the history's clock", e))?;
        }
        // a bucket is old once all of it is: the floor is the first note that is not
        let mut old = Vec::new();
        let mut floor = 0;
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
}
