//! Private-key blocks (PEM, PKCS#8, OpenSSH, OpenPGP), read by their structure: forward from a
//! BEGIN and back from an END that no BEGIN's block reached, under the wrappings a transcript
//! puts them in (escaped JSON strings, line numbers, timestamps, grep prefixes, diff `+`,
//! concatenated strings, echoed lines, one-line keys).
//!
//! The text is read as *segments*: its lines, further split at escaped line breaks (`\n`,
//! `\\n`), so a key inside a JSON string reads as the key it encodes. Armours and markers of a
//! key already redacted split a segment again; every scan stops at the armour next to it, so
//! the pass is linear however many armours a line holds.

use std::ops::Range;

mod hold;
mod keyish;
pub(crate) use hold::hold;
use keyish::keyish;

use regex::Regex;
use std::sync::OnceLock;

use crate::lines::Line;
use crate::{Claim, Kind, MAX_KEY_BLOCK_BYTES};

use crate::password::is_prompt;

/// The widths an encoder wraps a key's base64 at: PEM as OpenSSL and Go write it, PKCS#8 and
/// OpenPGP (64), OpenSSH (70), MIME (76).
const ENCODER_WIDTHS: [usize; 3] = [64, 70, 76];

/// A full line read back has at least this many base64 characters.
const MIN_FULL_BACK: usize = 32;

/// A piece of a key: a run this long or longer, in upper and lower case, with a digit.
const MIN_PIECE: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArmKind {
    /// BEGIN of a private key's armour
    Begin,
    /// END of a private key's armour
    End,
    /// any other armour (certificate, public key, signature): ends a key's block
    Other,
    /// a private key's marker, left by an earlier pass: ends a key's block
    Marker,
}

#[derive(Debug, Clone, Copy)]
struct Arm {
    start: usize,
    end: usize,
    kind: ArmKind,
    seg: usize,
}

/// A line of the text, or a part of one between escaped line breaks.
#[derive(Debug, Clone)]
struct Seg {
    start: usize,
    end: usize,
    /// index of the text line that holds it
    line: usize,
    /// whether it opens its text line (an escaped break does not precede it)
    first: bool,
    /// the armours and markers on it, as a range of indices into `Scan::arms`
    arms: Range<usize>,
    /// whether it holds a marker of any kind
    has_marker: bool,
    /// whether it holds a password value's marker: a value the password rule redacts after
    /// this rule reads, so a first pass reads here what a second reads as this marker
    has_value_marker: bool,
}

#[derive(Debug)]
struct Scan<'t> {
    text: &'t str,
    segs: Vec<Seg>,
    arms: Vec<Arm>,
    /// claims of other rules, merged and sorted
    claimed: Vec<(usize, usize)>,
    /// the text's lines
    lines: &'t [Line],
}

fn armour_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"-----(BEGIN|END) ([A-Z0-9][A-Z0-9 ]{0,60})-----")
            .expect("the armour pattern is a valid regex")
    })
}

fn escape_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?:\\+r)?\\+n").expect("the escaped line break pattern is a valid regex")
    })
}

fn marker_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\[REDACTED:[A-Za-z0-9_.\-]{1,64}\]").expect("the marker pattern is valid")
    })
}

fn is_private_label(label: &str) -> bool {
    label.ends_with("PRIVATE KEY") || label == "PGP PRIVATE KEY BLOCK"
}

impl<'t> Scan<'t> {
    fn new(text: &'t str, lines: &'t [Line], claimed: &[Claim]) -> Self {
        let mut segs = Vec::with_capacity(lines.len());
        // one search of the whole text: an escaped break holds no line break, so each lies
        // inside one line
        let mut escapes = escape_re().find_iter(text).peekable();
        for (index, line) in lines.iter().enumerate() {
            let mut start = line.start;
            let mut first = true;
            while let Some(m) = escapes.next_if(|m| m.start() < line.end) {
                segs.push(Seg {
                    start,
                    end: m.start(),
                    line: index,
                    first,
                    arms: 0..0,
                    has_marker: false,
                    has_value_marker: false,
                });
                start = m.end();
                first = false;
            }
            segs.push(Seg {
                start,
                end: line.end,
                line: index,
                first,
                arms: 0..0,
                has_marker: false,
                has_value_marker: false,
            });
        }

        // Armours and markers, in order of where they start.
        let mut found: Vec<(usize, usize, ArmKind)> = Vec::new();
        for caps in armour_re().captures_iter(text) {
            let (Some(all), Some(which), Some(label)) = (caps.get(0), caps.get(1), caps.get(2))
            else {
                continue;
            };
            let kind = if is_private_label(label.as_str()) {
                if which.as_str() == "BEGIN" {
                    ArmKind::Begin
                } else {
                    ArmKind::End
                }
            } else {
                ArmKind::Other
            };
            found.push((all.start(), all.end(), kind));
        }
        // each marker: where it stands, whether it is a key's, whether it is a value's
        let mut markers: Vec<(usize, usize, bool, bool)> = Vec::new();
        for m in marker_re().find_iter(text) {
            let private = m.as_str() == Kind::PrivateKey.to_string();
            let value = m.as_str() == Kind::Password.to_string();
            markers.push((m.start(), m.end(), private, value));
        }
        let mut arms = Vec::with_capacity(found.len() + markers.len());
        let mut marker_spans = Vec::new();
        {
            let (mut i, mut j) = (0, 0);
            while i < found.len() || j < markers.len() {
                let take_marker = match (found.get(i), markers.get(j)) {
                    (Some(a), Some(m)) => m.0 < a.0,
                    (None, Some(_)) => true,
                    _ => false,
                };
                if take_marker {
                    let (s, e, private, value) = markers[j];
                    j += 1;
                    marker_spans.push((s, value));
                    if private {
                        arms.push(Arm {
                            start: s,
                            end: e,
                            kind: ArmKind::Marker,
                            seg: 0,
                        });
                    }
                } else {
                    let (s, e, kind) = found[i];
                    i += 1;
                    arms.push(Arm {
                        start: s,
                        end: e,
                        kind,
                        seg: 0,
                    });
                }
            }
        }
        // Assign armours and markers to their segments (both lists are in text order).
        let mut si = 0;
        for (ai, arm) in arms.iter_mut().enumerate() {
            while si < segs.len() && segs[si].end < arm.start {
                si += 1;
            }
            if si == segs.len() {
                break;
            }
            arm.seg = si;
            let seg = &mut segs[si];
            if seg.arms.is_empty() {
                seg.arms = ai..ai + 1;
            } else {
                seg.arms.end = ai + 1;
            }
        }
        let mut si = 0;
        for (at, value) in marker_spans {
            while si < segs.len() && segs[si].end < at {
                si += 1;
            }
            if let Some(seg) = segs.get_mut(si) {
                seg.has_marker = true;
                seg.has_value_marker |= value;
            }
        }

        let mut spans: Vec<(usize, usize)> = claimed
            .iter()
            .filter(|c| c.start < c.end)
            .map(|c| (c.start, c.end))
            .collect();
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }

        Scan {
            text,
            segs,
            arms,
            claimed: merged,
            lines,
        }
    }

    fn is_claimed(&self, start: usize, end: usize) -> bool {
        let at = self.claimed.partition_point(|&(_, e)| e <= start);
        self.claimed.get(at).is_some_and(|&(s, _)| s < end)
    }

    fn line_start_of(&self, seg: usize) -> usize {
        self.lines[self.segs[seg].line].start
    }
}

// ----- reading a line -----

fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// What a line (after its wrapping's gutter and suffix) reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// nothing but the wrapping
    Blank,
    /// an RFC 1421 or OpenPGP header
    Header,
    /// OpenPGP's checksum: `=` and four base64 characters
    Checksum,
    /// base64 alone
    B64 {
        width: usize,
        upper: bool,
        lower: bool,
        digit: bool,
    },
    /// anything else
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Read {
    class: Class,
    /// the key material: the base64 (or header) after the gutter, before the suffix
    core: (usize, usize),
    /// a piece of a key opening the core
    head_piece: Option<(usize, usize)>,
    /// a piece of a key ending the core
    tail_piece: Option<(usize, usize)>,
    /// a run in upper and lower case, eight or more, opening the core
    head_run: Option<(usize, usize)>,
    /// where the base64 (with its padding) that opens the core ends
    head_b64: usize,
    /// whether the core ends in a password's key and `=` (`pwd=`, `password=`)
    password_tail: bool,
    /// whether a quote follows the base64 that opens the core (a string closing on it)
    quote_after: bool,
    /// whether the core is a path or a dotted name in upper and lower case, as wide as a
    /// full line read back
    path_like: bool,
    /// a run in upper and lower case, eight or more, ending the core
    tail_run: Option<(usize, usize)>,
    /// whether the line's gutter matched the armour line's (non-empty) gutter and held a digit
    marked: bool,
}

fn cases(s: &[u8]) -> (bool, bool, bool) {
    let mut upper = false;
    let mut lower = false;
    let mut digit = false;
    for &b in s {
        upper |= b.is_ascii_uppercase();
        lower |= b.is_ascii_lowercase();
        digit |= b.is_ascii_digit();
    }
    (upper, lower, digit)
}

fn is_path_char(b: u8) -> bool {
    is_b64(b) || matches!(b, b'.' | b'_' | b'-' | b'=')
}

fn is_path_like(core: &[u8]) -> bool {
    if core.len() < MIN_FULL_BACK || !core.iter().all(|&b| is_path_char(b)) {
        return false;
    }
    let (u, l, _) = cases(core);
    u && l
}

fn ends_in_password_key(core: &[u8]) -> bool {
    let Some(name) = core.strip_suffix(b"=") else {
        return false;
    };
    ["password", "passwd", "pwd", "passphrase"]
        .iter()
        .any(|key| {
            name.len() >= key.len()
                && name[name.len() - key.len()..].eq_ignore_ascii_case(key.as_bytes())
        })
}

fn is_run(s: &[u8]) -> bool {
    if s.len() < MIN_PIECE {
        return false;
    }
    let (u, l, _) = cases(s);
    u && l
}

fn is_piece(s: &[u8]) -> bool {
    if s.len() < MIN_PIECE {
        return false;
    }
    let (u, l, d) = cases(s);
    u && l && d
}

/// Matches the armour line's gutter against the start of `seg`, by its shape: numbers may move
/// on, whitespace runs may differ in length, a grep's `:` and `-` marks are alike, and a
/// timestamp's fraction may be written on one line and not the other. Returns the bytes of
/// `seg` the gutter covers.
fn match_gutter(seg: &[u8], gutter: &[u8]) -> Option<usize> {
    let (mut i, mut j) = (0, 0);
    while j < gutter.len() {
        let g = gutter[j];
        let s = seg.get(i).copied();
        if g.is_ascii_digit() {
            if !s.is_some_and(|c| c.is_ascii_digit()) {
                return None;
            }
            while gutter.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            while seg.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        } else if g == b' ' || g == b'\t' {
            if !s.is_some_and(|c| c == b' ' || c == b'\t') {
                return None;
            }
            while gutter.get(j).is_some_and(|&c| c == b' ' || c == b'\t') {
                j += 1;
            }
            while seg.get(i).is_some_and(|&c| c == b' ' || c == b'\t') {
                i += 1;
            }
        } else if s == Some(g)
            || ((g == b':' || g == b'-') && s.is_some_and(|c| c == b':' || c == b'-'))
        {
            i += 1;
            j += 1;
        } else if g == b'.' && gutter.get(j + 1).is_some_and(u8::is_ascii_digit) {
            j += 1;
            while gutter.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
        } else if s == Some(b'.') && seg.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while seg.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        } else {
            return None;
        }
    }
    Some(i)
}

const HEADERS: [&str; 7] = [
    "Proc-Type:",
    "DEK-Info:",
    "Version:",
    "Comment:",
    "Hash:",
    "Charset:",
    "MessageID:",
];

/// The wrapping an armour line shows: what is before its armour and what is after it.
#[derive(Debug, Clone, Copy, Default)]
struct Wrap<'a> {
    gutter: &'a str,
    suffix: &'a str,
}

fn trim_tail_punct(s: &[u8], mut end: usize, start: usize) -> usize {
    // an echo's redirection: `> file` or `>> file`
    if let Some(gt) = s[start..end].iter().rposition(|&b| b == b'>') {
        let gt = start + gt;
        let target = &s[gt + 1..end];
        let word = target.iter().filter(|b| !b.is_ascii_whitespace()).count();
        let inner_space = {
            let t = target
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(target.len());
            target[t..]
                .iter()
                .any(|b| b.is_ascii_whitespace() && *b != b'\r')
                && target[t..]
                    .iter()
                    .rposition(|b| !b.is_ascii_whitespace())
                    .is_some_and(|last| target[t..t + last].iter().any(u8::is_ascii_whitespace))
        };
        let mut from = gt;
        while from > start && s[from - 1] == b'>' {
            from -= 1;
        }
        let before_ok = from > start && matches!(s[from - 1], b' ' | b'\t' | b'"' | b'\'');
        if word > 0 && !inner_space && before_ok {
            end = from;
        }
    }
    loop {
        let before = end;
        while end > start
            && matches!(
                s[end - 1],
                b' ' | b'\t' | b'\r' | b'"' | b'\'' | b',' | b';' | b')' | b'`'
            )
        {
            end -= 1;
        }
        // the ` +` of a string concatenated across lines
        if end >= start + 2
            && s[end - 1] == b'+'
            && matches!(s[end - 2], b' ' | b'\t' | b'"' | b'\'')
        {
            end -= 1;
        }
        if end == before {
            return end;
        }
    }
}

/// Reads the part `range` of the text as a line of a key under `wrap`.
fn read(scan: &Scan<'_>, range: (usize, usize), wrap: Wrap<'_>, first_of_line: bool) -> Read {
    let text = scan.text.as_bytes();
    let (seg_start, seg_end) = range;
    let line = &text[seg_start..seg_end];
    let mut marked = false;
    let mut start = seg_start;
    if first_of_line
        && !wrap.gutter.is_empty()
        && let Some(n) = match_gutter(line, wrap.gutter.as_bytes())
        && scan.text.is_char_boundary(seg_start + n)
    {
        start = seg_start + n;
        marked = wrap.gutter.bytes().any(|b| b.is_ascii_digit());
    }
    let mut end = seg_end;
    let suffix = wrap.suffix.trim_end();
    let trimmed_end = {
        let mut e = end;
        while e > start && text[e - 1].is_ascii_whitespace() {
            e -= 1;
        }
        e
    };
    if !suffix.is_empty()
        && trimmed_end >= start + suffix.len()
        && &text[trimmed_end - suffix.len()..trimmed_end] == suffix.as_bytes()
    {
        end = trimmed_end - suffix.len();
    }
    end = trim_tail_punct(text, end, start);
    while start < end && matches!(text[start], b' ' | b'\t' | b'"' | b'\'' | b'`') {
        start += 1;
    }
    let core = &text[start..end];
    let blank = !core.iter().any(u8::is_ascii_alphanumeric) && !core.iter().any(|&b| b >= 0x80);
    let mut head_piece = None;
    let mut tail_piece = None;
    let mut head_run = None;
    let mut tail_run = None;
    let mut head_b64 = start;
    let class = if blank {
        Class::Blank
    } else if scan.is_claimed(start, end) {
        Class::Other
    } else if HEADERS.iter().any(|h| core.starts_with(h.as_bytes())) {
        Class::Header
    } else if core.len() == 5 && core[0] == b'=' && core[1..].iter().all(|&b| is_b64(b)) {
        Class::Checksum
    } else {
        let body_len = core.iter().take_while(|&&b| is_b64(b)).count();
        let pads = core[body_len..].iter().take_while(|&&b| b == b'=').count();
        if body_len > 0 && body_len + pads == core.len() && pads <= 2 {
            let (upper, lower, digit) = cases(core);
            Class::B64 {
                width: core.len(),
                upper,
                lower,
                digit,
            }
        } else {
            if body_len >= MIN_PIECE && is_piece(&core[..body_len]) {
                head_piece = Some((start, start + body_len));
            }
            if is_run(&core[..body_len]) {
                head_run = Some((start, start + body_len));
            }
            head_b64 = start + body_len + pads;
            let mut tail_body = core.len();
            while tail_body > 0 && core[tail_body - 1] == b'=' {
                tail_body -= 1;
            }
            let mut from = tail_body;
            while from > 0 && is_b64(core[from - 1]) {
                from -= 1;
            }
            if is_piece(&core[from..tail_body]) {
                tail_piece = Some((start + from, end));
            }
            if is_run(&core[from..tail_body]) {
                tail_run = Some((start + from, end));
            }
            Class::Other
        }
    };
    Read {
        class,
        core: (start, end),
        head_piece,
        tail_piece,
        head_run,
        tail_run,
        head_b64,
        password_tail: ends_in_password_key(core),
        path_like: class != Class::Blank && !scan.is_claimed(start, end) && is_path_like(core),
        quote_after: text
            .get(head_b64)
            .is_some_and(|b| matches!(b, b'"' | b'\'' | b'`')),
        marked,
    }
}

// ----- forward from a BEGIN -----

/// What reading forward from a BEGIN found.
#[derive(Debug, Clone, Copy)]
struct Block {
    start: usize,
    end: usize,
}

#[derive(Debug, Clone, Copy)]
struct Forward {
    block: Option<Block>,
    /// whether what is written after the text could still change the block
    open: bool,
    /// the END armour the block closed at, if any
    closed_at_end: Option<usize>,
    /// the last segment holding the block's key material
    last_seg: usize,
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

fn forward(scan: &Scan<'_>, ai: usize) -> Forward {
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

// ----- back from an END -----

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
fn end_line_material(bytes: &[u8], from: usize, to: usize) -> Option<usize> {
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
fn backward(scan: &Scan<'_>, ai: usize, owner: &[Option<usize>], fwd: &[Block]) -> Option<usize> {
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

// ----- what waits -----

#[cfg(test)]
mod tests;
