//! Private-key blocks: the spec's examples, real-shaped keys in every wrapping, idempotence,
//! linear time, and the stream's hold contract.

mod support;

use boxfleet_redact::{Stream, redact, settled};

const M: &str = "[REDACTED:private_key]";

/// Deterministic pseudo-random bytes (xorshift), base64-encoded: a key's body without crypto.
fn b64(seed: u64, n: usize) -> String {
    use base64::Engine as _;
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let bytes: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A key's body lines wrapped at `width`.
fn body(seed: u64, bytes: usize, width: usize) -> Vec<String> {
    let all = b64(seed, bytes);
    all.as_bytes()
        .chunks(width)
        .map(|c| String::from_utf8(c.to_vec()).expect("base64 is ascii"))
        .collect()
}

fn pem(label: &str, seed: u64, bytes: usize, width: usize) -> String {
    let mut s = format!("-----BEGIN {label}-----\n");
    for l in body(seed, bytes, width) {
        s.push_str(&l);
        s.push('\n');
    }
    s.push_str(&format!("-----END {label}-----\n"));
    s
}

fn check(input: &str, want: &str) {
    let got = redact(input);
    assert_eq!(got, want, "input:\n{input}");
    assert_eq!(redact(&got), got, "redacting twice changed the text");
}

// ----- a: armour lines, one claim per block -----

#[test]
fn rsa_key_wrapped_at_64_is_one_marker() {
    let key = pem("RSA PRIVATE KEY", 1, 1190, 64);
    check(
        &format!("before\n{key}after\n"),
        &format!("before\n{M}\nafter\n"),
    );
}

#[test]
fn every_private_label_is_read() {
    for label in [
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "DSA PRIVATE KEY",
        "PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ] {
        let key = pem(label, 7, 300, 64);
        check(&format!("x\n{key}y\n"), &format!("x\n{M}\ny\n"));
    }
    let ssh = pem("OPENSSH PRIVATE KEY", 9, 400, 70);
    check(&ssh, &format!("{M}\n"));
}

#[test]
fn openpgp_block_with_headers_and_checksum() {
    let mut k =
        String::from("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\nComment: test\n\n");
    for l in body(3, 600, 64) {
        k.push_str(&l);
        k.push('\n');
    }
    k.push_str("=Xq3Z\n-----END PGP PRIVATE KEY BLOCK-----\n");
    check(&k, &format!("{M}\n"));
}

#[test]
fn certificates_and_public_keys_are_left_alone() {
    let cert = pem("CERTIFICATE", 5, 600, 64);
    check(&cert, &cert);
    let public = pem("PUBLIC KEY", 6, 270, 64);
    check(&public, &public);
}

#[test]
fn a_certificate_armour_ends_a_key_block() {
    let lines = body(11, 600, 64);
    let cert = pem("CERTIFICATE", 12, 300, 64);
    let text = format!("-----BEGIN PRIVATE KEY-----\n{}\n{cert}", lines.join("\n"));
    check(&text, &format!("{M}\n{cert}"));
}

#[test]
fn encrypted_pem_headers() {
    let mut k = String::from(
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n",
    );
    for l in body(21, 1190, 64) {
        k.push_str(&l);
        k.push('\n');
    }
    k.push_str("-----END RSA PRIVATE KEY-----\n");
    check(
        &format!("$ cat k\n{k}$ ls\n"),
        &format!("$ cat k\n{M}\n$ ls\n"),
    );
}

#[test]
fn openssl_genpkey_shaped_rsa_key() {
    let key = "-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj
MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu
NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ
qgtzJ6GR3eqoYSW9b9UMvkBpZODSctWSNGj3P7jRFDO5VoTwCQAWbFnOjDfH5Ulg
p2PKSQnSJP3AJLQNFNe7br1XbrhV//eO+t51mIpGSDCUv3E0DDFcWDTH9cXDTTlR
ZVEiR2BwpZOOkE/Z0/BVnhZYL71oZV34bKfWjQIt6V/isSMahdsAASACp4ZTGtwi
VuNd9tybAgMBAAECggEBAKTmjaS6tkK8BlPXClTQ2vpz/N6uxDeS35mXpqasqskV
laAidgg/sWqpjXDbXr93otIMLlWsM+X0CqMDgSXKejLS2jx4GDjI1ZTXg++0AMJ8
sJ74pWzVDOfmCEQ/7wXs3+cbnXhKriO8Z036q92Qc1+N87SI38nkGa0ABH9CN83H
mQqt4fB7UdHzuIRe/me2PGhIq5ZBzj6h3BpoPGzEP+x3l9YmK8t/1cN0pqI+dQwY
dgfGjackLu/2qH80MCF7IyQaseZUOJyKrCLtSD/Iixv/hzDEUPfOCjFDgTpzf3cw
ta8+oE4wHCo1iI1/4TlPkwmXx4qSXtmw4aQPz7IDQvECgYEA8KNThCO2gsC2I9PQ
DM/8Cw0O983WCDY+oi+7JPiNAJwv5DYBqEZB1QYdj06YD16XlC/HAZMsMku1na2T
N0driwenQQWzoev3g2S7gRDoS/FCJSI3jJ+kjgtaA7Qmzlgk1TxODN+G1H91HW7t
0l7VnL27IWyYo2qRRK3jzxqUiPUCgYEAx0oQs2reBQGMVZnApD1jeq7n4MvNLcPv
t8b/eU9iUv6Y4Mj0Suo/AU8lYZXm8ubbqAlwz2VSVunD2tOplHyMUrtCtObAfVDU
AhCndKaA9gApgfb3xw1IKbuQ1u4IF1FJl3VtumfQn//LiH1B3rXhcdyo3/vIttEk
48RakUKClU8CgYEAzV7W3COOlDDcQd935DdtKBFRAPRPAlspQUnzMi5eSHMD/ISL
DY5IiQHbIH83D4bvXq0X7qQoSBSNP7Dvv3HYuqMhf0DaegrlBuJllFVVq9qPVRnK
xt1Il2HgxOBvbhOT+9in1BzA+YJ99UzC85O0Qz06A+CmtHEy4aZ2kj5hHjECgYEA
mNS4+A8Fkss8Js1RieK2LniBxMgmYml3pfVLKGnzmng7H2+cwPLhPIzIuwytXywh
2bzbsYEfYx3EoEVgMEpPhoarQnYPukrJO4gwE2o5Te6T5mJSZGlQJQj9q4ZB2Dfz
et6INsK0oG8XVGXSpQvQh3RUYekCZQkBBFcpqWpbIEsCgYAnM3DQf3FJoSnXaMhr
VBIovic5l0xFkEHskAjFTevO86Fsz1C2aSeRKSqGFoOQ0tmJzBEs1R6KqnHInicD
TQrKhArgLXX4v3CddjfTRJkFWDbE/CkvKZNOrcf1nhaGCPspRJj2KUkj1Fhl9Cnc
dn/RsYEONbwQSjIfMPkvxF+8HQ==
-----END PRIVATE KEY-----
";
    check(
        &format!("$ openssl genpkey -algorithm RSA\n{key}$ \n"),
        &format!("$ openssl genpkey -algorithm RSA\n{M}\n$ \n"),
    );
}

// ----- b: forward from a BEGIN -----

#[test]
fn a_key_printed_double_spaced_is_one_key() {
    let lines = body(31, 900, 64);
    let text = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n\n{}\n\n-----END RSA PRIVATE KEY-----\ndone\n",
        lines.join("\n\n")
    );
    check(&text, &format!("{M}\ndone\n"));
}

#[test]
fn one_log_line_inside_a_key_is_redacted_with_it() {
    let lines = body(32, 900, 64);
    let text = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n{}\n2026-01-01 worker: tick\n{}\n-----END PRIVATE KEY-----\nok\n",
        lines[0],
        lines[1],
        lines[2..].join("\n")
    );
    check(&text, &format!("{M}\nok\n"));
}

#[test]
fn a_key_whose_end_was_never_written_ends_at_two_foreign_lines() {
    let lines = body(33, 900, 64);
    let text = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\ncat: broken pipe\nexit status 1\n",
        lines.join("\n")
    );
    check(&text, &format!("{M}\ncat: broken pipe\nexit status 1\n"));
}

#[test]
fn a_grep_match_for_the_armour_line_is_left_alone() {
    let text = "src/tls.go:41:\tif block.Type == \"-----BEGIN RSA PRIVATE KEY-----\" {\n\
                src/tls.go:42:\t\treturn parseKey(block.Bytes)\n\
                src/tls.go:88:\t// -----END RSA PRIVATE KEY-----\n";
    check(text, text);
}

#[test]
fn a_begin_with_prose_under_it_takes_nothing_after_it() {
    let lines = body(34, 300, 64);
    let text = format!(
        "grep: -----BEGIN PRIVATE KEY-----\nthe key goes here\n{}\n-----END PRIVATE KEY-----\n",
        lines.join("\n")
    );
    // the read back from the END stops at the prose under the BEGIN
    check(
        &text,
        &format!("grep: -----BEGIN PRIVATE KEY-----\nthe key goes here\n{M}\n"),
    );
}

#[test]
fn a_block_is_never_read_past_max_key_block_bytes() {
    let line = b64(40, 3000);
    let mut text = String::from("-----BEGIN PRIVATE KEY-----\n");
    for _ in 0..40 {
        text.push_str(&line[..64]);
        text.push('\n');
    }
    let body_len = text.len();
    assert!(body_len < 64 * 1024);
    let out = redact(&text);
    assert!(out.starts_with(M));
}

// ----- c: back from an END -----

#[test]
fn a_key_read_from_inside_its_begin_not_in_the_text() {
    let lines = body(41, 1190, 64);
    let text = format!(
        "...\n{}\n-----END RSA PRIVATE KEY-----\n$ ",
        lines[5..].join("\n")
    );
    check(&text, &format!("...\n{M}\n$ "));
}

#[test]
fn a_run_of_sha256_above_an_end_is_read_as_a_cut_line() {
    let text = "=== RUN   TestSHA256Sum\n-----END PRIVATE KEY-----\n";
    check(text, &format!("=== RUN   {M}\n"));
}

#[test]
fn a_run_before_the_end_armour_is_the_body_a_window_kept() {
    let text = "=== RUN TestSHA256Sum x -----END PRIVATE KEY-----\nPASS\n";
    check(text, &format!("=== RUN {M}\nPASS\n"));
}

#[test]
fn a_wrapping_gutter_before_the_end() {
    let lines = body(42, 600, 64);
    let text = format!(
        "{}\n[Worker1A] -----END PRIVATE KEY-----\n",
        lines[2..].join("\n")
    );
    check(&text, &format!("{M}\n"));
    let alone = "[Worker1A] -----END PRIVATE KEY-----\n";
    check(alone, &format!("[{M}\n"));
}

#[test]
fn camel_case_lines_directly_above_a_bare_end_are_read_as_its_body() {
    let text = "ok  \tgithub.com/x/y\nTestParsePrivateKeyRoundTripsThroughMarshalPKCS8\n-----END PRIVATE KEY-----\n";
    check(text, &format!("ok  \tgithub.com/x/y\n{M}\n"));
}

#[test]
fn lowercase_hashes_above_an_end_are_not_a_key() {
    let text = "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n-----END PRIVATE KEY-----\n";
    check(text, text);
}

#[test]
fn two_foreign_lines_are_crossed_to_a_line_at_an_encoder_width() {
    let lines = body(43, 900, 64);
    let n = lines.len();
    let text = format!(
        "{}\nworker 3: tick\nworker 4: tick\n{}\n-----END PRIVATE KEY-----\n",
        lines[..n - 2].join("\n"),
        lines[n - 2..].join("\n")
    );
    check(&text, &format!("{M}\n"));
}

#[test]
fn three_foreign_lines_publish_the_part_above() {
    let lines = body(44, 900, 64);
    let n = lines.len();
    let top = lines[..n - 2].join("\n");
    let text = format!(
        "{top}\nworker 3: tick\nworker 4: tick\nworker 5: tick\n{}\n-----END PRIVATE KEY-----\n",
        lines[n - 2..].join("\n")
    );
    check(
        &text,
        &format!("{top}\nworker 3: tick\nworker 4: tick\nworker 5: tick\n{M}\n"),
    );
}

#[test]
fn a_begin_block_and_a_back_read_across_two_lines_are_one() {
    let lines = body(45, 900, 64);
    let n = lines.len();
    let text = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\nworker 3: tick\nworker 4: tick\n{}\n-----END PRIVATE KEY-----\nok\n",
        lines[..n - 3].join("\n"),
        lines[n - 3..].join("\n")
    );
    check(&text, &format!("{M}\nok\n"));
}

// ----- d: wrappings -----

#[test]
fn json_string_with_escaped_breaks() {
    let lines = body(51, 600, 64);
    let text = format!(
        "{{\"key\": \"-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n\", \"n\": 1}}\n",
        lines.join("\\n")
    );
    check(&text, &format!("{{\"key\": \"{M}\\n\", \"n\": 1}}\n"));
}

#[test]
fn json_string_escaped_twice() {
    let lines = body(52, 600, 64);
    let text = format!(
        "\"{{\\\"key\\\": \\\"-----BEGIN PRIVATE KEY-----\\\\n{}\\\\n-----END PRIVATE KEY-----\\\\n\\\"}}\"\n",
        lines.join("\\\\n")
    );
    check(&text, &format!("\"{{\\\"key\\\": \\\"{M}\\\\n\\\"}}\"\n"));
}

#[test]
fn numbered_lines() {
    let lines = body(53, 600, 64);
    let mut text = String::from("     1\t-----BEGIN PRIVATE KEY-----\n");
    for (i, l) in lines.iter().enumerate() {
        text.push_str(&format!("{:>6}\t{l}\n", i + 2));
    }
    text.push_str(&format!(
        "{:>6}\t-----END PRIVATE KEY-----\n",
        lines.len() + 2
    ));
    check(&text, &format!("     1\t{M}\n"));
}

#[test]
fn grep_prefixes() {
    let lines = body(54, 600, 64);
    let mut text = String::from("k.pem:1:-----BEGIN PRIVATE KEY-----\n");
    for (i, l) in lines.iter().enumerate() {
        text.push_str(&format!("k.pem-{}-{l}\n", i + 2));
    }
    text.push_str(&format!(
        "k.pem-{}------END PRIVATE KEY-----\n",
        lines.len() + 2
    ));
    check(&text, &format!("k.pem:1:{M}\n"));
}

#[test]
fn timestamps_on_every_line() {
    let lines = body(55, 600, 64);
    let mut text = String::from("2026-01-02T03:04:05.123Z -----BEGIN PRIVATE KEY-----\n");
    for l in &lines {
        text.push_str(&format!("2026-01-02T03:04:05Z {l}\n"));
    }
    text.push_str("2026-01-02T03:04:06.9Z -----END PRIVATE KEY-----\n");
    check(&text, &format!("2026-01-02T03:04:05.123Z {M}\n"));
}

#[test]
fn a_diff_adding_a_key() {
    let lines = body(56, 600, 64);
    let mut text = String::from("@@ -0,0 +1,12 @@\n+-----BEGIN PRIVATE KEY-----\n");
    for l in &lines {
        text.push_str(&format!("+{l}\n"));
    }
    text.push_str("+-----END PRIVATE KEY-----\n");
    check(&text, &format!("@@ -0,0 +1,12 @@\n+{M}\n"));
}

#[test]
fn a_diff_read_back_from_its_end() {
    let lines = body(57, 600, 64);
    let mut text = String::new();
    for l in &lines[3..] {
        text.push_str(&format!("+{l}\n"));
    }
    text.push_str("+-----END PRIVATE KEY-----\n");
    let out = redact(&text);
    assert!(!out.contains(&lines[4]), "{out}");
    assert_eq!(redact(&out), out);
}

#[test]
fn a_string_concatenated_across_lines() {
    let lines = body(58, 600, 64);
    let mut text = String::from("const key = \"-----BEGIN PRIVATE KEY-----\\n\" +\n");
    for l in &lines {
        text.push_str(&format!("\t\"{l}\\n\" +\n"));
    }
    text.push_str("\t\"-----END PRIVATE KEY-----\\n\"\n");
    check(&text, &format!("const key = \"{M}\\n\"\n"));
}

#[test]
fn a_key_echoed_a_line_at_a_time() {
    let lines = body(59, 600, 64);
    let mut text = String::from("echo \"-----BEGIN PRIVATE KEY-----\" > key.pem\n");
    for l in &lines {
        text.push_str(&format!("echo \"{l}\" >> key.pem\n"));
    }
    text.push_str("echo \"-----END PRIVATE KEY-----\" >> key.pem\n");
    check(&text, &format!("echo \"{M}\" >> key.pem\n"));
}

#[test]
fn the_whole_key_on_one_line() {
    let lines = body(60, 600, 64);
    let text = format!(
        "KEY=-----BEGIN PRIVATE KEY----- {} -----END PRIVATE KEY----- USER=bob\n",
        lines.join(" ")
    );
    check(&text, &format!("KEY={M} USER=bob\n"));
}

#[test]
fn two_keys_on_one_line_echo_a_b() {
    let a = body(61, 600, 64).join(" ");
    let b = body(62, 600, 64).join(" ");
    let text = format!(
        "$ echo $A $B\n-----BEGIN RSA PRIVATE KEY----- {a} -----END RSA PRIVATE KEY----- -----BEGIN EC PRIVATE KEY----- {b} -----END EC PRIVATE KEY-----\n"
    );
    check(&text, &format!("$ echo $A $B\n{M} {M}\n"));
}

#[test]
fn a_minified_bundle_naming_the_armour_on_a_long_line() {
    let mut line = String::from("!function(){var e=\"-----BEGIN RSA PRIVATE KEY-----\";");
    while line.len() < 70 * 1024 {
        line.push_str("function t(n){return n.replace(/\\s+/g,\"\")}var r=e.split(\"\\n\");");
    }
    line.push_str("}();\n");
    let text = format!("{line}console.log(done)\n");
    check(&text, &text);
    let s = settled(&text);
    assert_eq!(s.len, text.len(), "the bundle holds nothing back");
}

#[test]
fn a_begin_on_a_line_past_max_key_block_bytes_holds_nothing_after_it() {
    let tail = b64(120, 54_000);
    let text = format!("x=\"-----BEGIN RSA PRIVATE KEY-----{tail}\"\n");
    let s = settled(&text);
    assert_eq!(s.len, text.len());
    check(&text, &format!("x=\"{M}\"\n"));
}

// ----- g: idempotence -----

#[test]
fn a_marker_ends_a_block_in_either_direction() {
    let lines = body(71, 300, 64);
    let text = format!("{M}\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"));
    check(&text, &format!("{M}\n{M}\n"));
    let text = format!("-----BEGIN PRIVATE KEY-----\n{}\n{M}\n", lines.join("\n"));
    check(&text, &format!("{M}\n{M}\n"));
}

// ----- linear time -----

#[test]
fn a_line_of_twenty_thousand_armours_is_linear() {
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(if i % 2 == 0 {
            "-----BEGIN PRIVATE KEY----- "
        } else {
            "-----END PRIVATE KEY----- "
        });
    }
    support::assert_linear(
        "alternating armours",
        |n| {
            (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        "-----BEGIN PRIVATE KEY----- "
                    } else {
                        "-----END PRIVATE KEY----- "
                    }
                })
                .collect()
        },
        5_000,
        redact_and_settle,
    );
    let out = redact(&text);
    assert_eq!(redact(&out), out);
}

/// What a linearity check times: the whole text's redaction and its settled prefix.
fn redact_and_settle(text: &str) {
    std::hint::black_box(redact(text));
    std::hint::black_box(settled(text));
}

#[test]
fn a_mebibyte_of_base64_with_no_break_is_linear() {
    support::assert_linear(
        "base64 with no break, then an END",
        |n| b64(81, n),
        196_608,
        |text| {
            std::hint::black_box(redact(text));
            redact_and_settle(&format!("{text}-----END PRIVATE KEY-----\n"));
        },
    );
}

// ----- h: the stream -----

#[test]
fn a_begin_waits_until_its_block_closes() {
    let lines = body(91, 300, 64);
    let mut s = Stream::new();
    assert_eq!(s.push("hello\n-----BEGIN PRIVATE KEY-----\n"), "hello\n");
    for l in &lines {
        assert_eq!(s.push(&format!("{l}\n")), "");
    }
    let out = s.push("-----END PRIVATE KEY-----\nbye\n");
    assert_eq!(out, format!("{M}\nbye\n"));
}

#[test]
fn a_mention_of_the_armour_waits_only_for_the_next_line() {
    let text = "see -----BEGIN PRIVATE KEY----- in the docs\nnothing here\nmore text\n";
    assert_eq!(settled(text).len, text.len());
}

// ----- h: the hold contract, as a property -----

mod hold_contract {
    use super::{b64, redact, settled};
    use proptest::prelude::*;

    fn line_of(kind: u8, seed: u64) -> String {
        let run = b64(seed, 60);
        match kind % 33 {
            0 => "-----BEGIN RSA PRIVATE KEY-----".into(),
            1 => "-----END RSA PRIVATE KEY-----".into(),
            2 => "-----BEGIN CERTIFICATE-----".into(),
            3 => run[..64].into(),
            4 => run[..70].into(),
            5 => run[..76].into(),
            6 => run[..(seed as usize % 40 + 4)].into(),
            7 => String::new(),
            8 => "worker 3: tick".into(),
            9 => "TestParsePrivateKeyRoundTripsThroughMarshalling".into(),
            10 => format!("=== RUN   Test{}Sum", &run[..6]),
            11 => format!("=={}", &run[..4]).replacen("==", "=", 1),
            12 => "[REDACTED:private_key]".into(),
            13 => format!("  {}\t{}", seed % 100, &run[..64]),
            14 => format!("x -----END PRIVATE KEY----- {}", &run[..10]),
            15 => format!("+{}", &run[..64]),
            16 => format!(
                "\"{}\\n{}\\n-----END PRIVATE KEY-----\\n\"",
                &run[..64],
                &run[64..70]
            ),
            17 => format!("-----BEGIN PRIVATE KEY----- {}", &run[..40]),
            18 => format!("  {}\t", seed % 100),
            19 => format!("{}9", &run[..9]),
            20 => "foo [REDACTED:private_key] -----END PRIVATE KEY-----".into(),
            21 => format!("héllo wörld {} ünïcode", &run[..3]),
            22 => format!("{}\r", &run[..64]),
            23 => format!("  {}\t-----END RSA PRIVATE KEY-----", seed % 100),
            24 => format!("{}…[...truncated]", &run[..20]),
            25 => format!("[… 812 bytes truncated]{}", &run[..12]),
            26 => format!(
                "{}…[… 2,345 characters truncated …]…{}",
                &run[..16],
                &run[20..24]
            ),
            27 => "next".into(),
            28 => "Password:".into(),
            29 => format!("{}…", &run[..40]),
            30 => "-----END PGP PRIVATE KEY BLOCK-----".into(),
            32 => "internal/ServiceHandler/RequestProcessor_test.go".into(),
            _ => "-----BEGIN PGP PRIVATE KEY BLOCK-----".into(),
        }
    }

    fn text_of(kinds: &[(u8, u64)]) -> String {
        let mut s = String::new();
        for &(k, seed) in kinds {
            s.push_str(&line_of(k, seed));
            s.push('\n');
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, rng_seed: crate::support::rng_seed(), ..ProptestConfig::default() })]
        #[test]
        fn what_is_settled_never_changes(
            head in prop::collection::vec((0u8..33, 0u64..1000), 0..14),
            tail in prop::collection::vec((0u8..33, 0u64..1000), 0..8),
        ) {
            let t = text_of(&head);
            let c = text_of(&tail);
            let s = settled(&t);
            prop_assert_eq!(s.len + s.held, t.len());
            let whole = redact(&format!("{t}{c}"));
            let split = format!("{}{}", redact(&t[..s.len]), redact(&format!("{}{c}", &t[s.len..])));
            prop_assert_eq!(whole, split);
        }

        #[test]
        fn a_stream_in_any_chunking_is_the_whole_redacted(
            kinds in prop::collection::vec((0u8..33, 0u64..1000), 0..20),
            cuts in prop::collection::vec(0usize..4000, 0..12),
        ) {
            let t = text_of(&kinds);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (t.len() + 1)).collect();
            cuts.sort_unstable();
            let mut stream = super::Stream::new();
            let mut shown = String::new();
            let mut at = 0;
            for c in cuts {
                let mut c = c.max(at);
                while !t.is_char_boundary(c) {
                    c += 1;
                }
                shown.push_str(&stream.push(&t[at..c]));
                at = c;
            }
            shown.push_str(&stream.push(&t[at..]));
            shown.push_str(&stream.finish());
            prop_assert_eq!(shown, redact(&t));
        }

        #[test]
        fn redacting_twice_changes_nothing(
            kinds in prop::collection::vec((0u8..33, 0u64..1000), 0..20),
        ) {
            let t = text_of(&kinds);
            let once = redact(&t);
            prop_assert_eq!(redact(&once), once);
        }
    }
}

// ----- e: cuts -----

#[test]
fn a_head_shorter_than_a_piece_straight_after_the_begin_is_published() {
    let text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow…[...truncated]\n";
    check(text, text);
}

#[test]
fn a_key_line_kept_up_to_a_point_with_a_truncation_mark() {
    let lines = body(101, 900, 64);
    let text = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}…[...truncated]\n{}…[...truncated]\n-----END RSA PRIVATE KEY-----\nok\n",
        &lines[0][..24],
        &lines[1][..24]
    );
    check(&text, &format!("{M}\nok\n"));
}

#[test]
fn a_window_that_kept_a_key_from_a_point() {
    let lines = body(102, 900, 64);
    let text = format!(
        "[… 812 bytes truncated]{}\n{}\n{}\n-----END RSA PRIVATE KEY-----\n",
        &lines[3][20..],
        lines[4],
        lines[5]
    );
    check(&text, &format!("[… 812 bytes truncated]{M}\n"));
}

#[test]
fn a_key_cut_on_one_line_with_its_mark_between() {
    let lines = body(103, 900, 64);
    let text = format!(
        "$ cat key.pem | head -c 80\n{}…[… 2,345 characters truncated …]…{}\n-----END RSA PRIVATE KEY-----\n",
        &lines[0][..30],
        &lines[9][40..]
    );
    check(&text, &format!("$ cat key.pem | head -c 80\n{M}\n"));
}

#[test]
fn a_key_cut_short_on_every_line_with_no_mark_is_read_back_whole() {
    let lines = body(104, 900, 64);
    let cut: Vec<&str> = lines.iter().map(|l| &l[..40]).collect();
    let text = format!("{}\n-----END RSA PRIVATE KEY-----\n", cut.join("\n"));
    check(&text, &format!("{M}\n"));
}

#[test]
fn a_word_the_tool_printed_after_a_cut_line_is_redacted_with_its_mark() {
    let lines = body(105, 900, 64);
    let text = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}…[...truncated]\nnext\n\nuser@box:~$ ls\nREADME.md\n",
        lines[0],
        &lines[1][..30]
    );
    check(&text, &format!("{M}\n\nuser@box:~$ ls\nREADME.md\n"));
}

// ----- c: a password prompt between a key's lines and its END -----

#[test]
fn a_password_prompt_thrice_between_a_keys_lines_and_its_end() {
    let lines = body(106, 900, 64);
    let n = lines.len();
    let text = format!(
        "{}\nPassword:\nPassword:\nPassword:\n{}\n-----END RSA PRIVATE KEY-----\n",
        lines[..n - 2].join("\n"),
        lines[n - 2..].join("\n")
    );
    check(&text, &format!("{M}\n"));
}

// ----- g: a one-line key whose END was lost -----

#[test]
fn a_one_line_key_whose_end_was_lost_is_redacted_up_to_the_certificate() {
    let a = body(107, 300, 64).join(" ");
    let c = body(108, 300, 64).join(" ");
    let text = format!(
        "-----BEGIN PRIVATE KEY----- {a} -----BEGIN CERTIFICATE----- {c} -----END CERTIFICATE-----\n"
    );
    check(
        &text,
        &format!("{M} -----BEGIN CERTIFICATE----- {c} -----END CERTIFICATE-----\n"),
    );
}

#[test]
fn a_key_numbered_and_double_spaced_broken_by_one_line_is_broken_by_three() {
    let lines = body(109, 600, 64);
    let n = lines.len();
    let mut text = String::new();
    let mut no = 1;
    let mut push = |s: &str, text: &mut String| {
        text.push_str(&format!("{no:>6}\t{s}\n"));
        no += 1;
    };
    for l in &lines[..n - 3] {
        push(l, &mut text);
        push("", &mut text);
    }
    push("worker 3: tick", &mut text);
    push("", &mut text);
    for l in &lines[n - 3..] {
        push(l, &mut text);
        push("", &mut text);
    }
    push("-----END PRIVATE KEY-----", &mut text);
    let out = redact(&text);
    // the part above the break is published: BEGIN not in the text, three lines part it
    assert!(out.contains(&lines[0]), "{out}");
    assert!(!out.contains(&lines[n - 1]), "{out}");
    assert_eq!(redact(&out), out);
}

// ----- never panic, any input -----

mod any_input {
    use super::{redact, settled};
    use proptest::prelude::*;

    fn atom() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("-----BEGIN RSA PRIVATE KEY-----".to_string()),
            Just("-----END RSA PRIVATE KEY-----".to_string()),
            Just("-----BEGIN CERTIFICATE-----".to_string()),
            Just("[REDACTED:private_key]".to_string()),
            Just("[REDACTED:password]".to_string()),
            Just("\\n".to_string()),
            Just("\\\\n".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just("…".to_string()),
            "[A-Za-z0-9+/=]{1,80}",
            "[ \t\"'>:+0-9.-]{1,4}",
            "\\PC{1,6}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, rng_seed: crate::support::rng_seed(), ..ProptestConfig::default() })]
        #[test]
        fn never_panics_and_redacting_twice_changes_nothing(
            atoms in prop::collection::vec(atom(), 0..40),
        ) {
            let t: String = atoms.concat();
            let once = redact(&t);
            prop_assert_eq!(&redact(&once), &once);
            // the hold contract, with the text cut after any line break
            for (at, _) in t.match_indices('\n').step_by(3) {
                let (head, rest) = t.split_at(at + 1);
                let s = settled(head);
                let split = format!("{}{}", redact(&head[..s.len]), redact(&format!("{}{rest}", &head[s.len..])));
                prop_assert_eq!(&once, &split, "head {:?}", head);
            }
        }
    }
}

// ----- c: crossings -----

#[test]
fn two_lines_between_the_short_last_line_and_the_end_are_crossed() {
    let lines = body(130, 900, 64);
    let text = format!(
        "{}\nworker 3: tick\nworker 4: tick\n-----END PRIVATE KEY-----\n",
        lines[2..].join("\n")
    );
    check(&text, &format!("{M}\n"));
}

#[test]
fn two_lines_above_the_short_last_line_are_crossed_from_the_end() {
    let lines = body(131, 900, 64);
    let n = lines.len();
    let text = format!(
        "{}\nworker 3: tick\nworker 4: tick\n{}\n-----END PRIVATE KEY-----\n",
        lines[2..n - 1].join("\n"),
        lines[n - 1]
    );
    check(&text, &format!("{M}\n"));
}

#[test]
fn two_and_one_more_are_crossed() {
    let lines = body(132, 900, 64);
    let n = lines.len();
    let text = format!(
        "{}\nworker 3: tick\n{}\nworker 4: tick\nworker 5: tick\n{}\n-----END PRIVATE KEY-----\n",
        lines[2..n - 4].join("\n"),
        lines[n - 4..n - 2].join("\n"),
        lines[n - 2..].join("\n")
    );
    check(&text, &format!("{M}\n"));
}

#[test]
fn two_lines_under_a_key_at_no_encoder_width_publish_the_part_above() {
    let lines = body(133, 900, 60);
    let n = lines.len();
    let top = lines[2..n - 3].join("\n");
    let text = format!(
        "{top}\nworker 3: tick\nworker 4: tick\n{}\n-----END PRIVATE KEY-----\n",
        lines[n - 3..].join("\n")
    );
    check(
        &text,
        &format!("{top}\nworker 3: tick\nworker 4: tick\n{M}\n"),
    );
}

#[test]
fn two_and_two_more_around_the_short_last_line_publish_it() {
    let lines = body(134, 900, 64);
    let n = lines.len();
    let text = format!(
        "{}\nworker 3: tick\nworker 4: tick\n{}\nworker 5: tick\nworker 6: tick\n-----END PRIVATE KEY-----\n",
        lines[2..n - 1].join("\n"),
        lines[n - 1]
    );
    check(&text, &text);
}

// ----- b: a short last line closed by the text around it; prompts under a key -----

#[test]
fn a_short_last_line_the_quote_closes_ends_the_block_at_its_base64() {
    // a last line that reads like no piece of a key (no digit); one that does reads as a line
    // a cut wrote into, and the block goes on from it
    let lines = body(140, 576, 64);
    let text = format!(
        "{{\"key\": \"-----BEGIN PRIVATE KEY-----\n{}\nAbCdEfGhIjKlMnOpQrSt==\", \"user\": \"bob\"}}\nnext line\n",
        lines.join("\n"),
    );
    check(
        &text,
        &format!("{{\"key\": \"{M}\", \"user\": \"bob\"}}\nnext line\n"),
    );
}

#[test]
fn what_follows_a_full_line_on_its_line_ends_nothing() {
    let lines = body(141, 600, 64);
    let text = format!(
        "-----BEGIN PRIVATE KEY-----\n{} <- 64\n{}\n-----END PRIVATE KEY-----\n",
        lines[0],
        lines[1..].join("\n")
    );
    check(&text, &format!("{M}\n"));
}

#[test]
fn under_a_key_with_no_end_a_password_prompt_interrupts_it_and_the_value_is_the_keys() {
    // twelve full lines and no short last one: the END was never written
    let lines = body(142, 576, 64);
    let text = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\nPassword:\nhunter2\n\n$ ls\nREADME.md\n",
        lines.join("\n")
    );
    check(&text, &format!("{M}\n\n$ ls\nREADME.md\n"));
}

#[test]
fn a_last_line_ending_in_a_password_key_and_equals_interrupts_the_key() {
    let lines = body(143, 576, 64);
    let text = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\nuser pwd=\nhunter2\n$ ls\nREADME.md\n",
        lines.join("\n")
    );
    check(&text, &format!("{M}\n$ ls\nREADME.md\n"));
}

#[test]
fn an_encrypted_key_on_one_line_with_its_headers() {
    let b = body(144, 600, 64).join(" ");
    let text = format!(
        "KEY=-----BEGIN RSA PRIVATE KEY----- Proc-Type: 4,ENCRYPTED DEK-Info: AES-128-CBC,3F17F5316E2BAC89 {b} -----END RSA PRIVATE KEY-----\n"
    );
    check(&text, &format!("KEY={M}\n"));
    let lost = format!(
        "KEY=-----BEGIN RSA PRIVATE KEY----- Proc-Type: 4,ENCRYPTED DEK-Info: AES-128-CBC,3F17F5316E2BAC89 {b}\nHOME=/root\nUSER=root\n"
    );
    check(&lost, &format!("KEY={M}\nHOME=/root\nUSER=root\n"));
}

#[test]
fn a_begin_as_the_last_line_waits_for_the_next() {
    let text = "log: starting\n-----BEGIN PRIVATE KEY-----\n";
    assert_eq!(settled(text).len, "log: starting\n".len());
    let more = format!("{text}see the docs\n");
    assert_eq!(settled(&more).len, more.len());
}

#[test]
fn a_camel_case_line_waits_for_four_lines_that_cannot_be_a_keys() {
    let text = "TestParsePrivateKeyRoundTripsThroughMarshalPKCS8\na\nb\nc\n";
    assert_eq!(settled(text).len, 0);
    let more = format!("{text}d\n");
    assert_eq!(settled(&more).len, more.len());
}

#[test]
fn many_armours_of_every_kind_on_one_line_are_linear() {
    let run = b64(150, 48);
    for unit in [
        "-----BEGIN PRIVATE KEY----- ".to_string(),
        "-----END PRIVATE KEY----- ".to_string(),
        format!("-----BEGIN PRIVATE KEY----- {run} "),
        format!("{run} -----END PRIVATE KEY----- "),
        format!("[REDACTED:private_key] {run} -----END PRIVATE KEY----- "),
    ] {
        support::assert_linear(&unit, |n| unit.repeat(n), 5_000, redact_and_settle);
        let out = redact(&unit.repeat(20_000));
        assert_eq!(redact(&out), out);
    }
}

#[test]
fn a_mebibyte_of_key_like_lines_settles_in_linear_time() {
    let lines = body(151, 800_000, 64);
    let mut text = String::from("-----BEGIN PRIVATE KEY-----\n");
    for l in &lines {
        text.push_str(l);
        text.push('\n');
    }
    support::assert_linear(
        "key-like lines under a BEGIN",
        |n| {
            let mut text = String::from("-----BEGIN PRIVATE KEY-----\n");
            for l in body(151, n, 64) {
                text.push_str(&l);
                text.push('\n');
            }
            text
        },
        200_000,
        redact_and_settle,
    );
    let s = settled(&text);
    let out = redact(&text);
    // a block is read no more than 64 KiB from its armour, and nothing further back is held
    assert!(s.held > 0 && s.held <= 64 * 1024 + 65, "{s:?}");
    assert!(out.starts_with(M));
}

#[test]
fn a_key_on_one_line_is_read_back_from_its_end_across_one_cut() {
    let a = b64(160, 60);
    let z = b64(161, 60);
    let text =
        format!("KEY={a}…[… 2,345 characters truncated …]…{z}-----END RSA PRIVATE KEY-----\n");
    check(&text, &format!("KEY={M}\n"));
    // a mixed-case word before the mark is not the key's
    let short = format!(
        "see Docs/Path…[… 2,345 characters truncated …]…{z}-----END RSA PRIVATE KEY-----\n"
    );
    check(
        &short,
        &format!("see Docs/Path…[… 2,345 characters truncated …]…{M}\n"),
    );
}

#[test]
fn mixed_case_paths_directly_above_a_bare_end_are_read_as_its_body() {
    let text = "--- FAIL: x\ninternal/ServiceHandler/RequestProcessor_test.go\n-----END PRIVATE KEY-----\n";
    check(text, &format!("--- FAIL: x\n{M}\n"));
    let lower = "--- FAIL: x\ninternal/service_handler/request_processor_test.go\n-----END PRIVATE KEY-----\n";
    check(lower, lower);
}

/// A key's body holds `pwd` or `pass` in some case as often as not. Such a word inside a block
/// is no key (nothing reads it, and the block is a marker), and the password rule need not
/// read the text again for it; a key's word beside a block on its line is read around it.
#[test]
fn a_password_word_inside_a_keys_body_changes_nothing_around_it() {
    let mut key = String::from("-----BEGIN PRIVATE KEY-----\n");
    for (i, line) in body(7, 900, 64).iter().enumerate() {
        // the body's words as a key's random base64 writes them now and then
        let line = match i {
            2 => format!("{}Pwd{}", &line[..20], &line[23..]),
            5 => format!("{}passWORD{}", &line[..30], &line[38..]),
            _ => line.clone(),
        };
        key.push_str(&line);
        key.push('\n');
    }
    key.push_str("-----END PRIVATE KEY-----\n");
    let input = format!("password: hunter2secret\n{key}PGPASSWORD=s3cr3tvalue psql\n");
    check(
        &input,
        &format!("password: [REDACTED:password]\n{M}\nPGPASSWORD=[REDACTED:password] psql\n"),
    );
    // in a JSON string, with a password's key beside the block on its line
    let escaped = key.replace('\n', "\\n");
    let json = format!("{{\"key\":\"{escaped}\",\"password\":\"hunter2secret\"}}\n");
    check(
        &json,
        &format!("{{\"key\":\"{M}\\n\",\"password\":\"[REDACTED:password]\"}}\n"),
    );
}
