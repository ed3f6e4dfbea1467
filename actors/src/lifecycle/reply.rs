//! What the engine's side announces (DESIGN §8.2, §8.3): a turn's reply — what the resumed
//! turn answered, the turn's `turn_replied` event, written with its run's ending decision — and a
//! message dead-lettered after its deferrals. Each event's id is derived from what it is about,
//! so an engine's settle repeated after a crash — or the built-in engine's publish followed by
//! its settle — writes it once.

use boxfleet_cluster::events::{self, Event};
use boxfleet_cluster::inbox::Message;
use boxfleet_cluster::store::{Op, Txn};
use tracing::warn;

use super::Coordinator;
use super::limits::MAX_REPORT_BYTES;
use super::text::{cut, turn_id_for_delivery};

/// How much of a dead-lettered message its announcement quotes.
const DEAD_LETTER_TEXT_BYTES: usize = 2048;

impl Coordinator {
    /// `reply` as the turn's reply event (`turn_replied`); `succeeded` is the job's own verdict
    /// when the engine knows it. It rides the run's ending decision, so a run never ends
    /// without it (it used to be published on its own first, and a write the store refused
    /// lost it while the run ended anyway); its id is derived from the job, so a settle
    /// repeated after a crash announces it once.
    pub(super) fn reply_event(
        turn_id: &str,
        launch_id: &str,
        seat: &str,
        reply: &str,
        succeeded: Option<bool>,
    ) -> Event {
        let now = boxfleet_cluster::clock::now();
        let reply = cut(&boxfleet_redact::redact(reply), MAX_REPORT_BYTES);
        let mut body = serde_json::json!({ "reply": reply });
        if let Some(succeeded) = succeeded {
            body["succeeded"] = serde_json::Value::Bool(succeeded);
        }
        Event::new(
            events::kind::TURN_REPLIED,
            &[turn_id, launch_id],
            turn_id,
            launch_id,
            seat,
            now,
            body,
        )
    }

    /// Announces that `message` was dead-lettered from `seat`'s inbox.
    pub(super) async fn announce_dead_letter(&self, seat: &str, message: &Message) {
        let delivery = &message.delivery;
        let turn_id = turn_id_for_delivery(seat, &delivery.delivery_id);
        let body = serde_json::json!({
            "delivery_id": delivery.delivery_id,
            "from": delivery.from,
            "deliveries": message.delivery_count + 1,
            "text": cut(&boxfleet_redact::redact(&delivery.text), DEAD_LETTER_TEXT_BYTES),
        });
        let event = Event::new(
            events::kind::MESSAGE_DEAD_LETTERED,
            &[seat, &delivery.delivery_id],
            &turn_id,
            "",
            seat,
            boxfleet_cluster::clock::now(),
            body,
        );
        self.publish_once(event).await;
    }

    /// Announces a reload's outcome for the document whose digest begins `document`: once
    /// per node incarnation, document and outcome, on the node's own turn id
    /// (`config-{node}`), with no seat.
    pub async fn announce_config(
        &self,
        applied: bool,
        document: &str,
        summary: &str,
        problems: &[String],
    ) {
        let kind = if applied {
            events::kind::CONFIG_APPLIED
        } else {
            events::kind::CONFIG_REFUSED
        };
        let turn_id = format!("config-{}", self.node);
        let body = serde_json::json!({
            "node": self.node,
            "document": document,
            "summary": summary,
            "problems": problems,
        });
        let event = Event::new(
            kind,
            &[&self.incarnation, document],
            &turn_id,
            "",
            "",
            boxfleet_cluster::clock::now(),
            body,
        );
        self.publish_once(event).await;
    }

    /// Writes `event` unless one with its id exists; a failure is logged, never fatal.
    pub(super) async fn publish_once(&self, event: Event) {
        let lease = match self
            .announcements
            .lease(self.store.as_ref(), event.at)
            .await
        {
            Ok(lease) => lease,
            Err(error) => {
                warn!(kind = %event.kind, %error, "event_not_published");
                return;
            }
        };
        let budget = self
            .store
            .max_request_bytes()
            .saturating_sub(events::REQUEST_OVERHEAD_BYTES);
        let (compare, puts) = events::create(&self.keys, &event, lease, budget);
        let txn = Txn::new()
            .when([compare])
            .and_then(puts)
            .or_else([Op::get(self.keys.event(&event.id))]);
        if let Err(error) = self.store.txn(txn).await {
            warn!(kind = %event.kind, %error, "event_not_published");
        }
    }
}
