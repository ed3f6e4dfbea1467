//! What an etcd-client error means for the call that met it: over (the store answered), worth
//! another member (nothing was sent), or lost on the way (a read may go elsewhere; a write's
//! outcome is unknown until re-read).

use std::error::Error as _;

use etcd_client as etcd;
use tonic::Code;

use crate::store::Error;

/// Whether the failed call could have written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effect {
    Read,
    Write,
}

/// One attempt's failure, sorted.
#[derive(Debug)]
pub(super) enum Failure {
    /// The store answered; the call is over (another member would answer the same).
    Final(Error),
    /// This member did not take the call — no connection, or no leader to serve it — and
    /// nothing was sent: another member may take it.
    NotSent(String),
    /// The call may have reached the store and its answer was lost (connection reset, timed
    /// out, leader changed mid-proposal). A read may go to another member; a write is
    /// indeterminate.
    Lost(String),
}

/// Sorts `error` from one member's attempt.
pub(super) fn classify(error: etcd::Error) -> Failure {
    match error {
        etcd::Error::GRpcStatus(status) => classify_status(&status),
        // a transport error is raised while a channel connects, before any request
        etcd::Error::TransportError(error) => Failure::NotSent(chain(&error)),
        etcd::Error::IoError(error) => Failure::Lost(format!("io: {error}")),
        // etcd-client's own word for a keep-alive of an expired or revoked lease
        etcd::Error::LeaseKeepAliveError(message) if message == "lease not found" => {
            Failure::Final(Error::LeaseNotFound(0))
        }
        etcd::Error::LeaseKeepAliveError(message) => Failure::Lost(message),
        etcd::Error::WatchError(message) => Failure::Lost(message),
        other => Failure::Final(Error::Invalid(other.to_string())),
    }
}

fn classify_status(status: &tonic::Status) -> Failure {
    let message = status.message();
    let described = || describe(status);
    if never_connected(status) || handed_back_unsent(status) {
        return Failure::NotSent(described());
    }
    match status.code() {
        Code::NotFound if message.contains("lease not found") => {
            Failure::Final(Error::LeaseNotFound(0))
        }
        Code::OutOfRange if message.contains("compacted") => Failure::Final(Error::Compacted {
            requested: 0,
            oldest: 0,
        }),
        // the member has no leader to serve the call (require-leader, or mid-election):
        // etcd refused before proposing anything
        Code::Unavailable if message.contains("no leader") => Failure::NotSent(described()),
        Code::ResourceExhausted if message.contains("database space exceeded") => {
            Failure::Final(Error::Unavailable(format!(
                "{message}: etcd's database reached its quota and takes no writes; compact and \
                 defragment it, raise --quota-backend-bytes, then `etcdctl alarm disarm` (README, \
                 Operating etcd)"
            )))
        }
        // "too many requests": refused before applying
        Code::ResourceExhausted if !message.contains("larger than max") => {
            Failure::NotSent(described())
        }
        // the raft layer's refusal, or the gRPC layer's ("received message larger than max")
        Code::InvalidArgument | Code::ResourceExhausted => {
            if message.contains("request is too large") || message.contains("larger than max") {
                Failure::Final(Error::Invalid(format!(
                    "{message}: the request is larger than etcd's --max-request-bytes allows \
                     (README, Operating etcd)"
                )))
            } else {
                Failure::Final(Error::Invalid(described()))
            }
        }
        Code::Unauthenticated | Code::PermissionDenied => Failure::Final(Error::Invalid(format!(
            "{}: etcd refused boxfleet's credentials; check store.username, store.password and \
             the user's role (README, Operating etcd)",
            described()
        ))),
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Cancelled
        | Code::Unknown
        | Code::Internal
        | Code::Aborted => Failure::Lost(described()),
        _ => Failure::Final(Error::Invalid(described())),
    }
}

/// Whether the call was dropped from the client's queue unsent because its connection had
/// closed: hyper's dispatcher hands such a request back as "operation was canceled: connection
/// closed" (a request already on the wire fails with the stream's own error instead — a reset,
/// a broken pipe, an incomplete message). Seen on the first call after a member is SIGKILLed.
fn handed_back_unsent(status: &tonic::Status) -> bool {
    status.code() == Code::Cancelled
        && describe(status).contains("operation was canceled: connection closed")
}

/// Whether the status comes from a connection that never opened (tonic wraps every connect
/// failure — refused, unreachable, TLS handshake — in a `ConnectError`).
fn never_connected(status: &tonic::Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if error.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        source = error.source();
    }
    false
}

/// A status as `Code: message: cause: cause`.
fn describe(status: &tonic::Status) -> String {
    let message = status.message();
    let causes = status.source().map(chain).unwrap_or_default();
    let told = if causes.starts_with(message) {
        causes
    } else if causes.is_empty() || message.contains(&causes) {
        message.to_owned()
    } else {
        format!("{message}: {causes}")
    };
    format!("{:?}: {told}", status.code())
}

/// An error and its causes, `a: b: c`, without repeats.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The error a call returns when its one attempt was lost.
pub(super) fn lost(effect: Effect, message: String) -> Error {
    match effect {
        Effect::Read => Error::Unavailable(message),
        Effect::Write => Error::Indeterminate(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_without_a_leader_refused_before_anything_was_sent() {
        let status = tonic::Status::unavailable("etcdserver: no leader");
        assert!(matches!(
            classify(etcd::Error::GRpcStatus(status)),
            Failure::NotSent(_)
        ));
    }

    #[test]
    fn a_dropped_connection_may_have_carried_the_call() {
        let status = tonic::Status::unavailable("error reading a body from connection");
        assert!(matches!(
            classify(etcd::Error::GRpcStatus(status)),
            Failure::Lost(_)
        ));
        let status = tonic::Status::unknown("etcdserver: leader changed");
        assert!(matches!(
            classify(etcd::Error::GRpcStatus(status)),
            Failure::Lost(_)
        ));
    }

    #[test]
    fn a_request_handed_back_from_a_closed_connection_was_never_sent() {
        let status = tonic::Status::cancelled(
            "operation was canceled: transport error: operation was canceled: connection closed",
        );
        assert!(matches!(
            classify(etcd::Error::GRpcStatus(status)),
            Failure::NotSent(_)
        ));
        // a cancel for any other reason may have carried the call
        let status = tonic::Status::cancelled("Timeout expired");
        assert!(matches!(
            classify(etcd::Error::GRpcStatus(status)),
            Failure::Lost(_)
        ));
    }

    #[test]
    fn a_connect_error_in_the_source_chain_means_never_sent() {
        let cause = tonic::ConnectError(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        )));
        let mut status = tonic::Status::unavailable("tcp connect error");
        status.set_source(std::sync::Arc::new(cause));
        match classify(etcd::Error::GRpcStatus(status)) {
            Failure::NotSent(message) => assert!(message.contains("refused"), "{message}"),
            other => panic!("expected not sent, got {other:?}"),
        }
    }

    #[test]
    fn a_full_database_and_an_oversized_request_say_which_etcd_setting_to_change() {
        let full = tonic::Status::resource_exhausted("etcdserver: mvcc: database space exceeded");
        match classify(etcd::Error::GRpcStatus(full)) {
            Failure::Final(error) => {
                assert!(
                    error.to_string().contains("--quota-backend-bytes"),
                    "{error}"
                );
                assert!(error.is_retryable());
            }
            other => panic!("expected final, got {other:?}"),
        }
        let large = tonic::Status::invalid_argument("etcdserver: request is too large");
        match classify(etcd::Error::GRpcStatus(large)) {
            Failure::Final(error) => {
                assert!(error.to_string().contains("--max-request-bytes"), "{error}")
            }
            other => panic!("expected final, got {other:?}"),
        }
    }
}
