//! One test per vendor row: a positive built from the row's documented format must vanish in
//! every wrapping a transcript puts a token in, named by the row's kind; a lookalike (the
//! prefix with the wrong length or alphabet, a word that merely starts so) must stay.
//!
//! The positives are built from each format by [`Gen`], never written out, so no string here
//! is a live credential's shape by accident of copying.

use boxfleet_redact::{Checksum, base62_padded, redact, rules};

/// A deterministic source of characters from the alphabets token formats use.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn from(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
            .collect()
    }

    /// lower-case hex
    fn hex(&mut self, n: usize) -> String {
        self.from(b"0123456789abcdef", n)
    }
    fn upper_hex(&mut self, n: usize) -> String {
        self.from(b"0123456789ABCDEF", n)
    }
    fn digits(&mut self, n: usize) -> String {
        self.from(b"0123456789", n)
    }
    fn letters(&mut self, n: usize) -> String {
        self.from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", n)
    }
    fn lower(&mut self, n: usize) -> String {
        self.from(b"abcdefghijklmnopqrstuvwxyz0123456789", n)
    }
    fn upper(&mut self, n: usize) -> String {
        self.from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", n)
    }
    /// base62
    fn alnum(&mut self, n: usize) -> String {
        self.from(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            n,
        )
    }
    fn b64url(&mut self, n: usize) -> String {
        self.from(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
            n,
        )
    }
    fn b64(&mut self, n: usize) -> String {
        self.from(
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            n,
        )
    }
    /// a UUID in lower-case hex (8-4-4-4-12)
    fn uuid(&mut self) -> String {
        format!(
            "{}-{}-{}-{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(4),
            self.hex(4),
            self.hex(12)
        )
    }
    /// upper-case bech32 (age's secret keys)
    fn bech32_upper(&mut self, n: usize) -> String {
        self.from(b"QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", n)
    }
    /// GitHub's base62 body: 30 random characters and their CRC32, base62, in 6
    fn crc32_body(&mut self) -> String {
        let random = self.alnum(30);
        let check = base62_padded(crc32fast_hash(random.as_bytes()), 6);
        format!("{random}{check}")
    }
}

/// CRC32 (IEEE), computed here independently of the crate's.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A positive: the text a token is written as, and the part of it that is secret.
struct Positive {
    text: String,
    secret: String,
}

fn whole(text: String) -> Positive {
    Positive {
        secret: text.clone(),
        text,
    }
}

/// `keyword` kept, `secret` after it.
fn after(keyword: &str, secret: String) -> Positive {
    Positive {
        text: format!("{keyword}{secret}"),
        secret,
    }
}

/// `name=` kept, `secret` after it: a value keyed on the name it is written after.
fn keyed(name: &str, secret: String) -> Positive {
    after(&format!("{name}="), secret)
}

/// One row's sample: its kind, a positive built from its format, and a lookalike.
struct Sample {
    kind: &'static str,
    positive: fn(&mut Gen) -> Positive,
    lookalike: fn(&mut Gen) -> String,
}

#[path = "vendors/samples_ai.rs"]
mod samples_ai;
#[path = "vendors/samples_cloud.rs"]
mod samples_cloud;
#[path = "vendors/samples_commerce.rs"]
mod samples_commerce;
#[path = "vendors/samples_comms.rs"]
mod samples_comms;
#[path = "vendors/samples_devtools.rs"]
mod samples_devtools;
#[path = "vendors/samples_observability.rs"]
mod samples_observability;

#[path = "vendors/recall.rs"]
mod recall;

/// Every row's sample, by the field its row is kept in.
fn samples() -> impl Iterator<Item = &'static Sample> {
    [
        samples_cloud::SAMPLES,
        samples_devtools::SAMPLES,
        samples_observability::SAMPLES,
        samples_comms::SAMPLES,
        samples_commerce::SAMPLES,
        samples_ai::SAMPLES,
    ]
    .into_iter()
    .flatten()
}

/// The wrappings a transcript puts a token in.
fn wrappings(token: &str) -> Vec<String> {
    vec![
        token.to_owned(),
        format!("SOME_SETTING={token}"),
        format!("export SOME_SETTING=\"{token}\""),
        format!("{{\"setting\": \"{token}\", \"next\": 1}}"),
        format!("setting: '{token}'"),
        format!("using {token} for the call."),
        format!("\"first line\\n{token}\\nlast\""),
        format!("+    value = \"{token}\";"),
    ]
}

#[test]
fn every_vendor_row_has_a_sample_and_every_sample_a_row() {
    let kinds: Vec<&str> = rules().iter().map(|rule| rule.kind).collect();
    let mut unique = kinds.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), kinds.len(), "two rows share a kind");
    // the rows built from a scanner's detectors (rules/prefixed.tsv) carry their own positive
    // and negative, which every_vendor_row_redacts_its_own_positive_… holds them to
    for rule in rules()
        .iter()
        .filter(|rule| !rule.source.starts_with("trufflehog "))
    {
        assert!(
            samples().any(|s| s.kind == rule.kind),
            "the row {} has no sample",
            rule.kind
        );
    }
    let mut sample_kinds: Vec<&str> = samples().map(|s| s.kind).collect();
    sample_kinds.sort_unstable();
    let before = sample_kinds.len();
    sample_kinds.dedup();
    assert_eq!(before, sample_kinds.len(), "two samples share a kind");
    for sample in samples() {
        assert!(
            kinds.contains(&sample.kind),
            "the sample {} names no row",
            sample.kind
        );
    }
}

#[test]
fn every_vendor_rows_positive_vanishes_and_its_lookalike_stays() {
    let mut failures = Vec::new();
    for (i, sample) in samples().enumerate() {
        let mut g = Gen(0x5EED_0000 + i as u64 * 7919);
        for _ in 0..4 {
            let positive = (sample.positive)(&mut g);
            for text in wrappings(&positive.text) {
                let out = redact(&text);
                let marker = format!("[REDACTED:{}]", sample.kind);
                if !out.contains(&marker) || out.contains(&positive.secret) {
                    failures.push(format!("{}: {text:?} came out {out:?}", sample.kind));
                }
                if redact(&out) != out {
                    failures.push(format!(
                        "{}: redacting {out:?} again changed it",
                        sample.kind
                    ));
                }
            }
            let lookalike = (sample.lookalike)(&mut g);
            for text in wrappings(&lookalike) {
                let out = redact(&text);
                if out != text {
                    failures.push(format!(
                        "{}: lookalike {text:?} came out {out:?}",
                        sample.kind
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_table_covers_the_vendors_it_claims() {
    let mut vendors: Vec<&str> = rules().iter().map(|rule| rule.vendor).collect();
    vendors.sort_unstable();
    vendors.dedup();
    println!("{} rows, {} vendors", rules().len(), vendors.len());
    assert!(
        vendors.len() >= 150,
        "the issue asks for 150 vendors or more"
    );
    assert!(rules().iter().all(|rule| !rule.keywords.is_empty()));
    assert!(
        rules()
            .iter()
            .filter(|rule| rule.checksum != Checksum::None)
            .count()
            >= 2
    );
}

/// A token of a variable-length format longer than its documented longest (a 1Password service
/// account token, an AWS session token) is still read whole, while an exact-length format's
/// longer run (a Twilio key's 32 hex, then more) is another string.
#[test]
fn a_variable_length_token_past_its_longest_is_read_whole() {
    let mut g = Gen(0x10_7E55);
    for (prefix, body) in [
        ("ops_eyJ", g.b64url(1500)),
        ("IQoJb3JpZ2luX2Vj", g.b64(1400)),
    ] {
        let token = format!("{prefix}{body}");
        for text in wrappings(&token) {
            let out = redact(&text);
            assert!(
                !out.contains(&body[body.len() - 40..]) && !out.contains(&body[..40]),
                "{prefix}…: {}",
                &out[..out.len().min(200)]
            );
        }
    }
    let longer = format!("SK{}", g.hex(40));
    assert_eq!(redact(&longer), longer);
}

/// Every row of `rules/named.tsv` (a key known by the vendor named before it) redacts its
/// positive, named by its kind, and leaves its negative alone, also under a JSON document's and
/// a YAML file's wrapping; and says where its format comes from.
#[test]
fn every_vendor_named_row_redacts_its_positive_and_leaves_its_negative() {
    let mut failures = Vec::new();
    for row in boxfleet_redact::named_rules() {
        assert!(!row.source.is_empty(), "{} names no source", row.kind);
        let (name, value) = row.positive.split_once('=').expect("NAME=value");
        let (_, lookalike) = row.negative.split_once('=').expect("NAME=value");
        let marker = format!("[REDACTED:{}]", row.kind);
        for text in [
            row.positive.to_owned(),
            format!("{{\"{}\": \"{value}\"}}", name.to_ascii_lowercase()),
            format!("  {}: '{value}'", name.to_ascii_lowercase()),
        ] {
            let out = redact(&text);
            if out.contains(value) || !out.contains("[REDACTED:") {
                failures.push(format!("{}: {text:?} came out {out:?}", row.kind));
            }
        }
        let out = redact(row.positive);
        if !out.contains(&marker) && !out.contains("[REDACTED:") {
            failures.push(format!("{}: no marker in {out:?}", row.kind));
        }
        for text in [
            row.negative.to_owned(),
            format!("{{\"{}\": \"{lookalike}\"}}", name.to_ascii_lowercase()),
        ] {
            let out = redact(&text);
            if out != text {
                failures.push(format!("{}: negative {text:?} came out {out:?}", row.kind));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every row of `rules/vendors.tsv` carries its source and two samples: its positive comes out
/// with its secret gone and a marker named by its kind, its negative untouched.
#[test]
fn every_vendor_row_redacts_its_own_positive_and_leaves_its_own_negative() {
    let mut failures = Vec::new();
    for rule in rules() {
        if rule.source.len() < 20 {
            failures.push(format!(
                "{}: the source says too little: {:?}",
                rule.kind, rule.source
            ));
        }
        if !rule.positive.contains(rule.secret) || rule.secret.is_empty() {
            failures.push(format!(
                "{}: the positive does not hold its secret",
                rule.kind
            ));
        }
        let out = redact(rule.positive);
        let marker = format!("[REDACTED:{}]", rule.kind);
        if out.contains(rule.secret) || !out.contains(&marker) {
            failures.push(format!(
                "{}: {:?} came out {out:?}",
                rule.kind, rule.positive
            ));
        }
        let out = redact(rule.negative);
        if out != rule.negative {
            failures.push(format!(
                "{}: negative {:?} came out {out:?}",
                rule.kind, rule.negative
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
