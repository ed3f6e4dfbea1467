//! Password values: the value after a password's key, in every form a text writes it, the value
//! alone replaced.
//!
//! A key is a name ending in `password`, `passwd`, `passphrase` or `pwd` (any case; not the
//! shell's own `PWD` and `OLDPWD`), or in a `pass` segment (`db_pass`, `SMTP-PASS`), closed by
//! its own string's quote or by the markup it is written in, and followed by `:`, `=`, `:=`,
//! `==`, `===`, `!=`, `!==` or `=>`. The value is read on the key's line, or — when nothing follows the
//! separator there but the punctuation a wrapping writes after every line — on the first line
//! below that is not blank, past the gutter it shares with the key's line.
//!
//! Every scan here moves forward: a key's name is read back at most [`NAME_BACK_LIMIT`] bytes,
//! and a read below its line passes only lines holding no key, each of which belongs to one
//! key's read at most, so the rule is linear in the text's length.

pub(crate) mod code;
mod key;
mod words;

use crate::lines::Line;
use crate::{Claim, Kind, MARKER_PREFIX};
use key::*;
pub(crate) use words::mentions_key_word;
use words::{Hit, key_words, matcher};

/// The words a key's name ends in.
const KEY_WORDS: &[&str] = &["password", "passwd", "passphrase", "pwd", "pass"];

/// The key word that is one only as its name's last segment (`db_pass`, `SMTP-PASS`,
/// `mysql.pass`, `--pass`): alone (`PASS: test_x`) or run into a word (`bypass`) it is none.
const SEGMENT_WORD: &str = "pass";

/// How far back from its last word a key's name is read (`db_password`, `user.password`).
const NAME_BACK_LIMIT: usize = 256;

/// How many words a label may put before the key word on a value's line (`Retype password:`)
/// for that line to be read as holding a key where the value would be.
const LABEL_WORDS: usize = 3;

const ARMOUR: &str = "-----";

/// What follows a separator is read as a wrapping's punctuation only up to this length.
const WRAP_LIMIT: usize = 64;

/// The last position of each quote on the key's line, so an unclosed quote costs no scan.
type LastQuotes = [(u8, Option<usize>); 3];

/// A marker is never longer than this (its kind's name is short).
const MARKER_LIMIT: usize = 64;

/// A password's key as the text writes it.
#[derive(Debug, Clone, Copy)]
struct Key {
    /// the index of the key's line
    line: usize,
    /// where the key starts: its own string's opening quote, or its name
    start: usize,
    /// where its name starts
    name: usize,
    /// where its separator starts
    sep_at: usize,
    /// where its separator ends
    sep_end: usize,
    /// where what follows the separator starts, past the markup closing the key and spaces
    rest: usize,
    /// a table's `|` closed the key after its separator
    pipe: bool,
    /// where that `|` stands
    pipe_at: Option<usize>,
}

/// What a key's read still waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// decided by the text as it stands
    No,
    /// the value is on a line not written yet
    Below,
    /// punctuation and more follow the key: it waits for one more line
    OneLine,
}

/// The outcome of reading one key's value.
#[derive(Debug)]
struct Read {
    key: Key,
    /// value ranges redacted
    values: Vec<(usize, usize)>,
    /// keys starting before this are inside the value
    consumed: usize,
    /// the line the value was read on, when below the key's
    below: Option<usize>,
    /// the line below the key's that decided the read (its value, or what ended it)
    decided_by: Option<usize>,
    pending: Pending,
    /// the read went below the key's line with nothing after the separator
    bare: bool,
}

/// A marker or a value already claimed starting at `at`: where it ends.
fn unit_at(text: &str, at: usize, claimed: &[(usize, usize)]) -> Option<usize> {
    if text.as_bytes()[at..].starts_with(MARKER_PREFIX.as_bytes()) {
        let window = &text.as_bytes()[at..text.len().min(at + MARKER_LIMIT)];
        let close = memchr::memchr(b']', window)?;
        return Some(at + close + 1);
    }
    let index = claimed.partition_point(|span| span.0 < at);
    claimed
        .get(index)
        .filter(|span| span.0 == at)
        .map(|span| span.1)
}

fn skip_spaces(bytes: &[u8], mut at: usize, end: usize) -> usize {
    while at < end && bytes[at] == b' ' {
        at += 1;
    }
    at
}

/// The end of a digit run and of a fraction after it (`.123`, `,5`).
fn digits_end(bytes: &[u8], mut at: usize, end: usize) -> usize {
    while at < end && bytes[at].is_ascii_digit() {
        at += 1;
    }
    at
}

fn fraction_end(bytes: &[u8], at: usize, end: usize) -> Option<usize> {
    if at + 1 < end && matches!(bytes[at], b'.' | b',') && bytes[at + 1].is_ascii_digit() {
        Some(digits_end(bytes, at + 1, end))
    } else {
        None
    }
}

/// Where the gutter the value's line shares with the key's line ends: read from both lines'
/// starts, numbers moving on and a fraction written on one line alone still the gutter, ending
/// where a word of both lines does, where the key's line reaches its key, or before a marker
/// or a value already claimed on either line.
fn gutter(
    text: &str,
    key_from: usize,
    key_to: usize,
    line: Line,
    claimed: &[(usize, usize)],
) -> usize {
    let bytes = text.as_bytes();
    let (mut i, mut j) = (key_from, line.start);
    let mut best = line.start;
    loop {
        if i >= key_to {
            if i == key_to {
                best = j;
            }
            return best;
        }
        if j >= line.end {
            return best;
        }
        // A marker or a value stands where a second pass sees a marker: the gutter
        // ends before it, so both passes read the same gutter.
        if unit_at(text, i, claimed).is_some() || unit_at(text, j, claimed).is_some() {
            return best;
        }
        let (a, b) = (bytes[i], bytes[j]);
        if a.is_ascii_digit() && b.is_ascii_digit() {
            i = digits_end(bytes, i, key_to);
            j = digits_end(bytes, j, line.end);
            // a fraction written on one line alone is the gutter's; where the other line has
            // the same separator there (its digits a value, or a marker a pass left), the two
            // are read alike
            match (
                fraction_end(bytes, i, key_to),
                fraction_end(bytes, j, line.end),
            ) {
                (Some(end), None) if bytes.get(j) != bytes.get(i) => i = end,
                (None, Some(end)) if bytes.get(i) != bytes.get(j) => j = end,
                _ => {}
            }
            continue;
        }
        if a != b {
            // a right-aligned number: spaces on one line where the other has digits
            let ni = skip_spaces(bytes, i, key_to);
            let nj = skip_spaces(bytes, j, line.end);
            if (ni > i || nj > j)
                && bytes.get(ni).is_some_and(u8::is_ascii_digit)
                && bytes.get(nj).is_some_and(u8::is_ascii_digit)
                && ni < key_to
                && nj < line.end
            {
                i = ni;
                j = nj;
                continue;
            }
            return best;
        }
        i += 1;
        j += 1;
        // a backslash escapes what follows it: a gutter never ends inside an escape
        if !is_word_byte(a) && a != b'\\' {
            best = j;
        }
    }
}

/// Where a value starting at `at` ends: at whitespace, one of `stops`, a marker or an armour.
fn word_end(text: &str, at: usize, end: usize, stops: &[u8]) -> usize {
    let mut pos = at;
    for (offset, ch) in text[at..end].char_indices() {
        pos = at + offset;
        if ch.is_whitespace() {
            return pos;
        }
        if ch.is_ascii() {
            let byte = ch as u8;
            if stops.contains(&byte) || stops_value(text, pos) {
                return pos;
            }
        }
        pos += ch.len_utf8();
    }
    pos.max(at).min(end)
}

/// A marker or an armour at `at` ends a value.
fn stops_value(text: &str, at: usize) -> bool {
    let rest = &text[at..];
    rest.starts_with(MARKER_PREFIX) || rest.starts_with(ARMOUR)
}

/// A quoted value's content starting after `quote` at `at`: where it ends (before its closing
/// quote, a marker or an armour) and where its read ends, or None when the quote is not
/// closed on the line.
fn quoted_end(text: &str, at: usize, end: usize, quote: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut pos = at;
    while pos < end {
        if text[pos..end].starts_with(quote) {
            return Some((pos, pos + quote.len()));
        }
        if stops_value(text, pos) {
            // a marker or an armour ends the value, whatever follows it: what follows can be
            // redacted too, quote and all
            return Some((pos, pos));
        }
        if bytes[pos] == b'\\' && quote.len() == 1 && pos + 1 < end {
            pos += 1;
        }
        pos += 1;
        while pos < end && !text.is_char_boundary(pos) {
            pos += 1;
        }
    }
    None
}

/// Whether a password's value is a stand-in for one, beyond [`crate::is_placeholder_password`]:
/// the name of a secret, a template, or a value that says it is fake (code.rs).
pub(crate) fn is_stand_in_password(value: &str) -> bool {
    code::is_stand_in_value(value) || code::names_a_secret(value) || code::is_template(value)
}

/// Splits a value at escaped line breaks inside it (`ab\ncd`): the pieces redacted, the breaks
/// left; a piece after a break that is punctuation alone reads as a string's closing and stays.
fn push_value(text: &str, start: usize, end: usize, values: &mut Vec<(usize, usize)>) {
    // a stand-in is no password (`password: "pass"`, `to_pass = "-"`), nor a name or a
    // template standing where one goes (code.rs)
    if crate::is_placeholder_password(&text[start..end]) || is_stand_in_password(&text[start..end])
    {
        return;
    }
    let bytes = text.as_bytes();
    let mut piece = start;
    let mut first = true;
    let mut pos = start;
    while pos < end {
        if bytes[pos] != b'\\' {
            pos += 1;
            continue;
        }
        let mut after = pos;
        while after < end && bytes[after] == b'\\' {
            after += 1;
        }
        let mut brk = None;
        if after < end && bytes[after] == b'n' {
            brk = Some(after + 1);
        } else if after < end && bytes[after] == b'r' {
            let mut next = after + 1;
            while next < end && bytes[next] == b'\\' {
                next += 1;
            }
            if next > after + 1 && next < end && bytes[next] == b'n' {
                brk = Some(next + 1);
            }
        }
        match brk {
            Some(brk_end) => {
                push_piece(text, piece, pos, first, values);
                first = false;
                piece = brk_end;
                pos = brk_end;
            }
            None => pos = after.max(pos + 1),
        }
    }
    push_piece(text, piece, end, first, values);
}

fn push_piece(text: &str, start: usize, end: usize, first: bool, values: &mut Vec<(usize, usize)>) {
    if start >= end {
        return;
    }
    if !first && !text[start..end].chars().any(char::is_alphanumeric) {
        return;
    }
    values.push((start, end));
}

/// Whether a key's name starts where a value would be on `line`, at `at`: the line's first
/// word holds a key, or a short label of letters leads to one (`Retype password:`).
fn key_where_value(
    text: &str,
    lines: &[Line],
    line_index: usize,
    at: usize,
    claimed: &[(usize, usize)],
) -> bool {
    let line = lines[line_index];
    let mut words = 0;
    let mut pos = at;
    while pos < line.end && words <= LABEL_WORDS {
        let end = word_end(text, pos, line.end, &[]);
        let end = if end == pos {
            // a marker or armour opens the word
            return false;
        } else {
            end
        };
        for hit in matcher().find_iter(&text[pos..end]) {
            if key_at(
                text,
                lines,
                line_index,
                pos + hit.start(),
                pos + hit.end(),
                claimed,
            )
            .is_some()
            {
                return true;
            }
        }
        if !text[pos..end].chars().all(char::is_alphabetic) {
            return false;
        }
        words += 1;
        pos = skip_blanks(text, end, line.end);
    }
    false
}

/// Whether a line holds a key at all.
fn has_key(text: &str, lines: &[Line], line_index: usize, claimed: &[(usize, usize)]) -> bool {
    let line = lines[line_index];
    matcher().find_iter(&text[line.start..line.end]).any(|hit| {
        key_at(
            text,
            lines,
            line_index,
            line.start + hit.start(),
            line.start + hit.end(),
            claimed,
        )
        .is_some()
    })
}

/// Reads a key's value.
fn read(
    text: &str,
    lines: &[Line],
    key: Key,
    claimed: &[(usize, usize)],
    last_quotes: &LastQuotes,
) -> Read {
    let line = lines[key.line];
    let mut out = Read {
        key,
        values: Vec::new(),
        consumed: key.rest,
        below: None,
        decided_by: None,
        pending: Pending::No,
        bare: false,
    };
    let opener = &text[opener_start(text, line.start, key.start, claimed)..key.start];
    let rest = &text[key.rest..line.end];
    // Only a short rest can be a wrapping's punctuation; a long one is never read whole here.
    let trimmed = if rest.len() <= WRAP_LIMIT {
        rest.trim()
    } else {
        "\u{0}"
    };
    if trimmed.is_empty() || is_wrapping(trimmed) {
        let punct = if trimmed.is_empty() && key.pipe {
            "|"
        } else {
            trimmed
        };
        out.bare = punct.is_empty();
        read_below(text, lines, key, punct, claimed, &mut out);
        return out;
    }
    if stops_value(text, key.rest) {
        return out;
    }
    // code naming a password without holding one: a type, a call, a variable, a reference
    if code::is_code(text, &key, key.rest, line.end) {
        return out;
    }
    // A quote closing the string the key was written in, then more: the next field.
    for quote in ["\\\"", "\"", "'"] {
        if rest.starts_with(quote) && count(opener, quote) % 2 == 1 {
            out.pending = Pending::OneLine;
            out.consumed = key.rest + quote.len();
            return out;
        }
    }
    for quote in ["\\\"", "\"", "'", "`"] {
        if let Some(after) = rest.strip_prefix(quote) {
            let from = key.rest + quote.len();
            let closable = quote
                .bytes()
                .last()
                .and_then(|byte| last_quotes.iter().find(|(q, _)| *q == byte))
                .is_none_or(|(_, last)| last.is_some_and(|last| last >= from));
            let closed = if closable {
                quoted_end(text, from, line.end, quote)
            } else {
                None
            };
            if let Some((end, close)) = closed {
                push_value(text, from, end, &mut out.values);
                out.consumed = close;
                return out;
            }
            // Unclosed, then a space or punctuation: a quote closing a string, then the next
            // field (whether or not the key's line still shows the string's opening quote).
            if after
                .chars()
                .next()
                .is_none_or(|ch| ch.is_whitespace() || (ch.is_ascii_punctuation() && ch != '['))
            {
                out.pending = Pending::OneLine;
                out.consumed = from;
                return out;
            }
            let end = word_end(text, from, line.end, &[]);
            push_value(text, from, end, &mut out.values);
            out.consumed = end;
            return out;
        }
    }
    let mut stops: Vec<u8> = Vec::new();
    for (quote, byte) in [("\"", b'"'), ("'", b'\''), ("`", b'`')] {
        if count(opener, quote) % 2 == 1 {
            stops.push(byte);
        }
    }
    if key.pipe || opener.contains('|') {
        stops.push(b'|');
    }
    if count(opener, "**") % 2 == 1 {
        stops.push(b'*');
    }
    let end = word_end(text, key.rest, line.end, &stops);
    // a connection string's next field (`Pwd=x;Encrypt=yes`) is not the value's
    let end = code::field_end(text, &key, key.rest, end);
    push_value(text, key.rest, end, &mut out.values);
    out.consumed = end;
    out
}

/// Reads a value on a line below its key: the first line that is not blank past the gutter,
/// ended before the punctuation `punct` the key's line closes with.
fn read_below(
    text: &str,
    lines: &[Line],
    key: Key,
    punct: &str,
    claimed: &[(usize, usize)],
    out: &mut Read,
) {
    let key_line = lines[key.line];
    let (quote, _) = split_quote(punct);
    for index in key.line + 1..lines.len() {
        out.decided_by = Some(index);
        let line = lines[index];
        let from = gutter(text, key_line.start, key.start, line, claimed);
        let gutter_has_key = matcher().find_iter(&text[line.start..from]).any(|hit| {
            key_at(
                text,
                lines,
                index,
                line.start + hit.start(),
                line.start + hit.end(),
                claimed,
            )
            .is_some()
        });
        if gutter_has_key {
            // the line's own key stands where the gutter would reach: it names what is there
            return;
        }
        if text[line.start..from].contains(ARMOUR) {
            // a value under a gutter that holds an armour is no value: published, as the
            // armour's own words would otherwise be read as one
            return;
        }
        let at = skip_blanks(text, from, line.end);
        let rest = &text[at..line.end];
        let blank = rest.trim().is_empty() || (!punct.is_empty() && closes_like(rest, punct));
        if blank {
            if has_key(text, lines, index, claimed) {
                return;
            }
            continue;
        }
        if stops_value(text, at) || key_where_value(text, lines, index, at, claimed) {
            return;
        }
        let at = match quote {
            Some(quote) if text[at..line.end].starts_with(quote) => at + quote.len(),
            _ => at,
        };
        let rest = &text[at..line.end];
        let (start, end) = if let Some(quote) = quote {
            match quoted_end(text, at, line.end, quote) {
                Some((end, _)) => (at, end),
                None => (at, line.end),
            }
        } else if punct == "|" {
            let end = memchr::memchr(b'|', &text.as_bytes()[at..line.end])
                .map_or(line.end, |offset| at + offset);
            let value = text[at..end].trim_end();
            (at, at + value.len())
        } else if punct.is_empty() {
            let mut value_at = at;
            let mut close = None;
            for q in ["\"", "'"] {
                if rest.starts_with(q) {
                    value_at = at + q.len();
                    close = quoted_end(text, value_at, line.end, q);
                }
            }
            match close {
                Some((end, _)) => (value_at, end),
                None => (at, word_end(text, at, line.end, &[])),
            }
        } else {
            (at, word_end(text, at, line.end, &[]))
        };
        let end = first_stop(text, start, end);
        let fits = punct.is_empty() || {
            let rem = &text[end..line.end];
            let value_has_key = matcher().find_iter(&text[start..end]).any(|hit| {
                key_at(
                    text,
                    lines,
                    index,
                    start + hit.start(),
                    start + hit.end(),
                    claimed,
                )
                .is_some()
            });
            !value_has_key && (closes_like(rem, punct) || stops_value(text, end))
        };
        if fits {
            push_value(text, start, end, &mut out.values);
            out.consumed = end;
        } else {
            // No wrapping's line: the punctuation on the key's line is the value, as *** is.
            let from = key.pipe_at.unwrap_or(key.rest);
            let end = word_end(text, from, key_line.end, &[]);
            push_value(text, from, end, &mut out.values);
            out.consumed = out.consumed.max(end);
        }
        if !out.values.is_empty() {
            out.below = Some(index);
        }
        return;
    }
    out.pending = Pending::Below;
}

/// The first marker or armour in `start..end`, or `end`.
fn first_stop(text: &str, start: usize, end: usize) -> usize {
    let bytes = text.as_bytes();
    (start..end)
        .find(|&at| matches!(bytes[at], b'[' | b'-') && stops_value(text, at))
        .unwrap_or(end)
}

/// Reads every key in the text, in order; a key inside an earlier key's value is no key.
fn scan(text: &str, lines: &[Line], each: impl FnMut(&Read)) {
    scan_hits(text, lines, &key_words(text), each);
}

/// [`scan`] over the key words found already.
fn scan_hits(text: &str, lines: &[Line], hits: &[Hit], mut each: impl FnMut(&Read)) {
    let mut consumed = 0;
    let mut line_index = 0;
    let mut claimed: Vec<(usize, usize)> = Vec::new();
    let mut last_quotes: LastQuotes = [(b'"', None), (b'\'', None), (b'`', None)];
    let mut quotes_of: Option<usize> = None;
    for hit in hits {
        if hit.start() < consumed {
            continue;
        }
        while line_index < lines.len() && lines[line_index].next <= hit.start() {
            line_index += 1;
        }
        if line_index >= lines.len() {
            break;
        }
        let Some(key) = key_at(text, lines, line_index, hit.start(), hit.end(), &claimed) else {
            continue;
        };
        // a key inside an earlier key's value is no key; a key whose own string opens with
        // the quote that closed that value is (a second pass, the value a marker, reads it)
        let name_start = ["\\\"", "\"", "'"]
            .iter()
            .find(|quote| text[key.start..].starts_with(**quote))
            .map_or(key.start, |quote| key.start + quote.len());
        if name_start < consumed {
            continue;
        }
        if quotes_of != Some(line_index) {
            let line = lines[line_index];
            let bytes = &text.as_bytes()[line.start..line.end];
            for (quote, last) in &mut last_quotes {
                *last = memchr::memrchr(*quote, bytes).map(|at| line.start + at);
            }
            quotes_of = Some(line_index);
        }
        let read = read(text, lines, key, &claimed, &last_quotes);
        consumed = read.consumed.max(key.sep_end);
        claimed.extend_from_slice(&read.values);
        each(&read);
    }
}

/// Pushes a claim for each password's value in the text.
pub(crate) fn find(text: &str, lines: &[Line], out: &mut Vec<Claim>) {
    find_with_names(text, lines, out, &mut Vec::new(), &mut Vec::new());
}

/// Pushes a claim for each password's value to `values`, and one for each password's key and
/// its separator to `names` (which the key rule never reads as a line or a piece of a key),
/// in one scan, with the lines each read looked at (`reads`, first and last line). The text's
/// tokens are markers already (the token rule's stage ran first).
pub(crate) fn find_with_names(
    text: &str,
    lines: &[Line],
    values: &mut Vec<Claim>,
    names: &mut Vec<Claim>,
    reads: &mut Vec<(usize, usize)>,
) {
    let hits = key_words(text);
    let mut compared = Vec::new();
    code::compared_literals(text, lines, &hits, &mut compared);
    for (start, end) in compared {
        // a literal is read on its key's line: that line is a read's
        let line = lines.partition_point(|line| line.next <= start);
        reads.push((line, line));
        values.push(Claim {
            start,
            end,
            kind: Kind::Password,
        });
    }
    scan_hits(text, lines, &hits, |read| {
        // the lines the read looked at: its key's, and those below it up to what decided it
        let last = read.below.or(read.decided_by).unwrap_or(read.key.line);
        reads.push((read.key.line, last.max(read.key.line)));
        names.push(Claim {
            start: read.key.start,
            end: read.key.sep_end,
            kind: Kind::Password,
        });
        for &(start, end) in &read.values {
            values.push(Claim {
                start,
                end,
                kind: Kind::Password,
            });
        }
    });
}

/// What the password rule holds back in `text` (which holds complete lines only): the
/// earliest line whose redaction could still change with what is written after it — a key
/// whose value is not decided yet waits for the line that decides it, and a key followed by
/// punctuation and more waits one line — and the reads that went below their key's line,
/// which a settled prefix never cuts in two.
pub(crate) fn hold(text: &str, lines: &[Line]) -> crate::Hold {
    let mut held: Option<usize> = None;
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut soft: Vec<(usize, usize)> = Vec::new();
    scan(text, lines, |read| {
        let line = read.key.line;
        let waits = match read.pending {
            Pending::No => false,
            Pending::Below => true,
            Pending::OneLine => line + 1 >= lines.len(),
        };
        if waits && held.is_none() {
            held = Some(line);
        }
        // a value read below its key's line is one span with the key's line
        if let Some(below) = read.below {
            spans.push((lines[line].start, lines[below].end));
        } else if let Some(decider) = read.decided_by {
            // a read a line below ended with no value: one span only while that line is
            // held by the key rule, whose block could take it and change the read
            soft.push((lines[line].start, lines[decider].end));
        }
    });
    crate::Hold {
        line: held,
        spans,
        soft,
    }
}

/// Whether a line is a password prompt: it ends in a password's key and its separator (and the
/// markup closing the key), that key neither the value of a key before it nor part of a token.
pub(crate) fn is_prompt(line: &str) -> bool {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let lines = crate::lines::split(line);
    let mut prompt = false;
    scan(line, &lines, |read| {
        prompt = read.bare && read.pending == Pending::Below && read.key.line == 0;
    });
    prompt
}

#[cfg(test)]
mod tests;
