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
    /// The caller may not do this (the spec's answer authority).
    #[error("permission denied: {0}")]
    Denied(String),
    /// A setup step did not complete; the box was torn down before any brief ran.
    #[error("sandbox_setup_failed: {0}")]
    Setup(String),
    /// The run environment lacks a required value (the launch is refused before any box;
    /// the same call goes through once the variable is set).
    #[error("{0}")]
    EnvUnresolved(#[from] boxfleet_config::runenv::EnvUnresolved),
    /// The seat's or the company's budget does not cover a launch, or could not be read (the
    /// same call goes through once the window turns or the store answers).
    #[error("{0}")]
    Budget(String),
}

impl Error {
    /// How a caller must treat this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::BadRequest(_) => ErrorKind::BadRequest,
            Error::Denied(_) => ErrorKind::PermissionDenied,
            Error::SeatHeldElsewhere { .. } | Error::EnvUnresolved(_) | Error::Budget(_) => {
                ErrorKind::Unavailable
            }
            Error::Box(BoxError::Unreachable(_)) => ErrorKind::Unavailable,
            Error::Box(_) | Error::Setup(_) => ErrorKind::Internal,
            Error::Store(store) => store_kind(store),
            Error::Run(run) => match run {
                // the run is not in the state the call needs: read it again
                RunError::Refused(_) => ErrorKind::Conflict,
                // the seat moved, or the row kept moving: the same call goes through later
                RunError::SeatNotHeld { .. } | RunError::Contended(_) => ErrorKind::Unavailable,
                RunError::Store(store) => store_kind(store),
            },
            Error::Inbox(rejected) => match rejected {
                Rejected::SeatNotHeld { .. } => ErrorKind::Unavailable,
                Rejected::Moved(_) => ErrorKind::Conflict,
                Rejected::Store(store) => store_kind(store),
            },
        }
    }
}

/// A store error's kind, by its class: nothing written (retryable) or an outcome unknown
/// (indeterminate: every write the API makes is refused as done when repeated) is
/// unavailable; a request the store can never take is the caller's; the rest is ours.
fn store_kind(error: &boxfleet_cluster::Error) -> ErrorKind {
    use boxfleet_cluster::Class;
    match (error, error.class()) {
        (_, Class::Retryable | Class::Indeterminate) => ErrorKind::Unavailable,
        (boxfleet_cluster::Error::Invalid(_), _) => ErrorKind::BadRequest,
        _ => ErrorKind::Internal,
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

    /// The same store outage reads the same from every call: inside a transition (an answer's
    /// record write) as outside it (a read). It used to reach a client as `INTERNAL` from a
    /// transition and `UNAVAILABLE` from a read.
    #[test]
    fn a_retryable_store_error_inside_a_transition_is_unavailable() {
        let down = || boxfleet_cluster::Error::Unavailable("tcp connect error".into());
        assert_eq!(Error::Store(down()).kind(), ErrorKind::Unavailable);
        assert_eq!(
            Error::Run(RunError::Store(down())).kind(),
            ErrorKind::Unavailable
        );
        let unknown = boxfleet_cluster::Error::Indeterminate("reply lost".into());
        assert_eq!(
            Error::Run(RunError::Store(unknown)).kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(
            Error::Run(RunError::Contended("t".into())).kind(),
            ErrorKind::Unavailable
        );
        let moved = RunError::SeatNotHeld {
            seat: "eng".into(),
            epoch: 4,
        };
        assert_eq!(Error::Run(moved).kind(), ErrorKind::Unavailable);
    }

    /// A transition the run's state refused is the caller's to re-read, not a fault of ours.
    #[test]
    fn a_refused_transition_is_a_conflict() {
        use boxfleet_cluster::transition::Refusal;
        assert_eq!(
            Error::Run(RunError::Refused(Refusal::AnswerTaken)).kind(),
            ErrorKind::Conflict
        );
        assert_eq!(Error::Inbox(Rejected::Moved(7)).kind(), ErrorKind::Conflict);
    }

    #[test]
    fn a_request_the_store_can_never_take_is_a_bad_request() {
        let bad = boxfleet_cluster::keys::check_id("seat", "a/b").expect_err("refused");
        assert_eq!(Error::Store(bad).kind(), ErrorKind::BadRequest);
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
