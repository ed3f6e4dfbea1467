//! One job's reading: the settled, redacted text shown so far, the stream it is taken from,
//! and what identifies it to a viewer (its epoch, and the digest of the text before any
//! offset it holds).

use boxfleet_redact::Stream;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::{REUSE, WINDOW};

/// Which of a job's streams a reading follows: its output (the transcript the runner
/// decodes from its event stream, or a command's stdout), or its error stream while the
/// output has said nothing yet (a CLI that failed to start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TailStream {
    Output,
    Errors,
}

/// How much of the shown text before an offset its digest covers.
pub const DIGEST_SPAN: usize = 1024;

/// A reading's epoch: derived from the job, the stream and where in it the reading began, so
/// a node on the same build that reads the same stream from the same place (the run's new
/// owner, or this node restarted) derives the same epoch and the same text, and a viewer
/// continues; a reading begun anywhere else is another epoch, and the viewer is reset.
pub fn epoch_of(launch_id: &str, stream: TailStream, began_at: u64) -> u64 {
    let digest = Sha256::new()
        .chain_update(b"boxfleet tail epoch/")
        .chain_update(launch_id.as_bytes())
        .chain_update([stream as u8])
        .chain_update(began_at.to_be_bytes())
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    // 0 means "holds nothing"; JavaScript reads numbers up to 2^53 exactly
    (u64::from_be_bytes(bytes) & ((1 << 53) - 1)).max(1)
}

/// The digest of the shown text that ends at an offset: its last [`DIGEST_SPAN`] bytes and
/// the offset, so a viewer's holding is checked against what this reading shows there.
pub fn digest_of(before: &str, offset: u64) -> String {
    let mut from = before.len().saturating_sub(DIGEST_SPAN);
    while !before.is_char_boundary(from) {
        from += 1;
    }
    let digest = Sha256::new()
        .chain_update(offset.to_be_bytes())
        .chain_update(&before.as_bytes()[from..])
        .finalize();
    hex::encode(&digest[..12])
}

#[derive(Debug)]
pub(super) struct Reading {
    pub(super) launch_id: String,
    pub(super) stream_kind: TailStream,
    pub(super) epoch: u64,
    /// the settled, redacted text shown, from `start` to `end` (offsets of the shown text)
    pub(super) text: String,
    pub(super) start: u64,
    pub(super) end: u64,
    /// the box's stream, read through this offset
    pub(super) raw_end: u64,
    /// the redaction of what was read, holding back what is not settled yet
    pub(super) stream: Stream,
    /// the reading began after the stream's start
    pub(super) front: bool,
    /// the reading began inside a line: its bytes are dropped up to the first line break
    pub(super) skip_to_break: bool,
    /// when the box was last read (`None`: never yet)
    pub(super) read_at: Option<Instant>,
    pub(super) asked_at: Instant,
}

impl Reading {
    pub(super) fn new(launch_id: &str, stream_kind: TailStream, now: Instant) -> Self {
        Reading {
            launch_id: launch_id.to_owned(),
            stream_kind,
            epoch: epoch_of(launch_id, stream_kind, 0),
            text: String::new(),
            start: 0,
            end: 0,
            raw_end: 0,
            stream: Stream::new(),
            front: false,
            skip_to_break: false,
            read_at: None,
            asked_at: now,
        }
    }

    /// Begins again on `stream_kind` at `began_at` (past where this reading stands, or on the
    /// other stream): a new epoch; a front that is not the stream's start is dropped to a line.
    pub(super) fn begin_again(&mut self, stream_kind: TailStream, began_at: u64) {
        let asked_at = self.asked_at;
        *self = Reading::new(&self.launch_id, stream_kind, asked_at);
        self.epoch = epoch_of(&self.launch_id, stream_kind, began_at);
        self.raw_end = began_at;
        if began_at > 0 {
            self.front = true;
            self.skip_to_break = true;
        }
    }

    /// Whether a reading taken this recently answers without reading the box again.
    pub(super) fn fresh(&self) -> bool {
        self.read_at.is_some_and(|at| at.elapsed() < REUSE)
    }

    /// Takes what the box's stream grew by. A reading that begins after the stream's start
    /// begins on a line: the partial first line is dropped, up to the first break that lands
    /// after it, however long that takes, and never counted as held, since nothing will show it.
    pub(super) fn take(&mut self, mut text: &str, end: u64) {
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

    /// The digest of what this reading shows before `offset` (inside its window).
    pub(super) fn digest_at(&self, offset: u64) -> String {
        let upto = offset.clamp(self.start, self.end) - self.start;
        let mut upto = (upto as usize).min(self.text.len());
        while !self.text.is_char_boundary(upto) {
            upto += 1;
        }
        digest_of(&self.text[..upto], offset)
    }
}

/// The last `max` bytes of `text`, starting on a line.
pub(super) fn last_lines(text: &str, max: usize) -> (&str, usize) {
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
        let mut reading = Reading::new("L", TailStream::Output, Instant::now());
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
        let mut reading = Reading::new("L", TailStream::Output, Instant::now());
        reading.begin_again(TailStream::Output, 100);
        reading.take("tail of a long line with no break", 200);
        assert_eq!(reading.text, "");
        assert_eq!(
            reading.stream.held(),
            0,
            "dropped bytes are never counted as held"
        );
        reading.take(" still the same line\nnext line\n", 300);
        assert_eq!(reading.text, "next line\n");
        assert!(reading.front);
    }

    #[test]
    fn two_readings_of_the_same_stream_from_the_same_place_agree_and_no_other_does() {
        let now = Instant::now();
        let (mut one, mut two) = (
            Reading::new("L", TailStream::Output, now),
            Reading::new("L", TailStream::Output, now),
        );
        one.take("a\nb\nc\n", 6);
        two.take("a\nb\n", 4);
        two.take("c\n", 6);
        assert_eq!(one.epoch, two.epoch, "the same job, stream and start");
        assert_eq!(one.digest_at(4), two.digest_at(4));
        assert_ne!(one.digest_at(4), one.digest_at(2), "another offset");
        let mut other = Reading::new("L", TailStream::Output, now);
        other.take("a\nX\nc\n", 6);
        assert_ne!(one.digest_at(4), other.digest_at(4), "another text");
        assert_ne!(
            one.epoch,
            epoch_of("L", TailStream::Errors, 0),
            "the error stream is another reading"
        );
        assert_ne!(one.epoch, epoch_of("L", TailStream::Output, 4096));
        assert_ne!(one.epoch, epoch_of("M", TailStream::Output, 0));
    }
}
