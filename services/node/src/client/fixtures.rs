//! Test fixtures the client's modules share: events, phase records and run records as the
//! node sends them (built from the cluster's own types, serialized as the node serializes them),
//! and the hand-written JSON events the older tests use.

use boxfleet_proto::v1::{Event, GetReply};
use serde_json::{Value, json};

pub(super) fn phase_event(failed: bool) -> Value {
    json!({
        "id": "e1",
        "type": "agent_phase_completed",
        "turn_id": "t1",
        "launch_id": "l1",
        "seat": "alice",
        "at": "2026-05-01T10:00:00Z",
        "body": {
            "phase": "sandbox",
            "record": {
                "response": "Fixed the retry.\nAll tests pass.",
                "delivered_refs": ["fix/retry", "https://git.example.com/acme/api/pull/42"],
                "activity_transcript": ["[tool] Bash: go test ./...", "done"],
                "input_tokens": 1,
                "output_tokens": 2,
                "failed": failed,
                "error": if failed { "exit status 1" } else { "" }
            }
        }
    })
}

pub(super) fn proto_event(revision: i64, json: &Value) -> Event {
    Event {
        id: text(json, "id"),
        kind: text(json, "type"),
        turn_id: text(json, "turn_id"),
        launch_id: text(json, "launch_id"),
        seat: text(json, "seat"),
        revision,
        json: json.to_string(),
    }
}

fn text(json: &Value, key: &str) -> String {
    json[key].as_str().unwrap_or_default().to_owned()
}

pub(super) fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("time")
        .with_timezone(&chrono::Utc)
}

/// A stored event as the node sends it (`grpc::event_json`): the event's JSON and its revision.
pub(super) fn stored_json(event: &boxfleet_cluster::events::Event, revision: i64) -> String {
    let mut value = serde_json::to_value(event).expect("event");
    value["revision"] = json!(revision);
    value.to_string()
}

pub(super) fn message_of(event: &boxfleet_cluster::events::Event, revision: i64) -> Event {
    Event {
        id: event.id.clone(),
        kind: event.kind.clone(),
        turn_id: event.turn_id.clone(),
        launch_id: event.launch_id.clone(),
        seat: event.seat.clone(),
        revision,
        json: stored_json(event, revision),
    }
}

pub(super) fn a_cluster_event(
    kind: &str,
    launch: &str,
    when: &str,
    body: Value,
) -> boxfleet_cluster::events::Event {
    boxfleet_cluster::events::Event::new(
        kind,
        &[launch, when],
        "t1",
        launch,
        "alice",
        at(when),
        body,
    )
}

pub(super) fn a_full_phase_record() -> boxfleet_cluster::phase::PhaseRecord {
    use boxfleet_cluster::phase::{FailureReason, ModelReceipt, PhaseRecord};
    PhaseRecord {
        turn_id: "t1".into(),
        iteration: 1,
        launch_id: "l2".into(),
        started_at: Some(at("2026-05-01T10:00:00.5+00:00")),
        duration_ms: 12_345,
        job_runtime_ms: Some(11_000),
        collect_lag_ms: Some(345),
        input_tokens: 1200,
        output_tokens: 340,
        total_tokens: 1540,
        cache_read_tokens: 1000,
        cache_write_tokens: 0,
        cost_usd: Some(0.0125),
        model: ModelReceipt::new(
            Some("claude-sonnet-4-5"),
            Some("claude-haiku-4-5"),
            Some("stream:assistant"),
        ),
        coding_agent: "claude-code".into(),
        sandbox_id: "sb-1".into(),
        session_id: None,
        response: "half done\n\nmore".into(),
        delivered_refs: vec![],
        activity_transcript: vec![
            "Bash: cargo test\nran 3 tests".into(),
            "Edit: src/lib.rs".into(),
        ],
        delivered_refs_elided: 0,
        activity_transcript_elided_lines: 0,
        activity_transcript_elided_bytes: 0,
        failed: true,
        reason: Some(FailureReason::ModelMismatch),
        error: "model_mismatch: the box ran claude-haiku-4-5".into(),
        exit_code: Some(0),
        notes: Some("Which cap?".into()),
        work_item: Some("ENG-7".into()),
        work_key: None,
        conversation_key: None,
    }
}

pub(super) fn a_full_record() -> boxfleet_cluster::record::RunRecord {
    use boxfleet_cluster::record::{
        Answer, Ending, EndingReason, ModelReceipt, Question as Asked, RunRecord, Status,
    };
    let mut record = RunRecord::launching(
        "t1",
        "l2",
        "alice",
        "claude-code",
        at("2026-05-01T09:59:00Z"),
    );
    record.status = Status::Answered;
    record.placement = Some("container".into());
    record.sandbox_id = Some("sb-1".into());
    record.owner = Some("node-a-1".into());
    record.task = "fix the\nretry".into();
    record.work_item = Some("ENG-7".into());
    record.requester = Some("bob".into());
    record.model = Some(ModelReceipt::new(Some("claude-sonnet-4-5"), None, None));
    record.pause_ttl_seconds = Some(600);
    record.paused_at = Some(at("2026-05-01T10:01:00.123Z"));
    record.updated_at = at("2026-05-01T10:02:00.123456Z");
    record.brief = "Fix the flaky retry test.\n\nKeep the API.".into();
    record.question = Some(Asked {
        text: "Which cap?\nIn seconds.".into(),
        audience: "team".into(),
        audience_handles: vec!["bob".into(), "carol".into()],
        audience_fallback: false,
        asked_at: at("2026-05-01T10:00:30Z"),
        branch: Some("wip/retry".into()),
    });
    record.answer = Some(Answer {
        text: "30\nseconds".into(),
        from: "bob".into(),
        delivery_id: "d1".into(),
        posted_at: at("2026-05-01T10:01:30Z"),
        recorded_at: at("2026-05-01T10:01:31.000000001Z"),
        taken_at: None,
        lost_claims: 0,
        first_lost_at: None,
        attempts: 0,
        first_failed_at: None,
        given_by: None,
        conversation_key: None,
        partition: None,
        for_launch: None,
        route: Default::default(),
        operator: None,
    });
    record.ending = Some(Ending {
        reason: EndingReason::CollectUnreachable,
        detail: "box gone\nfor good".into(),
        decided_at: at("2026-05-01T10:03:00Z"),
        epoch: 3,
        event_id: String::new(),
        reply_goes_back: true,
    });
    record
}

pub(super) fn every_kind_of_event() -> Vec<boxfleet_cluster::events::Event> {
    use boxfleet_cluster::events::kind;
    vec![
        a_cluster_event(
            kind::RUN_STARTED,
            "l1",
            "2026-05-01T10:00:00Z",
            json!({
            "coding_agent": "claude-code", "work_item": "ENG-7", "task": "fix the retry", "iteration": 0}),
        ),
        a_cluster_event(
            kind::CLARIFICATION_REQUESTED,
            "l1",
            "2026-05-01T10:00:30.25Z",
            json!({
            "question": "Which cap?\nIn seconds.", "audience": "team", "audience_handles": ["bob"],
            "audience_fallback": false, "conversation_key": null, "work_item": null, "branch": "wip/retry"}),
        ),
        a_cluster_event(
            kind::RUN_FAILED,
            "l2",
            "2026-05-01T10:03:00Z",
            json!({
            "reason": "collect_unreachable", "detail": "box gone\nfor good", "reply_went_back": true,
            "sandbox_id": "sb-1"}),
        ),
        a_cluster_event(
            kind::RUN_FAILED,
            "l2",
            "2026-05-01T10:03:01Z",
            json!({
            "reason": "cancelled", "detail": "", "reply_went_back": false, "sandbox_id": null}),
        ),
        a_cluster_event(
            "turn_replied",
            "l2",
            "2026-05-01T10:04:00Z",
            json!({"reply": "done", "succeeded": true}),
        ),
        a_cluster_event("seat_moved", "", "2026-05-01T10:05:00Z", json!({})),
    ]
}

pub(super) fn a_full_reply() -> GetReply {
    let phase = a_cluster_event(
        boxfleet_cluster::events::kind::PHASE_COMPLETED,
        "l2",
        "2026-05-01T10:02:30Z",
        json!({"phase": "sandbox", "record": a_full_phase_record().to_value()}),
    );
    let mut events_json: Vec<String> = every_kind_of_event()
        .iter()
        .enumerate()
        .map(|(n, event)| stored_json(event, n as i64 + 10))
        .collect();
    events_json.push("not an event".to_owned());
    GetReply {
        found: true,
        record_json: String::from_utf8(a_full_record().to_json()).expect("utf-8"),
        phase_records_json: vec![stored_json(&phase, 9), "not a record".to_owned()],
        events_json,
    }
}

/// A whole run record's JSON (what the node sends), with `fields` over a fresh launching one.
pub(super) fn run_record_with(fields: Value) -> Value {
    let base = boxfleet_cluster::record::RunRecord::launching(
        "t1",
        "l1",
        "alice",
        "command",
        at("2026-05-01T10:00:00Z"),
    );
    let mut record = serde_json::to_value(base).expect("a record");
    for (key, value) in fields.as_object().expect("fields") {
        record[key] = value.clone();
    }
    record
}

/// An event's JSON as a view (a hand-written event must be whole: id, type, ids, seat, at).
pub(super) fn view_of(event: Value) -> super::records::EventView {
    super::records::EventView::from_json(&event.to_string())
}
