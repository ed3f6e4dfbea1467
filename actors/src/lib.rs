//! boxfleet's node-local actors, their supervision, and the ports they drive boxes and
//! coding agents through (DESIGN §7, §9, §10).
//!
//! - [`ports`]: the `Provider` / `Sandbox` / `Runner` traits the backends implement.

pub mod board;
pub mod boxes;
pub mod coordinator;
pub mod credentials;
pub mod ports;
pub mod run;
pub mod seat;
pub mod supervisor;
pub mod tail;
pub mod workers;
