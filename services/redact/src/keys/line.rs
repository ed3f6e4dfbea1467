//! Reading one segment as a line of a key: what it reads as under the wrapping (gutter and
//! suffix) its armour line shows, and the pieces of a key a cut left in it.

use super::scan::Scan;
use super::{MIN_FULL_BACK, MIN_PIECE};

pub(super) fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
}

/// What a line (after its wrapping's gutter and suffix) reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
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
pub(super) struct Read {
    pub(super) class: Class,
    /// the key material: the base64 (or header) after the gutter, before the suffix
    pub(super) core: (usize, usize),
    /// a piece of a key opening the core
    pub(super) head_piece: Option<(usize, usize)>,
    /// a piece of a key ending the core
    pub(super) tail_piece: Option<(usize, usize)>,
    /// a run in upper and lower case, eight or more, opening the core
    pub(super) head_run: Option<(usize, usize)>,
    /// where the base64 (with its padding) that opens the core ends
    pub(super) head_b64: usize,
    /// whether the core ends in a password's key and `=` (`pwd=`, `password=`)
    pub(super) password_tail: bool,
    /// whether a quote follows the base64 that opens the core (a string closing on it)
    pub(super) quote_after: bool,
    /// whether the core is a path or a dotted name in upper and lower case, as wide as a
    /// full line read back
    pub(super) path_like: bool,
    /// a run in upper and lower case, eight or more, ending the core
    pub(super) tail_run: Option<(usize, usize)>,
    /// whether the line's gutter matched the armour line's (non-empty) gutter and held a digit
    pub(super) marked: bool,
}

pub(super) fn cases(s: &[u8]) -> (bool, bool, bool) {
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

pub(super) fn is_path_char(b: u8) -> bool {
    is_b64(b) || matches!(b, b'.' | b'_' | b'-' | b'=')
}

pub(super) fn is_path_like(core: &[u8]) -> bool {
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

pub(super) fn is_piece(s: &[u8]) -> bool {
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
pub(super) fn match_gutter(seg: &[u8], gutter: &[u8]) -> Option<usize> {
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

pub(super) const HEADERS: [&str; 7] = [
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
pub(super) struct Wrap<'a> {
    pub(super) gutter: &'a str,
    pub(super) suffix: &'a str,
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
pub(super) fn read(
    scan: &Scan<'_>,
    range: (usize, usize),
    wrap: Wrap<'_>,
    first_of_line: bool,
) -> Read {
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
