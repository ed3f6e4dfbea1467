//! Markers per MB on a clean corpus: every text file under the given paths (gzip'd man pages
//! and docs are read through `zcat`), redacted whole, its markers counted by kind, and a
//! sample of the lines they fell on printed for classifying by hand.
//!
//! ```text
//! cargo run --release -p boxfleet-redact --example false_markers -- \
//!     [--ext rs] [--sample 40] [--max-mb 60] [--fail-above 0.5] PATH...
//! ```
//!
//! With `--fail-above`, it exits 1 when the corpus has more markers per MB than that (the
//! README's test command runs it so on the crate sources it built from).
//!
//! A clean corpus is one with no live secret in it: the crate sources under
//! `~/.cargo/registry/src`, Debian's `/usr/share/doc`, the man pages. Every marker found there is
//! a candidate false marker (a test fixture's fake key is a true one, which the sample shows).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use boxfleet_redact::redact;

struct Args {
    ext: Option<String>,
    sample: usize,
    max_bytes: usize,
    fail_above: Option<f64>,
    paths: Vec<PathBuf>,
}

fn args() -> Args {
    let mut args = Args {
        ext: None,
        sample: 40,
        max_bytes: 60 << 20,
        fail_above: None,
        paths: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--ext" => args.ext = it.next(),
            "--sample" => args.sample = it.next().and_then(|n| n.parse().ok()).unwrap_or(40),
            "--max-mb" => {
                args.max_bytes = it.next().and_then(|n| n.parse().ok()).unwrap_or(60) << 20
            }
            "--fail-above" => args.fail_above = it.next().and_then(|n| n.parse().ok()),
            _ => args.paths.push(PathBuf::from(arg)),
        }
    }
    if args.paths.is_empty() {
        eprintln!(
            "usage: false_markers [--ext EXT] [--sample N] [--max-mb MB] [--fail-above PER_MB] PATH..."
        );
        std::process::exit(2);
    }
    args
}

/// Every file under `path`, in a stable order.
fn walk(path: &Path, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for entry in entries {
            walk(&entry, out);
        }
    } else if meta.is_file() {
        out.push(path.to_owned());
    }
}

/// The file's text: read as UTF-8, through `zcat` when gzip'd; None for binary or non-UTF-8.
fn text_of(path: &Path) -> Option<String> {
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        Command::new("zcat").arg(path).output().ok()?.stdout
    } else {
        std::fs::read(path).ok()?
    };
    if bytes.len() > 4 << 20 || memchr::memchr(0, &bytes).is_some() {
        return None;
    }
    String::from_utf8(bytes).ok()
}

fn main() {
    let args = args();
    let mut files = Vec::new();
    for path in &args.paths {
        walk(path, &mut files);
    }
    if let Some(ext) = &args.ext {
        files.retain(|f| f.extension().is_some_and(|e| e == ext.as_str()));
    }
    let (mut bytes, mut read_files) = (0usize, 0usize);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut hits: Vec<(PathBuf, String)> = Vec::new();
    for file in &files {
        if bytes >= args.max_bytes {
            break;
        }
        let Some(text) = text_of(file) else {
            continue;
        };
        bytes += text.len();
        read_files += 1;
        let out = redact(&text);
        if out == text {
            continue;
        }
        // the original line beside its redaction, when the lines still correspond
        let originals: Vec<&str> = text.lines().collect();
        let same_lines = originals.len() == out.lines().count();
        for (index, line) in out.lines().enumerate() {
            if !line.contains("[REDACTED:") {
                continue;
            }
            for piece in line.split("[REDACTED:").skip(1) {
                let kind = piece.split(']').next().unwrap_or("").to_owned();
                *kinds.entry(kind).or_default() += 1;
            }
            let original = if same_lines { originals[index] } else { line };
            let shown: String = original.trim().chars().take(160).collect();
            hits.push((file.clone(), shown));
        }
    }
    let markers: usize = kinds.values().sum();
    let mb = bytes as f64 / 1e6;
    let per_mb = markers as f64 / mb.max(1e-9);
    println!("{read_files} files, {mb:.1} MB, {markers} markers, {per_mb:.3} markers per MB");
    for (kind, n) in &kinds {
        println!("  {kind:<32} {n}");
    }
    // an even spread over the hits, so one noisy file does not fill the sample
    let step = (hits.len() / args.sample.max(1)).max(1);
    println!(
        "\nsample ({} of {} lines):",
        hits.len().min(args.sample),
        hits.len()
    );
    for (file, line) in hits.iter().step_by(step).take(args.sample) {
        let short = file.components().rev().take(3).collect::<Vec<_>>();
        let short: PathBuf = short.into_iter().rev().collect();
        println!("{:<60} {}", short.display(), line);
    }
    if let Some(limit) = args.fail_above {
        if per_mb > limit {
            eprintln!("{per_mb:.3} markers per MB is above the limit of {limit}");
            std::process::exit(1);
        }
        println!("at most {limit} markers per MB: met");
    }
}
