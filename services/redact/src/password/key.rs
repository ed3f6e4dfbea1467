//! A password's key as the text writes it: its name read back from its last word, the quote
//! or markup that closes it, its separator, and the wrapping punctuation after it.

use super::*;

pub(super) fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-')
}

pub(super) fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80
}

pub(super) fn skip_blanks(text: &str, mut at: usize, end: usize) -> usize {
    let bytes = text.as_bytes();
    while at < end && matches!(bytes[at], b' ' | b'\t' | b'\r') {
        at += 1;
    }
    at
}

/// Counts non-overlapping occurrences of `needle` in `hay`.
pub(super) fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Reads the key whose last word is `word_start..word_end`, on `line`.
pub(super) fn key_at(
    text: &str,
    lines: &[Line],
    line_index: usize,
    word_start: usize,
    word_end: usize,
    claimed: &[(usize, usize)],
) -> Option<Key> {
    let line = lines[line_index];
    let bytes = text.as_bytes();
    if text[word_start..word_end].eq_ignore_ascii_case(SEGMENT_WORD)
        && !(word_start > line.start && matches!(bytes[word_start - 1], b'_' | b'-' | b'.'))
    {
        return None;
    }
    // The key word ends the name: `passwords` and `password_hash` are no keys.
    if let Some(next) = text[word_end..line.end].chars().next() {
        if next.is_alphanumeric() || next == '_' {
            return None;
        }
        if next == '-'
            && bytes
                .get(word_end + 1)
                .is_some_and(u8::is_ascii_alphanumeric)
        {
            return None;
        }
    }
    let mut floor = word_start.saturating_sub(NAME_BACK_LIMIT).max(line.start);
    // a name never reaches back into a value already read, which a second pass sees as a
    // marker, nor across an armour
    let before_word = claimed.partition_point(|span| span.1 <= word_start);
    if let Some(span) = before_word.checked_sub(1).and_then(|i| claimed.get(i)) {
        floor = floor.max(span.1);
    }
    let mut name = word_start;
    while name > floor && is_name_byte(bytes[name - 1]) {
        if bytes[..name].ends_with(ARMOUR.as_bytes()) {
            break;
        }
        name -= 1;
    }
    // The shell's working directories (`PWD=/home/…`, `OLDPWD=/tmp`, `-v $PWD:/app`) are no
    // password: an `env` dump in a transcript keeps them. Written so, in capitals, they are the
    // shell's variables; an ODBC string's `Pwd=` is still a key.
    if matches!(&text[name..word_end], "PWD" | "OLDPWD") {
        return None;
    }
    // sudoers' tags (`ALL=NOPASSWD: /usr/bin/x`) say no password is asked
    if matches!(&text[name..word_end], "NOPASSWD" | "PASSWD") {
        return None;
    }

    // A name run into a letter of another script is part of a longer word, and one after a
    // path's slash is a file's name (`/etc/passwd: No such file`), not a key.
    if text[line.start..name]
        .chars()
        .next_back()
        .is_some_and(|ch| ch.is_alphanumeric() || ch == '/' || ch == '\\')
    {
        return None;
    }
    // Part of a token run into it (sk-…Pwd:): the token stage left a marker where it found
    // one; what it did not take reads as a run of random characters straight before the word.
    if token_like(&text[name..word_start]) {
        return None;
    }
    let before = &text[line.start..name];
    let mut at = word_end;
    let mut start = name;
    // A quote only where it closes the key's own string.
    for quote in ["\\\"", "\"", "'"] {
        if text[at..line.end].starts_with(quote) {
            if before.ends_with(quote) {
                at += quote.len();
                start = name - quote.len();
                break;
            }
            return None;
        }
    }
    let opener = &text[opener_start(text, line.start, start, claimed)..start];
    at = close_markup(text, opener, at, line.end, false).0;
    at = skip_blanks(text, at, line.end);
    let after = &text[at..line.end];
    let sep = if after.starts_with("===") || after.starts_with("!==") {
        3
    } else if after.starts_with("!=") {
        2
    } else if after.starts_with("::") {
        return None;
    } else if after.starts_with(":=") || after.starts_with("==") || after.starts_with("=>") {
        2
    } else if after.starts_with(':') || after.starts_with('=') {
        1
    } else {
        return None;
    };
    // an operand of a comparison (`"v" == password:`) is no key: the literal it is compared
    // with is the value (code::compared_literals)
    if super::code::compared(text, line.start, name).is_some() {
        return None;
    }
    let sep_end = at + sep;
    let (rest, pipe) = close_markup(text, opener, sep_end, line.end, true);
    Some(Key {
        line: line_index,
        start,
        name,
        sep_at: at,
        sep_end,
        rest: skip_blanks(text, rest, line.end),
        pipe: pipe.is_some(),
        pipe_at: pipe,
    })
}

/// Where the part of the key's line that its markup and quotes are read from starts: after
/// the last marker or value already claimed before the key, which a second pass sees as
/// a marker, and at most [`NAME_BACK_LIMIT`] bytes before the key, so a long line of keys
/// stays linear.
pub(super) fn opener_start(
    text: &str,
    line_start: usize,
    key_start: usize,
    claimed: &[(usize, usize)],
) -> usize {
    let mut from = line_start.max(key_start.saturating_sub(NAME_BACK_LIMIT));
    while !text.is_char_boundary(from) {
        from += 1;
    }
    if let Some(at) = text[from..key_start].rfind(MARKER_PREFIX) {
        let marker = from + at;
        from = memchr::memchr(b']', &text.as_bytes()[marker..key_start])
            .map_or(key_start, |close| {
                past_closing_quote(text, marker, marker + close + 1, key_start)
            });
    }
    let index = claimed.partition_point(|span| span.0 < key_start);
    if let Some(span) = index.checked_sub(1).and_then(|index| claimed.get(index))
        && span.1 > from
        && span.1 <= key_start
    {
        from = past_closing_quote(text, span.0, span.1, key_start);
    }
    from.min(key_start)
}

/// After a marker or a claimed value at `start..end` (up to `limit`): past the quote that closes
/// the string it stands in (`"[REDACTED:jwt]",` → `,`; `"[REDACTED:private_key]\n",` → `,`),
/// which is that string's and not one the key's line opens. Read as opening, it made a later
/// key's quoted value look like the next field, and it leaked (`{"token":"ghp_…","password":"…"}`).
fn past_closing_quote(text: &str, start: usize, end: usize, limit: usize) -> usize {
    let Some(quote) = ["\\\"", "\"", "'"]
        .into_iter()
        .find(|quote| text[..start].ends_with(quote))
    else {
        return end;
    };
    let bytes = text.as_bytes();
    let mut at = end;
    while let Some(found) = text[at..limit].find(quote) {
        let close = at + found;
        // a plain quote escaped inside the string (`\"`) closes nothing
        let escaped = quote.len() == 1 && close > 0 && bytes[close - 1] == b'\\';
        if !escaped {
            return close + quote.len();
        }
        at = close + quote.len();
    }
    end
}

/// Whether the part of a name before its key word ends in a run of a token's random body: 16
/// characters or more between separators, with a digit.
pub(super) fn token_like(head: &str) -> bool {
    let last = head.rsplit(['_', '.', '-']).next().unwrap_or(head);
    last.len() >= 16 && last.bytes().any(|byte| byte.is_ascii_digit())
}

/// Passes the markup closing what the key's line opened before the key (`**`, `*`, a code
/// span's backtick and, after the separator, a table's `|`). Returns where it ends and whether
/// a `|` was among it.
pub(super) fn close_markup(
    text: &str,
    opener: &str,
    mut at: usize,
    end: usize,
    pipes: bool,
) -> (usize, Option<usize>) {
    let mut pipe = None;
    loop {
        let from = skip_blanks(text, at, end);
        let rest = &text[from..end];
        if rest.starts_with("**") && count(opener, "**") % 2 == 1 {
            at = from + 2;
        } else if (rest.starts_with('*') && !rest.starts_with("**") && opener.contains('*'))
            || (rest.starts_with('`') && count(opener, "`") % 2 == 1)
        {
            at = from + 1;
        } else if pipes && pipe.is_none() && rest.starts_with('|') && opener.contains('|') {
            pipe = Some(from);
            at = from + 1;
        } else {
            return (at, pipe);
        }
    }
}

/// The closing a wrapping writes after a line's last piece, after its quote: nothing, a
/// concatenation's `+`, a list's `,`, a statement's end, or a redirection to a file.
pub(super) fn is_tail(rest: &str) -> bool {
    let rest = rest.trim();
    if matches!(
        rest,
        "" | "+" | "," | ";" | ")" | ");" | "]" | "]," | "];" | "}" | "}," | "\\" | ")," | "|"
    ) {
        return true;
    }
    let Some(target) = rest.strip_prefix('>') else {
        return false;
    };
    let target = target.strip_prefix('>').unwrap_or(target).trim();
    // a file's path: an escaped break, a marker or a quote after it is no redirection's
    !target.is_empty()
        && target
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"_./~+-$&{}".contains(&byte))
}

/// The quote a wrapping's punctuation opens with, with any escaped line break before it.
pub(super) fn split_quote(punct: &str) -> (Option<&'static str>, &str) {
    let mut rest = punct;
    for escape in ["\\\\n", "\\n"] {
        if let Some(after) = rest.strip_prefix(escape) {
            rest = after;
            break;
        }
    }
    for quote in ["\\\"", "\"", "'"] {
        if let Some(after) = rest.strip_prefix(quote) {
            return (Some(quote), after);
        }
    }
    (None, rest)
}

/// Whether what follows a separator is only the punctuation a wrapping writes after every line:
/// an echo's closing quote and redirection, a concatenation's `" +`, a list's `",`, a table's `|`.
pub(super) fn is_wrapping(rest: &str) -> bool {
    let rest = rest.trim();
    if rest.is_empty() {
        return false;
    }
    if rest == "|" {
        return true;
    }
    let (quote, tail) = split_quote(rest);
    let tail = tail.trim();
    if quote.is_none() && tail == rest && !(tail.starts_with('>') || tail == "+") {
        return false;
    }
    if quote.is_some() && tail.starts_with(['"', '\'']) {
        // an empty quoted string is a value
        return false;
    }
    matches!(tail, "" | "+" | ",") || (tail.starts_with('>') && is_tail(tail))
}

/// Whether a value line's remainder after its value closes as the key's line's punctuation
/// does (or as a list's or a concatenation's last line does instead).
pub(super) fn closes_like(rem: &str, punct: &str) -> bool {
    let rem = rem.trim();
    if punct == "|" {
        return rem == "|";
    }
    let (quote, _) = split_quote(punct);
    match quote {
        Some(quote) => rem.strip_prefix(quote).is_some_and(is_tail),
        None => !rem.is_empty() && is_tail(rem),
    }
}
