//! A secret written as an XML element's text on a line of its own: an element whose name ends
//! in a secret's word (`<etsyToken>`, `<ApiKey>`, `<db_password>`), alone on its line, the
//! value alone on the next, and the element closed alone on the line after — the way a
//! pretty-printer writes `<jfrogToken>4ks8eol9…</jfrogToken>` (gitleaks writes every rule's
//! samples so too). The value is claimed when it reads as a key: 8 to 512 characters with no
//! blank or markup, a digit or both cases in it, and no stand-in (`xxxx`, `${TOKEN}`).
//!
//! On one line, a setting element's `value` after a `key` naming a secret is read the same way:
//! NuGet's `<add key="ClearTextPassword" value="…" />` and .NET's `appSettings`
//! (`<add key="ApiKey" value="…"/>`), the attributes in either order.
//!
//! The value's redaction depends on the lines around it, so a stream holds an opening line
//! until the element's close has been written or can no longer come ([`hold`]), and never
//! settles a prefix that ends inside an element read whole.

use crate::lines::Line;
use crate::{Claim, Hold, Kind};

/// The words an element's name ends in when its text is a secret (any case).
const NAME_ENDS: &[&str] = &[
    "token",
    "secret",
    "key",
    "apikey",
    "password",
    "passwd",
    "credential",
    "credentials",
];

/// The widest setting element read (`<add key="…" value="…" />`).
const MAX_TAG: usize = 1024;

/// The longest value read.
const MAX_VALUE: usize = 512;

/// The name of the element a line opens, alone on it (`  <etsyToken>`), if its name ends in a
/// secret's word.
fn opening(line: &str) -> Option<&str> {
    let name = line.trim().strip_prefix('<')?.strip_suffix('>')?;
    secret_name(name).then_some(name)
}

fn secret_name(name: &str) -> bool {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && name.as_bytes()[0].is_ascii_alphabetic();
    let lower = name.to_ascii_lowercase();
    valid && NAME_ENDS.iter().any(|end| lower.ends_with(end))
}

/// Whether a line closes `name`, alone on it.
fn closes(line: &str, name: &str) -> bool {
    line.trim()
        .strip_prefix("</")
        .and_then(|rest| rest.strip_suffix('>'))
        .is_some_and(|closed| closed == name)
}

/// The value a line holds alone, as `(start, end)` within the line.
fn value_of(line: &str) -> Option<(usize, usize)> {
    let start = line.len() - line.trim_start().len();
    let end = line.trim_end().len();
    let value = &line[start..end];
    let plain = !value.is_empty()
        && value.len() <= MAX_VALUE
        && !value
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == b'<' || b == b'>');
    plain.then_some((start, end))
}

fn reads_as_a_key(value: &str) -> bool {
    let digit = value.bytes().any(|b| b.is_ascii_digit());
    let upper = value.bytes().any(|b| b.is_ascii_uppercase());
    let lower = value.bytes().any(|b| b.is_ascii_lowercase());
    value.len() >= 8
        && (digit || (upper && lower))
        && !value.starts_with(crate::MARKER_PREFIX)
        && !value.contains('$')
        && !(value.len() > 2 && value.starts_with('%') && value.ends_with('%'))
        && !value.contains("{{")
        && !crate::placeholder::is_stand_in(value)
        && !crate::is_placeholder_password(value)
}

/// Every element read whole: (the line it opens on, the value's byte range).
fn elements<'t>(
    text: &'t str,
    lines: &'t [Line],
) -> impl Iterator<Item = (usize, (usize, usize))> + 't {
    let line = |i: usize| &text[lines[i].start..lines[i].end];
    (0..lines.len().saturating_sub(2)).filter_map(move |i| {
        let name = opening(line(i))?;
        if !closes(line(i + 2), name) {
            return None;
        }
        let (from, to) = value_of(line(i + 1))?;
        let start = lines[i + 1].start;
        Some((i, (start + from, start + to)))
    })
}

/// The value of the setting element a `key="` at `at` opens, if its key names a secret.
fn setting_value(text: &str, at: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    // the attribute's own name: `key`, not `monkey`
    if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
        return None;
    }
    let name_start = at + b"key=\"".len();
    let name_len = memchr::memchr(b'"', &bytes[name_start..])?;
    if !secret_name(&text[name_start..name_start + name_len]) {
        return None;
    }
    // the element this attribute is in: back to its `<`, on to its `>`, each within
    // MAX_TAG, so a line of many `key="` costs no more than its length times that
    let back = at.saturating_sub(MAX_TAG);
    let open = back + memchr::memrchr(b'<', &bytes[back..at])?;
    let ahead = &bytes[name_start..bytes.len().min(name_start + MAX_TAG)];
    let close = name_start + memchr::memchr(b'>', ahead)?;
    if memchr::memchr(b'\n', &bytes[open..close]).is_some() {
        return None;
    }
    let tag = &text[open..close];
    let value_at = tag
        .match_indices("value=\"")
        .map(|(i, _)| i)
        .find(|&i| i == 0 || !tag.as_bytes()[i - 1].is_ascii_alphanumeric())?;
    let start = open + value_at + b"value=\"".len();
    let end = start + memchr::memchr(b'"', &bytes[start..close])?;
    Some((start, end))
}

/// Every secret held as an element's text on its own line, or as a setting's value.
pub(crate) fn find(text: &str, out: &mut Vec<Claim>) {
    for at in memchr::memmem::find_iter(text.as_bytes(), b"key=\"") {
        if let Some((start, end)) = setting_value(text, at)
            && reads_as_a_key(&text[start..end])
        {
            out.push(Claim {
                start,
                end,
                kind: Kind::Token(crate::context::KIND),
            });
        }
    }
    // most texts hold no element closed alone on its line: look for one first
    if memchr::memmem::find(text.as_bytes(), b"</").is_none() {
        return;
    }
    let lines = crate::lines::split(text);
    for (_, (start, end)) in elements(text, &lines) {
        if reads_as_a_key(&text[start..end]) {
            out.push(Claim {
                start,
                end,
                kind: Kind::Token(crate::context::KIND),
            });
        }
    }
}

/// What a stream holds back for this rule: an opening line among the last two complete lines
/// (its value or its close not written yet), and every element read whole as one span.
pub(crate) fn hold(text: &str, lines: &[Line]) -> Hold {
    let line = |i: usize| &text[lines[i].start..lines[i].end];
    let n = lines.len();
    let mut hold = Hold::default();
    for i in n.saturating_sub(2)..n {
        let Some(_) = opening(line(i)) else {
            continue;
        };
        // an opening line whose next line could still be a value
        let open = i + 1 == n || value_of(line(i + 1)).is_some();
        if open {
            hold.line = Some(i);
            break;
        }
    }
    hold.spans = elements(text, lines)
        .map(|(i, _)| (lines[i].start, lines[i + 2].end))
        .collect();
    hold
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        find(text, &mut out);
        out.iter().map(|c| &text[c.start..c.end]).collect()
    }

    #[test]
    fn an_elements_text_on_its_own_line_is_read() {
        for (text, value) in [
            (
                "<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n</etsyToken>",
                "r8o7pepwkn9ecr1ksfe92iuy",
            ),
            (
                "<telegramToken>\n    16720621:Anfnjjkt4hglbbmbqte49qiq2m2gz0_3hpi\n</telegramToken>",
                "16720621:Anfnjjkt4hglbbmbqte49qiq2m2gz0_3hpi",
            ),
            (
                "  <ApiKey>\r\n  Q7w3E9r2T5y8U4i6\r\n  </ApiKey>\r\n",
                "Q7w3E9r2T5y8U4i6",
            ),
        ] {
            assert_eq!(claimed(text), [value], "{text:?}");
        }
        for text in [
            // no secret's name, not closed, closed by another, a stand-in, a sentence
            "<version>\n    1.2.3-alpha4\n</version>",
            "<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n",
            "<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n</other>",
            "<apiKey>\n    ${API_KEY}\n</apiKey>",
            "<apiKey>\n    xxxxxxxxxxxxxxxx\n</apiKey>",
            "<secretKey>\n    set it in the vault 2\n</secretKey>",
        ] {
            assert!(claimed(text).is_empty(), "{text:?}");
        }
    }

    #[test]
    fn a_settings_value_after_a_secrets_key_is_read() {
        for (text, value) in [
            (
                "<add key=\"ClearTextPassword\" value=\"CleartextPassword1\" />",
                "CleartextPassword1",
            ),
            (
                "  <add value=\"Q7w3E9r2T5y8U4i6\" key=\"ApiKey\"/>",
                "Q7w3E9r2T5y8U4i6",
            ),
        ] {
            assert_eq!(claimed(text), [value], "{text}");
        }
        for text in [
            "<add key=\"Username\" value=\"CleartextUser1\" />",
            "<add key=\"ApiKey\" value=\"$(ApiKey)\" />",
            "<add key=\"ApiKey\" value=\"\" />",
            "<add key=\"ClearTextPassword\" value=\"%TestSourcePassword%\" />",
            "<monkey=\"ApiKey\" value=\"Q7w3E9r2T5y8U4i6\"/>",
        ] {
            assert!(claimed(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn a_stream_holds_an_opening_line_until_its_close_can_no_longer_come() {
        let text = "a\n<etsyToken>\n";
        let lines = crate::lines::split(text);
        assert_eq!(hold(text, &lines).line, Some(1));
        let text = "a\n<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n";
        let lines = crate::lines::split(text);
        assert_eq!(hold(text, &lines).line, Some(1));
        let text = "a\n<etsyToken>\nthe value is written as prose here\n";
        let lines = crate::lines::split(text);
        assert_eq!(hold(text, &lines).line, None);
        let text = "<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n</etsyToken>\nb\n";
        let lines = crate::lines::split(text);
        let held = hold(text, &lines);
        assert_eq!(held.line, None);
        assert_eq!(held.spans, [(0, 53)]);
    }
}
