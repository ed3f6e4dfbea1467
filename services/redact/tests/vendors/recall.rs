//! The corpus: every vendor row's positive, and the shapes the token rule, the password rule,
//! the context rule and the key rule read, each placed in the documents a box writes — an
//! `env` dump, a CI log, a JSON log, a compose file's YAML, a shell trace, a diff — among
//! clean lines. It prints its recall (secrets gone whole, per document) and how many clean
//! lines came through untouched: `cargo test -p boxfleet-redact --test vendors recall --
//! --nocapture` (the README's test command runs it so).

use boxfleet_redact::redact;

use super::{Gen, samples};

/// A document: its clean lines, with `{NAME}` and `{SECRET}` placed on one of them.
struct Document {
    name: &'static str,
    /// the template; the line holding `{SECRET}` is the secret's, every other line is clean
    template: &'static str,
}

const DOCUMENTS: &[Document] = &[
    Document {
        name: "env dump",
        template: "HOME=/root\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin\n\
                   PWD=/work/project\nOLDPWD=/tmp\nLANG=C.UTF-8\n{NAME}={SECRET}\nSHLVL=1\n\
                   _=/usr/bin/env\n",
    },
    Document {
        name: "CI log",
        template: "2026-12-04T07:00:00.1234567Z ##[group]Run ./deploy.sh --stage staging\n\
                   2026-12-04T07:00:00.1234568Z shell: /usr/bin/bash -e {0}\n\
                   2026-12-04T07:00:00.1234569Z env:\n\
                   2026-12-04T07:00:00.1234570Z   {NAME}: {SECRET}\n\
                   2026-12-04T07:00:00.1234571Z ##[endgroup]\n\
                   2026-12-04T07:00:01.0000000Z deploying build 4812 to staging\n\
                   2026-12-04T07:00:09.5000000Z done in 8.5s\n",
    },
    Document {
        name: "JSON log",
        template: "{\"ts\":\"2026-12-04T07:00:00Z\",\"level\":\"info\",\"msg\":\"starting\",\"pid\":4121}\n\
                   {\"ts\":\"2026-12-04T07:00:00Z\",\"level\":\"debug\",\"msg\":\"config\",\"{NAME}\":\"{SECRET}\",\"retries\":3}\n\
                   {\"ts\":\"2026-12-04T07:00:01Z\",\"level\":\"info\",\"msg\":\"listening\",\"addr\":\"0.0.0.0:8080\"}\n",
    },
    Document {
        name: "compose YAML",
        template: "services:\n  api:\n    image: registry.example.com/api:1.4.2\n    environment:\n\
                   \x20     LOG_LEVEL: info\n      {NAME}: \"{SECRET}\"\n    ports:\n      - \"8080:8080\"\n",
    },
    Document {
        name: "shell trace",
        template: "+ set -euo pipefail\n+ cd /srv/app\n+ export {NAME}={SECRET}\n\
                   + ./bin/migrate --to latest\nmigrated 3 tables in 0.41s\n+ echo done\ndone\n",
    },
    Document {
        name: "diff",
        template: "diff --git a/config/settings.py b/config/settings.py\nindex 3b18e51..a1c2f0d 100644\n\
                   --- a/config/settings.py\n+++ b/config/settings.py\n@@ -12,6 +12,7 @@ DEBUG = False\n\
                   \x20ALLOWED_HOSTS = [\"*\"]\n+{NAME} = \"{SECRET}\"\n TIME_ZONE = \"UTC\"\n",
    },
];

/// A secret to place: its family, the name it is assigned to, the text placed, and the part of
/// it that must be gone.
struct Placed {
    family: &'static str,
    name: String,
    text: String,
    secret: String,
}

/// The secrets no vendor row reads: the token rule's shapes, a password, a secret-named key's
/// random value, a URL's credentials.
fn other_secrets(g: &mut Gen) -> Vec<Placed> {
    let github_body = g.crc32_body();
    let neutral = |family, text: String| Placed {
        family,
        name: "SERVICE_SETTING".to_owned(),
        secret: text.clone(),
        text,
    };
    let mut out = vec![
        neutral("token rule", format!("sk-ant-api03-{}AA", g.b64url(93))),
        neutral("token rule", format!("sk-proj-{}", g.alnum(48))),
        neutral("token rule", format!("ghp_{github_body}")),
        neutral(
            "token rule",
            format!("github_pat_11{}_{}", g.alnum(20), g.alnum(59)),
        ),
        neutral("token rule", format!("glpat-{}", g.b64url(20))),
        neutral(
            "token rule",
            format!("xoxb-{}-{}-{}", g.digits(12), g.digits(13), g.alnum(24)),
        ),
        neutral("token rule", format!("AKIA{}", g.upper(16))),
        neutral("token rule", format!("AIza{}", g.b64url(35))),
        neutral("token rule", format!("sk_live_{}", g.alnum(24))),
        neutral(
            "token rule",
            format!(
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOi{}.{}",
                g.b64url(20),
                g.b64url(43)
            ),
        ),
        neutral(
            "url credentials",
            format!("postgres://app:{}@db.internal:5432/app", g.alnum(16)),
        ),
    ];
    // the url's password is the secret, the rest of it stays
    if let Some(url) = out.last_mut() {
        let password =
            url.text["postgres://app:".len()..url.text.find('@').unwrap_or(0)].to_owned();
        url.secret = password;
    }
    let password = format!("{}x9!", g.alnum(12));
    out.push(Placed {
        family: "password rule",
        name: "DB_PASSWORD".to_owned(),
        text: password.clone(),
        secret: password,
    });
    let random = format!("{}{}", g.alnum(24), g.digits(4));
    out.push(Placed {
        family: "context rule",
        name: "PAYMENTS_API_KEY".to_owned(),
        text: random.clone(),
        secret: random,
    });
    out
}

#[test]
fn recall_in_realistic_wrappings() {
    let mut g = Gen(0xC0_4905);
    let mut placed: Vec<Placed> = samples()
        .map(|sample| {
            let positive = (sample.positive)(&mut g);
            Placed {
                family: "vendor rows",
                name: "SERVICE_SETTING".to_owned(),
                text: positive.text,
                secret: positive.secret,
            }
        })
        .collect();
    placed.extend(other_secrets(&mut g));

    let (mut found, mut total) = (0usize, 0usize);
    let (mut kept, mut clean) = (0usize, 0usize);
    let mut misses = Vec::new();
    let mut per_document = Vec::new();
    for document in DOCUMENTS {
        let (mut doc_found, mut doc_total) = (0, 0);
        for secret in &placed {
            let text = document
                .template
                .replace("{NAME}", &secret.name)
                .replace("{SECRET}", &secret.text);
            let out = redact(&text);
            total += 1;
            doc_total += 1;
            if out.contains(&secret.secret) {
                misses.push(format!(
                    "{} / {}: {:?}",
                    document.name, secret.family, secret.text
                ));
            } else {
                found += 1;
                doc_found += 1;
            }
            for line in document
                .template
                .lines()
                .filter(|l| !l.contains("{SECRET}"))
            {
                clean += 1;
                if out.lines().any(|o| o == line) {
                    kept += 1;
                } else {
                    misses.push(format!("{}: clean line {line:?} changed", document.name));
                }
            }
        }
        per_document.push((document.name, doc_found, doc_total));
    }
    let families = [
        "vendor rows",
        "token rule",
        "url credentials",
        "password rule",
        "context rule",
    ];
    println!(
        "redaction corpus: {} secrets ({}) in {} documents",
        placed.len(),
        families
            .iter()
            .map(|f| format!("{} {f}", placed.iter().filter(|p| p.family == *f).count()))
            .collect::<Vec<_>>()
            .join(", "),
        DOCUMENTS.len()
    );
    for (name, doc_found, doc_total) in &per_document {
        println!("  {name:<14} recall {doc_found}/{doc_total}");
    }
    println!(
        "recall {found}/{total} ({:.2}%); clean lines untouched {kept}/{clean} ({:.2}%)",
        100.0 * found as f64 / total as f64,
        100.0 * kept as f64 / clean as f64
    );
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
