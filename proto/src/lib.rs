//! boxfleet's wire contract.
//!
//! `v1` holds the types generated from `proto/boxfleet/v1/*.proto`. Generated types stop at
//! this crate: the rest of the workspace converts them to domain types at its edges.
//! [`errors`] is the one table from an error's kind to its gRPC code.

pub mod errors;

pub use errors::ErrorKind;

/// Generated from `proto/boxfleet/v1`.
#[allow(clippy::all, missing_debug_implementations, unreachable_pub)]
pub mod v1 {
    tonic::include_proto!("boxfleet.v1");
}

/// The encoded descriptors of every boxfleet proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("boxfleet_descriptor");
