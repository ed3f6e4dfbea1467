//! Bench: a soak of huge and hostile outputs (`harness = false`; issue 24).
//!
//! ```text
//! cargo bench -p boxfleet-tests --bench soak      # SOAK_HOSTILE=21 SOAK_SMALL=300
//!                                                 # SOAK_STORES=embedded,etcd
//! ```
//!
//! On each store — the embedded one, and a dedicated etcd at its default request limit (1.5
//! MiB) — one release node runs `SOAK_HOSTILE` jobs that write what a careless or hostile
//! agent writes (a 4 MB report, 40 MB of stdout, a 2 MB question, a 1 MB audience, 2,000
//! delivered refs, a 20 KB first line, a 2 MB report with 2,000 refs), each on a seat of its
//! own, then `SOAK_SMALL` one-line jobs on 20 seats. The node keeps events 60 s
//! (`store.events_keep_seconds`) and the embedded store its history 60 s
//! (`store.history_seconds`; the dedicated etcd compacts every minute,
//! `--auto-compaction-retention=1m`), so the end shows what the store holds once what it
//! retains for a time has gone. It samples at the start (the node idle after one warm-up job
//! on each seat the soak uses, so every seat is held), after every batch (the peak is the
//! largest sample) and at the end (every run settled or parked, then 300 s quiet: the events'
//! retention, the history's or etcd's compaction, the allocator's trim, the runtime's idle
//! threads; the quiet minutes from 150 s on are printed as they pass):
//!
//! - the store's size (the embedded file; etcd's `db_size_in_use`, and its file `db_size`,
//!   which etcd gives back to the disk only when defragmented),
//! - the node's resident memory (`VmRSS`), and the part of it that is its own (`RssAnon`: heap
//!   and stacks, not the program's code pages mapped from its file),
//! - the largest event in the outbox (read through `Runs.Events`),
//! - the median of five `Runs.Get` of the first hostile turn (`boxfleet show`'s read),
//!
//! and prints them side by side with the end's ratio to the start.

use std::time::{Duration, Instant};

use boxfleet_proto::v1 as pb;
use boxfleet_tests::EtcdServer;
use boxfleet_tests::node::{NodeProcess, launched_turn};
use futures::StreamExt;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a hostile job writes, by kind.
const HOSTILE: [(&str, &str); 7] = [
    (
        "report",
        "head -c 4000000 /dev/zero | tr '\\0' r | fold -w 99 > \"$BOXFLEET_REPORT\"",
    ),
    (
        "stdout",
        "yes 'a line of stdout, over and over' | head -c 40000000",
    ),
    (
        "question",
        "d=$HOME/.boxfleet/ask; mkdir -p $d; echo requester > $d/audience; { echo 'Which cap?'; seq 1 300000; } > $d/question",
    ),
    (
        "audience",
        "d=$HOME/.boxfleet/ask; mkdir -p $d; head -c 1048576 /dev/zero | tr '\\0' a > $d/audience; echo 'Which cap?' > $d/question",
    ),
    (
        "refs",
        "for i in $(seq 1 2000); do echo \"Delivered: https://github.com/acme/app/pull/$i\"; done > \"$BOXFLEET_REPORT\"",
    ),
    (
        "first_line",
        "d=$HOME/.boxfleet/ask; mkdir -p $d; echo requester > $d/audience; head -c 20000 /dev/zero | tr '\\0' q > $d/question",
    ),
    (
        "report_and_refs",
        "{ head -c 2000000 /dev/zero | tr '\\0' r | fold -w 99; echo; for i in $(seq 1 2000); do echo \"Delivered: https://x.test/pull/$i\"; done; } > \"$BOXFLEET_REPORT\"",
    ),
];

/// One sample of the node and its store.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    store_bytes: u64,
    store_file_bytes: u64,
    rss_bytes: u64,
    /// the resident memory that is the process's own (`RssAnon`): the heap, stacks; not the
    /// program's pages mapped from its file, which grow as more of its code runs
    anon_bytes: u64,
    largest_event: u64,
    show: Duration,
}

impl Sample {
    fn max(self, other: Sample) -> Sample {
        Sample {
            store_bytes: self.store_bytes.max(other.store_bytes),
            store_file_bytes: self.store_file_bytes.max(other.store_file_bytes),
            rss_bytes: self.rss_bytes.max(other.rss_bytes),
            anon_bytes: self.anon_bytes.max(other.anon_bytes),
            largest_event: self.largest_event.max(other.largest_event),
            show: self.show.max(other.show),
        }
    }
}

/// The store under a node.
enum Backing {
    Embedded,
    Etcd(Box<EtcdServer>),
}

struct Soak {
    node: NodeProcess,
    backing: Backing,
    _dir: tempfile::TempDir,
    /// the turn `show` is timed on
    probe: Option<String>,
}

impl Soak {
    fn start(backing: Backing) -> Soak {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("soak.yaml");
        let config_arg = config.display().to_string();
        let node = match &backing {
            Backing::Embedded => {
                std::fs::write(
                    &config,
                    "store:\n  events_keep_seconds: 60\n  history_seconds: 60\n",
                )
                .expect("config");
                NodeProcess::start("soak", dir.path(), &["--config", &config_arg])
            }
            Backing::Etcd(etcd) => {
                std::fs::write(&config, "store:\n  events_keep_seconds: 60\n").expect("config");
                let prefix = format!("/soak-{}", uuid::Uuid::new_v4().simple());
                NodeProcess::start(
                    "soak",
                    dir.path(),
                    &[
                        "--config",
                        &config_arg,
                        "--etcd",
                        &etcd.client_url(),
                        "--prefix",
                        &prefix,
                    ],
                )
            }
        };
        Soak {
            node,
            backing,
            _dir: dir,
            probe: None,
        }
    }

    fn launch(&self, seat: &str, command: &str) -> String {
        let (code, out, err) = self.node.cli(&[
            "launch",
            "--seat",
            seat,
            "--runner",
            "command",
            "--command",
            command,
        ]);
        assert_eq!(code, 0, "{out}{err}\n{}", self.node.log());
        launched_turn(&out)
    }

    /// Waits until every run of `turns` settled or parked.
    async fn until_quiet(&self, turns: &[String]) {
        let mut runs = boxfleet_tests::grpc::runs(&self.node.addr())
            .await
            .expect("connect");
        let deadline = Instant::now() + Duration::from_secs(600);
        for turn in turns {
            loop {
                let got = boxfleet_tests::grpc::get_turn(&mut runs, turn).await;
                let record: serde_json::Value =
                    serde_json::from_str(&got.record_json).unwrap_or_default();
                if got.record_json.is_empty() || record["status"] == "awaiting_clarification" {
                    break;
                }
                assert!(Instant::now() < deadline, "{turn} never settled");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    async fn sample(&self) -> Sample {
        let (store_bytes, store_file_bytes) = match &self.backing {
            Backing::Embedded => {
                let file = std::fs::metadata(self.node.data_dir.join("store/store.redb"))
                    .map_or(0, |m| m.len());
                (file, file)
            }
            Backing::Etcd(etcd) => {
                etcd.store()
                    .await
                    .check_limits()
                    .await
                    .map_or((0, 0), |check| {
                        (
                            check.db_size_in_use.max(0) as u64,
                            check.db_size.max(0) as u64,
                        )
                    })
            }
        };
        let rss_bytes = self
            .node
            .pid()
            .map_or(0, |pid| boxfleet_tests::probe::status_bytes(pid, "VmRSS:"));
        let anon_bytes = self.node.pid().map_or(0, |pid| {
            boxfleet_tests::probe::status_bytes(pid, "RssAnon:")
        });
        let mut runs = boxfleet_tests::grpc::runs(&self.node.addr())
            .await
            .expect("connect");
        let mut events = runs
            .events(pb::EventsRequest {
                from_revision: 0,
                follow: false,
            })
            .await
            .expect("events")
            .into_inner();
        let mut largest_event = 0u64;
        while let Some(Ok(event)) = events.next().await {
            largest_event = largest_event.max(event.json.len() as u64);
        }
        let mut shows = Vec::new();
        if let Some(turn) = &self.probe {
            for _ in 0..5 {
                let at = Instant::now();
                runs.get(pb::GetRequest {
                    turn_id: turn.clone(),
                })
                .await
                .expect("get");
                shows.push(at.elapsed());
            }
        }
        shows.sort();
        Sample {
            store_bytes,
            store_file_bytes,
            rss_bytes,
            anon_bytes,
            largest_event,
            show: shows.get(shows.len() / 2).copied().unwrap_or_default(),
        }
    }
}

/// The seat the `i`th hostile job runs on (one of its own).
fn hostile_seat(i: usize) -> String {
    format!("hostile-{}-{i}", HOSTILE[i % HOSTILE.len()].0)
}

async fn soak(name: &str, backing: Backing, hostile: usize, small: usize) -> [Sample; 3] {
    let mut soak = Soak::start(backing);
    // the start is the node idle with every seat the soak uses held: a seat's actor, lease and
    // mailbox live as long as the node holds it, whatever its runs wrote
    let seats: Vec<String> = (0..hostile)
        .map(hostile_seat)
        .chain((0..20).map(|i| format!("small-{i}")))
        .collect();
    for batch in seats.chunks(10) {
        let warm: Vec<String> = batch
            .iter()
            .map(|seat| soak.launch(seat, "echo warm"))
            .collect();
        soak.until_quiet(&warm).await;
    }
    let start = soak.sample().await;
    let mut peak = start;
    let mut turns = Vec::new();
    for batch in (0..hostile).collect::<Vec<_>>().chunks(HOSTILE.len()) {
        let launched: Vec<String> = batch
            .iter()
            .map(|i| soak.launch(&hostile_seat(*i), HOSTILE[i % HOSTILE.len()].1))
            .collect();
        soak.probe.get_or_insert_with(|| launched[0].clone());
        soak.until_quiet(&launched).await;
        turns.extend(launched);
        peak = peak.max(soak.sample().await);
        println!("  {name}: {} hostile jobs done", turns.len());
    }
    for batch in (0..small).collect::<Vec<_>>().chunks(20) {
        let launched: Vec<String> = batch
            .iter()
            .map(|i| soak.launch(&format!("small-{}", i % 20), "echo one line"))
            .collect();
        soak.until_quiet(&launched).await;
    }
    peak = peak.max(soak.sample().await);
    println!(
        "  {name}: {small} small jobs done; quiet for 300 s: retention, the trim, idle threads"
    );
    // the node's quiet end, sampled every 30 s from 150 s on: retention and the history's
    // compaction are done by 150 s; the blocking pool's idle threads (each with its stack and
    // its cache of freed blocks) and the allocator's trim settle over the minutes after
    tokio::time::sleep(Duration::from_secs(120)).await;
    let mut end = Sample::default();
    for at in [150, 180, 210, 240, 270, 300] {
        tokio::time::sleep(Duration::from_secs(30)).await;
        end = soak.sample().await;
        println!(
            "  {name}: quiet {at} s: store {}, RSS {}, anonymous {}",
            mib(end.store_bytes),
            mib(end.rss_bytes),
            mib(end.anon_bytes)
        );
    }
    soak.node.terminate();
    [start, peak, end]
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn ratio(end: u64, start: u64) -> String {
    if start == 0 {
        return "-".into();
    }
    format!("{:.2}×", end as f64 / start as f64)
}

fn print(name: &str, [start, peak, end]: [Sample; 3]) {
    println!("\n{name}");
    println!(
        "| {:<22} | {:>11} | {:>11} | {:>11} | {:>9} |",
        "", "start", "peak", "end", "end/start"
    );
    println!(
        "|{:-<24}|{:->13}|{:->13}|{:->13}|{:->11}|",
        "", "", "", "", ""
    );
    let row = |label: &str, values: [u64; 3], show: &dyn Fn(u64) -> String| {
        println!(
            "| {:<22} | {:>11} | {:>11} | {:>11} | {:>9} |",
            label,
            show(values[0]),
            show(values[1]),
            show(values[2]),
            ratio(values[2], values[0])
        );
    };
    row(
        "store size (in use)",
        [start.store_bytes, peak.store_bytes, end.store_bytes],
        &mib,
    );
    row(
        "store file",
        [
            start.store_file_bytes,
            peak.store_file_bytes,
            end.store_file_bytes,
        ],
        &mib,
    );
    row(
        "node RSS",
        [start.rss_bytes, peak.rss_bytes, end.rss_bytes],
        &mib,
    );
    row(
        "node RSS, anonymous",
        [start.anon_bytes, peak.anon_bytes, end.anon_bytes],
        &mib,
    );
    row(
        "largest event",
        [start.largest_event, peak.largest_event, end.largest_event],
        &|b| format!("{} KiB", b.div_ceil(1024)),
    );
    let ms = |d: Duration| d.as_micros() as u64;
    row(
        "show (Runs.Get) median",
        [ms(start.show), ms(peak.show), ms(end.show)],
        &|us| format!("{:.1} ms", us as f64 / 1000.0),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let hostile = env_or("SOAK_HOSTILE", 21);
    let small = env_or("SOAK_SMALL", 300);
    println!("soak: {hostile} hostile jobs, then {small} one-line jobs, on each store");
    let stores = std::env::var("SOAK_STORES").unwrap_or_else(|_| "embedded,etcd".into());
    if stores.contains("embedded") {
        let embedded = soak("embedded", Backing::Embedded, hostile, small).await;
        print("embedded store", embedded);
    }
    if stores.contains("etcd") {
        let etcd = EtcdServer::start_with_flags(&[
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=1m",
        ]);
        let on_etcd = soak(
            "etcd (1.5 MiB requests)",
            Backing::Etcd(Box::new(etcd)),
            hostile,
            small,
        )
        .await;
        print("etcd, default --max-request-bytes", on_etcd);
    }
    println!(
        "\nstart: idle after a warm-up job on each seat; peak: the largest sample after a batch; end: every \
         run settled or parked, then 300 s quiet. show: the first hostile turn, start column before it ran."
    );
}
