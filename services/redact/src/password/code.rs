//! Code that names a password without holding one: a type (`password: &str`,
//! `pwd: *mut passwd`), a call or a path (`password: String::new()`, `password =
//! config.password;`), a variable (`password: new_password,`), a reference (`${DB_PASSWORD}`,
//! `$(PGPASSWORD)`, `{{ .Values.password }}`), structure (`"password": [`), an enum's
//! number (`NETKIT_PASS = 0,`). The value read after such a key is left as it is.
//!
//! Each reading is of the value's own line only, so a stream's settled lines read it as the
//! whole text does, and of text the token rule already redacted, so a second pass reads it
//! the same.
//!
//! And the one form whose value comes first: a literal compared with a password's name
//! (`"hunter2" == password`).

use super::key::is_name_byte;
use super::{KEY_WORDS, Key, SEGMENT_WORD};
use crate::MARKER_PREFIX;
use crate::lines::Line;

/// Type names a declaration ends in (`password: String` on a parameter's own line).
const TYPE_WORDS: &[&str] = &[
    "str",
    "String",
    "string",
    "bool",
    "boolean",
    "int",
    "integer",
    "number",
    "char",
    "bytes",
    "byte",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "f32",
    "f64",
    "__u8",
    "__u16",
    "__u32",
    "__u64",
    "__s32",
    "__s64",
    "c_char",
    "c_int",
    "c_uint",
    "c_void",
    "any",
    "unknown",
    "object",
    "Secret",
    "SecretString",
    "SecretStr",
    "SecStr",
    "Password",
    "Vec",
    "Option",
    "OsString",
    "PathBuf",
];

/// Words code writes that are no literal: a keyword or a variable named for the key.
const CODE_WORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "None",
    "nil",
    "undefined",
    "self",
    "this",
    "True",
    "False",
    "NULL",
    "Some",
    "Ok",
    "Err",
    "new",
    "default",
];

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

pub(super) fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// An identifier path at `at` (`a`, `a.b`, `crate::passwd`, `self.0.password`): where it
/// ends, and whether it reads as code's own (a path, a snake or camel case name, a type or
/// keyword, a name ending in a password's key word).
fn ident_path(bytes: &[u8], at: usize, end: usize) -> Option<(usize, bool)> {
    // read at most a name's length, so keys along one long path cost no more than its length
    let end = end.min(at + super::NAME_BACK_LIMIT);
    if at >= end || !is_ident_start(bytes[at]) {
        return None;
    }
    let mut pos = at;
    let mut segments = 0;
    loop {
        let seg = pos;
        while pos < end && is_ident(bytes[pos]) {
            pos += 1;
        }
        if pos == seg {
            return None;
        }
        segments += 1;
        if bytes[pos..end].starts_with(b"::") && pos + 2 < end && is_ident(bytes[pos + 2]) {
            pos += 2;
        } else if pos < end && bytes[pos] == b'.' && pos + 1 < end && is_ident(bytes[pos + 1]) {
            pos += 1;
        } else {
            break;
        }
    }
    let word = std::str::from_utf8(&bytes[at..pos]).unwrap_or("");
    let lower = word.to_ascii_lowercase();
    let has_digit = word.bytes().any(|b| b.is_ascii_digit());
    let camel = word.bytes().skip(1).any(|b| b.is_ascii_uppercase())
        && word.bytes().any(|b| b.is_ascii_lowercase());
    let codeish = segments > 1
        || word.contains('_')
        || (camel && !has_digit)
        || TYPE_WORDS.contains(&word)
        || CODE_WORDS.contains(&word)
        || KEY_WORDS.iter().any(|k| lower.ends_with(k));
    Some((pos, codeish))
}

/// Whether the value at `at` (to the line's `end`) after `key` is code, not a password.
pub(super) fn is_code(text: &str, key: &Key, at: usize, end: usize) -> bool {
    let bytes = text.as_bytes();
    let value = &text[at..end];
    // structure a value opens (a list, a map) is never eaten
    if value.starts_with('[') && !value.starts_with(MARKER_PREFIX) || value.starts_with('{') {
        return true;
    }
    // a reference: a shell's or a make's variable, a template's, a format's, a placeholder
    if is_reference(value) {
        return true;
    }
    // a format string's argument (`{password:?}`, `{pwd:>8}`): the spec up to its brace
    let opened = text[..key.name].ends_with('{');
    if opened && key.sep_at + 1 == key.sep_end && bytes[key.sep_at] == b':' {
        let spec = &bytes[key.sep_end..end.min(key.sep_end + 9)];
        if memchr::memchr(b'}', spec)
            .is_some_and(|close| !spec[..close].iter().any(u8::is_ascii_whitespace))
        {
            return true;
        }
    }
    let sep = &text[key.sep_at..key.sep_end];
    let colon = sep == ":";
    // an option named in prose (`the option --passphrase= can be empty`): a space after its `=`
    if sep == "=" && bytes[key.name] == b'-' && bytes.get(key.sep_end) == Some(&b' ') {
        return true;
    }
    // a comparison with a number (`in_current_pass == 0 {`)
    let comparison = matches!(sep, "==" | "===" | "!=" | "!==");
    let digits = value.bytes().take_while(u8::is_ascii_digit).count();
    if comparison && digits > 0 && !value.as_bytes().get(digits).is_some_and(|&b| is_ident(b)) {
        return true;
    }
    // `a = b` with spaces is code's assignment; a shell's has none (`PASSWORD=x;`)
    let spaced = key.sep_at > 0
        && bytes[key.sep_at - 1] == b' '
        && bytes.get(key.sep_end).is_some_and(|&b| b == b' ');
    // a type: a reference's or a pointer's, a trait's
    if colon {
        for prefix in ["&", "*mut ", "*const ", "impl ", "dyn ", "&mut "] {
            if value.starts_with(prefix) {
                return true;
            }
        }
    }
    if let Some((path_end, codeish)) = ident_path(bytes, at, end) {
        let after = text[path_end..end].trim_start();
        let next = after.bytes().next();
        // a call, a generic type, an index, a struct literal
        if matches!(next, Some(b'(' | b'<' | b'[' | b'{')) && codeish {
            return true;
        }
        // a generic type (`Cell<usize>`), or a type parameter (`password: U,`)
        let single_upper = path_end == at + 1 && bytes[at].is_ascii_uppercase();
        if colon
            && (after.starts_with('<')
                || (single_upper && matches!(next, Some(b',' | b')' | b'>'))))
        {
            return true;
        }
        if !codeish {
            return false;
        }
        // what ends an argument, a field, a statement or a declaration's type
        if comparison {
            // a variable, a path or a call on a comparison's other side
            return true;
        }
        let ends_code = match next {
            None => colon && TYPE_WORDS.contains(&&text[at..path_end]),
            Some(b',' | b')' | b'}' | b'?' | b'|') => colon || spaced || sep == "=",
            Some(b';') => colon || spaced,
            Some(b'=') => colon && !after.starts_with("=="),
            _ => false,
        };
        return ends_code;
    }
    // an enum's or a constant's number (`NETKIT_PASS = 0,`, `FLAGS_PASS: u32 = 2;` reads
    // its type above), written after an upper-case constant's name
    let name = &text[key.name..key.sep_at];
    let constant = name
        .trim_end()
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if constant && (spaced || colon) {
        let digits = value.strip_prefix("0x").map_or_else(
            || value.bytes().take_while(u8::is_ascii_digit).count(),
            |hex| 2 + hex.bytes().take_while(u8::is_ascii_hexdigit).count(),
        );
        if digits > 0 && matches!(value.as_bytes().get(digits), Some(b',' | b';') | None) {
            return true;
        }
    }
    false
}

/// A reference to a value kept elsewhere: `$VAR`, `${VAR}`, `$(VAR)`, `%(name)s`,
/// `{{ … }}`, `<your-password>`, `@param`.
pub(crate) fn is_reference(value: &str) -> bool {
    let bytes = value.as_bytes();
    match bytes {
        [b'$', b'{' | b'(', ..] => true,
        [b'$', b, ..] => is_ident_start(*b),
        [b'%', b'(', ..] => true,
        [b'{', b'{', ..] => true,
        [b'<', rest @ ..] => {
            // a placeholder: letters, spaces, `-` and `_` up to its `>`, within 64 bytes
            let close = rest.iter().take(64).position(|&b| b == b'>');
            close.is_some_and(|close| {
                close > 0
                    && rest[..close]
                        .iter()
                        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b' '))
            })
        }
        _ => false,
    }
}

/// The words a secret's name ends in, as its last segment (`real_key`, `var.db_password`).
const SECRET_NAME_ENDS: &[&str] = &[
    "key",
    "password",
    "passwd",
    "pwd",
    "pass",
    "token",
    "secret",
    "passphrase",
];

/// Whether a value is the name of a secret rather than one: lower-case words joined by `_` or
/// `.`, the last a secret's word (`password: real_key`, `password = var.db_password`,
/// `pwd: admin_password`), as a variable, a Terraform reference or a documentation's stand-in
/// writes it. A password of that shape (`wordpress_password`) is a sample's, published with
/// the rest of the sample; one with a capital, a digit or any other character is still read.
pub(crate) fn names_a_secret(value: &str) -> bool {
    let bytes = value.as_bytes();
    let word_bytes = bytes
        .iter()
        .all(|&b| b.is_ascii_lowercase() || matches!(b, b'_' | b'.'));
    let Some(last) = value.rsplit(['_', '.']).next() else {
        return false;
    };
    word_bytes
        && last.len() < value.len()
        && !value.starts_with(['_', '.'])
        && SECRET_NAME_ENDS.contains(&last)
}

/// Whether a value is a template's substitution, whole: Terraform's or a shell's `${…}`, a
/// Jinja's, Helm's or GitHub Actions' `{{ … }}` and `${{ … }}` — quoted, where an unquoted one is
/// already [`is_reference`] — (`password = "${aws_db_instance.default.password}"`).
pub(crate) fn is_template(value: &str) -> bool {
    let inner = |open: &str, close: &str| {
        value
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
            .is_some_and(|inner| !inner.is_empty() && !inner.contains(close))
    };
    inner("${{", "}}") || inner("${", "}") || inner("{{", "}}")
}

/// Whether a password's value says it is a stand-in: the word `fake` in it
/// (`"somefakekey"`, `"a-fake-tooshort-key"`), or a claimed token's stand-in shape (`x` for half
/// of it, `AP6xxxxxx`: placeholder.rs).
pub(crate) fn is_stand_in_value(value: &str) -> bool {
    value.to_ascii_lowercase().contains("fake") || crate::placeholder::is_stand_in(value)
}

/// Where an unquoted value in a connection string ends: before the `;` that opens its next
/// field (`Pwd=x;Encrypt=yes`), or that closes a field the key's own `;` opened, or at `end`.
pub(super) fn field_end(text: &str, key: &Key, at: usize, end: usize) -> usize {
    let bytes = text.as_bytes();
    // a field of a connection string (`…;Pwd=x;`) ends at its `;`, whatever follows
    if key.name > 0 && bytes[key.name - 1] == b';' {
        return memchr::memchr(b';', &bytes[at..end]).map_or(end, |semi| at + semi);
    }
    // a shell's command ends at a last `;` (`PGPASSWORD=x; psql`)
    let end = if end > at + 1 && bytes[end - 1] == b';' {
        end - 1
    } else {
        end
    };
    let mut pos = at;
    while let Some(semi) = memchr::memchr(b';', &bytes[pos..end]) {
        let semi = pos + semi;
        let mut next = semi + 1;
        while next < end && bytes[next] == b' ' {
            next += 1;
        }
        let name_start = next;
        while next < end && (is_ident(bytes[next]) || bytes[next] == b' ') {
            next += 1;
        }
        if next > name_start && next < end && bytes[next] == b'=' {
            return semi;
        }
        pos = semi + 1;
    }
    end
}

/// The comparison operator and quoted literal before a name at `name` (`"v" == password`):
/// the literal's content, when the line writes one.
pub(crate) fn compared(text: &str, line_start: usize, name: usize) -> Option<(usize, usize)> {
    let mut floor = name.saturating_sub(super::NAME_BACK_LIMIT).max(line_start);
    while !text.is_char_boundary(floor) {
        floor += 1;
    }
    let before = text[floor..name].trim_end_matches(' ');
    let before = ["===", "!==", "==", "!="]
        .iter()
        .find_map(|op| before.strip_suffix(op))?
        .trim_end_matches(' ');
    let quote = before
        .bytes()
        .last()
        .filter(|b| matches!(b, b'"' | b'\''))?;
    let close = floor + before.len() - 1;
    let open = memchr::memrchr(quote, &text.as_bytes()[floor..close])? + floor;
    (open + 1 < close).then_some((open + 1, close))
}

/// Claims the literal compared with each password's name (`"hunter2" == password`,
/// `'x' != user.pwd`).
/// `hits` are the key words' in the text ([`super::key_words`]).
pub(super) fn compared_literals(
    text: &str,
    lines: &[Line],
    hits: &[super::Hit],
    out: &mut Vec<(usize, usize)>,
) {
    let bytes = text.as_bytes();
    let mut line_index = 0;
    for hit in hits {
        while line_index < lines.len() && lines[line_index].next <= hit.start() {
            line_index += 1;
        }
        let Some(line) = lines.get(line_index) else {
            break;
        };
        if bytes.get(hit.end()).is_some_and(|&b| is_ident(b)) {
            continue;
        }
        let mut name = hit.start();
        let floor = hit
            .start()
            .saturating_sub(super::NAME_BACK_LIMIT)
            .max(line.start);
        while name > floor && is_name_byte(bytes[name - 1]) {
            name -= 1;
        }
        if text[hit.start()..hit.end()].eq_ignore_ascii_case(SEGMENT_WORD)
            && !(hit.start() > name && matches!(bytes[hit.start() - 1], b'_' | b'-' | b'.'))
        {
            continue;
        }
        if let Some((start, end)) = compared(text, line.start, name) {
            // a literal naming a key itself (`"password" == pwd`) is a key's name, read as one
            let literal = &text[start..end];
            if !literal.starts_with(MARKER_PREFIX) && !super::mentions_key_word(literal) {
                out.push((start, end));
            }
        }
    }
}
