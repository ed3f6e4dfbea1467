//! The one table from an error's kind to its gRPC code (DESIGN §3, STYLE 6). Every service
//! maps a domain error to a status here and nowhere else, so one failure reads the same
//! from every call: a store that cannot be reached is `UNAVAILABLE` whether a launch, an
//! answer or a delivery met it.

/// What kind of failure an error is, as a caller must treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// the call carries no credential, or one that does not verify: get one
    Unauthenticated,
    /// the credential may not make this call
    PermissionDenied,
    /// what the call names does not exist (a run, a node)
    NotFound,
    /// the call can never succeed as made: fix the request
    BadRequest,
    /// the call does not apply to the state it met (a run not in the status it needs): read
    /// again before deciding
    Conflict,
    /// nothing is wrong with the call; it cannot be served now (the store, a box or the seat's
    /// holder out of reach, the seat moving): the same call may be made again
    Unavailable,
    /// a fault of ours: a person must look
    Internal,
}

impl ErrorKind {
    /// Every kind, in the table's order.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
        ErrorKind::NotFound,
        ErrorKind::BadRequest,
        ErrorKind::Conflict,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    /// The gRPC code a failure of this kind is answered with.
    pub fn code(self) -> tonic::Code {
        match self {
            ErrorKind::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorKind::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorKind::NotFound => tonic::Code::NotFound,
            ErrorKind::BadRequest => tonic::Code::InvalidArgument,
            ErrorKind::Conflict => tonic::Code::FailedPrecondition,
            ErrorKind::Unavailable => tonic::Code::Unavailable,
            ErrorKind::Internal => tonic::Code::Internal,
        }
    }

    /// The status a failure of this kind is answered with, carrying `message`.
    pub fn status(self, message: impl Into<String>) -> tonic::Status {
        tonic::Status::new(self.code(), message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table, pinned: a change to any row is a change to the API every client codes against.
    #[test]
    fn the_kind_to_code_table_is_as_documented() {
        let table: Vec<String> = ErrorKind::ALL
            .iter()
            .map(|kind| format!("{kind:?} -> {:?}", kind.code()))
            .collect();
        assert_eq!(
            table,
            [
                "Unauthenticated -> Unauthenticated",
                "PermissionDenied -> PermissionDenied",
                "NotFound -> NotFound",
                "BadRequest -> InvalidArgument",
                "Conflict -> FailedPrecondition",
                "Unavailable -> Unavailable",
                "Internal -> Internal",
            ]
        );
        let status = ErrorKind::Unavailable.status("store unavailable: etcd down");
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "store unavailable: etcd down");
    }
}
