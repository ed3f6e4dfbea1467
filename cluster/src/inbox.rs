//! The seat inbox: a durable, ordered mailbox under `seats/{seat}/inbox/{seq}`.
//!
//! - enqueue: appends under the seat's sequence counter (a CAS), dropping a delivery whose id
//!   is already queued (same-id dedupe) or already worked (the completion ledger);
//! - head: the oldest message;
//! - ack: deletes the message and records it worked in the ledger, in one fenced txn;
//! - defer: hands a message back keeping its place, counting the delivery; past
//!   [`MAX_DELIVERIES`] it moves to the seat's dead letters.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ledger;
use crate::retention::Retention;
use crate::seat::fence_compare;
use crate::store::{Compare, CompareOp, KeyValue, Op, OpResult, Store, Txn};
use crate::transition::Fence;
use crate::{Error, Keys, keys::check_id};

/// Deliveries of one message before it is dead-lettered.
pub const MAX_DELIVERIES: u32 = 25;
/// How many times an enqueue retries a lost race on the sequence counter.
const MAX_ENQUEUE_ATTEMPTS: usize = 16;

/// A message for a seat: a chat message, a notice, a reply handed back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub delivery_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    pub from: String,
    pub text: String,
    /// the envelope's own post time (a chat vendor's post time)
    pub posted_at: DateTime<Utc>,
    /// `sandbox_answer_given`: an answer naming its run (answer_run), addressed to the run
    /// rather than to the seat — taken off the inbox before its screening, never a turn
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_given: Option<Box<AnswerGiven>>,
}

/// An answer given by naming a run and the question it answers (the spec's
/// `sandbox_answer_given`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerGiven {
    pub turn_id: String,
    /// the job the run held when it asked (off the row answer_run checked): the run is resumed
    /// with the answer only while it still waits on that question
    pub launch_id: String,
    /// the admin who gave it on the person's behalf (the person is `from`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_by: Option<String>,
    /// who answered as the chart names them, and the credential they came through
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<crate::record::Operator>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    delivery: Delivery,
    delivery_count: u32,
    enqueued_at: DateTime<Utc>,
}

/// A queued message as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub seq: u64,
    pub delivery: Delivery,
    /// how many times it was handed out and handed back
    pub delivery_count: u32,
    pub enqueued_at: DateTime<Utc>,
    pub mod_revision: i64,
}

/// What an enqueue did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Queued {
        seq: u64,
    },
    /// a delivery with this id is already queued
    Duplicate,
    /// a delivery with this id was already worked
    AlreadyWorked,
}

/// What a defer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferred {
    /// back at its place, with this many deliveries spent
    Kept { delivery_count: u32 },
    /// past the bound: moved to the dead letters
    DeadLettered,
}

/// Why an ack or defer did not land.
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    #[error("sandbox_seat_not_held: seat {seat} is not held under epoch {epoch}")]
    SeatNotHeld { seat: String, epoch: i64 },
    /// acked, deferred or moved by somebody else since it was read
    #[error("inbox message {0} changed since it was read")]
    Moved(u64),
    #[error(transparent)]
    Store(#[from] Error),
}

/// The inboxes of one store.
#[derive(Debug, Clone)]
pub struct Inbox {
    store: Arc<dyn Store>,
    keys: Keys,
    ledger: Arc<Retention>,
}

impl Inbox {
    pub fn new(store: Arc<dyn Store>, keys: Keys) -> Self {
        Self {
            store,
            keys,
            ledger: Arc::new(Retention::ledger()),
        }
    }

    /// Appends a delivery to the seat's inbox.
    pub async fn enqueue(&self, seat: &str, delivery: &Delivery) -> Result<Enqueued, Error> {
        check_id("seat", seat)?;
        check_id("delivery_id", &delivery.delivery_id)?;
        let seq_key = self.keys.inbox_seq(seat);
        let id_key = self.keys.inbox_id(seat, &delivery.delivery_id);
        let ledger_key = self.keys.ledger(&delivery.delivery_id);
        for _ in 0..MAX_ENQUEUE_ATTEMPTS {
            let counter = self.store.get(&seq_key).await?;
            let seq = counter
                .as_ref()
                .and_then(|kv| std::str::from_utf8(&kv.value).ok()?.parse::<u64>().ok())
                .unwrap_or(0)
                + 1;
            let stored = Stored {
                delivery: delivery.clone(),
                delivery_count: 0,
                enqueued_at: crate::clock::now(),
            };
            let txn = Txn::new()
                .when([
                    Compare::unchanged(&seq_key, counter.as_ref()),
                    Compare::absent(&id_key),
                    Compare::absent(&ledger_key),
                ])
                .and_then([
                    Op::put(&seq_key, seq.to_string()),
                    Op::put(self.keys.inbox_message(seat, seq), encode(&stored)),
                    Op::put(&id_key, seq.to_string()),
                ])
                .or_else([Op::get(&id_key), Op::get(&ledger_key)]);
            let response = match self.store.txn(txn).await {
                Ok(response) => response,
                Err(error) if error.is_indeterminate() => {
                    // landed if the id key now names this seq
                    if let Some(kv) = self.store.get(&id_key).await? {
                        return Ok(if kv.value == seq.to_string().as_bytes() {
                            Enqueued::Queued { seq }
                        } else {
                            Enqueued::Duplicate
                        });
                    }
                    continue;
                }
                Err(error) => return Err(error),
            };
            if response.succeeded {
                return Ok(Enqueued::Queued { seq });
            }
            let mut results = response.results.into_iter();
            if matches!(results.next(), Some(OpResult::Get(Some(_)))) {
                return Ok(Enqueued::Duplicate);
            }
            if matches!(results.next(), Some(OpResult::Get(Some(_)))) {
                return Ok(Enqueued::AlreadyWorked);
            }
        }
        Err(Error::Unavailable(format!(
            "inbox of seat {seat} is contended: {MAX_ENQUEUE_ATTEMPTS} enqueues raced this one"
        )))
    }

    /// Every queued message of the seat, oldest first.
    pub async fn list(&self, seat: &str) -> Result<Vec<Message>, Error> {
        let range = self.store.range(&self.keys.inbox(seat)).await?;
        range.kvs.iter().map(decode).collect()
    }

    /// The oldest queued message.
    pub async fn head(&self, seat: &str) -> Result<Option<Message>, Error> {
        Ok(self.list(seat).await?.into_iter().next())
    }

    /// What the seat works next: the oldest answer given by naming a run (addressed to its run,
    /// it waited only for the seat to be free, and is the first thing offered), else the head.
    pub async fn next_up(&self, seat: &str) -> Result<Option<Message>, Error> {
        let queued = self.list(seat).await?;
        let answer = queued
            .iter()
            .position(|message| message.delivery.answer_given.is_some());
        Ok(match answer {
            Some(at) => queued.into_iter().nth(at),
            None => queued.into_iter().next(),
        })
    }

    /// The seat's dead letters, oldest first.
    pub async fn dead_letters(&self, seat: &str) -> Result<Vec<Message>, Error> {
        let range = self.store.range(&self.keys.dead_letters(seat)).await?;
        range.kvs.iter().map(decode).collect()
    }

    /// Deletes a worked message and records it in the ledger, in one fenced txn.
    pub async fn ack(&self, fence: &Fence, message: &Message) -> Result<(), Rejected> {
        match self.ack_once(fence, message).await {
            Err(Rejected::Store(Error::Invalid(reason))) if reason.contains("lease") => {
                // the ledger's retention lease is gone: take a new one and try once more
                self.ledger.forget();
                self.ack_once(fence, message).await
            }
            other => other,
        }
    }

    async fn ack_once(&self, fence: &Fence, message: &Message) -> Result<(), Rejected> {
        let now = crate::clock::now();
        let lease = self.ledger.lease(self.store.as_ref(), now).await?;
        let seat = &fence.seat;
        let delivery_id = &message.delivery.delivery_id;
        self.fenced(
            fence,
            message,
            vec![
                Op::delete(self.keys.inbox_message(seat, message.seq)),
                Op::delete(self.keys.inbox_id(seat, delivery_id)),
                ledger::spend_op(&self.keys, delivery_id, lease, now),
            ],
        )
        .await
    }

    /// Hands a message back keeping its place; past [`MAX_DELIVERIES`] it is dead-lettered.
    pub async fn defer(&self, fence: &Fence, message: &Message) -> Result<Deferred, Rejected> {
        let seat = &fence.seat;
        let delivery_count = message.delivery_count + 1;
        let stored = Stored {
            delivery: message.delivery.clone(),
            delivery_count,
            enqueued_at: message.enqueued_at,
        };
        if delivery_count > MAX_DELIVERIES {
            self.fenced(
                fence,
                message,
                vec![
                    Op::delete(self.keys.inbox_message(seat, message.seq)),
                    Op::delete(self.keys.inbox_id(seat, &message.delivery.delivery_id)),
                    Op::put(self.keys.dead_letter(seat, message.seq), encode(&stored)),
                ],
            )
            .await?;
            return Ok(Deferred::DeadLettered);
        }
        self.fenced(
            fence,
            message,
            vec![Op::put(
                self.keys.inbox_message(seat, message.seq),
                encode(&stored),
            )],
        )
        .await?;
        Ok(Deferred::Kept { delivery_count })
    }

    async fn fenced(&self, fence: &Fence, message: &Message, ops: Vec<Op>) -> Result<(), Rejected> {
        let key = self.keys.inbox_message(&fence.seat, message.seq);
        let holder_key = self.keys.seat_holder(&fence.seat);
        let txn = Txn::new()
            .when([
                fence_compare(&self.keys, fence),
                Compare::mod_revision(&key, CompareOp::Equal, message.mod_revision),
            ])
            .and_then(ops)
            .or_else([Op::get(holder_key)]);
        let response = match self.store.txn(txn).await {
            Ok(response) => response,
            Err(error) if error.is_indeterminate() => {
                // landed if the message no longer stands as read
                let now = self.store.get(&key).await?;
                if now.is_none_or(|kv| kv.mod_revision != message.mod_revision) {
                    return Ok(());
                }
                return Err(error.into());
            }
            Err(error) => return Err(error.into()),
        };
        if response.succeeded {
            return Ok(());
        }
        match response.results.first() {
            Some(OpResult::Get(Some(kv))) if kv.create_revision == fence.epoch => {
                Err(Rejected::Moved(message.seq))
            }
            _ => Err(Rejected::SeatNotHeld {
                seat: fence.seat.clone(),
                epoch: fence.epoch,
            }),
        }
    }
}

fn encode(stored: &Stored) -> Vec<u8> {
    serde_json::to_vec(stored).unwrap_or_default()
}

fn decode(kv: &KeyValue) -> Result<Message, Error> {
    let stored: Stored = serde_json::from_slice(&kv.value).map_err(|error| Error::Decode {
        key: kv.key.clone(),
        message: error.to_string(),
    })?;
    let seq = Keys::last_segment(&kv.key)
        .parse()
        .map_err(|_| Error::Decode {
            key: kv.key.clone(),
            message: "inbox key does not end in a sequence number".into(),
        })?;
    Ok(Message {
        seq,
        delivery: stored.delivery,
        delivery_count: stored.delivery_count,
        enqueued_at: stored.enqueued_at,
        mod_revision: kv.mod_revision,
    })
}
