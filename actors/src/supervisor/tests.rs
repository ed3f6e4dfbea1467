//! The supervisor's behaviour end to end: real ractor actors (`Probe`) under a spawned
//! [`Supervisor`], driven to panic or stop, and what the supervisor then reports. One test per
//! rule: each strategy, the restart types, intensity escalation, ordered start and reverse
//! shutdown, dynamic children and the tree.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, SpawnErr};

use super::*;

/// Shared record of what the probes did, in order: `start:{name}` / `stop:{name}`.
type Log = Arc<Mutex<Vec<String>>>;

fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().expect("log lock").clone()
}

/// A worker that logs its start and normal stop and misbehaves on request.
struct Probe;

enum ProbeMsg {
    Panic,
    StopNormally,
}

impl Actor for Probe {
    type Msg = ProbeMsg;
    type State = Log;
    type Arguments = Log;

    async fn pre_start(
        &self,
        myself: ActorRef<ProbeMsg>,
        log: Log,
    ) -> Result<Log, ActorProcessingErr> {
        let name = myself.get_name().unwrap_or_default();
        log.lock().expect("log lock").push(format!("start:{name}"));
        Ok(log)
    }

    async fn post_stop(
        &self,
        myself: ActorRef<ProbeMsg>,
        log: &mut Log,
    ) -> Result<(), ActorProcessingErr> {
        let name = myself.get_name().unwrap_or_default();
        log.lock().expect("log lock").push(format!("stop:{name}"));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ProbeMsg>,
        message: ProbeMsg,
        _log: &mut Log,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ProbeMsg::Panic => panic!("boom"),
            ProbeMsg::StopNormally => myself.stop(None),
        }
        Ok(())
    }
}

fn probe(name: &str, restart: Restart, log: &Log) -> ChildSpec {
    let log = log.clone();
    ChildSpec::worker(name, restart, move || (Probe, log.clone()))
}

async fn must_spawn(name: &str, args: SupervisorArgs) -> ActorRef<SupervisorMsg> {
    let (supervisor, _join) = Supervisor::spawn(Some(name.to_string()), Supervisor, args)
        .await
        .expect("spawn supervisor");
    supervisor
}

async fn must_report(supervisor: &ActorRef<SupervisorMsg>, name: &str) -> ChildReport {
    inspect(supervisor)
        .await
        .expect("inspect")
        .into_iter()
        .find(|report| report.name == name)
        .unwrap_or_else(|| panic!("no child {name}"))
}

async fn must_send(supervisor: &ActorRef<SupervisorMsg>, child: &str, message: ProbeMsg) {
    let cell = must_report(supervisor, child)
        .await
        .cell
        .unwrap_or_else(|| panic!("{child} is not running"));
    cell.send_message(message).expect("send to probe");
}

/// Polls `check` every 10 ms for at most 5 s.
async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn wait_restarted(supervisor: &ActorRef<SupervisorMsg>, child: &str, count: u32) {
    wait_until(&format!("{child} restarted {count} times"), || async {
        let report = must_report(supervisor, child).await;
        report.restart_count == count && report.state == ChildState::Running
    })
    .await;
}

async fn wait_state(supervisor: &ActorRef<SupervisorMsg>, child: &str, state: ChildState) {
    wait_until(&format!("{child} is {state:?}"), || async {
        must_report(supervisor, child).await.state == state
    })
    .await;
}

async fn ids(supervisor: &ActorRef<SupervisorMsg>) -> Vec<Option<String>> {
    inspect(supervisor)
        .await
        .expect("inspect")
        .into_iter()
        .map(|report| report.actor_id)
        .collect()
}

// Scenario: one of three one_for_one children panics in `handle`; only it is restarted.
#[tokio::test]
async fn one_for_one_restarts_only_the_panicked_child() {
    let log = new_log();
    let supervisor = must_spawn(
        "t1/sup",
        SupervisorArgs::new(Strategy::OneForOne)
            .with_child(probe("t1/a", Restart::Permanent, &log))
            .with_child(probe("t1/b", Restart::Permanent, &log))
            .with_child(probe("t1/c", Restart::Permanent, &log)),
    )
    .await;
    let before = ids(&supervisor).await;

    must_send(&supervisor, "t1/b", ProbeMsg::Panic).await;
    wait_restarted(&supervisor, "t1/b", 1).await;

    let after = ids(&supervisor).await;
    assert_eq!(after[0], before[0], "sibling a untouched");
    assert_ne!(after[1], before[1], "b is a new instance");
    assert_eq!(after[2], before[2], "sibling c untouched");
    let b = must_report(&supervisor, "t1/b").await;
    assert_eq!(b.restart_count, 1);
    assert!(b.last_error.as_deref().is_some_and(|e| e.contains("boom")));
    assert_eq!(must_report(&supervisor, "t1/a").await.restart_count, 0);
    assert_eq!(must_report(&supervisor, "t1/c").await.restart_count, 0);

    supervisor.stop_and_wait(None, None).await.expect("stop");
}

// Scenario: child 2 of 4 panics under rest_for_one; 4 and 3 are stopped (in that order),
// then 2, 3, 4 start again in order; 1 is untouched.
#[tokio::test]
async fn rest_for_one_restarts_the_children_after_the_failed_one() {
    let log = new_log();
    let supervisor = must_spawn(
        "t2/sup",
        SupervisorArgs::new(Strategy::RestForOne)
            .with_child(probe("t2/c1", Restart::Permanent, &log))
            .with_child(probe("t2/c2", Restart::Permanent, &log))
            .with_child(probe("t2/c3", Restart::Permanent, &log))
            .with_child(probe("t2/c4", Restart::Permanent, &log)),
    )
    .await;
    let before = ids(&supervisor).await;
    log.lock().expect("log lock").clear();

    must_send(&supervisor, "t2/c2", ProbeMsg::Panic).await;
    wait_restarted(&supervisor, "t2/c4", 1).await;

    let after = ids(&supervisor).await;
    assert_eq!(after[0], before[0], "c1 untouched");
    for i in 1..4 {
        assert_ne!(after[i], before[i], "child {} is a new instance", i + 1);
    }
    assert_eq!(must_report(&supervisor, "t2/c1").await.restart_count, 0);
    assert_eq!(must_report(&supervisor, "t2/c2").await.restart_count, 1);
    assert_eq!(must_report(&supervisor, "t2/c3").await.restart_count, 1);
    // c2 panicked, so it has no post_stop line
    assert_eq!(
        entries(&log),
        [
            "stop:t2/c4",
            "stop:t2/c3",
            "start:t2/c2",
            "start:t2/c3",
            "start:t2/c4"
        ]
    );

    supervisor.stop_and_wait(None, None).await.expect("stop");
}

// Scenario: each restart type meets a normal stop, then transient and temporary meet a panic.
#[tokio::test]
async fn restart_types_decide_what_comes_back() {
    let log = new_log();
    let supervisor = must_spawn(
        "t3/sup",
        SupervisorArgs::new(Strategy::OneForOne)
            .with_child(probe("t3/transient", Restart::Transient, &log))
            .with_child(probe("t3/temporary", Restart::Temporary, &log))
            .with_child(probe("t3/permanent", Restart::Permanent, &log))
            .with_child(probe("t3/transient-panics", Restart::Transient, &log))
            .with_child(probe("t3/temporary-panics", Restart::Temporary, &log)),
    )
    .await;

    // --- normal stops
    for child in ["t3/transient", "t3/temporary", "t3/permanent"] {
        must_send(&supervisor, child, ProbeMsg::StopNormally).await;
    }
    wait_restarted(&supervisor, "t3/permanent", 1).await;
    wait_state(&supervisor, "t3/transient", ChildState::Stopped).await;
    wait_state(&supervisor, "t3/temporary", ChildState::Stopped).await;

    // --- panics
    must_send(&supervisor, "t3/transient-panics", ProbeMsg::Panic).await;
    must_send(&supervisor, "t3/temporary-panics", ProbeMsg::Panic).await;
    wait_restarted(&supervisor, "t3/transient-panics", 1).await;
    wait_state(&supervisor, "t3/temporary-panics", ChildState::Failed).await;

    for child in ["t3/transient", "t3/temporary", "t3/temporary-panics"] {
        let report = must_report(&supervisor, child).await;
        assert_eq!(report.restart_count, 0, "{child} was not restarted");
        assert!(report.cell.is_none(), "{child} has no instance");
    }
    let failed = must_report(&supervisor, "t3/temporary-panics").await;
    assert!(
        failed
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("boom"))
    );

    supervisor.stop_and_wait(None, None).await.expect("stop");
}

// Scenario: a nested supervisor allows 2 restarts in 10 s; its crasher panics 3 times. It
// stops its other child and fails; the root sees the failure and restarts it (permanent),
// which starts both children afresh.
#[tokio::test]
async fn intensity_exceeded_escalates_to_the_parent() {
    let log = new_log();
    let inner = SupervisorArgs::new(Strategy::OneForOne)
        .with_intensity(2, Duration::from_secs(10))
        .with_child(probe("t4/bystander", Restart::Permanent, &log))
        .with_child(probe("t4/crasher", Restart::Permanent, &log));
    let root = must_spawn(
        "t4/root",
        SupervisorArgs::new(Strategy::OneForOne).with_child(ChildSpec::supervisor(
            "t4/sup",
            Restart::Permanent,
            inner,
        )),
    )
    .await;
    let first_sup: ActorRef<SupervisorMsg> = must_report(&root, "t4/sup")
        .await
        .cell
        .expect("t4/sup running")
        .into();

    // --- two panics are within the budget
    for count in 1..=2 {
        must_send(&first_sup, "t4/crasher", ProbeMsg::Panic).await;
        wait_restarted(&first_sup, "t4/crasher", count).await;
    }
    log.lock().expect("log lock").clear();

    // --- the third exceeds it
    must_send(&first_sup, "t4/crasher", ProbeMsg::Panic).await;
    wait_restarted(&root, "t4/sup", 1).await;

    let sup = must_report(&root, "t4/sup").await;
    assert!(
        sup.last_error
            .as_deref()
            .is_some_and(|e| e.contains("restart intensity exceeded")),
        "root saw the failure: {:?}",
        sup.last_error
    );
    assert_eq!(first_sup.get_status(), ActorStatus::Stopped);
    assert_eq!(
        entries(&log),
        [
            "stop:t4/bystander",
            "start:t4/bystander",
            "start:t4/crasher"
        ],
        "the bystander was stopped, then the new supervisor started both afresh"
    );
    let second_sup: ActorRef<SupervisorMsg> = sup.cell.expect("t4/sup running").into();
    assert_eq!(
        must_report(&second_sup, "t4/crasher").await.restart_count,
        0
    );

    root.stop_and_wait(None, None).await.expect("stop");
}

// Scenario: children start in order and stop in reverse, nested supervisors included; a
// child that fails to start fails the supervisor's start after stopping the ones before it.
#[tokio::test]
async fn ordered_start_reverse_shutdown() {
    let log = new_log();
    let inner = SupervisorArgs::new(Strategy::OneForOne)
        .with_child(probe("t5/x", Restart::Permanent, &log))
        .with_child(probe("t5/y", Restart::Permanent, &log));
    let supervisor = must_spawn(
        "t5/sup",
        SupervisorArgs::new(Strategy::OneForOne)
            .with_child(probe("t5/a", Restart::Permanent, &log))
            .with_child(ChildSpec::supervisor("t5/inner", Restart::Permanent, inner))
            .with_child(probe("t5/c", Restart::Permanent, &log)),
    )
    .await;
    supervisor.stop_and_wait(None, None).await.expect("stop");
    assert_eq!(
        entries(&log),
        [
            "start:t5/a",
            "start:t5/x",
            "start:t5/y",
            "start:t5/c",
            "stop:t5/c",
            "stop:t5/y",
            "stop:t5/x",
            "stop:t5/a",
        ]
    );

    // --- a failing start
    let log = new_log();
    let refused = ChildSpec::new("t5/refused", Restart::Permanent, |_supervisor| async {
        Err(SpawnErr::StartupFailed("no capacity".into()))
    });
    let spawned = Supervisor::spawn(
        Some("t5/bad".to_string()),
        Supervisor,
        SupervisorArgs::new(Strategy::OneForOne)
            .with_child(probe("t5/p", Restart::Permanent, &log))
            .with_child(probe("t5/q", Restart::Permanent, &log))
            .with_child(refused),
    )
    .await;
    let err = spawned.expect_err("the supervisor's start fails");
    assert!(err.to_string().contains("no capacity"), "{err}");
    assert_eq!(
        entries(&log),
        ["start:t5/p", "start:t5/q", "stop:t5/q", "stop:t5/p"]
    );
}

// Scenario: a node-like tree; seats are added and removed at run time and the tree reports
// names, states and restart counts at every level.
#[tokio::test]
async fn dynamic_children_and_the_tree() {
    let log = new_log();
    let root = must_spawn(
        "t6/node",
        SupervisorArgs::new(Strategy::OneForOne)
            .with_child(probe("t6/session", Restart::Permanent, &log))
            .with_child(ChildSpec::supervisor(
                "t6/seats",
                Restart::Permanent,
                SupervisorArgs::new(Strategy::OneForOne),
            )),
    )
    .await;
    let seats: ActorRef<SupervisorMsg> = must_report(&root, "t6/seats")
        .await
        .cell
        .expect("seats running")
        .into();

    // --- add seats at run time
    let seat_1 = start_child(&seats, probe("t6/seat-1", Restart::Transient, &log))
        .await
        .expect("start seat-1");
    let duplicate = start_child(&seats, probe("t6/seat-1", Restart::Transient, &log)).await;
    assert!(
        matches!(&duplicate, Err(Error::Refused { reason, .. }) if reason.contains("already running")),
        "{duplicate:?}"
    );
    let seat_2 = SupervisorArgs::new(Strategy::RestForOne).with_child(probe(
        "t6/run-1",
        Restart::Temporary,
        &log,
    ));
    start_child(
        &seats,
        ChildSpec::supervisor("t6/seat-2", Restart::Transient, seat_2),
    )
    .await
    .expect("start seat-2");

    // --- a seat panics and is restarted
    seat_1.send_message(ProbeMsg::Panic).expect("send");
    wait_restarted(&seats, "t6/seat-1", 1).await;

    // --- the tree
    let tree = tree(&root).await;
    assert_eq!(tree.name, "t6/node");
    assert_eq!(tree.inspect_error, None);
    let names = |tree: &ActorTree| -> Vec<String> {
        tree.children
            .iter()
            .map(|n| n.report.name.clone())
            .collect()
    };
    assert_eq!(names(&tree), ["t6/session", "t6/seats"]);
    let seats_tree = tree.subtree("t6/seats").expect("seats subtree");
    assert_eq!(names(seats_tree), ["t6/seat-1", "t6/seat-2"]);
    let seat_2_tree = tree.subtree("t6/seat-2").expect("seat-2 subtree");
    assert_eq!(names(seat_2_tree), ["t6/run-1"]);
    for (name, restarts) in [
        ("t6/session", 0),
        ("t6/seats", 0),
        ("t6/seat-1", 1),
        ("t6/seat-2", 0),
        ("t6/run-1", 0),
    ] {
        let report = tree.find(name).unwrap_or_else(|| panic!("{name} in tree"));
        assert_eq!(report.state, ChildState::Running, "{name}");
        assert_eq!(report.restart_count, restarts, "{name}");
    }
    assert!(tree.find("t6/seat-1").is_some_and(|r| !r.supervisor));
    assert!(tree.find("t6/seat-2").is_some_and(|r| r.supervisor));
    let json = serde_json::to_value(&tree).expect("serialize tree");
    assert_eq!(json["children"][1]["name"], "t6/seats");
    assert_eq!(json["children"][1]["state"], "running");
    assert_eq!(
        json["children"][1]["subtree"]["children"][0]["restart_count"],
        1
    );

    // --- remove a seat
    let seat_1_now = must_report(&seats, "t6/seat-1")
        .await
        .cell
        .expect("running");
    terminate_child(&seats, "t6/seat-1")
        .await
        .expect("terminate seat-1");
    assert_eq!(seat_1_now.get_status(), ActorStatus::Stopped);
    let remaining: Vec<String> = inspect(&seats)
        .await
        .expect("inspect")
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(remaining, ["t6/seat-2"]);
    let unknown = terminate_child(&seats, "t6/seat-1").await;
    assert!(matches!(unknown, Err(Error::Refused { .. })), "{unknown:?}");
    // the terminated seat's exit is not mistaken for a failure
    assert_eq!(must_report(&root, "t6/seats").await.restart_count, 0);

    root.stop_and_wait(None, None).await.expect("stop");
}

// Scenario: a node drives many runs; each run's actor is transient and stops normally when its
// run settles. The supervisor reports its live children and the last few that ended, never one
// line per run it ever drove.
#[tokio::test]
async fn children_that_ended_for_good_leave_the_tree_past_a_few() {
    let log = new_log();
    let runs = must_spawn("t7/runs", SupervisorArgs::new(Strategy::OneForOne)).await;
    let live = start_child(&runs, probe("t7/live", Restart::Transient, &log))
        .await
        .expect("start");
    for i in 0..(MAX_EXITED_TEMPORARY + 40) {
        let name = format!("t7/run-{i}");
        let restart = if i % 2 == 0 {
            Restart::Transient
        } else {
            Restart::Temporary
        };
        let run = start_child(&runs, probe(&name, restart, &log))
            .await
            .expect("start");
        run.send_message(ProbeMsg::StopNormally).expect("send");
        wait_until(&format!("{name} ended"), || async {
            inspect(&runs)
                .await
                .expect("inspect")
                .iter()
                .all(|report| report.name != name || report.state == ChildState::Stopped)
        })
        .await;
    }
    let reports = inspect(&runs).await.expect("inspect");
    assert_eq!(reports.len(), MAX_EXITED_TEMPORARY + 1, "{reports:?}");
    assert!(
        reports
            .iter()
            .any(|r| r.name == "t7/live" && r.state == ChildState::Running)
    );
    // the newest ended ones are kept
    let last = format!("t7/run-{}", MAX_EXITED_TEMPORARY + 39);
    assert!(reports.iter().any(|r| r.name == last), "{last} kept");
    live.send_message(ProbeMsg::Panic).expect("send");
    wait_restarted(&runs, "t7/live", 1).await;
    runs.stop_and_wait(None, None).await.expect("stop");
}
