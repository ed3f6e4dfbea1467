//! Cases the redaction does not get right yet, kept as tests that state what it should do.
//! Each is ignored with the reason; `cargo test -p boxfleet-redact --test known_gaps --
//! --ignored` runs them. In both, the difference is more redaction, never less: nothing is
//! published that the whole text's redaction hides.

use boxfleet_redact::{Stream, redact};

#[test]
#[ignore = "known gap: a password's value below its prompt, cut like a key's line, reads as a \
            foreign line to the key rule on the first pass and as a marker on the second, and \
            the END's read back publishes a piece on the first pass that the second redacts"]
fn a_prompts_value_cut_like_a_keys_line_redacts_the_same_twice() {
    let text = "Password:\nAbCdEfGh12IjKlMn34Op…[...truncated]\nnDxmwxTUc9\nnext\nworker 3: tick\npj6uJEu7\nx -----END PRIVATE KEY----- QAxuVZDl6x\n";
    let once = redact(text);
    assert_eq!(redact(&once), once);
}

#[test]
#[ignore = "known gap: a read back from an END that stops at two lines another process wrote \
            looks at the line above them; a live tail that showed that line before the END was \
            written redacts the piece the whole text publishes"]
fn a_stream_reads_a_piece_below_a_token_as_the_whole_text_does() {
    let text =
        "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5\nt\ns\n8LzW3xY5\n-----END PRIVATE KEY-----";
    let mut stream = Stream::new();
    let mut shown = String::new();
    for line in text.split_inclusive('\n') {
        shown.push_str(&stream.push(line));
    }
    shown.push_str(&stream.finish());
    assert_eq!(shown, redact(text));
}
