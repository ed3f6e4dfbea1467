//! `cluster::Error`: what went wrong talking to the store, classed where it happened so the
//! caller knows whether to retry, give up, or re-read before deciding anything.

use std::time::Duration;

/// How a caller must treat an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Nothing was written; the same call may go through later (transport, unavailable).
    Retryable,
    /// The call can never succeed as made (bad request, compacted history, gone lease).
    Terminal,
    /// A write whose outcome is unknown: it may have landed. Re-read before deciding.
    Indeterminate,
}

/// An error from the store layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The store could not be reached or refused for now; nothing was written.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A write was sent and its outcome is unknown.
    #[error("store write outcome unknown (re-read before deciding): {0}")]
    Indeterminate(String),
    /// A call did not finish inside its bound.
    #[error("store call timed out after {0:?}")]
    Timeout(Duration, /* wrote */ bool),
    /// A watch asked for history the store no longer keeps.
    #[error(
        "revision {requested} is compacted (oldest kept: {oldest}); re-read and watch from now"
    )]
    Compacted { requested: i64, oldest: i64 },
    /// The lease expired or was revoked.
    #[error("lease {0:x} not found: it expired or was revoked")]
    LeaseNotFound(i64),
    /// The request can never succeed as made.
    #[error("store refused the request: {0}")]
    Invalid(String),
    /// The embedded store's files are unreadable or could not be written.
    #[error("embedded store at {path}: {message}")]
    Disk { path: String, message: String },
    /// A stored value is not what this build can read.
    #[error("could not decode {key}: {message}")]
    Decode { key: String, message: String },
}

impl Error {
    /// How the caller must treat this error.
    pub fn class(&self) -> Class {
        match self {
            Error::Unavailable(_) => Class::Retryable,
            Error::Indeterminate(_) => Class::Indeterminate,
            Error::Timeout(_, wrote) => {
                if *wrote {
                    Class::Indeterminate
                } else {
                    Class::Retryable
                }
            }
            Error::Compacted { .. }
            | Error::LeaseNotFound(_)
            | Error::Invalid(_)
            | Error::Disk { .. }
            | Error::Decode { .. } => Class::Terminal,
        }
    }

    /// Whether the same call may simply be made again.
    pub fn is_retryable(&self) -> bool {
        self.class() == Class::Retryable
    }

    /// Whether a write may have landed.
    pub fn is_indeterminate(&self) -> bool {
        self.class() == Class::Indeterminate
    }
}
