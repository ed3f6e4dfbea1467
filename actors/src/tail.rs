//! `TailOwner`: the live tail's readings (spec "Watching a run live"). One reading per job,
//! reused for two seconds however many people look, dropped after 30 seconds nobody asked,
//! swept every ten seconds. A reading holds at most the stream's last mebibyte; a viewer more
//! than 256 KiB behind, or holding another reading's epoch, gets a reset with the last
//! 256 KiB in whole lines.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use boxfleet_cluster::record::RunRecord;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::time::Instant;

use crate::coordinator::Coordinator;

/// A reading is reused this long (sandbox.LiveReuse).
pub const REUSE: Duration = Duration::from_secs(2);
/// A reading nobody asked about this long is dropped.
pub const DROP_AFTER: Duration = Duration::from_secs(30);
/// The sweep's interval.
pub const SWEEP: Duration = Duration::from_secs(10);
/// What a reading holds of a stream.
pub const WINDOW: usize = 1024 * 1024;
/// What a reset carries.
pub const RESET: usize = 256 * 1024;
/// One box read's bound.
pub const READ_BOUND: Duration = Duration::from_secs(5);

/// What a viewer is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailView {
    pub text: String,
    pub start: u64,
    pub end: u64,
    pub epoch: u64,
    /// the viewer's holding did not match: `text` replaces what it holds
    pub reset: bool,
    /// when the reading was taken, when it is older than one reuse (the box is slow)
    pub stale_ms: Option<u64>,
}

#[derive(Debug)]
struct Reading {
    epoch: u64,
    /// the text held, from `start` to `end`
    text: String,
    start: u64,
    end: u64,
    read_at: Instant,
    asked_at: Instant,
}

#[derive(Debug)]
pub enum TailMsg {
    Read {
        record: Box<RunRecord>,
        epoch: u64,
        after: u64,
        reply: RpcReplyPort<Result<TailView, String>>,
    },
    Sweep,
}

/// The node's tail owner.
#[derive(Debug)]
pub struct TailOwner;

#[derive(Debug)]
pub struct TailState {
    coordinator: Arc<Coordinator>,
    readings: HashMap<String, Reading>,
    next_epoch: u64,
}

/// The last `max` bytes of `text`, starting on a line.
fn last_lines(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let from = text[cut..].find('\n').map_or(text.len(), |i| cut + i + 1);
    (&text[from..], from)
}

impl Actor for TailOwner {
    type Msg = TailMsg;
    type State = TailState;
    type Arguments = Arc<Coordinator>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        coordinator: Arc<Coordinator>,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(SWEEP, || TailMsg::Sweep);
        Ok(TailState {
            coordinator,
            readings: HashMap::new(),
            next_epoch: u64::from(std::process::id()) << 20,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TailMsg::Sweep => {
                state
                    .readings
                    .retain(|_, reading| reading.asked_at.elapsed() < DROP_AFTER);
            }
            TailMsg::Read {
                record,
                epoch,
                after,
                reply,
            } => {
                let view = state.read(&record, epoch, after).await;
                let _ = reply.send(view);
            }
        }
        Ok(())
    }
}

impl TailState {
    async fn read(
        &mut self,
        record: &RunRecord,
        epoch: u64,
        after: u64,
    ) -> Result<TailView, String> {
        let now = Instant::now();
        let key = record.launch_id.clone();
        if !self.readings.contains_key(&key) {
            self.next_epoch += 1;
            self.readings.insert(
                key.clone(),
                Reading {
                    epoch: self.next_epoch,
                    text: String::new(),
                    start: 0,
                    end: 0,
                    read_at: now - REUSE * 2,
                    asked_at: now,
                },
            );
        }
        let reading = self.readings.get_mut(&key).ok_or("reading vanished")?;
        reading.asked_at = now;
        let mut stale_ms = None;
        if reading.read_at.elapsed() >= REUSE {
            match tokio::time::timeout(READ_BOUND, self.coordinator.follow(record, reading.end))
                .await
            {
                Ok(Ok(followed)) => {
                    if followed.start > reading.end {
                        // the stream's front is gone: begin again where the read began
                        reading.text.clear();
                        reading.start = followed.start;
                    }
                    reading.text.push_str(&followed.text);
                    reading.end = followed.end.max(reading.end);
                    reading.read_at = Instant::now();
                    if reading.text.len() > WINDOW {
                        let (kept, dropped) = last_lines(&reading.text, WINDOW);
                        let kept = kept.to_owned();
                        reading.start += dropped as u64;
                        reading.text = kept;
                    }
                }
                Ok(Err(error)) => return Err(error.to_string()),
                Err(_) => stale_ms = Some(reading.read_at.elapsed().as_millis() as u64),
            }
        }
        let holds_this = epoch == reading.epoch && after >= reading.start && after <= reading.end;
        if holds_this && reading.end - after <= RESET as u64 {
            let from = (after - reading.start) as usize;
            let mut from = from.min(reading.text.len());
            while !reading.text.is_char_boundary(from) {
                from += 1;
            }
            return Ok(TailView {
                text: reading.text[from..].to_owned(),
                start: after,
                end: reading.end,
                epoch: reading.epoch,
                reset: false,
                stale_ms,
            });
        }
        let (text, dropped) = last_lines(&reading.text, RESET);
        Ok(TailView {
            text: text.to_owned(),
            start: reading.start + dropped as u64,
            end: reading.end,
            epoch: reading.epoch,
            reset: epoch != 0 || after != 0,
            stale_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_keeps_whole_lines_from_the_end() {
        let text = "aaaa\nbbbb\ncccc\n";
        let (kept, dropped) = last_lines(text, 7);
        assert_eq!(kept, "cccc\n");
        assert_eq!(dropped, 10);
        assert_eq!(last_lines(text, 100), (text, 0));
    }
}
