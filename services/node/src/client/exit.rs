//! The CLI's exit codes, one per class of outcome, stable for scripts (documented in
//! `boxfleet --help` and the README):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done as asked (and a reader that stopped reading: `| head`) |
//! | 1 | the run failed, or the node refused the request (busy, refused, budget) |
//! | 2 | usage: a flag or argument that cannot be used (clap's own, and the node's `INVALID_ARGUMENT`) |
//! | 3 | not found: no such turn, job, seat or node |
//! | 4 | the node is unreachable or unavailable (its store down, no answer in time, a refusal of class `unavailable`) |
//! | 5 | unauthenticated, or the credential is not allowed to do this |

use tonic::Code;

/// Done as asked.
pub const OK: i32 = 0;
/// The run failed, or the request was refused.
pub const FAILED: i32 = 1;
/// A flag or argument that cannot be used.
pub const USAGE: i32 = 2;
/// No such turn, job, seat or node.
pub const NOT_FOUND: i32 = 3;
/// The node is unreachable or unavailable.
pub const UNAVAILABLE: i32 = 4;
/// Unauthenticated, or not allowed.
pub const DENIED: i32 = 5;

/// The exit code of a call the node answered with `code`.
pub fn of_status(code: Code) -> i32 {
    match code {
        Code::Ok => OK,
        Code::InvalidArgument | Code::OutOfRange => USAGE,
        Code::NotFound => NOT_FOUND,
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted => UNAVAILABLE,
        Code::Unauthenticated | Code::PermissionDenied => DENIED,
        _ => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_class() {
        assert_eq!(of_status(Code::NotFound), NOT_FOUND);
        assert_eq!(of_status(Code::InvalidArgument), USAGE);
        assert_eq!(of_status(Code::Unavailable), UNAVAILABLE);
        assert_eq!(of_status(Code::DeadlineExceeded), UNAVAILABLE);
        assert_eq!(of_status(Code::Unauthenticated), DENIED);
        assert_eq!(of_status(Code::PermissionDenied), DENIED);
        assert_eq!(of_status(Code::FailedPrecondition), FAILED);
        assert_eq!(of_status(Code::Internal), FAILED);
    }
}
