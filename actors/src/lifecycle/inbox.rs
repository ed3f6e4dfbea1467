//! A seat's mail (the spec's "The inbox"; DESIGN §6 I4): a delivery goes into the seat's
//! durable inbox; while nothing holds the seat, each delivery is offered first to the seat's
//! parked runs on its conversation (a reply posted after the question answers it, recorded
//! before the delivery is acked) and otherwise becomes a turn for the engine, one turn out at
//! a time. The engine's ack spends the delivery; its defer hands it back, keeping its place.
//!
//! Decisions: `transition::answer` (record_answer) and `boxfleet_cluster::inbox`.

use boxfleet_cluster::inbox::{Deferred, Delivery, Enqueued, Message};
use boxfleet_cluster::record::{Answer, Status};
use boxfleet_cluster::runs::{RunError, Versioned};
use std::time::Duration;

use boxfleet_cluster::transition::{DEFAULT_PAUSE_TTL_SECONDS, Fence, Refusal, Transition};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::api::EngineDown;
use super::error::Error;
use super::offers::{ANSWER_RESERVE, AfterFailure, reserve_reached};

/// Which step of an offer failed.
#[derive(Debug, Clone, Copy)]
enum Failed {
    /// which of the seat's runs awaits a reply could not be read
    Lookup,
    /// the answer could not be recorded
    Record,
}

impl Coordinator {
    /// A message into a seat's inbox; the seat is pumped if this node holds it.
    pub async fn deliver(&self, seat: &str, delivery: Delivery) -> Result<Enqueued, Error> {
        let enqueued = self.inbox.enqueue(seat, &delivery).await?;
        self.pump(seat).await;
        Ok(enqueued)
    }

    /// Works the seat's inbox while nothing holds it: each delivery is offered to a parked
    /// run first, and becomes a turn otherwise. One turn at a time is out at the engine.
    pub async fn pump(&self, seat: &str) {
        match self.try_pump(seat).await {
            Ok(()) => {}
            // another node holds the seat, or will: its holder pumps it as it takes it (a
            // stall here would try again after every renew for as long as the seat is away)
            Err(error @ Error::SeatHeldElsewhere { .. }) => {
                info!(seat, node = %self.node, %error, "seat_pump_elsewhere");
            }
            Err(error) => {
                // the inbox stops here; the node's next session renew pumps it again
                self.offers.stall(seat);
                warn!(seat, node = %self.node, %error, "seat_pump_failed");
            }
        }
    }

    /// The seats whose inbox stopped on a failure since the last call, to pump again now (the
    /// session keeper calls it after each renew).
    pub fn stalled_inboxes(&self) -> Vec<String> {
        self.offers.take_stalled()
    }

    async fn try_pump(&self, seat: &str) -> Result<(), Error> {
        let fence = self.seat_fence(seat).await?;
        let _seat = self.seats.seat.lock(seat).await;
        loop {
            if self.seats.has_turn_out(seat) {
                return Ok(());
            }
            let active = self.runs.list_active(seat).await?;
            let all_answered = !active.is_empty()
                && active
                    .iter()
                    .all(|run| run.record.status == boxfleet_cluster::record::Status::Answered);
            // the budget park: a spent seat is not resumed into a refusal — an answer waiting
            // for it and its mail wait, pumped again after each session renew, until the
            // window turns (or a reload raises the cap)
            let hands_out =
                all_answered || (active.is_empty() && self.inbox.next_up(seat).await?.is_some());
            if hands_out && self.budget_parked(seat).await {
                self.offers.stall(seat);
                return Ok(());
            }
            if let Some(first) = active.first() {
                // an answer that waited for the seat is the first thing offered once no other
                // run of it has a job in flight; any other run holding the seat holds its mail
                if all_answered {
                    self.drive_answer(&fence, &first.record.turn_id).await?;
                }
                // an answer naming a run that no longer waits on its question answers nothing:
                // it is spent now rather than held behind the seat's job
                return self.spend_stale_answers(&fence).await;
            }
            // a seat that is not one of the company's agent seats takes no work; its mail is
            // kept for the seat's return (see `retire`)
            if !self.seat_is_agents(seat) {
                return Ok(());
            }
            // a turn the engine deferred keeps its place and its spacing: nothing overtakes it
            if self.seats.cooling(seat) {
                return Ok(());
            }
            let Some(message) = self.inbox.next_up(seat).await? else {
                return Ok(());
            };
            // an answer naming its run is the run's, taken off before the screening
            if let Some(given) = &message.delivery.answer_given {
                self.work_answer_given(&fence, &message, given).await?;
                continue;
            }
            if self.offer_to_parked(&fence, &message).await? {
                continue;
            }
            self.seats.turn_out(seat, message.clone());
            self.dispatch(EngineDown::Turn {
                seat: seat.to_owned(),
                delivery: message.delivery.clone(),
                attempt: message.delivery_count + 1,
            });
            return Ok(());
        }
    }

    /// Offers a delivery to the seat's parked runs: `true` when it was consumed as an answer.
    /// Bounded as `offers` says: the reserve, the attempts per process and the pause TTL, and a
    /// lookup that fails is decided by the seat's awaiting count.
    async fn offer_to_parked(&self, fence: &Fence, message: &Message) -> Result<bool, Error> {
        let Some(conversation) = &message.delivery.conversation_key else {
            return Ok(false);
        };
        let delivery_id = message.delivery.delivery_id.as_str();
        if reserve_reached(message) {
            info!(
                seat = %fence.seat,
                delivery_id,
                delivery_count = message.delivery_count,
                reserve = ANSWER_RESERVE,
                "sandbox_answer_headroom_reserved"
            );
            return Ok(false);
        }
        let listed = match self.runs.list_by_conversation(conversation).await {
            Ok(listed) => listed,
            Err(error) if !self.offers.awaiting(&fence.seat) => {
                // nothing here awaits a reply: an unreadable store must not swallow the message
                warn!(seat = %fence.seat, delivery_id, %error, "sandbox_answer_lookup_failed");
                return Ok(false);
            }
            Err(error) => {
                warn!(seat = %fence.seat, delivery_id, %error, "sandbox_answer_lookup_failed");
                let window = Duration::from_secs(DEFAULT_PAUSE_TTL_SECONDS);
                return self
                    .hand_back_offer(fence, message, window, Failed::Lookup, error.into())
                    .await;
            }
        };
        let mut parked: Vec<Versioned> = listed
            .into_iter()
            .filter(|run| {
                run.record.seat == fence.seat
                    && matches!(
                        run.record.status,
                        Status::AwaitingClarification | Status::Reseed
                    )
            })
            .collect();
        // the most recently parked question answers a reply that names no thread
        parked.sort_by_key(|run| run.record.question.as_ref().map(|q| q.asked_at));
        let Some(run) = parked.pop() else {
            return Ok(false);
        };
        let delivery = &message.delivery;
        // the parked job this reply was matched to, checked again inside the write
        let answer = Answer::of_delivery(
            delivery,
            &run.record.launch_id,
            boxfleet_cluster::record::AnswerRoute::Chat,
            boxfleet_cluster::clock::now(),
        );
        let turn_id = run.record.turn_id.clone();
        // a test failpoint: the store refuses every record of a chat reply
        let recorded = if crate::workers::failpoint_armed("offer-record-fails") {
            Err(RunError::Store(boxfleet_cluster::Error::Unavailable(
                "failpoint offer-record-fails".into(),
            )))
        } else {
            self.runs
                .apply(fence, &turn_id, Transition::RecordAnswer { answer })
                .await
        };
        match recorded {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyRecorded)) => {
                self.offers.settled(delivery_id);
                self.offers.answered(&fence.seat);
                crash::point(crash::CHAT_AFTER_RECORD);
                // recorded before the delivery is acked
                if let Err(error) = self.inbox.ack(fence, message).await {
                    warn!(seat = %fence.seat, %error, "sandbox_answer_ack_failed");
                }
                crash::point(crash::CHAT_AFTER_ACK);
                self.drive_answer(fence, &turn_id).await?;
                Ok(true)
            }
            Err(RunError::Refused(_)) => {
                self.offers.settled(delivery_id);
                Ok(false)
            }
            Err(error) => {
                let ttl = run
                    .record
                    .pause_ttl_seconds
                    .unwrap_or(DEFAULT_PAUSE_TTL_SECONDS);
                let window = Duration::from_secs(ttl);
                self.hand_back_offer(fence, message, window, Failed::Record, error.into())
                    .await
            }
        }
    }

    /// A delivery whose answer could not be recorded or looked up, within its bounds: handed
    /// back by deferral, keeping its place at the head, and the seat's inbox stops until the
    /// node's next renew (`Err`). Past them it is let go to the ordinary route (`Ok(false)`).
    async fn hand_back_offer(
        &self,
        fence: &Fence,
        message: &Message,
        window: Duration,
        failed: Failed,
        error: Error,
    ) -> Result<bool, Error> {
        let (seat, delivery_id) = (fence.seat.as_str(), message.delivery.delivery_id.as_str());
        match self.offers.failed(delivery_id, window) {
            AfterFailure::Exhausted { attempts } => {
                match failed {
                    Failed::Record => {
                        warn!(seat, delivery_id, attempts, %error, "sandbox_answer_record_exhausted")
                    }
                    Failed::Lookup => {
                        warn!(seat, delivery_id, attempts, %error, "sandbox_answer_lookup_exhausted")
                    }
                }
                Ok(false)
            }
            AfterFailure::Again { attempts } => {
                info!(seat, delivery_id, attempts, "sandbox_answer_deferred");
                let _ = self.inbox.defer(fence, message).await;
                Err(error)
            }
        }
    }

    /// The engine worked (or handed back) the turn it was given.
    pub async fn turn_done(
        &self,
        seat: &str,
        delivery_id: &str,
        worked: bool,
    ) -> Result<(), Error> {
        let message = self.seats.turn_back(seat, delivery_id);
        let fence = self.seat_fence(seat).await?;
        if let Some(message) = message {
            if worked {
                self.inbox.ack(&fence, &message).await?;
            } else {
                self.inbox.defer(&fence, &message).await?;
            }
        }
        self.pump(seat).await;
        Ok(())
    }

    /// The engine handed its turn back (Defer): the delivery keeps its place at the head of
    /// the seat's inbox, and goes out again after 1 s doubling to 30 s with each deferral;
    /// past [`boxfleet_cluster::inbox::MAX_DELIVERIES`] it is dead-lettered (announced, and
    /// listed by `boxfleet seats --dead-letters`) and the seat's mail flows on. Returns the
    /// spacing, `None` when it was dead-lettered or was not the seat's turn out.
    pub async fn defer_turn(
        self: &std::sync::Arc<Self>,
        seat: &str,
        delivery_id: &str,
    ) -> Result<Option<Duration>, Error> {
        let Some(message) = self.seats.turn_back(seat, delivery_id) else {
            return Ok(None);
        };
        let fence = self.seat_fence(seat).await?;
        match self.inbox.defer(&fence, &message).await? {
            Deferred::Kept { delivery_count } => {
                let spacing = defer_spacing(delivery_count);
                info!(
                    seat,
                    delivery_id,
                    delivery_count,
                    spacing_ms = spacing.as_millis() as u64,
                    "engine_turn_deferred"
                );
                self.seats.cool(seat, tokio::time::Instant::now() + spacing);
                let coordinator = self.clone();
                let seat = seat.to_owned();
                tokio::spawn(async move {
                    tokio::time::sleep(spacing).await;
                    coordinator.pump(&seat).await;
                });
                Ok(Some(spacing))
            }
            Deferred::DeadLettered => {
                warn!(
                    seat,
                    delivery_id,
                    deliveries = message.delivery_count + 1,
                    "seat_message_dead_lettered"
                );
                self.announce_dead_letter(seat, &message).await;
                self.pump(seat).await;
                Ok(None)
            }
        }
    }
}

/// A deferred turn's spacing: 1 s after its first deferral, doubling to 30 s — in units of
/// `BOXFLEET_DEFER_SPACING_MS` (default 1000), so a test can walk a message to its
/// dead-lettering in seconds.
pub(super) fn defer_spacing(delivery_count: u32) -> Duration {
    let unit = std::env::var("BOXFLEET_DEFER_SPACING_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .unwrap_or(1000);
    spacing_in(delivery_count, Duration::from_millis(unit))
}

fn spacing_in(delivery_count: u32, unit: Duration) -> Duration {
    let doublings = delivery_count.saturating_sub(1).min(5);
    (unit * (1u32 << doublings)).min(unit * 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferred_turn_waits_a_second_doubling_to_thirty() {
        let unit = Duration::from_secs(1);
        let spacings: Vec<u64> = (1..=8).map(|n| spacing_in(n, unit).as_secs()).collect();
        assert_eq!(spacings, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
