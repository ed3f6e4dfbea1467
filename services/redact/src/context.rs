//! Secrets known by their key: a high-entropy value assigned to a name that says it holds one
//! (`*_SECRET`, `*_TOKEN`, `*_KEY`, `apiKey`, `client_secret`, `credentials`), in the forms env
//! files, YAML, JSON, TOML, shell and code write it — the value alone redacted, as
//! `generic_secret`.
//!
//! A value counts only when it reads as random: 16 to 512 characters of a token's alphabet,
//! letters and digits both, and at least [`MIN_ENTROPY`] bits of Shannon entropy per character
//! (a hex digest's 32 characters have about 3.6), and not a list of words (`my_secret_value_2`). Everything is read on the key's line and after its key only, so the
//! rule is line-local (a stream's settled lines read it as the whole text does) and linear
//! (each keyword reads at most one value's length ahead). Its name words are found by the
//! vendor rules' search ([`crate::vendors`]), in the same pass.

use crate::{Claim, Kind};

/// The marker's name.
pub const KIND: &str = "generic_secret";

/// The words a secret's name ends in (any case; `key` only after another word: `api_key`,
/// `apiKey`, `SIGNING_KEY`, never `key` alone).
const NAME_WORDS: &[&str] = &[
    "secret",
    "token",
    "key",
    "apikey",
    "credential",
    "credentials",
];

/// Shannon entropy per character a value must reach, in bits.
pub const MIN_ENTROPY: f64 = 3.0;

const MIN_LEN: usize = 16;
const MAX_LEN: usize = 512;

/// The name words as a case-sensitive search finds them: each as written in lower case, in
/// capitals and capitalised (`secret`, `SECRET`, `Secret`), which is every way a name writes
/// a word (`client_secret`, `API_SECRET`, `clientSecret`); `apikey` also as `ApiKey`.
pub(crate) fn spellings() -> Vec<String> {
    let mut out = Vec::new();
    for word in NAME_WORDS {
        let mut capitalised = word.to_string();
        capitalised[..1].make_ascii_uppercase();
        out.extend([word.to_string(), word.to_ascii_uppercase(), capitalised]);
    }
    out.extend(["ApiKey".to_owned(), "APIKey".to_owned()]);
    out.sort();
    out.dedup();
    out
}

fn is_value_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~')
}

/// Reads the name word found at `start..end`: when it ends a secret's name and a random
/// value is assigned to that name, claims the value. `after_last` is where the last claimed
/// value ended (a word inside it is no name).
pub(crate) fn at_word(
    text: &str,
    start: usize,
    end: usize,
    after_last: &mut usize,
    out: &mut Vec<Claim>,
) {
    let bytes = text.as_bytes();
    if start < *after_last {
        return;
    }
    // the word ends the name
    if bytes
        .get(end)
        .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return;
    }
    let word = &text[start..end];
    if word.eq_ignore_ascii_case("key")
        && (!key_follows_a_word(bytes, start) || word_before_is(bytes, start, PUBLIC_KEY_WORDS))
    {
        return;
    }
    if word.eq_ignore_ascii_case("token") && word_before_is(bytes, start, PUBLIC_TOKEN_WORDS) {
        return;
    }
    // the name's own start: not inside a longer word (`monkey`, `turnkey`), unless a
    // camel-case joint (`apiKey`) or a separator (`api_key`) leads to it
    if start > 0 && bytes[start - 1].is_ascii_alphanumeric() {
        let joint = bytes[start].is_ascii_uppercase() && bytes[start - 1].is_ascii_lowercase();
        if !joint {
            return;
        }
    }
    let value = value_after(text, end)
        .filter(|&(from, to)| random_enough(&text[from..to]))
        .or_else(|| quoted_value_after(text, end))
        .or_else(|| compared_literal_before(text, start));
    if let Some((from, to)) = value {
        out.push(Claim {
            start: from,
            end: to,
            kind: Kind::Token(KIND),
        });
        *after_last = to;
    }
}

/// The words before `key` that name a value which is no secret by its protocol or its use:
/// a public half (`public_key`), a handshake's nonce (`Sec-WebSocket-Key`), a database's or a
/// cache's address of a row (`primary_key`, `partition_key`, `cache_key`, `idempotency_key`).
const PUBLIC_KEY_WORDS: &[&str] = &[
    "public",
    "pub",
    "websocket",
    "primary",
    "foreign",
    "sort",
    "partition",
    "cache",
    "idempotency",
    "routing",
    "hash",
    "lookup",
    "dedup",
    "dedupe",
];

/// The words before `token` that name one handed to whoever reads the page or the response: a
/// public or publishable token (`publicToken`), an anti-forgery token the page carries
/// (`csrf-token`, `X-XSRF-TOKEN`), a list's cursor (`NextToken`, `pageToken`,
/// `continuation_token`), which a request's next page is asked with and grants nothing.
const PUBLIC_TOKEN_WORDS: &[&str] = &[
    "public",
    "publishable",
    "csrf",
    "xsrf",
    "next",
    "page",
    "continuation",
    "pagination",
];

/// Whether the word before a name word at `at` (past one `_` `-` `.` or a camel-case joint)
/// is one of `words`.
fn word_before_is(bytes: &[u8], at: usize, words: &[&str]) -> bool {
    let end = match bytes.get(at.wrapping_sub(1)) {
        Some(b'_' | b'-' | b'.') => at - 1,
        _ => at,
    };
    let mut start = end;
    while start > 0 && bytes[start - 1].is_ascii_alphanumeric() {
        start -= 1;
    }
    let word = &bytes[start..end];
    words
        .iter()
        .any(|w| w.as_bytes().eq_ignore_ascii_case(word))
}

/// Whether `key` at `at` ends a name of more than one word (`api_key`, `apiKey`, `SIGNING-KEY`).
fn key_follows_a_word(bytes: &[u8], at: usize) -> bool {
    match at.checked_sub(1).map(|i| bytes[i]) {
        Some(b'_' | b'-' | b'.') => at >= 2 && bytes[at - 2].is_ascii_alphanumeric(),
        Some(b) => b.is_ascii_lowercase() && bytes[at].is_ascii_uppercase(),
        None => false,
    }
}

/// The value assigned after a name ending at `at`: past the name's closing quote, spaces, a
/// type (`var apiToken string = …`), the separator (`=`, `:`, `:=`, `=>`, and make's and
/// PHP's `::=` `:::=` `?=` `.=`) and an opening quote, the run of a token's alphabet, which
/// must end the value (a closing quote, a space, `,` `;` `)` `}` `&` or the line's end). A
/// quoted name may also be a call's first argument, the value its second
/// (`System.setProperty("API_TOKEN", "…")`).
fn value_after_start(bytes: &[u8], at: usize) -> Option<usize> {
    let mut pos = at;
    let skip = |pos: &mut usize, set: &[u8]| {
        while *pos < bytes.len() && set.contains(&bytes[*pos]) {
            *pos += 1;
        }
    };
    // the name's own closing quote (`"apiKey":`, `\"token\":`)
    let quoted = if bytes[pos..].starts_with(b"\\\"") {
        pos += 2;
        true
    } else if matches!(bytes.get(pos), Some(b'"' | b'\'')) {
        pos += 1;
        true
    } else {
        false
    };
    let argument = quoted && bytes[pos..].starts_with(b", ") && {
        let mut after = pos + 1;
        skip(&mut after, b" ");
        matches!(bytes.get(after), Some(b'"' | b'\''))
    };
    if argument {
        pos += 1;
    } else {
        skip(&mut pos, b" \t");
        // a comparison with a literal (`if (api_key == "…")`): the literal is the secret
        if let Some(op) = ["===", "!==", "==", "!="]
            .into_iter()
            .find(|op| bytes[pos..].starts_with(op.as_bytes()))
        {
            pos += op.len();
            skip(&mut pos, b" \t");
            return matches!(bytes.get(pos), Some(b'"' | b'\'')).then_some(pos + 1);
        }
        pos = past_a_type(bytes, pos);
        let sep = [":::=", "::=", ":=", "?=", ".=", "=>", "=", ":"]
            .into_iter()
            .find(|sep| bytes[pos..].starts_with(sep.as_bytes()))?;
        pos += sep.len();
        // `==` is a comparison, `::` a path
        if matches!(bytes.get(pos), Some(b'=' | b':')) {
            return None;
        }
    }
    skip(&mut pos, b" \t");
    if bytes[pos..].starts_with(b"\\\"") {
        pos += 2;
    } else if matches!(bytes.get(pos), Some(b'"' | b'\'' | b'`')) {
        pos += 1;
    }
    Some(pos)
}

/// The value [`value_after_start`] opens, as a run of a token's alphabet.
fn value_after(text: &str, at: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let from = value_after_start(bytes, at)?;
    let mut pos = from;
    let limit = bytes.len().min(from + MAX_LEN + 1);
    while pos < limit && is_value_byte(bytes[pos]) {
        pos += 1;
    }
    let len = pos - from;
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return None;
    }
    let ends = match bytes.get(pos) {
        None => true,
        Some(&b) => matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b'\\'
                | b' '
                | b'\t'
                | b'\r'
                | b'\n'
                | b','
                | b';'
                | b')'
                | b'}'
                | b'&'
        ),
    };
    ends.then_some((from, pos))
}

/// The punctuation a chosen password holds and an identifier, a path, a URL or a template
/// never does three kinds of.
const PASSWORD_PUNCTUATION: &[u8] = b"!@#$%^&*(){}[]<>?|;,";

/// A quoted value of punctuation assigned to a secret's name (`api_key: "m{{h}o)p$…"`,
/// `secret = "A,.:-@*?!"`), as a person chooses a password rather than a generator writes a
/// token: from the opening quote to the same quote closing it on the line, 8 to
/// [`MAX_LEN`] bytes, no white space or escape, not opening as a template or a reference
/// does (`${`, `{{`, `$(`, `%`, `<`), and holding three kinds of [`PASSWORD_PUNCTUATION`].
fn quoted_value_after(text: &str, at: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let from = value_after_start(bytes, at)?;
    let quote = *bytes.get(from.checked_sub(1)?)?;
    if !matches!(quote, b'"' | b'\'' | b'`') {
        return None;
    }
    let limit = bytes.len().min(from + MAX_LEN + 1);
    let len = bytes[from..limit].iter().position(|&b| b == quote)?;
    chosen_password(&bytes[from..from + len]).then_some((from, from + len))
}

/// Whether a quoted value reads as a person's chosen password (see [`quoted_value_after`]).
fn chosen_password(value: &[u8]) -> bool {
    let len = value.len();
    if !(8..=MAX_LEN).contains(&len)
        || value
            .iter()
            .any(|&b| b.is_ascii_whitespace() || b == b'\\' || b < 0x20)
        || [&b"${"[..], b"{{", b"$(", b"%", b"<"]
            .iter()
            .any(|opening| value.starts_with(opening))
    {
        return false;
    }
    let mut kinds: Vec<u8> = value
        .iter()
        .copied()
        .filter(|b| PASSWORD_PUNCTUATION.contains(b))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    kinds.len() >= 3
}

/// The literal a secret's name is compared with when the literal comes first
/// (`if ("…" === private_key)`), read as [`value_after`] or [`quoted_value_after`] read a value:
/// random, or a chosen password's punctuation.
fn compared_literal_before(text: &str, word_start: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut name = word_start;
    while name > 0
        && (bytes[name - 1].is_ascii_alphanumeric() || matches!(bytes[name - 1], b'_' | b'.'))
    {
        name -= 1;
    }
    // the literal and its operator end within a name's reach before it: the line is read back
    // no further (each name reads a bounded span, so the rule stays linear)
    let floor = name.saturating_sub(MAX_LEN + 8);
    let line_start = memchr::memrchr(b'\n', &bytes[floor..name]).map_or(floor, |at| floor + at + 1);
    let (from, to) = crate::password::code::compared(text, line_start, name)?;
    let value = &text[from..to];
    let random = (MIN_LEN..=MAX_LEN).contains(&value.len())
        && value.bytes().all(is_value_byte)
        && random_enough(value);
    (random || chosen_password(value.as_bytes())).then_some((from, to))
}

/// Past a type written between a name and its `=` (`apiToken string = …`, Go's order), when
/// one is: a word of letters, digits and `_ . [ ] < >`, then spaces, then `=`.
fn past_a_type(bytes: &[u8], at: usize) -> usize {
    let mut pos = at;
    while pos < bytes.len()
        && (bytes[pos].is_ascii_alphanumeric()
            || matches!(bytes[pos], b'_' | b'.' | b'[' | b']' | b'<' | b'>'))
    {
        pos += 1;
    }
    if pos == at || !bytes[at].is_ascii_alphabetic() {
        return at;
    }
    let word_end = pos;
    while pos < bytes.len() && bytes[pos] == b' ' {
        pos += 1;
    }
    if pos > word_end && bytes.get(pos) == Some(&b'=') && bytes.get(pos + 1) != Some(&b'=') {
        pos
    } else {
        at
    }
}

/// Whether a value reads as random: letters and digits both, not a path or a dotted name, and
/// [`MIN_ENTROPY`] bits per character.
fn random_enough(value: &str) -> bool {
    let bytes = value.as_bytes();
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    let letters = bytes.iter().filter(|b| b.is_ascii_alphabetic()).count();
    if digits == 0 || letters == 0 {
        return false;
    }
    // a path (`/usr/lib/x86_64`) or a dotted name (`config.auth.token_v2`)
    let slashes = bytes.iter().filter(|&&b| b == b'/').count();
    if slashes >= 2 && bytes.windows(2).all(|w| w != b"//") && !value.ends_with('=') {
        let words = value.split('/').filter(|part| part.len() >= 3).count();
        if words >= 2 {
            return false;
        }
    }
    if value.split('.').count() >= 3
        && value.split('.').all(|part| {
            part.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        })
    {
        return false;
    }
    // words joined (`my_secret_token_value_2`, `prod-api-key-v1`): three or more parts, each
    // lower-case letters with at most trailing digits
    let parts: Vec<&str> = value.split(['_', '-', '.']).collect();
    let wordy = |part: &&str| {
        let letters = part.trim_end_matches(|c: char| c.is_ascii_digit());
        !letters.is_empty() && letters.bytes().all(|b| b.is_ascii_lowercase())
            || letters.bytes().all(|b| b.is_ascii_uppercase())
    };
    if parts.len() >= 3 && parts.iter().all(wordy) {
        return false;
    }
    entropy(bytes) >= MIN_ENTROPY
}

/// Shannon entropy per character, in bits.
pub fn entropy(bytes: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let n = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        crate::vendors::find(text, &mut out);
        out.retain(|c| c.kind == Kind::Token(KIND));
        out.iter().map(|c| &text[c.start..c.end]).collect()
    }

    const HEX: &str = "9f86d081884c7d659a2feaa0c55ad015";
    const B62: &str = "q8Zk2LmN4pR7sT1vW3xY5aB6cD9eF0gH";

    #[test]
    fn every_form_of_assignment() {
        for text in [
            format!("API_SECRET={B62}"),
            format!("export STRIPE_TOKEN=\"{B62}\""),
            format!("client_secret: {B62}"),
            format!("{{\"apiKey\": \"{B62}\"}}"),
            format!("secret_key = '{B62}'"),
            format!("const SIGNING_KEY = \"{HEX}\";"),
            format!("token := \"{HEX}\""),
            format!("'credentials' => '{B62}',"),
            format!("--api-key={B62} --verbose"),
            format!("{{\\\"authToken\\\":\\\"{B62}\\\"}}"),
            format!("if (api_key == \"{B62}\") {{"),
            format!("if (secret !== '{B62}')"),
            format!("if (\"{B62}\" === private_key) {{"),
            format!("if ('{HEX}' != clientSecret)"),
        ] {
            let found = claims(&text);
            assert_eq!(found.len(), 1, "{text}: {found:?}");
            assert!(found[0] == B62 || found[0] == HEX, "{text}: {found:?}");
        }
    }

    #[test]
    fn names_and_values_that_are_not_secrets() {
        for text in [
            format!("key={B62}"),
            format!("monkey={B62}"),
            format!("KEYBOARD_LAYOUT={B62}"),
            "API_SECRET=changeme".to_owned(),
            "token: my_secret_token_value".to_owned(),
            "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}".to_owned(),
            "secret_key = os.environ['SECRET_KEY']".to_owned(),
            "api_key: config.services.payments.api_key".to_owned(),
            "cache_key = /var/cache/app/v2/build".to_owned(),
            "if token == \"\"".to_owned(),
            "if token != null".to_owned(),
            "if (\"Bearer\" == token_type)".to_owned(),
            "next_token: null".to_owned(),
            "token_type: Bearer".to_owned(),
            "primary_key: 1234567890123456".to_owned(),
            format!("public_key = \"{B62}\""),
            format!("publicKey: \"{B62}\""),
            format!("partition_key = \"{B62}\""),
            format!("idempotency_key = \"{B62}\""),
            ".header(\"sec-websocket-key\", \"6D69KGBOr4Re+Nj6zx9aQA==\")".to_owned(),
            format!("publicToken = \"{B62}\""),
            format!("csrf-token={B62}"),
            format!("\"NextToken\": \"{B62}\""),
            format!("pageToken: {B62}"),
            format!("continuation_token = '{B62}'"),
        ] {
            assert!(claims(&text).is_empty(), "{text}: {:?}", claims(&text));
        }
    }

    #[test]
    fn entropy_of_known_strings() {
        assert!(entropy(HEX.as_bytes()) > 3.5);
        assert!(entropy(b"aaaaaaaaaaaaaaaa") < 0.1);
        assert!(random_enough(HEX) && random_enough(B62));
        assert!(!random_enough("my_secret_token_value_2"));
        assert!(!random_enough("prod-api-key-v1-staging"));
        assert!(!random_enough("a1a1a1a1a1a1a1a1a1"));
    }
}
