//! The vendor rows. Each is written from the vendor's documented token format: the prefix it
//! issues, the length and alphabet of what follows, a checksum where one is documented. A row
//! whose format has no prefix of its own is keyed on the name it is written after (`AccountKey=`)
//! and redacts the value alone. `tests/vendors.rs` builds a positive from each row's format and
//! a lookalike that must stay.
//!
//! The shapes of tokens.rs (Anthropic, OpenAI, GitHub, GitLab, Slack, AWS, Google, Stripe, npm,
//! PyPI, JWTs, bearer credentials, URL credentials) are read there, with the checks their
//! formats need; a row here for one of those vendors reads a form tokens.rs does not.

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

pub(crate) static RULES: &[Rule] = &[
    // GitHub: a classic token glued to a word (tokens.rs reads it at a word's start); its
    // CRC32 is the evidence
    Rule {
        vendor: "GitHub",
        kind: "github_token",
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        shape: r"gh[pousr]_[A-Za-z0-9]{36}",
        checksum: Checksum::Crc32Base62,
    },
    Rule {
        vendor: "npm",
        kind: "npm_token",
        keywords: &["npm_"],
        shape: r"npm_[A-Za-z0-9]{36}",
        checksum: Checksum::Crc32Base62,
    },
    // Twilio: an API key's SID is `SK` and 32 lower-case hex
    row("Twilio", "twilio_api_key", &["SK"], r"SK[0-9a-f]{32}"),
    // SendGrid: `SG.`, a 22-character key id and a 43-character secret, both base64url
    row(
        "SendGrid",
        "sendgrid_api_key",
        &["SG."],
        r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
    ),
    // Hugging Face: user access tokens `hf_` and 34 letters; organisation tokens `api_org_`
    row("Hugging Face", "huggingface_token", &["hf_"], r"hf_[A-Za-z]{34}"),
    row(
        "Hugging Face",
        "huggingface_org_token",
        &["api_org_"],
        r"api_org_[A-Za-z]{34}",
    ),
    // DigitalOcean: personal (`dop_v1_`), OAuth (`doo_v1_`) and refresh (`dor_v1_`) tokens,
    // each 64 lower-case hex
    row(
        "DigitalOcean",
        "digitalocean_token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        r"do[por]_v1_[a-f0-9]{64}",
    ),
    // Azure Storage: a connection string's AccountKey, 88 base64 ending `==`
    row(
        "Azure",
        "azure_storage_key",
        &["AccountKey="],
        r"AccountKey=(?P<s>[A-Za-z0-9+/]{86}==)",
    ),
];
