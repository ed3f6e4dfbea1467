//! Token shapes: the major vendors' API keys and tokens, JWTs, bearer credentials and the
//! password of a URL's userinfo, each on one line.
//!
//! Every shape is one alternative of a single combined regex (JWTs have a regex of their own,
//! see [`JWT`]); a capture group named `s<i>` marks the part of alternative `i` that is
//! redacted, so one match says both which shape it is and which bytes to claim.
//!
//! A token:
//! - starts at an ASCII word boundary, never in the middle of a longer identifier
//!   (`mask-ant-…`, `XAKIA…`);
//! - takes a longer body whole (bodies are greedy);
//! - never extends across a line break, an armour (`-----`) or a marker (`[REDACTED:`): no body
//!   class holds `\n`, `[` or `]`, and the text is searched one armour-free segment at a time.
//!
//! Linear time: the regexes are built once; a segment is searched with the regex crate's
//! linear engines, each search starting where the previous one's match ended (after a URL's
//! `://` for URL credentials, so a token written as the URL's user is still read), so every
//! byte is searched a bounded number of times. JWTs are searched on their own because their
//! first two segments are unbounded runs that need a `.eyJ` to complete: in the combined
//! regex a JWT's failed start would be read on past every token inside its run, once per
//! token.

use std::sync::LazyLock;

use memchr::memmem;
use regex::{CaptureLocations, Regex};

use crate::{Claim, Kind};

/// How a match is turned into a claim, beyond "claim group `s<i>`".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// claim the group as it is
    Plain,
    /// OpenAI's `sk-`: a kebab-case word list (`sk-learn-contrib-imbalanced`) is no key
    OpenAi,
    /// a URL's password: the `://` must follow a scheme; the user is searched again
    Url,
    /// a bearer credential: a sentence's full stop after it is not part of it
    Credential,
}

/// One token shape: its kind's name and its pattern, in which `(?P<s>` marks the claimed part.
struct Shape {
    name: &'static str,
    pattern: &'static str,
    check: Check,
}

/// The shapes of the combined regex. Order matters only between alternatives that can start
/// at the same byte: the earlier one wins (Anthropic's `sk-ant-` before OpenAI's `sk-`).
/// Alternatives that can stay alive a long time without matching (a URL's userinfo) go last.
const SHAPES: &[Shape] = &[
    Shape {
        name: "slack_webhook",
        pattern: r"\b(?P<s>(?:https?://)?hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+)",
        check: Check::Plain,
    },
    Shape {
        name: "bearer_token",
        pattern: r"\b(?i:bearer)[ \t]+(?P<s>[A-Za-z0-9._~+/=-]{16,})",
        check: Check::Credential,
    },
    Shape {
        name: "bearer_token",
        pattern: r#"\b(?i:authorization)\\?["']?[ \t]*[:=][ \t]*\\?["']?(?i:token|basic)[ \t]+(?P<s>[A-Za-z0-9._~+/=-]{16,})"#,
        check: Check::Credential,
    },
    Shape {
        name: "aws_secret_access_key",
        pattern: r#"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY)\\?["']?[ \t]*[:=][ \t]*\\?["']?(?P<s>[A-Za-z0-9/+]{40,})"#,
        check: Check::Plain,
    },
    Shape {
        name: "anthropic_api_key",
        pattern: r"\b(?P<s>sk-ant-[A-Za-z0-9_-]{20,})",
        check: Check::Plain,
    },
    Shape {
        name: "openai_api_key",
        // a body of 20 or more that does not open with `ant-` (that is Anthropic's prefix)
        pattern: r"\b(?P<s>sk-(?:[A-Zb-z0-9_-][A-Za-z0-9_-]{19,}|a[A-Za-mo-z0-9_-][A-Za-z0-9_-]{18,}|an[A-Za-su-z0-9_-][A-Za-z0-9_-]{17,}|ant[A-Za-z0-9_][A-Za-z0-9_-]{16,}))",
        check: Check::OpenAi,
    },
    Shape {
        name: "github_token",
        pattern: r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{36,})",
        check: Check::Plain,
    },
    Shape {
        name: "github_fine_grained_token",
        pattern: r"\b(?P<s>github_pat_[A-Za-z0-9_]{22,})",
        check: Check::Plain,
    },
    Shape {
        name: "gitlab_token",
        pattern: r"\b(?P<s>(?:glpat|gldt|glrt|glptt|gloas|glcbt|glft|glimt|glsoat)-[A-Za-z0-9_-]{20,})",
        check: Check::Plain,
    },
    Shape {
        name: "slack_token",
        pattern: r"\b(?P<s>(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,})",
        check: Check::Plain,
    },
    Shape {
        name: "aws_access_key_id",
        pattern: r"\b(?P<s>(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[A-Z0-9]{16})\b",
        check: Check::Plain,
    },
    Shape {
        name: "google_api_key",
        pattern: r"\b(?P<s>AIza[A-Za-z0-9_-]{35,})",
        check: Check::Plain,
    },
    Shape {
        name: "stripe_key",
        pattern: r"\b(?P<s>(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,})",
        check: Check::Plain,
    },
    Shape {
        name: "npm_token",
        pattern: r"\b(?P<s>npm_[A-Za-z0-9]{36,})",
        check: Check::Plain,
    },
    Shape {
        name: "pypi_token",
        pattern: r"\b(?P<s>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})",
        check: Check::Plain,
    },
    Shape {
        name: "url_credentials",
        // the user may be empty (redis://:password@host); the scheme is checked by hand, so
        // the regex keeps `://` as its literal prefix
        pattern: r"://[A-Za-z0-9._~%!$&'()*+,;=-]*:(?P<s>[A-Za-z0-9._~%!$&'()*+,;=:-]+)@",
        check: Check::Url,
    },
];

/// A JWT: three base64url segments, the first two a JSON object's (`eyJ`), 8 or more each.
const JWT_SHAPES: &[Shape] = &[Shape {
    name: "jwt",
    pattern: r"\b(?P<s>eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,})",
    check: Check::Plain,
}];

/// A compiled set of shapes: the regex and, per shape, the index of its claimed group.
struct Compiled {
    regex: Regex,
    groups: Vec<(usize, &'static Shape)>,
}

impl Compiled {
    fn new(shapes: &'static [Shape]) -> Self {
        let alternatives: Vec<String> = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                debug_assert_eq!(shape.pattern.matches("(?P<s>").count(), 1);
                shape.pattern.replace("(?P<s>", &format!("(?P<s{i}>"))
            })
            .collect();
        // ASCII mode: `\b` is an ASCII word boundary, which the lazy DFA runs on any text,
        // and `(?i)` folds ASCII only. Every class is ASCII, so matches are on char boundaries.
        let pattern = format!("(?-u)(?:{})", alternatives.join("|"));
        let regex = Regex::new(&pattern).expect("the token shapes are a valid regex");
        let groups = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                let name = format!("s{i}");
                let index = regex
                    .capture_names()
                    .position(|n| n == Some(name.as_str()))
                    .expect("every shape has its claimed group");
                (index, shape)
            })
            .collect();
        Compiled { regex, groups }
    }

    /// Claims every token of these shapes in `text[start..end]`, a segment with no armour in
    /// it; the text before `start` is context for the word boundary only.
    fn scan(
        &self,
        text: &str,
        start: usize,
        end: usize,
        locs: &mut CaptureLocations,
        out: &mut Vec<Claim>,
    ) {
        let haystack = &text[..end];
        let mut at = start;
        while at < end {
            let Some(found) = self.regex.captures_read_at(locs, haystack, at) else {
                break;
            };
            // every shape matches at least one byte, so the search always moves on
            let mut next = found.end().max(at + 1);
            let matched = self
                .groups
                .iter()
                .find_map(|&(group, shape)| locs.get(group).map(|span| (span, shape)));
            if let Some(((from, to), shape)) = matched {
                let claim = match shape.check {
                    Check::Plain => Some((from, to)),
                    Check::OpenAi => (!kebab(&text[from + 3..to])).then_some((from, to)),
                    Check::Credential => {
                        let to = from + text[from..to].trim_end_matches('.').len();
                        (to - from >= 16).then_some((from, to))
                    }
                    Check::Url => {
                        // read the userinfo again from after `://`: a token written as the
                        // URL's user (https://ghp_…:x-oauth-basic@) is claimed as itself
                        next = found.start() + 3;
                        after_scheme(text, found.start()).then_some((from, to))
                    }
                };
                if let Some((from, to)) = claim {
                    out.push(Claim {
                        start: from,
                        end: to,
                        kind: Kind::Token(shape.name),
                    });
                }
            }
            at = next;
        }
    }
}

/// Whether an OpenAI body reads as a list of lower-case words (`learn-contrib-imbalanced`):
/// no digit, no upper case, and a dash.
fn kebab(body: &str) -> bool {
    body.contains('-')
        && !body
            .bytes()
            .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
}

/// Whether the `://` at `at` follows a URL scheme's last character.
fn after_scheme(text: &str, at: usize) -> bool {
    at > 0
        && text
            .as_bytes()
            .get(at - 1)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'))
}

static TOKENS: LazyLock<Compiled> = LazyLock::new(|| Compiled::new(SHAPES));
static JWT: LazyLock<Compiled> = LazyLock::new(|| Compiled::new(JWT_SHAPES));
static ARMOUR: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new("-----"));

/// Pushes one claim per token in the text, naming its shape.
pub(crate) fn find(text: &str, out: &mut Vec<Claim>) {
    let tokens = &*TOKENS;
    let jwt = &*JWT;
    let mut token_locs = tokens.regex.capture_locations();
    let mut jwt_locs = jwt.regex.capture_locations();
    let mut scan = |start: usize, end: usize| {
        // nothing shorter than a JWT's 28 bytes, or a slack token's 15, is worth a search
        if end - start >= 15 {
            tokens.scan(text, start, end, &mut token_locs, out);
            if end - start >= 28 {
                jwt.scan(text, start, end, &mut jwt_locs, out);
            }
        }
    };
    // the text's armour-free segments: a token stops where an armour's dashes start
    let mut start = 0;
    for armour in ARMOUR.find_iter(text.as_bytes()) {
        scan(start, armour);
        start = armour + 5;
    }
    scan(start, text.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(text: &str) -> Vec<(String, &'static str)> {
        let mut out = Vec::new();
        find(text, &mut out);
        out.iter()
            .map(|c| (text[c.start..c.end].to_owned(), c.kind.name()))
            .collect()
    }

    #[test]
    fn every_shape_has_a_group_and_the_regexes_compile() {
        assert_eq!(TOKENS.groups.len(), SHAPES.len());
        assert_eq!(JWT.groups.len(), 1);
    }

    #[test]
    fn a_token_stops_before_an_armour() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";
        let text = format!("{key}-----BEGIN PRIVATE KEY-----");
        assert_eq!(claims(&text), [(key.to_owned(), "openai_api_key")]);
        // a token after an armour is read too
        let text = format!("-----END PRIVATE KEY-----{key}");
        assert_eq!(claims(&text), [(key.to_owned(), "openai_api_key")]);
        // a short run of dashes is the body's own
        let text = format!("{key}--xy z");
        assert_eq!(claims(&text), [(format!("{key}--xy"), "openai_api_key")]);
    }

    #[test]
    fn openai_never_takes_anthropic_prefix() {
        // 16 characters after sk-ant-: too short for Anthropic, and never OpenAI's
        assert!(claims("sk-ant-abcdefghijklmnop").is_empty());
        assert_eq!(
            claims("sk-antelope0123456789abcd"),
            [("sk-antelope0123456789abcd".to_owned(), "openai_api_key")]
        );
    }

    #[test]
    fn a_url_user_that_is_a_token_is_claimed_as_itself() {
        let ghp = format!("ghp_{}", "A1b2C3d4E5".repeat(4));
        let text = format!("https://{ghp}:x-oauth-basic@github.com/o/r");
        assert_eq!(
            claims(&text),
            [
                ("x-oauth-basic".to_owned(), "url_credentials"),
                (ghp, "github_token")
            ]
        );
    }

    #[test]
    fn kebab_words_are_no_openai_key() {
        assert!(kebab("learn-contrib-imbalanced"));
        assert!(!kebab("proj-Abcdefghijklmnopqrstu"));
        assert!(!kebab("abcdefghijklmnopqrstuvwxyz"));
    }

    #[test]
    fn no_scheme_no_url_credentials() {
        assert!(claims("see ://user:secret@host").is_empty());
        assert_eq!(
            claims("redis://:s3cret@cache:6379"),
            [("s3cret".to_owned(), "url_credentials")]
        );
    }
}
