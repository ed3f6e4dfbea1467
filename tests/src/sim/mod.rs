//! The deterministic simulation of a fleet (issue 45): several nodes in one process, each with
//! the actors that drive its lifecycle ([`node`]), over one simulated store with etcd's data
//! model and faults ([`store`]) and one fake cell of boxes ([`boxes`]), on tokio's paused
//! clock in a current-thread runtime. The seed decides everything: the store's and the boxes'
//! faults, when a node is killed and when it comes back, when a seat's actor restarts (its
//! recovery pass re-run) or a seat is handed over, every launch (its seat, its job's length,
//! whether it asks a question or fails) and every answer. `boxfleet_cluster::clock` makes the
//! lifecycle's wall clock the simulated one and its ids a count.
//!
//! A run is a fault phase (`FAULT_SECONDS` of simulated time), then a quiet one: faults off,
//! every node up, the person answering every question, until every run has settled. The
//! invariants ([`check`]) are checked as every write lands (the store's) and at the end.
//!
//! Replay a seed: `SIM_SEED=1234 cargo test -p boxfleet-tests --test t35_simulation -- --exact
//! replay --nocapture` (`SIM_TRACE=1` adds the nodes' logs).

pub mod boxes;
mod check;
pub mod node;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxfleet_actors::lifecycle::{
    AnswerOutcome, Answerer, Coordinator, LaunchOutcome, LaunchRequest,
};
use boxfleet_cluster::Keys;
use boxfleet_cluster::record::RunRecord;
use boxfleet_sandbox::fake::{FakeProvider, ScriptBy, ScriptedJob};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;

use self::boxes::Seen;
use self::node::{Shared, SimNode};
use self::store::{Faults, SimStore};

/// Simulated seconds of faults before the quiet phase.
pub const FAULT_SECONDS: u64 = 150;
/// The quiet phase's bound: every run settles within it, or the seed fails.
pub const QUIET_SECONDS: u64 = 1_200;
/// A client's call that has not returned by then is taken as failed (its node may be dead).
const CALL_BOUND: Duration = Duration::from_secs(60);

/// What one seed did and found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub seed: u64,
    pub violations: Vec<String>,
    /// every action of the simulation and what it came to, in order, with its simulated time
    pub trace: Vec<String>,
    pub launches: usize,
    pub answers: usize,
    pub kills: usize,
    /// boxes the backend's keep-alive window ended, not a kill (see `Sim::run`)
    pub lapsed_boxes: usize,
    pub simulated_seconds: u64,
}

impl Outcome {
    /// A digest of the trace: two runs of one seed have the same.
    pub fn digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.trace.hash(&mut hasher);
        hasher.finish()
    }

    /// How to replay this seed.
    pub fn replay(&self) -> String {
        format!(
            "SIM_SEED={} cargo test -p boxfleet-tests --test t35_simulation -- --exact replay --nocapture",
            self.seed
        )
    }
}

/// Runs one seed to its end.
pub fn run_seed(seed: u64) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let outcome = runtime.block_on(async move {
        let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("the simulation's epoch")
            .with_timezone(&chrono::Utc);
        let _clock = boxfleet_cluster::clock::Simulated::install(base);
        Sim::new(seed).run().await
    });
    runtime.shutdown_background();
    outcome
}

/// Runs `seeds` over `threads` threads (each seed on its own runtime, in its own thread's
/// turn), in seed order.
pub fn run_seeds(seeds: std::ops::Range<u64>, threads: usize) -> Vec<Outcome> {
    let next = Arc::new(Mutex::new(seeds.clone()));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let next = next.clone();
            let outcomes = outcomes.clone();
            std::thread::spawn(move || {
                loop {
                    let seed = next.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some(seed) = seed else { break };
                    let outcome = run_seed(seed);
                    outcomes
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(outcome);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a simulation thread ran to its end");
    }
    let mut outcomes = std::mem::take(&mut *outcomes.lock().unwrap_or_else(|e| e.into_inner()));
    outcomes.sort_by_key(|o| o.seed);
    outcomes
}

/// The nodes' logs to stderr (`SIM_TRACE`; `RUST_LOG` filters them).
pub fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// What a launch's job does, decided by the seed.
#[derive(Debug, Clone)]
struct Plan {
    seat: String,
    command: String,
    asks: bool,
    fails: bool,
    runs_for: Duration,
    pause_ttl: Option<u64>,
}

/// What the client (an engine, a person) got back from a call.
#[derive(Debug)]
enum Reply {
    Launch {
        turn: String,
        /// the launch, when the call was acknowledged
        acknowledged: Option<String>,
        said: String,
    },
    Answer {
        turn: String,
        launch: String,
        acknowledged: bool,
        said: String,
    },
}

struct Sim {
    seed: u64,
    rng: Arc<Mutex<StdRng>>,
    shared: Shared,
    nodes: Vec<SimNode>,
    /// when each dead node comes back
    restart_at: BTreeMap<usize, tokio::time::Instant>,
    plans: Arc<Mutex<BTreeMap<String, Plan>>>,
    /// the turns not acknowledged yet, in launch order, and the ones that were
    unlaunched: Vec<String>,
    /// each acknowledged turn's launch, as the call returned it
    launched: BTreeMap<String, String>,
    launch_in_flight: BTreeSet<String>,
    /// the answers acknowledged: (turn, launch) → text
    answered: BTreeMap<(String, String), String>,
    answer_in_flight: BTreeSet<(String, String)>,
    /// every job started with an answer: (turn, launch, answer)
    ran_with_answer: Arc<Mutex<Vec<(String, String, String)>>>,
    replies: (mpsc::UnboundedSender<Reply>, mpsc::UnboundedReceiver<Reply>),
    trace: Vec<String>,
    kills: usize,
    /// boxes ended by their keep-alive window rather than by a kill
    lapsed: usize,
    started: tokio::time::Instant,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = StdRng::seed_from_u64(seed);
        let faults = Faults::drawn(&mut rng);
        let node_count = rng.random_range(2..=3);
        let seat_count = rng.random_range(2..=4);
        let launch_count = rng.random_range(3..=8);
        let box_unreachable = if rng.random_bool(0.5) {
            rng.random_range(0.0..0.05)
        } else {
            0.0
        };
        let mut plans = BTreeMap::new();
        let mut unlaunched = Vec::new();
        for n in 0..launch_count {
            let turn = format!("turn-s{seed}-{n}");
            let plan = Plan {
                seat: format!("seat-{}", rng.random_range(0..seat_count)),
                command: format!("job {turn}"),
                asks: rng.random_bool(0.6),
                fails: rng.random_bool(0.15),
                runs_for: Duration::from_secs(rng.random_range(1..=30)),
                pause_ttl: match rng.random_range(0..3) {
                    0 => None,
                    1 => Some(rng.random_range(3..=20)),
                    _ => Some(rng.random_range(30..=300)),
                },
            };
            plans.insert(turn.clone(), plan);
            unlaunched.push(turn);
        }
        let rng = Arc::new(Mutex::new(rng));
        let prefix = format!("/sim{seed}");
        let store = SimStore::new(rng.clone(), faults, &prefix);
        let fake = FakeProvider::new();
        let plans = Arc::new(Mutex::new(plans));
        let ran_with_answer = Arc::new(Mutex::new(Vec::new()));
        fake.script_by(script_by(plans.clone(), ran_with_answer.clone()));
        let shared = Shared {
            store,
            keys: Keys::new(prefix),
            fake,
            rng: rng.clone(),
            box_unreachable: Arc::new(Mutex::new(box_unreachable)),
            seen: Arc::new(Mutex::new(Seen::default())),
        };
        let nodes = (1..=node_count)
            .map(|n| SimNode::new(format!("s{seed}n{n}")))
            .collect();
        let mut sim = Sim {
            seed,
            rng,
            shared,
            nodes,
            restart_at: BTreeMap::new(),
            plans,
            unlaunched,
            launched: BTreeMap::new(),
            launch_in_flight: BTreeSet::new(),
            answered: BTreeMap::new(),
            answer_in_flight: BTreeSet::new(),
            ran_with_answer,
            replies: mpsc::unbounded_channel(),
            trace: Vec::new(),
            kills: 0,
            lapsed: 0,
            started: tokio::time::Instant::now(),
        };
        sim.note(format!(
            "seed {seed}: {node_count} nodes, {seat_count} seats, {launch_count} launches, \
             faults {faults:?}, boxes unreachable {box_unreachable:.3}"
        ));
        sim
    }

    fn note(&mut self, what: String) {
        let at = self.started.elapsed().as_millis();
        self.trace.push(format!("{at:>8} {what}"));
    }

    fn chance(&self, p: f64) -> bool {
        self.rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .random_bool(p)
    }

    fn pick(&self, n: usize) -> usize {
        self.rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .random_range(0..n)
    }

    fn plan(&self, turn: &str) -> Plan {
        self.plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(turn)
            .cloned()
            .expect("a plan for every turn")
    }

    fn up_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].up.is_some())
            .collect()
    }

    async fn run(mut self) -> Outcome {
        for i in 0..self.nodes.len() {
            self.start_node(i).await;
        }
        let fault_end = self.started + Duration::from_secs(FAULT_SECONDS);
        let quiet_end = fault_end + Duration::from_secs(QUIET_SECONDS);
        let mut quiet = false;
        let mut violations = Vec::new();
        loop {
            let now = tokio::time::Instant::now();
            if !quiet && now >= fault_end {
                quiet = true;
                self.shared.store.set_faults(Faults::NONE);
                *self
                    .shared
                    .box_unreachable
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = 0.0;
                self.note("quiet: faults off".into());
            }
            self.shared.store.expire_leases();
            for lapsed in self.shared.fake.expire_lapsed() {
                // a box no run kept alive: one a killed node's create made after its run was
                // reaped (the backend's TTL is what ends it, as E2B's does)
                self.lapsed += 1;
                self.note(format!(
                    "box {lapsed} lapsed: no run renewed its keep-alive window"
                ));
            }
            self.drain_replies();
            self.faults_and_restarts(quiet).await;
            self.launch_some();
            self.answer_parked();
            let landed = self.shared.store.violations();
            if !landed.is_empty() {
                violations.extend(landed);
                break;
            }
            if quiet && self.settled() {
                break;
            }
            if now >= quiet_end {
                violations.push(format!(
                    "the fleet did not settle within {QUIET_SECONDS} s of quiet: {}",
                    self.unsettled()
                ));
                break;
            }
            let step = self.pick(750) as u64 + 250;
            tokio::time::sleep(Duration::from_millis(step)).await;
        }
        let simulated_seconds = self.started.elapsed().as_secs();
        if violations.is_empty() {
            violations.extend(check::at_end(&self));
        }
        for node in &mut self.nodes {
            node.kill();
        }
        self.note(format!("end: {} violations", violations.len()));
        // `SIM_KEY=turn-s12-3`: every write that landed on a key holding it, with its
        // writer and the status it wrote (a replay's way to see who wrote a row last)
        if let Ok(needle) = std::env::var("SIM_KEY") {
            for write in self.shared.store.landed() {
                if !write.key.contains(&needle) {
                    continue;
                }
                let status = write.value.as_deref().map_or("(deleted)".to_owned(), |v| {
                    serde_json::from_slice::<serde_json::Value>(v)
                        .ok()
                        .and_then(|j| j.get("status").map(|s| s.to_string()))
                        .unwrap_or_else(|| "?".to_owned())
                });
                eprintln!(
                    "sim write r{} {} by {}: {status}",
                    write.revision, write.key, write.node
                );
            }
        }
        Outcome {
            seed: self.seed,
            violations,
            trace: self.trace,
            launches: self.launched.len(),
            answers: self.answered.len(),
            kills: self.kills,
            lapsed_boxes: self.lapsed,
            simulated_seconds,
        }
    }

    async fn start_node(&mut self, i: usize) {
        let shared = self.shared.clone();
        let started = self.nodes[i].start(&shared).await;
        let id = self.nodes[i].id.clone();
        if started {
            self.note(format!("{id} started"));
        } else {
            self.note(format!("{id} could not start; tried again"));
            let again = tokio::time::Instant::now() + Duration::from_secs(1);
            self.restart_at.insert(i, again);
        }
    }

    /// Kills, restarts, seat actors restarting and hand-overs, as the seed decides.
    async fn faults_and_restarts(&mut self, quiet: bool) {
        let now = tokio::time::Instant::now();
        let due: Vec<usize> = self
            .restart_at
            .iter()
            .filter(|(_, at)| quiet || **at <= now)
            .map(|(i, _)| *i)
            .collect();
        for i in due {
            self.restart_at.remove(&i);
            self.start_node(i).await;
        }
        if quiet {
            return;
        }
        let up = self.up_nodes();
        if !up.is_empty() && self.chance(0.02) {
            let i = up[self.pick(up.len())];
            self.nodes[i].kill();
            self.kills += 1;
            let back = Duration::from_millis(self.pick(10_000) as u64 + 500);
            self.restart_at.insert(i, now + back);
            let id = self.nodes[i].id.clone();
            self.note(format!("{id} killed; back in {} ms", back.as_millis()));
        }
        if !up.is_empty() && self.chance(0.03) {
            let i = up[self.pick(up.len())];
            if let Some(coordinator) = self.nodes[i].coordinator() {
                let held = coordinator.held_seats();
                if !held.is_empty() {
                    let seat = held[self.pick(held.len())].seat.clone();
                    let id = self.nodes[i].id.clone();
                    if self.chance(0.7) {
                        self.note(format!("{id}: seat {seat}'s actor restarts"));
                        // what a seat actor's restart does (`SeatActor::pre_start`): the
                        // recovery pass again, then its inbox pumped (seed 48095: a restart
                        // without the pump finished a run's ending and left an answer that
                        // waited behind it in the inbox for good)
                        tokio::spawn(async move {
                            coordinator.recover_after_restart(&seat).await;
                            coordinator.pump(&seat).await;
                        });
                    } else {
                        self.note(format!("{id}: seat {seat} handed over"));
                        tokio::spawn(async move {
                            let _ = coordinator
                                .release_seat(&seat, Duration::from_secs(5))
                                .await;
                        });
                    }
                }
            }
        }
    }

    fn drain_replies(&mut self) {
        while let Ok(reply) = self.replies.1.try_recv() {
            match reply {
                Reply::Launch {
                    turn,
                    acknowledged,
                    said,
                } => {
                    self.launch_in_flight.remove(&turn);
                    self.note(format!("launch {turn}: {said}"));
                    if let Some(launch) = acknowledged {
                        self.unlaunched.retain(|t| t != &turn);
                        self.launched.insert(turn, launch);
                    }
                }
                Reply::Answer {
                    turn,
                    launch,
                    acknowledged,
                    said,
                } => {
                    self.answer_in_flight
                        .remove(&(turn.clone(), launch.clone()));
                    self.note(format!("answer {turn}/{launch}: {said}"));
                    if acknowledged {
                        let text = answer_text(&turn, &launch);
                        self.answered.insert((turn, launch), text);
                    }
                }
            }
        }
    }

    /// Launches (or launches again: a call that failed is sent again, the same turn) a run.
    fn launch_some(&mut self) {
        let up = self.up_nodes();
        if up.is_empty() || !self.chance(0.15) {
            return;
        }
        let waiting: Vec<String> = self
            .unlaunched
            .iter()
            .filter(|turn| !self.launch_in_flight.contains(*turn))
            .cloned()
            .collect();
        let Some(turn) = waiting.first().cloned() else {
            return;
        };
        let plan = self.plan(&turn);
        let (entry, fleet) = self.entry(&up);
        self.launch_in_flight.insert(turn.clone());
        self.note(format!("launch {turn} on {} via {}", plan.seat, entry.node));
        let request = LaunchRequest {
            seat: plan.seat.clone(),
            turn_id: Some(turn.clone()),
            brief: plan.command.clone(),
            runner: "command".into(),
            command: Some(plan.command.clone()),
            requester: Some("person".into()),
            pause_ttl_seconds: plan.pause_ttl,
            ..LaunchRequest::default()
        };
        let replies = self.replies.0.clone();
        tokio::spawn(async move {
            let call = async {
                let coordinator = routed(&entry, &fleet, &request.seat).await?;
                Ok::<_, String>(coordinator.launch(request).await)
            };
            let outcome = tokio::time::timeout(CALL_BOUND, call).await;
            let (acknowledged, said) = match outcome {
                Ok(Ok(LaunchOutcome::Launched { launch_id, .. })) => {
                    let said = format!("launched {launch_id}");
                    (Some(launch_id), said)
                }
                Ok(Ok(LaunchOutcome::Refused { class, reason })) => {
                    (None, format!("refused {class:?}: {reason}"))
                }
                Ok(Err(unrouted)) => (None, unrouted),
                Err(_) => (None, "no reply".to_owned()),
            };
            let _ = replies.send(Reply::Launch {
                turn,
                acknowledged,
                said,
            });
        });
    }

    /// The person answers a parked run's question (again, when the call was not acknowledged).
    fn answer_parked(&mut self) {
        let up = self.up_nodes();
        if up.is_empty() {
            return;
        }
        for run in self.runs() {
            let parked = matches!(
                run.status,
                boxfleet_cluster::record::Status::AwaitingClarification
                    | boxfleet_cluster::record::Status::Reseed
            ) && run.answer.is_none();
            let key = (run.turn_id.clone(), run.launch_id.clone());
            if !parked
                || self.answered.contains_key(&key)
                || self.answer_in_flight.contains(&key)
                || !self.chance(0.2)
            {
                continue;
            }
            let (entry, fleet) = self.entry(&up);
            self.answer_in_flight.insert(key.clone());
            self.note(format!("answer {}/{} via {}", key.0, key.1, entry.node));
            let seat = run.seat.clone();
            let replies = self.replies.0.clone();
            let text = answer_text(&key.0, &key.1);
            tokio::spawn(async move {
                let answerer = Answerer {
                    from: "person".into(),
                    given_by: None,
                    admin: true,
                    operator_id: "admin:sim@k1".into(),
                };
                let call = async {
                    let coordinator = routed(&entry, &fleet, &seat).await?;
                    Ok::<_, String>(coordinator.answer(&key.0, &key.1, &text, &answerer).await)
                };
                let answered = tokio::time::timeout(CALL_BOUND, call).await;
                let (acknowledged, said) = match answered {
                    Ok(Ok(Ok(AnswerOutcome::Recorded))) => (true, "recorded".to_owned()),
                    Ok(Ok(Ok(AnswerOutcome::Pending))) => (true, "pending".to_owned()),
                    Ok(Ok(Ok(other))) => (false, format!("{other:?}")),
                    Ok(Ok(Err(error))) => (false, format!("error: {error}")),
                    Ok(Err(unrouted)) => (false, unrouted),
                    Err(_) => (false, "no reply".to_owned()),
                };
                let _ = replies.send(Reply::Answer {
                    turn: key.0,
                    launch: key.1,
                    acknowledged,
                    said,
                });
            });
        }
    }

    /// The node a client's call reaches (any node up, as the seed picks) and every node up
    /// then, which the call may be forwarded to.
    fn entry(&self, up: &[usize]) -> (Arc<Coordinator>, Vec<Arc<Coordinator>>) {
        let entry = up[self.pick(up.len())];
        let fleet = up
            .iter()
            .filter_map(|&i| self.nodes[i].coordinator())
            .collect();
        let entry = self.nodes[entry]
            .coordinator()
            .expect("a node up has its lifecycle");
        (entry, fleet)
    }

    /// Every run's record now.
    fn runs(&self) -> Vec<RunRecord> {
        let prefix = self.shared.keys.runs();
        self.shared
            .store
            .snapshot(&prefix)
            .iter()
            .filter_map(|kv| RunRecord::from_json(&kv.key, &kv.value).ok())
            .collect()
    }

    /// Every turn launched, no run left, no box left, nothing in flight.
    fn settled(&self) -> bool {
        self.unlaunched.is_empty()
            && self.launch_in_flight.is_empty()
            && self.answer_in_flight.is_empty()
            && self.runs().is_empty()
            && self.shared.fake.box_ids().is_empty()
    }

    fn unsettled(&self) -> String {
        let runs: Vec<String> = self
            .runs()
            .iter()
            .map(|r| format!("{} {}", r.turn_id, r.status))
            .collect();
        let boxes: Vec<String> = self
            .shared
            .fake
            .box_ids()
            .iter()
            .map(|id| {
                let turn = self.shared.fake.spec(id).map(|spec| spec.turn_id);
                format!("{id} (of {})", turn.unwrap_or_default())
            })
            .collect();
        format!(
            "unlaunched {:?}, runs {runs:?}, boxes {boxes:?}",
            self.unlaunched
        )
    }
}

/// The node that answers a call about `seat` reaching `entry`: `entry` routes it as `boxfleet
/// node` does (`boxfleet_node::route`: the seat's holder, else the node it is placed on) and
/// forwards it there; `Err` says why it could not (the client tries again), as a forwarded
/// call's failure does. A node killed since the call began never answers (the call's bound).
async fn routed(
    entry: &Arc<Coordinator>,
    fleet: &[Arc<Coordinator>],
    seat: &str,
) -> Result<Arc<Coordinator>, String> {
    match boxfleet_node::route(entry, seat).await {
        Ok(boxfleet_node::Route::Here) => Ok(entry.clone()),
        Ok(boxfleet_node::Route::There { node, .. }) => fleet
            .iter()
            .find(|c| c.node == node)
            .cloned()
            .ok_or_else(|| format!("forwarded to node {node}: it is down")),
        Err(status) => Err(format!("unrouted: {}", status.message())),
    }
}

/// The answer the person gives a launch's question.
fn answer_text(turn: &str, launch: &str) -> String {
    format!("answer for {turn} {launch}")
}

/// Each job's script, from its run's plan: a first job that asks parks on its question; a job
/// with the answer (`BOXFLEET_ANSWER`), or one that does not ask, delivers — or fails.
fn script_by(
    plans: Arc<Mutex<BTreeMap<String, Plan>>>,
    ran_with_answer: Arc<Mutex<Vec<(String, String, String)>>>,
) -> ScriptBy {
    ScriptBy(Arc::new(move |env: &BTreeMap<String, String>| {
        let turn = env.get("BOXFLEET_TURN_ID")?;
        let plan = plans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(turn)?
            .clone();
        let launch = env
            .get(boxfleet_actors::ports::LAUNCH_MARKER)
            .cloned()
            .unwrap_or_default();
        let answer = env.get("BOXFLEET_ANSWER");
        let mut job = ScriptedJob {
            runs_for: Some(plan.runs_for),
            output: format!("{turn} ran\n"),
            ..ScriptedJob::default()
        };
        if let Some(answer) = answer {
            ran_with_answer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((turn.clone(), launch, answer.clone()));
        }
        if plan.asks && answer.is_none() {
            let ask = boxfleet_agents::layout::ask_dir(boxfleet_sandbox::fake::FAKE_HOME);
            job.files = vec![
                (
                    format!("{ask}/question"),
                    format!("which way for {turn}?").into_bytes(),
                ),
                (format!("{ask}/audience"), b"requester".to_vec()),
            ];
        } else if plan.fails {
            job.exit_code = 1;
        } else {
            job.report = Some(format!("Delivered: fix/{turn}\n"));
        }
        Some(job)
    }))
}
