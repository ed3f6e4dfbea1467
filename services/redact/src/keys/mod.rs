//! Private-key blocks (PEM, PKCS#8, OpenSSH, OpenPGP), read by their structure: forward from a
//! BEGIN and back from an END that no BEGIN's block reached, under the wrappings a transcript
//! puts them in (escaped JSON strings, line numbers, timestamps, grep prefixes, diff `+`,
//! concatenated strings, echoed lines, one-line keys).
//!
//! The text is read as *segments*: its lines, further split at escaped line breaks (`\n`,
//! `\\n`), so a key inside a JSON string reads as the key it encodes. Armours and markers of a
//! key already redacted split a segment again; every scan stops at the armour next to it, so
//! the pass is linear however many armours a line holds.
//!
//! `scan` cuts the text into segments and finds the armours and markers on them; `line` reads
//! one segment as a line of a key; `forward` reads down from a BEGIN and `backward` up from an
//! END; this module joins the two reads into the blocks it claims. `hold` says what a stream
//! holds back, and `keyish` whether a line reads like a key's body.

mod backward;
mod forward;
mod hold;
mod keyish;
mod line;
mod scan;
use backward::backward;
use forward::{Block, forward};
pub(crate) use hold::hold;
use keyish::keyish;
use scan::{ArmKind, Scan};

use crate::lines::Line;
use crate::{Claim, Kind, MAX_KEY_BLOCK_BYTES};

/// A full line read back has at least this many base64 characters.
const MIN_FULL_BACK: usize = 32;

/// A piece of a key: a run this long or longer, in upper and lower case, with a digit.
const MIN_PIECE: usize = 8;

/// Every block in the text: (start, end), in text order, with whether each BEGIN's block is
/// still open.
#[derive(Debug)]
struct Found {
    blocks: Vec<Block>,
    /// BEGIN armours whose block what is written next could still change, as segment indices
    open_begins: Vec<usize>,
    /// for each segment, whether a forward block holds it
    owned: Vec<bool>,
}

fn find_blocks(scan: &Scan<'_>) -> Found {
    let mut fwd: Vec<Block> = Vec::new();
    let mut owner: Vec<Option<usize>> = vec![None; scan.segs.len()];
    let mut reached_ends: Vec<usize> = Vec::new();
    let mut open_begins = Vec::new();
    for (ai, arm) in scan.arms.iter().enumerate() {
        if arm.kind != ArmKind::Begin {
            continue;
        }
        let f = forward(scan, ai);
        if f.open {
            open_begins.push(arm.seg);
        }
        if let Some(block) = f.block {
            for o in owner.iter_mut().take(f.last_seg + 1).skip(arm.seg) {
                *o = Some(fwd.len());
            }
            fwd.push(block);
        }
        if let Some(end) = f.closed_at_end {
            reached_ends.push(end);
        }
    }
    let mut blocks: Vec<Block> = Vec::new();
    let mut merged_into: Vec<Option<usize>> = vec![None; fwd.len()];
    let mut reached = reached_ends.into_iter().peekable();
    for (ai, arm) in scan.arms.iter().enumerate() {
        if arm.kind != ArmKind::End {
            continue;
        }
        while reached.peek().is_some_and(|&s| s < arm.start) {
            reached.next();
        }
        if reached.peek() == Some(&arm.start) {
            continue;
        }
        if let Some(start) = backward(scan, ai, &owner, &fwd) {
            // a back-read that reached a forward block merges with it
            let b = fwd.partition_point(|b| b.start < start);
            if fwd.get(b).is_some_and(|b| b.start == start) {
                merged_into[b] = Some(blocks.len());
            }
            blocks.push(Block {
                start,
                end: arm.end,
            });
        }
    }
    for (b, block) in fwd.iter().enumerate() {
        if merged_into[b].is_none() {
            blocks.push(*block);
        }
    }
    blocks.sort_by_key(|b| (b.start, std::cmp::Reverse(b.end)));
    Found {
        blocks,
        open_begins,
        owned: owner.iter().map(Option::is_some).collect(),
    }
}

pub(crate) fn find(text: &str, lines: &[Line], claimed: &[Claim], out: &mut Vec<Claim>) {
    // A block is read from a BEGIN or an END and never more than MAX_KEY_BLOCK_BYTES from
    // it, so only the lines around those armours are scanned: each window reaches a block's
    // bound (and a line more) either side of every armour in it.
    let bytes = text.as_bytes();
    let mut armours: Vec<usize> = memchr::memmem::find_iter(bytes, b"-----BEGIN")
        .chain(memchr::memmem::find_iter(bytes, b"-----END"))
        .collect();
    if armours.is_empty() || lines.is_empty() {
        return;
    }
    armours.sort_unstable();
    let margin = MAX_KEY_BLOCK_BYTES + 4096;
    let line_of = |at: usize| {
        lines
            .partition_point(|line| line.next <= at)
            .min(lines.len() - 1)
    };
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for at in armours {
        let first = line_of(at.saturating_sub(margin));
        let last = line_of((at + margin).min(text.len()));
        match windows.last_mut() {
            Some(window) if first <= window.1 + 1 => window.1 = window.1.max(last),
            _ => windows.push((first, last)),
        }
    }
    for (first, last) in windows {
        if first == 0 && last == lines.len() - 1 {
            find_in(text, lines, claimed, 0, out);
            continue;
        }
        let from = lines[first].start;
        let to = lines[last].next;
        let window: Vec<Line> = lines[first..=last]
            .iter()
            .map(|line| Line {
                start: line.start - from,
                end: line.end - from,
                next: line.next - from,
            })
            .collect();
        let claimed: Vec<Claim> = claimed
            .iter()
            .filter(|claim| claim.start >= from && claim.end <= to)
            .map(|claim| Claim {
                start: claim.start - from,
                end: claim.end - from,
                kind: claim.kind,
            })
            .collect();
        find_in(&text[from..to], &window, &claimed, from, out);
    }
}

/// The blocks in `text` (a window of the whole starting at `offset`), pushed at their place
/// in the whole.
fn find_in(text: &str, lines: &[Line], claimed: &[Claim], offset: usize, out: &mut Vec<Claim>) {
    let scan = Scan::new(text, lines, claimed);
    if scan
        .arms
        .iter()
        .all(|a| a.kind != ArmKind::Begin && a.kind != ArmKind::End)
    {
        return;
    }
    let found = find_blocks(&scan);
    for b in found.blocks {
        out.push(Claim {
            start: b.start + offset,
            end: b.end + offset,
            kind: Kind::PrivateKey,
        });
    }
}

#[cfg(test)]
mod tests;
