//! The lifecycle's bounds that more than one step applies (DESIGN §11, §15). A bound only one
//! step uses stays beside that step.

use std::time::Duration;

/// The findings report and a failure's text, each, on the phase record.
pub const MAX_REPORT_BYTES: usize = 256 * 1024;
/// A question, on the run record and the phase record.
pub const MAX_QUESTION_BYTES: usize = 16 * 1024;
/// What one condensation reads (sandbox.MaxCondenseBytes): a piece past it is cut to it,
/// on whole lines, before the model is shown it.
pub const MAX_CONDENSE_BYTES: usize = 2 * 1024 * 1024;
/// The delivered refs a record lists, all together.
pub const MAX_DELIVERED_REF_BYTES: usize = 16 * 1024;
/// A question's audience as the agent wrote it (a word or a handle).
pub const MAX_AUDIENCE_BYTES: usize = 256;
/// An ending's detail, on the run record and the failure event.
pub const MAX_ENDING_DETAIL_BYTES: usize = 16 * 1024;
/// Resume attempts of one recorded answer before it is let go.
pub const MAX_ANSWER_RESUME_ATTEMPTS: u32 = 10;
/// How long a graceful release waits for a seat's collections and answers to settle.
pub const RELEASE_SETTLE: Duration = Duration::from_secs(60);

/// How many seats the placement pass acquires at once, each with its recovery pass: a node
/// taking over a dead node's 500 seats one after another left their runs unpolled for most
/// of 20 s (issue 20's failover at 1,000 seats); eight at a time took 3.7 s, each seat's dozen
/// store calls waiting on etcd, which commits concurrent txns together.
pub const ACQUIRE_AT_ONCE: usize = 32;

/// Refusals of one job's findings resume (an engine's `Retry`) before the run ends
/// `resume_broken`: the poll collects the job again after each, so the last comes about
/// this many poll intervals after the first.
pub const MAX_FINDINGS_RESUME_REFUSALS: u32 = 10;
