//! Generators shared by the redaction crate's property tests and fuzz target: texts built from
//! the kinds of line a transcript holds — prose, build and test output, armours, base64 at a
//! key's widths, passwords, tokens — under the wrappings the spec names.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use proptest::prelude::*;

/// A deterministic base64 line of `width` characters in upper and lower case with digits.
pub fn base64_line(seed: u64, width: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..width)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ALPHABET[(state % 64) as usize] as char
        })
        .collect()
}

/// A PEM block with `lines` body lines at `width`, its last line shorter.
pub fn pem(label: &str, seed: u64, lines: usize, width: usize) -> String {
    let mut out = format!("-----BEGIN {label}-----\n");
    for i in 0..lines {
        out.push_str(&base64_line(seed + i as u64, width));
        out.push('\n');
    }
    out.push_str(&base64_line(seed + 999, width / 3));
    out.push_str("==\n");
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn line() -> impl Strategy<Value = String> {
    let widths = prop_oneof![Just(64usize), Just(70), Just(76), 8usize..90];
    prop_oneof![
        // prose and build output
        Just("running 3 tests".to_owned()),
        Just("test store::tests::a_put_lands ... ok".to_owned()),
        Just("=== RUN   TestSHA256Sum".to_owned()),
        Just("--- PASS: TestSHA256Sum (0.00s)".to_owned()),
        Just("ok  \tgithub.com/boxfleet/redact\t0.012s".to_owned()),
        Just("+ cargo build --release".to_owned()),
        Just("{\"level\":\"info\",\"msg\":\"connected\",\"ts\":1732870000}".to_owned()),
        Just("diff --git a/key.pem b/key.pem".to_owned()),
        Just("src/HandlerRegistryFactoryImplementationTests/ProviderConfigA.java".to_owned()),
        Just(String::new()),
        Just("   ".to_owned()),
        "[a-zA-Z0-9 _.:=/-]{0,40}",
        // armours
        Just("-----BEGIN RSA PRIVATE KEY-----".to_owned()),
        Just("-----END RSA PRIVATE KEY-----".to_owned()),
        Just("-----BEGIN PRIVATE KEY-----".to_owned()),
        Just("-----END PRIVATE KEY-----".to_owned()),
        Just("-----BEGIN OPENSSH PRIVATE KEY-----".to_owned()),
        Just("-----END OPENSSH PRIVATE KEY-----".to_owned()),
        Just("-----BEGIN PGP PRIVATE KEY BLOCK-----".to_owned()),
        Just("-----END PGP PRIVATE KEY BLOCK-----".to_owned()),
        Just("-----BEGIN CERTIFICATE-----".to_owned()),
        Just("-----END CERTIFICATE-----".to_owned()),
        Just("Proc-Type: 4,ENCRYPTED".to_owned()),
        Just("=twTO".to_owned()),
        // a key's body
        (any::<u64>(), widths).prop_map(|(seed, width)| base64_line(seed, width)),
        (any::<u64>()).prop_map(|seed| format!("{}…[...truncated]", base64_line(seed, 12))),
        // an element's text on its own line
        Just("<etsyToken>".to_owned()),
        Just("    r8o7pepwkn9ecr1ksfe92iuy".to_owned()),
        Just("</etsyToken>".to_owned()),
        // passwords
        Just("password: hunter2x9".to_owned()),
        Just("Password:".to_owned()),
        Just("Retype password:".to_owned()),
        Just("  \"db_password\": \"s3cr3t!\",".to_owned()),
        Just("PGPASSWORD=correct-horse".to_owned()),
        Just("echo \"Password:\" >> f".to_owned()),
        Just("| **Password:** | x9y8 |".to_owned()),
        Just("pwd=ab\\ncd".to_owned()),
        // tokens
        Just("export GITHUB_TOKEN=ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5".to_owned()),
        Just("ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789".to_owned()),
        Just("curl -H 'Authorization: Bearer abcDEF123456ghiJKL789'".to_owned()),
        Just("git remote add origin https://bot:s3cretPassw0rd@example.com/r.git".to_owned()),
        Just("aws_access_key_id = AKIAIOSFODNN7EXAMPLE".to_owned()),
        // markers a first pass left
        Just("[REDACTED:private_key]".to_owned()),
        Just("password: [REDACTED:password]".to_owned()),
    ]
}

fn gutter() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        4 => Just(None),
        1 => Just(Some("+".to_owned())),
        1 => (1u32..400).prop_map(|n| Some(format!("{n:>6}\t"))),
        1 => Just(Some("key.pem:12:".to_owned())),
        1 => Just(Some("2026-11-29T09:41:07.123Z ".to_owned())),
        1 => Just(Some("[Worker1A] ".to_owned())),
    ]
}

/// A text of transcript-like lines: one gutter for the whole text, or none; lines joined by
/// real breaks, or — now and then — a run of them written as one JSON string.
pub fn text() -> impl Strategy<Value = String> {
    (
        gutter(),
        prop::collection::vec((line(), any::<bool>()), 0..40),
        any::<bool>(),
    )
        .prop_map(|(gutter, lines, trailing)| {
            let mut out = String::new();
            for (line, escaped) in lines {
                if let Some(gutter) = &gutter {
                    out.push_str(gutter);
                }
                out.push_str(&line);
                out.push_str(if escaped { "\\n" } else { "\n" });
            }
            if !trailing && out.ends_with('\n') {
                out.pop();
            }
            out
        })
}

/// Cuts a text into chunks at the given sizes (repeated), never inside a character.
pub fn chunks<'t>(text: &'t str, sizes: &[usize]) -> Vec<&'t str> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < text.len() {
        let mut end = (at + sizes[i % sizes.len()].max(1)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[at..end]);
        at = end;
        i += 1;
    }
    out
}

/// The property tests' seed: fixed, so a run is repeatable and CI is deterministic;
/// `REDACT_EXPLORE=1` draws a random one to look for new cases.
pub fn rng_seed() -> proptest::test_runner::RngSeed {
    if std::env::var_os("REDACT_EXPLORE").is_some() {
        proptest::test_runner::RngSeed::Random
    } else {
        proptest::test_runner::RngSeed::Fixed(0x5eed_b0c5)
    }
}

/// The best of three runs of `f`.
pub fn best_of_three(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Linear time, without trusting a clock's absolute reading: `work` on four times the text
/// must take well under sixteen times as long (what a quadratic pass takes). The ratio is
/// generous because the machine is noisy; a quadratic rule misses it by far.
pub fn assert_linear(name: &str, make: impl Fn(usize) -> String, unit: usize, work: impl Fn(&str)) {
    let small = make(unit);
    let large = make(unit * 4);
    let t_small = best_of_three(|| work(&small));
    let t_large = best_of_three(|| work(&large));
    let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-9);
    assert!(
        ratio < 10.0,
        "{name}: 4x the text took {ratio:.1}x as long ({t_small:?} → {t_large:?}): not linear"
    );
}
