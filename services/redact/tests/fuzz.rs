//! The fuzz target: any text, redacted, never panics, redacts the same twice, and a stream of
//! it in any chunking shows exactly the whole text's redaction. bolero runs it as a test on
//! stable (random inputs); `cargo bolero test fuzz_redaction` runs it under a real fuzzer.

mod support;

use boxfleet_redact::{Stream, redact};

/// How many inputs each target tries: `REDACT_FUZZ_ITERATIONS` for a longer run.
fn iterations() -> usize {
    std::env::var("REDACT_FUZZ_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000)
}

fn check(text: &str, cut: usize) {
    let once = redact(text);
    let twice = redact(&once);
    assert!(
        twice == once,
        "redacting twice changed the text\n text: {text:?}\n once: {once:?}\ntwice: {twice:?}"
    );
    let mut stream = Stream::new();
    let mut shown = String::new();
    for chunk in support::chunks(text, &[cut.max(1), 1, 7]) {
        shown.push_str(&stream.push(chunk));
    }
    shown.push_str(&stream.finish());
    assert!(
        shown == once,
        "the stream differed from the whole text\n  text: {text:?}\n whole: {once:?}\nstream: {shown:?}"
    );
}

#[test]
fn fuzz_redaction() {
    bolero::check!()
        .with_iterations(iterations())
        .with_type::<(String, u8)>()
        .for_each(|(text, cut)| check(text, usize::from(*cut)));
}

#[test]
fn fuzz_redaction_of_armoured_bytes() {
    // arbitrary bytes over an alphabet that makes armours, base64 and passwords likely
    const PIECES: &[&str] = &[
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "-----END PGP PRIVATE KEY BLOCK-----",
        "MIIEowIBAAKCAQEAxq3O4Ou9Rk2cT8vWm5aYhL0pQz7sNdFjG1tUrBXy6eKwHnVi",
        "aZ9+bY8/",
        "\n",
        "\\n",
        "\n\n",
        "password: ",
        "Password:",
        "pwd=",
        "\"",
        "+",
        "12\t",
        "[...truncated]",
        "…",
        "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
        "[REDACTED:private_key]",
        " ",
        "=twTO",
    ];
    bolero::check!()
        .with_iterations(iterations())
        .with_type::<(Vec<u8>, u8)>()
        .for_each(|(picks, cut)| {
            let text: String = picks
                .iter()
                .map(|p| PIECES[usize::from(*p) % PIECES.len()])
                .collect();
            check(&text, usize::from(*cut));
        });
}
