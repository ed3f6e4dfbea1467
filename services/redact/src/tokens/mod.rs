//! Token shapes: the major vendors' API keys and tokens, JWTs, bearer credentials and the
//! password of a URL's userinfo, each on one line.
//!
//! Every shape is one alternative of a single combined regex (JWTs have a regex of their own,
//! see [`JWT`]). A match is found with the regex's DFA alone (no capture groups: resolving
//! them on a long match runs the slow engine over all of it); which shape it is follows from
//! how it starts — every alternative opens with its own literal — and the part redacted from
//! the shape's [`Claimed`]. The `(?P<s>…)` group in each pattern documents that part, and the
//! unit tests check the two readings agree.
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

mod checks;
mod nearby;

use checks::{
    base64_of_a_jwt, challenge_param, gitlab_width_reads, jwt_header_names_its_alg, kebab,
    slack_body_reads,
};
use std::sync::LazyLock;

use memchr::memmem;
use regex::Regex;

use crate::{Claim, Kind};

/// Which part of a shape's match is redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claimed {
    /// all of it
    Whole,
    /// what follows the last of these bytes (a prefix such as `Bearer ` is kept)
    AfterLast(&'static [u8]),
    /// a URL's password: between the first `:` after `://` and the last `@` of the userinfo
    UrlPassword,
}

/// How a match is turned into a claim, beyond its [`Claimed`] part.
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
    /// a JWT written in base64 (a Kubernetes Secret's `data`, an env var encoded once more):
    /// the run must decode to a JWT's header and claims
    Base64Jwt,
    /// a JWT: its header must decode to a JSON object naming its `alg` (RFC 7515 §4.1.1)
    Jwt,
    /// a Slack token: its body holds what its secret part is made of (see [`slack_body_reads`])
    Slack,
    /// a GitLab token of a fixed width: its body is exactly as long as GitLab writes it
    GitLab,
}

/// One token shape: its kind's name and its pattern, in which `(?P<s>` marks the claimed part.
struct Shape {
    name: &'static str,
    /// whether a match of this shape starts so (checked in order, the first one true wins)
    opens: fn(&[u8]) -> bool,
    pattern: &'static str,
    claimed: Claimed,
    check: Check,
}

fn starts_with_any(m: &[u8], prefixes: &[&[u8]]) -> bool {
    prefixes.iter().any(|p| m.starts_with(p))
}

fn starts_with_ignore_case(m: &[u8], prefix: &[u8]) -> bool {
    m.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

/// The separators a credential after a kept prefix follows.
const CREDENTIAL_AFTER: &[u8] = b" \t";
const AWS_SECRET_AFTER: &[u8] = b" \t:=\"'\\";

/// The shapes of the combined regex. Order matters only between alternatives that can start
/// at the same byte: the earlier one wins (Anthropic's `sk-ant-` before OpenAI's `sk-`).
/// Alternatives that can stay alive a long time without matching (a URL's userinfo) go last.
const SHAPES: &[Shape] = &[
    Shape {
        name: "slack_webhook",
        opens: |m| starts_with_any(m, &[b"http", b"hooks"]),
        // an incoming webhook (`/services/T…/B…/…`), and a workflow's or a trigger's URL, whose
        // path after `/workflows/` or `/triggers/` is its secret (Slack's Workflow Builder docs)
        pattern: r"\b(?P<s>(?:https?://)?hooks\.slack\.com/(?:services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+|(?:services|workflows|triggers)/[A-Za-z0-9_/-]{40,}))",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "bearer_token",
        opens: |m| starts_with_ignore_case(m, b"bearer"),
        pattern: r"\b(?i:bearer)[ \t]+(?P<s>[A-Za-z0-9._~+/=-]{16,})",
        claimed: Claimed::AfterLast(CREDENTIAL_AFTER),
        check: Check::Credential,
    },
    Shape {
        name: "bearer_token",
        opens: |m| starts_with_ignore_case(m, b"authorization"),
        pattern: r#"\b(?i:authorization)\\?["']?[ \t]*[:=][ \t]*\\?["']?(?i:token|basic)[ \t]+(?P<s>[A-Za-z0-9._~+/=-]{16,})"#,
        claimed: Claimed::AfterLast(CREDENTIAL_AFTER),
        check: Check::Credential,
    },
    Shape {
        name: "aws_secret_access_key",
        opens: |m| starts_with_any(m, &[b"aws_secret_access_key", b"AWS_SECRET_ACCESS_KEY"]),
        pattern: r#"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY)\\?["']?[ \t]*[:=][ \t]*\\?["']?(?P<s>[A-Za-z0-9/+]{40,})"#,
        claimed: Claimed::AfterLast(AWS_SECRET_AFTER),
        check: Check::Plain,
    },
    Shape {
        name: "anthropic_api_key",
        opens: |m| m.starts_with(b"sk-ant-"),
        pattern: r"\b(?P<s>sk-ant-[A-Za-z0-9_-]{20,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "openai_api_key",
        opens: |m| m.starts_with(b"sk-"),
        // a body of 20 or more that does not open with `ant-` (that is Anthropic's prefix)
        pattern: r"\b(?P<s>sk-(?:[A-Zb-z0-9_-][A-Za-z0-9_-]{19,}|a[A-Za-mo-z0-9_-][A-Za-z0-9_-]{18,}|an[A-Za-su-z0-9_-][A-Za-z0-9_-]{17,}|ant[A-Za-z0-9_][A-Za-z0-9_-]{16,}))",
        claimed: Claimed::Whole,
        check: Check::OpenAi,
    },
    Shape {
        name: "github_token",
        opens: |m| m.starts_with(b"gh"),
        // GitHub's documented forms: 36 or more of the base62 body (a newer installation
        // token's body holds `_` too), or an App's installation token as `ghs_<app id>_<JWT>`
        // (a JWT's three dotted base64url segments), read first so the JWT is taken whole
        pattern: r"\b(?P<s>gh[pousr]_(?:[0-9]+_eyJ[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+){1,2}|[A-Za-z0-9_]{36,}))",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "github_fine_grained_token",
        opens: |m| m.starts_with(b"github_pat_"),
        pattern: r"\b(?P<s>github_pat_[A-Za-z0-9_]{22,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "gitlab_token",
        opens: |m| m.starts_with(b"gl"),
        // GitLab's documented prefixes; an agent's token (`glagent-`) is 50 or more
        pattern: r"\b(?P<s>(?:glpat|gldt|glrt|glptt|gloas|glcbt|glft|glimt|glsoat)-[A-Za-z0-9_-]{20,}|glagent-[A-Za-z0-9_-]{50,})",
        claimed: Claimed::Whole,
        check: Check::GitLab,
    },
    Shape {
        name: "gitlab_runner_registration_token",
        opens: |m| m.starts_with(b"GR1348941"),
        // the legacy runner registration token: `GR1348941` and a 20-character body
        pattern: r"\b(?P<s>GR1348941[A-Za-z0-9_-]{20,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "slack_token",
        opens: |m| starts_with_any(m, &[b"xox", b"xapp"]),
        pattern: r"\b(?P<s>(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,})",
        claimed: Claimed::Whole,
        check: Check::Slack,
    },
    Shape {
        name: "aws_access_key_id",
        opens: |m| starts_with_any(m, &[b"AKIA", b"ASIA", b"ABIA", b"ACCA", b"AIDA", b"AROA"]),
        pattern: r"\b(?P<s>(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[A-Z0-9]{16})\b",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "google_api_key",
        opens: |m| m.starts_with(b"AIza"),
        pattern: r"\b(?P<s>AIza[A-Za-z0-9_-]{35,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "stripe_key",
        // secret (`sk_`), restricted (`rk_`) and webhook-signing (`whsec_`) keys; a publishable
        // key (`pk_`) is none: Stripe's docs have it published in a page's Stripe.js code
        opens: |m| starts_with_any(m, &[b"sk_", b"rk_", b"whsec_"]),
        pattern: r"\b(?P<s>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{16,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "npm_token",
        opens: |m| m.starts_with(b"npm_"),
        pattern: r"\b(?P<s>npm_[A-Za-z0-9]{36,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "pypi_token",
        opens: |m| m.starts_with(b"pypi-"),
        // a macaroon whose location is `pypi.org` (`AgEIcHlwaS5vcmc`) or `test.pypi.org`
        // (`AgENdGVzdC5weXBpLm9yZw`, TestPyPI's)
        pattern: r"\b(?P<s>pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,})",
        claimed: Claimed::Whole,
        check: Check::Plain,
    },
    Shape {
        name: "url_credentials",
        opens: |m| m.starts_with(b"://"),
        // the user may be empty (redis://:password@host); the scheme is checked by hand, so
        // the regex keeps `://` as its literal prefix
        // a raw `@` inside the password is the password's: the userinfo ends at the last `@`
        // before the host (the password's class holds no `/`, so it never reaches a path)
        pattern: r"://[A-Za-z0-9._~%!$&'()*+,;=-]*:(?P<s>[A-Za-z0-9._~%!$&'()*+,;=:@-]+)@",
        claimed: Claimed::UrlPassword,
        check: Check::Url,
    },
];

/// A JWT: base64url segments, the first two a JSON object's (`eyJ`); a signed one's third of
/// 8 or more, an unsigned one's (`"alg":"none"`) empty — its header and claims still are the
/// credential, with or without the dot that ends them.
const JWT_SHAPES: &[Shape] = &[
    Shape {
        name: "jwt",
        opens: |m| m.starts_with(b"eyJ"),
        pattern: r"\b(?P<s>eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]{8,}|\.)?)",
        claimed: Claimed::Whole,
        check: Check::Jwt,
    },
    Shape {
        name: "jwt",
        // base64 of `eyJ` is `ZXlK`: a JWT encoded once more (gitleaks' jwt-base64)
        opens: |m| m.starts_with(b"ZXlK"),
        pattern: r"\b(?P<s>ZXlK[A-Za-z0-9+/]{40,}={0,2})",
        claimed: Claimed::Whole,
        check: Check::Base64Jwt,
    },
];

/// A compiled set of shapes: the regex of their alternatives, in order.
struct Compiled {
    regex: Regex,
    /// the same alternatives anchored at the start of what is searched: read after an escaped
    /// break (`\n`), where the letter before a token hides its word boundary
    anchored: Regex,
    shapes: &'static [Shape],
}

impl Compiled {
    fn new(shapes: &'static [Shape]) -> Self {
        let alternatives: Vec<String> = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| shape.pattern.replace("(?P<s>", &format!("(?P<s{i}>")))
            .collect();
        // ASCII mode: `\b` is an ASCII word boundary, which the lazy DFA runs on any text,
        // and `(?i)` folds ASCII only. Every class is ASCII, so matches are on char boundaries.
        let pattern = format!("(?-u)(?:{})", alternatives.join("|"));
        let regex = Regex::new(&pattern).expect("the token shapes are a valid regex");
        let anchored = Regex::new(&format!("(?-u)^(?:{})", alternatives.join("|")))
            .expect("the token shapes are a valid regex");
        Compiled {
            regex,
            anchored,
            shapes,
        }
    }

    /// Which shape a match is, and the part of it redacted, relative to the match.
    fn classify(&self, matched: &[u8]) -> Option<(usize, usize, usize)> {
        let index = self
            .shapes
            .iter()
            .position(|shape| (shape.opens)(matched))?;
        let len = matched.len();
        let (from, to) = match self.shapes[index].claimed {
            Claimed::Whole => (0, len),
            Claimed::AfterLast(separators) => (
                matched
                    .iter()
                    .rposition(|b| separators.contains(b))
                    .map_or(0, |at| at + 1),
                len,
            ),
            Claimed::UrlPassword => (
                matched
                    .iter()
                    .skip(3)
                    .position(|&b| b == b':')
                    .map_or(len, |at| at + 4),
                len.saturating_sub(1),
            ),
        };
        (from < to).then_some((index, from, to))
    }

    /// Claims every token of these shapes in `text[start..end]`, a segment with no armour in
    /// it; the text before `start` is context for the word boundary only.
    fn scan(&self, text: &str, start: usize, end: usize, out: &mut Vec<Claim>) {
        let haystack = &text[..end];
        let mut at = start;
        // a URL's user that is the credential itself, claimed after everything else so that a
        // token shape read in it names it first
        let mut users = Vec::new();
        while at < end {
            let Some(found) = self.regex.find_at(haystack, at) else {
                break;
            };
            // every shape matches at least one byte, so the search always moves on
            at = self
                .claim(text, found.start(), found.end(), out, &mut users)
                .max(at + 1);
        }
        // a token right after an escaped break or tab (`"…\nsk-ant-…"`, a JSON string's
        // lines): the escape's letter hides the token's word boundary, so each is read again
        // from where it starts; no shape's body holds a `\`, so each such read ends before the
        // next escape and the pass stays linear
        let bytes = text.as_bytes();
        for slash in memchr::memchr_iter(b'\\', &bytes[start..end]) {
            let p = start + slash + 2;
            if p >= end
                || !matches!(bytes[p - 1], b'n' | b't' | b'r')
                || !bytes[p].is_ascii_alphanumeric()
            {
                continue;
            }
            if let Some(found) = self.anchored.find(&haystack[p..]) {
                self.claim(text, p + found.start(), p + found.end(), out, &mut users);
            }
        }
        out.append(&mut users);
    }

    /// Claims a token of these shapes starting exactly at `at` (what the text after a claim
    /// reads as once the claim is a marker), in the armour-free `text[at..end]`.
    fn read_at(&self, text: &str, at: usize, end: usize, out: &mut Vec<Claim>) {
        let mut users = Vec::new();
        if let Some(found) = self.anchored.find(&text[at..end]) {
            self.claim(text, at + found.start(), at + found.end(), out, &mut users);
        }
        out.append(&mut users);
    }

    /// Claims the match at `start..end`, read as the shape it opens with: where the search
    /// goes on from.
    fn claim(
        &self,
        text: &str,
        start: usize,
        end: usize,
        out: &mut Vec<Claim>,
        users: &mut Vec<Claim>,
    ) -> usize {
        let mut next = end;
        let Some((index, from, to)) = self.classify(&text.as_bytes()[start..end]) else {
            return next;
        };
        let shape = &self.shapes[index];
        let (from, to) = (start + from, start + to);
        let claim = match shape.check {
            Check::Plain => Some((from, to)),
            Check::OpenAi => (!kebab(&text[from + 3..to])).then_some((from, to)),
            Check::Base64Jwt => base64_of_a_jwt(&text[from..to]).then_some((from, to)),
            Check::Jwt => jwt_header_names_its_alg(&text[from..to]).then_some((from, to)),
            Check::Slack => slack_body_reads(text, from, to).then_some((from, to)),
            Check::GitLab => gitlab_width_reads(&text[from..to]).then_some((from, to)),
            Check::Credential => {
                let to = from + text[from..to].trim_end_matches('.').len();
                (to - from >= 16 && !challenge_param(&text[from..to])).then_some((from, to))
            }
            Check::Url => {
                // read the userinfo again from after `://`: a token written as the URL's user
                // (https://ghp_…:x-oauth-basic@) is claimed as itself
                next = start + 3;
                let user = (start + 3, from.saturating_sub(1));
                // GitHub's documented form puts the token in the user and the literal
                // `x-oauth-basic` in the password: the user is the credential, whatever its
                // shape
                if text[from..to].eq_ignore_ascii_case("x-oauth-basic")
                    && user.0 < user.1
                    && after_scheme(text, start)
                {
                    users.push(Claim {
                        start: user.0,
                        end: user.1,
                        kind: Kind::Token(shape.name),
                    });
                }
                (after_scheme(text, start)
                    && !reference(&text[from..to])
                    && !documentation_credentials(&text[from..to]))
                .then_some((from, to))
            }
        };
        if let Some((from, to)) = claim {
            out.push(Claim {
                start: from,
                end: to,
                kind: Kind::Token(shape.name),
            });
        }
        next
    }
}

/// Whether a URL's password is a variable's reference (`$(PGPASSWORD)`, `$DB_PASS`,
/// `%(password)s`): a make file's, a shell's or a format's, to be filled in later.
fn reference(password: &str) -> bool {
    let ident = |s: &str| {
        s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    if let Some(inner) = password
        .strip_prefix("$(")
        .and_then(|p| p.strip_suffix(')'))
    {
        return ident(inner);
    }
    if let Some(inner) = password
        .strip_prefix("%(")
        .and_then(|p| p.strip_suffix(")s"))
    {
        return ident(inner);
    }
    password.strip_prefix('$').is_some_and(ident)
}

/// Whether a URL's credentials are documentation's, not a secret: a placeholder password
/// ([`crate::is_placeholder_url_password`]) or one of three characters or fewer (`foo:bar@`,
/// `a:b@`, `letme:in@`). Any other password is one, whatever the host: an example host
/// (`git.example.com`) in a transcript may stand for a real one.
fn documentation_credentials(password: &str) -> bool {
    password.len() <= 3 || crate::is_placeholder_url_password(password)
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
    let mut scan = |start: usize, end: usize| {
        // nothing shorter than a JWT's 28 bytes, or a slack token's 15, is worth a search
        if end - start >= 15 {
            tokens.scan(text, start, end, out);
            if end - start >= 28 {
                jwt.scan(text, start, end, out);
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
    crate::vendors::find(text, out);
    crate::infix::find(text, out);
    crate::command_line::find(text, out);
    crate::xml_element::find(text, out);
    nearby::secrets_beside_key_ids(text, out);
    // a token glued after a claim, then the copies of a token, until neither finds one more
    // (a claim kept once is kept again: its copies are its text)
    let mut from = 0;
    loop {
        glued_after_claims(text, out, from);
        out.retain(|claim| kept(text, claim));
        from = out.len();
        nearby::copies_on_their_line(text, out);
        if out.len() == from {
            break;
        }
    }
}

/// Whether a claim stands: a stand-in in a token's shape is no token (placeholder.rs); URL
/// credentials have their own; a vendor's published example is no secret (published.rs).
fn kept(text: &str, claim: &Claim) -> bool {
    let claimed = &text[claim.start..claim.end];
    !crate::published::is_published_example(claimed)
        && (matches!(claim.kind, Kind::Token("url_credentials"))
            || !crate::placeholder::is_stand_in(claimed))
}

/// A token glued to the end of a claim (`…[claimed]ghp_…`): once the claim is a marker, the
/// token starts a word after its `]`, and a second redaction would read it. It is read now,
/// from each claim's end from `out[from..]` on (and from the ends of what it finds), so
/// redacting twice reads as once. Each place is read once.
fn glued_after_claims(text: &str, out: &mut Vec<Claim>, from: usize) {
    let tokens = &*TOKENS;
    let bytes = text.as_bytes();
    let mut work: Vec<usize> = out[from..].iter().map(|claim| claim.end).collect();
    let mut read = std::collections::HashSet::new();
    while let Some(at) = work.pop() {
        if at >= text.len() || !bytes[at].is_ascii_alphanumeric() || !read.insert(at) {
            continue;
        }
        let end = ARMOUR
            .find(&bytes[at..])
            .map_or(text.len(), |armour| at + armour);
        let found = out.len();
        tokens.read_at(text, at, end, out);
        work.extend(out[found..].iter().map(|claim| claim.end));
    }
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

    /// Every match's shape and claimed part, read from how it starts, are the ones its
    /// capture group says.
    fn agree(text: &str) {
        for compiled in [&*TOKENS, &*JWT] {
            let mut at = 0;
            while let Some(found) = compiled.regex.find_at(text, at) {
                let caps = compiled
                    .regex
                    .captures_at(text, at)
                    .expect("captures find the same match");
                assert_eq!(caps.get(0).map(|m| m.range()), Some(found.range()));
                let (group, span) = caps
                    .iter()
                    .enumerate()
                    .skip(1)
                    .find_map(|(i, g)| g.map(|g| (i, g.range())))
                    .expect("one shape's group took part");
                let name = compiled
                    .regex
                    .capture_names()
                    .nth(group)
                    .flatten()
                    .expect("groups are named");
                let (index, from, to) = compiled
                    .classify(found.as_str().as_bytes())
                    .expect("every match is classified");
                assert_eq!(name, format!("s{index}"), "{:?}", found.as_str());
                assert_eq!(
                    (found.start() + from)..(found.start() + to),
                    span,
                    "{:?}",
                    found.as_str()
                );
                at = found.end();
            }
        }
    }

    #[test]
    fn the_regexes_compile_and_every_shape_has_one_group() {
        for (compiled, shapes) in [(&*TOKENS, SHAPES), (&*JWT, JWT_SHAPES)] {
            assert_eq!(compiled.regex.captures_len(), shapes.len() + 1);
        }
    }

    #[test]
    fn classify_agrees_on_every_shape() {
        let alnum = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
        agree(&format!(
            "https://hooks.slack.com/services/T01/B02/{alnum} Bearer {alnum}. \
             Authorization: \"token {alnum}\" aws_secret_access_key = '{alnum}' \
             sk-ant-api03-{alnum} sk-{alnum} ghp_{alnum} github_pat_{alnum} glptt-{alnum} \
             xoxe-{alnum} ASIAQ7W3E9R2T5Y8U4I6 AIza{alnum} pk_test_{alnum} whsec_{alnum} \
             npm_{alnum} pypi-AgEIcHlwaS5vcmc{alnum}{alnum} git+ssh://u:p%40ss@h \
             eyJhbGciOi.eyJzdWIiOi.{alnum}"
        ));
    }

    proptest::proptest! {
        #[test]
        fn classify_agrees_with_the_capture_groups(
            pieces in proptest::collection::vec(proptest::sample::select(vec![
                "sk-", "sk-ant-", "ant-", "api03-", "proj-", "ghp_", "gho_", "github_pat_", "glpat-",
                "gldt-", "xoxb-", "xapp-", "AKIA", "AROA", "AIza", "sk_live_", "rk_test_", "whsec_",
                "npm_", "pypi-AgEIcHlwaS5vcmc", "eyJ", ".", "Bearer ", "bearer\t", "Authorization: ",
                "authorization=\"", "token ", "Basic ", "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY",
                " = ", ":", "'", "\\\"", "https://", "http://", "hooks.slack.com/services/", "T0", "/B1",
                "/", "://", "@", "-", "_", " ", "\n", "A1b2C3d4", "Q7W3E9R2", "xyzw", "0123", "==", "+",
                "~", "%2F", "é", "[REDACTED:jwt]",
                "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0", "Q7W3E9R2T5Y8U4I6", "eyJhbGciOi.",
            ]), 0..40)
        ) {
            agree(&pieces.concat());
        }
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
                (ghp.clone(), "github_token"),
                // the user of x-oauth-basic, claimed last: the token's own claim names it
                (ghp, "url_credentials")
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

    #[test]
    fn a_jwt_in_base64_is_one_and_other_base64_is_not() {
        assert_eq!(
            claims("value: ZXlKaGJHY2lPaUpJVXpJMU5pSjkuZXlKemRXSWlPaUp5ZFc0dE5ESWlMQ0psZUhBaU9qRTNPVGs1T1RrNU9UbDkuYzJsbmJtRjBkWEpsTFdKNWRHVnpMV2hsY21V"),
            [("ZXlKaGJHY2lPaUpJVXpJMU5pSjkuZXlKemRXSWlPaUp5ZFc0dE5ESWlMQ0psZUhBaU9qRTNPVGs1T1RrNU9UbDkuYzJsbmJtRjBkWEpsTFdKNWRHVnpMV2hsY21V".to_owned(), "jwt")]
        );
        // base64 that opens as a JSON object but holds no JWT's two parts
        assert!(claims("data: ZXlKIGp1c3QganNvbiB0ZXh0LCBubyB0b2tlbiBoZXJlIGF0IGFsbCwgbG9uZ2VyIHRoYW4gZm9ydHk=").is_empty());
    }
}
