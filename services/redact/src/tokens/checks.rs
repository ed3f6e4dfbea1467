//! The checks a token shape's match must pass beyond its pattern ([`super::Check`]): what a
//! token's format says that a regex does not (a JWT's header names its algorithm, a Slack
//! token's body holds a secret, a GitLab token's width), and what an OpenAI key or a bearer
//! credential is not.

/// Whether a base64 run decodes to a JWT's header and claims (`eyJ….eyJ…`). Only a whole
/// number of quads is decoded, so a run cut short still reads.
pub(super) fn base64_of_a_jwt(run: &str) -> bool {
    use base64::Engine as _;
    let run = run.trim_end_matches('=');
    let whole = &run[..run.len() - run.len() % 4];
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(whole)
        .is_ok_and(|decoded| {
            decoded.starts_with(b"eyJ") && memchr::memmem::find(&decoded, b".eyJ").is_some()
        })
}

/// Whether a JWT's header (before its first `.`) decodes, as base64url, to a JSON object that
/// names its `"alg"`, which RFC 7515 §4.1.1 requires of every JWS and JWE header: `eyJ` only
/// says it opens with `{"`, and a header cut short (`…IkpXVCJ`) or typed over
/// (`eyJhbasdGciOiJIUadd…`) is no token's. The bytes between are not read as UTF-8 and the
/// trailing bits are not held to zero: what a careless encoder wrote is still a credential.
pub(super) fn jwt_header_names_its_alg(token: &str) -> bool {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    let header = token.split('.').next().unwrap_or("");
    LENIENT.decode(header).is_ok_and(|decoded| {
        let object = decoded.trim_ascii();
        object.starts_with(b"{")
            && object.ends_with(b"}")
            && memchr::memmem::find(object, b"\"alg\"").is_some()
    })
}

/// Whether what follows a Slack token's prefix (`xoxb-`, `xapp-`) reads as a token's body, as
/// Slack's documented shapes write it (team and user ids in digits, then the secret in letters
/// and digits; `xapp-1-A…`, `xoxe.xoxp-1-…`). Not one: a body without a digit
/// (`xoxb-abcdef-abcdef`, `xoxb-xoxb-my-bot-token`); a body that is one run of digits, an id
/// with no secret after it (`xoxp-1234567890`, `xoxr-833485595373?…`); a token whose secret was
/// masked (`…-572331691188-####`, `…-****`); and a word of a hyphenated name
/// (`2018-250-xoxo-indieweb-1.jpg`), which a `-` or `.` before it says.
pub(super) fn slack_body_reads(text: &str, from: usize, to: usize) -> bool {
    let bytes = text.as_bytes();
    let token = &text[from..to];
    let body = token.split_once('-').map_or("", |(_, body)| body);
    let has_digit = body.bytes().any(|b| b.is_ascii_digit());
    let one_id = body
        .trim_end_matches('-')
        .bytes()
        .all(|b| b.is_ascii_digit());
    let masked = matches!(bytes.get(to), Some(b'#' | b'*'));
    let in_a_name =
        from > 0 && matches!(bytes[from - 1], b'-' | b'.') && !text[..from].ends_with("xoxe.");
    has_digit && !one_id && !masked && !in_a_name
}

/// The GitLab tokens whose body has one width (GitLab's token-prefix docs; gitleaks' and
/// detect-secrets' rules hold them to it): a pipeline trigger token's 40, an OAuth
/// application secret's 64, an incoming mail token's 25. A run longer or shorter is some other
/// text that opens the same way (`gloas-checking_Length-Is-…`). The others are 20 or more.
const GITLAB_WIDTHS: &[(&str, usize)] = &[("glptt-", 40), ("gloas-", 64), ("glimt-", 25)];

/// Whether a GitLab token is as wide as its prefix says ([`GITLAB_WIDTHS`]).
pub(super) fn gitlab_width_reads(token: &str) -> bool {
    GITLAB_WIDTHS
        .iter()
        .find(|(prefix, _)| token.starts_with(prefix))
        .is_none_or(|(prefix, width)| token.len() - prefix.len() == *width)
}

/// Whether an OpenAI body reads as a list of lower-case words (`learn-contrib-imbalanced`):
/// no digit, no upper case, and a dash.
pub(super) fn kebab(body: &str) -> bool {
    body.contains('-')
        && !body
            .bytes()
            .any(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
}

/// Whether what follows `Bearer` is a challenge's parameter (`WWW-Authenticate: Bearer
/// resource_metadata="…"`, RFC 6750 §3 and RFC 9728 §5.1), not a credential.
pub(super) fn challenge_param(credential: &str) -> bool {
    const PARAMS: &[&str] = &[
        "realm=",
        "scope=",
        "error=",
        "error_description=",
        "error_uri=",
        "resource_metadata=",
        "charset=",
    ];
    PARAMS
        .iter()
        .any(|param| credential.eq_ignore_ascii_case(param))
}
