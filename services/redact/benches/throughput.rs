//! Redaction throughput on a large, realistic transcript.
//!
//! Builds a deterministic ~16 MiB transcript in memory (xorshift PRNG, fixed seed): cargo test
//! and `go test -v` output, unified diffs, JSON log lines, shell traces (`+ cmd`), base64
//! blobs and prose, with a sprinkling of vendor tokens, a few PEM private keys (plain, inside
//! JSON-escaped strings, and under a reader's line numbers) and password lines. Then times,
//! best of 5:
//!
//! - `redact`: `boxfleet_redact::redact` over the whole text;
//! - `one regex`: the floor to compare with — ONE `regex::Regex` alternating every token
//!   shape, a private key's BEGIN armour and `(?i)pass(word|wd)?\s*[:=]\s*\S+`, run as
//!   `replace_all` with a marker over the same text;
//! - `stream`: a `boxfleet_redact::Stream` fed the text in 4 KiB chunks.
//!
//! It prints each one's MB/s, the ratio redact / one regex, and whether the goal (that ratio
//! at least 0.25) is met. Run with `cargo bench -p boxfleet-redact --bench throughput`.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use boxfleet_redact::{Stream, redact};
use regex::Regex;

const TARGET_BYTES: usize = 16 << 20;
const ROUNDS: usize = 5;
const CHUNK: usize = 4096;
const GOAL: f64 = 0.25;
/// The stream (the live tail) against whole-text redaction (issue 19).
const STREAM_GOAL: f64 = 0.5;

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const WORDS: &[&str] = &[
    "the",
    "runner",
    "box",
    "seat",
    "reads",
    "writes",
    "transcript",
    "a",
    "of",
    "and",
    "token",
    "key",
    "line",
    "stream",
    "settled",
    "whole",
    "before",
    "after",
    "cut",
    "agent",
    "node",
    "etcd",
    "lease",
    "held",
    "is",
    "not",
    "every",
    "report",
    "marker",
    "bytes",
];
const CRATES: &[&str] = &[
    "actors", "cluster", "config", "redact", "sandbox", "agents", "node",
];

fn prose(rng: &mut Rng, out: &mut String) {
    let n = 8 + rng.below(24);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(rng.pick(WORDS));
    }
    out.push_str(".\n");
}

fn cargo_test(rng: &mut Rng, out: &mut String) {
    let n = 3 + rng.below(20);
    let krate = rng.pick(CRATES);
    let _ = writeln!(
        out,
        "     Running unittests src/lib.rs (target/debug/deps/boxfleet_{krate}-{:016x})",
        rng.next()
    );
    let _ = writeln!(out, "\nrunning {n} tests");
    for _ in 0..n {
        let _ = writeln!(
            out,
            "test {}::tests::{}_{}_{} ... ok",
            rng.pick(WORDS),
            rng.pick(WORDS),
            rng.pick(WORDS),
            rng.pick(WORDS)
        );
    }
    let _ = writeln!(
        out,
        "\ntest result: ok. {n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.{:02}s\n",
        rng.below(100)
    );
}

fn go_test(rng: &mut Rng, out: &mut String) {
    for _ in 0..2 + rng.below(10) {
        let name = format!(
            "Test{}{}",
            capital(rng.pick(WORDS)),
            capital(rng.pick(WORDS))
        );
        let _ = writeln!(out, "=== RUN   {name}");
        let _ = writeln!(
            out,
            "    {}_test.go:{}: {} {}",
            rng.pick(WORDS),
            rng.below(400),
            rng.pick(WORDS),
            rng.pick(WORDS)
        );
        let _ = writeln!(out, "--- PASS: {name} (0.{:02}s)", rng.below(100));
    }
    let _ = writeln!(
        out,
        "PASS\nok  \tgithub.com/boxfleet/{}\t0.{:03}s",
        rng.pick(CRATES),
        rng.below(1000)
    );
}

fn capital(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|first| first.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

fn diff(rng: &mut Rng, out: &mut String) {
    let file = format!("{}/src/{}.rs", rng.pick(CRATES), rng.pick(WORDS));
    let _ = writeln!(
        out,
        "diff --git a/{file} b/{file}\nindex {:07x}..{:07x} 100644\n--- a/{file}\n+++ b/{file}",
        rng.next() & 0xfff_ffff,
        rng.next() & 0xfff_ffff
    );
    let _ = writeln!(
        out,
        "@@ -{},7 +{},8 @@ impl Runs {{",
        rng.below(900),
        rng.below(900)
    );
    for _ in 0..3 + rng.below(12) {
        let mark = rng.pick(&[" ", " ", "+", "-"]);
        let _ = writeln!(
            out,
            "{mark}    let {} = {}.{}(&{})?;",
            rng.pick(WORDS),
            rng.pick(WORDS),
            rng.pick(WORDS),
            rng.pick(WORDS)
        );
    }
}

fn json_log(rng: &mut Rng, out: &mut String) {
    let _ = writeln!(
        out,
        r#"{{"ts":"2026-11-29T09:{:02}:{:02}.{:06}Z","level":"{}","target":"boxfleet_{}","msg":"{} {} {}","run":"{:016x}"}}"#,
        rng.below(60),
        rng.below(60),
        rng.below(1_000_000),
        rng.pick(&["info", "debug", "warn"]),
        rng.pick(CRATES),
        rng.pick(WORDS),
        rng.pick(WORDS),
        rng.pick(WORDS),
        rng.next()
    );
}

fn shell_trace(rng: &mut Rng, out: &mut String) {
    let _ = writeln!(
        out,
        "+ {} {} --{} {}/{}",
        rng.pick(&["cargo", "git", "go", "ls", "grep -rn", "sed -n"]),
        rng.pick(&["test", "status", "build", "-la", "fetch"]),
        rng.pick(WORDS),
        rng.pick(CRATES),
        rng.pick(WORDS)
    );
}

fn base64_blob(rng: &mut Rng, out: &mut String) {
    for _ in 0..2 + rng.below(8) {
        out.push_str(&rng.chars(BASE64, 76));
        out.push('\n');
    }
}

fn token(rng: &mut Rng, out: &mut String) {
    let value = match rng.below(10) {
        0 => format!("ANTHROPIC_API_KEY=sk-ant-api03-{}", rng.chars(ALNUM, 90)),
        1 => format!("OPENAI_API_KEY=sk-proj-{}", rng.chars(ALNUM, 60)),
        2 => format!("GITHUB_TOKEN=ghp_{}", rng.chars(ALNUM, 36)),
        3 => format!("  \"authorization\": \"Bearer {}\",", rng.chars(ALNUM, 40)),
        4 => format!("aws_access_key_id = AKIA{}", rng.chars(UPPER, 16)),
        5 => format!("aws_secret_access_key = {}", rng.chars(BASE64, 40)),
        6 => format!(
            "origin\thttps://oauth2:glpat-{}@gitlab.com/g/r.git (fetch)",
            rng.chars(ALNUM, 20)
        ),
        7 => format!(
            "id_token=eyJhbGciOiJSUzI1NiJ9.eyJ{}.{}",
            rng.chars(ALNUM, 60),
            rng.chars(ALNUM, 43)
        ),
        8 => format!(
            "//registry.npmjs.org/:_authToken=npm_{}",
            rng.chars(ALNUM, 36)
        ),
        _ => format!(
            "SLACK_BOT_TOKEN=xoxb-{}-{}",
            rng.below(1 << 30),
            rng.chars(ALNUM, 24)
        ),
    };
    out.push_str(&value);
    out.push('\n');
}

fn password(rng: &mut Rng, out: &mut String) {
    let line = match rng.below(3) {
        0 => format!("password: {}", rng.chars(ALNUM, 10)),
        1 => format!("  \"db_password\": \"{}\",", rng.chars(ALNUM, 12)),
        _ => format!("PGPASSWORD={} psql -h db", rng.chars(ALNUM, 14)),
    };
    out.push_str(&line);
    out.push('\n');
}

fn private_key(rng: &mut Rng, out: &mut String) {
    let body: Vec<String> = (0..25).map(|_| rng.chars(BASE64, 64)).collect();
    let last = rng.chars(BASE64, 24);
    match rng.below(3) {
        0 => {
            out.push_str("-----BEGIN PRIVATE KEY-----\n");
            for line in &body {
                out.push_str(line);
                out.push('\n');
            }
            let _ = writeln!(out, "{last}\n-----END PRIVATE KEY-----");
        }
        1 => {
            out.push_str(r#"{"file":"key.pem","content":"-----BEGIN RSA PRIVATE KEY-----\n"#);
            for line in &body {
                out.push_str(line);
                out.push_str("\\n");
            }
            let _ = writeln!(out, r#"{last}\n-----END RSA PRIVATE KEY-----\n"}}"#);
        }
        _ => {
            let mut n = 1;
            let _ = writeln!(out, "{n:6}\t-----BEGIN OPENSSH PRIVATE KEY-----");
            for line in &body {
                n += 1;
                let _ = writeln!(out, "{n:6}\t{line}");
            }
            let _ = writeln!(
                out,
                "{:6}\t{last}\n{:6}\t-----END OPENSSH PRIVATE KEY-----",
                n + 1,
                n + 2
            );
        }
    }
}

fn transcript() -> String {
    transcript_with(true)
}

/// The transcript, with its secrets (tokens, password lines, private keys) or with prose in
/// their place.
fn transcript_with(secrets: bool) -> String {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = String::with_capacity(TARGET_BYTES + (64 << 10));
    while out.len() < TARGET_BYTES {
        match rng.below(1000) {
            0..250 => prose(&mut rng, &mut out),
            250..400 => cargo_test(&mut rng, &mut out),
            400..500 => go_test(&mut rng, &mut out),
            500..620 => diff(&mut rng, &mut out),
            620..800 => json_log(&mut rng, &mut out),
            800..900 => shell_trace(&mut rng, &mut out),
            900..960 => base64_blob(&mut rng, &mut out),
            _ if !secrets => prose(&mut rng, &mut out),
            960..985 => token(&mut rng, &mut out),
            985..997 => password(&mut rng, &mut out),
            _ => private_key(&mut rng, &mut out),
        }
    }
    out
}

/// The floor: one regex alternating every shape, run as a single `replace_all`.
fn one_regex() -> Regex {
    let shapes = [
        r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        r"\bgh[pousr]_[A-Za-z0-9]{36,}",
        r"\bgithub_pat_[A-Za-z0-9_]{22,}",
        r"\b(?:glpat|gldt|glrt|glptt|gloas)-[A-Za-z0-9_-]{20,}",
        r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}",
        r"\bhttps://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[A-Z0-9]{16}\b",
        r#"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY)["']?[ \t]*[:=][ \t]*["']?[A-Za-z0-9/+]{40}"#,
        r"\bAIza[A-Za-z0-9_-]{35,}",
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{16,}",
        r"\bnpm_[A-Za-z0-9]{36,}",
        r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}",
        r"(?i:\bbearer)[ \t]+[A-Za-z0-9._~+/=-]{16,}",
        r"(?i:\bauthorization:[ \t]*token)[ \t]+[A-Za-z0-9._~+/=-]{16,}",
        r"://[A-Za-z0-9._~%!$&'()*+,;=-]*:[A-Za-z0-9._~%!$&'()*+,;=:-]+@",
        r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----",
        r"(?i)pass(word|wd)?\s*[:=]\s*\S+",
    ];
    Regex::new(&shapes.join("|")).expect("the comparison regex is valid")
}

/// The text through a [`Stream`] in [`CHUNK`]-byte pushes: the bytes it showed.
fn stream_all(text: &str) -> usize {
    let mut stream = Stream::new();
    let mut shown = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rest.len().min(CHUNK);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, after) = rest.split_at(cut);
        shown += stream.push(chunk).len();
        rest = after;
    }
    shown + stream.finish().len()
}

/// One regex of the whole rule set as it is now: the shapes of [`one_regex`], every vendor
/// row's shape and every vendor-named key's — what one combined-regex pass over the same rules
/// costs.
fn whole_rule_set_regex() -> Regex {
    let mut shapes = vec![format!("(?:{})", one_regex().as_str())];
    for rule in boxfleet_redact::rules() {
        // (a row's claimed part is a named group; one regex has one name once)
        shapes.push(format!("(?:{})", rule.shape.replace("(?P<s>", "(?:")));
    }
    // the vendor-named keys: a vendor's name, then its key within the gap on its line
    for rule in boxfleet_redact::named_rules() {
        shapes.push(format!(
            "(?:(?i:{})[^\n]{{0,{}}}?(?:{}))",
            rule.keywords.join("|"),
            boxfleet_redact::NAMED_GAP,
            rule.shape
        ));
    }
    regex::RegexBuilder::new(&shapes.join("|"))
        .size_limit(1 << 30)
        .dfa_size_limit(1 << 28)
        .build()
        .expect("the whole rule set is one valid regex")
}

/// The best of [`ROUNDS`] runs of `f`.
fn best<T>(mut f: impl FnMut() -> T) -> Duration {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn mb_per_s(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / 1e6 / took.as_secs_f64().max(1e-9)
}

fn main() {
    let text = transcript();
    if let Ok(which) = std::env::var("THROUGHPUT_PROFILE") {
        // for a profiler: redact (or the stream, the keyword search, the one regex) alone,
        // many times
        let regex = one_regex();
        for _ in 0..20 {
            if which == "stream" {
                black_box(stream_all(black_box(&text)));
            } else if which == "none" {
                // the transcript's making alone, to subtract
            } else if which == "keywords" {
                black_box(boxfleet_redact::keyword_hits(black_box(&text)));
            } else if which == "regex" {
                black_box(regex.replace_all(black_box(&text), "[REDACTED]").len());
            } else {
                black_box(redact(black_box(&text)));
            }
        }
        return;
    }
    let bytes = text.len();
    let regex = one_regex();
    let hits = boxfleet_redact::keyword_hits(&text);
    let t_hits = best(|| boxfleet_redact::keyword_hits(black_box(&text)).len());
    println!(
        "the vendor keywords' search alone: {:.1} ms",
        t_hits.as_secs_f64() * 1e3
    );
    println!(
        "vendor and name-word keywords found: {} ({:.0} per MB); commonest: {}",
        hits.iter().map(|(_, n)| n).sum::<usize>(),
        hits.iter().map(|(_, n)| n).sum::<usize>() as f64 / (bytes as f64 / 1e6),
        hits.iter()
            .take(6)
            .map(|(k, n)| format!("{k:?} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let redacted = redact(&text);
    let markers = redacted.matches("[REDACTED:").count();
    let t_redact = best(|| redact(black_box(&text)));
    let t_regex = best(|| regex.replace_all(black_box(&text), "[REDACTED]").len());
    let t_stream = best(|| stream_all(black_box(&text)));

    let ratio = t_regex.as_secs_f64() / t_redact.as_secs_f64().max(1e-9);
    println!(
        "transcript: {:.1} MiB, {} lines, {markers} markers after redact; best of {ROUNDS}",
        bytes as f64 / (1 << 20) as f64,
        text.lines().count()
    );
    println!("{:<24} {:>10} {:>10}", "pass", "ms", "MB/s");
    for (name, took) in [
        ("redact", t_redact),
        ("one regex replace_all", t_regex),
        ("stream (4 KiB chunks)", t_stream),
    ] {
        println!(
            "{:<24} {:>10.1} {:>10.1}",
            name,
            took.as_secs_f64() * 1e3,
            mb_per_s(bytes, took)
        );
    }
    println!("{:<24} {:>21.2}", "ratio redact/regex", ratio);
    println!(
        "goal ≥ {GOAL}: {}",
        if ratio >= GOAL { "met" } else { "not met" }
    );
    // against one regex of the whole rule set (every vendor row too)
    let whole = whole_rule_set_regex();
    let t_whole = best(|| whole.replace_all(black_box(&text), "[REDACTED]").len());
    println!(
        "{:<24} {:>10.1} {:>10.1}",
        "whole-rule-set regex",
        t_whole.as_secs_f64() * 1e3,
        mb_per_s(bytes, t_whole)
    );
    let whole_ratio = t_whole.as_secs_f64() / t_redact.as_secs_f64().max(1e-9);
    println!("{:<24} {:>21.2}", "ratio redact/whole-set", whole_ratio);
    // what the live tail uses, beside whole-text redaction
    let stream_ratio = t_redact.as_secs_f64() / t_stream.as_secs_f64().max(1e-9);
    println!("{:<24} {:>21.2}", "ratio stream/redact", stream_ratio);
    println!(
        "goal ≥ {STREAM_GOAL}: {}",
        if stream_ratio >= STREAM_GOAL {
            "met"
        } else {
            "not met"
        }
    );

    // the same mix with no secret in it: what most of what a box writes costs
    let clean = transcript_with(false);
    let t_clean = best(|| redact(black_box(&clean)));
    let t_clean_regex = best(|| regex.replace_all(black_box(&clean), "[REDACTED]").len());
    println!();
    println!(
        "the same mix with no secrets: {:.1} MiB",
        clean.len() as f64 / (1 << 20) as f64
    );
    println!("{:<24} {:>10} {:>10}", "pass", "ms", "MB/s");
    for (name, took) in [
        ("redact", t_clean),
        ("one regex replace_all", t_clean_regex),
    ] {
        println!(
            "{:<24} {:>10.1} {:>10.1}",
            name,
            took.as_secs_f64() * 1e3,
            mb_per_s(clean.len(), took)
        );
    }
    println!(
        "{:<24} {:>21.2}",
        "ratio redact/regex",
        t_clean_regex.as_secs_f64() / t_clean.as_secs_f64().max(1e-9)
    );
}
