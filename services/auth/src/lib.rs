//! boxfleet's trust boundary (DESIGN §13): who may ask a node for what.
//!
//! - [`keyring`]: the fleet's signing keys — several active for rotation, retired ones refused,
//!   kept in a 0600 file a node makes on first start or given in its config — and the signed
//!   bearer credentials they issue and verify.
//! - [`credential`]: what a credential says: subject, [`Role`], optional seat scope, expiry.
//! - [`policy`]: the one table from a call to the roles that may make it, and the seat scope.
//! - [`run_token`]: per-run signed tokens (HMAC-SHA256, key id, expiry, a key derived per
//!   audience) for the endpoints a box calls back on.

pub mod credential;
pub mod keyring;
pub mod policy;
pub mod role;
pub mod run_token;

pub use credential::{Claims, Principal};
pub use keyring::{Keyring, KeyringError};
pub use policy::{Call, Denied, authorize};
pub use role::Role;
