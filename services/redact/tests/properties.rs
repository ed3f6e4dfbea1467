//! The redaction crate's properties, over generated transcript-like texts:
//! redacting twice changes nothing; the settled prefix of a stream, read in any chunking,
//! redacts exactly like the whole text; and redaction is linear in the text's length.

mod support;

use boxfleet_redact::{MAX_KEY_BLOCK_BYTES, Stream, redact, settled};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, rng_seed: support::rng_seed(), ..ProptestConfig::default() })]

    #[test]
    fn redacting_twice_changes_nothing(text in support::text()) {
        let once = redact(&text);
        prop_assert_eq!(redact(&once), once);
    }

    #[test]
    fn a_stream_in_any_chunking_redacts_like_the_whole_text(
        text in support::text(),
        sizes in prop::collection::vec(1usize..300, 1..6),
    ) {
        let mut stream = Stream::new();
        let mut shown = String::new();
        for chunk in support::chunks(&text, &sizes) {
            shown.push_str(&stream.push(chunk));
            // what is shown is always a prefix of the whole text's redaction
            prop_assert!(redact(&text).starts_with(&shown), "shown {:?}", shown);
        }
        shown.push_str(&stream.finish());
        prop_assert_eq!(shown, redact(&text));
    }

    #[test]
    fn nothing_written_later_changes_the_settled_prefix(
        text in support::text(),
        later in support::text(),
    ) {
        let s = settled(&text);
        prop_assert_eq!(s.len + s.held, text.len());
        prop_assert!(s.len == 0 || text[..s.len].ends_with('\n'));
        let whole = format!("{text}{later}");
        let prefix = redact(&text[..s.len]);
        let rest = redact(&whole[s.len..]);
        prop_assert_eq!(format!("{prefix}{rest}"), redact(&whole));
    }
}

/// [`support::assert_linear`] of redacting the text.
fn assert_linear(name: &str, make: impl Fn(usize) -> String, unit: usize) {
    support::assert_linear(name, make, unit, |text| {
        std::hint::black_box(redact(text));
    });
}

#[test]
fn a_line_of_thousands_of_armours_redacts_in_linear_time() {
    assert_linear(
        "a line of armours",
        |n| "-----BEGIN RSA PRIVATE KEY----- x ".repeat(n),
        4_000,
    );
    assert_linear(
        "a line of BEGIN and END armours",
        |n| "-----BEGIN PRIVATE KEY-----MIIEvQ-----END PRIVATE KEY----- ".repeat(n),
        2_000,
    );
}

#[test]
fn a_megabyte_without_a_line_break_redacts_in_linear_time() {
    assert_linear(
        "base64 with no break",
        |n| support::base64_line(7, n),
        256 * 1024,
    );
    assert_linear("passwords on one line", |n| "password=x ".repeat(n), 20_000);
    // the command lines' and the settings' reads are bounded on a line of many of them
    assert_linear("curl on one line", |n| "curl -H x ".repeat(n), 20_000);
    assert_linear(
        "docker logins on one line",
        |n| "docker login -u a ".repeat(n),
        20_000,
    );
    assert_linear(
        "setting keys on one line",
        |n| "key=\"ApiKey\" ".repeat(n),
        20_000,
    );
    assert_linear(
        "one token copied along a line",
        |n| "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5 ".repeat(n),
        5_000,
    );
    assert_linear(
        "minified text naming the armour",
        |n| {
            let mut text = String::from("var a='-----BEGIN RSA PRIVATE KEY-----';");
            text.push_str(&"aZ9+".repeat(n));
            text
        },
        64 * 1024,
    );
}

#[test]
fn a_stream_holds_no_more_than_a_key_block_behind_what_it_shows() {
    // lines that read like a key's body, forever: an END can read back at most one block
    let mut stream = Stream::new();
    for i in 0..4_000u64 {
        let _ = stream.push(&format!("{}\n", support::base64_line(i, 64)));
    }
    assert!(
        stream.held() <= MAX_KEY_BLOCK_BYTES + 1024,
        "held {} bytes",
        stream.held()
    );
}
