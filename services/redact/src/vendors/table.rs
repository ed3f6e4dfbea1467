//! The vendor rows, as data: `rules/vendors.tsv`, one row per documented token format, each
//! with its vendor, the marker's kind, the keywords a token starts with (or the name it is
//! written after), its shape, the checksum its vendor documents, the source of the format, and
//! a positive (with the part of it that must vanish) and a negative sample.
//!
//! Each row is written from the vendor's documented token format: the prefix it issues, the
//! length and alphabet of what follows, a checksum where one is documented. A row whose format
//! has no prefix of its own is keyed on the name it is written after (`AccountKey=`, an
//! environment variable the vendor's own tools read, a header) and redacts the value alone:
//! its shape is the name, a separator a shell, a config file, a JSON document or a header
//! writes (`=`, `:`, `:=`, `=>` or a space, with the quotes and escaped quotes around the
//! name and the value), then the value in `(?P<s>…)`. The `source` column says where the
//! format is documented (the vendor's docs, changelog or source); where it names none, the
//! format is the one the public scanner rule sets (gitleaks, trufflehog, Nosey Parker,
//! Kingfisher) agree on.
//!
//! The shapes of tokens.rs (Anthropic, OpenAI, GitHub, GitLab, Slack, AWS, Google, Stripe, npm,
//! PyPI, JWTs, bearer credentials, URL credentials) are read there, with the checks their
//! formats need; a row here for one of those vendors reads a form tokens.rs does not.
//!
//! `tests/vendors.rs` holds every row to its two samples, and builds more positives from each
//! row's format in the wrappings a transcript puts a token in.

use std::sync::LazyLock;

use super::{Checksum, Rule};

/// The table, as the crate holds it.
const TABLE: &str = include_str!("../../rules/vendors.tsv");

/// The rows `rules/build_prefixed_trufflehog.py` wrote from trufflehog's self-prefixed
/// detectors (`apify_api_`, `rootly_`): the same columns, each row's source the detector it was
/// read from, and its own positive and negative (no hand-written sample: `tests/vendors.rs`).
const PREFIXED: &str = include_str!("../../rules/prefixed.tsv");

/// The columns, in order.
const COLUMNS: [&str; 9] = [
    "vendor", "kind", "keywords", "shape", "checksum", "source", "positive", "secret", "negative",
];

fn parse(table: &'static str, file: &str) -> Vec<Rule> {
    let mut rows = Vec::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&'static str> = line.split('\t').collect();
        assert_eq!(
            fields.len(),
            COLUMNS.len(),
            "rules/{file}:{}: the columns are {COLUMNS:?}",
            n + 1
        );
        let checksum = match fields[4] {
            "none" => Checksum::None,
            "crc32_base62" => Checksum::Crc32Base62,
            "base64_user_password" => Checksum::Base64UserPassword,
            other => panic!("rules/{file}:{}: checksum {other:?}", n + 1),
        };
        let keywords: Vec<&'static str> = fields[2].split(',').collect();
        rows.push(Rule {
            vendor: fields[0],
            kind: fields[1],
            keywords: Box::leak(keywords.into_boxed_slice()),
            shape: fields[3],
            checksum,
            source: fields[5],
            positive: fields[6],
            secret: fields[7],
            negative: fields[8],
        });
    }
    rows
}

/// Every row, in the table's order.
pub(crate) static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let mut rows = parse(TABLE, "vendors.tsv");
    rows.extend(parse(PREFIXED, "prefixed.tsv"));
    rows
});
