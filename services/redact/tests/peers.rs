//! Redaction measured against the public secret scanners' own test fixtures: their positives
//! must vanish, their negatives must come through untouched.
//!
//! The fixtures are in `tests/peers/*.jsonl`, one sample per line, extracted by the scripts
//! beside them from gitleaks' rules, trufflehog's detector tests, detect-secrets' plugin tests
//! and secretlint's rule snapshots, each at a pinned commit (`tests/peers/README.md`). Each
//! sample names its peer, the peer's rule, and `expect`: a positive's `secrets` are the parts
//! that must be gone from [`redact`]'s output; a negative's text must come out as it went in.
//!
//! `tests/peers/categories.tsv` maps each peer rule to a category (a vendor, or a generic
//! family: keyword-style secrets, passwords, private keys, high-entropy strings), and says
//! which categories boxfleet claims — a row of its vendor table or one of its own rules reads
//! them, named in the file. The goals (issue 46):
//! - claimed categories: every positive redacted; at least 95% of negatives untouched;
//! - every category the peers know: at least 90% of positives, 97% of negatives untouched.
//!
//! `cargo test -p boxfleet-redact --test peers -- --nocapture` prints the report per category
//! (`PEERS_MISSES=1` lists each miss, `PEERS_REPORT=path` writes the report as Markdown).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use boxfleet_redact::redact;

/// One fixture line.
#[derive(Debug, serde::Deserialize)]
struct Sample {
    peer: String,
    path: String,
    rule: String,
    vendor: String,
    case: String,
    text: String,
    secrets: Vec<String>,
    expect: String,
}

/// Where a peer rule's samples are counted.
#[derive(Debug, Clone)]
struct Category {
    name: String,
    /// the boxfleet rule that claims it, when one does
    claimed_by: Option<String>,
}

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

fn samples() -> Vec<Sample> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(peers_dir())
        .expect("tests/peers")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in tests/peers");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a fixture file");
        for (n, line) in text.lines().enumerate() {
            let sample: Sample = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", file.display(), n + 1));
            out.push(sample);
        }
    }
    out
}

/// `peer rule category claimed_by` rows; `-` for a category no boxfleet rule claims.
fn categories() -> BTreeMap<(String, String), Category> {
    let text = std::fs::read_to_string(peers_dir().join("categories.tsv")).expect("categories");
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 4, "categories.tsv:{}: four fields", n + 1);
        let claimed_by = (fields[3] != "-").then(|| fields[3].to_owned());
        out.insert(
            (fields[0].to_owned(), fields[1].to_owned()),
            Category {
                name: fields[2].to_owned(),
                claimed_by,
            },
        );
    }
    out
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    positives: usize,
    caught: usize,
    negatives: usize,
    untouched: usize,
    /// negatives the fixtures themselves dispute, counted apart and never in precision: the
    /// very text is the same peer's positive elsewhere (detect-secrets' keyword tests call one
    /// line a secret in a YAML file and none in a Go file), or the text holds a string some
    /// peer's positive names as its secret (trufflehog's test for one detector holds another
    /// vendor's live-format key as "not this detector's"): masking it is right
    disputed: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.positives += other.positives;
        self.caught += other.caught;
        self.negatives += other.negatives;
        self.untouched += other.untouched;
        self.disputed += other.disputed;
    }
    fn recall(&self) -> f64 {
        ratio(self.caught, self.positives)
    }
    fn precision(&self) -> f64 {
        ratio(self.untouched, self.negatives)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// A sample's outcome: whether it went as its peer expects, and the output.
fn judge(sample: &Sample) -> (bool, String) {
    let out = redact(&sample.text);
    let ok = match sample.expect.as_str() {
        "positive" => sample
            .secrets
            .iter()
            .all(|secret| !out.contains(secret.as_str())),
        "negative" => out == sample.text,
        other => panic!("{}: expect {other:?}", sample.path),
    };
    (ok, out)
}

struct Report {
    by_category: BTreeMap<String, (Option<String>, Tally)>,
    /// the negatives masked, by the first marker their output holds: (in claimed
    /// categories, in all)
    masked_by: BTreeMap<String, (usize, usize)>,
    claimed: Tally,
    all: Tally,
    misses: Vec<String>,
}

fn measure() -> Report {
    let categories = categories();
    let mut by_category: BTreeMap<String, (Option<String>, Tally)> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut masked_by: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let samples = samples();
    let positive_texts: std::collections::HashSet<(&str, &str)> = samples
        .iter()
        .filter(|s| s.expect == "positive")
        .map(|s| (s.peer.as_str(), s.text.as_str()))
        .collect();
    // the secrets every positive names, long enough to be no common word
    let named_secrets: Vec<&str> = {
        let mut all: Vec<&str> = samples
            .iter()
            .filter(|s| s.expect == "positive")
            .flat_map(|s| s.secrets.iter().map(String::as_str))
            .filter(|secret| secret.len() >= 12)
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let holds_a_named_secret =
        |text: &str| named_secrets.iter().any(|secret| text.contains(secret));
    for sample in &samples {
        let category = categories
            .get(&(sample.peer.clone(), sample.rule.clone()))
            .cloned()
            .unwrap_or_else(|| Category {
                name: sample.vendor.clone(),
                claimed_by: None,
            });
        let entry = by_category
            .entry(category.name.clone())
            .or_insert((category.claimed_by.clone(), Tally::default()));
        if sample.expect == "negative"
            && (positive_texts.contains(&(sample.peer.as_str(), sample.text.as_str()))
                || holds_a_named_secret(&sample.text))
        {
            entry.1.disputed += 1;
            continue;
        }
        let (ok, out) = judge(sample);
        let mut tally = Tally::default();
        if sample.expect == "positive" {
            tally.positives = 1;
            tally.caught = usize::from(ok);
        } else {
            tally.negatives = 1;
            tally.untouched = usize::from(ok);
        }
        if !ok && sample.expect == "negative" {
            let marker = out
                .split("[REDACTED:")
                .nth(1)
                .and_then(|rest| rest.split(']').next())
                .unwrap_or("(changed, no marker)")
                .to_owned();
            let entry = masked_by.entry(marker).or_default();
            entry.0 += usize::from(category.claimed_by.is_some());
            entry.1 += 1;
        }
        if !ok {
            misses.push(format!(
                "{} {} [{}] {} {}#{}\n  in:  {:?}\n  out: {:?}",
                category.name,
                sample.expect,
                sample.peer,
                sample.rule,
                sample.path,
                sample.case,
                sample.text,
                out
            ));
        }
        by_category
            .get_mut(&category.name)
            .expect("entered above")
            .1
            .add(tally);
    }
    let mut claimed = Tally::default();
    let mut all = Tally::default();
    for (claimed_by, tally) in by_category.values() {
        if claimed_by.is_some() {
            claimed.add(*tally);
        }
        all.add(*tally);
    }
    Report {
        by_category,
        masked_by,
        claimed,
        all,
        misses,
    }
}

fn markdown(report: &Report) -> String {
    let mut out = String::new();
    let line = |name: &str, t: &Tally| {
        format!(
            "| {name} | {}/{} ({:.1}%) | {}/{} ({:.1}%) |",
            t.caught,
            t.positives,
            100.0 * t.recall(),
            t.untouched,
            t.negatives,
            100.0 * t.precision()
        )
    };
    out.push_str("| category | positives redacted | negatives untouched |\n|---|---|---|\n");
    out.push_str(&line("**claimed categories**", &report.claimed));
    out.push('\n');
    out.push_str(&line("**every category the peers know**", &report.all));
    out.push('\n');
    let _ = writeln!(
        out,
        "| disputed negatives (a positive elsewhere, or holding a positive's secret), not counted | | {} |",
        report.all.disputed
    );
    out.push_str(
        "\n| negatives masked, by the marker that masked them | in claimed categories | in all |\n|---|---|---|\n",
    );
    let mut masked: Vec<_> = report.masked_by.iter().collect();
    masked.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
    for (marker, (claimed, all)) in masked {
        let _ = writeln!(out, "| `{marker}` | {claimed} | {all} |");
    }
    out.push_str("\n| category | positives redacted | negatives untouched |\n|---|---|---|\n");
    for (name, (claimed_by, tally)) in &report.by_category {
        let label = match claimed_by {
            Some(rule) => format!("{name} (claimed: {rule})"),
            None => name.clone(),
        };
        out.push_str(&line(&label, tally));
        out.push('\n');
    }
    out
}

/// Claimed recall, claimed precision, all recall, all precision, as last measured (rounded
/// down): a change that lowers one fails.
const FLOORS: [f64; 4] = [0.955, 0.845, 0.925, 0.885];

#[test]
fn the_peers_fixtures_are_redacted_and_their_negatives_left_alone() {
    let report = measure();
    let text = markdown(&report);
    println!("{text}");
    if let Ok(path) = std::env::var("PEERS_REPORT") {
        std::fs::write(&path, &text).expect("the report");
    }
    if std::env::var_os("PEERS_MISSES").is_some() {
        for miss in &report.misses {
            println!("{miss}");
        }
    }
    // issue 46's goals, printed; what is asserted is the floor measured when this test came
    // in, so the figures only move up (raise FLOORS as they do)
    let (claimed, all) = (&report.claimed, &report.all);
    println!(
        "goals: claimed recall {:.1}% (goal 100%), claimed precision {:.1}% (goal 95%), \
         all recall {:.1}% (goal 90%), all precision {:.1}% (goal 97%)",
        100.0 * claimed.recall(),
        100.0 * claimed.precision(),
        100.0 * all.recall(),
        100.0 * all.precision()
    );
    let mut failures = String::new();
    for (what, figure, floor) in [
        ("claimed categories' recall", claimed.recall(), FLOORS[0]),
        (
            "claimed categories' precision",
            claimed.precision(),
            FLOORS[1],
        ),
        ("every category's recall", all.recall(), FLOORS[2]),
        ("every category's precision", all.precision(), FLOORS[3]),
    ] {
        if figure < floor {
            let _ = writeln!(
                failures,
                "{what}: {:.1}%, below its floor {:.1}%",
                100.0 * figure,
                100.0 * floor
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{failures}(run with PEERS_MISSES=1 -- --nocapture to list each miss)"
    );
}

#[test]
fn every_claimed_category_names_a_rule_boxfleet_has() {
    let kinds: Vec<&str> = boxfleet_redact::rules().iter().map(|r| r.kind).collect();
    for ((peer, rule), category) in categories() {
        let Some(claimed_by) = category.claimed_by else {
            continue;
        };
        let known = claimed_by
            .split(',')
            .all(|kind| kinds.contains(&kind) || boxfleet_redact::OWN_RULES.contains(&kind));
        assert!(
            known,
            "categories.tsv: {peer} {rule} is claimed by {claimed_by:?}, which names no rule \
             boxfleet has (a vendor row's kind, or one of {:?})",
            boxfleet_redact::OWN_RULES
        );
    }
}
