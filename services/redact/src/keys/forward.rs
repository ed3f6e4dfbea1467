//! Reading forward from a BEGIN: the lines below it that are the key's, to its END or to where
//! the text around the key takes over.

use super::MIN_PIECE;
use super::line::{Class, HEADERS, Read, Wrap, cases, is_b64, read};
use super::scan::{ArmKind, Scan};
use crate::MAX_KEY_BLOCK_BYTES;

/// What reading forward from a BEGIN found.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    pub(super) start: usize,
    pub(super) end: usize,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Forward {
    pub(super) block: Option<Block>,
    /// whether what is written after the text could still change the block
    pub(super) open: bool,
    /// the END armour the block closed at, if any
    pub(super) closed_at_end: Option<usize>,
    /// the last segment holding the block's key material
    pub(super) last_seg: usize,
}

/// Whether a line straight after a BEGIN (or the first line read back) can be a key's first line.
fn first_line_ok(class: Class, core_len: usize) -> bool {
    match class {
        Class::Header => true,
        Class::B64 {
            upper,
            lower,
            digit,
            ..
        } => {
            (core_len >= 16 && upper && lower) || (core_len >= MIN_PIECE && upper && lower && digit)
        }
        _ => false,
    }
}

struct FwdState {
    has_body: bool,
    /// a short last line the text around it closed: nothing more is the key's
    ended: bool,
    /// whether the last line taken was a piece a cut left (or a short last line)
    last_piece: bool,
    width: Option<usize>,
    seen_last: bool,
    foreign: usize,
    mat_end: usize,
    last_seg: usize,
}

impl FwdState {
    /// Takes a line's reading; returns false when the line is not the key's.
    fn take(&mut self, r: &Read, seg: usize) -> bool {
        let ok = match r.class {
            Class::Header => !self.has_body || self.width.is_none(),
            Class::Checksum => self.width.is_some(),
            // a last line that ends in a password's key and its `=` is a line interrupting the
            // key, and the value under it is the key's
            Class::B64 { .. } if r.password_tail => false,
            Class::B64 {
                width,
                upper,
                lower,
                digit,
            } => {
                let piece = width >= MIN_PIECE && upper && lower && digit;
                match self.width {
                    None => first_line_ok(r.class, width) || self.has_body,
                    // a short piece with another below it: a key cut short on every line
                    Some(_) if self.seen_last => piece && self.last_piece,
                    Some(w) => width <= w,
                }
            }
            // a line a cut wrote into: the piece of the key it still holds, at either end
            Class::Other if r.head_piece.is_some() || r.tail_piece.is_some() => true,
            // base64 with text after it: a full line with anything after it ends nothing; a
            // short one that the text around it closes is the last line, and ends the block
            Class::Other => {
                let run = r.head_b64 - r.core.0;
                match self.width {
                    Some(w)
                        if !self.seen_last
                            && run > 0
                            && (run == w || (run < w && r.quote_after)) =>
                    {
                        if run < w {
                            self.seen_last = true;
                            self.ended = true;
                        }
                        self.has_body = true;
                        self.foreign = 0;
                        self.last_piece = false;
                        self.mat_end = r.head_b64;
                        self.last_seg = seg;
                        return true;
                    }
                    _ => false,
                }
            }
            Class::Blank => false,
        };
        if !ok {
            return false;
        }
        self.last_piece = false;
        if let Class::Other = r.class {
            self.has_body = true;
            self.foreign = 0;
            self.last_piece = true;
            self.mat_end = match (r.tail_piece, r.tail_run, r.head_piece) {
                (Some((_, e)), _, _) => e,
                (None, Some((_, e)), Some(_)) => e,
                (None, _, Some((_, e))) => e,
                (None, _, None) => r.core.1,
            };
            self.last_seg = seg;
            return true;
        }
        if let Class::B64 {
            width,
            upper,
            lower,
            digit,
        } = r.class
        {
            self.last_piece = self.width.is_some_and(|w| width < w)
                || self.width.is_none()
                    && width >= MIN_PIECE
                    && upper
                    && lower
                    && digit
                    && width < 32;
        }
        match r.class {
            Class::Checksum => self.seen_last = true,
            Class::B64 { width, .. } => match self.width {
                None => {
                    // after a line a cut wrote into (or an inline head), a short line is the last
                    if self.has_body && !first_line_ok(r.class, width) {
                        self.seen_last = true;
                    }
                    self.width = Some(width);
                }
                Some(w) if width < w => self.seen_last = true,
                Some(_) => {}
            },
            _ => {}
        }
        self.has_body = true;
        self.foreign = 0;
        self.mat_end = r.core.1;
        self.last_seg = seg;
        true
    }
}

pub(super) fn forward(scan: &Scan<'_>, ai: usize) -> Forward {
    let arm = scan.arms[ai];
    let seg = &scan.segs[arm.seg];
    let text = scan.text;
    let none = |open| Forward {
        block: None,
        open,
        closed_at_end: None,
        last_seg: arm.seg,
    };
    let mut st = FwdState {
        has_body: false,
        ended: false,
        last_piece: false,
        width: None,
        seen_last: false,
        foreign: 0,
        mat_end: arm.end,
        last_seg: arm.seg,
    };
    let next_on_seg = (ai + 1 < seg.arms.end).then(|| scan.arms[ai + 1]);
    let rem_end = next_on_seg.map_or(seg.end, |a| a.start);
    let gutter = &text[seg.start..arm.start];
    if let Some(next) = next_on_seg {
        if next.kind == ArmKind::End {
            return Forward {
                block: Some(Block {
                    start: arm.start,
                    end: next.end,
                }),
                open: false,
                closed_at_end: Some(next.start),
                last_seg: arm.seg,
            };
        }
        // another armour or a marker on the same line: the block ends at its base64
        if let Some(end) = inline_material(scan, arm.end, rem_end) {
            return Forward {
                block: Some(Block {
                    start: arm.start,
                    end,
                }),
                open: false,
                closed_at_end: None,
                last_seg: arm.seg,
            };
        }
        return none(false);
    }
    // What follows the armour on its line: a key written on one line, or the wrapping's suffix.
    let mut wrap = Wrap {
        gutter,
        suffix: &text[arm.end..rem_end],
    };
    if let Some(end) = inline_material(scan, arm.end, rem_end) {
        st.has_body = true;
        st.mat_end = end;
        wrap.suffix = "";
    }
    if seg.has_marker {
        // an armour line that holds a marker holds no key read across its lines
        return if st.has_body {
            Forward {
                block: Some(Block {
                    start: arm.start,
                    end: st.mat_end,
                }),
                open: false,
                closed_at_end: None,
                last_seg: arm.seg,
            }
        } else {
            none(false)
        };
    }
    let limit = arm.end.saturating_add(MAX_KEY_BLOCK_BYTES);
    let mut open = true;
    let mut closed_at_end = None;
    let mut end = None;
    for j in arm.seg + 1..scan.segs.len() {
        let s = &scan.segs[j];
        if scan.line_start_of(j) > limit {
            open = false;
            break;
        }
        if !s.arms.is_empty() {
            let first = scan.arms[s.arms.start];
            let r = read(scan, (s.start, first.start), wrap, s.first);
            if r.class != Class::Blank {
                st.take(&r, j);
            }
            open = false;
            if first.kind == ArmKind::End && (st.has_body || st.foreign == 0) {
                end = Some(first.end);
                closed_at_end = Some(first.start);
            }
            break;
        }
        let r = read(scan, (s.start, s.end), wrap, s.first);
        if r.class == Class::Blank {
            continue;
        }
        if st.take(&r, j) {
            if st.ended {
                open = false;
                break;
            }
            continue;
        }
        // a password prompt here is a line interrupting the key, as any other line is
        if !st.has_body {
            return none(false);
        }
        st.foreign += 1;
        if st.foreign >= 2 {
            open = false;
            break;
        }
    }
    if open && text.len() > limit {
        // a line written next starts too far from the armour to be read
        open = false;
    }
    if closed_at_end.is_none() && !st.has_body {
        return none(open);
    }
    Forward {
        block: Some(Block {
            start: arm.start,
            end: end.unwrap_or(st.mat_end),
        }),
        open,
        closed_at_end,
        last_seg: st.last_seg,
    }
}

/// Key material written on an armour's own line after it: where it ends, if the line holds any.
fn inline_material(scan: &Scan<'_>, from: usize, to: usize) -> Option<usize> {
    let bytes = scan.text.as_bytes();
    let mut at = from;
    while at < to && bytes[at].is_ascii_whitespace() {
        at += 1;
    }
    if at == to || !is_b64(bytes[at]) {
        return None;
    }
    let header = HEADERS
        .iter()
        .any(|h| bytes[at..to].starts_with(h.as_bytes()));
    let run = bytes[at..to]
        .iter()
        .take_while(|&&b| is_b64(b) || b == b'=')
        .count();
    let first = &bytes[at..at + run];
    let (u, l, d) = cases(first);
    let keyish = (run >= 16 && u && l) || (run >= MIN_PIECE && u && l && d);
    if !(keyish || header) || scan.is_claimed(at, at + run) {
        return None;
    }
    // the material runs to the last base64 on the line
    let mut end = to;
    while end > at && !(is_b64(bytes[end - 1]) || bytes[end - 1] == b'=') {
        end -= 1;
    }
    Some(end)
}
