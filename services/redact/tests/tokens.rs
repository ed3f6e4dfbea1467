//! The token rule, through the public API: every shape redacted with its kind's marker, in the
//! wrappings a transcript writes it in, and the clean look-alikes left exactly as they were.
//!
//! The fake tokens are assembled at run time, so the file itself holds no token shape.

mod support;

use boxfleet_redact::{Stream, redact, settled};
use proptest::prelude::*;

/// `n` characters cycling through `alphabet`.
fn body(alphabet: &str, n: usize) -> String {
    alphabet.chars().cycle().take(n).collect()
}

const MIXED: &str = "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ";
const UPPER: &str = "Q7W3E9R2T5Y8U4I6O1P0";

fn anthropic() -> String {
    format!("sk-ant-api03-{}-{}AA", body(MIXED, 40), body("x_Y-z9", 12))
}
fn openai() -> String {
    format!("sk-proj-{}_{}", body(MIXED, 30), body(MIXED, 20))
}
fn openai_legacy() -> String {
    format!("sk-{}", body(MIXED, 48))
}
fn github() -> String {
    format!("{}_{}", "ghp", body(MIXED, 36))
}
fn github_fine() -> String {
    format!(
        "{}_{}_{}",
        "github",
        "pat",
        body(MIXED, 22) + "_" + &body(MIXED, 59)
    )
}
fn gitlab() -> String {
    format!("{}-{}", "glpat", body(MIXED, 20))
}
fn slack() -> String {
    format!("{}-1234567890-1234567890123-{}", "xoxb", body(MIXED, 24))
}
fn slack_webhook() -> String {
    format!(
        "https://hooks.slack.com/services/T{}/B{}/{}",
        body(UPPER, 8),
        body(UPPER, 10),
        body(MIXED, 24)
    )
}
fn aws_id() -> String {
    format!("{}{}", "AKIA", body(UPPER, 16))
}
fn aws_secret() -> String {
    format!("wJalrXUtnFEMI/K7MDENG/bPxRfiCY{}", body(MIXED, 10))
}
fn google() -> String {
    format!("{}{}", "AIza", body("Sy_Dk-9x", 35))
}
fn stripe() -> String {
    format!("{}_{}_{}", "sk", "live", body(MIXED, 24))
}
fn stripe_webhook() -> String {
    format!("{}_{}", "whsec", body(MIXED, 32))
}
fn npm() -> String {
    format!("{}_{}", "npm", body(MIXED, 36))
}
fn pypi() -> String {
    format!("pypi-AgEIcHlwaS5vcmc{}", body(MIXED, 60))
}
fn jwt_token() -> String {
    format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.{}",
        body("dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", 43)
    )
}

// ---- each shape, exact output ----

#[test]
fn anthropic_api_key() {
    let text = format!("ANTHROPIC_API_KEY={}\n", anthropic());
    assert_eq!(
        redact(&text),
        "ANTHROPIC_API_KEY=[REDACTED:anthropic_api_key]\n"
    );
    for scope in ["admin01", "oat01"] {
        let text = format!("key sk-ant-{scope}-{} used", body(MIXED, 30));
        assert_eq!(redact(&text), "key [REDACTED:anthropic_api_key] used");
    }
}

#[test]
fn openai_api_keys() {
    for key in [
        openai(),
        openai_legacy(),
        format!("sk-svcacct-{}", body(MIXED, 40)),
        format!("sk-admin-{}", body(MIXED, 40)),
    ] {
        let text = format!("OPENAI_API_KEY={key}");
        assert_eq!(redact(&text), "OPENAI_API_KEY=[REDACTED:openai_api_key]");
    }
}

#[test]
fn github_tokens() {
    for prefix in ["ghp", "gho", "ghu", "ghs", "ghr"] {
        let text = format!("token: {prefix}_{}\n", body(MIXED, 36));
        assert_eq!(redact(&text), "token: [REDACTED:github_token]\n");
    }
    let text = format!("GH_TOKEN={}", github_fine());
    assert_eq!(
        redact(&text),
        "GH_TOKEN=[REDACTED:github_fine_grained_token]"
    );
}

#[test]
fn gitlab_tokens() {
    for (prefix, width) in [
        ("glpat", 20),
        ("gldt", 26),
        ("glrt", 20),
        ("glptt", 40),
        ("gloas", 64),
        ("glimt", 25),
    ] {
        let text = format!("CI_TOKEN={prefix}-{} ok", body(MIXED, width));
        assert_eq!(redact(&text), "CI_TOKEN=[REDACTED:gitlab_token] ok");
    }
    // a trigger token, an OAuth application's secret and a mail token have one width each:
    // a longer or a shorter run is other text that opens the same way
    for (prefix, width) in [
        ("glptt", 39),
        ("glptt", 41),
        ("gloas", 38),
        ("gloas", 66),
        ("glimt", 23),
    ] {
        let text = format!("the page names {prefix}-{} ok", body(MIXED, width));
        assert_eq!(redact(&text), text);
    }
}

#[test]
fn slack_token_and_webhook() {
    for prefix in ["xoxb", "xoxp", "xoxa", "xoxr", "xoxs", "xoxe"] {
        let text = format!("SLACK={prefix}-2048-{}", body(MIXED, 24));
        assert_eq!(redact(&text), "SLACK=[REDACTED:slack_token]");
    }
    assert_eq!(
        redact(&format!("curl -X POST {} -d @msg.json", slack_webhook())),
        "curl -X POST [REDACTED:slack_webhook] -d @msg.json"
    );
}

#[test]
fn aws_access_key_id_and_secret() {
    assert_eq!(
        redact(&format!("aws_access_key_id = {}\n", aws_id())),
        "aws_access_key_id = [REDACTED:aws_access_key_id]\n"
    );
    for prefix in ["ASIA", "ABIA", "ACCA", "AIDA", "AROA"] {
        let text = format!("id {prefix}{} end", body(UPPER, 16));
        assert_eq!(redact(&text), "id [REDACTED:aws_access_key_id] end");
    }
    let secret = aws_secret();
    for (text, want) in [
        (
            format!("aws_secret_access_key = {secret}\n"),
            "aws_secret_access_key = [REDACTED:aws_secret_access_key]\n",
        ),
        (
            format!("AWS_SECRET_ACCESS_KEY={secret}"),
            "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]",
        ),
        (
            format!("aws_secret_access_key: \"{secret}\""),
            "aws_secret_access_key: \"[REDACTED:aws_secret_access_key]\"",
        ),
        (
            format!("{{\"AWS_SECRET_ACCESS_KEY\":\"{secret}\"}}"),
            "{\"AWS_SECRET_ACCESS_KEY\":\"[REDACTED:aws_secret_access_key]\"}",
        ),
    ] {
        assert_eq!(redact(&text), want);
    }
}

#[test]
fn google_api_key() {
    let text = format!(
        "https://maps.googleapis.com/maps/api/js?key={}&v=3",
        google()
    );
    assert_eq!(
        redact(&text),
        "https://maps.googleapis.com/maps/api/js?key=[REDACTED:google_api_key]&v=3"
    );
}

#[test]
fn stripe_keys() {
    for prefix in ["sk_live", "sk_test", "rk_live", "rk_test"] {
        let text = format!("STRIPE={prefix}_{}", body(MIXED, 24));
        assert_eq!(redact(&text), "STRIPE=[REDACTED:stripe_key]");
    }
    // a publishable key is meant to be public (Stripe.js is handed it in the page)
    for prefix in ["pk_live", "pk_test"] {
        let text = format!("Stripe({prefix}_{})", body(MIXED, 24));
        assert_eq!(redact(&text), text);
    }
    let text = format!("STRIPE_WEBHOOK_SECRET={}", stripe_webhook());
    assert_eq!(redact(&text), "STRIPE_WEBHOOK_SECRET=[REDACTED:stripe_key]");
}

#[test]
fn npm_and_pypi_tokens() {
    assert_eq!(
        redact(&format!("NPM_TOKEN={}", npm())),
        "NPM_TOKEN=[REDACTED:npm_token]"
    );
    assert_eq!(
        redact(&format!("TWINE_PASSWORD={}", pypi())),
        "TWINE_PASSWORD=[REDACTED:pypi_token]"
    );
}

#[test]
fn jwt() {
    let text = format!("id_token={}; Path=/", jwt_token());
    assert_eq!(redact(&text), "id_token=[REDACTED:jwt]; Path=/");
}

#[test]
fn bearer_credential_alone_is_redacted() {
    let credential = body(MIXED, 32);
    for (text, want) in [
        (
            format!("Bearer {credential}"),
            "Bearer [REDACTED:bearer_token]",
        ),
        (
            format!("Authorization: Bearer {credential}"),
            "Authorization: Bearer [REDACTED:bearer_token]",
        ),
        (
            format!("authorization: bearer {credential}"),
            "authorization: bearer [REDACTED:bearer_token]",
        ),
        (
            format!("Authorization: token {credential}"),
            "Authorization: token [REDACTED:bearer_token]",
        ),
        (
            format!("AUTHORIZATION: TOKEN {credential}"),
            "AUTHORIZATION: TOKEN [REDACTED:bearer_token]",
        ),
        (
            format!("BEARER {}", jwt_token()),
            "BEARER [REDACTED:bearer_token]",
        ),
    ] {
        assert_eq!(redact(&text), want, "{text}");
    }
}

#[test]
fn url_password_alone_is_redacted() {
    for (text, want) in [
        (
            "postgres://app:s3cr3t-Pa55@db.internal:5432/app",
            "postgres://app:[REDACTED:url_credentials]@db.internal:5432/app",
        ),
        (
            "redis://:hunter2@cache:6379/0",
            "redis://:[REDACTED:url_credentials]@cache:6379/0",
        ),
        (
            "https://x-access-token:abc123@github.com/o/r.git",
            "https://x-access-token:[REDACTED:url_credentials]@github.com/o/r.git",
        ),
    ] {
        assert_eq!(redact(text), want);
    }
}

#[test]
fn url_token_without_colon_only_when_it_is_a_token_shape() {
    // a bare user is no credential
    let text = "git clone https://deploy@git.example.com/o/r.git";
    assert_eq!(redact(text), text);
    // a token as the userinfo is redacted as the token it is
    let text = format!("https://{}@github.com/o/r.git", github());
    assert_eq!(
        redact(&text),
        "https://[REDACTED:github_token]@github.com/o/r.git"
    );
    // and as the user with a password after it, both
    let text = format!("https://{}:x-oauth-basic@github.com/o/r.git", github());
    assert_eq!(
        redact(&text),
        "https://[REDACTED:github_token]:[REDACTED:url_credentials]@github.com/o/r.git"
    );
}

// ---- realistic wrappings ----

#[test]
fn json_log_line() {
    let text = format!(
        "{{\"ts\":\"2025-01-02T03:04:05Z\",\"level\":\"debug\",\"msg\":\"calling api\",\"headers\":{{\"x-api-key\":\"{}\",\"authorization\":\"Bearer {}\"}}}}\n",
        anthropic(),
        jwt_token()
    );
    assert_eq!(
        redact(&text),
        "{\"ts\":\"2025-01-02T03:04:05Z\",\"level\":\"debug\",\"msg\":\"calling api\",\"headers\":{\"x-api-key\":\"[REDACTED:anthropic_api_key]\",\"authorization\":\"Bearer [REDACTED:bearer_token]\"}}\n"
    );
}

#[test]
fn env_dump() {
    let text = format!(
        "HOME=/home/agent\nGITHUB_TOKEN={}\nOPENAI_API_KEY={}\nAWS_ACCESS_KEY_ID={}\nAWS_SECRET_ACCESS_KEY={}\nPATH=/usr/bin:/bin\n",
        github(),
        openai(),
        aws_id(),
        aws_secret()
    );
    assert_eq!(
        redact(&text),
        "HOME=/home/agent\nGITHUB_TOKEN=[REDACTED:github_token]\nOPENAI_API_KEY=[REDACTED:openai_api_key]\nAWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\nAWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]\nPATH=/usr/bin:/bin\n"
    );
}

#[test]
fn shell_export_and_trace() {
    let text = format!(
        "+ export ANTHROPIC_API_KEY='{}'\n+ export SLACK_BOT_TOKEN=\"{}\"\n",
        anthropic(),
        slack()
    );
    assert_eq!(
        redact(&text),
        "+ export ANTHROPIC_API_KEY='[REDACTED:anthropic_api_key]'\n+ export SLACK_BOT_TOKEN=\"[REDACTED:slack_token]\"\n"
    );
}

#[test]
fn curl_header() {
    let text = format!(
        "curl -sS -H \"Authorization: token {}\" -H 'Accept: application/json' https://api.github.com/user\n",
        github()
    );
    assert_eq!(
        redact(&text),
        "curl -sS -H \"Authorization: token [REDACTED:bearer_token]\" -H 'Accept: application/json' https://api.github.com/user\n"
    );
    let text = format!(
        "curl -H 'Authorization: Bearer {}' {}",
        openai(),
        "https://api.openai.com/v1/models"
    );
    assert_eq!(
        redact(&text),
        "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' https://api.openai.com/v1/models"
    );
}

#[test]
fn git_remote_url() {
    let text = format!(
        "$ git remote -v\norigin\thttps://oauth2:{}@gitlab.com/group/repo.git (fetch)\norigin\thttps://oauth2:{}@gitlab.com/group/repo.git (push)\n",
        gitlab(),
        gitlab()
    );
    assert_eq!(
        redact(&text),
        "$ git remote -v\norigin\thttps://oauth2:[REDACTED:url_credentials]@gitlab.com/group/repo.git (fetch)\norigin\thttps://oauth2:[REDACTED:url_credentials]@gitlab.com/group/repo.git (push)\n"
    );
}

#[test]
fn npmrc() {
    let text = format!(
        "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken={}\nalways-auth=true\n",
        npm()
    );
    assert_eq!(
        redact(&text),
        "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=[REDACTED:npm_token]\nalways-auth=true\n"
    );
}

#[test]
fn pypirc() {
    let text = format!(
        "[distutils]\nindex-servers =\n    pypi\n\n[pypi]\nusername = __token__\npassword = {}\n",
        pypi()
    );
    assert_eq!(
        redact(&text),
        "[distutils]\nindex-servers =\n    pypi\n\n[pypi]\nusername = __token__\npassword = [REDACTED:pypi_token]\n"
    );
}

#[test]
fn yaml_config() {
    let text = format!(
        "providers:\n  llm:\n    kind: anthropic\n    api_key: {}\n  github:\n    token: \"{}\"\n  stripe:\n    secret: {}\n  google: {{ key: {} }}\n",
        anthropic(),
        github_fine(),
        stripe(),
        google()
    );
    assert_eq!(
        redact(&text),
        "providers:\n  llm:\n    kind: anthropic\n    api_key: [REDACTED:anthropic_api_key]\n  github:\n    token: \"[REDACTED:github_fine_grained_token]\"\n  stripe:\n    secret: [REDACTED:stripe_key]\n  google: { key: [REDACTED:google_api_key] }\n"
    );
}

// ---- boundaries the spec and brief set ----

#[test]
fn a_longer_body_is_included_whole() {
    let text = format!("{}{} tail", github(), body(MIXED, 20));
    assert_eq!(redact(&text), "[REDACTED:github_token] tail");
    let text = format!("{}{}", npm(), body(MIXED, 4));
    assert_eq!(redact(&text), "[REDACTED:npm_token]");
}

#[test]
fn spec_a_token_run_into_a_password_key_is_the_token() {
    // spec: "nor part of a token run into it (sk-…Pwd:)"
    let text = format!("{}Pwd:\n", openai());
    assert_eq!(redact(&text), "[REDACTED:openai_api_key]:\n");
}

#[test]
fn spec_a_token_stops_at_an_armour() {
    let text = format!("{}-----BEGIN PRIVATE KEY-----\n", openai());
    assert_eq!(
        redact(&text),
        "[REDACTED:openai_api_key]-----BEGIN PRIVATE KEY-----\n"
    );
    let text = format!("x {}-----END", gitlab());
    assert_eq!(redact(&text), "x [REDACTED:gitlab_token]-----END");
}

#[test]
fn spec_a_token_stops_at_a_marker() {
    let text = format!("{}[REDACTED:password]", anthropic());
    assert_eq!(
        redact(&text),
        "[REDACTED:anthropic_api_key][REDACTED:password]"
    );
    let text = format!("[REDACTED:password]{}", github());
    assert_eq!(redact(&text), "[REDACTED:password][REDACTED:github_token]");
}

#[test]
fn a_token_never_crosses_a_line_break() {
    let text = format!("Bearer\n{}\n", body(MIXED, 30));
    assert_eq!(redact(&text), text);
    let text = format!("aws_secret_access_key =\n{}\n", aws_secret());
    assert_eq!(redact(&text), text);
}

#[test]
fn markers_are_not_matched_again() {
    for text in [
        "Bearer [REDACTED:bearer_token]",
        "Authorization: token [REDACTED:bearer_token]",
        "postgres://app:[REDACTED:url_credentials]@db/app",
        "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]",
        "[REDACTED:github_fine_grained_token] [REDACTED:npm_token] [REDACTED:jwt]",
    ] {
        assert_eq!(redact(text), text);
    }
}

#[test]
fn redacting_twice_changes_nothing() {
    let text = format!(
        "{} {} https://{}:{}@h/ Bearer {} {}-{} {}\n",
        anthropic(),
        jwt_token(),
        github(),
        gitlab(),
        openai(),
        github(),
        slack(),
        aws_id()
    );
    let once = redact(&text);
    assert_eq!(redact(&once), once);
}

// ---- clean look-alikes, untouched ----

#[test]
fn look_alikes_are_left_alone() {
    for text in [
        "pip install sk-learn scikit-learn",
        "the task-ant-colony-simulation-benchmark finished",
        "mask-ant-api03-abcdefghijklmnopqrstuvwxyz0123",
        "sk-learn-contrib-imbalanced-ensemble",
        "github_pat_short",
        "ghp_tooShort123",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "AKIA is the prefix of an access key id",
        "XAKIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPLEX",
        "a JSON object in base64 opens with eyJ",
        "eyJhbGciOiJIUzI1NiJ9",
        "Bearer token",
        "Authorization: Bearer ${GITHUB_TOKEN}",
        "github: { Authorization: \"Bearer ${GITHUB_TOKEN_SENIOR}\" }",
        "the bearer of bad news",
        "ssh://git@github.com:22/o/r.git",
        "http://localhost:8080/path@v2",
        "xoxb-short",
        "sk_live_short",
        "npm_config_cache=/tmp/npm",
        "see ://user:pass@host",
        "desk-pro-abcdefghijklmnopqrstuvwxyz012345",
    ] {
        assert_eq!(redact(text), text, "{text}");
    }
}

#[test]
fn settled_and_stream_agree_with_redact() {
    let text = format!("a {}\nb {}\nc", anthropic(), github());
    assert_eq!(settled(&text).len, text.rfind('\n').map_or(0, |at| at + 1));
    let mut stream = Stream::new();
    let mut shown = String::new();
    for chunk in text.as_bytes().chunks(7) {
        shown.push_str(&stream.push(std::str::from_utf8(chunk).unwrap_or_default()));
    }
    shown.push_str(&stream.finish());
    assert_eq!(shown, redact(&text));
}

// ---- properties ----

fn token() -> impl Strategy<Value = String> {
    let b = "[A-Za-z0-9_-]";
    let alnum = "[A-Za-z0-9]";
    let patterns = vec![
        format!("sk-ant-api03-{b}{{20,60}}{alnum}"),
        format!("sk-proj-{alnum}{{20,60}}"),
        format!("gh[pousr]_{alnum}{{36,50}}"),
        "github_pat_[A-Za-z0-9_]{22,60}".to_owned(),
        format!("glpat-{alnum}{{20,30}}"),
        format!("xoxb-[0-9]{{10,12}}-{alnum}{{20,30}}"),
        "(AKIA|ASIA)[A-Z0-9]{16}".to_owned(),
        format!("AIza{alnum}{{35}}"),
        format!("sk_live_{alnum}{{16,40}}"),
        format!("npm_{alnum}{{36}}"),
        format!("pypi-AgEIcHlwaS5vcmc{alnum}{{50,70}}"),
        // a JWT's header names its algorithm (RFC 7515 §4.1.1)
        format!(
            "(eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9|eyJhbGciOiJFUzI1NiJ9)\\.eyJ{alnum}{{5,20}}\\.{alnum}{{8,40}}"
        ),
    ];
    proptest::sample::select(patterns)
        .prop_flat_map(|pattern| proptest::string::string_regex(&pattern).expect("a valid pattern"))
}

proptest! {
    #![proptest_config(ProptestConfig { rng_seed: support::rng_seed(), ..ProptestConfig::default() })]

    #[test]
    fn idempotent_and_no_token_survives(
        pieces in proptest::collection::vec(("[ -~]{0,40}", token()), 0..6),
        tail in "[ -~]{0,40}",
    ) {
        let mut text = String::new();
        for (filler, token) in &pieces {
            text.push_str(filler);
            text.push(' ');
            text.push_str(token);
            text.push(' ');
        }
        text.push_str(&tail);
        let once = redact(&text);
        prop_assert_eq!(redact(&once), once.clone());
        for (_, token) in &pieces {
            prop_assert!(!once.contains(token.as_str()), "{} survived in {}", token, once);
        }
    }

    #[test]
    fn any_text_is_redacted_idempotently_without_panic(text in "\\PC{0,200}") {
        let once = redact(&text);
        prop_assert_eq!(redact(&once), once);
    }
}

// ---- issue 19: forms the claim used to leak ----

#[test]
fn a_url_password_holding_a_raw_at_is_redacted_whole() {
    for (text, want) in [
        (
            "postgres://app:myR3alP@ssw0rd@db.internal:5432/app",
            "postgres://app:[REDACTED:url_credentials]@db.internal:5432/app",
        ),
        (
            "https://u:a@b@c@example.com/path/x@y",
            "https://u:[REDACTED:url_credentials]@example.com/path/x@y",
        ),
    ] {
        assert_eq!(redact(text), want, "{text}");
        assert_eq!(redact(want), want, "redacting again changes nothing");
    }
    // an `@` in the path is not the password's
    let text = "https://u:pw9x4@host/users/@me";
    assert_eq!(
        redact(text),
        "https://u:[REDACTED:url_credentials]@host/users/@me"
    );
}

/// Documentation's URL credentials are left as written — a placeholder password or one of
/// three characters — while any other password is redacted, whatever the host.
#[test]
fn a_urls_placeholder_credentials_are_left_and_real_ones_redacted() {
    for text in [
        "abc://username:password@example.com:123/path/data?key=value",
        "http://user:pass@Proxy.Corp:3128",
        "https://Aladdin:opensesame@localhost:8887",
        "http://a:b@127.0.0.1:1234/",
        "moz://foo:bar@servo/baz",
        "https://:PASSWORD@[::1]:8080/",
        "https://user:xxxx@host/",
    ] {
        assert_eq!(redact(text), text, "{text}");
    }
    for (text, want) in [
        (
            "ftp://rms:secret123@example.com",
            "ftp://rms:[REDACTED:url_credentials]@example.com",
        ),
        (
            "postgres://admin:hunter2@localhost:5432/app",
            "postgres://admin:[REDACTED:url_credentials]@localhost:5432/app",
        ),
    ] {
        assert_eq!(redact(text), want, "{text}");
    }
}

#[test]
fn github_installation_tokens_in_their_newer_forms() {
    let underscored = format!("{}_{}_{}", "ghs", body(MIXED, 20), body(MIXED, 24));
    let app_jwt = format!(
        "{}_{}_{}",
        "ghs",
        "123456",
        "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxMjM0NTYifQ.".to_owned() + &body(MIXED, 40)
    );
    for token in [underscored, app_jwt] {
        let text = format!("GITHUB_TOKEN={token} git push");
        assert_eq!(
            redact(&text),
            "GITHUB_TOKEN=[REDACTED:github_token] git push",
            "{token}"
        );
    }
    // a word that only starts like one stays
    let text = "ghs_is_not_a_token here";
    assert_eq!(redact(text), text);
}

#[test]
fn gitlab_runner_and_agent_tokens_and_testpypi_tokens() {
    let runner = format!("{}{}", "GR1348941", body(MIXED, 20));
    assert_eq!(
        redact(&format!("--registration-token {runner}")),
        "--registration-token [REDACTED:gitlab_runner_registration_token]"
    );
    let agent = format!("{}-{}", "glagent", body(MIXED, 50));
    assert_eq!(
        redact(&format!("token: {agent}")),
        "token: [REDACTED:gitlab_token]"
    );
    let testpypi = format!("pypi-AgENdGVzdC5weXBpLm9yZw{}", body(MIXED, 60));
    assert_eq!(
        redact(&format!("TWINE_PASSWORD={testpypi}")),
        "TWINE_PASSWORD=[REDACTED:pypi_token]"
    );
    // look-alikes stay: a short agent id, a runner prefix with too short a body
    for clean in ["glagent-config", "GR1348941abc", "pypi-AgENdGVzdC5"] {
        assert_eq!(redact(clean), clean);
    }
}

#[test]
fn an_unsigned_jwt_is_redacted_with_or_without_its_last_dot() {
    // {"alg":"none"} . {"sub":"1234567890"} — no signature
    let unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0NTY3ODkwIn0";
    for text in [
        format!("token={unsigned}."),
        format!("token={unsigned}"),
        format!("Authorization: {unsigned}. done"),
    ] {
        let redacted = redact(&text);
        assert!(!redacted.contains("eyJzdWIi"), "{text} -> {redacted}");
        assert!(redacted.contains("[REDACTED:jwt]"), "{redacted}");
        assert_eq!(
            redact(&redacted),
            redacted,
            "redacting again changes nothing"
        );
    }
}

#[test]
fn a_bare_aws_secret_beside_its_key_id_is_redacted() {
    let (id, secret) = (aws_id(), aws_secret());
    for (text, want) in [
        (
            format!("{id} {secret}\n"),
            "[REDACTED:aws_access_key_id] [REDACTED:aws_secret_access_key]\n",
        ),
        (
            format!("deploy-bot,{id},{secret},2024-01-01\n"),
            "deploy-bot,[REDACTED:aws_access_key_id],[REDACTED:aws_secret_access_key],2024-01-01\n",
        ),
        (
            format!("aws configure set --access-key {id} --secret-key {secret}"),
            "aws configure set --access-key [REDACTED:aws_access_key_id] --secret-key [REDACTED:aws_secret_access_key]",
        ),
    ] {
        assert_eq!(redact(&text), want, "{text}");
        assert_eq!(redact(want), want);
    }
    // a 40-character hex digest beside an id, and a secret-shaped word with no id on its line,
    // stay (the second is a commit's or a hash's as often as a key's)
    let digest = "da39a3ee5e6b4b0d3255bfef95601890afd80709";
    assert_eq!(
        redact(&format!("{id} {digest}")),
        format!("[REDACTED:aws_access_key_id] {digest}")
    );
    let alone = format!("checksum {secret}");
    assert_eq!(redact(&alone), alone);
}

#[test]
fn a_token_of_any_shape_as_the_user_of_x_oauth_basic_is_redacted() {
    // a classic OAuth token (40 hex characters) is no shape of its own; x-oauth-basic says it
    // is the credential
    let text = "git clone https://0123456789abcdef0123456789abcdef01234567:x-oauth-basic@github.com/o/r.git";
    let want = "git clone https://[REDACTED:url_credentials]:[REDACTED:url_credentials]@github.com/o/r.git";
    assert_eq!(redact(text), want);
    assert_eq!(redact(want), want);
    // a known shape keeps its own name (the user claimed as the token it is)
    let text = format!("https://{}:x-oauth-basic@github.com/o/r.git", github());
    assert_eq!(
        redact(&text),
        "https://[REDACTED:github_token]:[REDACTED:url_credentials]@github.com/o/r.git"
    );
    // any other password leaves the user alone
    assert_eq!(
        redact("https://deploy:s3cret@git.example.com/o/r"),
        "https://deploy:[REDACTED:url_credentials]@git.example.com/o/r"
    );
}

/// Issue 19: a token right after an escaped break or tab in a JSON string's text (a file's
/// lines as a tool result carries them) is read as starting a word: the escape's letter is not
/// the token's.
#[test]
fn a_token_after_an_escaped_break_is_redacted() {
    for (token, kind) in [
        (anthropic(), "anthropic_api_key"),
        (openai(), "openai_api_key"),
        (gitlab(), "gitlab_token"),
        (aws_id(), "aws_access_key_id"),
        (jwt_token(), "jwt"),
    ] {
        for escape in ["\\n", "\\t", "\\r\\n", "\\\\n"] {
            let text = format!("{{\"content\":\"first line{escape}{token}{escape}last\"}}\n");
            let out = redact(&text);
            assert!(
                out.contains(&format!("{escape}[REDACTED:{kind}]{escape}last")),
                "{text:?} came out {out:?}"
            );
            assert_eq!(redact(&out), out);
        }
    }
    // an escape before an ordinary word changes nothing
    let clean = "{\"content\":\"line one\\nskipping tests\\nAKIAX is short\"}\n";
    assert_eq!(redact(clean), clean);
}
