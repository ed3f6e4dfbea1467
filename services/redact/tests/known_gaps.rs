//! Cases the redaction does not get right yet, kept as tests that state what it should do.
//! Each is ignored with the reason; `cargo test -p boxfleet-redact --test known_gaps --
//! --ignored` runs them. In both, the difference is more redaction, never less: nothing is
//! published that the whole text's redaction hides.

use boxfleet_redact::redact;

#[test]
#[ignore = "known gap: a password's value below its prompt, cut like a key's line, reads as a \
            foreign line to the key rule on the first pass and as a marker on the second, and \
            the END's read back publishes a piece on the first pass that the second redacts"]
fn a_prompts_value_cut_like_a_keys_line_redacts_the_same_twice() {
    let text = "Password:\nAbCdEfGh12IjKlMn34Op…[...truncated]\nnDxmwxTUc9\nnext\nworker 3: tick\npj6uJEu7\nx -----END PRIVATE KEY----- QAxuVZDl6x\n";
    let once = redact(text);
    assert_eq!(redact(&once), once);
}
