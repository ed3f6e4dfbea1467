//! Reading back from an END that no BEGIN's block reached: the lines above it that read as a
//! key's, across what a cut or the text around the key wrote between them.

use super::forward::Block;
use super::line::{Class, Read, Wrap, cases, is_b64, is_piece, read};
use super::scan::Scan;
use super::{MIN_FULL_BACK, MIN_PIECE};
use crate::MAX_KEY_BLOCK_BYTES;
use crate::password::is_prompt;

/// The widths an encoder wraps a key's base64 at: PEM as OpenSSL and Go write it, PKCS#8 and
/// OpenPGP (64), OpenSSH (70), MIME (76).
const ENCODER_WIDTHS: [usize; 3] = [64, 70, 76];

fn exact_width(width: usize, diff: bool) -> bool {
    ENCODER_WIDTHS.contains(&width) || (diff && ENCODER_WIDTHS.contains(&(width.saturating_sub(1))))
}

/// A line read back: where its material starts, and its width when it is base64 alone.
#[derive(Debug, Clone, Copy)]
struct BackLine {
    material: usize,
    width: Option<usize>,
}

fn back_line(r: &Read) -> Option<BackLine> {
    match r.class {
        Class::B64 {
            width,
            upper,
            lower,
            digit,
        } => {
            if upper && lower && (width >= MIN_FULL_BACK || (width >= MIN_PIECE && digit)) {
                Some(BackLine {
                    material: r.core.0,
                    width: Some(width),
                })
            } else {
                None
            }
        }
        // a mixed-case path above an END reads as a key's full line
        Class::Other if r.path_like => Some(BackLine {
            material: r.core.0,
            width: Some(r.core.1 - r.core.0),
        }),
        Class::Other => {
            if r.head_piece.is_some() || (r.tail_piece.is_some() && r.head_run.is_some()) {
                Some(BackLine {
                    material: r.core.0,
                    width: None,
                })
            } else {
                r.tail_piece.map(|(s, _)| BackLine {
                    material: s,
                    width: None,
                })
            }
        }
        _ => None,
    }
}

/// Where the key material on an END's own line starts, before its armour: a run that reads
/// like a piece of a key, up to one shorter run after it, or base64 running into the armour.
pub(super) fn end_line_material(bytes: &[u8], from: usize, to: usize) -> Option<usize> {
    // the last two runs of non-space text before the armour
    let mut runs: Vec<(usize, usize)> = Vec::with_capacity(2);
    let mut at = to;
    while runs.len() < 2 && at > from {
        while at > from && bytes[at - 1].is_ascii_whitespace() {
            at -= 1;
        }
        let end = at;
        while at > from && !bytes[at - 1].is_ascii_whitespace() {
            at -= 1;
        }
        if at < end {
            runs.push((at, end));
        }
    }
    let b64_run = |(s, e): (usize, usize)| -> (usize, usize) {
        // the base64 run that ends this word (after trailing punctuation)
        let mut end = e;
        while end > s && !is_b64(bytes[end - 1]) && bytes[end - 1] != b'=' {
            end -= 1;
        }
        let mut start = end;
        while start > s && (is_b64(bytes[start - 1]) || bytes[start - 1] == b'=') {
            start -= 1;
        }
        (start, end)
    };
    let last = runs.first().copied()?;
    let (ls, le) = b64_run(last);
    let touching = last.1 == to && le == to;
    if is_piece(&bytes[ls..le]) {
        return Some(ls);
    }
    if let Some(prev) = runs.get(1).copied() {
        let (ps, pe) = b64_run(prev);
        if is_piece(&bytes[ps..pe]) && le - ls < pe - ps {
            return Some(ps);
        }
    }
    // base64 running into the armour: a one-line key's run at a full line's width or wider
    if touching && le - ls >= 64 {
        let (u, l, _) = cases(&bytes[ls..le]);
        if u && l {
            return Some(ls);
        }
    }
    None
}

/// The longest cut mark a read on one line crosses (`…[… 2,345 characters truncated …]…`).
const MAX_MARK_BYTES: usize = 64;

/// A key written on one line, read back from its END: across one cut mark before the key's
/// material at `at`, to the key's run beyond it when that run is at a full line's width.
fn across_one_cut(scan: &Scan<'_>, from: usize, at: usize) -> usize {
    let bytes = scan.text.as_bytes();
    let floor = at.saturating_sub(MAX_MARK_BYTES).max(from);
    // the mark: what lies between the run before it and the material, not base64
    let mut mark = at;
    while mark > floor && !is_b64(bytes[mark - 1]) && bytes[mark - 1] != b'=' {
        mark -= 1;
    }
    // a mark may hold short base64 words (`2,345 characters truncated`): step over them
    // while the mark stays within its bound
    let mut probe = mark;
    loop {
        let mut run = probe;
        while run > from && probe - run < 2 && bytes[run - 1] == b'=' {
            run -= 1;
        }
        while run > from && is_b64(bytes[run - 1]) {
            run -= 1;
        }
        let len = probe - run;
        if len >= ENCODER_WIDTHS[0] {
            let (u, l, _) = cases(&bytes[run..probe]);
            if u && l && probe < at && !scan.is_claimed(run, probe) {
                return run;
            }
            return at;
        }
        if run <= floor || run == from {
            return at;
        }
        let mut gap = run;
        while gap > floor && !is_b64(bytes[gap - 1]) && bytes[gap - 1] != b'=' {
            gap -= 1;
        }
        if gap == run || gap <= floor {
            return at;
        }
        probe = gap;
    }
}

/// Reads back from the END armour `ai`; `owner` maps a segment to the forward block that holds
/// it. Returns where the block starts.
pub(super) fn backward(
    scan: &Scan<'_>,
    ai: usize,
    owner: &[Option<usize>],
    fwd: &[Block],
) -> Option<usize> {
    let arm = scan.arms[ai];
    let seg = &scan.segs[arm.seg];
    let bytes = scan.text.as_bytes();
    let prev_on_seg = (ai > seg.arms.start).then(|| scan.arms[ai - 1]);
    let mut from = prev_on_seg.map_or(seg.start, |a| a.end);
    if seg.has_marker {
        // a key written on a line that holds a marker is read back no further than the
        // marker (the scan between two armours of a line stays linear)
        if let Some(at) = scan.text[from..arm.start].rfind(crate::MARKER_PREFIX) {
            let marker = from + at;
            if let Some(close) = memchr::memchr(b']', &bytes[marker..arm.start]) {
                from = marker + close + 1;
            }
        }
    }
    let own = end_line_material(bytes, from, arm.start);
    let own = own.filter(|&at| !scan.is_claimed(at, arm.start));
    let own = own.map(|at| across_one_cut(scan, from, at));
    if prev_on_seg.is_some() || seg.has_marker {
        // an armour line that holds a marker (or another armour before this one) holds no
        // key read across its lines
        return own;
    }
    let gutter_end = own.unwrap_or(arm.start);
    let gutter = &scan.text[seg.start..gutter_end];
    let diff = gutter.trim_start().starts_with('+');
    let wrap = Wrap {
        gutter,
        suffix: &scan.text[arm.end..seg.end],
    };
    let wrap_trailing = if !wrap.suffix.trim().is_empty() {
        wrap
    } else {
        Wrap { gutter, suffix: "" }
    };
    let limit = scan.line_start_of(arm.seg);
    let mut top = own;
    let mut foreign = 0usize;
    let mut crossed = false;
    // the line below the lines being crossed: None for the END itself
    let mut below: Option<BackLine> = None;
    let mut first_body: Option<usize> = None;
    let mut below_seg: Option<usize> = None;
    // a crossing that landed on the body's short last line, waiting for the full line above
    // it to be at an encoder's width: the top to go back to if it is not
    let mut provisional: Option<Option<usize>> = None;
    // whether a line the read took is more than a short last line
    let mut any_full = own.is_some();
    // whether the read stopped at a break with the key going on above it
    let mut broken = false;
    let mut j = arm.seg;
    while j > 0 {
        j -= 1;
        let s = &scan.segs[j];
        if scan.line_start_of(j).saturating_add(MAX_KEY_BLOCK_BYTES) < limit {
            break;
        }
        let r = read(scan, (s.start, s.end), wrap_trailing, s.first);
        if !s.arms.is_empty() {
            // an armour or a marker ends the read
            if let Some(saved) = provisional.take() {
                top = saved;
            }
            break;
        }
        let candidate = if let Some(b) = owner[j] {
            // a forward block's line: its key material, whatever it reads as
            Some((
                BackLine {
                    material: fwd[b].start,
                    width: match r.class {
                        Class::B64 { width, .. } => Some(width),
                        _ => None,
                    },
                },
                Some(b),
            ))
        } else if !s.arms.is_empty() {
            break;
        } else if r.class == Class::Checksum
            && below.is_none()
            && first_body.is_none()
            && foreign == 0
        {
            Some((
                BackLine {
                    material: r.core.0,
                    width: None,
                },
                None,
            ))
        } else {
            back_line(&r).map(|b| (b, None))
        };
        match candidate {
            Some((line, block)) => {
                let at_width = line.width.is_some_and(|w| exact_width(w, diff));
                if let Some(saved) = provisional.take() {
                    // the full line above the short last line a crossing landed on
                    if !(at_width && foreign <= 1) {
                        top = saved;
                        broken = block.is_none();
                        break;
                    }
                }
                let mut short_landing = false;
                let accept = match foreign {
                    0 | 1 => true,
                    2 if !crossed => {
                        let below_exact = below
                            .and_then(|b| b.width)
                            .is_some_and(|w| exact_width(w, diff));
                        let from_ok = match below {
                            None => true,
                            Some(b) => below_seg == first_body || b.width == line.width,
                        };
                        // a line a cut wrote into hides its width: landed on from one at an
                        // encoder's width below
                        let cut_landing = line.width.is_none() && block.is_none() && below_exact;
                        short_landing = line.width.is_some_and(|w| w < ENCODER_WIDTHS[0])
                            && block.is_none()
                            && from_ok;
                        (at_width && from_ok) || cut_landing || short_landing
                    }
                    _ => false,
                };
                if !accept {
                    // a forward block's line stands for a key already read (a marker, read
                    // again): reaching it is no break, so a second pass reads the same
                    broken = block.is_none();
                    break;
                }
                if foreign == 2 {
                    crossed = true;
                    if short_landing && !at_width {
                        provisional = Some(top);
                    }
                }
                foreign = 0;
                any_full |= line.width.is_none_or(|w| w >= MIN_FULL_BACK) || block.is_some();
                top = Some(line.material);
                if block.is_some() {
                    break;
                }
                if first_body.is_none() {
                    first_body = Some(j);
                }
                below = Some(line);
                below_seg = Some(j);
            }
            None => {
                if r.class == Class::Blank && !(r.marked && s.first) {
                    continue;
                }
                if is_prompt(&scan.text[s.start..s.end]) {
                    continue;
                }
                if s.has_value_marker && foreign >= 2 {
                    // what another rule redacted stands where the read would cross: a first
                    // pass read the line as written and could not cross to it either
                    broken = true;
                    break;
                }
                foreign += 1;
                if foreign >= 3 {
                    broken = key_above(scan, j, wrap_trailing, owner);
                    break;
                }
            }
        }
    }
    if let Some(saved) = provisional {
        // the text (or the read's reach) ended above the short last line a crossing landed
        // on: no full line confirms it, and no break is seen either, as at a text's start
        top = saved;
    }
    if broken && !any_full {
        // the part below a break that holds no full line is published
        return None;
    }
    top
}

/// Whether the first line above segment `j` that is not blank reads like a key's (a look
/// bounded to a few segments).
fn key_above(scan: &Scan<'_>, mut j: usize, wrap: Wrap<'_>, owner: &[Option<usize>]) -> bool {
    for _ in 0..8 {
        if j == 0 {
            return false;
        }
        j -= 1;
        let s = &scan.segs[j];
        if !s.arms.is_empty() || owner[j].is_some() {
            return false;
        }
        if s.has_value_marker {
            // what another rule redacted may have read as a key's line to a pass that saw it
            // as written: a read stopped below it publishes what it stopped on, as that pass
            // did (a block that pass read is a key's marker, which a second pass never reads)
            return true;
        }
        let r = read(scan, (s.start, s.end), wrap, s.first);
        if r.class == Class::Blank {
            continue;
        }
        // only the line straight above the three: a stream holds a key's line until four
        // lines that cannot be one follow it, so no look may reach further
        return back_line(&r).is_some();
    }
    false
}
