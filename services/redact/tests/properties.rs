//! The redaction crate's properties, over generated transcript-like texts:
//! redacting twice changes nothing; the settled prefix of a stream, read in any chunking,
//! redacts exactly like the whole text; and redaction is linear in the text's length.

mod support;

use std::time::{Duration, Instant};

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

/// The best of three runs of `f`.
fn best_of_three(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Linear time, without trusting a clock's absolute reading: four times the text must take
/// well under sixteen times as long (what a quadratic pass takes). The ratio is generous
/// because the machine is noisy; a quadratic rule misses it by far.
fn assert_linear(name: &str, make: impl Fn(usize) -> String, unit: usize) {
    let small = make(unit);
    let large = make(unit * 4);
    let t_small = best_of_three(|| {
        std::hint::black_box(redact(&small));
    });
    let t_large = best_of_three(|| {
        std::hint::black_box(redact(&large));
    });
    let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-9);
    assert!(
        ratio < 10.0,
        "{name}: 4x the text took {ratio:.1}x as long ({t_small:?} → {t_large:?}): not linear"
    );
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
