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
//! test can tell which node died where. [`ROUTES`] lists every point by the route it is on, and
//! how the crash matrix walks it ([`matrix_points`]).

/// A path that records a promise (an acknowledged launch, an answer, a charge, a reply, a box's
/// kill), and the crash points along it, in the order the path meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub name: &'static str,
    /// what the path promises, which a crash at any of its points must not lose or double
    pub promise: &'static str,
    pub points: &'static [&'static str],
    /// how the crash matrix reaches the route's points
    pub walk: Walk,
}

/// How a route's points are reached with a real node process killed at each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// a crash-matrix trial (`tests/src/crash_matrix.rs`) of this scenario: a run that parks
    /// on a question and is answered, the answer given the scenario's way
    Matrix(Scenario),
    /// a scenario test of its own (`tests/{file}`), which arms each of the route's points:
    /// the route needs what a one-run trial does not have (a second host, a fleet to drain
    /// to, a pause TTL run out)
    Test(&'static str),
}

/// The crash matrix's scenarios: how its run's answer is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// `boxfleet answer` on an idle seat: recorded and claimed in one write (`answer_at_once`)
    AtOnce,
    /// `boxfleet answer` taken the inbox's way (queued, recorded, acked, claimed)
    Inbox,
    /// a chat reply on the run's conversation (`boxfleet deliver`), matched to the parked run
    Chat,
    /// the run parked past its pause TTL (its box reaped), then answered: re-seeded in a new box
    Reseed,
    /// the seat's holder drained while the run is parked (a fleet on etcd: the seat moves)
    Drain,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::AtOnce => "at-once",
            Scenario::Inbox => "inbox",
            Scenario::Chat => "chat",
            Scenario::Reseed => "reseed",
            Scenario::Drain => "drain",
        }
    }
}

/// Every route and its points. A `crash::point` the code calls that no route lists fails the
/// `every_crash_point_is_on_a_route` test, so a new route cannot land without its points.
pub const ROUTES: &[Route] = &[
    Route {
        name: "launch",
        promise: "an acknowledged launch runs its job once, and its box is named or killed",
        points: &[
            LAUNCH_BEFORE_OPEN,
            LAUNCH_AFTER_OPEN,
            LAUNCH_AFTER_BOX_CREATED,
            LAUNCH_AFTER_SETUP,
            LAUNCH_AFTER_INSTALL,
            LAUNCH_AFTER_JOB_STARTED,
            LAUNCH_AFTER_BOX_NAMED,
            LAUNCH_AFTER_COMMIT,
        ],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "collection",
        promise: "a finished job is collected, charged and published once, then parks or resumes",
        points: &[
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
            COLLECT_AFTER_RESUME_DISPATCH,
        ],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "answer at once",
        promise: "an acknowledged answer resumes its run once",
        points: &[
            ANSWER_BEFORE_RECORD,
            ANSWER_AT_ONCE_AFTER_WRITE,
            ANSWER_AT_ONCE_AFTER_RESUME_DISPATCH,
        ],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "answer by inbox",
        promise: "an acknowledged answer resumes its run once",
        points: &[
            ANSWER_AFTER_ENQUEUE,
            ANSWER_AFTER_RECORD,
            ANSWER_AFTER_ACK,
            ANSWER_AFTER_CLAIM,
            ANSWER_AFTER_RESUME_DISPATCH,
        ],
        walk: Walk::Matrix(Scenario::Inbox),
    },
    Route {
        name: "chat reply",
        promise: "a reply on a parked run's conversation answers it once",
        points: &[CHAT_AFTER_RECORD, CHAT_AFTER_ACK],
        walk: Walk::Matrix(Scenario::Chat),
    },
    Route {
        name: "relaunch",
        promise: "the answer's job runs once, in the box it asked in, with the answer",
        points: &[
            RELAUNCH_BEFORE_OPEN,
            RELAUNCH_AFTER_OPEN,
            RELAUNCH_AFTER_BOX_CONNECTED,
            RELAUNCH_AFTER_INSTALL,
            RELAUNCH_AFTER_JOB_STARTED,
            RELAUNCH_AFTER_JOB_NAMED,
            RELAUNCH_AFTER_COMMIT,
        ],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "hand-back to an engine",
        promise: "an external engine's take of an answer is spent once (the built-in engine \
                  takes in its relaunch's write)",
        points: &[ANSWER_AFTER_TAKE],
        walk: Walk::Test("t17_engine_contract.rs"),
    },
    Route {
        name: "settle",
        promise: "the turn's reply is published once, with the run's ending, and the run ends once",
        points: &[SETTLE_AFTER_TAKE, SETTLE_BEFORE_ENDING, SETTLE_AFTER_FINISH],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "ending",
        promise: "an ending is decided once, its owed copies handed back, its box killed",
        points: &[
            ENDING_AFTER_DECISION,
            ENDING_AFTER_HAND_BACK,
            ENDING_AFTER_RECLAIM,
            ENDING_BEFORE_DELETE,
        ],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "hand-back of owed copies",
        promise: "a reply a run held goes back to its seat once",
        points: &[HAND_BACK_AFTER_ENQUEUE],
        walk: Walk::Test("t15_nothing_lost.rs"),
    },
    Route {
        name: "recovery",
        promise: "the seat's next holder takes every run over once",
        points: &[RECOVERY_AFTER_FENCE, RECOVERY_AFTER_REVIVE],
        walk: Walk::Matrix(Scenario::AtOnce),
    },
    Route {
        name: "drain",
        promise: "a drained node's seats move with their runs, none lost",
        points: &[
            DRAIN_AFTER_MARKED,
            RELEASE_AFTER_SETTLE,
            RELEASE_AFTER_DELETE,
        ],
        walk: Walk::Matrix(Scenario::Drain),
    },
    Route {
        name: "reseed after the pause TTL",
        promise: "a box past its pause TTL is killed once; the answer re-seeds a new box",
        points: &[REAP_AFTER_RELEASE, REAP_AFTER_KILL, RESEED_AFTER_BOX_NAMED],
        walk: Walk::Matrix(Scenario::Reseed),
    },
    Route {
        name: "stranded box kill",
        promise: "a box let go of on another host is killed there once",
        points: &[STRAND_AFTER_NAMED, STRAND_AFTER_KILL],
        walk: Walk::Test("t21_cross_host.rs"),
    },
];

/// The points a crash-matrix scenario walks, in route order.
pub fn matrix_points(scenario: Scenario) -> Vec<&'static str> {
    ROUTES
        .iter()
        .filter(|route| route.walk == Walk::Matrix(scenario))
        .flat_map(|route| route.points.iter().copied())
        .collect()
}

/// The route a point is on.
pub fn route_of(point: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|route| route.points.contains(&point))
}

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
/// an answer on an idle seat recorded and its run claimed in one write; no resume sent yet
pub const ANSWER_AT_ONCE_AFTER_WRITE: &str = "answer_at_once.after_write";
pub const ANSWER_AT_ONCE_AFTER_RESUME_DISPATCH: &str = "answer_at_once.after_resume_dispatch";
/// an answer queued on its seat's inbox (the caller told it is pending), not recorded yet
pub const ANSWER_AFTER_ENQUEUE: &str = "answer.after_enqueue";
/// the inbox's answer recorded on its run; its delivery not acked yet
pub const ANSWER_AFTER_RECORD: &str = "answer.after_record";
pub const ANSWER_AFTER_ACK: &str = "answer.after_ack";
pub const ANSWER_AFTER_CLAIM: &str = "answer.after_claim";
pub const ANSWER_AFTER_RESUME_DISPATCH: &str = "answer.after_resume_dispatch";
/// an external engine's take of an answer (the built-in engine's relaunch takes it in the same
/// write, so the matrix, which drives the built-in engine, does not reach it)
pub const ANSWER_AFTER_TAKE: &str = "answer.after_take";
/// a chat reply recorded as its parked run's answer; its delivery not acked yet
pub const CHAT_AFTER_RECORD: &str = "chat.after_record";
pub const CHAT_AFTER_ACK: &str = "chat.after_ack";
/// the engine asked for the relaunch; its row not moved yet
pub const RELAUNCH_BEFORE_OPEN: &str = "relaunch.before_open";
pub const RELAUNCH_AFTER_OPEN: &str = "relaunch.after_open";
pub const RELAUNCH_AFTER_BOX_CONNECTED: &str = "relaunch.after_box_connected";
pub const RELAUNCH_AFTER_INSTALL: &str = "relaunch.after_install";
pub const RELAUNCH_AFTER_JOB_STARTED: &str = "relaunch.after_job_started";
pub const RELAUNCH_AFTER_JOB_NAMED: &str = "relaunch.after_job_named";
pub const RELAUNCH_AFTER_COMMIT: &str = "relaunch.after_commit";
/// a re-seed's new box named on the row, not made yet
pub const RESEED_AFTER_BOX_NAMED: &str = "reseed.after_box_named";
pub const SETTLE_AFTER_TAKE: &str = "settle.after_take";
/// the engine's settle arrived; the ending not decided yet
pub const SETTLE_BEFORE_ENDING: &str = "settle.before_ending";
pub const SETTLE_AFTER_FINISH: &str = "settle.after_finish";
pub const ENDING_AFTER_DECISION: &str = "ending.after_decision";
pub const ENDING_AFTER_HAND_BACK: &str = "ending.after_hand_back";
pub const ENDING_AFTER_RECLAIM: &str = "ending.after_reclaim";
pub const ENDING_BEFORE_DELETE: &str = "ending.before_delete";
/// the copies a run owes its seat queued on the inbox; not cleared from the row yet
pub const HAND_BACK_AFTER_ENQUEUE: &str = "hand_back.after_enqueue";
/// the pause reaper released a parked run's box; its kill not made yet
pub const REAP_AFTER_RELEASE: &str = "reap.after_release";
/// the released box killed; not cleared from the row yet
pub const REAP_AFTER_KILL: &str = "reap.after_kill";
pub const RECOVERY_AFTER_FENCE: &str = "recovery.after_fence";
/// the recovery pass revived a lost claim (armed beside a point that leaves one)
pub const RECOVERY_AFTER_REVIVE: &str = "recovery.after_revive";
/// the node marked itself draining; no seat released yet
pub const DRAIN_AFTER_MARKED: &str = "drain.after_marked";
/// a seat's hand-over settled its work, the holder key not deleted yet
pub const RELEASE_AFTER_SETTLE: &str = "release.after_settle";
/// the holder key deleted; the node not told yet
pub const RELEASE_AFTER_DELETE: &str = "release.after_delete";
/// a box on another host let go of by a run and named for that host's nodes to kill
pub const STRAND_AFTER_NAMED: &str = "strand.after_named";
/// a stranded box killed by its host's node; its entry not forgotten yet
pub const STRAND_AFTER_KILL: &str = "strand.after_kill";

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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::{ROUTES, Walk};

    /// The workspace's root (this crate is `actors/`).
    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace")
            .to_path_buf()
    }

    /// Every `.rs` file under `dir`.
    fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    sources(&path, found);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }

    /// The point constants this module declares: name → value.
    fn declared() -> BTreeMap<String, String> {
        let text = include_str!("crash.rs");
        text.lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("pub const ")?;
                let (name, value) = rest.split_once(": &str = \"")?;
                Some((name.to_owned(), value.strip_suffix("\";")?.to_owned()))
            })
            .collect()
    }

    /// The constants named inside each `crash::point(…)` call of the workspace's code, with
    /// the file that calls it.
    fn called() -> Vec<(String, PathBuf)> {
        let root = workspace();
        let mut files = Vec::new();
        for dir in ["actors/src", "cluster/src", "services"] {
            sources(&root.join(dir), &mut files);
        }
        let mut calls = Vec::new();
        for file in files {
            // this module names the calls it looks for
            if file.ends_with("actors/src/crash.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let mut rest = text.as_str();
            while let Some(at) = rest.find("crash::point(") {
                let args = &rest[at + "crash::point(".len()..];
                // up to the call's closing parenthesis
                let mut depth = 1;
                let end = args
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '(' => depth += 1,
                            ')' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .map_or(args.len(), |(i, _)| i);
                let inside = &args[..end];
                for (i, _) in inside.match_indices("crash::") {
                    let name: String = inside[i + "crash::".len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        calls.push((name, file.clone()));
                    }
                }
                rest = &args[end..];
            }
        }
        calls
    }

    #[test]
    fn every_crash_point_is_on_a_route() {
        let declared = declared();
        let on_routes: BTreeMap<&str, &str> = ROUTES
            .iter()
            .flat_map(|route| route.points.iter().map(move |p| (*p, route.name)))
            .collect();
        let mut problems = Vec::new();
        // a point named in the code that no route lists: a new route without its points
        let calls = called();
        assert!(
            calls.len() >= 40,
            "the scan found the crash points the code calls ({} found)",
            calls.len()
        );
        for (name, file) in &calls {
            match declared.get(name) {
                None => problems.push(format!(
                    "{} calls crash::{name}, not declared",
                    file.display()
                )),
                Some(value) if !on_routes.contains_key(value.as_str()) => problems.push(format!(
                    "{} calls crash::{name} ({value}), which no route in crash::ROUTES lists: \
                     add it to its route, and the route to the crash matrix",
                    file.display()
                )),
                Some(_) => {}
            }
        }
        // a point declared that nothing calls, or that no route lists
        let called_values: BTreeSet<&str> = calls
            .iter()
            .filter_map(|(name, _)| declared.get(name).map(String::as_str))
            .collect();
        for value in declared.values() {
            if !on_routes.contains_key(value.as_str()) {
                problems.push(format!("{value} is declared but on no route"));
            }
            if !called_values.contains(value.as_str()) {
                problems.push(format!("{value} is declared but the code never reaches it"));
            }
        }
        // a route point listed twice, or on two routes
        let listed: Vec<&str> = ROUTES
            .iter()
            .flat_map(|r| r.points.iter().copied())
            .collect();
        let unique: BTreeSet<&str> = listed.iter().copied().collect();
        if unique.len() != listed.len() {
            problems.push("a point is listed on more than one route".to_owned());
        }
        // a route a scenario test walks: the test arms every one of its points
        for route in ROUTES {
            if let Walk::Test(file) = route.walk {
                let test = std::fs::read_to_string(workspace().join("tests").join(file))
                    .unwrap_or_default();
                for point in route.points {
                    if !test.contains(&format!("\"{point}\"")) {
                        problems.push(format!(
                            "route {:?} says tests/{file} walks {point}, but it never arms it",
                            route.name
                        ));
                    }
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
