//! What opens like a token and holds none, read to the letter of the vendor's format (issue 46:
//! the peers' negatives), and a token's copies read with it.

use boxfleet_redact::redact;

fn body(alphabet: &str, n: usize) -> String {
    alphabet.chars().cycle().take(n).collect()
}

const MIXED: &str = "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ";

/// What opens like a Slack token and holds no secret's body (gitleaks' and trufflehog's
/// negatives): no digit, an id alone, a secret masked, a word of a hyphenated name.
#[test]
fn slack_prefixes_without_a_token_body_are_left() {
    for text in [
        "xoxb-abcdef-abcdef",
        "xoxb-xoxb-my-bot-token",
        "\"token1\": \"xoxp-1234567890\"",
        "slack token - 'xoxr-833485595373?24619897332l'",
        "\"token4\": \"xoxp-572370529330-573807301142-572331691188-####################\"",
        "https://indieweb.org/images/3/35/2018-250-xoxo-indieweb-1.jpg",
        "xoxe.xoxp-1-SlackAppConfigurationAccessTokenHere",
    ] {
        assert_eq!(redact(text), text);
    }
    // a configuration token is read whole from its `xoxe.`
    let text = format!("xoxe.xoxp-1-{}", body(MIXED, 40));
    assert_eq!(redact(&text), "xoxe.[REDACTED:slack_token]");
}

/// A JWT's header is a JSON object naming its `alg`: one cut short, or typed over, is no
/// token's (detect-secrets' negatives).
#[test]
fn a_jwt_whose_header_is_no_object_is_left() {
    let claims = "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ";
    let signature = "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    for header in [
        // `{"alg":"HS256","typ":"JWT"` without its brace
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ",
        // typed over: braces, and no `"alg"` between them
        "eyJhbasdGciOiJIUaddasdasfsasdasdzI1NiIasdsInR5cCI6IkpXVCasdJasd9",
    ] {
        let text = format!("{header}.{claims}.{signature}");
        assert_eq!(redact(&text), text);
    }
    // a header with bytes no encoder would write between its braces is still read
    let text = format!("eyJhbGciOieeeiIsInR5cCI6IkpXVCJ9.{claims}.{signature}");
    assert_eq!(redact(&text), "[REDACTED:jwt]");
}

/// A token read once is redacted wherever it is copied beside it on its line (trufflehog's
/// `token = 'X' | 'X'`), but not on another line.
#[test]
fn a_tokens_copy_on_its_line_goes_with_it() {
    let token = format!("ghp_{}", body(MIXED, 36));
    let text = format!("github token = '{token}' | '{token}'");
    assert_eq!(
        redact(&text),
        "github token = '[REDACTED:github_token]' | '[REDACTED:github_token]'"
    );
    // a copy no rule reads where it stands: the value after a vendor's name, then bare
    let key = "Q7w3E9r2T5y8U4i6O1p0Z9x8";
    let text = format!("ABYSSALE_API_KEY={key} ok; echo {key}\nnext line {key}");
    let out = redact(&text);
    assert!(
        !out.lines().next().is_some_and(|line| line.contains(key)),
        "{out}"
    );
    assert!(out.ends_with(&format!("next line {key}")), "{out}");
}
