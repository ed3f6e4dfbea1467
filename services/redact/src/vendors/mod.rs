//! Vendor token rules as data: one row per documented token format in `rules/vendors.tsv`
//! ([`table`]), found by
//! one search for every row's keywords ([`search`]) and read at each keyword by that row's
//! shape, anchored where the keyword starts.
//!
//! A row's keyword is a literal every token of its shape starts with (a prefix such as
//! `SG.` or `dop_v1_`, or a key the value follows, such as `AccountKey=`); its shape is an
//! ASCII regex that must match at the keyword, with an optional `(?P<s>…)` group naming the
//! part redacted (the whole match otherwise). A match is claimed when:
//! - the keyword starts a word: the byte before it is no ASCII letter, digit or `_`, or is
//!   the letter of an escape (`\n`, `\t`, `\r`: a JSON string's or a log's escaped break) —
//!   unless the row has a CRC checksum, which is evidence enough for a token glued to a word;
//! - the match ends a word: no ASCII letter or digit follows it (a longer run is some other
//!   string);
//! - its checksum holds, for a row whose vendor documents one, or what it encodes reads as its
//!   vendor documents it (Docker's `auth`, base64 of `user:password`) ([`Checksum`]).
//!
//! Like every token, a match is one line: it is read inside the keyword's line, never across
//! an armour (`-----`), and never longer than the shape allows ([`MAX_UNBOUNDED`] for a
//! shape with no upper bound). That bound is what keeps the rule linear: each keyword is read
//! over at most its shape's longest match.

pub(crate) mod named;
mod search;
mod table;
mod word_starts;

use std::sync::LazyLock;

use memchr::memmem;
use regex::Regex;

use crate::{Claim, Kind};

pub(crate) use table::RULES;

/// A checksum a vendor documents inside its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// none documented: the shape alone decides
    None,
    /// GitHub's (and npm's) format: after the `prefix_`, 30 base62 characters and then the
    /// CRC32 of those 30, in base62 (`0-9A-Za-z`), left-padded with `0` to 6 characters.
    Crc32Base62,
    /// Docker's `auth` (and HTTP Basic's): base64 of `user:password`, whose password is no
    /// stand-in (`user:pass`, `my_username:my_password`, as documentation writes one)
    Base64UserPassword,
}

/// One vendor token format.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// the vendor, as it names itself
    pub vendor: &'static str,
    /// the marker's name: what the token is
    pub kind: &'static str,
    /// literals a token of this shape starts with, matched case-sensitively
    pub keywords: &'static [&'static str],
    /// the shape, an ASCII regex matched where a keyword starts
    pub shape: &'static str,
    pub checksum: Checksum,
    /// where the format is documented
    pub source: &'static str,
    /// a text the row redacts
    pub positive: &'static str,
    /// the part of `positive` that must be gone
    pub secret: &'static str,
    /// a text the row leaves alone
    pub negative: &'static str,
}

/// A shape whose length varies up to this or more is a long token's ([`Shape::variable`]).
const LONG_TOKEN: usize = 256;

/// The longest a shape with no upper bound is read.
pub const MAX_UNBOUNDED: usize = 1024;

/// What a keyword found by the search is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// a vendor row's keyword
    Row(usize),
    /// a word a secret's name ends in ([`crate::context`]), of this length
    NameWord(usize),
    /// a vendor's name that a key of row `.0` of [`named`] follows, of length `.1`
    Named(usize, usize),
}

/// The rows, compiled.
struct Compiled {
    /// every row's keywords and the context rule's name words
    search: search::Search,
    shapes: Vec<Shape>,
}

/// A row's shape, compiled.
struct Shape {
    /// anchored where the keyword starts
    regex: Regex,
    /// it names the part claimed (`(?P<s>…)`)
    grouped: bool,
    /// its longest match, at most [`MAX_UNBOUNDED`]: how far a keyword is read
    longest: usize,
    /// its length varies up to hundreds of characters (`{250,1000}`, `{40,}`): a token
    /// running on past the longest is still the token, read to its run's end (an exact or a
    /// short format's longer run is another string)
    variable: bool,
}

fn compile(rules: &[Rule]) -> Compiled {
    // each keyword, what it is, and whether it is read anywhere: a checksummed row's (its
    // checksum is evidence enough for a token glued to a word), one not starting with a word's
    // byte, and the name words; every other row's only where a word starts
    let mut keywords: Vec<(String, Found, bool)> = Vec::new();
    let mut shapes = Vec::with_capacity(rules.len());
    for (row, rule) in rules.iter().enumerate() {
        for &keyword in rule.keywords {
            let word_first = keyword
                .as_bytes()
                .first()
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
            let anywhere = rule.checksum == Checksum::Crc32Base62 || !word_first;
            keywords.push((keyword.to_owned(), Found::Row(row), anywhere));
        }
        let pattern = format!("(?-u)^(?:{})", rule.shape);
        let regex = Regex::new(&pattern)
            .unwrap_or_else(|e| panic!("the shape of {} is no regex: {e}", rule.kind));
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(&pattern)
            .ok();
        let properties = hir.as_ref().map(|hir| hir.properties());
        let longest = properties
            .and_then(|p| p.maximum_len())
            .unwrap_or(MAX_UNBOUNDED)
            .min(MAX_UNBOUNDED);
        let shortest = properties.and_then(|p| p.minimum_len()).unwrap_or(0);
        let grouped = regex.capture_names().flatten().any(|name| name == "s");
        shapes.push(Shape {
            regex,
            grouped,
            longest,
            variable: shortest < longest && longest >= LONG_TOKEN,
        });
    }
    for word in crate::context::spellings() {
        let len = word.len();
        keywords.push((word, Found::NameWord(len), true));
    }
    // the vendors' names, read where a word starts
    for (row, rule) in named::named_rules().iter().enumerate() {
        for keyword in rule.keywords {
            for spelling in named::spellings(keyword) {
                let len = spelling.len();
                keywords.push((spelling, Found::Named(row, len), false));
            }
        }
    }
    Compiled {
        search: search::Search::new(&keywords),
        shapes,
    }
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| compile(&RULES));
static ARMOUR: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new("-----"));

/// Whether a keyword at `at` starts a word.
fn starts_word(bytes: &[u8], at: usize) -> bool {
    let Some(&before) = at.checked_sub(1).and_then(|i| bytes.get(i)) else {
        return true;
    };
    if !word_starts::WORD[before as usize] {
        return true;
    }
    // an escaped break or tab, as a JSON string or a log writes it
    matches!(before, b'n' | b't' | b'r') && at >= 2 && bytes[at - 2] == b'\\'
}

/// Whether a keyword at `at` follows a word and a dot: a file's extension or a member's name
/// (`video_box.ico-7a38….png`), not a token standing on its own.
fn after_a_dotted_name(bytes: &[u8], at: usize) -> bool {
    at >= 2 && bytes[at - 1] == b'.' && word_starts::WORD[bytes[at - 2] as usize]
}

/// Pushes one claim per vendor token in the text, and one per secret-named key's random
/// value ([`crate::context`]), in one search.
pub(crate) fn find(text: &str, out: &mut Vec<Claim>) {
    let compiled = &*COMPILED;
    let bytes = text.as_bytes();
    // per row, where its last claim ended: a keyword inside it is read no further
    let mut claimed_to: Vec<(usize, usize)> = Vec::new();
    let mut context_after = 0;
    // where the last vendor-named key ended: a name inside it names nothing
    let mut named_after = 0;
    for hit in compiled.search.hits(text) {
        let start = hit.start;
        let keyword_is_word = hit
            .keyword
            .as_bytes()
            .first()
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
        let word_starts = !keyword_is_word || starts_word(bytes, start);
        for &found in hit.found {
            match found {
                Found::NameWord(len) => {
                    crate::context::at_word(text, start, start + len, &mut context_after, out);
                }
                Found::Named(row, len) => {
                    if word_starts
                        && start >= named_after
                        && let Some(claim) = named::read(row, text, start, start + len)
                    {
                        named_after = claim.end;
                        out.push(claim);
                    }
                }
                Found::Row(row) => {
                    let rule = &RULES[row];
                    let until = claimed_to
                        .iter()
                        .find(|(r, _)| *r == row)
                        .map_or(0, |(_, to)| *to);
                    // a checksum is evidence enough: such a token is read even glued to a word
                    if start < until
                        || (rule.checksum == Checksum::None
                            && (!word_starts || after_a_dotted_name(bytes, start)))
                    {
                        continue;
                    }
                    if let Some(claim) = read_row(compiled, row, text, start) {
                        match claimed_to.iter_mut().find(|(r, _)| *r == row) {
                            Some(entry) => entry.1 = claim.end,
                            None => claimed_to.push((row, claim.end)),
                        }
                        out.push(claim);
                    }
                }
            }
        }
    }
}

/// How often each keyword is found in `text` (what the search stops at), most often first: for
/// the throughput bench, which prints the commonest.
pub fn keyword_hits(text: &str) -> Vec<(String, usize)> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for hit in COMPILED.search.hits(text) {
        *counts.entry(hit.keyword).or_default() += 1;
    }
    let mut out: Vec<(String, usize)> = counts
        .into_iter()
        .map(|(keyword, n)| (keyword.to_owned(), n))
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Reads row `row`'s shape at `start`: its claim, when the shape matches there, ends a word and
/// carries its checksum.
fn read_row(compiled: &Compiled, row: usize, text: &str, start: usize) -> Option<Claim> {
    let bytes = text.as_bytes();
    let rule = &RULES[row];
    let Shape {
        regex,
        grouped,
        longest,
        variable,
    } = &compiled.shapes[row];
    let mut end = (start + longest).min(text.len());
    if let Some(at) = memchr::memchr(b'\n', &bytes[start..end]) {
        end = start + at;
    }
    if let Some(at) = ARMOUR.find(&bytes[start..end]) {
        end = start + at;
    }
    // a shape is ASCII: a window cut inside a character ends before it
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let window = &text[start..end];
    let found = regex.find(window)?;
    let after = start + found.end();
    // a longer run is another string, unless a variable-length token ran past its longest
    let mut run_end = after;
    if bytes.get(after).is_some_and(u8::is_ascii_alphanumeric) {
        if !*variable {
            return None;
        }
        while run_end < text.len()
            && is_token_byte(bytes[run_end])
            && !bytes[run_end..].starts_with(b"-----")
        {
            run_end += 1;
        }
    }
    if !checksum_holds(rule.checksum, found.as_str()) {
        return None;
    }
    let (from, mut to) = if *grouped {
        regex
            .captures(window)
            .and_then(|caps| caps.name("s"))
            .map_or((found.start(), found.end()), |s| (s.start(), s.end()))
    } else {
        (found.start(), found.end())
    };
    if to == found.end() {
        to = run_end - start;
    }
    (from < to).then(|| Claim {
        start: start + from,
        end: start + to,
        kind: Kind::Token(rule.kind),
    })
}

/// A byte a token's run is made of: base64's and base64url's alphabets, `.` `~` and `=`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~')
}

/// Whether a token carries the checksum its vendor documents.
pub fn checksum_holds(checksum: Checksum, token: &str) -> bool {
    match checksum {
        Checksum::None => true,
        Checksum::Crc32Base62 => {
            let Some((_, body)) = token.rsplit_once('_') else {
                return false;
            };
            if body.len() != 36 || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return false;
            }
            let (random, check) = body.split_at(30);
            base62_padded(crc32fast::hash(random.as_bytes()), 6) == check
        }
        Checksum::Base64UserPassword => base64_user_password_holds(token),
    }
}

/// Whether the base64 run that ends `token` decodes to `user:password` with a password that is
/// no stand-in ([`Checksum::Base64UserPassword`]).
fn base64_user_password_holds(token: &str) -> bool {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let run_start = token
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
        .map_or(0, |at| at + 1);
    let Ok(decoded) = LENIENT.decode(&token[run_start..]) else {
        return false;
    };
    let Ok(pair) = std::str::from_utf8(&decoded) else {
        return false;
    };
    pair.split_once(':').is_some_and(|(user, password)| {
        !user.contains(['\n', '\r'])
            && !password.is_empty()
            && !crate::is_placeholder_password(password)
            && !crate::password::is_stand_in_password(password)
    })
}

/// `value` in base62 (`0-9A-Za-z`), left-padded with `0` to `width`.
pub fn base62_padded(mut value: u32, width: usize) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut digits = Vec::new();
    while value > 0 {
        digits.push(DIGITS[(value % 62) as usize]);
        value /= 62;
    }
    while digits.len() < width {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).expect("base62 digits are ASCII")
}

/// The table as the crate shows it: each row's vendor, kind and keywords.
pub fn rules() -> &'static [Rule] {
    &RULES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_compiles_and_names_a_keyword() {
        let compiled = &*COMPILED;
        assert_eq!(compiled.shapes.len(), RULES.len());
        assert!(compiled.shapes.iter().any(|shape| shape.variable));
        for rule in RULES.iter() {
            assert!(!rule.keywords.is_empty(), "{} has no keyword", rule.kind);
            for keyword in rule.keywords {
                // the shape must be able to start with each of its keywords
                assert!(
                    keyword.len() >= 2,
                    "{}: keyword {keyword:?} too short",
                    rule.kind
                );
            }
        }
    }

    #[test]
    fn the_github_checksum_is_crc32_in_base62() {
        let random = "abcdefghijklmnopqrstuvwxyz0123";
        let check = base62_padded(crc32fast::hash(random.as_bytes()), 6);
        assert_eq!(check.len(), 6);
        assert!(checksum_holds(
            Checksum::Crc32Base62,
            &format!("ghp_{random}{check}")
        ));
        assert!(!checksum_holds(
            Checksum::Crc32Base62,
            &format!("ghp_{random}000000")
        ));
        assert_eq!(base62_padded(0, 6), "000000");
        assert_eq!(base62_padded(61, 2), "0z");
        assert_eq!(base62_padded(62, 2), "10");
    }

    #[test]
    fn a_keyword_after_a_dotted_name_is_a_files_or_a_members_name() {
        let file = "http://assets.r7.com/media/video_box.ico-7a388b69018576d24b59331fd60aab0c.png";
        assert_eq!(crate::redact(file), file);
        let key = "INFRACOST_API_KEY=ico-7a388b69018576d24b59331fd60aab0c";
        assert!(crate::redact(key).contains("[REDACTED:"), "{key}");
        let sentence = "the key. ico-7a388b69018576d24b59331fd60aab0c";
        assert!(crate::redact(sentence).contains("[REDACTED:"), "{sentence}");
    }

    #[test]
    fn a_keyword_after_an_escaped_break_starts_a_word() {
        let bytes = br"x\nSG.";
        assert!(starts_word(bytes, 3));
        assert!(!starts_word(b"xnSG.", 2));
        assert!(starts_word(b" SG.", 1));
    }
}
