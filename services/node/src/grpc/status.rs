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

#[cfg(test)]
mod tests {
    use super::*;
    use boxfleet_cluster::runs::RunError;
    use boxfleet_cluster::transition::Refusal;

    #[test]
    fn an_error_is_answered_with_its_kinds_code_and_its_own_text() {
        let down = RunError::Store(boxfleet_cluster::Error::Unavailable("etcd down".into()));
        let answered = status(lifecycle::Error::Run(down));
        assert_eq!(answered.code(), tonic::Code::Unavailable);
        assert_eq!(answered.message(), "store unavailable: etcd down");
        let refused = status(lifecycle::Error::Run(RunError::Refused(
            Refusal::AnswerTaken,
        )));
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
        assert_eq!(refused.message(), "a turn took the answer: it is spent");
        let bad = status(lifecycle::Error::BadRequest("no runner \"x\"".into()));
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    }
}
