//! The spec's examples of what a live tail shows at once and what it holds back
//! ("What it shows is settled", under "Watching a run live").

mod support;

use boxfleet_redact::{Stream, settled};

/// The bytes of `text` held back, as a text.
fn held(text: &str) -> &str {
    &text[settled(text).len..]
}

#[test]
fn a_line_still_being_written_waits_for_its_line_break() {
    assert_eq!(held("done\nbuilding boxf"), "building boxf");
    assert_eq!(settled("").len, 0);
}

#[test]
fn a_begin_waits_while_what_comes_next_could_be_the_key() {
    let text = "start\n-----BEGIN RSA PRIVATE KEY-----\n";
    assert_eq!(held(text), "-----BEGIN RSA PRIVATE KEY-----\n");
    let text = format!(
        "start\n-----BEGIN RSA PRIVATE KEY-----\n{}\n",
        support::base64_line(1, 64)
    );
    assert!(held(&text).starts_with("-----BEGIN"), "{text}");
}

#[test]
fn a_mention_of_the_armour_line_waits_only_for_the_next_line() {
    let text = "grep found -----BEGIN RSA PRIVATE KEY----- in docs.md\nthat is all\n";
    assert_eq!(held(text), "", "the next line is no key's: nothing waits");
    let text = "-----BEGIN RSA PRIVATE KEY-----\nis the armour line we look for\n";
    assert_eq!(held(text), "");
}

#[test]
fn a_hash_in_hex_or_a_path_in_lower_case_is_shown_at_once() {
    let text = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n/home/user/repo/src/redact/keys/forward_reading.rs\n";
    assert_eq!(held(text), "");
}

#[test]
fn a_line_that_reads_like_a_key_body_waits_until_four_lines_that_cannot_be_follow() {
    let body = support::base64_line(3, 40);
    let mut text = format!("{body}\n");
    for (i, line) in ["one", "two", "three"].iter().enumerate() {
        text.push_str(line);
        text.push('\n');
        assert!(
            held(&text).starts_with(&body),
            "after {} prose lines the body must still wait",
            i + 1
        );
    }
    text.push_str("four\n");
    assert_eq!(held(&text), "", "four lines that are no key's release it");
}

#[test]
fn a_line_exactly_as_wide_as_a_keys_waits_for_five() {
    for width in [64, 70, 76] {
        let body = support::base64_line(width as u64, width);
        let mut text = format!("{body}\n");
        for line in ["one", "two", "three", "four"] {
            text.push_str(line);
            text.push('\n');
        }
        assert!(
            held(&text).starts_with(&body),
            "width {width}: four are not enough"
        );
        text.push_str("five\n");
        assert_eq!(held(&text), "", "width {width}: five release it");
    }
}

#[test]
fn a_go_test_name_or_camel_case_path_as_wide_as_a_key_line_waits_like_one() {
    let line = "=== RUN   TestHandshakeServerWithClientCertificateRequestedButNotSentX";
    let text = format!("{line}\n");
    assert!(!held(&text).is_empty(), "a CamelCase run waits");
}

#[test]
fn a_line_holding_a_piece_of_a_key_anywhere_waits_for_four_lines_that_hold_none() {
    let mut text = String::from("cache hit for q3O4OuZx9kLm in the store\n");
    for line in ["one", "two", "three"] {
        text.push_str(line);
        text.push('\n');
    }
    assert!(!held(&text).is_empty());
    text.push_str("four\n");
    assert_eq!(held(&text), "");
}

#[test]
fn a_run_of_password_lines_is_shown_as_it_is_written() {
    let text = "echo \"password:\"\necho \"password:\"\necho \"password:\"\nls\n";
    assert!(
        held(text).len() <= "echo \"password:\"\nls\n".len(),
        "{:?}",
        held(text)
    );
}

#[test]
fn a_password_key_waits_for_the_line_that_decides_its_value() {
    assert_eq!(held("Password:\n"), "Password:\n");
    assert_eq!(held("Password:\n\n"), "Password:\n\n");
    assert_eq!(held("Password:\nhunter2x9\n"), "");
    assert_eq!(held("password: hunter2x9\n"), "");
}

#[test]
fn a_key_followed_by_punctuation_and_more_waits_one_line() {
    let text = "msg=\"Enter password:\" level=info\n";
    assert_eq!(held(text), text);
    assert_eq!(held(&format!("{text}msg=\"connected\" level=info\n")), "");
}

#[test]
fn a_key_a_quote_closes_whose_separator_ends_its_line_waits_one_line() {
    let text = "\tcase \"password\":\n";
    assert_eq!(held(text), text);
    assert_eq!(held(&format!("{text}\t\treturn masked\n")), "");
}

#[test]
fn go_test_output_fed_a_line_at_a_time_holds_no_more_than_a_key_block() {
    // CamelCase test names as wide as a key's line wait like one: output arrives in bursts,
    // held as far back as one key block at most
    let text = include_str!("corpus/clean/go_test_v.txt").repeat(40);
    let mut stream = Stream::new();
    let (mut most, mut total, mut reads) = (0, 0, 0);
    for line in text.split_inclusive('\n') {
        let _ = stream.push(line);
        most = most.max(stream.held());
        total += stream.held();
        reads += 1;
    }
    println!("held on average {} bytes, at most {most}", total / reads);
    assert!(
        most <= boxfleet_redact::MAX_KEY_BLOCK_BYTES + 256,
        "held at most {most} bytes"
    );
}

#[test]
fn a_stream_reads_a_piece_below_a_token_as_the_whole_text_does() {
    // the read back from the END stops at two lines another process wrote and looks at the
    // line above them: a token's marker there reads as it did when the line was shown
    let text =
        "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5\nt\ns\n8LzW3xY5\n-----END PRIVATE KEY-----";
    let mut stream = Stream::new();
    let mut shown = String::new();
    for line in text.split_inclusive('\n') {
        shown.push_str(&stream.push(line));
    }
    shown.push_str(&stream.finish());
    assert_eq!(shown, boxfleet_redact::redact(text));
}

#[test]
fn an_elements_opening_line_waits_for_its_value_and_its_close() {
    assert_eq!(held("ok\n<etsyToken>\n"), "<etsyToken>\n");
    assert_eq!(
        held("ok\n<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n"),
        "<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n"
    );
    assert_eq!(
        held("ok\n<etsyToken>\n    r8o7pepwkn9ecr1ksfe92iuy\n</etsyToken>\n"),
        ""
    );
    let mut stream = boxfleet_redact::Stream::new();
    let mut shown = String::new();
    for line in [
        "ok\n",
        "<etsyToken>\n",
        "    r8o7pepwkn9ecr1ksfe92iuy\n",
        "</etsyToken>\n",
    ] {
        shown.push_str(&stream.push(line));
    }
    shown.push_str(&stream.finish());
    assert_eq!(
        shown,
        "ok\n<etsyToken>\n    [REDACTED:generic_secret]\n</etsyToken>\n"
    );
}
