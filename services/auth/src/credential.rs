//! What a credential says, and who a verified one is.

use serde::{Deserialize, Serialize};

use crate::role::Role;

/// The issuer every boxfleet credential names.
pub const ISSUER: &str = "boxfleet";

/// A credential's claims (the JWT body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// who it is: a person's or an engine's handle, or a node's id
    pub sub: String,
    pub role: Role,
    /// the seats it acts for; empty: every seat
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seats: Vec<String>,
    /// when it was issued and when it stops working (seconds since the epoch)
    pub iat: i64,
    pub exp: i64,
    /// always [`ISSUER`]
    pub iss: String,
}

/// The caller a verified credential names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub subject: String,
    pub role: Role,
    /// the seats it acts for; empty: every seat
    pub seats: Vec<String>,
    /// the key that signed it
    pub key_id: String,
}

impl Principal {
    /// Whether it may act for `seat` (a credential with no seat scope acts for every seat).
    pub fn covers(&self, seat: &str) -> bool {
        self.seats.is_empty() || self.seats.iter().any(|s| s == seat)
    }
}
