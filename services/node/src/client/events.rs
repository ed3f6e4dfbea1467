//! `boxfleet events`: the events outbox from a store revision, one line per event, or with
//! `--json` one JSON object per line; with `--follow` it outlives a node that closes the
//! stream and resumes after the last event printed.
//!
//! Layout: [`events`]; [`event_value`], an event's JSON line (also `launch --wait --json`'s);
//! [`event_line`] and [`event_summary`], its line for people (also `show`'s); [`failure_line`].

use boxfleet_cluster::events::kind;
use boxfleet_proto::v1::Event;
use serde_json::{Map, Value};
use tonic::Status;

use super::conn::{POLL_EVERY, STREAM_RETRIES, connect};
use super::records::{EventView, RunFailed, RunStarted};
use super::render::{
    Question, asks_question, cell, count, non_empty, note, one_line, out, tokens_text, truncate,
};
use crate::cli::EventsArgs;

/// Runs `boxfleet events`.
pub(super) async fn events(args: &EventsArgs) -> anyhow::Result<i32> {
    let EventsArgs {
        from,
        follow,
        json,
        conn,
    } = args;
    let (follow, json) = (*follow, *json);
    let node = connect(conn).await?;
    let mut from_revision = *from;
    let mut failures = 0;
    loop {
        let mut stream = match node.open_events(from_revision, follow).await {
            Ok(stream) => {
                failures = 0;
                stream
            }
            Err(failure) if follow && failures < STREAM_RETRIES => {
                failures += 1;
                note(&format!("boxfleet: {failure}; trying again"));
                tokio::time::sleep(POLL_EVERY).await;
                continue;
            }
            Err(failure) => return Err(failure.into()),
        };
        let ended = loop {
            match stream.message().await {
                Ok(Some(event)) => {
                    failures = 0;
                    from_revision = event.revision + 1;
                    let line = if json {
                        event_value(&event).to_string()
                    } else {
                        event_line(&event)
                    };
                    out(&format!("{line}\n"))?;
                }
                Ok(None) => break None,
                Err(status) => break Some(status),
            }
        };
        if !follow {
            return match ended {
                None => Ok(0),
                Some(status) => Err(node.failed("events", status).into()),
            };
        }
        // a follower outlives a node that closed the stream (a restart, a drain): resume after
        // the last event printed
        failures += 1;
        if failures > STREAM_RETRIES {
            let status = ended.unwrap_or_else(|| Status::unavailable("the node closed the stream"));
            return Err(node.failed("events", status).into());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// An event as one JSON object: the event's own JSON with `revision` merged in, and `type`,
/// `id`, `turn_id`, `launch_id` always present. The node's JSON passes through as it came:
/// scripts read the spec's field names, whatever this client knows of them.
pub(super) fn event_value(event: &Event) -> Value {
    let mut object = match serde_json::from_str::<Value>(&event.json) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            let mut object = Map::new();
            object.insert("body".to_owned(), other);
            object
        }
        Err(_) => {
            let mut object = Map::new();
            if !event.json.is_empty() {
                object.insert("raw".to_owned(), Value::String(event.json.clone()));
            }
            object
        }
    };
    for (key, value) in [
        ("type", &event.kind),
        ("id", &event.id),
        ("turn_id", &event.turn_id),
        ("launch_id", &event.launch_id),
        ("seat", &event.seat),
    ] {
        let missing = object
            .get(key)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if missing && (!value.is_empty() || key != "seat") {
            object.insert(key.to_owned(), Value::String(value.clone()));
        }
    }
    object.insert("revision".to_owned(), Value::from(event.revision));
    Value::Object(object)
}

/// `rev  type  turn  launch  summary`, one line.
pub(super) fn event_line(event: &Event) -> String {
    format!(
        "{}  {}  {}  {}  {}",
        event.revision,
        cell(&event.kind),
        cell(&event.turn_id),
        cell(&event.launch_id),
        event_summary(&EventView::from_message(event))
    )
}

/// A few words on what an event says.
pub(super) fn event_summary(event: &EventView) -> String {
    let summary = match event.kind.as_str() {
        kind::RUN_STARTED => {
            let body: RunStarted = event.body_as();
            let mut parts = Vec::new();
            for (label, value) in [
                ("seat", &event.seat),
                ("agent", &body.coding_agent),
                ("task", &body.task),
            ] {
                if !value.is_empty() {
                    parts.push(format!("{label}={value}"));
                }
            }
            parts.join(" ")
        }
        kind::CLARIFICATION_REQUESTED => {
            let question = Question::from_event(event);
            format!("asks {}: {}", cell(&question.audience), question.text)
        }
        kind::PHASE_COMPLETED => {
            let record = event.phase().record;
            let outcome = if record.failed {
                if record.error.is_empty() {
                    "failed".to_owned()
                } else {
                    format!("failed: {}", record.error)
                }
            } else if asks_question(&record) {
                "asked a question".to_owned()
            } else {
                "succeeded".to_owned()
            };
            format!(
                "{outcome}; tokens {}; {}",
                tokens_text(&record),
                count(record.delivered_refs.len(), "ref")
            )
        }
        kind::RUN_FAILED => failure_line(event),
        _ => {
            let mut text = if event.seat.is_empty() {
                String::new()
            } else {
                format!("seat={}", event.seat)
            };
            if event.body.as_object().is_some_and(|b| !b.is_empty()) {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&event.body.to_string());
            }
            text
        }
    };
    truncate(&one_line(&summary), 120)
}

/// A `sandbox_run_failed` event as one line: its reason and detail.
pub(super) fn failure_line(event: &EventView) -> String {
    let body: RunFailed = event.body_as();
    let reason = non_empty(&body.reason, "failed");
    if body.detail.is_empty() {
        format!("run failed ({reason})")
    } else {
        format!("run failed ({reason}): {}", one_line(&body.detail))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{every_kind_of_event, message_of, phase_event, proto_event};
    use super::*;
    use serde_json::json;

    #[test]
    fn json_lines_carry_type_id_ids_and_revision_with_the_body() {
        let event = proto_event(42, &phase_event(false));
        let line = event_value(&event).to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        let back: Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(back["type"], "agent_phase_completed");
        assert_eq!(back["id"], "e1");
        assert_eq!(back["turn_id"], "t1");
        assert_eq!(back["launch_id"], "l1");
        assert_eq!(back["revision"], 42);
        assert_eq!(back["body"]["record"]["output_tokens"], 2);
    }

    #[test]
    fn json_lines_fill_fields_the_event_json_left_out() {
        // `cluster::events::Event` skips an empty launch_id; the proto fields fill the gaps
        let event = Event {
            id: "e2".to_owned(),
            kind: "sandbox_run_failed".to_owned(),
            turn_id: "t9".to_owned(),
            launch_id: String::new(),
            seat: "s".to_owned(),
            revision: 7,
            json: r#"{"id":"e2","type":"sandbox_run_failed","turn_id":"t9","seat":"s","body":{"reason":"launch_failed"}}"#.to_owned(),
        };
        let value = event_value(&event);
        assert_eq!(value["launch_id"], "");
        assert_eq!(value["revision"], 7);
        assert_eq!(value["body"]["reason"], "launch_failed");
        let broken = Event {
            json: "not json".to_owned(),
            ..event
        };
        let value = event_value(&broken);
        assert_eq!(value["type"], "sandbox_run_failed");
        assert_eq!(value["raw"], "not json");
    }

    #[test]
    fn event_lines_are_rev_type_turn_launch_summary() {
        let line = event_line(&proto_event(42, &phase_event(false)));
        assert_eq!(
            line,
            "42  agent_phase_completed  t1  l1  succeeded; tokens input 1, output 2; 2 refs"
        );
        let failed = json!({"id": "e3", "type": "sandbox_run_failed", "turn_id": "t1",
            "seat": "alice", "at": "2026-05-01T10:00:00Z",
            "body": {"reason": "collect_unreachable", "detail": "box gone\nfor good"}});
        assert_eq!(
            event_line(&proto_event(43, &failed)),
            "43  sandbox_run_failed  t1  -  run failed (collect_unreachable): box gone for good"
        );
    }

    #[test]
    fn pin_event_lines_and_json_lines_of_every_kind() {
        let mut lines = String::new();
        let mut json_lines = String::new();
        for (n, event) in every_kind_of_event().iter().enumerate() {
            let message = message_of(event, n as i64 + 10);
            lines.push_str(&event_line(&message));
            lines.push('\n');
            json_lines.push_str(&event_value(&message).to_string());
            json_lines.push('\n');
        }
        let broken = Event {
            id: "e9".to_owned(),
            kind: "sandbox_run_failed".to_owned(),
            turn_id: "t9".to_owned(),
            launch_id: "l9".to_owned(),
            seat: "s".to_owned(),
            revision: 99,
            json: "not json".to_owned(),
        };
        for kind in [
            "sandbox_run_started",
            "sandbox_clarification_requested",
            "agent_phase_completed",
            "sandbox_run_failed",
            "other",
        ] {
            let message = Event {
                kind: kind.to_owned(),
                ..broken.clone()
            };
            lines.push_str(&event_line(&message));
            lines.push('\n');
            json_lines.push_str(&event_value(&message).to_string());
            json_lines.push('\n');
        }
        assert_eq!(lines, PIN_EVENT_LINES);
        assert_eq!(json_lines, PIN_EVENT_JSON_LINES);
    }

    const PIN_EVENT_LINES: &str = "10  sandbox_run_started  t1  l1  seat=alice agent=claude-code task=fix the retry\n11  sandbox_clarification_requested  t1  l1  asks team: Which cap? In seconds.\n12  sandbox_run_failed  t1  l2  run failed (collect_unreachable): box gone for good\n13  sandbox_run_failed  t1  l2  run failed (cancelled)\n14  turn_replied  t1  l2  seat=alice {\"reply\":\"done\",\"succeeded\":true}\n15  seat_moved  t1  -  seat=alice\n99  sandbox_run_started  t9  l9  seat=s\n99  sandbox_clarification_requested  t9  l9  asks -:\n99  agent_phase_completed  t9  l9  succeeded; tokens input 0, output 0; 0 refs\n99  sandbox_run_failed  t9  l9  run failed (failed)\n99  other  t9  l9  seat=s\n";

    const PIN_EVENT_JSON_LINES: &str = "{\"at\":\"2026-05-01T10:00:00Z\",\"body\":{\"coding_agent\":\"claude-code\",\"iteration\":0,\"task\":\"fix the retry\",\"work_item\":\"ENG-7\"},\"id\":\"2988790baac6190203cd3f8771932f2f\",\"launch_id\":\"l1\",\"revision\":10,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_run_started\"}\n{\"at\":\"2026-05-01T10:00:30.250Z\",\"body\":{\"audience\":\"team\",\"audience_fallback\":false,\"audience_handles\":[\"bob\"],\"branch\":\"wip/retry\",\"conversation_key\":null,\"question\":\"Which cap?\\nIn seconds.\",\"work_item\":null},\"id\":\"b44be7cd9783e4c01e9fcef4a0b2d28e\",\"launch_id\":\"l1\",\"revision\":11,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_clarification_requested\"}\n{\"at\":\"2026-05-01T10:03:00Z\",\"body\":{\"detail\":\"box gone\\nfor good\",\"reason\":\"collect_unreachable\",\"reply_went_back\":true,\"sandbox_id\":\"sb-1\"},\"id\":\"5dfc1189844005f33cf2368ae9d2b26e\",\"launch_id\":\"l2\",\"revision\":12,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_run_failed\"}\n{\"at\":\"2026-05-01T10:03:01Z\",\"body\":{\"detail\":\"\",\"reason\":\"cancelled\",\"reply_went_back\":false,\"sandbox_id\":null},\"id\":\"06e144b0451294aa17c7eaa6f2173df2\",\"launch_id\":\"l2\",\"revision\":13,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_run_failed\"}\n{\"at\":\"2026-05-01T10:04:00Z\",\"body\":{\"reply\":\"done\",\"succeeded\":true},\"id\":\"659f1737da7a135f079fb1b77e3451a2\",\"launch_id\":\"l2\",\"revision\":14,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"turn_replied\"}\n{\"at\":\"2026-05-01T10:05:00Z\",\"body\":{},\"id\":\"188d7b8ed7172c1fd3722935140ee503\",\"launch_id\":\"\",\"revision\":15,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"seat_moved\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"sandbox_run_started\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"sandbox_clarification_requested\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"agent_phase_completed\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"sandbox_run_failed\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"other\"}\n";
}
