//! Everything boxfleet's coordination store touches (DESIGN §5, §6).
//!
//! - [`store`]: the [`Store`] trait, the etcd and embedded implementations, failpoints.
//! - [`keys`]: the whole key schema, in one file.
//! - [`record`]: the run record, a JSON document that keeps the keys it cannot read.
//! - [`phase`]: the phase record a job's collection publishes, and its model receipt.
//! - [`transition`]: the run state machine's decisions, without I/O.
//! - [`runs`]: every transition of a run as one fenced txn.
//! - [`seat`]: seat leases (epoch = the holder key's create_revision) and node sessions.
//! - [`inbox`], [`ledger`], [`spend`], [`events`]: the seat mailbox, the completion ledger,
//!   the spend counters and the events outbox; [`retention`] the leases that bound them.
//! - [`ops`]: the rebased-instant records of the 29/30-day rule; [`duty`]: the waiter's poll duty.
//! - [`placement`]: rendezvous hashing of seats over live nodes; [`seat_view`]: the seats'
//!   holders, mail and runs as the placement pass sees them, kept current by a watch.
//! - [`stranded`]: local boxes a run left on another host, named for a node there to kill.
//!
//! Nothing here does sandbox I/O: the actors decide when to call these operations.

pub mod clock;
pub mod duty;
pub mod error;
pub mod events;
pub mod inbox;
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod ops;
pub mod phase;
pub mod placement;
pub mod record;
pub mod retention;
pub mod runs;
pub mod seat;
pub mod seat_runs;
pub mod seat_view;
pub mod spend;
pub mod store;
pub mod stranded;
pub mod transition;

pub use error::{Class, Error};
pub use keys::Keys;
pub use record::{RunRecord, Status};
pub use store::{Store, StoreExt};
