//! Tokens whose fixed part is inside them rather than at their start, so neither a prefix
//! nor a name before them finds them: found at that part, then read out to both ends.
//!
//! - An Entra ID (Azure AD) application's client secret: three characters, a digit, `Q~`,
//!   then 31 to 34 more, of `A–Z a–z 0–9 _ ~ .` and `-` after the `Q~`
//!   (`QtT8Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn`), the format Microsoft's portal has issued since
//!   2021, as gitleaks' `azure-ad-client-secret` (b58d3f10) reads it.
//! - A Discord bot token: the bot's user id in base64 (24 to 26 characters, opening `M`, `N` or
//!   `O`, as a snowflake's digits in base64 do), `.`, a 6-character timestamp, `.`, and a
//!   27- to 38-character HMAC, all base64url (`MTk4NjIy….Cl2FMQ.ZnCjm1XV…`), as detect-secrets'
//!   `DiscordBotTokenDetector` and trufflehog's `discordbottoken` read it. Found at the
//!   timestamp's two dots, which few texts hold six base64url characters apart; the id must
//!   hold a digit and both cases, as base64 of a number's digits does.
//!
//! - A Telegram bot's token written bare: the bot's id (5 to 16 digits), `:`, then 35
//!   base64url characters opening with `A` (`110201543:AAHdqTcvCH1vGWJxfSe1ofSAs0K5PALDsaw`),
//!   as the Bot API's docs show one and gitleaks' `telegram-bot-api-token` reads it; found at
//!   its `:A`. The vendor table reads it inside the API's URL already.
//! - A Mailchimp API key written bare: 32 lower-case hex, `-us` and its data centre's number
//!   (`343ea45721923ed956e2b38c31db76aa-us30`), Mailchimp's documented format; found at `-us`.
//!
//! Each is one run of its alphabet: a letter of it on either side means a longer string.

use crate::{Claim, Kind};

/// The marker of an Entra ID client secret (the vendor table's name for it).
pub const AZURE_AD_CLIENT_SECRET: &str = "azure_ad_client_secret";

/// The markers of a Telegram bot token and a Mailchimp API key (the vendor table's names).
pub const TELEGRAM_BOT_TOKEN: &str = "telegram_bot_token";
pub const MAILCHIMP_API_KEY: &str = "mailchimp_api_key";

/// The marker of a Discord bot token.
pub const DISCORD_BOT_TOKEN: &str = "discord_bot_token";

fn is_azure_secret_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.' | b'-')
}

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
}

/// Reads the token whose fixed part is at the offset given, if one is.
type Anchor = fn(&[u8], usize) -> Option<(usize, usize)>;

/// Every token of the module's shapes in `text`.
pub(crate) fn find(text: &str, out: &mut Vec<Claim>) {
    let bytes = text.as_bytes();
    // each fixed part is rare in a text: one pass of a SIMD search for each is cheaper than one
    // automaton for all three (whose `:` and `-` are frequent bytes)
    let anchors: [(&[u8], Anchor); 3] = [
        (b"Q~", azure_secret_at),
        (b":A", telegram_token_at),
        (b"-us", mailchimp_key_at),
    ];
    let kinds = [
        AZURE_AD_CLIENT_SECRET,
        TELEGRAM_BOT_TOKEN,
        MAILCHIMP_API_KEY,
    ];
    for ((anchor, read), kind) in anchors.into_iter().zip(kinds) {
        for at in memchr::memmem::find_iter(bytes, anchor) {
            if let Some((start, end)) = read(bytes, at) {
                out.push(Claim {
                    start,
                    end,
                    kind: Kind::Token(kind),
                });
            }
        }
    }
    for at in memchr::memchr_iter(b'.', bytes) {
        if let Some((start, end)) = discord_token_at(bytes, at) {
            out.push(Claim {
                start,
                end,
                kind: Kind::Token(DISCORD_BOT_TOKEN),
            });
        }
    }
}

/// The client secret whose `Q~` is at `at`, if one is.
fn azure_secret_at(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = at.checked_sub(4)?;
    let head = &bytes[start..at];
    if !head[3].is_ascii_digit()
        || !head[..3]
            .iter()
            .all(|&b| is_azure_secret_byte(b) && b != b'-')
    {
        return None;
    }
    if start > 0 && is_azure_secret_byte(bytes[start - 1]) {
        return None;
    }
    let run = bytes[at + 2..]
        .iter()
        .take(36)
        .take_while(|&&b| is_azure_secret_byte(b))
        .count();
    if run == 36 {
        return None;
    }
    // a full stop after it ends a sentence, not the secret
    let mut end = at + 2 + run;
    if run > 31 && bytes[end - 1] == b'.' {
        end -= 1;
    }
    let tail = end - at - 2;
    (31..=34).contains(&tail).then_some((start, end))
}

/// The Telegram bot token whose `:A` is at `colon`, if one is.
fn telegram_token_at(bytes: &[u8], colon: usize) -> Option<(usize, usize)> {
    let digits = bytes[..colon]
        .iter()
        .rev()
        .take(17)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let start = colon - digits;
    if !(5..=16).contains(&digits) || (start > 0 && is_base64url(bytes[start - 1])) {
        return None;
    }
    let body = bytes[colon + 1..]
        .iter()
        .take(36)
        .take_while(|&&b| is_base64url(b))
        .count();
    let end = colon + 1 + body;
    let random = bytes[colon + 1..end].iter().any(u8::is_ascii_digit)
        && bytes[colon + 1..end].iter().any(u8::is_ascii_lowercase);
    (body == 35 && random).then_some((start, end))
}

/// The Mailchimp key whose `-us` is at `at`, if one is.
fn mailchimp_key_at(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = at.checked_sub(32)?;
    let hex = &bytes[start..at];
    if !hex
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        || (start > 0 && bytes[start - 1].is_ascii_alphanumeric())
    {
        return None;
    }
    let digits = bytes[at + 3..]
        .iter()
        .take(3)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = at + 3 + digits;
    let ends = !bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric());
    ((1..=2).contains(&digits) && ends).then_some((start, end))
}

/// The bot token whose id ends at the `.` at `dot`, if one is.
fn discord_token_at(bytes: &[u8], dot: usize) -> Option<(usize, usize)> {
    // the timestamp: six base64url characters and a dot
    let stamp = bytes.get(dot + 1..dot + 8)?;
    if stamp[6] != b'.' || !stamp[..6].iter().all(|&b| is_base64url(b)) {
        return None;
    }
    let id_len = bytes[..dot]
        .iter()
        .rev()
        .take(27)
        .take_while(|&&b| is_base64url(b))
        .count();
    if !(24..=26).contains(&id_len) {
        return None;
    }
    let start = dot - id_len;
    let id = &bytes[start..dot];
    let reads_as_base64_of_digits = matches!(id[0], b'M' | b'N' | b'O')
        && id.iter().any(u8::is_ascii_digit)
        && id.iter().any(u8::is_ascii_lowercase)
        && id.iter().any(u8::is_ascii_uppercase);
    if !reads_as_base64_of_digits {
        return None;
    }
    let mac_start = dot + 8;
    let mac = bytes[mac_start..]
        .iter()
        .take(39)
        .take_while(|&&b| is_base64url(b))
        .count();
    (27..=38).contains(&mac).then_some((start, mac_start + mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(text: &str) -> Vec<(&str, &'static str)> {
        let mut out = Vec::new();
        find(text, &mut out);
        out.iter()
            .map(|c| {
                let Kind::Token(kind) = c.kind else {
                    unreachable!()
                };
                (&text[c.start..c.end], kind)
            })
            .collect()
    }

    #[test]
    fn an_entra_client_secret_is_read_out_from_its_q_tilde() {
        let secret = "QtT8Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn";
        for text in [
            secret.to_owned(),
            format!("AZURE_CLIENT_SECRET={secret}"),
            format!("\"the_value\": \"{secret}\""),
            format!("({secret})"),
            format!("the secret is {secret}."),
        ] {
            assert_eq!(claims(&text), [(secret, AZURE_AD_CLIENT_SECRET)], "{text}");
        }
        for text in [
            // too short, too long, glued to a word, no digit before the Q~
            "QtT8Q~9C-_Ij~RouHVpD2Tuf3oHWGh",
            "QtT8Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAnXYZW",
            "xQtT8Q~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn",
            "QtTxQ~9C-_Ij~RouHVpD2Tuf3oHWGh.DQ3kcjbAn",
        ] {
            assert!(claims(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn a_bare_telegram_token_and_mailchimp_key_are_read() {
        let text = "bot 110201543:AAHdqTcvCH1vGWJxfSe1ofSAs0K5PALDsaw ready";
        assert_eq!(
            claims(text),
            [(
                "110201543:AAHdqTcvCH1vGWJxfSe1ofSAs0K5PALDsaw",
                TELEGRAM_BOT_TOKEN
            )]
        );
        let text = "MC=343ea45721923ed956e2b38c31db76aa-us30";
        assert_eq!(
            claims(text),
            [("343ea45721923ed956e2b38c31db76aa-us30", MAILCHIMP_API_KEY)]
        );
        for text in [
            // a time, a short body, a longer run; hex not 32, a region word
            "at 12:30:Alarm",
            "110201543:AAHdqTcvCH1vGWJxfSe1ofSAs0K5PA",
            "110201543:AAHdqTcvCH1vGWJxfSe1ofSAs0K5PALDsawXYZ",
            "43ea45721923ed956e2b38c31db76aa-us30",
            "343ea45721923ed956e2b38c31db76aa-users",
        ] {
            assert!(claims(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn a_discord_bot_token_is_read_out_from_its_timestamp() {
        for token in [
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "OTUyNED5MDk2MTMxNzc2MkEz.GSroKE.g2MTwve8OnUAAByz8KV_ZTV1Ipzg4o_NmQWUMs",
            "MTAyOTQ4MTN5OTU5MTDwMEcxNg.GSwJyi.sbaw8msOR3Wi6vPUzeIWy_P0vJbB0UuRVjH8l8",
        ] {
            let text = format!("DISCORD_TOKEN={token}");
            assert_eq!(claims(&text), [(token, DISCORD_BOT_TOKEN)], "{text}");
        }
        for text in [
            // a version, a file name, a JWT's parts, a lower-case id
            "github.com/org/repo v1.2.3.tar.gz",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6.eyJzdW.IiOiIxMjM0NTY3ODkwIiwibmFtZSI6",
            "mtk4njiynDgzndcxoti1mjq4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
            "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.short",
        ] {
            assert!(claims(text).is_empty(), "{text}");
        }
    }
}
