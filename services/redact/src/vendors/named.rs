//! Keys known by the vendor named before them: most vendors issue keys with no prefix of their
//! own (32 hex digits, 40 letters and digits), which a text gives away only by the vendor's
//! name written shortly before (`ABYSSALE_API_KEY=…`, `abyssale key: …`, `"mapquest": "…"`).
//! The key is a value: it follows an assignment, a quote, a blank or a tag, never a path's `/`
//! (a commit hash in a GitHub URL) or a call's `(`.
//!
//! The rows are data: `rules/named.tsv`, one per vendor's key shape — the vendor, the marker's
//! kind, the vendor's names (its keywords), the key's shape, the source the format was read
//! from, and a positive and a negative sample (`rules/build_named.py` builds the file from the
//! formats trufflehog's detectors document, and `rules/build_named_gitleaks.py` appends the
//! vendor-named rules gitleaks publishes; `tests/vendors.rs` holds each row to its samples).
//!
//! A keyword counts where a word starts, in any case (`abyssale`, `ABYSSALE`, `Abyssale`); a
//! keyword of three bytes or fewer (`box`, `mux`) only when no lower-case letter follows it (a
//! name's own segment, not `boxes`). The key is read on the keyword's line, starting within
//! [`GAP`] bytes after the keyword, as a whole word of the row's shape, and it must read as
//! random — a digit in it, or capitals and small letters both, and at least [`MIN_DISTINCT`]
//! different characters — so a vendor's name before a word, a version or `xxxx…` claims
//! nothing. Each keyword reads at most `GAP` and the shape's longest: the rule stays linear.

use std::sync::{LazyLock, OnceLock};

use regex::Regex;

use crate::{Claim, Kind};

/// How far after the vendor's name a key may start, in bytes (the name of the key and its
/// separator: `_API_KEY = "`).
pub const GAP: usize = 40;

/// A key has at least this many different characters.
const MIN_DISTINCT: usize = 5;

/// The table, as the crate holds it.
const TABLE: &str = include_str!("../../rules/named.tsv");

/// One row of `rules/named.tsv`.
#[derive(Debug, Clone, Copy)]
pub struct NamedRule {
    /// the vendor, as the source names it
    pub vendor: &'static str,
    /// the marker's name
    pub kind: &'static str,
    /// the vendor's names, lower case
    pub keywords: &'static [&'static str],
    /// the key's shape (its first group is the part redacted)
    pub shape: &'static str,
    /// where the format was read from
    pub source: &'static str,
    /// a text the row redacts
    pub positive: &'static str,
    /// a text the row leaves alone
    pub negative: &'static str,
}

pub(crate) struct Compiled {
    pub rows: Vec<NamedRule>,
    /// per row: the gap and the shape, anchored at the keyword's end, compiled when a row's
    /// keyword is first found (most texts name few vendors; compiling all of them at once
    /// took seconds in a debug build, on the runtime's thread)
    regexes: Vec<OnceLock<Regex>>,
    /// per row: its shape's longest match, bounded
    longest: Vec<usize>,
}

fn parse(table: &'static str) -> Vec<NamedRule> {
    let mut rows = Vec::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&'static str> = line.split('\t').collect();
        assert_eq!(
            fields.len(),
            7,
            "rules/named.tsv:{}: seven tab-separated fields",
            n + 1
        );
        let keywords: Vec<&'static str> = fields[2].split(',').collect();
        rows.push(NamedRule {
            vendor: fields[0],
            kind: fields[1],
            keywords: Box::leak(keywords.into_boxed_slice()),
            shape: fields[3],
            source: fields[4],
            positive: fields[5],
            negative: fields[6],
        });
    }
    rows
}

/// An ASCII word boundary wherever the shape asks for one.
fn ascii_bounds(shape: &str) -> String {
    shape.replace(r"\b", r"(?-u:\b)")
}

/// A row's regex: up to [`GAP`] bytes of its line, then its shape.
fn row_regex(row: &NamedRule) -> Regex {
    let shape = ascii_bounds(row.shape);
    Regex::new(&format!("^[^\n]{{0,{GAP}}}?(?:{shape})"))
        .unwrap_or_else(|e| panic!("rules/named.tsv: {}'s shape is no regex: {e}", row.kind))
}

pub(crate) static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let rows = parse(TABLE);
    let mut regexes = Vec::with_capacity(rows.len());
    let mut longest = Vec::with_capacity(rows.len());
    for row in &rows {
        let shape = ascii_bounds(row.shape);
        let max = regex_syntax::parse(&shape)
            .ok()
            .and_then(|hir| hir.properties().maximum_len())
            .unwrap_or(super::MAX_UNBOUNDED)
            .min(super::MAX_UNBOUNDED);
        regexes.push(OnceLock::new());
        longest.push(max);
    }
    Compiled {
        rows,
        regexes,
        longest,
    }
});

/// The rows.
pub fn named_rules() -> &'static [NamedRule] {
    &COMPILED.rows
}

/// Each keyword as a case-sensitive search finds it: lower case, capitals, capitalised.
pub(crate) fn spellings(keyword: &str) -> Vec<String> {
    let mut capitalised = keyword.to_owned();
    capitalised[..1].make_ascii_uppercase();
    let mut out = vec![
        keyword.to_owned(),
        keyword.to_ascii_uppercase(),
        capitalised,
    ];
    out.sort();
    out.dedup();
    out
}

/// Reads row `row` after its keyword at `start..end`: the key it names, if one follows.
pub(crate) fn read(row: usize, text: &str, start: usize, end: usize) -> Option<Claim> {
    let compiled = &*COMPILED;
    let bytes = text.as_bytes();
    // a short name is a name's own segment, not the start of a longer word
    if end - start <= 3 && bytes.get(end).is_some_and(u8::is_ascii_lowercase) {
        return None;
    }
    let mut until = (end + GAP + compiled.longest[row] + 1).min(text.len());
    if let Some(at) = memchr::memchr(b'\n', &bytes[end..until]) {
        until = end + at;
    }
    while !text.is_char_boundary(until) {
        until -= 1;
    }
    let window = &text[end..until];
    let regex = compiled.regexes[row].get_or_init(|| row_regex(&compiled.rows[row]));
    let caps = regex.captures(window)?;
    let key = caps.get(1).or_else(|| caps.get(0))?;
    // the key starts a word: a shape with no boundary of its own is not read from inside a
    // name (`_API_KEY=…` after `IMAGEKIT`)
    let key_start = end + key.start();
    if key_start > 0 && !is_value_start(bytes[key_start - 1]) {
        return None;
    }
    // the word ends where the window was cut: a longer run is another string
    let key_end = end + key.end();
    if key_end == until && bytes.get(until).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    // a run that goes on past the key is some longer string: the shape's `\b` is met between
    // a hyphen and a digit (a UUID's first 24 characters read as a 24-character key)
    if key.as_str().ends_with('-') && bytes.get(key_end).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    // a marker is no key (redacting twice changes nothing)
    if text[..key_start].ends_with(crate::MARKER_PREFIX) || key.as_str().contains("REDACTED") {
        return None;
    }
    if !reads_as_random(key.as_str()) {
        return None;
    }
    Some(Claim {
        start: end + key.start(),
        end: end + key.end(),
        kind: Kind::Named(compiled.rows[row].kind),
    })
}

/// Whether a byte before a key is one a value is written after: an assignment's `=` or `:`,
/// a quote, a blank, a tag's `>`, a list's `,` or `|` — not a path's `/` (a commit hash in a
/// URL), a call's `(` or a name's own letters.
fn is_value_start(b: u8) -> bool {
    matches!(
        b,
        b'=' | b':' | b'"' | b'\'' | b'`' | b' ' | b'\t' | b'>' | b',' | b'|' | b'{' | b'['
    )
}

/// A key rather than a word, a number's run or a placeholder: a digit in it, or capitals and
/// small letters both, [`MIN_DISTINCT`] different characters, and none of them half the key.
fn reads_as_random(key: &str) -> bool {
    let bytes = key.as_bytes();
    let digit = bytes.iter().any(u8::is_ascii_digit);
    let upper = bytes.iter().any(u8::is_ascii_uppercase);
    let lower = bytes.iter().any(u8::is_ascii_lowercase);
    let mut seen = [0usize; 256];
    let mut distinct = 0;
    for &b in bytes {
        if seen[b as usize] == 0 {
            distinct += 1;
        }
        seen[b as usize] += 1;
    }
    // one character for half the key is a stand-in (`000…0TUVWXYZ`), not a key drawn at random
    let most = seen.iter().copied().max().unwrap_or(0);
    (digit || (upper && lower)) && distinct >= MIN_DISTINCT && most * 2 <= bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses_and_compiles() {
        assert!(named_rules().len() > 500);
        for row in named_rules() {
            assert!(!row.keywords.is_empty(), "{} has no keyword", row.kind);
            assert!(
                row.source.starts_with("trufflehog ") || row.source.starts_with("gitleaks "),
                "{}: a row names the scanner's rule its format was read from",
                row.kind
            );
        }
    }

    #[test]
    fn a_uuids_first_groups_are_no_key() {
        let macro_id = r#"<a href="https://example.atlassian.net/wiki">x</a> <ac:structured-macro ac:macro-id="11112222-3333-4444-5555-666677778888">"#;
        assert_eq!(crate::redact(macro_id), macro_id);
        let key = "ATLASSIAN_API_KEY=H9N5Qo5EwowT1JO3CkOzYvnk";
        assert!(crate::redact(key).contains("[REDACTED:"), "{key}");
    }

    #[test]
    fn a_placeholder_or_a_word_is_no_key() {
        assert!(!reads_as_random("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
        assert!(!reads_as_random("abcdefghijklmnopqrstuvwxyzabcdef"));
        assert!(!reads_as_random(
            "00000000000000000000000000000000000TUVWXYZ"
        ));
        assert!(reads_as_random("pe92k38i5uu4yrwhmlpjdfkinnac6l0b"));
        assert!(reads_as_random("xTueOfHcGwKVdvbIUDqygjZUlcxCuxSzAY"));
    }
}
