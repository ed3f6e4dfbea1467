//! `lifecycle::Error`: why a lifecycle operation did not happen, with the [`ErrorKind`] a
//! caller must treat it as. Per-request failures travel in replies; the gRPC services turn an
//! error into a status through the one table in `boxfleet_proto::errors`, by its kind.
//!
//! Where an error comes from is kept (a store error keeps its class, a refused transition its
//! refusal), so the kind is decided here once and not guessed from a flattened message.

use boxfleet_cluster::inbox::Rejected;
use boxfleet_cluster::runs::RunError;
use boxfleet_proto::ErrorKind;

use crate::ports::BoxError;

/// Why an operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A transition of the run record was not applied (refused, fenced, contended, or the
    /// store failed under it).
    #[error("{0}")]
    Run(#[from] RunError),
    /// The store failed outside a transition; its class says whether to retry.
    #[error("{0}")]
    Store(#[from] boxfleet_cluster::Error),
    /// An inbox message was not acked or deferred (the seat moved, the message moved, or the
    /// store failed).
    #[error("{0}")]
    Inbox(#[from] Rejected),
    /// A box or its provider failed.
    #[error("{0}")]
    Box(#[from] BoxError),
    /// Another node holds the seat, or this one is handing it over.
    #[error("sandbox_seat_not_held: seat {seat} is held by {holder}")]
    SeatHeldElsewhere { seat: String, holder: String },
    /// What the call names does not exist (a run that is gone).
    #[error("{0}")]
    NotFound(String),
    /// The call can never succeed as made (an unknown seat, runner or cell; a model the box
    /// could not route; a command job with no command).
    #[error("{0}")]
    BadRequest(String),
    /// A setup step did not complete; the box was torn down before any brief ran.
    #[error("sandbox_setup_failed: {0}")]
    Setup(String),
}

impl Error {
    /// How a caller must treat this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::BadRequest(_) | Error::Inbox(_) => ErrorKind::BadRequest,
            Error::SeatHeldElsewhere { .. } => ErrorKind::Unavailable,
            Error::Box(BoxError::Unreachable(_)) => ErrorKind::Unavailable,
            Error::Store(store) if store.is_retryable() => ErrorKind::Unavailable,
            Error::Run(_) | Error::Store(_) | Error::Box(_) | Error::Setup(_) => {
                ErrorKind::Internal
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_call_names_or_asks_wrongly_is_the_callers_to_fix() {
        assert_eq!(
            Error::NotFound("run t is gone".into()).kind(),
            ErrorKind::NotFound
        );
        assert_eq!(
            Error::BadRequest("no runner \"x\"".into()).kind(),
            ErrorKind::BadRequest
        );
    }

    #[test]
    fn a_seat_moving_or_a_box_or_store_out_of_reach_is_unavailable() {
        let moving = Error::SeatHeldElsewhere {
            seat: "eng".into(),
            holder: "n2".into(),
        };
        assert_eq!(moving.kind(), ErrorKind::Unavailable);
        assert_eq!(
            Error::Box(BoxError::Unreachable("slow".into())).kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            Error::Store(boxfleet_cluster::Error::Unavailable("etcd down".into())).kind(),
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn a_fault_of_ours_is_internal() {
        assert_eq!(
            Error::Box(BoxError::Failed("disk full".into())).kind(),
            ErrorKind::Internal
        );
        assert_eq!(
            Error::Store(boxfleet_cluster::Error::Decode {
                key: "k".into(),
                message: "bad".into()
            })
            .kind(),
            ErrorKind::Internal
        );
    }
}
