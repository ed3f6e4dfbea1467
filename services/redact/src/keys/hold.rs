//! What the key rule holds back of a stream's text: the blocks a settled prefix never cuts,
//! a BEGIN still open, and a run of lines that read like a key's body, which waits until enough
//! lines that cannot be one follow it.

use super::scan::escape_re;
use super::*;
use crate::password::is_prompt;

/// A redacted key's marker (`Kind::PrivateKey`'s), looked for on every push of a stream.
pub(super) const PRIVATE_KEY_MARKER: &str = "[REDACTED:private_key]";

/// What the key rule holds back in `text` (complete lines only, tokens already markers, the
/// password values `claimed`): the earliest line whose redaction could still change with what
/// is written after it, and the blocks, which a settled prefix never cuts in two.
pub(crate) fn hold(text: &str, lines: &[Line], claimed: &[Claim]) -> crate::Hold {
    if lines.is_empty() {
        return crate::Hold::default();
    }
    let bytes = text.as_bytes();
    if memchr::memmem::find(bytes, b"-----").is_none()
        && memchr::memmem::find(bytes, PRIVATE_KEY_MARKER.as_bytes()).is_none()
    {
        // no armour and no key's marker: no block, and no segment holds an arm; only the
        // lines that read like a key's body can hold (what `Scan` would find, without it)
        return crate::Hold {
            line: chain_start_from_end(text, lines),
            spans: Vec::new(),
            soft: Vec::new(),
        };
    }
    let scan = Scan::new(text, lines, claimed);
    let found = find_blocks(&scan);
    let mut h: Option<usize> = None;
    let at = |line: usize, h: &mut Option<usize>| {
        *h = Some(h.map_or(line, |x| x.min(line)));
    };
    for &seg in &found.open_begins {
        at(scan.segs[seg].line, &mut h);
    }
    let segs = scan.segs.iter().enumerate().map(|(si, seg)| SegRead {
        start: seg.start,
        end: seg.end,
        line: seg.line,
        armed: !seg.arms.is_empty(),
        owned: found.owned[si],
    });
    if let Some(line) = chain_start(text, lines, segs) {
        at(line, &mut h);
    }
    crate::Hold {
        line: h,
        spans: found.blocks.iter().map(|b| (b.start, b.end)).collect(),
        soft: Vec::new(),
    }
}

/// What the chain of key-like lines reads of one segment.
struct SegRead {
    start: usize,
    end: usize,
    line: usize,
    /// it holds an armour or a key's marker
    armed: bool,
    /// a forward block's line
    owned: bool,
}

/// One line's segments, as `Scan` cuts them: the line cut at its escaped breaks.
fn line_segments(text: &str, line: &Line, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut start = line.start;
    for escape in escape_re().find_iter(&text[line.start..line.end]) {
        out.push((start, line.start + escape.start()));
        start = line.start + escape.end();
    }
    out.push((start, line.end));
}

/// The segments of a text with no armour and no key's marker ([`chain_start_from_end`]'s
/// reference, read forward).
#[cfg(test)]
fn plain_segments<'a>(text: &'a str, lines: &'a [Line]) -> impl Iterator<Item = SegRead> + 'a {
    lines.iter().enumerate().flat_map(move |(index, line)| {
        let mut segments = Vec::new();
        line_segments(text, line, &mut segments);
        segments.into_iter().map(move |(start, end)| SegRead {
            start,
            end,
            line: index,
            armed: false,
            owned: false,
        })
    })
}

/// [`chain_start`] over a text with no armour and no key's marker ([`plain_segments`]), read
/// from its end: only the last run of key-like lines can still be open, so no line before the
/// last few that cannot be one is judged (a stream's every push reads its held text again).
fn chain_start_from_end(text: &str, lines: &[Line]) -> Option<usize> {
    let bytes = text.as_bytes();
    // the earliest line of the open run found so far, going back
    let mut chain: Option<usize> = None;
    // the segments that cannot be a key's line since the key-like one after them
    let mut count = 0usize;
    let mut segments = Vec::new();
    for (index, line) in lines.iter().enumerate().rev() {
        line_segments(text, line, &mut segments);
        for &(start, end) in segments.iter().rev() {
            let seg = &bytes[start..end];
            let (key_like, exact) = keyish(seg);
            if key_like {
                // enough lines after this one closed its run before the run found later
                if count >= if exact { 5 } else { 4 } {
                    return cap_chain(text, lines, chain);
                }
                chain = Some(index);
                count = 0;
            } else if (seg.iter().any(u8::is_ascii_alphanumeric) || seg.iter().any(|&b| b >= 0x80))
                && !is_prompt(&text[start..end])
            {
                count += 1;
                // five close any run: no line before these reaches past them
                if count >= 5 {
                    return cap_chain(text, lines, chain);
                }
            }
        }
    }
    cap_chain(text, lines, chain)
}

/// A run's first line, no earlier than a key block's size before the text's end.
fn cap_chain(text: &str, lines: &[Line], chain: Option<usize>) -> Option<usize> {
    chain.map(|line| {
        let floor = text.len().saturating_sub(MAX_KEY_BLOCK_BYTES);
        let cap = lines.partition_point(|l| l.start < floor);
        line.max(cap.min(lines.len() - 1))
    })
}

/// The line a run of lines that read like a key's body holds from: such a line waits until
/// enough lines that cannot be one follow it (an armour or a key's marker ends the run).
fn chain_start(text: &str, lines: &[Line], segs: impl Iterator<Item = SegRead>) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut chain: Option<usize> = None;
    let mut count = 0usize;
    let mut need = 4usize;
    for s in segs {
        if s.armed {
            chain = None;
            continue;
        }
        let seg = &bytes[s.start..s.end];
        let (mut k, exact) = keyish(seg);
        // a forward block's line: a back-read landing on it takes the whole block
        k |= s.owned;
        if k {
            if chain.is_none() {
                chain = Some(s.line);
            }
            count = 0;
            need = if exact { 5 } else { 4 };
        } else if chain.is_some()
            && (seg.iter().any(u8::is_ascii_alphanumeric) || seg.iter().any(|&b| b >= 0x80))
        {
            // (with no run open, what a line is does not matter until a key's line opens one)
            if is_prompt(&text[s.start..s.end]) {
                continue;
            }
            count += 1;
            if count >= need {
                chain = None;
            }
        }
    }
    cap_chain(text, lines, chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn the_run_read_from_the_end_starts_where_the_run_read_forward_does(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIzNDU2Nzg5QUJD\n",
                "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIzNDU2Nzg5QUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n",
                "AbCdEfGh12\n", "=AbCd\n", "the runner reads a line\n", "Password:\n", "\n",
                "  ---\n", "ok\n", "é\n", "a\\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIz\\nb\n",
                "x\\n\\ny\n",
            ]), 1..30)
        ) {
            let text = pieces.concat();
            let lines = crate::lines::split(&text);
            proptest::prop_assert_eq!(
                chain_start_from_end(&text, &lines),
                chain_start(&text, &lines, plain_segments(&text, &lines))
            );
        }
    }
}
