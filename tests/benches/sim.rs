//! The simulation's bench (issue 45): `SIM_SEEDS` seeds (10,000 unless told) from `SIM_FIRST`
//! (1) over `SIM_THREADS` threads (2), printing seeds per second, the simulated time they
//! covered beside the wall time they took, and every seed that broke an invariant (with the
//! command that replays it). Goal: 10,000 seeds in under 15 minutes on a 2-core machine, 0
//! violations.
//!
//! `cargo bench -p boxfleet-tests --bench sim`

use std::time::Instant;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
        Err(_) => default,
    }
}

fn main() {
    let first = env_u64("SIM_FIRST", 1);
    let count = env_u64("SIM_SEEDS", 10_000);
    let threads = env_u64("SIM_THREADS", 2) as usize;
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let chunk = 500;
    let mut from = first;
    while from < first + count {
        let to = (from + chunk).min(first + count);
        outcomes.extend(boxfleet_tests::sim::run_seeds(from..to, threads));
        let broken = outcomes.iter().filter(|o| !o.violations.is_empty()).count();
        eprintln!(
            "sim: {} of {count} seeds in {:.0} s, {broken} broken",
            outcomes.len(),
            started.elapsed().as_secs_f64()
        );
        from = to;
    }
    let wall = started.elapsed().as_secs_f64();
    let simulated: u64 = outcomes.iter().map(|o| o.simulated_seconds).sum();
    let launches: usize = outcomes.iter().map(|o| o.launches).sum();
    let answers: usize = outcomes.iter().map(|o| o.answers).sum();
    let kills: usize = outcomes.iter().map(|o| o.kills).sum();
    let broken: Vec<_> = outcomes
        .iter()
        .filter(|o| !o.violations.is_empty())
        .collect();
    println!("simulation: {count} seeds on {threads} threads");
    println!("  wall time           {wall:>10.1} s   (goal: under 900 s)");
    println!("  seeds per second    {:>10.2}", count as f64 / wall);
    println!(
        "  simulated time      {simulated:>10} s   ({:.0}x the wall time)",
        simulated as f64 / wall
    );
    println!("  launches            {launches:>10}");
    println!("  answers             {answers:>10}");
    println!("  node kills          {kills:>10}");
    println!("  seeds broken        {:>10}   (goal: 0)", broken.len());
    for outcome in &broken {
        println!("  seed {}: {}", outcome.seed, outcome.violations.join("; "));
        println!("    replay: {}", outcome.replay());
    }
    if !broken.is_empty() || wall > 900.0 {
        std::process::exit(1);
    }
}
