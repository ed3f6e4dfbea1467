//! Tokens that stand where a real one would: the `xxxx` that documentation, sample configs and
//! scanners' own tests write in a token's shape (`AKIAXXXXXXXXXXXXXXXX`,
//! `xoxb-xxxxxxxxx-xxxxxxxxxx`, `ghp_your_token_here`), left as they are.
//!
//! A vendor's key is random: `x` makes up half of a 20-character key less than once in 10^9
//! draws, and none of the stand-in words below appears in one more than once in 10^4. A token
//! the rules claim is left when `x` (either case) is at least half of its letters and digits,
//! or it spells a stand-in word, or it ends in `here` (`…TokenHere`, `RANDOMSTRINGHERE`: one
//! random key in 10^6). A typed pattern is not judged a stand-in: the alphabet in a row
//! (`abcdef…`, `klMnop…`) or a block repeated (`123123…`) stands in the peers' negatives and,
//! as often, in their positives (`1234567890abcdef1234…`, `gsk_aBcDeFgHiJ…`); read as stand-ins
//! they cost 34 positives for 13 negatives, and a missed key costs more than a masked line.
//! Other repeated characters are kept as secrets: the scanners
//! disagree on them (gitleaks holds `AGE-SECRET-KEY-1QQQ…` a secret, detect-secrets
//! `AKIAZZZZ…`, trufflehog both `shippo_live_aaaa…` and not `shippo_live_AAAA…`), and a
//! fixture someone pasted a real key's length of one letter into is rarer than a lazy key.

/// Words a stand-in spells where the secret goes (any case).
const STAND_IN_WORDS: &[&str] = &[
    "your_",
    "your-",
    "_here",
    "-here",
    "xxxxx",
    "placeholder",
    "replace_me",
    "changeme",
];

/// The fewest letters and digits a stand-in is judged by: a shorter claim is left to its rule.
const MIN_ALNUM: usize = 8;

/// Whether a claimed token is a stand-in (see the module's text).
pub(crate) fn is_stand_in(token: &str) -> bool {
    let mut counts = [0u16; 36];
    let mut alnum = 0usize;
    for b in token.bytes() {
        let slot = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'z' => b - b'a' + 10,
            b'A'..=b'Z' => b - b'A' + 10,
            _ => continue,
        };
        counts[slot as usize] += 1;
        alnum += 1;
    }
    if alnum < MIN_ALNUM {
        return false;
    }
    let xs = counts[(b'x' - b'a' + 10) as usize] as usize;
    if 2 * xs >= alnum {
        return true;
    }
    let lower = token.to_ascii_lowercase();
    STAND_IN_WORDS.iter().any(|word| lower.contains(word)) || lower.ends_with("here")
}

#[cfg(test)]
mod tests {
    use super::is_stand_in;

    #[test]
    fn stand_ins_and_keys() {
        for stand_in in [
            "AKIAXXXXXXXXXXXXXXXX",
            "xoxb-xxxxxxxxx-xxxxxxxxxx-xxxxxxxxxxxx",
            "sha256~XXXXXXXXXX_PUT_YOUR_TOKEN_HERE_XXXXXXXXXXXX",
            "ghp_your_token_here_0123456789abcdefABC",
            "xoxe.xoxp-1-SlackAppConfigurationAccessTokenHere",
        ] {
            assert!(is_stand_in(stand_in), "{stand_in}");
        }
        for key in [
            "AKIAIOSFODNN7EXAMPLE",
            "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",
            "xoxb-263594206564-2343594206574-FGqddMF8t08v8N7Oq4i57vs1",
            "9f86d081884c7d659a2feaa0c55ad015",
            "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
            // a team id of digits in a row is a real token's (gitleaks' positive)
            "xoxb-123456789012-Xw937qtWSXJss1lFaKe",
            "xoxa-511111111-31111111111-3111111111111-e039d02840a0b9379c",
        ] {
            assert!(!is_stand_in(key), "{key}");
        }
    }
}
