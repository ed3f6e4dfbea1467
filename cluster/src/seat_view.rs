//! The seats as the placement pass sees them: who holds each, which have mail waiting, which
//! have runs — read once, then kept current in memory by a watch of `seats/` and of the runs'
//! seat entries (`seat_runs/`).
//!
//! The pass runs every second. Reading every holder, every inbox key and every run entry from
//! the store each time was 20,000 keys a second on a node holding 10,000 seats, read, copied
//! and decoded beside the launches it slowed (issue 20). The view costs one read of each
//! prefix when it is loaded, and after that only the changes.
//!
//! [`Known::complete_through`] says how far the view has caught up with the seats' prefix:
//! every change up to that revision is in it. A fence acquired at a later revision is not in
//! it yet, and the pass must not judge it by the view.
//!
//! A watch that breaks drops the view (the pass reads the store meanwhile), and the view is
//! loaded again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use tracing::debug;

use crate::runs::Runs;
use crate::seat::{self, Held, SeatKey};
use crate::seat_runs::seat_of_entry;
use crate::store::{KeyValue, Revision, Store, WatchEvent};
use crate::{Error, Keys};

/// How long a broken watch waits before the view is loaded again.
const RELOAD_AFTER: Duration = Duration::from_secs(1);

/// Which view, and how many changes of what the pass decides from it has seen: equal shapes,
/// the same seats and holders. A run or a message that comes to or goes from a seat that is
/// among the seats whatever it does (held, or with the other kind) leaves the shape as it was:
/// every launch's and every collection's on a held seat.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// the load the view began with (each load of any view in the process has its own)
    load: u64,
    /// the changes since that altered a holder, or which seats there are
    changes: u64,
}

/// Numbers the views' loads.
static LOADS: AtomicU64 = AtomicU64::new(1);

/// What the store says of the seats, as of [`Known::complete_through`].
#[derive(Debug, Default, Clone)]
pub struct Known {
    /// each held seat's holder key
    holders: BTreeMap<String, Held>,
    /// the messages waiting in each seat's inbox
    mail: BTreeMap<String, u32>,
    /// the run entries of each seat
    runs: BTreeMap<String, u32>,
    /// the seats marked retiring (left the company's agent seats)
    retiring: BTreeSet<String>,
    /// every change to the seats' prefix up to this revision is in
    complete_through: Revision,
    shape: Shape,
}

impl Known {
    /// The view of two listings: the seats' prefix at revision `seats_at`, and the run
    /// entries' keys.
    pub fn from_listings(
        keys: &Keys,
        seats: &[KeyValue],
        seats_at: Revision,
        entries: &[KeyValue],
    ) -> Result<Known, Error> {
        let mut known = Known {
            holders: seat::holders_in(keys, seats)?,
            complete_through: seats_at,
            shape: Shape {
                load: LOADS.fetch_add(1, Ordering::Relaxed),
                changes: 0,
            },
            ..Known::default()
        };
        for kv in seats {
            if let Some(seat) = seat::seat_of(keys, &kv.key, SeatKey::Mail) {
                *known.mail.entry(seat.to_owned()).or_default() += 1;
            }
            if let Some(seat) = seat::seat_of(keys, &kv.key, SeatKey::Retiring) {
                known.retiring.insert(seat.to_owned());
            }
        }
        for kv in entries {
            if let Some(seat) = seat_of_entry(keys, &kv.key) {
                *known.runs.entry(seat.to_owned()).or_default() += 1;
            }
        }
        Ok(known)
    }

    /// The view read from the store now: what the pass uses while no watch keeps one.
    pub async fn read(store: &dyn Store, keys: &Keys, runs: &Runs) -> Result<Known, Error> {
        let seats = store.range(&keys.seats()).await?;
        let entries = runs.entry_listing().await?;
        Known::from_listings(keys, &seats.kvs, seats.revision, &entries.kvs)
    }

    /// Each held seat's holder, by seat.
    pub fn holders(&self) -> &BTreeMap<String, Held> {
        &self.holders
    }

    /// Every seat with a holder, mail or a run, each once.
    pub fn seats(&self) -> impl Iterator<Item = &str> {
        let unheld_with_mail = self
            .mail
            .keys()
            .filter(|seat| !self.holders.contains_key(*seat));
        let unheld_with_runs_only = self
            .runs
            .keys()
            .filter(|seat| !self.holders.contains_key(*seat) && !self.mail.contains_key(*seat));
        self.holders
            .keys()
            .chain(unheld_with_mail)
            .chain(unheld_with_runs_only)
            .map(String::as_str)
    }

    /// Whether `seat` is marked retiring.
    pub fn is_retiring(&self, seat: &str) -> bool {
        self.retiring.contains(seat)
    }

    /// Whether both say the same of every seat (each as of its own revision).
    pub fn agrees_with(&self, other: &Known) -> bool {
        (&self.holders, &self.mail, &self.runs, &self.retiring)
            == (&other.holders, &other.mail, &other.runs, &other.retiring)
    }

    /// Every change to the seats' prefix up to this revision is in the view.
    pub fn complete_through(&self) -> Revision {
        self.complete_through
    }

    /// The view's shape: the pass may skip a view of the shape it last found nothing to do in.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    fn reshaped(&mut self, did: bool) {
        if did {
            self.shape.changes += 1;
        }
    }

    /// Applies one change of the seats' prefix; `true` when it freed a seat (its holder key
    /// went: released, or its holder's session lapsed).
    fn seat_changed(&mut self, keys: &Keys, change: &WatchEvent) -> Result<bool, Error> {
        // the changes of one revision may come one by one: the revision before is whole
        self.complete_through = self.complete_through.max(change.revision() - 1);
        let key = change.key();
        if let Some(seat) = seat::seat_of(keys, key, SeatKey::Holder) {
            let (reshaped, freed) = match change {
                WatchEvent::Put(kv) => match seat::held_at(keys, kv)? {
                    Some(held) => {
                        let before = self.holders.insert(held.seat.clone(), held);
                        (before.as_ref() != self.holders.get(seat), false)
                    }
                    None => (false, false),
                },
                WatchEvent::Delete { .. } => {
                    let freed = self.holders.remove(seat).is_some();
                    (freed, freed)
                }
            };
            self.reshaped(reshaped);
            return Ok(freed);
        }
        if let Some(seat) = seat::seat_of(keys, key, SeatKey::Retiring) {
            match change {
                WatchEvent::Put(_) => self.retiring.insert(seat.to_owned()),
                WatchEvent::Delete { .. } => self.retiring.remove(seat),
            };
        }
        if let Some(seat) = seat::seat_of(keys, key, SeatKey::Mail) {
            let first_or_last = count(&mut self.mail, seat, change);
            let reshaped =
                first_or_last && !self.holders.contains_key(seat) && !self.runs.contains_key(seat);
            self.reshaped(reshaped);
        }
        Ok(false)
    }

    /// Applies one change of the run entries.
    fn entry_changed(&mut self, keys: &Keys, change: &WatchEvent) {
        if let Some(seat) = seat_of_entry(keys, change.key()) {
            let first_or_last = count(&mut self.runs, seat, change);
            let reshaped =
                first_or_last && !self.holders.contains_key(seat) && !self.mail.contains_key(seat);
            self.reshaped(reshaped);
        }
    }
}

/// Counts a key created under `seat` (its first version) or deleted; a key written again is
/// the same key. `true` when the seat's first key came or its last went.
fn count(counts: &mut BTreeMap<String, u32>, seat: &str, change: &WatchEvent) -> bool {
    match change {
        WatchEvent::Put(kv) if kv.version == 1 => {
            let counted = counts.entry(seat.to_owned()).or_default();
            *counted += 1;
            *counted == 1
        }
        WatchEvent::Put(_) => false,
        WatchEvent::Delete { .. } => {
            let Some(left) = counts.get_mut(seat) else {
                return false;
            };
            *left = left.saturating_sub(1);
            if *left > 0 {
                return false;
            }
            counts.remove(seat);
            true
        }
    }
}

/// The view a watch keeps; empty while none does (before its first load, while its watch is
/// broken).
#[derive(Debug, Default)]
pub struct SeatView {
    known: Mutex<Option<Known>>,
}

impl SeatView {
    /// Runs `look` on the view while a watch keeps it current; `None` when none does.
    pub fn look<T>(&self, look: impl FnOnce(&Known) -> T) -> Option<T> {
        self.lock().as_ref().map(look)
    }

    /// Drops the view: nothing keeps it current any more.
    pub fn clear(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Known>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps the view current for as long as the task runs: loads it, follows both prefixes'
    /// changes, and loads it again whenever a watch breaks. `freed` is called when a change
    /// frees a seat (its holder key went), so the pass may take it at once.
    pub async fn keep(&self, store: &dyn Store, keys: &Keys, runs: &Runs, freed: impl Fn()) {
        loop {
            if let Err(error) = self.follow(store, keys, runs, &freed).await {
                debug!(%error, "seat_view_broken");
            }
            *self.lock() = None;
            tokio::time::sleep(RELOAD_AFTER).await;
        }
    }

    /// One load and its watches, until a watch breaks.
    async fn follow(
        &self,
        store: &dyn Store,
        keys: &Keys,
        runs: &Runs,
        freed: &impl Fn(),
    ) -> Result<(), Error> {
        let seats = store.range(&keys.seats()).await?;
        let entries = runs.entry_listing().await?;
        let seat_changes = store.watch(&keys.seats(), seats.revision + 1).await?;
        let entry_changes = store
            .watch(&keys.all_seat_runs(), entries.revision + 1)
            .await?;
        *self.lock() = Some(Known::from_listings(
            keys,
            &seats.kvs,
            seats.revision,
            &entries.kvs,
        )?);
        drop((seats, entries));
        // a watch that ends without its error is broken all the same
        let ended = || {
            futures::stream::iter([Err(Error::Unavailable(
                "a watch of the seats' view ended".into(),
            ))])
        };
        let mut changes = futures::stream::select(
            seat_changes.chain(ended()).map(|change| (true, change)),
            entry_changes.chain(ended()).map(|change| (false, change)),
        );
        while let Some((of_seats, change)) = changes.next().await {
            let change = change?;
            let mut view = self.lock();
            let Some(known) = view.as_mut() else {
                return Ok(());
            };
            let freed_one = if of_seats {
                known.seat_changed(keys, &change)?
            } else {
                known.entry_changed(keys, &change);
                false
            };
            drop(view);
            if freed_one {
                freed();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::seat::Holder;

    fn put(key: String, value: Vec<u8>, version: i64, revision: Revision) -> WatchEvent {
        WatchEvent::Put(KeyValue {
            key,
            value,
            create_revision: revision - version + 1,
            mod_revision: revision,
            version,
            lease: 7,
        })
    }

    fn holder(node: &str) -> Vec<u8> {
        serde_json::to_vec(&Holder {
            node: node.into(),
            incarnation: format!("{node}-1"),
        })
        .unwrap()
    }

    /// The pass skips a view whose shape it found nothing to do in: the shape must move with
    /// every change of which seats there are or who holds them, and only with those.
    #[test]
    fn the_shape_moves_with_which_seats_there_are_and_their_holders_only() {
        let keys = Keys::new("t");
        let mut known = Known::from_listings(&keys, &[], 1, &[]).unwrap();
        let mut shapes = vec![known.shape()];
        let mut changed = |known: &Known, expected: bool, what: &str| {
            let last = *shapes.last().unwrap();
            assert_eq!(known.shape() != last, expected, "{what}");
            shapes.push(known.shape());
        };

        known.entry_changed(&keys, &put(keys.seat_run("a", "t1"), vec![], 1, 2));
        changed(&known, true, "a seat's first run entry adds the seat");
        known.entry_changed(&keys, &put(keys.seat_run("a", "t2"), vec![], 1, 3));
        changed(&known, false, "a second run entry does not");
        known.entry_changed(&keys, &put(keys.seat_run("a", "t2"), vec![], 2, 4));
        changed(&known, false, "an entry written again does not");

        let holder_key = keys.seat_holder("a");
        known
            .seat_changed(&keys, &put(holder_key.clone(), holder("n1"), 1, 5))
            .unwrap();
        changed(&known, true, "a holder");
        known
            .seat_changed(&keys, &put(holder_key.clone(), holder("n1"), 2, 6))
            .unwrap();
        changed(&known, false, "the same holder written again");
        known
            .seat_changed(&keys, &put(holder_key.clone(), holder("n2"), 3, 7))
            .unwrap();
        changed(&known, true, "another holder");

        known
            .seat_changed(&keys, &put(keys.inbox_message("b", 1), vec![], 1, 8))
            .unwrap();
        changed(&known, true, "a seat's first message adds the seat");
        known
            .seat_changed(&keys, &put(keys.inbox_message("b", 2), vec![], 1, 9))
            .unwrap();
        changed(&known, false, "a second message does not");
        let gone = |key: String, revision| WatchEvent::Delete { key, revision };
        known
            .seat_changed(&keys, &gone(keys.inbox_message("b", 1), 10))
            .unwrap();
        changed(&known, false, "one of two messages going does not");
        known
            .seat_changed(&keys, &gone(keys.inbox_message("b", 2), 11))
            .unwrap();
        changed(&known, true, "the last message going removes the seat");

        known.entry_changed(&keys, &gone(keys.seat_run("a", "t1"), 12));
        changed(&known, false, "one of two entries going does not");
        known.entry_changed(&keys, &gone(keys.seat_run("a", "t2"), 13));
        changed(
            &known,
            false,
            "a held seat's last entry going does not: it is held",
        );
        known.entry_changed(&keys, &put(keys.seat_run("a", "t3"), vec![], 1, 14));
        changed(
            &known,
            false,
            "nor a held seat's first entry (every launch on a held seat)",
        );
        let freed = known.seat_changed(&keys, &gone(holder_key, 15)).unwrap();
        assert!(freed, "a holder key deleted frees its seat");
        changed(&known, true, "the holder going");
        known.entry_changed(&keys, &gone(keys.seat_run("a", "t3"), 16));
        changed(
            &known,
            true,
            "an unheld seat's last entry going removes the seat",
        );

        known
            .seat_changed(&keys, &put(keys.inbox_message("c", 1), vec![], 1, 17))
            .unwrap();
        changed(&known, true, "an unheld seat's first message adds it");
        known.entry_changed(&keys, &put(keys.seat_run("c", "t4"), vec![], 1, 18));
        changed(&known, false, "a run on a seat there for its mail does not");
        known
            .seat_changed(&keys, &gone(keys.inbox_message("c", 1), 19))
            .unwrap();
        changed(&known, false, "its mail going while its run stays does not");
        known.entry_changed(&keys, &gone(keys.seat_run("c", "t4"), 20));
        changed(&known, true, "its run going then does");

        let reloaded = Known::from_listings(&keys, &[], 20, &[]).unwrap();
        assert_ne!(
            reloaded.shape(),
            Known::from_listings(&keys, &[], 20, &[]).unwrap().shape(),
            "each load has a shape of its own"
        );
    }

    /// The placement pass reads a held agent's seat's retirement mark only when the view shows
    /// one: the view must follow the mark.
    #[test]
    fn the_view_follows_a_seats_retirement_mark() {
        let keys = Keys::new("t");
        let marked = put(
            keys.seat_retiring("a"),
            b"2026-12-05T00:00:00Z".to_vec(),
            1,
            2,
        );
        let loaded = Known::from_listings(
            &keys,
            std::slice::from_ref(match &marked {
                WatchEvent::Put(kv) => kv,
                WatchEvent::Delete { .. } => unreachable!(),
            }),
            2,
            &[],
        )
        .unwrap();
        assert!(loaded.is_retiring("a"), "a mark in the listing");
        assert!(!loaded.is_retiring("b"));

        let mut known = Known::from_listings(&keys, &[], 1, &[]).unwrap();
        let shape = known.shape();
        known.seat_changed(&keys, &marked).unwrap();
        assert!(known.is_retiring("a"), "a mark put");
        assert_eq!(known.shape(), shape, "a mark is not a seat nor a holder");
        let cleared = WatchEvent::Delete {
            key: keys.seat_retiring("a"),
            revision: 3,
        };
        known.seat_changed(&keys, &cleared).unwrap();
        assert!(!known.is_retiring("a"), "a mark cleared");
    }
}
