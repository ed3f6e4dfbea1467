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

use std::collections::{BTreeMap, HashMap};
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

/// What the store says of the seats, as of [`Known::complete_through`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Known {
    /// each held seat's holder key
    holders: BTreeMap<String, Held>,
    /// the messages waiting in each seat's inbox
    mail: HashMap<String, u32>,
    /// the run entries of each seat
    runs: HashMap<String, u32>,
    /// every change to the seats' prefix up to this revision is in
    complete_through: Revision,
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
            ..Known::default()
        };
        for kv in seats {
            if let Some(seat) = seat::seat_of(keys, &kv.key, SeatKey::Mail) {
                *known.mail.entry(seat.to_owned()).or_default() += 1;
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

    /// Whether both say the same of every seat (each as of its own revision).
    pub fn agrees_with(&self, other: &Known) -> bool {
        (&self.holders, &self.mail, &self.runs) == (&other.holders, &other.mail, &other.runs)
    }

    /// Every change to the seats' prefix up to this revision is in the view.
    pub fn complete_through(&self) -> Revision {
        self.complete_through
    }

    /// Applies one change of the seats' prefix; `true` when it freed a seat (its holder key
    /// went: released, or its holder's session lapsed).
    fn seat_changed(&mut self, keys: &Keys, change: &WatchEvent) -> Result<bool, Error> {
        // the changes of one revision may come one by one: the revision before is whole
        self.complete_through = self.complete_through.max(change.revision() - 1);
        let key = change.key();
        if let Some(seat) = seat::seat_of(keys, key, SeatKey::Holder) {
            return Ok(match change {
                WatchEvent::Put(kv) => {
                    if let Some(held) = seat::held_at(keys, kv)? {
                        self.holders.insert(held.seat.clone(), held);
                    }
                    false
                }
                WatchEvent::Delete { .. } => self.holders.remove(seat).is_some(),
            });
        }
        if let Some(seat) = seat::seat_of(keys, key, SeatKey::Mail) {
            count(&mut self.mail, seat, change);
        }
        Ok(false)
    }

    /// Applies one change of the run entries.
    fn entry_changed(&mut self, keys: &Keys, change: &WatchEvent) {
        if let Some(seat) = seat_of_entry(keys, change.key()) {
            count(&mut self.runs, seat, change);
        }
    }
}

/// Counts a key created under `seat` (its first version) or deleted; a key written again is
/// the same key.
fn count(counts: &mut HashMap<String, u32>, seat: &str, change: &WatchEvent) {
    match change {
        WatchEvent::Put(kv) if kv.version == 1 => {
            *counts.entry(seat.to_owned()).or_default() += 1;
        }
        WatchEvent::Put(_) => {}
        WatchEvent::Delete { .. } => {
            if let Some(left) = counts.get_mut(seat) {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    counts.remove(seat);
                }
            }
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
