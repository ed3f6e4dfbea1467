//! `boxfleet runs` and `boxfleet show`: the board of runs in flight (`Runs.Board`), and one
//! run (`Runs.Get`) — its record while it lives, the phase records of its jobs, its events.
//!
//! Layout: [`runs`] and the board's table and JSON; [`show`], [`show_json`] (the node's JSON as
//! it came) and [`render_show`] (the record, phase records and events, read as types).

use boxfleet_proto::v1::{BoardEntry, BoardRequest, GetReply};
use serde_json::{Value, json};

use super::conn::{CALL_TIMEOUT, connect};
use super::events::event_summary;
use super::records::{EventView, run_record};
use super::render::{
    cell, note, out, pretty, render_phase_record, render_record, table, timestamp, truncate,
};
use crate::cli::{RunsArgs, ShowArgs};

/// Runs `boxfleet runs`.
pub(super) async fn runs(args: &RunsArgs) -> anyhow::Result<i32> {
    let audience = args.audience.clone().unwrap_or_default();
    let node = connect(&args.conn).await?;
    if args.recent {
        return super::recent::recent(&node, args.limit, args.json).await;
    }
    let reply = node
        .call(
            "runs",
            CALL_TIMEOUT,
            node.runs().board(BoardRequest {
                audience: audience.clone(),
            }),
        )
        .await?;
    if args.json {
        let runs: Vec<Value> = reply.runs.iter().map(board_entry_json).collect();
        out(&format!("{}\n", pretty(&json!({ "runs": runs }))))?;
    } else if reply.runs.is_empty() {
        if audience.is_empty() {
            out("no runs in flight\n")?;
        } else {
            out(&format!("nothing is waiting on {audience}\n"))?;
        }
    } else {
        out(&board_table(&reply.runs))?;
    }
    Ok(0)
}

fn board_entry_json(entry: &BoardEntry) -> Value {
    json!({
        "turn_id": entry.turn_id,
        "role": entry.role,
        "agent_handle": entry.agent_handle,
        "agent_id": entry.agent_id,
        "coding_agent": entry.coding_agent,
        "sandbox_id": entry.sandbox_id,
        "task": entry.task,
        "status": entry.status,
        "started_at": entry.started_at,
        "question": entry.question,
        "audience": entry.audience,
        "work_item": entry.work_item,
        "owner": entry.owner,
        "paused_at": entry.paused_at,
        "launch_id": entry.launch_id,
        "audience_handles": entry.audience_handles,
    })
}

fn board_table(entries: &[BoardEntry]) -> String {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|entry| {
            vec![
                cell(&entry.turn_id).to_owned(),
                truncate(cell(&entry.agent_handle), 24),
                cell(&entry.status).to_owned(),
                cell(&entry.coding_agent).to_owned(),
                truncate(cell(&entry.sandbox_id), 24),
                truncate(cell(&entry.task), 32),
                truncate(cell(&entry.question), 48),
            ]
        })
        .collect();
    table(
        &["TURN", "SEAT", "STATUS", "AGENT", "BOX", "TASK", "QUESTION"],
        &rows,
    )
}

/// Runs `boxfleet show`.
pub(super) async fn show(args: &ShowArgs) -> anyhow::Result<i32> {
    let ShowArgs { turn, json, conn } = args;
    let node = connect(conn).await?;
    let reply = node.get_or_none(turn).await?;
    let nothing = reply.record_json.is_empty()
        && reply.phase_records_json.is_empty()
        && reply.events_json.is_empty();
    if !reply.found || nothing {
        note(&format!(
            "boxfleet: no run with turn id {turn}: no record, no phase record and no event \
             ('boxfleet runs' lists the runs in flight, 'boxfleet runs --recent' the finished ones)"
        ));
        return Ok(super::exit::NOT_FOUND);
    }
    if *json {
        out(&format!("{}\n", pretty(&show_json(&reply))))?;
    } else {
        out(&render_show(&reply, turn, &node.addr))?;
    }
    Ok(0)
}

/// `show --json`: `{record, phase_records, events}`, each piece the node's JSON as it came (a
/// piece that is not JSON is carried as its text).
fn show_json(reply: &GetReply) -> Value {
    let record = if reply.record_json.is_empty() {
        Value::Null
    } else {
        parse_or_text(&reply.record_json)
    };
    json!({
        "record": record,
        "phase_records": reply.phase_records_json.iter().map(|p| parse_or_text(p)).collect::<Vec<_>>(),
        "events": reply.events_json.iter().map(|e| parse_or_text(e)).collect::<Vec<_>>(),
    })
}

fn render_show(reply: &GetReply, turn: &str, addr: &str) -> String {
    let mut text = String::new();
    if reply.record_json.is_empty() {
        text.push_str(&format!(
            "run {turn} was collected: its record is gone; what its jobs did follows\n"
        ));
    } else {
        match run_record(&reply.record_json) {
            Some(record) => text.push_str(&render_record(&record, addr)),
            // a record this client cannot read: a run with nothing known of it
            None => text.push_str(&format!("run {}\n", cell(""))),
        }
    }
    for phase in &reply.phase_records_json {
        text.push('\n');
        text.push_str(&render_phase_record(&EventView::from_json(phase)));
    }
    if !reply.events_json.is_empty() {
        text.push_str("\nevents\n");
        for event in &reply.events_json {
            let event = EventView::from_json(event);
            text.push_str(&format!(
                "  {}  {}  {}  {}\n",
                cell(&event.at.as_ref().map(timestamp).unwrap_or_default()),
                cell(&event.kind),
                cell(&event.launch_id),
                event_summary(&event)
            ));
        }
    }
    text
}

fn parse_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{a_full_record, a_full_reply, phase_event};
    use super::*;
    use crate::cli::DEFAULT_ADDR;

    #[test]
    fn the_board_truncates_long_cells_for_width() {
        let entry = BoardEntry {
            turn_id: "t1".to_owned(),
            agent_handle: "alice".to_owned(),
            status: "awaiting_clarification".to_owned(),
            coding_agent: "claude-code".to_owned(),
            question: "Should the retry back off exponentially or linearly, and up to what cap \
                       in seconds?"
                .to_owned(),
            ..BoardEntry::default()
        };
        let text = board_table(&[entry]);
        let row = text.lines().nth(1).expect("a row");
        assert!(row.starts_with("t1    alice  awaiting_clarification  claude-code  -    -     "));
        assert!(row.ends_with('…'), "{row}");
        let shown = "Should the retry back off exponentially or line…";
        assert_eq!(shown.chars().count(), 48);
        assert!(row.ends_with(&format!("-     {shown}")), "{row}");
    }

    #[test]
    fn board_json_uses_the_spec_field_names() {
        let value = board_entry_json(&BoardEntry {
            turn_id: "t1".to_owned(),
            audience_handles: vec!["bob".to_owned()],
            ..BoardEntry::default()
        });
        let keys: Vec<&str> = value
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        for key in [
            "turn_id",
            "role",
            "agent_handle",
            "agent_id",
            "coding_agent",
            "sandbox_id",
            "task",
            "status",
            "started_at",
            "question",
            "audience",
            "work_item",
            "owner",
            "paused_at",
            "launch_id",
            "audience_handles",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        assert_eq!(value["audience_handles"], json!(["bob"]));
    }

    #[test]
    fn show_json_is_one_document_of_record_phase_records_and_events() {
        let reply = GetReply {
            found: true,
            record_json: String::new(),
            phase_records_json: vec![phase_event(false).to_string()],
            events_json: vec![r#"{"type":"sandbox_run_started"}"#.to_owned()],
        };
        let value = show_json(&reply);
        assert_eq!(value["record"], Value::Null);
        assert_eq!(
            value["phase_records"][0]["body"]["record"]["input_tokens"],
            1
        );
        assert_eq!(value["events"][0]["type"], "sandbox_run_started");
        let text = render_show(&reply, "t1", DEFAULT_ADDR);
        assert!(text.starts_with("run t1 was collected"), "{text}");
        assert!(text.contains("phase sandbox  turn t1  job l1"), "{text}");
    }

    #[test]
    fn pin_show_of_a_full_record_its_phase_records_and_events() {
        assert_eq!(
            render_show(&a_full_reply(), "t1", "http://10.0.0.2:7400"),
            PIN_SHOW
        );
    }

    #[test]
    fn pin_show_of_a_parked_record() {
        let mut record = a_full_record();
        record.status = boxfleet_cluster::record::Status::AwaitingClarification;
        record.answer = None;
        record.ending = None;
        record.model = None;
        let reply = GetReply {
            found: true,
            record_json: String::from_utf8(record.to_json()).expect("utf-8"),
            ..GetReply::default()
        };
        assert_eq!(render_show(&reply, "t1", DEFAULT_ADDR), PIN_SHOW_PARKED);
    }

    #[test]
    fn pin_show_of_texts_that_are_not_json() {
        let reply = GetReply {
            found: true,
            record_json: "not a record".to_owned(),
            phase_records_json: vec!["not a phase record".to_owned()],
            events_json: vec!["not an event".to_owned()],
        };
        assert_eq!(render_show(&reply, "t1", DEFAULT_ADDR), PIN_SHOW_TEXTS);
        assert_eq!(pretty(&show_json(&reply)), PIN_SHOW_TEXTS_JSON);
    }

    #[test]
    fn pin_show_json_of_a_full_reply() {
        assert_eq!(pretty(&show_json(&a_full_reply())), PIN_SHOW_JSON);
    }

    #[test]
    fn pin_the_board_json() {
        let entry = BoardEntry {
            turn_id: "t1".to_owned(),
            role: "eng".to_owned(),
            agent_handle: "alice".to_owned(),
            agent_id: "a-1".to_owned(),
            coding_agent: "command".to_owned(),
            sandbox_id: "sb-1".to_owned(),
            task: "T".to_owned(),
            status: "awaiting_clarification".to_owned(),
            started_at: "s".to_owned(),
            question: "q".to_owned(),
            audience: "team".to_owned(),
            work_item: "w".to_owned(),
            owner: "o".to_owned(),
            paused_at: "p".to_owned(),
            launch_id: "l1".to_owned(),
            audience_handles: vec!["bob".to_owned()],
        };
        assert_eq!(
            pretty(&json!({"runs": [board_entry_json(&entry)]})),
            PIN_BOARD_JSON
        );
    }

    const PIN_SHOW: &str = "run t1\n  job           l2\n  seat          alice\n  status        answered\n  coding agent  claude-code\n  box           sb-1 (container)\n  owner         node-a-1\n  task          fix the retry\n  work item     ENG-7\n  requester     bob\n  model         requested claude-sonnet-4-5, ran (unknown) (unknown)\n  pause ttl     600 s\n  paused at     2026-05-01T10:01:00.123Z\n  created       2026-05-01T09:59:00Z\n  updated       2026-05-01T10:02:00.123456Z\n  ending        collect_unreachable: box gone for good\n  answer        from bob at 2026-05-01T10:01:31.000000001Z: 30 seconds\n  question\n    Which cap?\n    In seconds.\n  brief\n    Fix the flaky retry test.\n\n    Keep the API.\n\nphase sandbox  turn t1  job l2  seat alice  at 2026-05-01T10:02:30Z\n  outcome       failed\n  coding agent  claude-code\n  box           sb-1\n  work item     ENG-7\n  started       2026-05-01T10:00:00.500+00:00\n  duration      12.3 s\n  job ran       11.0 s, collected 0.3 s after it exited\n  model         requested claude-sonnet-4-5, ran claude-haiku-4-5 (mismatch)\n  tokens        input 1200, output 340, cache read 1000\n  cost          $0.0125\n  delivered     (nothing)\n  error\n    model_mismatch: the box ran claude-haiku-4-5\n  notes\n    Which cap?\n  report\n    half done\n\n    more\n  transcript (3 lines)\n    Bash: cargo test\n    ran 3 tests\n    Edit: src/lib.rs\n\nphase sandbox  turn -  job -\n  outcome    succeeded\n  tokens     input 0, output 0\n  delivered  (nothing)\n  report\n    (no report)\n  transcript (0 lines)\n    (empty)\n\nevents\n  2026-05-01T10:00:00Z  sandbox_run_started  l1  seat=alice agent=claude-code task=fix the retry\n  2026-05-01T10:00:30.250Z  sandbox_clarification_requested  l1  asks team: Which cap? In seconds.\n  2026-05-01T10:03:00Z  sandbox_run_failed  l2  run failed (collect_unreachable): box gone for good\n  2026-05-01T10:03:01Z  sandbox_run_failed  l2  run failed (cancelled)\n  2026-05-01T10:04:00Z  turn_replied  l2  seat=alice {\"reply\":\"done\",\"succeeded\":true}\n  2026-05-01T10:05:00Z  seat_moved  -  seat=alice\n  -  -  -  \n";

    const PIN_SHOW_PARKED: &str = "run t1\n  job           l2\n  seat          alice\n  status        awaiting_clarification\n  coding agent  claude-code\n  box           sb-1 (container)\n  owner         node-a-1\n  task          fix the retry\n  work item     ENG-7\n  requester     bob\n  pause ttl     600 s\n  paused at     2026-05-01T10:01:00.123Z\n  created       2026-05-01T09:59:00Z\n  updated       2026-05-01T10:02:00.123456Z\n  job l2 asks (team: bob, carol):\n    Which cap?\n    In seconds.\n    work pushed to branch wip/retry\n  answer it with:\n    boxfleet answer t1 --launch l2 --text '<your answer>'\n  brief\n    Fix the flaky retry test.\n\n    Keep the API.\n";

    const PIN_SHOW_TEXTS: &str = "run -\n\nphase sandbox  turn -  job -\n  outcome    succeeded\n  tokens     input 0, output 0\n  delivered  (nothing)\n  report\n    (no report)\n  transcript (0 lines)\n    (empty)\n\nevents\n  -  -  -  \n";

    const PIN_SHOW_TEXTS_JSON: &str = "{\n  \"events\": [\n    \"not an event\"\n  ],\n  \"phase_records\": [\n    \"not a phase record\"\n  ],\n  \"record\": \"not a record\"\n}";

    const PIN_SHOW_JSON: &str = "{\n  \"events\": [\n    {\n      \"at\": \"2026-05-01T10:00:00Z\",\n      \"body\": {\n        \"coding_agent\": \"claude-code\",\n        \"iteration\": 0,\n        \"task\": \"fix the retry\",\n        \"work_item\": \"ENG-7\"\n      },\n      \"id\": \"2988790baac6190203cd3f8771932f2f\",\n      \"launch_id\": \"l1\",\n      \"revision\": 10,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_run_started\"\n    },\n    {\n      \"at\": \"2026-05-01T10:00:30.250Z\",\n      \"body\": {\n        \"audience\": \"team\",\n        \"audience_fallback\": false,\n        \"audience_handles\": [\n          \"bob\"\n        ],\n        \"branch\": \"wip/retry\",\n        \"conversation_key\": null,\n        \"question\": \"Which cap?\\nIn seconds.\",\n        \"work_item\": null\n      },\n      \"id\": \"b44be7cd9783e4c01e9fcef4a0b2d28e\",\n      \"launch_id\": \"l1\",\n      \"revision\": 11,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_clarification_requested\"\n    },\n    {\n      \"at\": \"2026-05-01T10:03:00Z\",\n      \"body\": {\n        \"detail\": \"box gone\\nfor good\",\n        \"reason\": \"collect_unreachable\",\n        \"reply_went_back\": true,\n        \"sandbox_id\": \"sb-1\"\n      },\n      \"id\": \"5dfc1189844005f33cf2368ae9d2b26e\",\n      \"launch_id\": \"l2\",\n      \"revision\": 12,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_run_failed\"\n    },\n    {\n      \"at\": \"2026-05-01T10:03:01Z\",\n      \"body\": {\n        \"detail\": \"\",\n        \"reason\": \"cancelled\",\n        \"reply_went_back\": false,\n        \"sandbox_id\": null\n      },\n      \"id\": \"06e144b0451294aa17c7eaa6f2173df2\",\n      \"launch_id\": \"l2\",\n      \"revision\": 13,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_run_failed\"\n    },\n    {\n      \"at\": \"2026-05-01T10:04:00Z\",\n      \"body\": {\n        \"reply\": \"done\",\n        \"succeeded\": true\n      },\n      \"id\": \"659f1737da7a135f079fb1b77e3451a2\",\n      \"launch_id\": \"l2\",\n      \"revision\": 14,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"turn_replied\"\n    },\n    {\n      \"at\": \"2026-05-01T10:05:00Z\",\n      \"body\": {},\n      \"id\": \"188d7b8ed7172c1fd3722935140ee503\",\n      \"revision\": 15,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"seat_moved\"\n    },\n    \"not an event\"\n  ],\n  \"phase_records\": [\n    {\n      \"at\": \"2026-05-01T10:02:30Z\",\n      \"body\": {\n        \"phase\": \"sandbox\",\n        \"record\": {\n          \"activity_transcript\": [\n            \"Bash: cargo test\\nran 3 tests\",\n            \"Edit: src/lib.rs\"\n          ],\n          \"cache_read_tokens\": 1000,\n          \"cache_write_tokens\": 0,\n          \"coding_agent\": \"claude-code\",\n          \"collect_lag_ms\": 345,\n          \"conversation_key\": null,\n          \"cost_usd\": 0.0125,\n          \"delivered_refs\": [],\n          \"duration_ms\": 12345,\n          \"error\": \"model_mismatch: the box ran claude-haiku-4-5\",\n          \"exit_code\": 0,\n          \"failed\": true,\n          \"input_tokens\": 1200,\n          \"iteration\": 1,\n          \"job_runtime_ms\": 11000,\n          \"launch_id\": \"l2\",\n          \"model\": {\n            \"effective\": \"claude-haiku-4-5\",\n            \"requested\": \"claude-sonnet-4-5\",\n            \"source\": \"stream:assistant\",\n            \"status\": \"mismatch\"\n          },\n          \"notes\": \"Which cap?\",\n          \"output_tokens\": 340,\n          \"reason\": \"model_mismatch\",\n          \"response\": \"half done\\n\\nmore\",\n          \"sandbox_id\": \"sb-1\",\n          \"started_at\": \"2026-05-01T10:00:00.500+00:00\",\n          \"total_tokens\": 1540,\n          \"turn_id\": \"t1\",\n          \"work_item\": \"ENG-7\",\n          \"work_key\": null\n        }\n      },\n      \"id\": \"ce118ef6331d200e568d06ba46e6608d\",\n      \"launch_id\": \"l2\",\n      \"revision\": 9,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"agent_phase_completed\"\n    },\n    \"not a record\"\n  ],\n  \"record\": {\n    \"answer\": {\n      \"attempts\": 0,\n      \"delivery_id\": \"d1\",\n      \"from\": \"bob\",\n      \"lost_claims\": 0,\n      \"posted_at\": \"2026-05-01T10:01:30Z\",\n      \"recorded_at\": \"2026-05-01T10:01:31.000000001Z\",\n      \"text\": \"30\\nseconds\"\n    },\n    \"bridge_calls_elided\": 0,\n    \"brief\": \"Fix the flaky retry test.\\n\\nKeep the API.\",\n    \"coding_agent\": \"claude-code\",\n    \"collect_failures\": 0,\n    \"created_at\": \"2026-05-01T09:59:00Z\",\n    \"ending\": {\n      \"decided_at\": \"2026-05-01T10:03:00Z\",\n      \"detail\": \"box gone\\nfor good\",\n      \"epoch\": 3,\n      \"reason\": \"collect_unreachable\",\n      \"reply_goes_back\": true\n    },\n    \"epoch\": 0,\n    \"iteration\": 0,\n    \"launch_id\": \"l2\",\n    \"model\": {\n      \"effective\": null,\n      \"requested\": \"claude-sonnet-4-5\",\n      \"source\": null,\n      \"status\": \"unknown\"\n    },\n    \"owes_answer\": false,\n    \"owner\": \"node-a-1\",\n    \"pause_ttl_seconds\": 600,\n    \"paused_at\": \"2026-05-01T10:01:00.123Z\",\n    \"placement\": \"container\",\n    \"question\": {\n      \"asked_at\": \"2026-05-01T10:00:30Z\",\n      \"audience\": \"team\",\n      \"audience_fallback\": false,\n      \"audience_handles\": [\n        \"bob\",\n        \"carol\"\n      ],\n      \"branch\": \"wip/retry\",\n      \"text\": \"Which cap?\\nIn seconds.\"\n    },\n    \"requester\": \"bob\",\n    \"sandbox_id\": \"sb-1\",\n    \"seat\": \"alice\",\n    \"status\": \"answered\",\n    \"task\": \"fix the\\nretry\",\n    \"turn_id\": \"t1\",\n    \"updated_at\": \"2026-05-01T10:02:00.123456Z\",\n    \"work_item\": \"ENG-7\"\n  }\n}";

    const PIN_BOARD_JSON: &str = "{\n  \"runs\": [\n    {\n      \"agent_handle\": \"alice\",\n      \"agent_id\": \"a-1\",\n      \"audience\": \"team\",\n      \"audience_handles\": [\n        \"bob\"\n      ],\n      \"coding_agent\": \"command\",\n      \"launch_id\": \"l1\",\n      \"owner\": \"o\",\n      \"paused_at\": \"p\",\n      \"question\": \"q\",\n      \"role\": \"eng\",\n      \"sandbox_id\": \"sb-1\",\n      \"started_at\": \"s\",\n      \"status\": \"awaiting_clarification\",\n      \"task\": \"T\",\n      \"turn_id\": \"t1\",\n      \"work_item\": \"w\"\n    }\n  ]\n}";
}
