//! The corpus: realistic logs (cargo and go test output, diffs, JSON logs, shell traces,
//! certificates) that must come through untouched, and the same logs with secrets placed in
//! them under many wrappings, which must come out with no piece of a secret left and every
//! clean line around it as it was.

mod support;

use boxfleet_redact::{Stream, redact, settled};

const CLEAN: &[(&str, &str)] = &[
    ("cargo_test", include_str!("corpus/clean/cargo_test.txt")),
    ("go_test_v", include_str!("corpus/clean/go_test_v.txt")),
    ("diff", include_str!("corpus/clean/diff.txt")),
    ("json_log", include_str!("corpus/clean/json_log.txt")),
    ("shell_trace", include_str!("corpus/clean/shell_trace.txt")),
    ("certificate", include_str!("corpus/clean/certificate.txt")),
];

/// A paragraph no rule reads: it ends any key's block and any password's value.
const BREAK: &str =
    "the build continues here\nand nothing in this paragraph is secret\nso it stays as written\n";

#[test]
fn clean_logs_come_through_untouched() {
    for (name, text) in CLEAN {
        assert_eq!(redact(text), *text, "{name} was changed");
    }
}

#[test]
fn clean_logs_streamed_line_by_line_come_through_untouched() {
    for (name, text) in CLEAN {
        let mut stream = Stream::new();
        let mut shown = String::new();
        for line in text.split_inclusive('\n') {
            shown.push_str(&stream.push(line));
        }
        shown.push_str(&stream.finish());
        assert_eq!(shown, *text, "{name} was changed when streamed");
        assert!(settled(text).held <= text.len());
    }
}

/// A secret and the pieces of it that must not survive.
struct Secret {
    name: &'static str,
    text: String,
    /// substrings that must not appear in the redacted output
    material: Vec<String>,
}

fn secrets() -> Vec<Secret> {
    let body: Vec<String> = (0..6).map(|i| support::base64_line(1000 + i, 64)).collect();
    let mut pem = String::from("-----BEGIN RSA PRIVATE KEY-----\n");
    for line in &body {
        pem.push_str(line);
        pem.push('\n');
    }
    pem.push_str("q3O4OuZx9k==\n-----END RSA PRIVATE KEY-----\n");
    let key_material: Vec<String> = body.iter().map(|l| l[8..40].to_owned()).collect();
    let openssh_body: Vec<String> = (0..4).map(|i| support::base64_line(2000 + i, 70)).collect();
    let mut openssh = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for line in &openssh_body {
        openssh.push_str(line);
        openssh.push('\n');
    }
    openssh.push_str("-----END OPENSSH PRIVATE KEY-----\n");
    let token = |name, text: &str, material: &str| Secret {
        name,
        text: format!("{text}\n"),
        material: vec![material.to_owned()],
    };
    vec![
        Secret {
            name: "pem",
            text: pem,
            material: key_material.clone(),
        },
        Secret {
            name: "openssh",
            text: openssh,
            material: openssh_body.iter().map(|l| l[10..40].to_owned()).collect(),
        },
        token(
            "github",
            "export GITHUB_TOKEN=ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
            "aB3dE5fG7hI9jK1lM3nO5pQ7",
        ),
        token(
            "anthropic",
            "ANTHROPIC_API_KEY=sk-ant-api03-Zq8xW2vB6nM4kL0pR7tY3uI9oE5aS1dF-gH_jK2",
            "Zq8xW2vB6nM4kL0pR7tY3uI9",
        ),
        token(
            "aws",
            "aws_access_key_id = AKIAQ3EGXMPLE7Z2K4WD",
            "Q3EGXMPLE7Z2K4WD",
        ),
        token(
            "url",
            "+ git clone https://deploy:Tr0ub4dor-and-3@git.example.com/team/repo.git",
            "Tr0ub4dor-and-3",
        ),
        token(
            "bearer",
            "+ curl -sH 'Authorization: Bearer 9f8E7d6C5b4A3z2Y1x0Wv9U8t7' https://api.example.com",
            "9f8E7d6C5b4A3z2Y1x0Wv9U8t7",
        ),
        token(
            "password",
            "DB_PASSWORD=hunter2-and-more!",
            "hunter2-and-more!",
        ),
        token(
            "json_password",
            r#"{"level":"debug","config":{"db_password":"c0rrect-h0rse"}}"#,
            "c0rrect-h0rse",
        ),
    ]
}

/// The wrappings a secret reaches a transcript in: each line of it under a gutter, or the
/// whole of it written as one JSON string.
/// A wrapping's name and what it does to a text.
type Wrapping = (&'static str, fn(&str) -> String);

fn wrappings() -> Vec<Wrapping> {
    fn each_line(text: &str, gutter: impl Fn(usize) -> String) -> String {
        text.lines()
            .enumerate()
            .map(|(i, line)| format!("{}{line}\n", gutter(i)))
            .collect()
    }
    vec![
        ("as written", |t: &str| t.to_owned()),
        ("line numbers", |t: &str| {
            each_line(t, |i| format!("{:>6}\t", i + 120))
        }),
        ("diff +", |t: &str| each_line(t, |_| "+".to_owned())),
        ("grep prefix", |t: &str| {
            each_line(t, |i| format!("deploy/key.pem:{}:", i + 3))
        }),
        ("timestamps", |t: &str| {
            each_line(t, |i| {
                format!("2026-11-29T09:41:{:02}.{}Z ", i, 100 + i * 7)
            })
        }),
        ("json string", |t: &str| {
            let escaped = t
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{{\"level\":\"info\",\"output\":\"{escaped}\"}}\n")
        }),
    ]
}

#[test]
fn secrets_in_every_wrapping_leave_no_piece_and_spare_the_clean_text_around_them() {
    let mut failures = Vec::new();
    for (log_name, log) in CLEAN {
        for secret in secrets() {
            for (wrapping, wrap) in wrappings() {
                let before = format!("{log}{BREAK}");
                let after = format!("{BREAK}{log}");
                let text = format!("{before}{}{after}", wrap(&secret.text));
                let out = redact(&text);
                let label = format!("{} in {log_name}, {wrapping}", secret.name);
                for piece in &secret.material {
                    if out.contains(piece.as_str()) {
                        failures.push(format!("{label}: {piece:?} survived"));
                    }
                }
                if !out.starts_with(&before) || !out.ends_with(&after) {
                    failures.push(format!("{label}: the clean text around it changed"));
                }
                if !out.contains("[REDACTED:") {
                    failures.push(format!("{label}: no marker"));
                }
                if redact(&out) != out {
                    failures.push(format!("{label}: a second pass changed it"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
