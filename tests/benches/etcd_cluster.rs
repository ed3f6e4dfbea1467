//! Bench: a fleet on a three-member etcd cluster through member loss, a leader change and quorum
//! loss (`harness = false`; `cargo test` runs it too, in its short form, and fails on an unmet
//! goal).
//!
//! ```text
//! cargo bench -p boxfleet-tests --bench etcd_cluster   # longer phases (ETCD_BENCH_PHASE=12 s)
//! cargo test  -p boxfleet-tests --bench etcd_cluster   # the check the README's test command runs
//! ```
//!
//! One real etcd cluster of three members on loopback and two boxfleet nodes whose `--etcd`
//! names all three, sharing a boxes dir, with a lease TTL of `TTL` seconds. Through node n1 a
//! launcher sends one `boxfleet launch` after another (a two-second job, each on a seat of its own, a
//! quarter second apart) for the whole of each scenario, as an engine would:
//!
//! 1. **follower**: a follower is SIGKILLed, the fleet runs on two members, it is restarted.
//! 2. **leader**: the leader is SIGKILLed; measured is the time from the kill to the next
//!    accepted launch.
//! 3. **short quorum loss**: two members are killed for less than the TTL, then restarted.
//! 4. **long quorum loss**: two members are killed for more than the TTL, then restarted: the
//!    nodes give their seats up and take them again, and the recovery pass runs.
//!
//! Per scenario it prints the launches sent and accepted, those accepted of the ones sent while
//! a quorum existed (goal: all), the seats the nodes dropped (`sandbox_seat_not_held` lines in
//! their logs; goal: none while a quorum existed or was lost for less than the TTL), and
//! whether the nodes reported `NOT_SERVING`. After the last scenario it waits for every run to
//! settle and counts each run's `agent_phase_completed` and `sandbox_run_failed` events in the
//! store (goal: one phase record per accepted launch; one ending, a phase record or a named
//! failure, per run started, including runs whose launch the client saw fail).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use boxfleet_cluster::events::{Event, kind};
use boxfleet_cluster::store::Store;
use boxfleet_tests::EtcdCluster;
use boxfleet_tests::fleet::Fleet;
use boxfleet_tests::launcher::{Attempt, Launcher};

const TTL: u64 = 6;
/// a fresh seat for every launch (a seat takes one job at a time: a launch on a busy seat is
/// refused, which is not what this measures)
const SEATS: usize = usize::MAX;
const JOB: &str = "sleep 2";
const PAUSE: Duration = Duration::from_millis(250);
/// How long every run may take to settle once the last scenario ends.
const SETTLE_WITHIN: Duration = Duration::from_secs(120);

/// One scenario's figures.
struct Outcome {
    name: &'static str,
    sent: usize,
    accepted: usize,
    /// launches sent while a quorum existed, and how many of them were accepted
    with_quorum: (usize, usize),
    seats_dropped: usize,
    /// the kill → next accepted launch, for the leader scenario
    to_next_launch: Option<Duration>,
    not_serving_seen: bool,
    /// whether dropping seats was the expected outcome (a quorum lost past the TTL)
    drops_expected: bool,
    /// how long the quorum was lost, measured (the kill to the quorum regained)
    outage: Option<Duration>,
    refusals: Vec<String>,
}

struct Bench {
    cluster: EtcdCluster,
    fleet: Fleet,
    phase: Duration,
    scenarios: usize,
}

fn seat_drops(fleet: &Fleet) -> usize {
    fleet.logs().matches("sandbox_seat_not_held").count()
}

/// Polls n1's health every 100 ms until stopped; says whether it was ever `NOT_SERVING`.
fn watch_health(addr: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<bool> {
    tokio::spawn(async move {
        use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
        let mut seen = false;
        let Ok(channel) =
            tonic::transport::Endpoint::from_shared(addr).map(|endpoint| endpoint.connect_lazy())
        else {
            return false;
        };
        let mut health = HealthClient::new(channel);
        while !stop.load(Ordering::SeqCst) {
            let asked = health.check(HealthCheckRequest {
                service: String::new(),
            });
            if let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_secs(1), asked).await {
                seen |= reply.into_inner().status
                    == tonic_health::pb::health_check_response::ServingStatus::NotServing as i32;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        seen
    })
}

impl Bench {
    fn follower_of(&self, leader: usize) -> usize {
        (leader + 1) % self.cluster.size()
    }

    async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(leader) = self.cluster.leader().await {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "the etcd cluster elects no leader"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn quorum(&self) {
        if let Err(error) = self.cluster.wait_quorum(Duration::from_secs(30)).await {
            panic!(
                "the etcd cluster did not regain a quorum: {error}\n{}",
                self.cluster.describe_logs()
            );
        }
    }

    /// Runs `fault` while launches arrive: `phase` of launches before it, the fault (which
    /// returns its outage window, if a quorum was lost), then `phase` after the cluster is
    /// whole again.
    async fn scenario(
        &mut self,
        name: &'static str,
        drops_expected: bool,
        fault: impl AsyncFnOnce(&Bench) -> (Instant, Option<(Instant, Instant)>),
    ) -> (Outcome, Vec<Attempt>) {
        let drops_before = seat_drops(&self.fleet);
        let stop = Arc::new(AtomicBool::new(false));
        let health = watch_health(self.fleet.node("n1").addr(), stop.clone());
        self.scenarios += 1;
        let tag = format!("s{}", self.scenarios);
        let launcher = Launcher::start(self.fleet.node("n1"), &tag, SEATS, JOB, PAUSE);
        tokio::time::sleep(self.phase).await;
        let (fault_at, outage) = fault(self).await;
        self.quorum().await;
        tokio::time::sleep(self.phase).await;
        let attempts = launcher.finish();
        stop.store(true, Ordering::SeqCst);
        let not_serving_seen = health.await.unwrap_or(false);

        let during_outage = |a: &Attempt| outage.is_some_and(|(from, to)| a.overlaps(from, to));
        let with_quorum: Vec<&Attempt> = attempts.iter().filter(|a| !during_outage(a)).collect();
        let to_next_launch = attempts
            .iter()
            .find(|a| a.accepted() && a.ended > fault_at)
            .map(|a| a.ended - fault_at);
        let mut refusals: Vec<String> = attempts
            .iter()
            .filter(|a| !during_outage(a))
            .filter_map(|a| a.outcome.as_ref().err().cloned())
            .collect();
        refusals.dedup();
        let outcome = Outcome {
            name,
            sent: attempts.len(),
            accepted: attempts.iter().filter(|a| a.accepted()).count(),
            with_quorum: (
                with_quorum.len(),
                with_quorum.iter().filter(|a| a.accepted()).count(),
            ),
            seats_dropped: seat_drops(&self.fleet) - drops_before,
            to_next_launch,
            not_serving_seen,
            drops_expected,
            outage: outage.map(|(from, to)| to - from),
            refusals,
        };
        (outcome, attempts)
    }
}

async fn kill_two_for(bench: &Bench, outage: Duration) -> (Instant, Option<(Instant, Instant)>) {
    let leader = bench.leader().await;
    let (a, b) = (leader, bench.follower_of(leader));
    bench.cluster.kill(a);
    bench.cluster.kill(b);
    let from = Instant::now();
    tokio::time::sleep(outage).await;
    bench.cluster.restart(a);
    bench.cluster.restart(b);
    bench.quorum().await;
    (from, Some((from, Instant::now())))
}

/// What the store announced of one turn.
#[derive(Debug, Default, Clone, Copy)]
struct Announced {
    started: usize,
    completed: usize,
    failed: usize,
}

impl Announced {
    /// Ended exactly once: one phase record, or one named failure (a launch that failed after
    /// its row opened), never both and never two.
    fn ended_once(&self) -> bool {
        self.completed + self.failed == 1
    }
}

/// Every `sandbox_run_started`, `agent_phase_completed` and `sandbox_run_failed` per turn,
/// read from the store.
async fn events_per_turn(fleet: &Fleet) -> BTreeMap<String, Announced> {
    let store = fleet.store().await;
    let range = store
        .range(&format!("{}/events/", fleet.prefix))
        .await
        .expect("read the events");
    let mut per_turn: BTreeMap<String, Announced> = BTreeMap::new();
    for kv in range.kvs {
        let Ok(event) = serde_json::from_slice::<Event>(&kv.value) else {
            continue;
        };
        let counts = per_turn.entry(event.turn_id).or_default();
        match event.kind.as_str() {
            kind::RUN_STARTED => counts.started += 1,
            kind::PHASE_COMPLETED => counts.completed += 1,
            kind::RUN_FAILED => counts.failed += 1,
            _ => {}
        }
    }
    per_turn
}

/// Waits until every accepted launch's run has its phase record and every run started has
/// settled; returns the per-turn counts it last read.
async fn settled(fleet: &Fleet, accepted: &[String]) -> BTreeMap<String, Announced> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let counts = events_per_turn(fleet).await;
        let done = accepted.iter().all(|turn| {
            counts
                .get(turn)
                .is_some_and(|a| a.completed + a.failed >= 1)
        }) && counts
            .values()
            .all(|a| a.started == 0 || a.completed + a.failed >= 1);
        if done || Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn print_table(outcomes: &[Outcome]) {
    println!(
        "{:<18} {:>5} {:>8} {:>16} {:>13} {:>16} {:>12} {:>10}",
        "scenario",
        "sent",
        "accepted",
        "with quorum",
        "seats dropped",
        "kill→launch",
        "NOT_SERVING",
        "no quorum"
    );
    for o in outcomes {
        println!(
            "{:<18} {:>5} {:>8} {:>16} {:>13} {:>16} {:>12} {:>10}",
            o.name,
            o.sent,
            o.accepted,
            format!("{}/{}", o.with_quorum.1, o.with_quorum.0),
            o.seats_dropped,
            o.to_next_launch
                .map(|d| format!("{:.2} s", d.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
            if o.not_serving_seen { "seen" } else { "-" },
            o.outage
                .map(|d| format!("{:.1} s", d.as_secs_f64()))
                .unwrap_or_else(|| "-".into()),
        );
    }
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let phase_seconds = std::env::var("ETCD_BENCH_PHASE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 12 } else { 4 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let failed = runtime.block_on(run(Duration::from_secs(phase_seconds)));
    if failed {
        std::process::exit(1);
    }
}

async fn run(phase: Duration) -> bool {
    let cluster = EtcdCluster::start(3);
    let fleet = Fleet::start_on_cluster(&cluster, &["n1", "n2"], TTL);
    let mut bench = Bench {
        cluster,
        fleet,
        phase,
        scenarios: 0,
    };
    println!(
        "etcd cluster: 3 members; fleet: 2 nodes, lease TTL {TTL} s; launches `{JOB}`, each \
         on a seat of its own, every {PAUSE:?}; {phase:?} before and after each fault"
    );
    let mut outcomes = Vec::new();
    let mut attempts = Vec::new();
    let phase = bench.phase;

    let (outcome, sent) = bench
        .scenario("follower killed", false, async |b: &Bench| {
            let follower = b.follower_of(b.leader().await);
            b.cluster.kill(follower);
            let at = Instant::now();
            tokio::time::sleep(phase).await;
            b.cluster.restart(follower);
            (at, None)
        })
        .await;
    outcomes.push(outcome);
    attempts.extend(sent);

    let (outcome, sent) = bench
        .scenario("leader killed", false, async |b: &Bench| {
            let leader = b.leader().await;
            b.cluster.kill(leader);
            let at = Instant::now();
            tokio::time::sleep(phase).await;
            b.cluster.restart(leader);
            (at, None)
        })
        .await;
    outcomes.push(outcome);
    attempts.extend(sent);

    // a third of the TTL: the members' restart and election take seconds more (5.4 s from the
    // kill to the quorum, measured), which must stay short of the TTL
    let short = Duration::from_secs(TTL / 3);
    let (outcome, sent) = bench
        .scenario("quorum lost < TTL", false, async |b: &Bench| {
            kill_two_for(b, short).await
        })
        .await;
    outcomes.push(outcome);
    attempts.extend(sent);

    let long = Duration::from_secs(TTL * 2 + 3);
    let (outcome, sent) = bench
        .scenario("quorum lost > TTL", true, async |b: &Bench| {
            kill_two_for(b, long).await
        })
        .await;
    outcomes.push(outcome);
    attempts.extend(sent);

    let accepted: Vec<String> = attempts
        .iter()
        .filter_map(|a| a.outcome.as_ref().ok().cloned())
        .collect();
    let counts = settled(&bench.fleet, &accepted).await;
    print_table(&outcomes);
    judge(&bench, &outcomes, &accepted, &counts)
}

/// Prints the run counts and every unmet goal; true when one was unmet.
fn judge(
    bench: &Bench,
    outcomes: &[Outcome],
    accepted: &[String],
    counts: &BTreeMap<String, Announced>,
) -> bool {
    let started = counts.values().filter(|a| a.started > 0).count();
    let once = counts
        .values()
        .filter(|a| a.started > 0 && a.ended_once())
        .count();
    let failed = counts.values().filter(|a| a.failed > 0).count();
    let unaccepted = counts.keys().filter(|t| !accepted.contains(t)).count();
    println!(
        "runs: {} launches accepted, {started} runs started ({unaccepted} of them from a launch \
         the client saw fail), {once} ended exactly once ({failed} of them with a named failure)",
        accepted.len()
    );
    let mut unmet = Vec::new();
    for o in outcomes {
        if o.with_quorum.1 < o.with_quorum.0 {
            unmet.push(format!(
                "{}: {} of {} launches sent while a quorum existed were refused: {:?}",
                o.name,
                o.with_quorum.0 - o.with_quorum.1,
                o.with_quorum.0,
                o.refusals
            ));
        }
        // a quorum meant to be lost for less than the TTL that took longer than the TTL to come
        // back (a loaded machine restarting two members) was lost past it: its seats may lapse
        let past_the_ttl = o.outage.is_some_and(|d| d >= Duration::from_secs(TTL));
        if !o.drops_expected && o.seats_dropped > 0 && !past_the_ttl {
            unmet.push(format!("{}: {} seats dropped", o.name, o.seats_dropped));
        }
        if !o.drops_expected && past_the_ttl {
            println!(
                "note: {}: the quorum came back after {:.1} s, past the {TTL} s TTL, so its {} \
                 dropped seats are not counted against it",
                o.name,
                o.outage.unwrap_or_default().as_secs_f64(),
                o.seats_dropped
            );
        }
        if o.drops_expected && !o.not_serving_seen {
            unmet.push(format!("{}: n1 never reported NOT_SERVING", o.name));
        }
    }
    for turn in accepted {
        match counts.get(turn) {
            Some(a) if a.completed == 1 && a.failed == 0 => {}
            Some(a) => unmet.push(format!("{turn}: accepted; then {a:?}")),
            None => unmet.push(format!("{turn}: accepted but never announced")),
        }
    }
    for (turn, announced) in counts {
        if announced.started > 0 && !announced.ended_once() && !accepted.contains(turn) {
            unmet.push(format!("{turn}: started; then {announced:?}"));
        }
    }
    for line in &unmet {
        println!("UNMET: {line}");
    }
    if !unmet.is_empty() {
        eprintln!("{}", bench.fleet.logs());
    }
    !unmet.is_empty()
}
