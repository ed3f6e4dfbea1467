//! Bench: the crash matrix (`harness = false`; `cargo test` runs a subset of it and fails on a
//! point that loses, doubles or leaks anything).
//!
//! ```text
//! cargo bench -p boxfleet-tests --bench crash_matrix                 # every point, on etcd
//! CRASH_POINTS=collect.after_publish cargo bench -p boxfleet-tests --bench crash_matrix
//! cargo test  -p boxfleet-tests --bench crash_matrix                 # the subset the suite runs
//! ```
//!
//! For each crash point (`boxfleet_actors::crash::ALL`, plus one pair that also kills the node
//! whose recovery pass takes the run over) it runs one trial (`boxfleet_tests::crash_matrix`):
//! three nodes on real etcd, one run that asks, is answered and delivers, the seat's holder
//! SIGKILLed at that point, the fleet left to recover. It prints
//! `point | outcome | lost | doubled | leaked`, then each finding in full.

use boxfleet_actors::crash;
use boxfleet_tests::crash_matrix::{Verdict, trial};

/// The points `cargo test` runs: one per stage of the lifecycle.
const SUBSET: &[&str] = &[
    crash::LAUNCH_AFTER_COMMIT,
    crash::COLLECT_AFTER_PUBLISH,
    crash::ANSWER_AFTER_CLAIM,
    crash::ENDING_BEFORE_DELETE,
];

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let points: Vec<String> = match std::env::var("CRASH_POINTS") {
        Ok(list) => list.split(';').map(str::to_owned).collect(),
        Err(_) if full => {
            // the recovery pass meets its point only when a run is there to recover: it is
            // armed beside a point that leaves one
            let recovery = [crash::RECOVERY_AFTER_FENCE, crash::RECOVERY_AFTER_REVIVE];
            let mut all: Vec<String> = crash::ALL
                .iter()
                .filter(|p| !recovery.contains(p))
                .map(|p| p.to_string())
                .collect();
            for point in recovery {
                all.push(format!("{},{point}", crash::COLLECT_AFTER_CLAIM));
            }
            all
        }
        Err(_) => SUBSET.iter().map(|p| p.to_string()).collect(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut verdicts = Vec::new();
    for (n, point) in points.iter().enumerate() {
        let verdict = runtime.block_on(trial(point, n));
        println!(
            "{:<48} {}",
            point,
            if verdict.clean() { "clean" } else { "FINDINGS" }
        );
        verdicts.push(verdict);
    }
    print_table(&verdicts);
    if verdicts.iter().any(|v| !v.clean()) {
        std::process::exit(1);
    }
}

fn print_table(verdicts: &[Verdict]) {
    println!("\n| point | fired | outcome | lost | doubled | leaked |\n|---|---|---|---|---|---|");
    for v in verdicts {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            v.point,
            if v.fired { "yes" } else { "no" },
            v.outcome,
            v.lost.iter().filter(|l| !l.starts_with("(note)")).count(),
            v.doubled.len(),
            v.leaked.len()
        );
    }
    for v in verdicts.iter().filter(|v| !v.clean()) {
        println!("\n{}:", v.point);
        if !v.fired {
            println!("  the point was never reached");
        }
        for line in v.lost.iter().chain(&v.doubled).chain(&v.leaked) {
            println!("  {line}");
        }
    }
}
