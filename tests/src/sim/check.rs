//! The invariants checked once a seed's fleet has settled (the store checks its own as every
//! write lands: no write under a stale epoch, no two incarnations acting for one seat in one
//! epoch). Each is the spec's promise as a client sees it, read from the events outbox and
//! from what the boxes ran:
//!
//! - every acknowledged launch ended (a reply or a failure), and ended once: at most one
//!   `turn_replied`, one `sandbox_run_failed` and one first job (`sandbox_run_started` of
//!   iteration 0) per turn;
//! - every acknowledged answer was taken by its run (a `sandbox_run_answered`) unless the run
//!   failed first; an answer became `resumed` at most once, and a resumed answer reached a job
//!   (`BOXFLEET_ANSWER`) unless the run failed;
//! - every job's `command.sh` is its launch's command — never a question or an answer;
//! - a run that neither failed nor was meant to fail replied with its delivery, and a reply
//!   that says it succeeded carries it;
//! - no box and no run outlive the fleet's settling (checked by the settling itself).

use std::collections::BTreeMap;

use boxfleet_cluster::events::{Event, kind};

use super::Sim;

/// What is broken at the end of a settled seed; empty when every invariant holds.
pub(super) fn at_end(sim: &Sim) -> Vec<String> {
    let events = events(sim);
    let mut violations = Vec::new();
    let plans = sim.plans.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let ran_with_answer = sim
        .ran_with_answer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut by_turn: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for event in &events {
        by_turn
            .entry(event.turn_id.as_str())
            .or_default()
            .push(event);
    }
    for (turn, acknowledged) in &sim.launched {
        let before = violations.len();
        check_turn(turn, acknowledged, &by_turn, &plans, &mut violations);
        if violations.len() > before {
            violations.push(format!("  {turn}'s events: {}", story(&by_turn, turn)));
        }
    }
    check_answers(sim, &by_turn, &ran_with_answer, &mut violations);
    check_commands(sim, &plans, &mut violations);
    violations
}

/// A turn's events in order, each with its job and what it says.
fn story(by_turn: &BTreeMap<&str, Vec<&Event>>, turn: &str) -> String {
    let mut events: Vec<&&Event> = by_turn
        .get(turn)
        .map(|e| e.iter().collect())
        .unwrap_or_default();
    events.sort_by_key(|e| e.at);
    events
        .iter()
        .map(|e| {
            let detail: Vec<String> = ["iteration", "reason", "became", "succeeded", "route"]
                .iter()
                .filter_map(|field| {
                    let value = &e.body[*field];
                    (!value.is_null()).then(|| format!("{field}={value}"))
                })
                .collect();
            format!(
                "{}@{} [{}] {}",
                e.kind,
                e.at.format("%M:%S%.3f"),
                e.launch_id
                    .trim_start_matches("launch-0000000000000000000000000000"),
                detail.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// One run of a turn: its events from its first job (`sandbox_run_started` of iteration 0)
/// to the next run's. A launch refused after its box started (`launch_failed`) is announced
/// and ended; the client's retry of the turn is a run of its own.
fn runs_of<'a>(turn_events: &[&'a Event]) -> Vec<Vec<&'a Event>> {
    let mut runs: Vec<Vec<&Event>> = Vec::new();
    for event in turn_events {
        let first_job = event.kind == kind::RUN_STARTED && event.body["iteration"] == 0;
        if first_job || runs.is_empty() {
            runs.push(Vec::new());
        }
        if let Some(run) = runs.last_mut() {
            run.push(event);
        }
    }
    runs
}

fn check_turn(
    turn: &str,
    acknowledged: &str,
    by_turn: &BTreeMap<&str, Vec<&Event>>,
    plans: &BTreeMap<String, super::Plan>,
    violations: &mut Vec<String>,
) {
    let empty = Vec::new();
    let turn_events = by_turn.get(turn).unwrap_or(&empty);
    let runs = runs_of(turn_events);
    for run in &runs {
        let count = |wanted: &str| run.iter().filter(|e| e.kind == wanted).count();
        let (replies, failures) = (count(kind::TURN_REPLIED), count(kind::RUN_FAILED));
        let first = run.first().map_or("", |e| e.launch_id.as_str());
        if replies > 1 {
            violations.push(format!(
                "{turn} ({first}): {replies} replies (turn_replied) for one run"
            ));
        }
        if failures > 1 {
            violations.push(format!(
                "{turn} ({first}): {failures} sandbox_run_failed for one run"
            ));
        }
        if replies + failures == 0 {
            violations.push(format!(
                "{turn} ({first}): a run that never ended (no reply, no failure)"
            ));
        }
        let resumed = run
            .iter()
            .filter(|e| e.kind == kind::RUN_ANSWERED && e.body["became"] == "resumed")
            .count();
        if resumed > 1 {
            violations.push(format!(
                "{turn} ({first}): {resumed} answers became resumed"
            ));
        }
    }
    let Some(run) = runs
        .iter()
        .find(|run| run.first().is_some_and(|e| e.launch_id == acknowledged))
    else {
        violations.push(format!(
            "{turn}: the launch acknowledged ({acknowledged}) started no run"
        ));
        return;
    };
    let plan = &plans[turn];
    let failures = run.iter().filter(|e| e.kind == kind::RUN_FAILED).count();
    let reply = run.iter().find(|e| e.kind == kind::TURN_REPLIED);
    let succeeded = reply.is_some_and(|e| e.body["succeeded"] == true);
    let delivered = reply.is_some_and(|e| {
        e.body["reply"]
            .as_str()
            .is_some_and(|text| text.contains(&format!("Delivered: fix/{turn}")))
    });
    if succeeded && !delivered {
        violations.push(format!("{turn}: replied succeeded without its delivery"));
    }
    if succeeded && plan.fails && !plan.asks {
        violations.push(format!("{turn}: a job meant to fail replied succeeded"));
    }
    if failures == 0 && !plan.fails && !succeeded {
        violations.push(format!(
            "{turn}: no failure, yet no delivered reply (reply {:?})",
            reply.map(|e| e.body.to_string())
        ));
    }
}

fn check_answers(
    sim: &Sim,
    by_turn: &BTreeMap<&str, Vec<&Event>>,
    ran_with_answer: &[(String, String, String)],
    violations: &mut Vec<String>,
) {
    for ((turn, launch), text) in &sim.answered {
        let empty = Vec::new();
        let turn_events = by_turn.get(turn.as_str()).unwrap_or(&empty);
        let failed = turn_events.iter().any(|e| e.kind == kind::RUN_FAILED);
        let taken = turn_events
            .iter()
            .any(|e| e.kind == kind::RUN_ANSWERED && &e.launch_id == launch);
        if !taken && !failed {
            violations.push(format!(
                "{turn}/{launch}: the answer was acknowledged and its run never took it"
            ));
        }
        let reached = ran_with_answer
            .iter()
            .any(|(ran_turn, _, answer)| ran_turn == turn && answer == text);
        let resumed = turn_events.iter().any(|e| {
            e.kind == kind::RUN_ANSWERED && &e.launch_id == launch && e.body["became"] == "resumed"
        });
        if resumed && !reached && !failed {
            violations.push(format!(
                "{turn}/{launch}: the answer became resumed and no job ran with it"
            ));
        }
    }
}

fn check_commands(sim: &Sim, plans: &BTreeMap<String, super::Plan>, violations: &mut Vec<String>) {
    let seen = sim.shared.seen.lock().unwrap_or_else(|e| e.into_inner());
    for (turn, launch, body) in &seen.commands {
        let Some(plan) = plans.get(turn) else {
            violations.push(format!("{launch}: a job of no launched turn ({turn:?})"));
            continue;
        };
        if body.trim() != plan.command {
            violations.push(format!(
                "{turn}/{launch}: command.sh held {body:?}, not the launch's command"
            ));
        }
    }
}

/// Every event in the outbox, in the order the store took them.
fn events(sim: &Sim) -> Vec<Event> {
    let prefix = sim.shared.keys.events();
    let mut kvs = sim.shared.store.snapshot(&prefix);
    kvs.sort_by_key(|kv| kv.create_revision);
    kvs.iter()
        .filter_map(|kv| serde_json::from_slice::<Event>(&kv.value).ok())
        .collect()
}
