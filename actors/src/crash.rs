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
    LAUNCH_BEFORE_OPEN,
    LAUNCH_AFTER_OPEN,
    LAUNCH_AFTER_BOX_CREATED,
    LAUNCH_AFTER_SETUP,
    LAUNCH_AFTER_INSTALL,
    LAUNCH_AFTER_JOB_STARTED,
    LAUNCH_AFTER_BOX_NAMED,
    LAUNCH_AFTER_COMMIT,
    POLL_AFTER_DONE_SEEN,
    COLLECT_AFTER_CLAIM,
    COLLECT_AFTER_READS,
    COLLECT_AFTER_SEAT_CHARGE,
    COLLECT_AFTER_CHARGE,
    COLLECT_AFTER_PUBLISH,
    COLLECT_AFTER_LOGIN_GIVEN_BACK,
    COLLECT_AFTER_BOX_PAUSED,
    COLLECT_AFTER_PAUSE,
    COLLECT_AFTER_PARK,
    ANSWER_BEFORE_RECORD,
    ANSWER_AFTER_RECORD,
    ANSWER_AFTER_CLAIM,
    ANSWER_AFTER_RESUME_DISPATCH,
    RELAUNCH_BEFORE_OPEN,
    RELAUNCH_AFTER_OPEN,
    RELAUNCH_AFTER_BOX_CONNECTED,
    RELAUNCH_AFTER_INSTALL,
    RELAUNCH_AFTER_JOB_STARTED,
    RELAUNCH_AFTER_JOB_NAMED,
    RELAUNCH_AFTER_COMMIT,
    COLLECT_AFTER_RESUME_DISPATCH,
    SETTLE_AFTER_TAKE,
    SETTLE_AFTER_REPLY,
    SETTLE_BEFORE_ENDING,
    SETTLE_AFTER_FINISH,
    ENDING_AFTER_DECISION,
    ENDING_AFTER_HAND_BACK,
    ENDING_AFTER_RECLAIM,
    ENDING_BEFORE_DELETE,
    RECOVERY_AFTER_FENCE,
    RECOVERY_AFTER_REVIVE,
];

pub const LAUNCH_BEFORE_OPEN: &str = "launch.before_open";
pub const LAUNCH_AFTER_OPEN: &str = "launch.after_open";
pub const LAUNCH_AFTER_BOX_CREATED: &str = "launch.after_box_created";
pub const LAUNCH_AFTER_SETUP: &str = "launch.after_setup";
pub const LAUNCH_AFTER_INSTALL: &str = "launch.after_install";
pub const LAUNCH_AFTER_JOB_STARTED: &str = "launch.after_job_started";
pub const LAUNCH_AFTER_BOX_NAMED: &str = "launch.after_box_named";
pub const LAUNCH_AFTER_COMMIT: &str = "launch.after_commit";
/// the poll found the job done; its completion is not claimed yet
pub const POLL_AFTER_DONE_SEEN: &str = "poll.after_done_seen";
pub const COLLECT_AFTER_CLAIM: &str = "collect.after_claim";
pub const COLLECT_AFTER_READS: &str = "collect.after_reads";
/// the seat's share charged, the company's not yet
pub const COLLECT_AFTER_SEAT_CHARGE: &str = "collect.after_seat_charge";
/// both shares charged
pub const COLLECT_AFTER_CHARGE: &str = "collect.after_charge";
pub const COLLECT_AFTER_PUBLISH: &str = "collect.after_publish";
pub const COLLECT_AFTER_LOGIN_GIVEN_BACK: &str = "collect.after_login_given_back";
/// the box paused, the record not yet marked
pub const COLLECT_AFTER_BOX_PAUSED: &str = "collect.after_box_paused";
pub const COLLECT_AFTER_PAUSE: &str = "collect.after_pause";
pub const COLLECT_AFTER_PARK: &str = "collect.after_park";
pub const COLLECT_AFTER_RESUME_DISPATCH: &str = "collect.after_resume_dispatch";
/// an answer asked for, not written yet (the caller is told nothing)
pub const ANSWER_BEFORE_RECORD: &str = "answer.before_record";
pub const ANSWER_AFTER_RECORD: &str = "answer.after_record";
pub const ANSWER_AFTER_CLAIM: &str = "answer.after_claim";
pub const ANSWER_AFTER_RESUME_DISPATCH: &str = "answer.after_resume_dispatch";
/// an external engine's take of an answer (the built-in engine's relaunch takes it in the same
/// write, so the matrix, which drives the built-in engine, does not reach it)
pub const ANSWER_AFTER_TAKE: &str = "answer.after_take";
/// the engine asked for the relaunch; its row not moved yet
pub const RELAUNCH_BEFORE_OPEN: &str = "relaunch.before_open";
pub const RELAUNCH_AFTER_OPEN: &str = "relaunch.after_open";
pub const RELAUNCH_AFTER_BOX_CONNECTED: &str = "relaunch.after_box_connected";
pub const RELAUNCH_AFTER_INSTALL: &str = "relaunch.after_install";
pub const RELAUNCH_AFTER_JOB_STARTED: &str = "relaunch.after_job_started";
pub const RELAUNCH_AFTER_JOB_NAMED: &str = "relaunch.after_job_named";
pub const RELAUNCH_AFTER_COMMIT: &str = "relaunch.after_commit";
pub const SETTLE_AFTER_TAKE: &str = "settle.after_take";
pub const SETTLE_AFTER_REPLY: &str = "settle.after_reply";
/// the engine's settle arrived; the ending not decided yet
pub const SETTLE_BEFORE_ENDING: &str = "settle.before_ending";
pub const SETTLE_AFTER_FINISH: &str = "settle.after_finish";
pub const ENDING_AFTER_DECISION: &str = "ending.after_decision";
pub const ENDING_AFTER_HAND_BACK: &str = "ending.after_hand_back";
pub const ENDING_AFTER_RECLAIM: &str = "ending.after_reclaim";
pub const ENDING_BEFORE_DELETE: &str = "ending.before_delete";
/// the pause reaper released a parked run's box; its kill not made yet (a point of its own
/// scenario, t16, rather than the matrix's: the matrix's run is answered inside its pause TTL)
pub const REAP_AFTER_RELEASE: &str = "reap.after_release";
pub const RECOVERY_AFTER_FENCE: &str = "recovery.after_fence";
/// the recovery pass revived a lost claim (armed beside a point that leaves one)
pub const RECOVERY_AFTER_REVIVE: &str = "recovery.after_revive";

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
