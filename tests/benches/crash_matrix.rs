//! Bench: the crash matrix (`harness = false`; `cargo test` runs a subset of it and fails on a
//! point that loses, doubles or leaks anything).
//!
//! ```text
//! cargo bench -p boxfleet-tests --bench crash_matrix                 # every point, on etcd
//! CRASH_POINTS=collect.after_publish cargo bench -p boxfleet-tests --bench crash_matrix
//! cargo test  -p boxfleet-tests --bench crash_matrix                 # the subset on etcd, every point embedded
//! CRASH_STORE=embedded cargo bench -p boxfleet-tests --bench crash_matrix  # every point, embedded
//! ```
//!
//! For each crash point of each route the matrix walks (`boxfleet_actors::crash::ROUTES`, plus
//! one pair that also kills the node whose recovery pass takes the run over) it runs one trial
//! (`boxfleet_tests::crash_matrix`) in the point's route's scenario (the answer given at once,
//! by the inbox, by a chat reply; the run re-seeded after its pause TTL; its seat's node
//! drained): three nodes on real etcd, one run that asks, is answered and delivers, the seat's
//! holder SIGKILLed at that point, the fleet left to recover. It prints
//! `point (route, scenario) | outcome | lost | doubled | leaked`, then each finding in full.

use boxfleet_actors::crash::{self, Scenario};
use boxfleet_tests::crash_matrix::{Backing, Verdict, runs_on, trial_in};

/// The points `cargo test` runs on etcd: one per stage of the lifecycle, and the drain's
/// hand-over, which only a fleet has.
const SUBSET: &[&str] = &[
    crash::LAUNCH_AFTER_COMMIT,
    crash::COLLECT_AFTER_PUBLISH,
    crash::ANSWER_AT_ONCE_AFTER_WRITE,
    crash::ENDING_BEFORE_DELETE,
    crash::RELEASE_AFTER_SETTLE,
];

/// Every scenario the matrix walks.
const SCENARIOS: [Scenario; 5] = [
    Scenario::AtOnce,
    Scenario::Inbox,
    Scenario::Chat,
    Scenario::Reseed,
    Scenario::Drain,
];

/// The scenario a point (or the first of several, comma-separated) is walked in: its route's.
fn scenario_of(points: &str) -> Scenario {
    let first = points.split(',').next().unwrap_or_default().trim();
    match crash::route_of(first).map(|route| route.walk) {
        Some(crash::Walk::Matrix(scenario)) => scenario,
        _ => Scenario::AtOnce,
    }
}

/// Every point of every scenario, the recovery pass's armed beside one that leaves it a run
/// to take over.
fn every_point() -> Vec<String> {
    let recovery = [crash::RECOVERY_AFTER_FENCE, crash::RECOVERY_AFTER_REVIVE];
    let mut all: Vec<String> = SCENARIOS
        .iter()
        .flat_map(|scenario| crash::matrix_points(*scenario))
        .filter(|p| !recovery.contains(p))
        .map(|p| p.to_string())
        .collect();
    for point in recovery {
        all.push(format!("{},{point}", crash::COLLECT_AFTER_CLAIM));
    }
    all
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let backing = match std::env::var("CRASH_STORE").as_deref() {
        Ok("embedded") => Some(Backing::Embedded),
        Ok("etcd") => Some(Backing::Etcd),
        _ => None,
    };
    // `cargo bench`: every point on etcd; `cargo test`: the subset on etcd and every point
    // on the embedded store (one node, restarted on it after each crash) but the drain's
    let plan: Vec<(Backing, String)> = match (std::env::var("CRASH_POINTS"), full) {
        (Ok(list), _) => list
            .split(';')
            .map(|p| (backing.unwrap_or(Backing::Etcd), p.to_owned()))
            .collect(),
        (Err(_), true) => every_point()
            .into_iter()
            .map(|p| (backing.unwrap_or(Backing::Etcd), p))
            .collect(),
        (Err(_), false) => {
            let mut plan: Vec<(Backing, String)> = SUBSET
                .iter()
                .map(|p| (Backing::Etcd, p.to_string()))
                .collect();
            plan.extend(every_point().into_iter().map(|p| (Backing::Embedded, p)));
            plan.retain(|(b, _)| backing.is_none_or(|only| only == *b));
            plan
        }
    };
    let plan: Vec<(Backing, String)> = plan
        .into_iter()
        .filter(|(backing, point)| runs_on(scenario_of(point), *backing))
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut verdicts = Vec::new();
    for (n, (backing, point)) in plan.iter().enumerate() {
        let scenario = scenario_of(point);
        let mut verdict = runtime.block_on(trial_in(*backing, scenario, point, n));
        let route = crash::route_of(point.split(',').next().unwrap_or_default())
            .map_or("?", |route| route.name);
        verdict.point = match backing {
            Backing::Embedded => format!("{point} ({route}, {}, embedded)", scenario.name()),
            Backing::Etcd => format!("{point} ({route}, {})", scenario.name()),
        };
        println!(
            "{:<60} {}",
            verdict.point,
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
