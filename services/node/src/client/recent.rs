//! `boxfleet runs --recent`: the runs that finished lately, read from the events outbox (the
//! board holds only the runs in flight; a settled run leaves its events for the outbox's
//! retention, `store.events_keep_seconds`). One row per turn: its seat, its last job's outcome
//! (succeeded, failed and why, ended), when, and its task, newest first.

use std::collections::BTreeMap;

use boxfleet_cluster::events::kind;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::conn::Node;
use super::records::{EventView, RunFailed, RunStarted};
use super::render::{asks_question, cell, out, pretty, table, timestamp, truncate};

/// One finished turn, as its events tell it.
#[derive(Debug, Default, Clone, PartialEq)]
struct Finished {
    turn_id: String,
    seat: String,
    task: String,
    coding_agent: String,
    launch_id: String,
    outcome: String,
    at: Option<DateTime<Utc>>,
}

/// Reads the outbox from its start and lists the `limit` newest finished turns.
pub(super) async fn recent(node: &Node, limit: usize, as_json: bool) -> anyhow::Result<i32> {
    let mut stream = node.open_events(0, false).await?;
    let mut events = Vec::new();
    while let Some(message) = stream
        .message()
        .await
        .map_err(|status| node.failed("events", status))?
    {
        events.push(EventView::from_message(&message));
    }
    let finished = finished_runs(&events, limit);
    if as_json {
        let runs: Vec<Value> = finished
            .iter()
            .map(|run| {
                json!({
                    "turn_id": run.turn_id,
                    "seat": run.seat,
                    "launch_id": run.launch_id,
                    "coding_agent": run.coding_agent,
                    "outcome": run.outcome,
                    "finished_at": run.at,
                    "task": run.task,
                })
            })
            .collect();
        out(&format!("{}\n", pretty(&json!({ "recent": runs }))))?;
    } else if finished.is_empty() {
        out("no run finished within the events outbox's retention\n")?;
    } else {
        let rows: Vec<Vec<String>> = finished
            .iter()
            .map(|run| {
                vec![
                    run.turn_id.clone(),
                    truncate(cell(&run.seat), 24),
                    truncate(cell(&run.outcome), 40),
                    run.at
                        .map(|at| timestamp(&at))
                        .unwrap_or_else(|| "-".into()),
                    cell(&run.coding_agent).to_owned(),
                    truncate(cell(&run.task), 32),
                ]
            })
            .collect();
        out(&table(
            &["TURN", "SEAT", "OUTCOME", "FINISHED", "AGENT", "TASK"],
            &rows,
        ))?;
    }
    Ok(super::exit::OK)
}

/// The turns whose last word in `events` is an end (a phase record that asked nothing, a
/// failure, a reply sent back), newest first, at most `limit`.
fn finished_runs(events: &[EventView], limit: usize) -> Vec<Finished> {
    let mut turns: BTreeMap<&str, Finished> = BTreeMap::new();
    let mut open: BTreeMap<&str, bool> = BTreeMap::new();
    for event in events.iter().filter(|e| !e.turn_id.is_empty()) {
        let run = turns.entry(&event.turn_id).or_insert_with(|| Finished {
            turn_id: event.turn_id.clone(),
            ..Finished::default()
        });
        if !event.seat.is_empty() {
            run.seat = event.seat.clone();
        }
        match event.kind.as_str() {
            kind::RUN_STARTED => {
                let body: RunStarted = event.body_as();
                run.task = body.task;
                run.coding_agent = body.coding_agent;
                open.insert(&event.turn_id, true);
            }
            kind::CLARIFICATION_REQUESTED | kind::RUN_ANSWERED => {
                open.insert(&event.turn_id, true);
            }
            kind::PHASE_COMPLETED => {
                let record = event.phase().record;
                if asks_question(&record) && !record.failed {
                    open.insert(&event.turn_id, true);
                    continue;
                }
                run.outcome = if record.failed {
                    match record.reason {
                        Some(reason) => format!("failed ({reason})"),
                        None => match record.exit_code {
                            Some(code) => format!("failed (exit {code})"),
                            None => "failed".to_owned(),
                        },
                    }
                } else {
                    "succeeded".to_owned()
                };
                if run.coding_agent.is_empty() {
                    run.coding_agent = record.coding_agent.clone();
                }
                run.launch_id = event.launch_id.clone();
                run.at = event.at;
                open.insert(&event.turn_id, false);
            }
            kind::RUN_FAILED => {
                let body: RunFailed = event.body_as();
                run.outcome = format!("ended ({})", body.reason);
                run.launch_id = event.launch_id.clone();
                run.at = event.at;
                open.insert(&event.turn_id, false);
            }
            _ => {}
        }
    }
    let mut finished: Vec<Finished> = turns
        .into_values()
        .filter(|run| open.get(run.turn_id.as_str()) == Some(&false))
        .collect();
    finished.sort_by_key(|run| std::cmp::Reverse(run.at));
    finished.truncate(limit);
    finished
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::every_kind_of_event;
    use super::*;

    #[test]
    fn a_turn_is_finished_once_its_last_job_ended_and_not_while_it_waits() {
        let views: Vec<EventView> = every_kind_of_event()
            .into_iter()
            .map(EventView::from)
            .collect();
        let finished = finished_runs(&views, 10);
        assert_eq!(finished.len(), 1, "{finished:#?}");
        assert_eq!(finished[0].turn_id, "t1");
        assert!(finished[0].outcome.starts_with("ended ("), "{finished:#?}");
        // a turn that parked after its start is not finished
        let parked: Vec<EventView> = views
            .iter()
            .filter(|v| v.kind == kind::RUN_STARTED || v.kind == kind::CLARIFICATION_REQUESTED)
            .cloned()
            .collect();
        assert!(finished_runs(&parked, 10).is_empty());
    }
}
