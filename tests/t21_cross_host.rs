//! Scenarios: a seat's runs move to a node on another host after their node dies, and their
//! `direct` boxes stay behind on the dead node's host, where no node of the new host can reach
//! them (issue 14: the compose fleet's answered run ended `launch_failed: box … is gone`).
//!
//! Two nodes on one etcd, each on a host of its own (`--host host-NAME`, a boxes dir each):
//!
//! - a run parked on a question, answered once its seat moved: the job re-seeds in a box on the
//!   new host from the branch its question named, and finishes there; the box left on the dead
//!   node's host is named for that host (`stranded/host-n1/…`), and killed — its stopped
//!   processes and its directory gone — by the node that comes back there;
//! - a run parked on the dead node's host whose pause TTL passes on the new holder: the box is
//!   let go of the same way, never read as gone through the new host's disk.

use std::path::{Path, PathBuf};
use std::time::Duration;

use boxfleet_cluster::Store as _;
use boxfleet_tests::fleet::{Fleet, eventually, seats_placed_on};
use boxfleet_tests::node::launched_turn;

const NODES: [&str; 2] = ["n1", "n2"];

/// The job: the first time, it leaves a ticker running in its box (every 50 ms into `~/ticks`)
/// and parks on a question naming its branch; answered, it reports the branch it was told and
/// where it ran.
const JOB: &str = r#"if [ -n "${BOXFLEET_ANSWER:-}" ]; then
  { echo "Delivered: $BOXFLEET_BRANCH"; echo "ran in $PWD"; } > "$BOXFLEET_REPORT"
  exit 0
fi
sh -c 'while :; do date +%s%N >> ~/ticks; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
echo $! > ~/ticker.pid
boxfleet-ask "carry on?" --to ops --branch wip/cross-host"#;

fn fleet_on_two_hosts() -> Fleet {
    let mut fleet = Fleet::start(&[], 3);
    fleet.own_boxes = true;
    fleet.own_hosts = true;
    for node in NODES {
        fleet.add(node);
    }
    fleet
}

/// Launches `job` on `seat` through n1, with a pause TTL of `pause_ttl` seconds.
fn launch(fleet: &Fleet, seat: &str, pause_ttl: &str) -> String {
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        seat,
        "--runner",
        "command",
        "--pause-ttl",
        pause_ttl,
        "--command",
        JOB,
    ]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    launched_turn(&out)
}

/// The box directory of `sandbox_id` in `node`'s own boxes dir.
fn box_dir(fleet: &Fleet, node: &str, sandbox_id: &str) -> PathBuf {
    fleet.dir.path().join(node).join("boxes").join(sandbox_id)
}

/// The ticker the first job left in its box, once it wrote its pid.
fn ticker_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("home/ticker.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn process_lives(pid: u32) -> bool {
    // a killed process the box's reaper has not waited for yet reads as a zombie (`Z`)
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        })
        .is_some_and(|state| state != 'Z')
}

/// The store's entry naming `sandbox_id` as stranded on `host`, if there is one.
async fn stranded_entry(fleet: &Fleet, host: &str, sandbox_id: &str) -> Option<serde_json::Value> {
    let key = format!("{}/stranded/{host}/{sandbox_id}", fleet.prefix);
    let kv = fleet.store().await.get(&key).await.expect("read")?;
    Some(serde_json::from_slice(&kv.value).expect("stranded JSON"))
}

/// Parks a run of a seat placed on n1 and kills n1 once the box's ticker runs: (turn, launch,
/// the parked box, its directory, the ticker's pid).
async fn park_on_n1_then_kill_it(
    fleet: &mut Fleet,
    tag: &str,
    pause_ttl: &str,
) -> (String, String, String, PathBuf, u32) {
    let seat = seats_placed_on("n1", &NODES, 1, tag).remove(0);
    let turn = launch(fleet, &seat, pause_ttl);
    let launch_id = fleet.parked_launch("n2", &turn).await;
    let record = fleet.record("n2", &turn).await.expect("the parked record");
    assert_eq!(record["host"], "host-n1", "{record:#}");
    let sandbox_id = record["sandbox_id"].as_str().expect("a box").to_owned();
    let dir = box_dir(fleet, "n1", &sandbox_id);
    let ticker = eventually(
        fleet,
        "the ticker's pid",
        Duration::from_secs(10),
        async || ticker_pid(&dir),
    )
    .await;
    assert!(process_lives(ticker), "the parked box's ticker is there");

    println!("--- phase: n1 is killed; its box stays behind on host-n1");
    fleet.node_mut("n1").kill();
    eventually(
        fleet,
        "n2 to hold the seat",
        Duration::from_secs(30),
        async || (fleet.holders("n2").await.get(&seat)? == "n2").then_some(()),
    )
    .await;
    (turn, launch_id, sandbox_id, dir, ticker)
}

/// n1 starts again on its host: it kills the stranded box and forgets it.
async fn n1_comes_back_and_kills(fleet: &mut Fleet, sandbox_id: &str, dir: &Path, ticker: u32) {
    println!("--- phase: n1 comes back on host-n1 and kills what was stranded there");
    fleet.node_mut("n1").start_again();
    eventually(
        fleet,
        "the stranded box to be killed and forgotten",
        Duration::from_secs(30),
        async || {
            let gone = stranded_entry(fleet, "host-n1", sandbox_id).await.is_none()
                && !dir.exists()
                && !process_lives(ticker);
            gone.then_some(())
        },
    )
    .await;
    assert!(
        fleet
            .node("n1")
            .log()
            .contains("sandbox_stranded_box_killed"),
        "{}",
        fleet.node("n1").log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_on_another_host_reseeds_and_the_box_left_behind_is_killed_by_its_host() {
    let mut fleet = fleet_on_two_hosts();
    println!("--- phase: a run parks on host-n1");
    let (turn, launch_id, sandbox_id, dir, ticker) =
        park_on_n1_then_kill_it(&mut fleet, "xhost-answer", "3600").await;

    println!("--- phase: the question is answered through n2, on host-n2");
    let (code, out, err) = fleet
        .node("n2")
        .cli(&["answer", &turn, "--launch", &launch_id, "--text", "yes"]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    fleet
        .until_settled(
            "n2",
            &turn,
            "the answered run to settle on n2",
            Duration::from_secs(60),
        )
        .await;
    let events = fleet.events_of("n2", &turn).await;
    assert!(
        !events.iter().any(|e| e["type"] == "sandbox_run_failed"),
        "the answer went on, nothing failed: {events:#?}"
    );
    let phases: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "agent_phase_completed")
        .map(|e| &e["body"]["record"])
        .collect();
    assert_eq!(phases.len(), 2, "{events:#?}");
    let reseeded = phases[1];
    assert_eq!(reseeded["failed"], false, "{reseeded:#}");
    assert_eq!(
        reseeded["delivered_refs"],
        serde_json::json!(["wip/cross-host"]),
        "the re-seeded job was told its branch: {reseeded:#}"
    );
    assert_ne!(reseeded["sandbox_id"], sandbox_id.as_str(), "a new box");
    let n2_boxes = fleet.dir.path().join("n2").join("boxes");
    assert!(
        reseeded["response"]
            .as_str()
            .is_some_and(|r| r.contains(&n2_boxes.display().to_string())),
        "the job re-seeded in a box on n2's host: {reseeded:#}"
    );

    println!("--- phase: the box left on host-n1 is named for that host, and still there");
    let stranded = stranded_entry(&fleet, "host-n1", &sandbox_id)
        .await
        .unwrap_or_else(|| panic!("the box is stranded on host-n1\n{}", fleet.logs()));
    assert_eq!(stranded["turn_id"], turn.as_str(), "{stranded:#}");
    assert!(
        dir.exists() && process_lives(ticker),
        "n2 never reaches into host-n1"
    );

    n1_comes_back_and_kills(&mut fleet, &sandbox_id, &dir, ticker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_that_expires_on_another_host_strands_the_box_for_its_host() {
    let mut fleet = fleet_on_two_hosts();
    println!("--- phase: a run parks on host-n1 with a 5 s pause TTL");
    let (turn, _, sandbox_id, dir, ticker) =
        park_on_n1_then_kill_it(&mut fleet, "xhost-ttl", "5").await;

    println!("--- phase: n2's pause reaper lets the box go: named for host-n1, never killed here");
    eventually(
        &fleet,
        "the run to re-seed with its box stranded",
        Duration::from_secs(40),
        async || {
            let record = fleet.record("n2", &turn).await?;
            let reseed = record["status"] == "reseed"
                && record["sandbox_id"].is_null()
                && record["reclaim_owed"].is_null();
            (reseed
                && stranded_entry(&fleet, "host-n1", &sandbox_id)
                    .await
                    .is_some())
            .then_some(())
        },
    )
    .await;
    assert!(
        dir.exists() && process_lives(ticker),
        "the box on host-n1 was not read as gone through host-n2's disk"
    );

    n1_comes_back_and_kills(&mut fleet, &sandbox_id, &dir, ticker).await;
}

/// A seat whose job runs in a box on its holder's host stays with that holder while the box
/// lives, even once the placement would put it on a node of another host: that node could
/// neither poll, collect nor resume into the box (the compose fleet's n1, back, took its seats
/// back from n2 and n3 and stranded their re-seeded jobs). Once the run settles, the seat is let
/// go, and its next job runs where it is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_stays_with_the_host_of_its_running_box_until_the_run_settles() {
    let mut fleet = Fleet::start(&[], 3);
    fleet.own_boxes = true;
    fleet.own_hosts = true;
    fleet.add("n2");
    let seat = seats_placed_on("n1", &NODES, 1, "pinned").remove(0);
    println!("--- phase: with n2 alone, n2 takes the seat and runs its job");
    let job = r#"while [ ! -e "$HOME/go" ]; do sleep 0.2; done; echo "Delivered: fix/pinned" > "$BOXFLEET_REPORT""#;
    let (code, out, err) = fleet.node("n2").cli(&[
        "launch",
        "--seat",
        &seat,
        "--runner",
        "command",
        "--command",
        job,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&out);
    let record = eventually(
        &fleet,
        "the run to run",
        Duration::from_secs(20),
        async || {
            fleet
                .record("n2", &turn)
                .await
                .filter(|r| r["status"] == "running")
        },
    )
    .await;
    let sandbox_id = record["sandbox_id"].as_str().expect("a box").to_owned();

    println!("--- phase: n1 joins on its own host; the seat stays with n2 while the box runs");
    fleet.add("n1");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        fleet.holders("n1").await.get(&seat).map(String::as_str),
        Some("n2"),
        "{}",
        fleet.logs()
    );

    println!("--- phase: the job ends; n2 collects it, then the seat moves to n1");
    std::fs::write(box_dir(&fleet, "n2", &sandbox_id).join("home/go"), b"go").expect("go");
    fleet
        .until_settled("n1", &turn, "the run to settle", Duration::from_secs(40))
        .await;
    let events = fleet.events_of("n1", &turn).await;
    assert!(
        !events.iter().any(|e| e["type"] == "sandbox_run_failed"),
        "{events:#?}"
    );
    eventually(
        &fleet,
        "n2 to let the seat go",
        Duration::from_secs(30),
        async || {
            (fleet.holders("n1").await.get(&seat).map(String::as_str) != Some("n2")).then_some(())
        },
    )
    .await;
    let (code, out, err) = fleet.node("n1").cli(&[
        "launch",
        "--seat",
        &seat,
        "--runner",
        "command",
        "--command",
        "true",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let next = launched_turn(&out);
    let owner = fleet
        .record("n1", &next)
        .await
        .map(|r| r["owner"].as_str().unwrap_or_default().to_owned());
    assert!(
        owner.as_deref().is_none_or(|o| o.starts_with("n1-")),
        "the seat's next job runs where it is placed: {owner:?}"
    );
    assert_eq!(
        fleet.holders("n1").await.get(&seat).map(String::as_str),
        Some("n1")
    );
}

/// The stranded box kill's crash points (`crash::ROUTES`, "stranded box kill"): the node that
/// lets the box go is killed right after naming it for its host (`strand.after_named`), and
/// the node on the box's host right after killing it, before it forgets the entry
/// (`strand.after_kill`). Each comes back: the answer still re-seeds and settles once, and the
/// box is killed and forgotten, never left running nor named for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_at_each_step_of_a_stranded_box_kill_loses_nothing_and_leaks_no_box() {
    let mut fleet = Fleet::start(&[], 3);
    fleet.own_boxes = true;
    fleet.own_hosts = true;
    let once = fleet.dir.path().join("crash");
    fleet.env = vec![
        (
            "BOXFLEET_CRASH_AT".into(),
            "strand.after_named,strand.after_kill".into(),
        ),
        ("BOXFLEET_CRASH_ONCE".into(), once.display().to_string()),
    ];
    for node in NODES {
        fleet.add(node);
    }
    let (turn, launch_id, sandbox_id, dir, ticker) =
        park_on_n1_then_kill_it(&mut fleet, "xhost-crash", "3600").await;

    println!("--- phase: answered through n2, which dies right after naming the box for host-n1");
    let (code, out, err) = fleet
        .node("n2")
        .cli(&["answer", &turn, "--launch", &launch_id, "--text", "yes"]);
    assert_eq!(code, 0, "{out}{err}\n{}", fleet.logs());
    eventually(
        &fleet,
        "n2 to die at strand.after_named",
        Duration::from_secs(30),
        async || {
            once.with_extension("strand.after_named")
                .exists()
                .then_some(())
        },
    )
    .await;
    let died_by = std::time::Instant::now() + Duration::from_secs(10);
    while !fleet.node_mut("n2").has_exited() {
        assert!(std::time::Instant::now() < died_by, "n2 died at its point");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        stranded_entry(&fleet, "host-n1", &sandbox_id)
            .await
            .is_some(),
        "the box was named for host-n1 before n2 died"
    );
    fleet.node_mut("n2").start_again();
    fleet
        .until_settled(
            "n2",
            &turn,
            "the answered run to settle on n2 after its restart",
            Duration::from_secs(90),
        )
        .await;
    let events = fleet.events_of("n2", &turn).await;
    let count = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(
        count("sandbox_run_failed"),
        0,
        "nothing failed: {events:#?}"
    );
    assert_eq!(count("turn_replied"), 1, "one reply: {events:#?}");
    assert_eq!(count("agent_phase_completed"), 2, "two jobs: {events:#?}");

    println!("--- phase: n1 comes back, kills the box and dies before forgetting it");
    // it may die before it is listening: its first sweep runs as it starts
    fleet.node_mut("n1").try_start_again();
    eventually(
        &fleet,
        "n1 to die at strand.after_kill",
        Duration::from_secs(30),
        async || {
            once.with_extension("strand.after_kill")
                .exists()
                .then_some(())
        },
    )
    .await;
    let died_by = std::time::Instant::now() + Duration::from_secs(10);
    while !fleet.node_mut("n1").has_exited() {
        assert!(std::time::Instant::now() < died_by, "n1 died at its point");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        stranded_entry(&fleet, "host-n1", &sandbox_id)
            .await
            .is_some(),
        "the entry outlives a kill its node did not confirm"
    );
    n1_comes_back_and_kills(&mut fleet, &sandbox_id, &dir, ticker).await;
}
