//! The deterministic simulation of the fleet (issue 45; `boxfleet_tests::sim`): CI's seeds,
//! determinism, and the replay of one seed.
//!
//! - `ci_seeds`: `SIM_SEEDS` seeds (500 unless told) from `SIM_FIRST` (1), over two threads;
//!   every invariant holds on every one.
//! - `regression_seeds`: the seeds that found a bug, each kept once its fix landed.
//! - `a_seed_replays_bit_for_bit`: one seed run twice gives the same trace.
//! - `replay`: `SIM_SEED=1234 cargo test -p boxfleet-tests --test t35_simulation -- --exact
//!   replay --nocapture` runs that seed alone and prints its trace (`SIM_TRACE=1` adds the nodes' logs).

use boxfleet_tests::sim::{Outcome, run_seed};

/// Seeds that found a bug, kept whatever range CI runs: what they found is in
/// `docs/simulation.md`.
const REGRESSION_SEEDS: &[u64] = &[
    // the first runs' finds, together: a box unreachable mid-collection collected without its
    // pieces; a refused ending write that ended a finished run without its reply; a recovery
    // pass that stopped the job its own node had just relaunched; a seat left held by nobody
    // acting for it after a refused hand-over
    7, 22, 43, 46, 54, 87,
    // an answered run stuck `resumed`: the built-in engine's settle met a store outage, or
    // the claim's write landed with its reply lost
    41, 95,
    // a seat whose recovery pass failed part way was held and never acted for (an ending kept)
    84,
    // an ending finished by the run's driver, or a relaunch that failed, left the seat's mail
    // waiting (an answer to a re-seed never delivered)
    242, 305,
    // the 10,000-seed bench's finds: an answer that waited behind a busy seat past its pause
    // TTL let go on its first failed resume (its window ran from its recording, not its first
    // failure); a seat taken back by a node whose seat actor still ran from before pumped none
    // of the mail that waited meanwhile (answers to re-seeded runs never delivered)
    1498, 2325, 4550, 5206, 5303, 5604, 7375, 8537, 8732, 8733, 8876,
    // a launch whose opening write landed with its reply lost, or a relaunch whose transition
    // did, left a `launching` row no call of its node was starting (the launch's repeat
    // answered with the job that never started)
    210, 5104,
    // the same launch's ending refused for want of a claim to guard it (a `launching` row has none)
    4226, 6880,
    // seeds 20,001–30,000: a retry the run's driver had scheduled on its own timer (a kept
    // ending, a claim's hand-back) died with the driver when another message, handled
    // meanwhile, found nothing more owed and stopped it: a run left `ending` or `resumed`
    24767, 26380, 29672,
    // seeds 40,001–50,000: the simulation's seat-actor restart ran the recovery pass without
    // the pump a real restart does after it; once it did, seed 16145 (1–20,000) found a check
    // of the run's driver that failed on a refusal, restarting the driver and losing the
    // claim's hand-back queued in its mailbox
    48095, 16145,
    // a launch whose reply was lost while its run asked, was answered and relaunched: its
    // repeat was answered with the relaunch's job (the row's latest), not the one it started
    47760,
];

fn failed(outcome: &Outcome) -> String {
    let tail: Vec<&String> = outcome.trace.iter().rev().take(40).collect();
    let tail: Vec<&String> = tail.into_iter().rev().collect();
    format!(
        "seed {} broke an invariant:\n  {}\nreplay: {}\nthe trace's end:\n{}",
        outcome.seed,
        outcome.violations.join("\n  "),
        outcome.replay(),
        tail.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    )
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number of seeds")),
        Err(_) => default,
    }
}

#[test]
fn ci_seeds() {
    let first = env_u64("SIM_FIRST", 1);
    let count = env_u64("SIM_SEEDS", 500);
    let outcomes = boxfleet_tests::sim::run_seeds(first..first + count, 2);
    let broken: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.violations.is_empty())
        .map(failed)
        .collect();
    let launches: usize = outcomes.iter().map(|o| o.launches).sum();
    let answers: usize = outcomes.iter().map(|o| o.answers).sum();
    let kills: usize = outcomes.iter().map(|o| o.kills).sum();
    println!(
        "{count} seeds: {launches} launches, {answers} answers, {kills} node kills, {} broken",
        broken.len()
    );
    assert!(broken.is_empty(), "{}", broken.join("\n\n"));
}

#[test]
fn regression_seeds() {
    for &seed in REGRESSION_SEEDS {
        let outcome = run_seed(seed);
        assert!(outcome.violations.is_empty(), "{}", failed(&outcome));
    }
}

/// Seeds whose fleets hand seats over, lose nodes and retry under faults: each run twice in
/// this process, whose hash maps are seeded differently each time, so an order that leaks
/// from a hash map's iteration into what the fleet does parts the two (seed 5206 did, through
/// the seats' view, before it kept its seats in order).
const DETERMINISM_SEEDS: &[u64] = &[7, 41, 84, 242, 1498, 5206];

#[test]
fn a_seed_replays_bit_for_bit() {
    let seeds = match std::env::var("SIM_SEED") {
        Ok(_) => vec![env_u64("SIM_SEED", 7)],
        Err(_) => DETERMINISM_SEEDS.to_vec(),
    };
    for seed in seeds {
        let first = run_seed(seed);
        let second = run_seed(seed);
        if first.trace != second.trace {
            let at = first
                .trace
                .iter()
                .zip(&second.trace)
                .position(|(a, b)| a != b)
                .unwrap_or(first.trace.len().min(second.trace.len()));
            panic!(
                "seed {seed} ran two ways; they part at step {at}:\n  first:  {:?}\n  second: {:?}\n\
                 (SIM_CALLS=1 on two replays prints every store call: the first line their logs \
                 differ at names the call made in another order)",
                first.trace.get(at),
                second.trace.get(at)
            );
        }
        assert_eq!(first.digest(), second.digest());
    }
}

#[test]
fn replay() {
    let Ok(seed) = std::env::var("SIM_SEED") else {
        println!("set SIM_SEED=<seed> to replay one seed");
        return;
    };
    let seed: u64 = seed
        .parse()
        .unwrap_or_else(|_| panic!("SIM_SEED={seed:?} is not a seed (a number)"));
    if std::env::var_os("SIM_TRACE").is_some() {
        boxfleet_tests::sim::log_to_stderr();
    }
    let outcome = run_seed(seed);
    for line in &outcome.trace {
        println!("{line}");
    }
    println!(
        "seed {seed}: {} launches, {} answers, {} kills, {} simulated seconds, digest {:016x}",
        outcome.launches,
        outcome.answers,
        outcome.kills,
        outcome.simulated_seconds,
        outcome.digest()
    );
    assert!(outcome.violations.is_empty(), "{}", failed(&outcome));
}
