//! What the client reads: the JSON texts a node answers with (`GetReply.record_json`,
//! `phase_records_json`, `events_json`, each `Event` message's `json`) read into the
//! workspace's own types — the run record ([`RunRecord`]), the event
//! ([`boxfleet_cluster::events::Event`]), the phase record ([`PhaseRecord`]) — and, for the
//! event bodies that have no type of their own, one small struct per kind holding the fields
//! the client prints (their writers are in `boxfleet_cluster::transition`).
//!
//! A text that does not read is no error: it is shown as the little it says (an empty
//! [`EventView`], a run with no fields), as the client always showed it. `--json` output never
//! passes through these types: it prints the node's own JSON (`show::show_json`,
//! `events::event_value`).
//!
//! Layout: [`run_record`]; [`EventView`] and its typed bodies; [`Phase`], the phase record with
//! what its event adds.

use boxfleet_cluster::events::Event;
use boxfleet_cluster::phase::PhaseRecord;
use boxfleet_cluster::record::RunRecord;
use boxfleet_proto::v1 as pb;
use chrono::{DateTime, Utc};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A run record's JSON (`GetReply.record_json`); `None` for a text that is not one.
pub(super) fn run_record(text: &str) -> Option<RunRecord> {
    serde_json::from_str(text).ok()
}

/// One event as the client prints it: the fields of the [`Event`] the node wrote. An event
/// whose JSON does not read keeps only what its gRPC message says beside it (kind, ids, seat):
/// no time and no body.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct EventView {
    /// the spec's event name (`Event::kind`, `type` in JSON)
    pub(super) kind: String,
    pub(super) turn_id: String,
    pub(super) launch_id: String,
    pub(super) seat: String,
    /// when it was announced; `None` when its JSON did not read
    pub(super) at: Option<DateTime<Utc>>,
    /// the event's own fields, in the spec's names; `Null` when its JSON did not read
    pub(super) body: Value,
}

impl From<Event> for EventView {
    fn from(event: Event) -> Self {
        Self {
            kind: event.kind,
            turn_id: event.turn_id,
            launch_id: event.launch_id,
            seat: event.seat,
            at: Some(event.at),
            body: event.body,
        }
    }
}

impl EventView {
    /// A stored event's JSON, as `show` gets it; a text that is not an event is an empty view.
    pub(super) fn from_json(text: &str) -> Self {
        serde_json::from_str::<Event>(text)
            .map(Self::from)
            .unwrap_or_default()
    }

    /// An event of the `Runs.Events` stream: its JSON, each envelope field its JSON leaves
    /// empty (or all, when the JSON does not read) taken from the message itself.
    pub(super) fn from_message(message: &pb::Event) -> Self {
        let mut view = Self::from_json(&message.json);
        for (field, own) in [
            (&mut view.kind, &message.kind),
            (&mut view.turn_id, &message.turn_id),
            (&mut view.launch_id, &message.launch_id),
            (&mut view.seat, &message.seat),
        ] {
            if field.is_empty() {
                own.clone_into(field);
            }
        }
        view
    }

    /// The body read as `T`; a body that does not read as one is `T`'s default.
    pub(super) fn body_as<T: DeserializeOwned + Default>(&self) -> T {
        T::deserialize(&self.body).unwrap_or_default()
    }

    /// The phase record an `agent_phase_completed` event carries; an empty one when the body
    /// holds none that reads.
    pub(super) fn phase(&self) -> Phase {
        let body: PhaseBody = self.body_as();
        Phase {
            name: body.phase,
            record: PhaseRecord::from_event_body(&self.body).unwrap_or_default(),
            has_duration: body.record.duration_ms.is_some(),
            has_model: body.record.model.is_some(),
        }
    }
}

/// A job's phase record and what the event that carried it adds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Phase {
    /// the phase (`body.phase`); empty when the body names none
    pub(super) name: String,
    pub(super) record: PhaseRecord,
    /// whether the record's JSON holds a `duration_ms` and a `model`: the type reads a missing
    /// one as 0 or an empty receipt, and a row is printed only for a field the record holds
    pub(super) has_duration: bool,
    pub(super) has_model: bool,
}

/// The part of an `agent_phase_completed` body that [`PhaseRecord`] does not hold.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PhaseBody {
    phase: String,
    record: RecordHolds,
}

/// Which of the phase record's fields its JSON holds (present and not `null`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RecordHolds {
    duration_ms: Option<IgnoredAny>,
    model: Option<IgnoredAny>,
}

/// A `sandbox_run_started` body: what the job runs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct RunStarted {
    #[serde(deserialize_with = "text")]
    pub(super) coding_agent: String,
    #[serde(deserialize_with = "text")]
    pub(super) task: String,
}

/// A `sandbox_run_failed` body: why the run ended as a loss.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct RunFailed {
    /// the ending's reason (`record::EndingReason`, as its word)
    #[serde(deserialize_with = "text")]
    pub(super) reason: String,
    #[serde(deserialize_with = "text")]
    pub(super) detail: String,
}

/// A `sandbox_clarification_requested` body: the question a job parked on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct ClarificationRequested {
    /// the question's text
    #[serde(deserialize_with = "text")]
    pub(super) question: String,
    /// the audience as the agent wrote it
    #[serde(deserialize_with = "text")]
    pub(super) audience: String,
    /// the seats it is put to
    pub(super) audience_handles: Vec<String>,
    /// the branch the work was pushed to, when known
    pub(super) branch: Option<String>,
}

/// A string field that may be `null`: empty.
fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_whose_json_does_not_read_keeps_its_envelope() {
        let message = pb::Event {
            id: "e1".to_owned(),
            kind: "sandbox_run_failed".to_owned(),
            turn_id: "t1".to_owned(),
            launch_id: "l1".to_owned(),
            seat: "s".to_owned(),
            revision: 3,
            json: "not json".to_owned(),
        };
        let view = EventView::from_message(&message);
        assert_eq!(
            (
                view.kind.as_str(),
                view.turn_id.as_str(),
                view.seat.as_str()
            ),
            ("sandbox_run_failed", "t1", "s")
        );
        assert_eq!((view.at, &view.body), (None, &Value::Null));
        assert_eq!(view.body_as::<RunFailed>(), RunFailed::default());
        assert_eq!(EventView::from_json("not json"), EventView::default());
    }

    #[test]
    fn bodies_read_their_fields_and_tolerate_nulls() {
        let view = EventView {
            body: json!({"reason": "cancelled", "detail": null, "reply_went_back": false}),
            ..EventView::default()
        };
        let failed: RunFailed = view.body_as();
        assert_eq!(
            (failed.reason.as_str(), failed.detail.as_str()),
            ("cancelled", "")
        );
        let view = EventView {
            body: json!({"question": "Which?", "audience": "team", "branch": null,
                "audience_handles": ["bob"], "work_item": null}),
            ..EventView::default()
        };
        let asked: ClarificationRequested = view.body_as();
        assert_eq!(asked.question, "Which?");
        assert_eq!(asked.audience_handles, ["bob"]);
        assert_eq!(asked.branch, None);
    }

    #[test]
    fn a_phase_says_which_fields_its_record_holds() {
        let view = EventView {
            body: json!({"phase": "sandbox", "record": {"duration_ms": 5, "failed": true}}),
            ..EventView::default()
        };
        let phase = view.phase();
        assert_eq!(phase.name, "sandbox");
        assert!(phase.record.failed);
        assert!(phase.has_duration);
        assert!(!phase.has_model);
        assert_eq!(EventView::default().phase(), Phase::default());
    }
}
