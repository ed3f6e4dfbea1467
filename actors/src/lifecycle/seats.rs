//! The seats this node holds, as far as it knows (the store has the last word): the table of
//! held seats and their fences, the node's session, and the per-seat locks.
//!
//! Locks, in the order they are taken — a lock is never taken while a later one is held:
//! 1. `acquiring` (per seat): one acquire and recovery pass of a seat at a time;
//! 2. `seat` (per seat): one launch or inbox pass of a seat at a time, so "busy" and
//!    "dispatched" checks are atomic with their writes (this node is the seat's only writer);
//! 3. the table and the session (std mutexes): held only for a read or a write of the table,
//!    never across an await.
//!
//! An acquire (under 1) runs the recovery pass, which takes neither 1 nor 2 again; a restarted
//! seat actor's recovery runs under 2 alone; a seat taken back on this node's own lease runs
//! it under 1 and then 2 (taken only if free).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use boxfleet_cluster::inbox::Message;
use boxfleet_cluster::seat::Session;
use boxfleet_cluster::transition::Fence;

/// Per-key async locks, made on first use.
#[derive(Debug, Default)]
pub(crate) struct KeyedLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeyedLocks {
    /// `key`'s lock, made on first use.
    fn of(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_owned())
            .or_default()
            .clone()
    }

    /// Waits for `key`'s lock.
    pub async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.of(key).lock_owned().await
    }

    /// `key`'s lock if nobody holds it now.
    pub fn try_lock(&self, key: &str) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        self.of(key).try_lock_owned().ok()
    }
}

/// What the node knows of its seats.
#[derive(Debug, Default)]
struct SeatTable {
    /// seats held, with the fence each is held under
    held: BTreeMap<String, Fence>,
    /// seats being handed over: no new work starts on them
    releasing: BTreeSet<String>,
    /// seats acquired since the waiter last looked: their remote runs are polled at once by
    /// this node, duty or not
    fresh: BTreeSet<String>,
    /// seats with a turn out at the engine (dispatched, not yet acked)
    in_flight: BTreeMap<String, Message>,
    /// seats whose head message was deferred: no turn goes out before the instant
    cooling: BTreeMap<String, tokio::time::Instant>,
    /// how many times `held` changed
    held_changes: u64,
}

/// The node's seats and session.
#[derive(Debug)]
pub(crate) struct Seats {
    table: Mutex<SeatTable>,
    session: RwLock<Session>,
    /// when the session was last renewed
    renewed_at: Mutex<tokio::time::Instant>,
    /// lock 1: one acquire and recovery pass per seat
    pub acquiring: KeyedLocks,
    /// lock 2: one launch or inbox pass per seat
    pub seat: KeyedLocks,
}

impl Seats {
    pub fn new(session: Session) -> Self {
        Seats {
            table: Mutex::default(),
            session: RwLock::new(session),
            renewed_at: Mutex::new(tokio::time::Instant::now()),
            acquiring: KeyedLocks::default(),
            seat: KeyedLocks::default(),
        }
    }

    fn table(&self) -> MutexGuard<'_, SeatTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    // --- the session

    /// The node's current session.
    pub fn session(&self) -> Session {
        self.session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A new session replaces the lost one.
    pub fn replace_session(&self, session: Session) {
        *self.session.write().unwrap_or_else(|p| p.into_inner()) = session;
    }

    /// Whether the node is registered as draining.
    pub fn draining(&self) -> bool {
        self.session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .info
            .draining
    }

    /// Records the node's registration as draining (or not).
    pub fn set_draining(&self, draining: bool) {
        self.session
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .info
            .draining = draining;
    }

    /// The session was renewed now.
    pub fn renewed(&self) {
        *self.renewed_at.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
    }

    /// How long since the session was last renewed.
    pub fn silent_for(&self) -> Duration {
        self.renewed_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    // --- held seats

    /// The seats held, with their fences, by seat.
    pub fn held(&self) -> Vec<Fence> {
        let mut held: Vec<Fence> = self.table().held.values().cloned().collect();
        held.sort_by(|a, b| a.seat.cmp(&b.seat));
        held
    }

    /// How many seats are held.
    pub fn held_count(&self) -> usize {
        self.table().held.len()
    }

    /// The fence `seat` is held under, when this node holds it.
    pub fn fence(&self, seat: &str) -> Option<Fence> {
        self.table().held.get(seat).cloned()
    }

    /// How many times the seats held (or their fences) changed: the placement pass skips
    /// what it decided already while this and its other inputs stay the same.
    pub fn held_changes(&self) -> u64 {
        self.table().held_changes
    }

    /// `seat` is held under `fence` from now (and fresh: its remote runs are polled at once).
    pub fn hold(&self, fence: Fence) {
        let mut table = self.table();
        table.fresh.insert(fence.seat.clone());
        table.held.insert(fence.seat.clone(), fence);
        table.held_changes += 1;
    }

    /// Forgets `seat`.
    pub fn forget(&self, seat: &str) {
        let mut table = self.table();
        table.held.remove(seat);
        table.held_changes += 1;
    }

    /// The seats acquired since the last call (and forgets them).
    pub fn take_fresh(&self) -> BTreeSet<String> {
        std::mem::take(&mut self.table().fresh)
    }

    // --- handing over

    /// Marks `seat` as being handed over; `false` when it already was.
    pub fn start_release(&self, seat: &str) -> bool {
        self.table().releasing.insert(seat.to_owned())
    }

    /// `seat` is handed over: forgotten, with any turn it had out at the engine.
    pub fn released(&self, seat: &str) {
        let mut table = self.table();
        table.held.remove(seat);
        table.in_flight.remove(seat);
        table.held_changes += 1;
    }

    /// The hand-over of `seat` is over.
    pub fn end_release(&self, seat: &str) {
        self.table().releasing.remove(seat);
    }

    /// Whether `seat` is being handed over.
    pub fn releasing(&self, seat: &str) -> bool {
        self.table().releasing.contains(seat)
    }

    // --- the turn out at the engine

    /// Whether `seat` has a turn out at the engine.
    pub fn has_turn_out(&self, seat: &str) -> bool {
        self.table().in_flight.contains_key(seat)
    }

    /// `message` is out at the engine as `seat`'s turn.
    pub fn turn_out(&self, seat: &str, message: Message) {
        self.table().in_flight.insert(seat.to_owned(), message);
    }

    /// The turn out at the engine for `seat`, taken back when it is `delivery_id`.
    pub fn turn_back(&self, seat: &str, delivery_id: &str) -> Option<Message> {
        let mut table = self.table();
        match table.in_flight.get(seat) {
            Some(message) if message.delivery.delivery_id == delivery_id => {
                table.in_flight.remove(seat)
            }
            _ => None,
        }
    }

    // --- a deferred turn's spacing

    /// No turn of `seat` goes out before `until`.
    pub fn cool(&self, seat: &str, until: tokio::time::Instant) {
        self.table().cooling.insert(seat.to_owned(), until);
    }

    /// Whether `seat`'s next turn must still wait (a deferral's spacing).
    pub fn cooling(&self, seat: &str) -> bool {
        let mut table = self.table();
        match table.cooling.get(seat) {
            Some(until) if *until > tokio::time::Instant::now() => true,
            Some(_) => {
                table.cooling.remove(seat);
                false
            }
            None => false,
        }
    }
}
