//! boxfleet's edges (DESIGN §3): sandbox backends, coding-agent runners, redaction, the tonic
//! services, the built-in engine and the `boxfleet` binary. They are built on the actors of
//! `boxfleet-actors` and arrive with the one-node issue.
