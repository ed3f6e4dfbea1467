//! The password a `curl` command line carries: `-u user:password`, `--user 'user:password'`,
//! `-uuser:password` (curl's documented `-u, --user <user:password>`), and the credential a
//! header it sends carries: `-H 'Authorization: <scheme> <credential>'`, or a header whose name
//! says it holds one (`Api-Token:`, `X-Api-Key:`, `Token:`), its value after an optional
//! scheme word (`Api-Token 22cb…`). An agent's shell trace prints the command it ran, so the
//! password is in the transcript as typed.
//!
//! The option is read only on a line that runs `curl` (the word, after the line's start, a
//! blank, `$`, `;`, `|`, `&`, `(` or a quote), since `-u` means something else to other
//! programs. Its argument is one shell word, its quoted pieces joined (`kevin:'pRf7…'`,
//! `"{id}":"{secret}"`); what follows its first `:` is the password, and that part alone is
//! redacted, its quotes left. None is read when the word has no `:` (curl then prompts for
//! one), the password is empty, or it stands in for one: a variable or a command's output
//! (`$PASS`, `${{ secrets.X }}`, `$(cat pw)`), a template's (`{{ .Values.password }}`), a
//! placeholder (`<password>`, `[PASSWORD]`, `xxx`, `pass`, `token`), or the user's own name
//! again (`test:test`). A command continued onto the next line (`\`) is read on the line that
//! names curl only: a line's redaction never waits on the lines after it.

use crate::{Claim, Kind};

/// The marker of a credential in a header curl is told to send.
pub const HEADER_CREDENTIAL: &str = "http_header_credential";

/// What a header's name ends in when its value is a credential (any case).
const CREDENTIAL_HEADER_ENDS: &[&str] = &["authorization", "token", "key", "secret", "apikey"];

/// Every curl password in `text`.
pub(crate) fn find(text: &str, out: &mut Vec<Claim>) {
    let bytes = text.as_bytes();
    for at in memchr::memmem::find_iter(bytes, b"curl") {
        let starts_a_word = at == 0
            || matches!(
                bytes[at - 1],
                b' ' | b'\t' | b'\n' | b'$' | b';' | b'|' | b'&' | b'(' | b'\'' | b'"' | b'`'
            );
        if !starts_a_word || !matches!(bytes.get(at + 4), Some(b' ' | b'\t')) {
            continue;
        }
        let line_end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n);
        read_options(text, at + 4, line_end, out);
    }
}

/// Reads the words of a curl command from `pos` to `end` for `-u`/`--user` and its argument.
fn read_options(text: &str, mut pos: usize, end: usize, out: &mut Vec<Claim>) {
    let bytes = text.as_bytes();
    let mut argument_next = false;
    let mut header_next = false;
    while pos < end {
        while pos < end && matches!(bytes[pos], b' ' | b'\t') {
            pos += 1;
        }
        if pos >= end || matches!(bytes[pos], b';' | b'|' | b'&' | b'>' | b'#') {
            return;
        }
        let word = shell_word(bytes, pos, end);
        let raw = &text[pos..word.end];
        if header_next {
            claim_header_credential(text, &word, out);
            header_next = false;
        } else if argument_next {
            claim_password(text, &word, out);
            argument_next = false;
        } else if raw == "--header" || raw == "-H" {
            header_next = true;
        } else if raw == "--user" || raw == "-u" {
            argument_next = true;
        } else if raw.len() > 2 && raw.starts_with("-u") {
            // `-uuser:password`: the argument glued to the option
            let rest = ShellWord {
                end: word.end,
                content: word.content[2..].to_vec(),
            };
            claim_password(text, &rest, out);
        } else if raw.len() > 2
            && raw.starts_with('-')
            && !raw.starts_with("--")
            && raw.ends_with('u')
            && raw[1..].bytes().all(|b| b.is_ascii_alphabetic())
        {
            // flags run together, the last one taking the argument (`-su user:pw`)
            argument_next = true;
        }
        pos = word.end;
    }
}

/// One shell word: where it ends, and its characters with their quotes removed, each with
/// the byte offset it was written at.
struct ShellWord {
    end: usize,
    content: Vec<(u8, usize)>,
}

fn shell_word(bytes: &[u8], start: usize, end: usize) -> ShellWord {
    let mut content = Vec::new();
    let mut pos = start;
    let mut quote: Option<u8> = None;
    while pos < end {
        let b = bytes[pos];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => content.push((b, pos)),
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b' ' || b == b'\t' => break,
            None => content.push((b, pos)),
        }
        pos += 1;
    }
    ShellWord { end: pos, content }
}

/// Claims the password of a `user:password` argument, unless it is none (the module's text).
fn claim_password(text: &str, word: &ShellWord, out: &mut Vec<Claim>) {
    let Some(colon) = word.content.iter().position(|&(b, _)| b == b':') else {
        return;
    };
    // the whole argument a placeholder (`<user:password>`)
    if word.content.first().is_some_and(|&(b, _)| b == b'<')
        && word.content.last().is_some_and(|&(b, _)| b == b'>')
    {
        return;
    }
    let user: Vec<u8> = word.content[..colon].iter().map(|&(b, _)| b).collect();
    let password = &word.content[colon + 1..];
    let (Some(&(_, first)), Some(&(_, last))) = (password.first(), password.last()) else {
        return;
    };
    let value: Vec<u8> = password.iter().map(|&(b, _)| b).collect();
    let Ok(value) = std::str::from_utf8(&value) else {
        return;
    };
    // the span must hold the password alone: a quote inside it (`a'b'c`) would be taken with it
    let span = &text[first..=last];
    if span.len() != value.len() || stands_in(value, &user) {
        return;
    }
    out.push(Claim {
        start: first,
        end: last + 1,
        kind: Kind::Password,
    });
}

/// Claims the credential of a header argument (`Authorization: Bearer …`, `Api-Token: …`),
/// unless it stands in for one or its name says no credential.
fn claim_header_credential(text: &str, word: &ShellWord, out: &mut Vec<Claim>) {
    let Some(colon) = word.content.iter().position(|&(b, _)| b == b':') else {
        return;
    };
    let name: String = word.content[..colon]
        .iter()
        .map(|&(b, _)| b as char)
        .collect();
    let name = name.trim().to_ascii_lowercase();
    let names_a_credential = CREDENTIAL_HEADER_ENDS.iter().any(|end| name.ends_with(end))
        && !name.ends_with("-public-key")
        && !name.ends_with("idempotency-key");
    if !names_a_credential {
        return;
    }
    // the value's words; the credential is the last (`Bearer x`, `Api-Token x`, `x`)
    let value = &word.content[colon + 1..];
    let words: Vec<&[(u8, usize)]> = value
        .split(|&(b, _)| b == b' ' || b == b'\t')
        .filter(|piece| !piece.is_empty())
        .collect();
    let credential = match words.as_slice() {
        [one] => *one,
        // the bearer rule reads the schemes it knows (`Bearer`, `Basic`, `token`)
        [scheme, one] => {
            let scheme: Vec<u8> = scheme
                .iter()
                .map(|&(b, _)| b.to_ascii_lowercase())
                .collect();
            if matches!(scheme.as_slice(), b"bearer" | b"basic" | b"token") {
                return;
            }
            *one
        }
        _ => return,
    };
    let (&(_, first), &(_, last)) = (&credential[0], &credential[credential.len() - 1]);
    let bytes: Vec<u8> = credential.iter().map(|&(b, _)| b).collect();
    let Ok(value) = std::str::from_utf8(&bytes) else {
        return;
    };
    let span = &text[first..=last];
    if value.starts_with(crate::MARKER_PREFIX) {
        return;
    }
    let reads_as_a_key = value.len() >= 8
        && (value.bytes().any(|b| b.is_ascii_digit())
            || (value.bytes().any(|b| b.is_ascii_uppercase())
                && value.bytes().any(|b| b.is_ascii_lowercase())));
    if span.len() != value.len() || !reads_as_a_key || stands_in(value, b"") || value.contains('(')
    {
        return;
    }
    out.push(Claim {
        start: first,
        end: last + 1,
        kind: Kind::Token(HEADER_CREDENTIAL),
    });
}

/// The secrets' words a placeholder spells where the password goes (`username:token`).
const SECRET_WORDS: &[&str] = &["token", "apikey", "api_key", "key", "passw0rd"];

fn stands_in(value: &str, user: &[u8]) -> bool {
    let bracketed = (value.starts_with('<') && value.ends_with('>'))
        || (value.starts_with('[')
            && value.ends_with(']')
            && value[1..value.len() - 1]
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b == b'_'));
    value.contains('$')
        || value.contains("{{")
        || value.contains('`')
        || bracketed
        || value.as_bytes() == user
        || SECRET_WORDS.iter().any(|w| w.eq_ignore_ascii_case(value))
        || crate::is_placeholder_url_password(value)
        || crate::password::is_stand_in_password(value)
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
    fn a_curl_users_password_is_read_in_every_quoting() {
        for (text, password) in [
            (
                "curl --cacert ca.crt -u elastic:P@ssw0rd1 https://localhost:9200",
                "P@ssw0rd1",
            ),
            (
                "curl -u \":d2LkV78zLx!t\" https://localhost:9200",
                "d2LkV78zLx!t",
            ),
            ("curl -s --user 'api:d2LkV78zLx!t' \\", "d2LkV78zLx!t"),
            (
                "curl --user kevin:'pRf7vG2h1L8nQkW9' -iX PATCH",
                "pRf7vG2h1L8nQkW9",
            ),
            (
                "curl -X POST --user \"{acd3c08b}\":\"{ZqL5kVrX1n8tA2}\" --data x",
                "{ZqL5kVrX1n8tA2}",
            ),
            ("$ curl -uadmin:s3cr3tPw https://h", "s3cr3tPw"),
            ("curl -su admin:s3cr3tPw https://h", "s3cr3tPw"),
        ] {
            assert_eq!(claimed(text), [password], "{text}");
        }
    }

    #[test]
    fn a_headers_credential_is_read_after_its_scheme() {
        for (text, credential) in [
            (
                "curl --header  'Authorization:  5eb4223e-5008-46e5-be67-c7b8f2732305'",
                "5eb4223e-5008-46e5-be67-c7b8f2732305",
            ),
            (
                "curl -H \"Authorization: Api-Token 22cb987851bc5659l29114c62e60c79abd0d2c08\" --request PUT",
                "22cb987851bc5659l29114c62e60c79abd0d2c08",
            ),
            (
                "curl -L -H \"Authorization: sha256~bRLFnzd5@=-.a+/hgdS\"",
                "sha256~bRLFnzd5@=-.a+/hgdS",
            ),
            (
                "curl -X POST --header \"Api-Token: Sk94HG7f6KB\"",
                "Sk94HG7f6KB",
            ),
            (
                "curl -XPOST http://h -H \"Token: 3fea6af1349166ea\" -d x",
                "3fea6af1349166ea",
            ),
        ] {
            assert_eq!(claimed(text), [credential], "{text}");
        }
    }

    #[test]
    fn what_stands_in_for_a_password_or_is_no_curl_is_left() {
        for text in [
            "curl -i -u 'test:test'",
            "curl -sL --user \"$1:$2\" \"$3\"",
            "curl -u <user:password> https://test.com/endpoint",
            "curl --user neo4j:[PASSWORD] http://[IP]:7474/db/data/",
            "curl -u \"myusername\" http://localhost:15130/",
            "curl -u username:token",
            "curl -u \"${_username}:${_password}\"",
            "curl -u \":\" https://localhost:9200",
            "curl --user \"xxx:yyy\"",
            "curl -u \"{{ .Values.username }}:{{ .Values.password }}\"",
            "curl -X POST --user \"$(cat ./login.txt):$(cat ./password.txt)\"",
            "curl http://127.0.0.1:5000/file --user user:pass --digest",
            "curl --user \"username:password\" \\",
            // `-u` to another program, and a word that only holds curl
            "grep -u admin:s3cr3tPw file",
            "libcurl -u admin:s3cr3tPw",
            // headers: no credential's name, a stand-in, a variable, a command's output
            "curl -H 'Content-Type: application/json' https://h",
            "curl -H \"Authorization: Bearer XXXXXXXXXXXX\"",
            "curl --header \"Authorization: Basic ...\"",
            "curl -H \"Authorization: Bearer <Openverse API token>\"",
            "curl -H \"Authorization: Token **********\"",
            "curl -H \"apikey: $API_KEY\"",
            "curl -H \"Authorization: Bearer $(gcloud auth print-access-token)\"",
            "curl -H \"Authorization: basic {base64(email:password[\\n])}\"",
        ] {
            assert!(claimed(text).is_empty(), "{text}: {:?}", claimed(text));
        }
    }
}
