//! `Delivered:` lines: what a run says it delivered — a URL (without credentials) or a git
//! branch name — one per line, in report order, deduplicated. A list marker, backticks,
//! emphasis or angle brackets around the key or the value are allowed.

/// The largest branch name kept (the spec's `sandbox.MaxBranchBytes`).
pub const MAX_BRANCH_BYTES: usize = 1024;

/// Every delivered ref in `report`, in order, each once.
pub fn delivered_refs(report: &str) -> Vec<String> {
    let mut refs: Vec<String> = Vec::new();
    for line in report.lines() {
        if let Some(found) = delivered_on(line)
            && !refs.contains(&found)
        {
            refs.push(found);
        }
    }
    refs
}

fn is_decoration(c: char) -> bool {
    matches!(c, '*' | '_' | '`')
}

/// Strips a leading list marker (`-`, `*`, `+`, `1.`, `1)`) and quote marker (`>`).
fn strip_marker(line: &str) -> &str {
    let mut s = line.trim_start();
    while let Some(rest) = s.strip_prefix('>') {
        s = rest.trim_start();
    }
    for marker in ["- ", "* ", "+ "] {
        if let Some(rest) = s.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        let rest = &s[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return rest.trim_start();
        }
    }
    s
}

/// Strips wrappers that come in pairs around a value: `**x**`, `*x*`, `_x_`, `` `x` ``, `<x>`.
fn unwrap_value(mut value: &str) -> &str {
    loop {
        let before = value;
        for (open, close) in [
            ("**", "**"),
            ("__", "__"),
            ("*", "*"),
            ("_", "_"),
            ("`", "`"),
            ("<", ">"),
            ("\"", "\""),
        ] {
            if value.len() > open.len() + close.len()
                && value.starts_with(open)
                && value.ends_with(close)
            {
                value = &value[open.len()..value.len() - close.len()];
            }
        }
        if value == before {
            return value;
        }
    }
}

fn delivered_on(line: &str) -> Option<String> {
    let marked = strip_marker(line);
    // emphasis opened before the key (`**Delivered: x**`) closes after the value
    let emphasised = marked.starts_with(is_decoration);
    let s = marked.trim_start_matches(is_decoration);
    let key = s.get(..9)?;
    if !key.eq_ignore_ascii_case("delivered") {
        return None;
    }
    // the colon may sit inside the emphasis (`**Delivered:**`) or after it (`**Delivered**:`)
    let rest = s[9..].trim_start_matches(is_decoration);
    let rest = rest
        .strip_prefix(':')?
        .trim_start_matches(is_decoration)
        .trim_start();
    let token = rest.split_whitespace().next()?;
    // the value stands alone on the line: `Delivered: the fix for the flake` is a sentence,
    // and `Delivered: wip/x (pushed)` a sentence about a branch, not a ref (emphasis closing
    // after it is fine)
    let after = rest.trim_start()[token.len()..].trim();
    if !after.trim_matches(is_decoration).is_empty() {
        return None;
    }
    let token = token.trim_end_matches([',', ';']);
    let token = if emphasised && !token.starts_with(is_decoration) {
        token.trim_end_matches(is_decoration)
    } else {
        token
    };
    let token = unwrap_value(token);
    let token = token.trim_end_matches(['.', ',', ';']);
    let token = unwrap_value(token);
    (is_clean_url(token) || is_branch_name(token)).then(|| token.to_owned())
}

/// A URL of any scheme (`https://`, `ssh://`, `git://`, …) with a host and no credentials in
/// it: no password, no user at all on `http(s)` (where a user is how a token rides), and no
/// credential in the query. A user name alone (`ssh://git@host/…`) is how those schemes
/// address an account, and is kept unless it reads as a secret.
pub fn is_clean_url(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return false;
    }
    if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.rsplit_once('@') {
        None => authority,
        Some((user, host)) => {
            let web = ["http", "https"].contains(&scheme.to_ascii_lowercase().as_str());
            if web || user.contains(':') || boxfleet_redact::redact(user) != user {
                return false;
            }
            host
        }
    };
    if host.is_empty() || host.starts_with(':') {
        return false;
    }
    // a credential in the query: `?access_token=…`, `&password=…`
    let lower = rest.to_ascii_lowercase();
    let query = lower.split_once('?').map(|(_, q)| q).unwrap_or("");
    !query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or("");
        ["token", "password", "passwd", "secret", "credential"]
            .iter()
            .any(|word| key.contains(word))
            || ["key", "apikey", "api_key", "sig", "signature", "auth"].contains(&key)
    })
}

/// A name git accepts for a branch (`git check-ref-format --branch`), at most
/// [`MAX_BRANCH_BYTES`], and not a placeholder such as `none`.
pub fn is_branch_name(name: &str) -> bool {
    if name.is_empty() || name.len() > MAX_BRANCH_BYTES || name == "@" {
        return false;
    }
    if ["none", "nothing", "n/a", "na", "tbd", "null", "nil", "-"]
        .iter()
        .any(|p| name.eq_ignore_ascii_case(p))
    {
        return false;
    }
    if name.starts_with('-') || name.starts_with('/') || name.ends_with('/') || name.ends_with('.')
    {
        return false;
    }
    if name.contains("..") || name.contains("@{") || name.contains("//") {
        return false;
    }
    if name
        .chars()
        .any(|c| c.is_ascii_control() || c == ' ' || "~^:?*[\\".contains(c))
    {
        return false;
    }
    name.split('/')
        .all(|part| !part.is_empty() && !part.starts_with('.') && !part.ends_with(".lock"))
}

/// Pull and merge request URLs found by their shape (`/pull/N`, `/pulls/N`,
/// `/-/merge_requests/N`, `/pull-requests/N`, `/pullrequest/N`), on any host and port, in
/// order, each once. A guess: a pull request the run only read looks the same as one it
/// opened, so these count only where nothing names a ref.
pub fn scraped_refs(text: &str) -> Vec<String> {
    let mut refs: Vec<String> = Vec::new();
    for word in text.split(|c: char| {
        c.is_whitespace() || matches!(c, '<' | '>' | '(' | ')' | '[' | ']' | '"' | '\'' | '`')
    }) {
        let word = word.trim_end_matches(['.', ',', ';', ':', '!', '?', '*', '_']);
        let lower = word.to_ascii_lowercase();
        let Some(start) = lower.find("http://").or_else(|| lower.find("https://")) else {
            continue;
        };
        let url = &word[start..];
        if !is_clean_url(url) || !is_request_path(url) {
            continue;
        }
        if !refs.iter().any(|known| known == url) {
            refs.push(url.to_owned());
        }
    }
    refs
}

fn is_request_path(url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let parts: Vec<&str> = path.split('/').collect();
    parts.windows(2).any(|pair| {
        [
            "pull",
            "pulls",
            "merge_requests",
            "pull-requests",
            "pullrequest",
        ]
        .contains(&pair[0])
            && !pair[1].is_empty()
            && pair[1].bytes().all(|b| b.is_ascii_digit())
    })
}

/// A coding run's delivered refs: the report's named refs, else the CLI's final message's
/// named refs, else pull/merge request URLs scraped from the report, else from the final
/// message. A named ref always wins over a scraped one, and the report over the message.
pub fn run_refs(report: Option<&str>, final_message: Option<&str>) -> Vec<String> {
    let report = report.unwrap_or("");
    let message = final_message.unwrap_or("");
    for found in [
        delivered_refs(report),
        delivered_refs(message),
        scraped_refs(report),
        scraped_refs(message),
    ] {
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_refs_in_their_wrappings() {
        let report = "# Findings\n\
            Delivered: https://git.example.com/acme/app/pull/7\n\
            - Delivered: `feature/login`\n\
            * **Delivered:** <https://git.example.com/acme/app/pull/8>.\n\
            1. **Delivered**: _wip/x_\n\
            > delivered: fix-1\n\
            Delivered: ssh://git@git.example.com:2222/acme/app.git\n\
            - **Delivered: git://example.org/app.git**\n\
            Delivered: https://git.example.com/acme/app/pull/7\n\
            We Delivered: not-this\n";
        assert_eq!(
            delivered_refs(report),
            vec![
                "https://git.example.com/acme/app/pull/7",
                "feature/login",
                "https://git.example.com/acme/app/pull/8",
                "wip/x",
                "fix-1",
                "ssh://git@git.example.com:2222/acme/app.git",
                "git://example.org/app.git",
            ]
        );
    }

    #[test]
    fn refuses_credentials_and_what_is_not_a_branch() {
        let report = "Delivered: https://user:pw@example.com/x\n\
            Delivered: https://example.com/x?access_token=abc\n\
            Delivered: none\n\
            Delivered: bad..name\n\
            Delivered: -rf\n\
            Delivered: a.lock\n\
            Delivered: wip/x (pushed)\n\
            Delivered: https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/a/b\n\
            Delivered: https://x-token@github.com/a/b\n\
            Delivered: ssh://git:hunter2@example.com/x.git\n\
            Delivered: ssh://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/a/b\n\
            Delivered: 1http://example.com/x\n\
            Delivered: ssh:///no-host\n\
            Delivered:\n\
            Delivered: the fix for the flake\n\
            Delivered: branch feature/x\n";
        assert_eq!(delivered_refs(report), Vec::<String>::new());
        assert!(is_clean_url("https://example.com/a?page=2&design=1"));
        assert!(!is_clean_url("https://example.com/a?X-Amz-Credential=x"));
        assert!(is_branch_name("release/1.2"));
    }
    #[test]
    fn named_refs_win_over_scraped_ones() {
        let report = "Opened (https://git.example.com:8443/a/b/-/merge_requests/12). Read https://h.test/x/pull/3.\nSee https://h.test/x/issues/4 and https://h.test/x/pull/new";
        assert_eq!(
            scraped_refs(report),
            vec![
                "https://git.example.com:8443/a/b/-/merge_requests/12",
                "https://h.test/x/pull/3"
            ]
        );
        assert_eq!(
            run_refs(Some(report), Some("Delivered: fix/x")),
            vec!["fix/x"]
        );
        assert_eq!(
            run_refs(
                Some("Delivered: a/b\nhttps://h.test/x/pull/3"),
                Some("Delivered: c")
            ),
            vec!["a/b"]
        );
        assert_eq!(
            run_refs(None, Some("done: https://h.test/x/pulls/9")),
            vec!["https://h.test/x/pulls/9"]
        );
        assert_eq!(run_refs(None, None), Vec::<String>::new());
    }
}
