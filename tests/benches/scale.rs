//! Bench: how every cost grows with the work a node holds (`harness = false`; issue 20).
//!
//! ```text
//! cargo bench -p boxfleet-tests --bench scale    # SCALE_ACTIVE=10000 SCALE_SWEEP=1000
//!                                                # SCALE_BATCH=100 SCALE_VIEWERS=100
//!                                                # SCALE_POLL_MS=50 SCALE_WINDOW=20
//!                                                # SCALE_RECOVERY=1000 SCALE_ANSWERS=200
//! ```
//!
//! One release node on the embedded store, its sandbox the fake cell
//! (`providers.sandbox.fake`): every poll of a box takes `SCALE_POLL_MS`, every other call
//! answers at once, and every job runs until the bench creates the cell's `until_file`. The
//! node polls every second (the harness's `--poll-interval 1`), so while more boxes run than
//! one second of polls covers, its 16 poll slots never idle and the rate of polls is the
//! sweep's speed. In one run it measures, and prints side by side with each goal:
//!
//! 1. **launches per second** of a batch of `SCALE_BATCH` launches, 16 at once, on a node
//!    holding those seats only and on one holding `SCALE_ACTIVE` seats and their ended runs
//!    (goal: within 20% of each other), in interleaved pairs of batches, the two nodes side by
//!    side (`scale/launch_rates.rs`); and, for the record, a batch on new seats beside
//!    `SCALE_ACTIVE` running jobs, which the node polls meanwhile;
//! 2. **the poll sweep** with `SCALE_SWEEP` and with `SCALE_ACTIVE` boxes running: polls per
//!    second over `SCALE_WINDOW` seconds, so a sweep of N takes N ÷ rate, beside its bound
//!    N × poll ÷ 16 (goal: bound ÷ time ≥ 0.9);
//! 3. **memory**: the node's resident set idle — holding the `SCALE_ACTIVE` seats the runs
//!    use, each after a first job that ended (a held seat's actor, lease and mailbox live as
//!    long as the node holds it, so the seats are held before the reading; what one costs is
//!    printed too) — then with `SCALE_ACTIVE` runs active on them (goal ≤ 500 MB), and after
//!    every one of them ended and was collected (goal: within 20% of idle);
//! 4. **tail fan-out**: `SCALE_VIEWERS` viewers tailing one running job for `SCALE_WINDOW`
//!    seconds, each asking again as soon as it is answered; the box reads the node made for
//!    them per 2 s (goal ≤ 1). A reading is reused for 2 s, so a window of W s holds at most
//!    W/2 + 1 of them: the figure counts the reads after the window's first;
//! 5. **the recovery pass and the board's reconcile**, in process on the embedded store and
//!    on etcd (`scale/recovery.rs`): one seat's pass over `SCALE_RECOVERY` runs, the board's
//!    read of `SCALE_ACTIVE` runs; each its time and its store calls;
//! 6. **answer → resume**, in process on each store (`scale/answers.rs`): `SCALE_ANSWERS`
//!    answers to parked runs of idle seats, each from the `answer_run` call to its resume on
//!    the engine link — the store round trips of the median answer, each call listed (goal
//!    ≤ 3; `cargo test` fails above it: a count, not a time), and p50 / p99;
//! 7. **answer → resume end to end** (`scale/answer_latency.rs`): a release node on each store,
//!    an engine attached over gRPC, a job that asks in a `direct` box; `SCALE_ANSWERS` ÷ 4
//!    answers through `Runs.Answer`, each timed to the resume on the engine's stream.
//!
//! `SCALE_ONLY=in_process` runs 5–6, `SCALE_ONLY=answers` 7, and `SCALE_ONLY=launches` the
//! launch rates alone (the pairs of 1.), printing the nodes' pids for a profiler, and before
//! them the CPU of the node holding `SCALE_ACTIVE` seats while it is asked nothing.
//!
//! Under `cargo test` (the README's test command) it runs small (`SCALE_ACTIVE=400
//! SCALE_SWEEP=200 SCALE_BATCH=50 SCALE_VIEWERS=20 SCALE_WINDOW=4 SCALE_RECOVERY=200 SCALE_ANSWERS=20`): it checks that every figure is
//! produced and that nothing is lost (every launch accepted, every run collected), not the
//! goals, which a loaded 2-core CI machine cannot be held to.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::node::NodeProcess;
use boxfleet_tests::probe;
use futures::StreamExt;

#[path = "scale/answer_latency.rs"]
mod answer_latency;
#[path = "scale/answers.rs"]
mod answers;
#[path = "scale/launch_rates.rs"]
mod launch_rates;
#[path = "scale/recovery.rs"]
mod recovery;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The sizes of one run.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    active: usize,
    sweep: usize,
    batch: usize,
    viewers: usize,
    /// the runs of the seat whose recovery pass is measured
    recovery: usize,
    /// the answers to parked runs measured on each store
    answers: usize,
    poll: Duration,
    window: Duration,
}

impl Sizes {
    /// The sizes from the environment; unset, the issue's under `cargo bench`, and a small run
    /// under `cargo test` (the README's test command).
    fn from_env() -> Sizes {
        let benching = std::env::args().any(|arg| arg == "--bench");
        let pick = |name: &str, full: usize, small: usize| {
            env_or(name, if benching { full } else { small })
        };
        let active = pick("SCALE_ACTIVE", 10_000, 400);
        Sizes {
            active,
            sweep: pick("SCALE_SWEEP", 1_000, 200).min(active),
            batch: pick("SCALE_BATCH", 100, 50),
            viewers: pick("SCALE_VIEWERS", 100, 20),
            recovery: pick("SCALE_RECOVERY", 1_000, 200),
            answers: pick("SCALE_ANSWERS", 200, 20),
            poll: Duration::from_millis(env_or("SCALE_POLL_MS", 50) as u64),
            window: Duration::from_secs(pick("SCALE_WINDOW", 20, 4) as u64),
        }
    }
}

/// How long the node's idle CPU is read over, between the launch phases.
const IDLE_WINDOW: Duration = Duration::from_secs(10);
/// How many launches are in flight at once.
const LAUNCHERS: usize = 16;
/// The node's poll slots (`MAX_CONCURRENT_POLLS`).
const POLL_SLOTS: f64 = 16.0;
const MB: f64 = 1024.0 * 1024.0;
/// How long the node is left quiet before its memory is read: past its allocator's trim
/// (every 30 s, `services/node/src/memory.rs`).
const SETTLE: Duration = Duration::from_secs(35);

type Runs = pb::runs_client::RunsClient<boxfleet_tests::grpc::Authed>;

struct Bench {
    node: NodeProcess,
    _dir: tempfile::TempDir,
    /// the fake cell's `until_file`: every job ends once it exists
    until: PathBuf,
    token: String,
    http: String,
    runs: Runs,
    /// how many launches were asked, in all
    launched: usize,
}

impl Bench {
    async fn start(sizes: &Sizes) -> Bench {
        let dir = tempfile::tempdir().expect("tempdir");
        let until = dir.path().join("end-the-jobs");
        let config = dir.path().join("scale.yaml");
        std::fs::write(
            &config,
            format!(
                "company:\n  providers:\n    sandbox:\n      fake:\n        latency_ms: {{ poll: {} }}\n        job: {{ seconds: 0, until_file: {} }}\n",
                sizes.poll.as_millis(),
                until.display()
            ),
        )
        .expect("config");
        let config = config.display().to_string();
        let node = NodeProcess::start("scale", dir.path(), &["--config", &config]);
        let token = std::fs::read_to_string(node.token_file())
            .expect("the admin token")
            .trim()
            .to_owned();
        let http = node.http_url();
        let runs = boxfleet_tests::grpc::runs(&node.addr())
            .await
            .expect("connect");
        Bench {
            node,
            _dir: dir,
            until,
            token,
            http,
            runs,
            launched: 0,
        }
    }

    /// Launches a job on each of `seats` (`seat-{i}`), `LAUNCHERS` at once; the time it took
    /// and the turns.
    async fn launch(&mut self, seats: std::ops::Range<usize>) -> (Duration, Vec<String>) {
        self.launched += seats.len();
        let began = Instant::now();
        let runs = self.runs.clone();
        let turns: Vec<String> = futures::stream::iter(seats)
            .map(|i| {
                let mut runs = runs.clone();
                async move {
                    let reply = runs
                        .launch(pb::LaunchRequest {
                            seat: format!("seat-{i}"),
                            command: "make test".into(),
                            ..Default::default()
                        })
                        .await
                        .unwrap_or_else(|status| panic!("launch {i}: {status}"))
                        .into_inner();
                    match reply.outcome {
                        Some(pb::launch_reply::Outcome::Launched(launched)) => launched.turn_id,
                        other => panic!("launch {i} was not accepted: {other:?}"),
                    }
                }
            })
            .buffer_unordered(LAUNCHERS)
            .collect()
            .await;
        (began.elapsed(), turns)
    }

    /// The node's CPU over [`IDLE_WINDOW`] with nothing asked of it, in cores: what holding
    /// its seats costs (the placement pass, the session, the duties' ticks).
    async fn idle_cpu(&self) -> f64 {
        let pid = self.node.pid().unwrap_or(0);
        // the last collections' tails settle first
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (began, before) = (Instant::now(), probe::cpu_seconds(pid));
        tokio::time::sleep(IDLE_WINDOW).await;
        (probe::cpu_seconds(pid) - before) / began.elapsed().as_secs_f64()
    }

    async fn metrics(&self) -> String {
        probe::scrape(&self.http, &self.token).await
    }

    fn rss(&self) -> u64 {
        self.node
            .pid()
            .map_or(0, |pid| probe::status_bytes(pid, "VmRSS:"))
    }

    /// The node's store calls so far: txns, the seconds they took, reads, the keys read.
    async fn store_calls(&self) -> [f64; 4] {
        let text = self.metrics().await;
        [
            probe::sample(&text, "boxfleet_store_txn_seconds_count"),
            probe::sample(&text, "boxfleet_store_txn_seconds_sum"),
            probe::family_sum(&text, "boxfleet_store_reads_total"),
            probe::family_sum(&text, "boxfleet_store_keys_read_total"),
        ]
    }

    /// Prints the store calls since `before` per launch since `launched` (txns, their mean
    /// time, reads and the keys they returned), as `what`.
    async fn store_calls_since(&self, before: [f64; 4], launched: usize, what: &str) {
        let now = self.store_calls().await;
        let [txns, seconds, reads, keys] = std::array::from_fn(|i| now[i] - before[i]);
        let launches = (self.launched - launched).max(1) as f64;
        println!(
            "  {what}, per launch: {:.1} store txns ({:.2} ms each on average), {:.1} reads returning {:.1} keys",
            txns / launches,
            seconds * 1e3 / txns.max(1.0),
            reads / launches,
            keys / launches
        );
    }

    /// Polls per second over `window`, from the node's poll counter.
    async fn poll_rate(&self, window: Duration) -> f64 {
        let before = probe::family_sum(&self.metrics().await, "boxfleet_polls_total");
        let began = Instant::now();
        tokio::time::sleep(window).await;
        let after = probe::family_sum(&self.metrics().await, "boxfleet_polls_total");
        (after - before) / began.elapsed().as_secs_f64()
    }

    /// Whether no seat has a run that keeps it busy (`Ops.Seats`).
    async fn seats_free(&self) -> bool {
        let mut ops = boxfleet_tests::grpc::ops(&self.node.addr())
            .await
            .expect("connect");
        let seats = ops
            .seats(pb::SeatsRequest {})
            .await
            .expect("Ops.Seats")
            .into_inner();
        seats.seats.iter().all(|seat| seat.active_runs == 0)
    }

    /// How many runs the board shows running.
    async fn running(&self) -> f64 {
        probe::sample(&self.metrics().await, "boxfleet_runs{status=\"running\"}")
    }

    /// Ends every job (the cell's `until_file`) and waits until the board shows none running,
    /// every launch asked has its phase record and no seat has a run that keeps it busy; then
    /// lets the next jobs run again.
    async fn end_all(&self, within: Duration) -> Duration {
        std::fs::write(&self.until, b"").expect("until_file");
        let began = Instant::now();
        loop {
            let text = self.metrics().await;
            let running = probe::sample(&text, "boxfleet_runs{status=\"running\"}");
            let collected = probe::family_sum(&text, "boxfleet_collections_total");
            // a run ended by a failure is `ending` until its end is written, its seat busy till
            // then, and the board does not show it: the seats say
            if running == 0.0 && collected as usize >= self.launched && self.seats_free().await {
                break;
            }
            assert!(
                began.elapsed() < within,
                "{running} runs still running and {collected} of {} collected after {within:?}\n{}",
                self.launched,
                self.node.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let took = began.elapsed();
        std::fs::remove_file(&self.until).expect("until_file");
        took
    }

    /// `viewers` viewers tail `turn` for `window`, each asking again as soon as it is
    /// answered; the box reads the node made per 2 s, and how many tails were answered.
    async fn tail_fan_out(&self, turn: &str, viewers: usize, window: Duration) -> (f64, u64) {
        let reads = |text: &str| probe::family_sum(text, "boxfleet_tail_box_reads_total");
        let before = reads(&self.metrics().await);
        let answered = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let began = Instant::now();
        let deadline = began + window;
        let mut tasks = Vec::new();
        for _ in 0..viewers {
            let mut runs = self.runs.clone();
            let turn = turn.to_owned();
            let answered = answered.clone();
            tasks.push(tokio::spawn(async move {
                let (mut epoch, mut after, mut digest) = (0, 0, String::new());
                while Instant::now() < deadline {
                    let reply = runs
                        .tail(pb::TailRequest {
                            turn_id: turn.clone(),
                            epoch,
                            after,
                            digest: digest.clone(),
                            budget_ms: 1_000,
                            ..Default::default()
                        })
                        .await;
                    if let Ok(reply) = reply {
                        let reply = reply.into_inner();
                        (epoch, after, digest) = (reply.epoch, reply.end, reply.digest);
                        answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    } else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }));
        }
        for task in tasks {
            task.await.expect("viewer");
        }
        let took = began.elapsed().as_secs_f64();
        let made = reads(&self.metrics().await) - before;
        (
            (made - 1.0).max(0.0) / (took / 2.0),
            answered.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// One printed figure: what, its value, its goal, and whether the goal is met.
struct Figure {
    what: String,
    value: String,
    goal: String,
    met: bool,
}

fn figure(what: impl Into<String>, value: String, goal: &str, met: bool) -> Figure {
    Figure {
        what: what.into(),
        value,
        goal: goal.to_owned(),
        met,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes = Sizes::from_env();
    println!(
        "scale: {} active runs, sweep at {} and {}, batches of {}, {} viewers, {} ms per poll, {} s windows",
        sizes.active,
        sizes.sweep,
        sizes.active,
        sizes.batch,
        sizes.viewers,
        sizes.poll.as_millis(),
        sizes.window.as_secs()
    );
    let mut figures = Vec::new();
    let only = std::env::var("SCALE_ONLY").unwrap_or_default();
    match only.as_str() {
        "in_process" => in_process_figures(&sizes, &mut figures).await,
        "launches" => launch_figures(&sizes, &mut figures).await,
        "answers" => answer_latency_figures(&sizes, &mut figures).await,
        _ => {
            node_figures(&sizes, &mut figures).await;
            in_process_figures(&sizes, &mut figures).await;
            answer_latency_figures(&sizes, &mut figures).await;
        }
    }

    println!();
    println!("| figure | value | goal | met |");
    println!("|---|---|---|---|");
    for f in &figures {
        println!(
            "| {} | {} | {} | {} |",
            f.what,
            f.value,
            f.goal,
            if f.met { "yes" } else { "**no**" }
        );
    }
    let unmet = figures.iter().filter(|f| !f.met).count();
    println!();
    println!("{unmet} of {} goals not met", figures.len());
}

/// 7: answers end to end, through a node's gRPC API to an attached engine, on each store.
async fn answer_latency_figures(sizes: &Sizes, figures: &mut Vec<Figure>) {
    let samples = sizes.answers.div_ceil(4);
    for (name, backing) in [
        ("embedded", answer_latency::Backing::Embedded),
        ("etcd", answer_latency::Backing::Etcd),
    ] {
        let took = answer_latency::measure(backing, samples).await;
        let at = |q: f64| answers::quantile(&took, q).as_secs_f64() * 1e3;
        figures.push(figure(
            format!(
                "answer → resume on an attached engine's stream (gRPC), p50 / p99 of {}, {name}",
                took.len()
            ),
            format!("{:.1} / {:.1} ms", at(0.5), at(0.99)),
            "—",
            true,
        ));
    }
}

/// The launch rates alone (`SCALE_ONLY=launches`, for profiling: the nodes' pids are
/// printed): a node holding `SCALE_ACTIVE` seats whose first jobs ended beside one holding the
/// batch's seats only.
async fn launch_figures(sizes: &Sizes, figures: &mut Vec<Figure>) {
    let mut many = Bench::start(sizes).await;
    println!(
        "  the node of {} seats: pid {:?}",
        sizes.active,
        many.node.pid()
    );
    let (took, _) = many.launch(0..sizes.active).await;
    println!(
        "  a first job on each of {} seats in {took:.2?}",
        sizes.active
    );
    many.end_all(Duration::from_secs(600)).await;
    let idle_cpu = many.idle_cpu().await;
    println!(
        "  the node idle, {} seats held: {:.1}% of a core",
        sizes.active,
        idle_cpu * 100.0
    );
    let mut few = Bench::start(sizes).await;
    println!(
        "  the node of {} seats: pid {:?}",
        sizes.batch,
        few.node.pid()
    );
    let before = (few.store_calls().await, many.store_calls().await);
    let launched = (few.launched, many.launched);
    let rates = launch_rates::interleaved(&mut few, &mut many, 0..sizes.batch).await;
    few.store_calls_since(before.0, launched.0, &format!("{} seats", sizes.batch))
        .await;
    many.store_calls_since(before.1, launched.1, &format!("{} seats", sizes.active))
        .await;
    launch_rate_figures(sizes, &rates, sizes.active, figures);
    figures.push(figure(
        format!("node CPU idle, {} seats held", sizes.active),
        format!("{:.1}% of a core", idle_cpu * 100.0),
        "—",
        true,
    ));
}

/// The launch rates of the interleaved pairs, `held` the seats the busier node held.
fn launch_rate_figures(
    sizes: &Sizes,
    rates: &launch_rates::Rates,
    held: impl std::fmt::Display,
    figures: &mut Vec<Figure>,
) {
    let (low, high) = rates.ratio_range();
    figures.push(figure(
        format!("launches/s, {} seats held", sizes.batch),
        format!("{:.0} (median of {})", rates.few(), launch_rates::PAIRS),
        "—",
        true,
    ));
    figures.push(figure(
        format!("launches/s, {held} seats held"),
        format!(
            "{:.0}; paired with the first, median {:.2} (pairs {low:.2}–{high:.2})",
            rates.many(),
            rates.ratio()
        ),
        "≥ 0.8 of the first",
        rates.ratio() >= 0.8,
    ));
}

/// 1–4: one release node on the fake cell.
async fn node_figures(sizes: &Sizes, figures: &mut Vec<Figure>) {
    let mut bench = Bench::start(sizes).await;

    // 1. every seat the runs use is held before the idle reading: a held seat's actor, lease
    // and mailbox live as long as the node holds it, whatever its runs did (the soak bench's
    // rule)
    let fresh = bench.rss();
    let (took, _) = bench.launch(0..sizes.active).await;
    println!(
        "  a first job on each of {} seats in {took:.2?}",
        sizes.active
    );
    bench.end_all(Duration::from_secs(600)).await;
    tokio::time::sleep(SETTLE).await;
    let idle = bench.rss();
    println!(
        "  idle, {} seats held: {:.1} MB (fresh {:.1} MB)",
        sizes.active,
        idle as f64 / MB,
        fresh as f64 / MB
    );

    // 2. the sweep at SCALE_SWEEP boxes, then at SCALE_ACTIVE, on the same seats
    let mut sweeps = Vec::new();
    let mut active = 0;
    for n in [sizes.sweep, sizes.active] {
        if n > active {
            let (took, _) = bench.launch(active..n).await;
            println!("  launched {} more ({n} running) in {took:.2?}", n - active);
            active = n;
        }
        let rate = bench.poll_rate(sizes.window).await;
        let sweep = n as f64 / rate;
        let bound = n as f64 * sizes.poll.as_secs_f64() / POLL_SLOTS;
        println!("  {n} running: {rate:.0} polls/s, a sweep {sweep:.1} s (bound {bound:.1} s)");
        sweeps.push((n, sweep, bound));
    }
    let with_active = bench.rss();
    let running = bench.running().await;

    // 3. the tail of one running job, many viewers
    let probe_seat = sizes.active + sizes.batch;
    let (_, probe_turns) = bench.launch(probe_seat..probe_seat + 1).await;
    let (reads_per_2s, answered) = bench
        .tail_fan_out(&probe_turns[0], sizes.viewers, sizes.window)
        .await;
    println!("  {} viewers: {answered} tails answered", sizes.viewers);

    // 4. a batch on new seats beside every active run
    let (took, _) = bench.launch(sizes.active..sizes.active + sizes.batch).await;
    let loaded_rate = sizes.batch as f64 / took.as_secs_f64();
    println!(
        "  launched {} beside {} active in {took:.2?}",
        sizes.batch,
        sizes.active + 1
    );

    // 5. every run ends and is collected; the node settles
    let ended = bench.end_all(Duration::from_secs(600)).await;
    println!(
        "  {} runs ended and collected in {ended:.2?}",
        bench.launched
    );
    tokio::time::sleep(SETTLE).await;
    let after = bench.rss();
    let seats_held = probe::sample(&bench.metrics().await, "boxfleet_seats_held");

    // 5b. batches on the same seats of this node, now beside every seat held and their ended
    // runs, paired with batches on a node holding those seats only: what the store holds, not
    // the polls' load, is what a launch must not read all of
    let mut few = Bench::start(sizes).await;
    let rates = launch_rates::interleaved(&mut few, &mut bench, 0..sizes.batch).await;
    launch_rate_figures(sizes, &rates, seats_held, figures);
    figures.push(figure(
        format!("launches/s beside {} running", sizes.active + 1),
        format!(
            "{loaded_rate:.1} ({:.2} of a node holding {} seats)",
            loaded_rate / rates.few(),
            sizes.batch
        ),
        "— (the node polls them meanwhile)",
        true,
    ));
    for (n, sweep, bound) in sweeps {
        let ratio = bound / sweep;
        figures.push(figure(
            format!("poll sweep, {n} boxes"),
            format!("{sweep:.1} s, bound {bound:.1} s: {ratio:.2}"),
            "bound ÷ time ≥ 0.9",
            ratio >= 0.9,
        ));
    }
    figures.push(figure(
        format!("RSS, {running} runs active"),
        format!("{:.1} MB", with_active as f64 / MB),
        "≤ 500 MB",
        (with_active as f64) <= 500.0 * MB,
    ));
    figures.push(figure(
        "a held seat, idle",
        format!(
            "{:.1} KB",
            (idle as f64 - fresh as f64) / sizes.active as f64 / 1024.0
        ),
        "—",
        true,
    ));
    let grown = after as f64 / idle as f64;
    figures.push(figure(
        format!("RSS after they ended ({seats_held} seats held)"),
        format!(
            "{:.1} MB ({grown:.2} of idle {:.1} MB)",
            after as f64 / MB,
            idle as f64 / MB
        ),
        "≤ 1.2 of idle",
        grown <= 1.2,
    ));
    figures.push(figure(
        format!("tail: box reads per 2 s, {} viewers", sizes.viewers),
        format!("{reads_per_2s:.2}"),
        "≤ 1",
        reads_per_2s <= 1.0,
    ));
}

/// 5–6: in process, on each store: a seat's recovery pass, the board's reconcile, and answers
/// to parked runs.
async fn in_process_figures(sizes: &Sizes, figures: &mut Vec<Figure>) {
    let embedded_dir = tempfile::tempdir().expect("tempdir");
    let embedded: Arc<dyn boxfleet_cluster::store::Store> = Arc::new(
        boxfleet_cluster::store::embedded::EmbeddedStore::open(embedded_dir.path())
            .await
            .expect("embedded store"),
    );
    let etcd: Arc<dyn boxfleet_cluster::store::Store> =
        Arc::new(boxfleet_tests::EtcdServer::shared().store().await);
    for (name, store) in [("embedded", embedded), ("etcd", etcd)] {
        let prefix = boxfleet_tests::unique_prefix("scale");
        let measured =
            recovery::measure(store.clone(), &prefix, sizes.recovery, sizes.active).await;
        let calls = |step: &recovery::Step| {
            format!(
                "{:.0} ms; {} gets, {} txns, {} ranges",
                step.took.as_secs_f64() * 1e3,
                step.calls.gets,
                step.calls.txns,
                step.calls.others
            )
        };
        figures.push(figure(
            format!("recovery pass, {} runs, {name}", sizes.recovery),
            calls(&measured.recovery),
            "—",
            true,
        ));
        figures.push(figure(
            format!("board reconcile, {} runs, {name}", measured.reconciled),
            calls(&measured.reconcile),
            "—",
            true,
        ));
        let answered =
            answers::measure(store.clone(), &format!("{prefix}-answers"), sizes.answers).await;
        println!("  an answer's store calls to its resume, {name}:");
        for call in &answered.calls {
            println!("    {call}");
        }
        let trips = answered.round_trips();
        let whole = answered.whole();
        figures.push(figure(
            format!("answer → resume on the engine link, store round trips, {name}"),
            format!(
                "{} ({} gets, {} txns, {} ranges; {} in the whole call)",
                answers::total(&trips),
                trips.gets,
                trips.txns,
                trips.others,
                answers::total(&whole)
            ),
            "≤ 3",
            answers::total(&trips) <= 3,
        ));
        figures.push(figure(
            format!(
                "answer → resume on the engine link (in process), p50 / p99 of {}, {name}",
                answered.latency.len()
            ),
            format!(
                "{:.1} / {:.1} ms",
                answered.quantile(0.5).as_secs_f64() * 1e3,
                answered.quantile(0.99).as_secs_f64() * 1e3
            ),
            "—",
            true,
        ));
    }
}
