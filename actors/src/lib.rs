//! boxfleet's node-local actors, their supervision, and the ports they drive boxes and
//! coding agents through (DESIGN §7, §9, §10).
//!
//! - [`lifecycle`]: the run lifecycle's steps (launch, collect, answer, settle, endings,
//!   recovery, the inbox), performed around the decisions of `boxfleet_cluster::transition`.
//! - [`ports`]: the `Provider` / `Sandbox` / `Runner` traits the backends implement.
//! - [`supervisor`]: the OTP-style supervisor every node's tree is built of.
//! - the actors: [`seat`], [`run`], [`boxes`], [`workers`] (session, placement, waiter,
//!   collectors), [`board`], [`tail`]; [`tree`] carries out what the lifecycle leaves to them,
//!   and [`names`] names them.
//! - [`credentials`]: a cli-agent login seeded into a local box and written back.
//! - [`streaks`]: the waiter's gone-detection and the rate limit of a repeated warning.

pub mod board;
pub mod boxes;
pub mod completion;
pub mod crash;
pub mod credentials;
pub mod lifecycle;
pub mod names;
pub mod nodes_watch;
pub mod outage;
pub mod ports;
pub mod run;
pub mod seat;
pub mod spans;
pub mod streaks;
pub mod supervisor;
pub mod tail;
pub mod tree;
pub mod waiter;
pub mod workers;
