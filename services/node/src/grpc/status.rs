//! A domain error as a gRPC status: by its kind, through the one table in
//! `boxfleet_proto::errors`, carrying the error's own text.

use boxfleet_actors::lifecycle;
use tonic::Status as GrpcStatus;

/// The status a lifecycle (or store) error is answered with.
pub(crate) fn status(error: impl Into<lifecycle::Error>) -> GrpcStatus {
    let error = error.into();
    error.kind().status(error.to_string())
}

/// `text`, or `None` when it is empty (proto3 strings have no absent value).
pub(crate) fn none_if_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}
