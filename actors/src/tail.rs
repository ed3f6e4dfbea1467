//! `TailOwner`: the live tail's readings (spec "Watching a run live"). One reading per job,
//! reused for two seconds however many people look, dropped after 30 seconds nobody asked,
//! swept every ten seconds. A reading holds at most the stream's last mebibyte; a viewer more
//! than 256 KiB behind, or holding another reading's epoch, gets a reset with the last
//! 256 KiB in whole lines.
//!
//! What a reading shows is settled (spec "What it shows is settled"): the box's bytes pass
//! through a redaction [`Stream`], which shows a line only once nothing written after it can
//! change how it redacts, and counts what it holds back. Offsets a viewer holds are offsets of
//! that shown text, not of the box's stream.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_cluster::record::RunRecord;
use boxfleet_redact::Stream;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::time::Instant;

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

/// Where a reading's bytes come from: a job's output from an offset (the node's box access).
#[async_trait]
pub trait JobOutput: Send + Sync + std::fmt::Debug {
    /// The output of `run`'s job written at or after `from`.
    async fn follow(&self, run: &RunRecord, from: u64) -> Result<crate::ports::Followed, String>;
}

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
    /// bytes written but not shown yet: what comes next decides how they redact
    pub held: u64,
    /// the reading began after the stream's start (its front is not shown)
    pub front: bool,
}

#[derive(Debug)]
struct Reading {
    epoch: u64,
    /// the settled, redacted text shown, from `start` to `end` (offsets of the shown text)
    text: String,
    start: u64,
    end: u64,
    /// the box's stream, read through this offset
    raw_end: u64,
    /// the redaction of what was read, holding back what is not settled yet
    stream: Stream,
    /// the reading began after the stream's start
    front: bool,
    /// the reading began inside a line: its bytes are dropped up to the first line break
    skip_to_break: bool,
    read_at: Instant,
    asked_at: Instant,
}

impl Reading {
    fn new(epoch: u64, now: Instant) -> Self {
        Reading {
            epoch,
            text: String::new(),
            start: 0,
            end: 0,
            raw_end: 0,
            stream: Stream::new(),
            front: false,
            skip_to_break: false,
            read_at: now - REUSE * 2,
            asked_at: now,
        }
    }

    /// Takes what the box's stream grew by. A reading that begins after the stream's start
    /// begins on a line: the partial first line is dropped, up to the first break that lands
    /// after it, however long that takes, and never counted as held, since nothing will show it.
    fn take(&mut self, mut text: &str, end: u64) {
        if self.skip_to_break {
            match text.find('\n') {
                Some(at) => {
                    text = &text[at + 1..];
                    self.skip_to_break = false;
                }
                None => text = "",
            }
        }
        let shown = self.stream.push(text);
        self.text.push_str(&shown);
        self.end += shown.len() as u64;
        self.raw_end = end.max(self.raw_end);
        if self.text.len() > WINDOW {
            let (kept, dropped) = last_lines(&self.text, WINDOW);
            let kept = kept.to_owned();
            self.start += dropped as u64;
            self.text = kept;
        }
    }
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
    output: Arc<dyn JobOutput>,
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
    type Arguments = Arc<dyn JobOutput>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        output: Arc<dyn JobOutput>,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(SWEEP, || TailMsg::Sweep);
        Ok(TailState {
            output,
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
            self.readings
                .insert(key.clone(), Reading::new(self.next_epoch, now));
        }
        let reading = self.readings.get_mut(&key).ok_or("reading vanished")?;
        reading.asked_at = now;
        let mut stale_ms = None;
        if reading.read_at.elapsed() >= REUSE {
            match tokio::time::timeout(READ_BOUND, self.output.follow(record, reading.raw_end))
                .await
            {
                Ok(Ok(followed)) => {
                    if followed.start > reading.raw_end {
                        // the stream's front is not in the read: the reading (re)begins there,
                        // on a line, under a new epoch
                        if reading.raw_end > 0 || reading.end > 0 {
                            self.next_epoch += 1;
                            *reading = Reading::new(self.next_epoch, now);
                        }
                        reading.front = true;
                        reading.skip_to_break = true;
                    }
                    reading.take(&followed.text, followed.end);
                    reading.read_at = Instant::now();
                }
                Ok(Err(error)) => return Err(error),
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
                held: reading.stream.held() as u64,
                front: reading.front,
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
            held: reading.stream.held() as u64,
            front: reading.front,
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

    const KEY_LINE: &str = "MIIEowIBAAKCAQEAxq3O4Ou9Rk2cT8vWm5aYhL0pQz7sNdFjG1tUrBXy6eKwHnVi";

    #[test]
    fn a_reading_shows_what_is_settled_and_counts_what_it_holds() {
        let mut reading = Reading::new(1, Instant::now());
        reading.take("building\n-----BEGIN RSA PRIVATE KEY-----\n", 40);
        // the BEGIN waits: what comes next could be the key's body
        assert_eq!(reading.text, "building\n");
        assert!(reading.stream.held() > 0);
        reading.take(
            &format!("{KEY_LINE}\n-----END RSA PRIVATE KEY-----\ndone\n"),
            200,
        );
        assert!(!reading.text.contains(KEY_LINE), "{}", reading.text);
        assert!(
            reading.text.contains("[REDACTED:private_key]"),
            "{}",
            reading.text
        );
        assert_eq!(reading.end, reading.text.len() as u64);
    }

    #[test]
    fn a_reading_that_begins_inside_a_line_drops_it_up_to_the_next_break() {
        let mut reading = Reading::new(1, Instant::now());
        reading.skip_to_break = true;
        reading.take("tail of a long line with no break", 100);
        assert_eq!(reading.text, "");
        assert_eq!(
            reading.stream.held(),
            0,
            "dropped bytes are never counted as held"
        );
        reading.take(" still the same line\nnext line\n", 200);
        assert_eq!(reading.text, "next line\n");
    }
}
