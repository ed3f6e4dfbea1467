//! Secret redaction for everything read out of a box.
//!
//! Everything a box writes was produced by an agent running with every permission and the
//! seat's credentials in its environment, so every text read out of a box — reports,
//! transcripts, failure text, questions, the live tail — passes through here whole, before it
//! is bounded, and again at publish (spec: "Everything read out of the box is secret-redacted
//! whole…"). Three rules, each replacing what it finds with a marker naming its kind:
//!
//! - [`tokens`]: the token shapes of the major vendors, JWTs, bearer headers and URLs with
//!   credentials, each one line;
//! - [`password`]: the value after a password's key, in every form a text writes it, the value
//!   alone replaced;
//! - [`keys`]: private-key blocks (PEM, PKCS#8, OpenSSH, OpenPGP), read by their structure
//!   forward from a BEGIN and back from an END, under every wrapping a transcript puts them in.
//!
//! The API is two calls: [`redact`] for a whole text, and [`settled`] (or the incremental
//! [`Stream`]) for a stream that is still being written — the longest prefix whose redaction
//! nothing written later can change, and how many bytes are held back behind it.
//!
//! Redacting twice changes nothing, and redaction is linear in the text's length; both are
//! property tests. `tests/known_gaps.rs` keeps the one case known to differ on a second pass.

mod command_line;
mod context;
mod infix;
mod keys;
mod lines;
mod password;
mod placeholder;
mod published;
mod tokens;
mod vendors;
mod xml_element;

pub use vendors::named::{GAP as NAMED_GAP, NamedRule, named_rules};
pub use vendors::{Checksum, Rule, base62_padded, checksum_holds, keyword_hits, rules};

use std::borrow::Cow;
use std::fmt;

/// A block is never read more than this far from its armour: the largest key there is, more
/// than twice over in any wrapping. It also bounds how far back a stream holds text.
pub const MAX_KEY_BLOCK_BYTES: usize = 64 * 1024;

/// What a marker names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// a private-key block (PEM, PKCS#8, OpenSSH, OpenPGP)
    PrivateKey,
    /// a password's value
    Password,
    /// a vendor token, JWT, bearer credential or URL credential; the name is the token's kind
    Token(&'static str),
    /// a key known by the vendor named before it ([`named_rules`]); the name is its kind
    Named(&'static str),
}

impl Kind {
    /// The name inside the marker: `private_key`, `password`, or the token's kind.
    pub fn name(self) -> &'static str {
        match self {
            Kind::PrivateKey => "private_key",
            Kind::Password => "password",
            Kind::Token(name) | Kind::Named(name) => name,
        }
    }

    /// Which kind stands when two findings overlap: a key's block swallows what is inside it,
    /// a token read by its own format is named so rather than by the vendor named before it,
    /// and a token inside a password's value is named as the token.
    fn rank(self) -> u8 {
        match self {
            Kind::PrivateKey => 3,
            Kind::Token(_) => 2,
            Kind::Named(_) => 1,
            Kind::Password => 0,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[REDACTED:{}]", self.name())
    }
}

/// The marker names of the rules outside the vendor table ([`rules`]): the token shapes, the
/// secret-named key's value, passwords and private keys.
pub const OWN_RULES: &[&str] = &[
    "anthropic_api_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "bearer_token",
    infix::DISCORD_BOT_TOKEN,
    command_line::HEADER_CREDENTIAL,
    "github_fine_grained_token",
    "github_token",
    "gitlab_runner_registration_token",
    "gitlab_token",
    "google_api_key",
    "jwt",
    "npm_token",
    "openai_api_key",
    "pypi_token",
    "slack_token",
    "slack_webhook",
    "stripe_key",
    "url_credentials",
    context::KIND,
    "password",
    "private_key",
];

/// The passwords documentation and tests write where a real one would stand: the word itself
/// and its abbreviations, the usual stand-ins, and RFC 7617's example (`Aladdin:opensesame`).
const PLACEHOLDER_PASSWORDS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "pw",
    "secret",
    "changeme",
    "opensesame",
    "example",
];

/// Whether a password's value is a stand-in, not a secret: one of [`PLACEHOLDER_PASSWORDS`] in
/// any case (`password: "pass"`). Punctuation is still a value (`password: ***`, as the spec
/// has it), and so is any other word.
pub(crate) fn is_placeholder_password(value: &str) -> bool {
    PLACEHOLDER_PASSWORDS
        .iter()
        .any(|p| p.eq_ignore_ascii_case(value))
}

/// Whether a URL's password is a stand-in: a [`is_placeholder_password`], one character
/// repeated (`xxxx`, `****`), or punctuation alone.
pub(crate) fn is_placeholder_url_password(value: &str) -> bool {
    let bytes = value.as_bytes();
    let Some(&first) = bytes.first() else {
        return true;
    };
    is_placeholder_password(value)
        || (bytes.len() >= 3 && bytes.iter().all(|&b| b.eq_ignore_ascii_case(&first)))
        || bytes.iter().all(u8::is_ascii_punctuation)
}

/// The prefix every marker starts with; rules treat a marker as already redacted.
pub const MARKER_PREFIX: &str = "[REDACTED:";

/// A byte range of the text that a rule redacts, replaced by its kind's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// Compiles every rule table now (the token shapes, the vendor rows and their keyword search,
/// the password and key rules), so the first text redacted does not pay for it. A program
/// that redacts on an async runtime calls it once at start, off the runtime's threads.
/// Calling it again costs one short redaction.
pub fn prepare() {
    let sample = "API_TOKEN=ghp_prepare password: prepare\n-----BEGIN PRIVATE KEY-----\n";
    // through the stages, not `redact`: the sample is not counted as text redacted
    let _ = stages(sample, false);
}

/// Redacts a whole text: every token, password value and private-key block in it is replaced
/// by a marker naming its kind. Redacting the result again changes nothing.
///
/// The rules run in stages, each on the text the one before it left: tokens first; then the
/// private keys, read with the password values in that text claimed (so a value is never read
/// as a piece of a key); then the password values, read in the text the keys' blocks leave.
/// Each rule thus sees what a second pass would see — a token already a marker where a value
/// or a key's line meets it — which is what makes redacting twice change nothing.
pub fn redact(text: &str) -> String {
    let redacted = stages(text, false).redacted;
    counted(text.len(), matches!(redacted, Cow::Owned(_)));
    redacted.into_owned()
}

/// Bytes of text redacted so far in this process, and the bytes of those texts in which a
/// secret was found (the node's `boxfleet_redaction_bytes_total`).
static READ_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static CHANGED_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn counted(len: usize, changed: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    READ_BYTES.fetch_add(len as u64, Relaxed);
    if changed {
        CHANGED_BYTES.fetch_add(len as u64, Relaxed);
    }
}

/// `(read, changed)`: bytes passed through redaction in this process, and the bytes of the
/// texts among them that held a secret.
pub fn bytes_counted() -> (u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    (READ_BYTES.load(Relaxed), CHANGED_BYTES.load(Relaxed))
}

/// Whether [`redact`] would change the text.
pub fn has_secret(text: &str) -> bool {
    matches!(stages(text, false).redacted, Cow::Owned(_))
}

/// What each stage leaves.
struct Stages<'t> {
    /// the text with its tokens redacted
    tokens: Cow<'t, str>,
    /// the lines of `tokens` (the text's own lines: no token spans a break)
    lines: Vec<lines::Line>,
    /// the password keys and separators in `tokens`
    names: Vec<Claim>,
    /// the key blocks found in `tokens`, merged
    keys: Vec<Claim>,
    /// `tokens` with its key blocks redacted, the text the password rule reads: None when
    /// it was not needed (no block, or none that a password read could meet)
    unkeyed: Option<Cow<'t, str>>,
    /// everything redacted
    redacted: Cow<'t, str>,
}

/// With `keep` false only `redacted` is meant to be read: a text no later stage needs gives
/// its buffer to the next render (a fresh buffer of a text's size costs more in page faults
/// than the copy into it).
fn stages(text: &str, keep: bool) -> Stages<'_> {
    let mut found = Vec::new();
    tokens::find(text, &mut found);
    let mut tokens = if found.is_empty() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(render(text, &merge(found)))
    };
    // the two line-reading rules only start at a password key's word or an armour: a text
    // with neither needs no line index (most of what a box writes)
    let bytes = tokens.as_bytes();
    let readable = password::mentions_key_word(&tokens)
        || memchr::memmem::find(bytes, b"-----BEGIN").is_some()
        || memchr::memmem::find(bytes, b"-----END").is_some();
    let mut lines = if readable {
        lines::split(&tokens)
    } else {
        Vec::new()
    };
    let (mut values, mut names, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    let mut keys = Vec::new();
    if readable {
        password::find_with_names(&tokens, &lines, &mut values, &mut names, &mut reads);
        keys::find(&tokens, &lines, &names, &mut keys);
    }
    let keys = merge(keys);
    let touched = !keys.is_empty() && blocks_touch_reads(&tokens, &lines, &keys, &reads);
    if !keep && !touched {
        // the line index is read no more: its memory goes back before the rendered text's is
        // taken (a text's lines take three quarters of its size; the peak is that much lower,
        // and the render writes into pages already mapped)
        lines = Vec::new();
    }
    let (unkeyed, redacted) = if keys.is_empty() {
        // no block changed the text: the values read with the names are the values
        let redacted = if values.is_empty() {
            if keep {
                tokens.clone()
            } else {
                std::mem::replace(&mut tokens, Cow::Borrowed(""))
            }
        } else {
            Cow::Owned(render(&tokens, &merge(values)))
        };
        (None, redacted)
    } else if touched {
        // the password rule reads again in the text the blocks leave
        let mut unkeyed: Cow<'_, str> = Cow::Owned(render(&tokens, &keys));
        let unkeyed_lines = if keep {
            lines::rendered(&lines, &keys)
        } else {
            // the tokens' lines are not read again
            let mut lines = std::mem::take(&mut lines);
            lines::render_in_place(&mut lines, &keys);
            lines
        };
        debug_assert_eq!(unkeyed_lines, lines::split(&unkeyed));
        let mut values = Vec::new();
        password::find(&unkeyed, &unkeyed_lines, &mut values);
        let redacted = if values.is_empty() {
            if keep {
                unkeyed.clone()
            } else {
                std::mem::replace(&mut unkeyed, Cow::Borrowed(""))
            }
        } else if let (false, Cow::Owned(buffer)) = (keep, &mut tokens) {
            render_into(buffer, &unkeyed, &merge(values));
            Cow::Owned(std::mem::take(buffer))
        } else {
            Cow::Owned(render(&unkeyed, &merge(values)))
        };
        (Some(unkeyed), redacted)
    } else {
        // no read looked at a block's lines and no key word stands on one: the values read
        // before the blocks are the values read after them, and all lie outside them
        let mut claims = keys.clone();
        claims.extend(values);
        let redacted = render(&tokens, &merge(claims));
        if cfg!(debug_assertions) {
            // the reading again this skips finds exactly these values (every test checks it)
            let unkeyed = render(&tokens, &keys);
            let mut again = Vec::new();
            password::find(&unkeyed, &lines::split(&unkeyed), &mut again);
            assert_eq!(
                render(&unkeyed, &merge(again)),
                redacted,
                "the password rule reads the text the key blocks leave differently"
            );
        }
        (None, Cow::Owned(redacted))
    };
    Stages {
        tokens,
        lines,
        names,
        keys,
        unkeyed,
        redacted,
    }
}

/// Whether a password read could change once the key blocks are markers: a read (or a literal
/// compared with a key's name) looked at a line a block touches, or a password key's word
/// stands on such a line outside the blocks. A key word inside a block that nothing read is
/// gone once the block is a marker, and changes nothing: a key's body is random, and holds
/// `pwd` or `pass` in some case as often as not.
fn blocks_touch_reads(
    text: &str,
    lines: &[lines::Line],
    blocks: &[Claim],
    reads: &[(usize, usize)],
) -> bool {
    let line_of = |at: usize| lines.partition_point(|line| line.next <= at);
    // the blocks' lines, merged: many blocks on one line are that line once
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for block in blocks {
        let (first, last) = (line_of(block.start), line_of(block.end.saturating_sub(1)));
        match spans.last_mut() {
            Some(span) if first <= span.1 => span.1 = span.1.max(last),
            _ => spans.push((first, last)),
        }
    }
    let touches = |first: usize, last: usize| {
        let index = spans.partition_point(|span| span.1 < first);
        spans.get(index).is_some_and(|span| span.0 <= last)
    };
    if reads.iter().any(|&(first, last)| touches(first, last)) {
        return true;
    }
    // the blocks' lines less the blocks: each gap between one block (or a line's start) and
    // the next block (or a line's end)
    let mut block = 0;
    spans.iter().any(|&(first, last)| {
        let mut from = lines[first].start;
        let to = lines[last.min(lines.len() - 1)].end;
        while let Some(claim) = blocks.get(block).filter(|claim| claim.start < to) {
            if password::mentions_key_word(&text[from.min(claim.start)..claim.start]) {
                return true;
            }
            from = from.max(claim.end);
            block += 1;
        }
        from < to && password::mentions_key_word(&text[from..to])
    })
}

/// Maps offsets in a rendered text back to the text it was rendered from.
struct Unrender<'c> {
    claims: &'c [Claim],
    /// for each claim: where its marker starts in the rendered text, and how long it is
    markers: Vec<(usize, usize)>,
}

impl<'c> Unrender<'c> {
    fn new(claims: &'c [Claim]) -> Self {
        let mut shift: isize = 0;
        let markers = claims
            .iter()
            .map(|claim| {
                let len = MARKER_PREFIX.len() + claim.kind.name().len() + 1;
                let at = (claim.start as isize + shift) as usize;
                shift += len as isize - (claim.end - claim.start) as isize;
                (at, len)
            })
            .collect();
        Unrender { claims, markers }
    }

    /// The source offset of rendered offset `at`; inside a marker, its claim's start (`end`
    /// false) or end (`end` true).
    fn map(&self, at: usize, end: bool) -> usize {
        let index = self.markers.partition_point(|&(start, _)| start <= at);
        let Some(last) = index.checked_sub(1) else {
            return at;
        };
        let (start, len) = self.markers[last];
        let claim = self.claims[last];
        if at < start + len {
            // inside the marker (or at its start)
            return if end && at > start {
                claim.end
            } else {
                claim.start
            };
        }
        claim.end + (at - start - len)
    }
}

/// Sorts claims and merges overlapping ones into one, named by the highest-ranked kind.
fn merge(mut claims: Vec<Claim>) -> Vec<Claim> {
    claims.retain(|claim| claim.start < claim.end);
    claims.sort_by_key(|claim| (claim.start, std::cmp::Reverse(claim.end)));
    let mut merged: Vec<Claim> = Vec::with_capacity(claims.len());
    for claim in claims {
        match merged.last_mut() {
            Some(last) if claim.start < last.end => {
                last.end = last.end.max(claim.end);
                if claim.kind.rank() > last.kind.rank() {
                    last.kind = claim.kind;
                }
            }
            _ => merged.push(claim),
        }
    }
    merged
}

fn render(text: &str, claims: &[Claim]) -> String {
    let mut out = String::new();
    render_into(&mut out, text, claims);
    out
}

/// `render` into a buffer, which is cleared first.
fn render_into(out: &mut String, text: &str, claims: &[Claim]) {
    out.clear();
    // the rendered length exactly: a buffer that grew mid-render would copy all it holds
    // (markers are longer than the short values they replace)
    let markers: usize = claims
        .iter()
        .map(|claim| MARKER_PREFIX.len() + claim.kind.name().len() + 1)
        .sum();
    let claimed: usize = claims.iter().map(|claim| claim.end - claim.start).sum();
    out.reserve((text.len() + markers).saturating_sub(claimed));
    let mut at = 0;
    for claim in claims {
        out.push_str(&text[at..claim.start]);
        out.push_str(MARKER_PREFIX);
        out.push_str(claim.kind.name());
        out.push(']');
        at = claim.end;
    }
    out.push_str(&text[at..]);
}

/// How much of a stream's text can be shown now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settled {
    /// the length of the settled prefix, in bytes: always at the end of a line
    pub len: usize,
    /// bytes held back after it, waiting for what is written next
    pub held: usize,
}

/// The settled prefix of a stream's text so far: the longest prefix whose redaction nothing
/// written after it can change. A line still being written waits for its line break; a
/// private key's BEGIN and the lines under it wait while what comes next could still be the
/// key's body or its END; a line that reads like a key's body waits until enough lines that
/// cannot be a key's follow it; a password's key waits for the line that decides its value.
///
/// For any text and any later text, `redact(&text[..len])` followed by the redaction of the
/// rest equals `redact` of the whole.
pub fn settled(text: &str) -> Settled {
    settle(text).0
}

/// The settled prefix, and the redaction of the text's complete lines (which is the settled
/// prefix's redaction when it holds nothing back).
fn settle(text: &str) -> (Settled, Cow<'_, str>) {
    let complete = memchr::memrchr(b'\n', text.as_bytes()).map_or(0, |at| at + 1);
    let body = &text[..complete];
    // the key rule's hold is read on the text it sees (tokens redacted, which keeps the
    // lines); the password rule's on the text the keys leave, mapped back through the blocks
    let Stages {
        tokens,
        lines: token_lines,
        names,
        keys,
        unkeyed,
        redacted,
    } = stages(body, true);
    let token_lines = if token_lines.is_empty() && !tokens.is_empty() {
        lines::split(&tokens)
    } else {
        token_lines
    };
    let unkeyed = match unkeyed {
        Some(unkeyed) => unkeyed,
        None if keys.is_empty() => tokens.clone(),
        None => Cow::Owned(render(&tokens, &keys)),
    };
    let unkeyed_lines;
    let unkeyed_lines = if keys.is_empty() {
        &token_lines
    } else {
        unkeyed_lines = lines::rendered(&token_lines, &keys);
        debug_assert_eq!(unkeyed_lines, lines::split(&unkeyed));
        &unkeyed_lines
    };
    let unrender = Unrender::new(&keys);
    let values = password::hold(&unkeyed, unkeyed_lines);
    let to_line = |at: usize| token_lines.partition_point(|line| line.next <= at);
    let back = |spans: &[(usize, usize)]| -> Vec<(usize, usize)> {
        spans
            .iter()
            .map(|&(start, end)| (unrender.map(start, false), unrender.map(end, true)))
            .collect()
    };
    let key_hold = keys::hold(&tokens, &token_lines, &names);
    // an element's text on its own line is read with the lines around it (xml_element.rs)
    let element_hold = xml_element::hold(&tokens, &token_lines);
    let mut spans = back(&values.spans);
    if let Some(from) = key_hold.line.map(|line| token_lines[line].start) {
        spans.extend(
            back(&values.soft)
                .into_iter()
                .filter(|&(_, end)| end > from),
        );
    }
    let values = Hold {
        line: values
            .line
            .map(|line| to_line(unrender.map(unkeyed_lines[line].start, false))),
        spans,
        soft: Vec::new(),
    };
    let held = settle_line(&token_lines, [values, key_hold, element_hold]);
    // the token stage keeps the text's lines (no token spans a break): a line held in
    // `tokens` is the same line of the text
    let len = held.map_or(complete, |line| {
        line_start_in(body, line).unwrap_or(complete)
    });
    (
        Settled {
            len,
            held: text.len() - len,
        },
        redacted,
    )
}

/// Where line `index` of `text` starts.
fn line_start_in(text: &str, index: usize) -> Option<usize> {
    if index == 0 {
        return Some(0);
    }
    memchr::memchr_iter(b'\n', text.as_bytes())
        .nth(index - 1)
        .map(|at| at + 1)
}

/// What one rule holds back of a stream's text.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    /// the earliest line whose redaction could still change with what is written next
    pub line: Option<usize>,
    /// byte ranges read as one (a key's block, a password's key and the value below it): a
    /// settled prefix never ends inside one
    pub spans: Vec<(usize, usize)>,
    /// ranges read as one only while the key rule holds their end (a password's read that a
    /// line below ended, which a key's block could still take)
    pub soft: Vec<(usize, usize)>,
}

/// The line the settled prefix ends before: the earliest any rule holds, moved back off every
/// span of any rule it would cut in two.
fn settle_line<const N: usize>(lines: &[lines::Line], holds: [Hold; N]) -> Option<usize> {
    let mut line = holds.iter().filter_map(|hold| hold.line).min()?;
    let mut spans: Vec<(usize, usize)> = holds.into_iter().flat_map(|hold| hold.spans).collect();
    spans.sort_unstable();
    // the widest end of the spans up to each one, and where that widest span starts
    let mut widest: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for &(start, end) in &spans {
        let (wide_end, wide_start) = widest.last().copied().unwrap_or((0, 0));
        widest.push(if end > wide_end {
            (end, start)
        } else {
            (wide_end, wide_start)
        });
    }
    loop {
        let cut = lines.get(line)?.start;
        let before = spans.partition_point(|span| span.0 < cut);
        let Some(&(end, start)) = before.checked_sub(1).and_then(|i| widest.get(i)) else {
            return Some(line);
        };
        if end <= cut {
            return Some(line);
        }
        let moved = lines.partition_point(|l| l.next <= start);
        if moved >= line {
            return Some(line);
        }
        line = moved;
    }
}

/// A stream redacted as it is written: each [`Stream::push`] returns the newly settled text,
/// redacted; what is not settled yet is held. The pieces it returns, followed by
/// [`Stream::finish`], are exactly [`redact`] of everything pushed, in any chunking.
#[derive(Debug, Default, Clone)]
pub struct Stream {
    pending: String,
}

impl Stream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes what was written next; returns what it settled, redacted.
    pub fn push(&mut self, chunk: &str) -> String {
        self.pending.push_str(chunk);
        let (settled, body) = settle(&self.pending);
        if settled.len == 0 {
            return String::new();
        }
        let complete = memchr::memrchr(b'\n', self.pending.as_bytes()).map_or(0, |at| at + 1);
        let shown = if settled.len == complete {
            counted(settled.len, matches!(body, Cow::Owned(_)));
            body.into_owned()
        } else {
            redact(&self.pending[..settled.len])
        };
        self.pending.drain(..settled.len);
        shown
    }

    /// Bytes written but not shown yet.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// The stream ended: what was held is redacted as it stands.
    pub fn finish(self) -> String {
        redact(&self.pending)
    }
}
