//! The vendor rows. Each is written from the vendor's documented token format: the prefix it
//! issues, the length and alphabet of what follows, a checksum where one is documented. A row
//! whose format has no prefix of its own is keyed on the name it is written after (`AccountKey=`,
//! an environment variable the vendor's own tools read, a header) and redacts the value alone.
//! `tests/vendors.rs` builds a positive from each row's format and a lookalike that must stay.
//!
//! The shapes of tokens.rs (Anthropic, OpenAI, GitHub, GitLab, Slack, AWS, Google, Stripe, npm,
//! PyPI, JWTs, bearer credentials, URL credentials) are read there, with the checks their
//! formats need; a row here for one of those vendors reads a form tokens.rs does not.
//!
//! Each row's comment says its format in words. Where it names the vendor's docs (or changelog,
//! or source), that is where the format is documented; where it names none, the format is the
//! one the public scanner rule sets (gitleaks, trufflehog, Nosey Parker, Kingfisher) agree on.
//!
//! The rows are kept by field, one file each, and joined into [`RULES`] at compile time:
//! [`cloud`] (clouds, hosting, databases, infrastructure and secret managers), [`devtools`]
//! (source hosting, CI, package registries, productivity), [`observability`] (monitoring,
//! analytics, feature flags, identity), [`comms`] (messaging, mail, support and CRM, social),
//! [`commerce`] (payments, shops, shipping) and [`ai`].

use super::{Checksum, Rule};

/// A row with no checksum.
const fn row(
    vendor: &'static str,
    kind: &'static str,
    keywords: &'static [&'static str],
    shape: &'static str,
) -> Rule {
    Rule {
        vendor,
        kind,
        keywords,
        shape,
        checksum: Checksum::None,
    }
}

/// A shape for a value written after one of these names: the name, the separator a shell, a
/// config file, a JSON document or a header writes (`=`, `:`, `:=`, `=>` or a space, with the
/// quotes and escaped quotes around the name and the value), then the value, the only part
/// redacted.
macro_rules! keyed {
    ($first:literal $(, $rest:literal)*; $value:expr) => {
        concat!(
            "(?:",
            $first,
            $("|", $rest,)*
            r#")\\?["']?[ \t]*(?:=>|:=|[:=]|[ \t])[ \t]*\\?["']?(?P<s>"#,
            $value,
            ")"
        )
    };
}

/// A row keyed on names (see [`keyed!`]): each name is a keyword, the value is redacted.
macro_rules! keyed_row {
    ($vendor:literal, $kind:literal, [$first:literal $(, $rest:literal)*], $value:expr) => {
        row(
            $vendor,
            $kind,
            &[$first $(, $rest)*],
            keyed!($first $(, $rest)*; $value),
        )
    };
}

/// A UUID in lower-case hex (8-4-4-4-12), as a regex.
macro_rules! uuid {
    () => {
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    };
}

mod ai;
mod cloud;
mod commerce;
mod comms;
mod devtools;
mod observability;

/// The fields' rows, in the order they are joined.
const PARTS: &[&[Rule]] = &[
    cloud::ROWS,
    devtools::ROWS,
    observability::ROWS,
    comms::ROWS,
    commerce::ROWS,
    ai::ROWS,
];

/// How many rows all the parts hold.
const fn total(parts: &[&[Rule]]) -> usize {
    let mut sum = 0;
    let mut i = 0;
    while i < parts.len() {
        sum += parts[i].len();
        i += 1;
    }
    sum
}

/// The parts' rows, one after another.
const fn joined<const N: usize>(parts: &[&[Rule]]) -> [Rule; N] {
    let mut out = [row("", "", &[], ""); N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[at] = parts[i][j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(at == N, "the joined table holds every part's rows");
    out
}

static ALL: [Rule; total(PARTS)] = joined(PARTS);

pub(crate) static RULES: &[Rule] = &ALL;
