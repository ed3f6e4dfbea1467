//! Passwords a command line carries, as an agent's shell trace prints the command it ran:
//!
//! - curl's `-u user:password`, `--user 'user:password'`, `-uuser:password` (curl's documented
//!   `-u, --user <user:password>`), and the credential a header it sends carries:
//!   `-H 'Authorization: <scheme> <credential>'`, or a header whose name says it holds one
//!   (`Api-Token:`, `X-Api-Key:`, `Token:`), its value after an optional scheme word
//!   (`Api-Token 22cb…`);
//! - a registry login's `-p PASSWORD`, `--password PASSWORD` or `--password=PASSWORD` after
//!   `login` under docker, podman, nerdctl, buildah, skopeo, helm or oras (their documented
//!   `login` options; `--password-stdin` carries none);
//! - sshpass' `-p PASSWORD` (or `-pPASSWORD`), and the MySQL clients' `-pPASSWORD` (glued:
//!   `-p` alone prompts) and `--password=PASSWORD` (mysql, mysqldump, mysqladmin, mariadb).
//!
//! An option is read only on a line that runs its program (the word, after the line's start,
//! a blank, `$`, `;`, `|`, `&`, `(` or a quote), since `-u` and `-p` mean other things to other
//! programs. Its argument is one shell word, its quoted pieces joined (`kevin:'pRf7…'`,
//! `"{id}":"{secret}"`); the password alone is redacted, its quotes left. None is read when the
//! password is empty or stands in for one: a variable or a command's output (`$PASS`,
//! `${{ secrets.X }}`, `$(cat pw)`), a template's (`{{ .Values.password }}`), a placeholder
//! (`<password>`, `[PASSWORD]`, `xxx`, `pass`, `token`), or curl's user's own name again
//! (`test:test`); curl's argument with no `:` has none (curl then prompts). A command
//! continued onto the next line (`\`) is read on the line that names its program only: a
//! line's redaction never waits on the lines after it.

use crate::{Claim, Kind};

/// The marker of a credential in a header curl is told to send.
pub const HEADER_CREDENTIAL: &str = "http_header_credential";

/// What a header's name ends in when its value is a credential (any case).
const CREDENTIAL_HEADER_ENDS: &[&str] = &["authorization", "token", "key", "secret", "apikey"];

/// The programs whose command lines carry a password, and how each is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Program {
    Curl,
    /// a container tool whose `login` takes `-p`/`--password`
    RegistryLogin,
    Sshpass,
    Mysql,
}

const PROGRAMS: &[(&str, Program)] = &[
    ("curl", Program::Curl),
    ("docker", Program::RegistryLogin),
    ("podman", Program::RegistryLogin),
    ("nerdctl", Program::RegistryLogin),
    ("buildah", Program::RegistryLogin),
    ("skopeo", Program::RegistryLogin),
    ("helm", Program::RegistryLogin),
    ("oras", Program::RegistryLogin),
    ("sshpass", Program::Sshpass),
    ("mysql", Program::Mysql),
    ("mysqldump", Program::Mysql),
    ("mysqladmin", Program::Mysql),
    ("mariadb", Program::Mysql),
];

/// How far after its program's name a command's options are read.
const MAX_COMMAND: usize = 4096;

/// One search for every program's name.
fn program_names() -> &'static aho_corasick::AhoCorasick {
    static NAMES: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(PROGRAMS.iter().map(|(name, _)| name))
            .expect("the program names are a valid search")
    })
}

/// Every command-line password in `text`.
pub(crate) fn find(text: &str, out: &mut Vec<Claim>) {
    let bytes = text.as_bytes();
    // each program's name where it runs: a word of its own, a blank after it
    let commands: Vec<(usize, usize, Program)> = program_names()
        .find_iter(bytes)
        .filter_map(|found| {
            let (name, program) = PROGRAMS[found.pattern().as_usize()];
            let at = found.start();
            let starts_a_word = at == 0
                || matches!(
                    bytes[at - 1],
                    b' ' | b'\t' | b'\n' | b'$' | b';' | b'|' | b'&' | b'(' | b'\'' | b'"' | b'`'
                );
            let after = at + name.len();
            (starts_a_word && matches!(bytes.get(after), Some(b' ' | b'\t')))
                .then_some((at, after, program))
        })
        .collect();
    for (i, &(at, after, program)) in commands.iter().enumerate() {
        // a command is read up to the next one, its line's end or MAX_COMMAND bytes on, so
        // every byte of a line of many commands is read once
        let next = commands
            .get(i + 1)
            .map_or(bytes.len(), |&(start, _, _)| start);
        let window = &bytes[at..next.min(after + MAX_COMMAND)];
        let line_end = memchr::memchr(b'\n', window).map_or(at + window.len(), |n| at + n);
        match program {
            Program::Curl => read_options(text, after, line_end, out),
            other => read_password_options(text, after, line_end, other, out),
        }
    }
}

/// Reads a registry login's, sshpass' or a MySQL client's words for the option that carries
/// the password.
fn read_password_options(
    text: &str,
    pos: usize,
    end: usize,
    program: Program,
    out: &mut Vec<Claim>,
) {
    let mut logging_in = program != Program::RegistryLogin;
    let mut value_next = false;
    for (raw, word) in words(text, pos, end) {
        if value_next {
            value_next = false;
            if !raw.starts_with('-') {
                claim_value(text, &word, out);
            }
        } else if raw == "login" {
            logging_in = true;
        } else if logging_in {
            match program {
                Program::RegistryLogin | Program::Sshpass if raw == "-p" => value_next = true,
                Program::RegistryLogin if raw == "--password" => value_next = true,
                Program::RegistryLogin | Program::Mysql if raw.starts_with("--password=") => {
                    claim_value(text, &word["--password=".len()..], out);
                }
                Program::Sshpass | Program::Mysql if raw.len() > 2 && raw.starts_with("-p") => {
                    claim_value(text, &word[2..], out);
                }
                _ => {}
            }
        }
    }
}

/// Claims a password read whole from a word's characters, unless it stands in for one.
fn claim_value(text: &str, chars: &[(u8, usize)], out: &mut Vec<Claim>) {
    let Some((start, end, value)) = as_written(text, chars) else {
        return;
    };
    if !stands_in(value, b"") {
        out.push(Claim {
            start,
            end,
            kind: Kind::Password,
        });
    }
}

/// Where a word's characters were written, and what they spell, when that span holds them
/// alone: a quote inside it (`a'b'c`) would be taken with them.
fn as_written<'t>(text: &'t str, chars: &[(u8, usize)]) -> Option<(usize, usize, &'t str)> {
    let (&(_, first), &(_, last)) = (chars.first()?, chars.last()?);
    let span = &text[first..=last];
    (span.len() == chars.len()).then_some((first, last + 1, span))
}

/// Reads the words of a curl command from `pos` to `end` for `-u`/`--user` and its argument.
fn read_options(text: &str, pos: usize, end: usize, out: &mut Vec<Claim>) {
    let mut argument_next = false;
    let mut header_next = false;
    for (raw, word) in words(text, pos, end) {
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
            claim_password(text, &word[2..], out);
        } else if raw.len() > 2
            && raw.starts_with('-')
            && !raw.starts_with("--")
            && raw.ends_with('u')
            && raw[1..].bytes().all(|b| b.is_ascii_alphabetic())
        {
            // flags run together, the last one taking the argument (`-su user:pw`)
            argument_next = true;
        }
    }
}

/// The words of a command from `pos` to `end`, each as written and as its characters with
/// their quotes removed; the command ends at a separator (`;`, `|`, `&`), a redirection or a
/// comment.
fn words(text: &str, mut pos: usize, end: usize) -> impl Iterator<Item = (&str, Vec<(u8, usize)>)> {
    let bytes = text.as_bytes();
    std::iter::from_fn(move || {
        while pos < end && matches!(bytes[pos], b' ' | b'\t') {
            pos += 1;
        }
        if pos >= end || matches!(bytes[pos], b';' | b'|' | b'&' | b'>' | b'#') {
            return None;
        }
        let start = pos;
        let (word_end, chars) = shell_word(bytes, start, end);
        pos = word_end;
        Some((&text[start..word_end], chars))
    })
}

/// One shell word from `start`: where it ends, and its characters with their quotes removed,
/// each with the byte offset it was written at.
fn shell_word(bytes: &[u8], start: usize, end: usize) -> (usize, Vec<(u8, usize)>) {
    let mut chars = Vec::new();
    let mut pos = start;
    let mut quote: Option<u8> = None;
    while pos < end {
        let b = bytes[pos];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => chars.push((b, pos)),
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b' ' || b == b'\t' => break,
            None => chars.push((b, pos)),
        }
        pos += 1;
    }
    (pos, chars)
}

/// Claims the password of a `user:password` argument, unless it is none (the module's text).
fn claim_password(text: &str, word: &[(u8, usize)], out: &mut Vec<Claim>) {
    let Some(colon) = word.iter().position(|&(b, _)| b == b':') else {
        return;
    };
    // the whole argument a placeholder (`<user:password>`)
    if word.first().is_some_and(|&(b, _)| b == b'<') && word.last().is_some_and(|&(b, _)| b == b'>')
    {
        return;
    }
    let user: Vec<u8> = word[..colon].iter().map(|&(b, _)| b).collect();
    let Some((start, end, value)) = as_written(text, &word[colon + 1..]) else {
        return;
    };
    if !stands_in(value, &user) {
        out.push(Claim {
            start,
            end,
            kind: Kind::Password,
        });
    }
}

/// Claims the credential of a header argument (`Authorization: Bearer …`, `Api-Token: …`),
/// unless it stands in for one or its name says no credential.
fn claim_header_credential(text: &str, word: &[(u8, usize)], out: &mut Vec<Claim>) {
    let Some(colon) = word.iter().position(|&(b, _)| b == b':') else {
        return;
    };
    let name: String = word[..colon].iter().map(|&(b, _)| b as char).collect();
    let name = name.trim().to_ascii_lowercase();
    let names_a_credential = CREDENTIAL_HEADER_ENDS.iter().any(|end| name.ends_with(end))
        && !name.ends_with("-public-key")
        && !name.ends_with("idempotency-key");
    if !names_a_credential {
        return;
    }
    // the value's words; the credential is the last (`Bearer x`, `Api-Token x`, `x`)
    let value = &word[colon + 1..];
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
    let Some((start, end, value)) = as_written(text, credential) else {
        return;
    };
    let reads_as_a_key = value.len() >= 8
        && (value.bytes().any(|b| b.is_ascii_digit())
            || (value.bytes().any(|b| b.is_ascii_uppercase())
                && value.bytes().any(|b| b.is_ascii_lowercase())));
    if value.starts_with(crate::MARKER_PREFIX)
        || !reads_as_a_key
        || stands_in(value, b"")
        || value.contains('(')
    {
        return;
    }
    out.push(Claim {
        start,
        end,
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
            ("curl https://curl.se/x -u admin:s3cr3tPw", "s3cr3tPw"),
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
    fn a_registry_logins_sshpass_and_mysqls_password_is_read() {
        for (text, password) in [
            (
                "docker login -u ci -p Xy7pQ2mN9vB4 registry.example.com",
                "Xy7pQ2mN9vB4",
            ),
            (
                "docker login dvacr00.azurecr.io -u dvacr00 -p Ljc+1lq0U0+c3jHlMHxSxAhC",
                "Ljc+1lq0U0+c3jHlMHxSxAhC",
            ),
            (
                "podman login --username ci --password 'Xy7pQ2mN9vB4' quay.io",
                "Xy7pQ2mN9vB4",
            ),
            (
                "helm registry login ghcr.io --password=Xy7pQ2mN9vB4",
                "Xy7pQ2mN9vB4",
            ),
            ("sshpass -p 'Xy7pQ2mN9vB4' ssh root@host", "Xy7pQ2mN9vB4"),
            ("$ mysql -u root -pXy7pQ2mN9vB4 -h db", "Xy7pQ2mN9vB4"),
            (
                "mysqldump --password=Xy7pQ2mN9vB4 app > dump.sql",
                "Xy7pQ2mN9vB4",
            ),
        ] {
            assert_eq!(claimed(text), [password], "{text}");
        }
        for text in [
            "docker login -u ci --password-stdin registry.example.com",
            "docker login -u ci -p $REGISTRY_PASSWORD registry.example.com",
            "docker run -p 8080:80 nginx",
            "docker push -p image",
            "mysql -u root -p app",
            "sshpass -p \"$SSHPASS\" ssh host",
            "podman login -p <password> quay.io",
        ] {
            assert!(claimed(text).is_empty(), "{text}: {:?}", claimed(text));
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
