//! Bench: run transitions per second, side by side in one run (`harness = false`).
//!
//! ```text
//! cargo bench -p boxfleet-tests --bench transitions      # BENCH_SECONDS=3 by default
//! ```
//!
//! 1. `Runs::apply` on an `EtcdStore` against raw `etcd_client` calls of the same shape: a get
//!    of the row, then one txn comparing the seat holder's create_revision with the epoch and
//!    the row's mod_revision with the one read, putting a JSON value of the same size, with
//!    the same two gets on its failure branch. At 1 and 32 concurrent writers; goal ours/raw
//!    ≥ 0.80.
//! 2. `Runs::apply` on an `EmbeddedStore` (in a tempdir) against the same on etcd.
//!
//! The workload: every writer owns one run (its own turn id, all on one seat held by one
//! node's lease) and appends tool-bridge calls to it (`AppendBridgeCall`), a write every time
//! with no status change. The rows start with a full bridge log, so every write is the same
//! size. Each cell has a warm-up, then a measuring window of `BENCH_SECONDS` (default 3);
//! cells run interleaved (ours, raw, embedded, ours, raw, embedded, …) for 2 rounds and the
//! best round is reported, since the machine is small and noisy. Before every etcd cell etcd
//! is compacted to its head, so each cell starts with the same history.
//!
//! After the table, a profile at 1 writer: the store calls one apply makes (counted through a
//! wrapper store), the time spent in them against the raw calls, and the layer's own CPU per
//! transition (decode, decide, encode) with no I/O at all.
//!
//! Environment: `BENCH_SECONDS` (measuring window per cell, default 3), `BENCH_WARMUP`
//! (default 1), `BENCH_ROUNDS` (default 2), `BENCH_BREAKDOWN=1` (adds a cell per writer count
//! that drives the same get + txn through the `EtcdStore` adapter alone, without `Runs`: it
//! splits the gap between the adapter and the layer above it), `BENCH_ONLY=<cell>[,<cell>…]`
//! (`ours`, `raw`, `embedded`, `adapter`, and optionally `@<writers>`, e.g. `ours@32`: runs only
//! those cells and prints their figures, no table; for profiling one cell under `perf`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use boxfleet_cluster::Keys;
use boxfleet_cluster::record::{BRIDGE_LOG_HEAD, BRIDGE_LOG_TAIL, RunRecord};
use boxfleet_cluster::runs::Runs;
use boxfleet_cluster::seat::{self, Acquire, Holder};
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::{Compare, CompareOp, Op, Store, Txn};
use boxfleet_cluster::transition::{self, Fence, Transition};
use boxfleet_tests::counting::{CallSnapshot, CallStats, Counting};
use boxfleet_tests::{EtcdServer, unique_prefix};
use etcd_client as etcd;

const SEAT: &str = "eng";
const WRITER_COUNTS: [usize; 2] = [1, 32];
const GOAL: f64 = 0.80;
/// Session lease TTL: long enough that the bench never needs a keep-alive.
const SESSION_TTL_SECONDS: i64 = 3600;
/// Applies measured one at a time by the profile.
const PROFILE_APPLIES: u32 = 400;
/// Decode/decide/encode iterations of the CPU-only profile.
const CPU_ITERATIONS: u32 = 5000;

#[derive(Debug, Clone)]
struct Config {
    seconds: f64,
    warmup: f64,
    rounds: usize,
    breakdown: bool,
    only: Option<Vec<String>>,
}

impl Config {
    /// Whether the cell runs at all (`BENCH_ONLY`).
    fn runs(&self, kind: Kind, writers: usize) -> bool {
        let Some(only) = &self.only else {
            return true;
        };
        only.iter().any(|cell| {
            let (name, at) = cell.split_once('@').unwrap_or((cell.as_str(), ""));
            name == kind.short() && (at.is_empty() || at == writers.to_string())
        })
    }

    fn from_env() -> Self {
        let number = |name: &str, default: f64| match std::env::var(name) {
            Ok(text) => match text.trim().parse::<f64>() {
                Ok(value) if value > 0.0 => value,
                _ => panic!("{name}={text:?} is not a positive number"),
            },
            Err(_) => default,
        };
        Self {
            seconds: number("BENCH_SECONDS", 3.0),
            warmup: number("BENCH_WARMUP", 1.0),
            rounds: number("BENCH_ROUNDS", 2.0).round().max(1.0) as usize,
            breakdown: std::env::var("BENCH_BREAKDOWN").is_ok_and(|value| value == "1"),
            only: std::env::var("BENCH_ONLY")
                .ok()
                .map(|list| list.split(',').map(|cell| cell.trim().to_owned()).collect()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `Runs::apply` on `EtcdStore`
    OursEtcd,
    /// get + CAS txn straight through etcd-client
    RawEtcd,
    /// `Runs::apply` on `EmbeddedStore`
    OursEmbedded,
    /// the same get + txn through the `EtcdStore` adapter, no `Runs` (breakdown only)
    StoreEtcd,
}

impl Kind {
    fn short(self) -> &'static str {
        match self {
            Kind::OursEtcd => "ours",
            Kind::RawEtcd => "raw",
            Kind::OursEmbedded => "embedded",
            Kind::StoreEtcd => "adapter",
        }
    }

    fn all(breakdown: bool) -> Vec<Kind> {
        let mut kinds = vec![Kind::OursEtcd, Kind::RawEtcd, Kind::OursEmbedded];
        if breakdown || std::env::var_os("BENCH_ONLY").is_some() {
            kinds.push(Kind::StoreEtcd);
        }
        kinds
    }

    fn on_etcd(self) -> bool {
        self != Kind::OursEmbedded
    }
}

/// One measured cell.
#[derive(Debug, Clone, Copy, Default)]
struct Measure {
    /// transitions per second
    rate: f64,
    /// CPU of this process (client, layer, and the embedded store if used), µs per transition
    bench_cpu_us: f64,
    /// CPU of the etcd process, µs per transition
    etcd_cpu_us: f64,
}

/// Everything the cells share.
struct Bench {
    config: Config,
    etcd: EtcdServer,
    raw: etcd::Client,
    fence_etcd: Fence,
    fence_embedded: Fence,
    holder_key: String,
    ours_etcd: Runs,
    ours_embedded: Runs,
    ours_turns: Vec<String>,
    raw_row_keys: Vec<String>,
    clock_ticks: f64,
}

#[tokio::main]
async fn main() {
    let config = Config::from_env();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let max_writers = WRITER_COUNTS.iter().copied().max().unwrap_or(1);

    eprintln!("starting a dedicated etcd on loopback …");
    let etcd = EtcdServer::start();
    let etcd_store: Arc<dyn Store> = Arc::new(etcd.store().await);
    let raw = etcd::Client::connect(etcd.endpoints(), Some(connect_options()))
        .await
        .expect("raw etcd-client connects");
    let version = raw
        .clone()
        .status()
        .await
        .map(|status| status.version().to_owned())
        .unwrap_or_else(|error| format!("unknown ({error})"));

    // one prefix, one seat held by one node's session; ours and raw rows side by side
    let keys = Keys::new(unique_prefix("bench-transitions"));
    let fence_etcd = hold_seat(&etcd_store, &keys).await;
    let ours_etcd = Runs::new(etcd_store.clone(), keys.clone());
    let ours_turns: Vec<String> = (0..max_writers).map(|i| format!("ours-{i:02}")).collect();
    let raw_turns: Vec<String> = (0..max_writers).map(|i| format!("rawx-{i:02}")).collect();
    for turn in ours_turns.iter().chain(&raw_turns) {
        open_running(&ours_etcd, &fence_etcd, turn).await;
    }
    let raw_row_keys: Vec<String> = raw_turns.iter().map(|turn| keys.run(turn)).collect();

    eprintln!("opening the embedded store …");
    let embedded_dir = tempfile::tempdir().expect("tempdir for the embedded store");
    let embedded: Arc<dyn Store> = Arc::new(
        EmbeddedStore::open(embedded_dir.path())
            .await
            .expect("open the embedded store"),
    );
    let fence_embedded = hold_seat(&embedded, &keys).await;
    let ours_embedded = Runs::new(embedded.clone(), keys.clone());
    for turn in &ours_turns {
        open_running(&ours_embedded, &fence_embedded, turn).await;
    }

    let row_bytes = etcd_store
        .get(&keys.run(&ours_turns[0]))
        .await
        .expect("read a row")
        .map_or(0, |kv| kv.value.len());
    let bench = Bench {
        config: config.clone(),
        raw,
        fence_etcd,
        fence_embedded,
        holder_key: keys.seat_holder(SEAT),
        ours_etcd,
        ours_embedded,
        ours_turns,
        raw_row_keys,
        clock_ticks: clock_ticks_per_second(),
        etcd,
    };

    // ---- the cells, interleaved: per round, per writer count: ours, raw, embedded
    let mut results: Vec<(Kind, usize, Vec<Measure>)> = Vec::new();
    for &writers in &WRITER_COUNTS {
        for kind in Kind::all(config.breakdown) {
            results.push((kind, writers, Vec::new()));
        }
    }
    for round in 1..=config.rounds {
        for &writers in &WRITER_COUNTS {
            for kind in Kind::all(config.breakdown) {
                if !config.runs(kind, writers) {
                    continue;
                }
                let measure = bench.cell(kind, writers).await;
                eprintln!(
                    "round {round}: {kind:?} × {writers:>2} writers: {:>8.0} transitions/s",
                    measure.rate
                );
                if let Some((_, _, measures)) = results
                    .iter_mut()
                    .find(|(k, w, _)| *k == kind && *w == writers)
                {
                    measures.push(measure);
                }
            }
        }
    }
    let best = |kind: Kind, writers: usize| -> (Measure, Vec<f64>) {
        let measures = results
            .iter()
            .find(|(k, w, _)| *k == kind && *w == writers)
            .map(|(_, _, measures)| measures.clone())
            .unwrap_or_default();
        let rates = measures.iter().map(|m| m.rate).collect();
        let best = measures
            .into_iter()
            .max_by(|a, b| a.rate.total_cmp(&b.rate))
            .unwrap_or_default();
        (best, rates)
    };

    if config.only.is_some() {
        for (kind, writers, measures) in &results {
            for measure in measures {
                println!(
                    "{kind:?} × {writers}: {:.0} transitions/s, CPU µs/tx: bench {:.0}, etcd {:.0}",
                    measure.rate, measure.bench_cpu_us, measure.etcd_cpu_us
                );
            }
        }
        return;
    }

    // ---- the profile, at 1 writer
    let profile = bench.profile().await;

    // ---- the report
    let rule = "─".repeat(100);
    println!();
    println!("{rule}");
    println!("boxfleet run transitions/s — cargo bench -p boxfleet-tests --bench transitions");
    println!(
        "etcd {version} (dedicated, loopback, fsync on {}) · {cores} cores · tokio multi-thread runtime, {cores} workers",
        fs_of(bench.etcd.dir())
    );
    println!(
        "window {:.1} s per cell after {:.1} s warm-up · best of {} rounds, cells interleaved \
         (ours, raw, embedded, ours, raw, …)",
        config.seconds, config.warmup, config.rounds
    );
    println!(
        "workload: AppendBridgeCall on the writer's own running run (one seat, one node lease); \
         row value {row_bytes} B JSON"
    );
    println!(
        "NOTE: etcd, this program (writers + our layer) and the embedded store all compete for \
         the same {cores} cores."
    );
    println!("{rule}");

    println!();
    println!(
        "1) our layer (Runs::apply on EtcdStore) vs raw etcd-client, same shape: get row + txn \
         [2 compares, 1 put | 2 gets]"
    );
    println!();
    println!(
        "{:>7} │ {:>10} {:>10} │ {:>8} │ {:>11} │ {:>9} {:>9} │ {:>17} {:>17}",
        "writers",
        "ours tx/s",
        "raw tx/s",
        "ours/raw",
        "goal ≥ 0.80",
        "ours ms",
        "raw ms",
        "ours CPU µs/tx",
        "raw CPU µs/tx"
    );
    println!(
        "{:>7} │ {:>10} {:>10} │ {:>8} │ {:>11} │ {:>9} {:>9} │ {:>17} {:>17}",
        "", "", "", "", "", "(mean)", "(mean)", "bench / etcd", "bench / etcd"
    );
    let mut rounds_line = Vec::new();
    for &writers in &WRITER_COUNTS {
        let (ours, ours_rounds) = best(Kind::OursEtcd, writers);
        let (raw, raw_rounds) = best(Kind::RawEtcd, writers);
        let ratio = ours.rate / raw.rate;
        println!(
            "{writers:>7} │ {:>10.0} {:>10.0} │ {ratio:>8.2} │ {:>11} │ {:>9.2} {:>9.2} │ {:>17} {:>17}",
            ours.rate,
            raw.rate,
            if ratio >= GOAL { "met" } else { "not met" },
            latency_ms(writers, ours.rate),
            latency_ms(writers, raw.rate),
            format!("{:.0} / {:.0}", ours.bench_cpu_us, ours.etcd_cpu_us),
            format!("{:.0} / {:.0}", raw.bench_cpu_us, raw.etcd_cpu_us),
        );
        rounds_line.push(format!(
            "{writers} writer(s): ours {} · raw {}",
            join_rates(&ours_rounds),
            join_rates(&raw_rounds)
        ));
    }
    println!("  per round: {}", rounds_line.join("  |  "));

    if config.breakdown {
        println!();
        println!(
            "1b) breakdown: the same get + txn through the EtcdStore adapter alone (no Runs: no \
             decode, decide, encode)"
        );
        println!();
        println!(
            "{:>7} │ {:>10} {:>12} {:>10} │ {:>12} {:>9} │ {:>17}",
            "writers",
            "raw tx/s",
            "adapter tx/s",
            "ours tx/s",
            "adapter/raw",
            "ours/raw",
            "adapter CPU µs/tx"
        );
        for &writers in &WRITER_COUNTS {
            let (raw, _) = best(Kind::RawEtcd, writers);
            let (adapter, adapter_rounds) = best(Kind::StoreEtcd, writers);
            let (ours, _) = best(Kind::OursEtcd, writers);
            println!(
                "{writers:>7} │ {:>10.0} {:>12.0} {:>10.0} │ {:>12.2} {:>9.2} │ {:>17}   rounds: {}",
                raw.rate,
                adapter.rate,
                ours.rate,
                adapter.rate / raw.rate,
                ours.rate / raw.rate,
                format!("{:.0} / {:.0}", adapter.bench_cpu_us, adapter.etcd_cpu_us),
                join_rates(&adapter_rounds),
            );
        }
    }

    println!();
    println!("2) our layer on EmbeddedStore (redb in a tempdir, fsync per commit) vs on etcd");
    println!();
    println!(
        "{:>7} │ {:>13} {:>10} │ {:>13} │ {:>11} {:>9} │ {:>14} {:>17}",
        "writers",
        "embedded tx/s",
        "etcd tx/s",
        "embedded/etcd",
        "embedded ms",
        "etcd ms",
        "emb. CPU µs/tx",
        "etcd CPU µs/tx"
    );
    println!(
        "{:>7} │ {:>13} {:>10} │ {:>13} │ {:>11} {:>9} │ {:>14} {:>17}",
        "", "", "", "", "(mean)", "(mean)", "bench", "bench / etcd"
    );
    let mut rounds_line = Vec::new();
    for &writers in &WRITER_COUNTS {
        let (embedded, embedded_rounds) = best(Kind::OursEmbedded, writers);
        let (on_etcd, _) = best(Kind::OursEtcd, writers);
        println!(
            "{writers:>7} │ {:>13.0} {:>10.0} │ {:>13.2} │ {:>11.2} {:>9.2} │ {:>14.0} {:>17}",
            embedded.rate,
            on_etcd.rate,
            embedded.rate / on_etcd.rate,
            latency_ms(writers, embedded.rate),
            latency_ms(writers, on_etcd.rate),
            embedded.bench_cpu_us,
            format!("{:.0} / {:.0}", on_etcd.bench_cpu_us, on_etcd.etcd_cpu_us),
        );
        rounds_line.push(format!(
            "{writers} writer(s): embedded {}",
            join_rates(&embedded_rounds)
        ));
    }
    println!("  per round: {}", rounds_line.join("  |  "));

    println!();
    println!(
        "3) profile at 1 writer, {PROFILE_APPLIES} transitions one after another (means per \
         transition)"
    );
    println!();
    profile.print();
    println!("{rule}");

    drop(bench); // kills etcd and removes its directory
    drop(embedded_dir);
}

impl Bench {
    /// Runs one cell: `writers` tasks driving their own runs for warm-up + window.
    async fn cell(&self, kind: Kind, writers: usize) -> Measure {
        if kind.on_etcd() {
            self.compact_etcd().await;
        }
        let (runs, fence) = match kind {
            Kind::OursEmbedded => (&self.ours_embedded, &self.fence_embedded),
            Kind::OursEtcd | Kind::RawEtcd | Kind::StoreEtcd => (&self.ours_etcd, &self.fence_etcd),
        };
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::with_capacity(writers);
        for writer in 0..writers {
            let done = done.clone();
            let stop = stop.clone();
            let task = match kind {
                Kind::OursEtcd | Kind::OursEmbedded => tokio::spawn(ours_writer(
                    runs.clone(),
                    fence.clone(),
                    self.ours_turns[writer].clone(),
                    done,
                    stop,
                )),
                Kind::StoreEtcd => tokio::spawn(store_writer(
                    runs.store().clone(),
                    runs.keys().clone(),
                    fence.clone(),
                    self.raw_row_keys[writer].clone(),
                    done,
                    stop,
                )),
                Kind::RawEtcd => tokio::spawn(raw_writer(
                    self.raw.kv_client(),
                    self.holder_key.clone(),
                    fence.epoch,
                    self.raw_row_keys[writer].clone(),
                    done,
                    stop,
                )),
            };
            tasks.push(task);
        }

        tokio::time::sleep(Duration::from_secs_f64(self.config.warmup)).await;
        let count_0 = done.load(Ordering::Relaxed);
        let started = Instant::now();
        let (bench_0, etcd_0) = (self.cpu_of_self(), self.cpu_of_etcd());
        tokio::time::sleep(Duration::from_secs_f64(self.config.seconds)).await;
        let count_1 = done.load(Ordering::Relaxed);
        let elapsed = started.elapsed().as_secs_f64();
        let (bench_1, etcd_1) = (self.cpu_of_self(), self.cpu_of_etcd());
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => panic!("{kind:?} × {writers}: a writer failed: {error}"),
                Err(error) => panic!("{kind:?} × {writers}: a writer panicked: {error}"),
            }
        }

        let transitions = count_1.saturating_sub(count_0) as f64;
        let per_transition_us = |cpu_seconds: f64| {
            if transitions > 0.0 {
                cpu_seconds * 1e6 / transitions
            } else {
                0.0
            }
        };
        Measure {
            rate: transitions / elapsed,
            bench_cpu_us: per_transition_us(bench_1 - bench_0),
            etcd_cpu_us: if kind.on_etcd() {
                per_transition_us(etcd_1 - etcd_0)
            } else {
                0.0
            },
        }
    }

    /// Compacts etcd's history up to its head and waits until the compaction is physical.
    async fn compact_etcd(&self) {
        let mut kv = self.raw.kv_client();
        let head = kv
            .get("\u{0}", None)
            .await
            .ok()
            .and_then(|response| response.header().map(|header| header.revision()))
            .unwrap_or(0);
        if head > 1 {
            // a compaction to the head again is refused ("already compacted"): fine
            let _ = kv
                .compact(head, Some(etcd::CompactionOptions::new().with_physical()))
                .await;
        }
    }

    /// CPU seconds this process has used.
    fn cpu_of_self(&self) -> f64 {
        cpu_seconds("/proc/self/stat", self.clock_ticks)
    }

    /// CPU seconds the etcd process has used.
    fn cpu_of_etcd(&self) -> f64 {
        self.etcd.pid().map_or(0.0, |pid| {
            cpu_seconds(&format!("/proc/{pid}/stat"), self.clock_ticks)
        })
    }

    /// Store calls and their time per apply, against the raw calls, plus the layer's CPU.
    async fn profile(&self) -> Profile {
        self.compact_etcd().await;
        let stats = Arc::new(CallStats::default());
        let counting: Arc<dyn Store> = Arc::new(Counting {
            inner: self.ours_etcd.store().clone(),
            stats: stats.clone(),
        });
        let runs = Runs::new(counting, self.ours_etcd.keys().clone());
        let fence = &self.fence_etcd;
        let turn = &self.ours_turns[0];

        // ours, one at a time
        for n in 0..50 {
            apply_line(&runs, fence, turn, n).await;
        }
        stats.reset();
        let started = Instant::now();
        for n in 0..u64::from(PROFILE_APPLIES) {
            apply_line(&runs, fence, turn, n).await;
        }
        let ours_total = started.elapsed();
        let ours = stats.snapshot();

        // raw, one at a time, timing the get and the txn apart
        let mut kv = self.raw.kv_client();
        let key = &self.raw_row_keys[0];
        let (mut raw_get, mut raw_txn) = (Duration::ZERO, Duration::ZERO);
        for warm in [true, false] {
            let rounds = if warm { 50 } else { PROFILE_APPLIES };
            (raw_get, raw_txn) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..rounds {
                let started = Instant::now();
                let (revision, value) = raw_read(&mut kv, key).await.expect("raw get");
                raw_get += started.elapsed();
                let started = Instant::now();
                raw_cas(&mut kv, &self.holder_key, fence.epoch, key, revision, value)
                    .await
                    .expect("raw txn");
                raw_txn += started.elapsed();
            }
        }

        // the layer's CPU with no I/O: decode the row, decide, encode the next row
        let row = self
            .ours_etcd
            .store()
            .get(&self.ours_etcd.keys().run(turn))
            .await
            .expect("read the row")
            .expect("the row exists");
        let (mut decode, mut decide, mut encode) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let now = chrono::Utc::now();
        for n in 0..u64::from(CPU_ITERATIONS) {
            let started = Instant::now();
            let record = RunRecord::from_json(&row.key, &row.value).expect("decode the row");
            decode += started.elapsed();
            let started = Instant::now();
            let decision = transition::decide(
                Some(&record),
                fence,
                &Transition::AppendBridgeCall {
                    line: bridge_line(n),
                },
                now,
            )
            .expect("decide");
            decide += started.elapsed();
            let started = Instant::now();
            let bytes = match &decision.next {
                transition::Next::Write(next) => next.to_json(),
                transition::Next::Delete => Vec::new(),
            };
            encode += started.elapsed();
            std::hint::black_box(bytes);
        }

        let per = |duration: Duration, n: u32| duration.as_secs_f64() * 1e6 / f64::from(n);
        Profile {
            applies: PROFILE_APPLIES,
            ours,
            ours_total_us: per(ours_total, PROFILE_APPLIES),
            raw_get_us: per(raw_get, PROFILE_APPLIES),
            raw_txn_us: per(raw_txn, PROFILE_APPLIES),
            decode_us: per(decode, CPU_ITERATIONS),
            decide_us: per(decide, CPU_ITERATIONS),
            encode_us: per(encode, CPU_ITERATIONS),
        }
    }
}

struct Profile {
    applies: u32,
    ours: CallSnapshot,
    ours_total_us: f64,
    raw_get_us: f64,
    raw_txn_us: f64,
    decode_us: f64,
    decide_us: f64,
    encode_us: f64,
}

impl Profile {
    fn print(&self) {
        let n = f64::from(self.applies);
        let calls = |count: u64| count as f64 / n;
        let us = |nanos: u64| nanos as f64 / 1e3 / n;
        let ours = &self.ours;
        let store_us = us(ours.get_ns + ours.txn_ns + ours.other_ns);
        println!(
            "  store round-trips per apply: {:.2} get + {:.2} txn + {:.2} other (raw: 1 get + 1 txn)",
            calls(ours.gets),
            calls(ours.txns),
            calls(ours.others)
        );
        println!(
            "  {:<34} {:>9} {:>9} {:>9} {:>9}",
            "µs per transition", "get", "txn", "other", "total"
        );
        println!(
            "  {:<34} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
            "ours: EtcdStore calls",
            us(ours.get_ns),
            us(ours.txn_ns),
            us(ours.other_ns),
            store_us
        );
        println!(
            "  {:<34} {:>9} {:>9} {:>9} {:>9.0}",
            "ours: Runs::apply (wall)", "", "", "", self.ours_total_us
        );
        println!(
            "  {:<34} {:>9} {:>9} {:>9} {:>9.0}",
            "ours: in the layer, outside store",
            "",
            "",
            "",
            self.ours_total_us - store_us
        );
        println!(
            "  {:<34} {:>9.0} {:>9.0} {:>9} {:>9.0}",
            "raw: etcd-client calls",
            self.raw_get_us,
            self.raw_txn_us,
            "",
            self.raw_get_us + self.raw_txn_us
        );
        println!(
            "  layer CPU without I/O ({CPU_ITERATIONS} iterations): decode row {:.1} µs · \
             decide {:.1} µs · encode row {:.1} µs · sum {:.1} µs",
            self.decode_us,
            self.decide_us,
            self.encode_us,
            self.decode_us + self.decide_us + self.encode_us
        );
    }
}

// ---- the writers

/// Appends bridge calls to `turn` through `Runs::apply` until told to stop.
async fn ours_writer(
    runs: Runs,
    fence: Fence,
    turn: String,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        runs.apply(
            &fence,
            &turn,
            Transition::AppendBridgeCall {
                line: bridge_line(n),
            },
        )
        .await
        .map_err(|error| format!("{turn}: {error}"))?;
        done.fetch_add(1, Ordering::Relaxed);
        n += 1;
    }
    Ok(())
}

/// The same round-trips straight through etcd-client: get the row, then a CAS txn fenced on
/// the seat holder that puts a value of the same size, until told to stop.
async fn raw_writer(
    mut kv: etcd::KvClient,
    holder_key: String,
    epoch: i64,
    key: String,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    while !stop.load(Ordering::Relaxed) {
        let (revision, value) = raw_read(&mut kv, &key).await?;
        raw_cas(&mut kv, &holder_key, epoch, &key, revision, value).await?;
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// The same get + txn through the `Store` trait on `EtcdStore`: the txn `Runs::attempt`
/// builds, with the value read put back; no decode, decide or encode.
async fn store_writer(
    store: Arc<dyn Store>,
    keys: Keys,
    fence: Fence,
    key: String,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let holder_key = keys.seat_holder(&fence.seat);
    while !stop.load(Ordering::Relaxed) {
        let row = store
            .get(&key)
            .await
            .map_err(|error| format!("get {key}: {error}"))?
            .ok_or_else(|| format!("{key} is missing"))?;
        let txn = Txn::new()
            .when([
                seat::fence_compare(&keys, &fence),
                Compare::mod_revision(&key, CompareOp::Equal, row.mod_revision),
            ])
            .and_then([Op::put(&key, row.value)])
            .or_else([Op::get(&holder_key), Op::get(&key)]);
        let response = store
            .txn(txn)
            .await
            .map_err(|error| format!("txn {key}: {error}"))?;
        if !response.succeeded {
            return Err(format!("txn {key}: the compares failed"));
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

async fn raw_read(kv: &mut etcd::KvClient, key: &str) -> Result<(i64, Vec<u8>), String> {
    let response = kv
        .get(key, None)
        .await
        .map_err(|error| format!("get {key}: {error}"))?;
    let row = response
        .kvs()
        .first()
        .ok_or_else(|| format!("{key} is missing"))?;
    Ok((row.mod_revision(), row.value().to_vec()))
}

async fn raw_cas(
    kv: &mut etcd::KvClient,
    holder_key: &str,
    epoch: i64,
    key: &str,
    revision: i64,
    value: Vec<u8>,
) -> Result<(), String> {
    let txn = etcd::Txn::new()
        .when([
            etcd::Compare::create_revision(holder_key, etcd::CompareOp::Equal, epoch),
            etcd::Compare::mod_revision(key, etcd::CompareOp::Equal, revision),
        ])
        .and_then([etcd::TxnOp::put(key, value, None)])
        .or_else([
            etcd::TxnOp::get(holder_key, None),
            etcd::TxnOp::get(key, None),
        ]);
    let response = kv
        .txn(txn)
        .await
        .map_err(|error| format!("txn {key}: {error}"))?;
    if response.succeeded() {
        Ok(())
    } else {
        Err(format!("txn {key}: the compares failed"))
    }
}

async fn apply_line(runs: &Runs, fence: &Fence, turn: &str, n: u64) {
    if let Err(error) = runs
        .apply(
            fence,
            turn,
            Transition::AppendBridgeCall {
                line: bridge_line(n),
            },
        )
        .await
    {
        panic!("append to {turn}: {error}");
    }
}

// ---- the world

/// The etcd-client options `EtcdStore::connect` uses, so both sides ride the same transport.
fn connect_options() -> etcd::ConnectOptions {
    // one attempt's bound: a third of the call's
    let timeout = boxfleet_tests::STORE_CALL_TIMEOUT / 3;
    etcd::ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout)
        .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5))
        .with_require_leader(true)
}

/// A node session holding [`SEAT`] on `store`.
async fn hold_seat(store: &Arc<dyn Store>, keys: &Keys) -> Fence {
    let session = store
        .lease_grant(SESSION_TTL_SECONDS)
        .await
        .expect("grant the session lease");
    let holder = Holder {
        node: "bench".into(),
        incarnation: "bench-1".into(),
    };
    match seat::acquire(store.as_ref(), keys, SEAT, &holder, session)
        .await
        .expect("acquire the seat")
    {
        Acquire::Held(fence) => fence,
        Acquire::HeldBy { holder, .. } => panic!("the seat is held by {holder:?}"),
    }
}

/// A bridge-log line; every one is the same length.
fn bridge_line(n: u64) -> String {
    format!("{n:010} gh pr view 4217 --json state,statusCheckRollup -> ok in 0.41s")
}

/// Opens `turn` with a full bridge log and brings it to `running`, as `must_run` does.
async fn open_running(runs: &Runs, fence: &Fence, turn: &str) {
    let launch = "launch-1";
    let now = chrono::Utc::now();
    let mut record = RunRecord::launching(turn, launch, SEAT, "command", now);
    record.conversation_key = Some("dm-alice".into());
    record.pause_ttl_seconds = Some(1800);
    record.brief = "fix the flaky checkout test and open a pull request".into();
    record.bridge_calls = (0..(BRIDGE_LOG_HEAD + BRIDGE_LOG_TAIL) as u64)
        .map(bridge_line)
        .collect();
    let steps = [
        Transition::OpenLaunch {
            record: Box::new(record),
        },
        Transition::AttachBox {
            launch_id: launch.into(),
            sandbox_id: format!("box-{turn}"),
            placement: "direct".into(),
            job: Some("job-1".into()),
            host: None,
            boxes_dir: None,
        },
        Transition::CommitSuspension {
            launch_id: launch.into(),
            conversation: vec![b'c'; 512],
        },
    ];
    for step in steps {
        let name = step.name();
        if let Err(error) = runs.apply(fence, turn, step).await {
            panic!("{name} on {turn}: {error}");
        }
    }
}

// ---- measuring

/// The mean time one writer waits per transition (Little's law), in ms.
fn latency_ms(writers: usize, rate: f64) -> f64 {
    if rate > 0.0 {
        writers as f64 / rate * 1e3
    } else {
        f64::NAN
    }
}

fn join_rates(rates: &[f64]) -> String {
    rates
        .iter()
        .map(|rate| format!("{rate:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// utime + stime of a process, in seconds, from `/proc/{pid}/stat`.
fn cpu_seconds(stat_path: &str, clock_ticks: f64) -> f64 {
    let Ok(stat) = std::fs::read_to_string(stat_path) else {
        return 0.0;
    };
    // the fields after the command name, which is in parentheses and may hold spaces
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15
    let ticks = |index: usize| {
        fields
            .get(index - 3)
            .and_then(|field| field.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(14) + ticks(15)) / clock_ticks
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .unwrap_or(100.0)
}

/// The filesystem type under `path`, for the header.
fn fs_of(path: &std::path::Path) -> String {
    std::process::Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE", "--target"])
        .arg(path)
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "?".into())
}
