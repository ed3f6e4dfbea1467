//! Crash points: named instants of the lifecycle where a test kills the node (SIGKILL, so no
//! destructor, flush or graceful handoff runs), to prove that whatever was written up to there
//! is recovered by the seat's next holder and nothing is lost or done twice (DESIGN §6 I12).
//!
//! Compiled in only with the `crashpoints` feature (the binary the scenario tests run has it;
//! the released `boxfleet` does not, and there [`point`] is an empty inline function). Even
//! when compiled in, a point fires only when armed:
//!
//! - `BOXFLEET_CRASH_AT=launch.after_open` (one name, or several comma-separated): the node
//!   dies the first time it reaches a named point;
//! - `BOXFLEET_CRASH_ONCE=PATH`: a point fires only if `PATH.{point}` does not exist yet, and
//!   creates it as it fires, so across a fleet whose nodes all carry the same arming, and across
//!   their restarts, exactly one node dies at each armed point, once. The file holds the node's
//!   process id. (Arming `collect.after_claim,recovery.after_fence` kills the seat's holder
//!   mid-collection and then the node whose recovery pass takes the run over.)
//!
//! Before it dies the node writes `crash_point_hit point=NAME` to stderr (the node's log), so a
//! test can tell which node died where. [`ALL`] lists every point, in lifecycle order, for the
//! crash matrix to walk.

/// Every crash point, in the order a run that parks on a question and is answered meets them.
pub const ALL: &[&str] = &[
    LAUNCH_AFTER_OPEN,
    LAUNCH_AFTER_BOX_CREATED,
    LAUNCH_AFTER_JOB_STARTED,
    LAUNCH_AFTER_BOX_NAMED,
    LAUNCH_AFTER_COMMIT,
    COLLECT_AFTER_CLAIM,
    COLLECT_AFTER_READS,
    COLLECT_AFTER_CHARGE,
    COLLECT_AFTER_PUBLISH,
    COLLECT_AFTER_PAUSE,
    COLLECT_AFTER_PARK,
    ANSWER_AFTER_RECORD,
    ANSWER_AFTER_CLAIM,
    RELAUNCH_AFTER_OPEN,
    RELAUNCH_AFTER_JOB_STARTED,
    RELAUNCH_AFTER_COMMIT,
    COLLECT_AFTER_RESUME_DISPATCH,
    SETTLE_AFTER_TAKE,
    SETTLE_AFTER_REPLY,
    SETTLE_AFTER_FINISH,
    ENDING_AFTER_DECISION,
    ENDING_AFTER_HAND_BACK,
    ENDING_AFTER_RECLAIM,
    ENDING_BEFORE_DELETE,
    RECOVERY_AFTER_FENCE,
];

pub const LAUNCH_AFTER_OPEN: &str = "launch.after_open";
pub const LAUNCH_AFTER_BOX_CREATED: &str = "launch.after_box_created";
pub const LAUNCH_AFTER_JOB_STARTED: &str = "launch.after_job_started";
pub const LAUNCH_AFTER_BOX_NAMED: &str = "launch.after_box_named";
pub const LAUNCH_AFTER_COMMIT: &str = "launch.after_commit";
pub const COLLECT_AFTER_CLAIM: &str = "collect.after_claim";
pub const COLLECT_AFTER_READS: &str = "collect.after_reads";
pub const COLLECT_AFTER_CHARGE: &str = "collect.after_charge";
pub const COLLECT_AFTER_PUBLISH: &str = "collect.after_publish";
pub const COLLECT_AFTER_PAUSE: &str = "collect.after_pause";
pub const COLLECT_AFTER_PARK: &str = "collect.after_park";
pub const COLLECT_AFTER_RESUME_DISPATCH: &str = "collect.after_resume_dispatch";
pub const ANSWER_AFTER_RECORD: &str = "answer.after_record";
pub const ANSWER_AFTER_CLAIM: &str = "answer.after_claim";
/// an external engine's take of an answer (the built-in engine's relaunch takes it in the same
/// write, so the matrix, which drives the built-in engine, does not reach it)
pub const ANSWER_AFTER_TAKE: &str = "answer.after_take";
pub const RELAUNCH_AFTER_OPEN: &str = "relaunch.after_open";
pub const RELAUNCH_AFTER_JOB_STARTED: &str = "relaunch.after_job_started";
pub const RELAUNCH_AFTER_COMMIT: &str = "relaunch.after_commit";
pub const SETTLE_AFTER_TAKE: &str = "settle.after_take";
pub const SETTLE_AFTER_REPLY: &str = "settle.after_reply";
pub const SETTLE_AFTER_FINISH: &str = "settle.after_finish";
pub const ENDING_AFTER_DECISION: &str = "ending.after_decision";
pub const ENDING_AFTER_HAND_BACK: &str = "ending.after_hand_back";
pub const ENDING_AFTER_RECLAIM: &str = "ending.after_reclaim";
pub const ENDING_BEFORE_DELETE: &str = "ending.before_delete";
pub const RECOVERY_AFTER_FENCE: &str = "recovery.after_fence";

/// Kills this process with SIGKILL when `name` is armed (see the module docs).
#[cfg(feature = "crashpoints")]
pub fn point(name: &str) {
    use std::io::Write;
    let armed = std::env::var("BOXFLEET_CRASH_AT")
        .is_ok_and(|list| list.split(',').any(|point| point.trim() == name));
    if !armed {
        return;
    }
    if let Ok(once) = std::env::var("BOXFLEET_CRASH_ONCE") {
        let claimed = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(format!("{once}.{name}"))
            .and_then(|mut file| writeln!(file, "{}", std::process::id()));
        if claimed.is_err() {
            return;
        }
    }
    let _ = writeln!(std::io::stderr(), "crash_point_hit point={name}");
    die();
}

#[cfg(feature = "crashpoints")]
#[allow(unsafe_code)]
fn die() {
    // SAFETY: kill(2) on our own pid with a valid signal number touches no memory of ours
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

/// Crash points are compiled out: nothing happens.
#[cfg(not(feature = "crashpoints"))]
#[inline(always)]
pub fn point(_name: &str) {}
