//! `TailOwner`: the live tail's readings (spec "Watching a run live"). One reading per job,
//! reused for two seconds however many people look, dropped after 30 seconds nobody asked,
//! swept every ten seconds. A reading holds at most the stream's last mebibyte; a viewer more
//! than 256 KiB behind, holding another reading's epoch, or whose digest does not match the
//! text this reading shows before its offset, gets a reset with the last 256 KiB in whole
//! lines.
//!
//! The box is read off the actor's handler: a read in flight is a task of its own, requests
//! that arrive meanwhile wait for that one, each at most its own wait (three quarters of its
//! asker's budget), and one whose wait runs out is answered from the last reading there was,
//! stamped with its age. So one slow box delays only its own viewers, and the read itself
//! goes on under its own bound (one completion-poll interval).
//!
//! What a reading shows is settled (spec "What it shows is settled"): the box's bytes pass
//! through a redaction [`boxfleet_redact::Stream`], which shows a line only once nothing
//! written after it can change how it redacts, and counts what it holds back. Offsets a viewer
//! holds are offsets of that shown text, not of the box's stream.

mod reading;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_cluster::record::RunRecord;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::time::Instant;

use reading::{Reading, last_lines};
pub use reading::{TailStream, digest_of, epoch_of};

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

/// What one read of a job's box gave.
#[derive(Debug, Clone)]
pub struct Followed {
    pub followed: crate::ports::Followed,
    pub stream: TailStream,
}

/// Why a box could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowError {
    /// the box is paused where its backend cannot read it without waking it: left paused
    Paused(String),
    /// the owner's own sentence
    Failed(String),
}

/// Where a reading's bytes come from: a job's output from an offset (the node's box access).
#[async_trait]
pub trait JobOutput: Send + Sync + std::fmt::Debug {
    /// What `run`'s job wrote on `stream` at or after `from`; the output instead once it says
    /// anything, the error stream instead while the output has said nothing.
    async fn follow(
        &self,
        run: &RunRecord,
        stream: TailStream,
        from: u64,
    ) -> Result<Followed, FollowError>;
}

/// What a viewer is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailView {
    pub text: String,
    pub start: u64,
    pub end: u64,
    pub epoch: u64,
    /// the digest of the shown text through `end` (the viewer sends it back)
    pub digest: String,
    /// the viewer's holding did not match: `text` replaces what it holds
    pub reset: bool,
    /// how old the reading is, when it is not fresh (the box is slow, or still being read)
    pub stale_ms: Option<u64>,
    /// bytes written but not shown yet: what comes next decides how they redact
    pub held: u64,
    /// the reading began after the stream's start (its front is not shown)
    pub front: bool,
    /// the stream the reading follows
    pub stream: TailStream,
}

/// What a viewer holds: the reading's epoch, the offset it holds through, the digest there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holding {
    pub epoch: u64,
    pub after: u64,
    pub digest: String,
}

#[derive(Debug)]
pub enum TailMsg {
    Read {
        record: Box<RunRecord>,
        holding: Holding,
        /// how long the answer may wait for the box
        wait: Duration,
        reply: RpcReplyPort<Result<TailView, FollowError>>,
    },
    /// a read of the box ended
    Took {
        key: String,
        result: Result<Followed, FollowError>,
    },
    /// a waiting viewer's wait ran out
    Due {
        key: String,
        waiter: u64,
    },
    Sweep,
}

/// The node's tail owner.
#[derive(Debug)]
pub struct TailOwner;

/// What the owner reads with: the node's box access, and one read's bound (one
/// completion-poll interval).
#[derive(Debug, Clone)]
pub struct TailArgs {
    pub output: Arc<dyn JobOutput>,
    pub read_bound: Duration,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    holding: Holding,
    reply: RpcReplyPort<Result<TailView, FollowError>>,
}

#[derive(Debug)]
struct Job {
    reading: Reading,
    /// a read of the box is in flight
    reading_box: bool,
    /// the last read's refusal, reused like a reading
    refused: Option<FollowError>,
    waiters: Vec<Waiter>,
}

#[derive(Debug)]
pub struct TailState {
    args: TailArgs,
    jobs: HashMap<String, Job>,
    next_waiter: u64,
}

impl Actor for TailOwner {
    type Msg = TailMsg;
    type State = TailState;
    type Arguments = TailArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: TailArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(SWEEP, || TailMsg::Sweep);
        Ok(TailState {
            args,
            jobs: HashMap::new(),
            next_waiter: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TailMsg::Sweep => state
                .jobs
                .retain(|_, job| job.reading_box || job.reading.asked_at.elapsed() < DROP_AFTER),
            TailMsg::Read {
                record,
                holding,
                wait,
                reply,
            } => state.read(&myself, *record, holding, wait, reply),
            TailMsg::Took { key, result } => state.took(&key, result),
            TailMsg::Due { key, waiter } => state.due(&key, waiter),
        }
        Ok(())
    }
}

impl TailState {
    fn read(
        &mut self,
        myself: &ActorRef<TailMsg>,
        record: RunRecord,
        holding: Holding,
        wait: Duration,
        reply: RpcReplyPort<Result<TailView, FollowError>>,
    ) {
        let now = Instant::now();
        let metrics = boxfleet_cluster::metrics::metrics();
        metrics.tail_requests.inc();
        let key = record.launch_id.clone();
        let job = self.jobs.entry(key.clone()).or_insert_with(|| Job {
            reading: Reading::new(&key, TailStream::Output, now),
            reading_box: false,
            refused: None,
            waiters: Vec::new(),
        });
        job.reading.asked_at = now;
        if job.reading.fresh() {
            let answer = match &job.refused {
                Some(refusal) => Err(refusal.clone()),
                None => Ok(view(&job.reading, &holding, None)),
            };
            let _ = reply.send(answer);
            return;
        }
        if !job.reading_box {
            job.reading_box = true;
            let (output, bound) = (self.args.output.clone(), self.args.read_bound);
            let (stream, from) = (job.reading.stream_kind, job.reading.raw_end);
            let owner = myself.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let result =
                    match tokio::time::timeout(bound, output.follow(&record, stream, from)).await {
                        Ok(result) => result,
                        Err(_) => Err(FollowError::Failed(format!(
                            "the box did not answer a read inside {} s",
                            bound.as_secs()
                        ))),
                    };
                let _ = owner.send_message(TailMsg::Took { key, result });
            });
        }
        self.next_waiter += 1;
        let id = self.next_waiter;
        job.waiters.push(Waiter { id, holding, reply });
        metrics.tail_readers.inc();
        myself.send_after(wait, move || TailMsg::Due { key, waiter: id });
    }

    fn took(&mut self, key: &str, result: Result<Followed, FollowError>) {
        let Some(job) = self.jobs.get_mut(key) else {
            return;
        };
        job.reading_box = false;
        let metrics = boxfleet_cluster::metrics::metrics();
        metrics.tail_read(match &result {
            Ok(_) => "read",
            Err(FollowError::Paused(_)) => "paused",
            Err(FollowError::Failed(_)) => "failed",
        });
        let reading = &mut job.reading;
        match result {
            Ok(Followed { followed, stream }) => {
                job.refused = None;
                if stream != reading.stream_kind {
                    // the account switched streams: another reading, from that stream's read
                    reading.begin_again(stream, followed.start);
                } else if followed.start > reading.raw_end {
                    // the stream's front is not in the read: the reading begins again there,
                    // on a line, under a new epoch
                    reading.begin_again(stream, followed.start);
                }
                reading.take(&followed.text, followed.end);
            }
            Err(refusal) => job.refused = Some(refusal),
        }
        reading.read_at = Some(Instant::now());
        for waiter in job.waiters.drain(..) {
            metrics.tail_readers.dec();
            let answer = match &job.refused {
                Some(refusal) => Err(refusal.clone()),
                None => Ok(view(&job.reading, &waiter.holding, None)),
            };
            let _ = waiter.reply.send(answer);
        }
    }

    /// A viewer whose wait ran out while the box is still being read: the last reading there
    /// was, stamped with its age (a reading never taken is empty, its age its own).
    fn due(&mut self, key: &str, id: u64) {
        let Some(job) = self.jobs.get_mut(key) else {
            return;
        };
        let Some(at) = job.waiters.iter().position(|w| w.id == id) else {
            return;
        };
        let waiter = job.waiters.swap_remove(at);
        boxfleet_cluster::metrics::metrics().tail_readers.dec();
        let age = job
            .reading
            .read_at
            .unwrap_or(job.reading.asked_at)
            .elapsed();
        let answer = Ok(view(
            &job.reading,
            &waiter.holding,
            Some(age.as_millis() as u64),
        ));
        let _ = waiter.reply.send(answer);
    }
}

/// What `holding` lacks of `reading`: the text after its offset, or a reset.
fn view(reading: &Reading, holding: &Holding, stale_ms: Option<u64>) -> TailView {
    let holds_this = holding.epoch == reading.epoch
        && holding.after >= reading.start
        && holding.after <= reading.end
        && holding.digest == reading.digest_at(holding.after);
    let (text, start, reset) = if holds_this && reading.end - holding.after <= RESET as u64 {
        let from = (holding.after - reading.start) as usize;
        let mut from = from.min(reading.text.len());
        while !reading.text.is_char_boundary(from) {
            from += 1;
        }
        (&reading.text[from..], holding.after, false)
    } else {
        let (text, dropped) = last_lines(&reading.text, RESET);
        let held_anything = holding.epoch != 0 || holding.after != 0 || !holding.digest.is_empty();
        (text, reading.start + dropped as u64, held_anything)
    };
    TailView {
        text: text.to_owned(),
        start,
        end: reading.end,
        epoch: reading.epoch,
        digest: reading.digest_at(reading.end),
        reset,
        stale_ms,
        held: reading.stream.held() as u64,
        front: reading.front,
        stream: reading.stream_kind,
    }
}

#[cfg(test)]
mod tests;
