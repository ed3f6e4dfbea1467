//! `boxfleet token` and `boxfleet keyring`: credentials minted, and keyring files made, rotated
//! and retired, on this machine from the keyring file — no node is asked. A node reads its
//! keyring at start: after a rotation or a retirement, restart the fleet's nodes (one at a
//! time) so each verifies with the new ring.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use boxfleet_auth::{Keyring, Role};

use crate::cli::{KeyringCommand, TokenIssueArgs};

/// The keyring a node started here with its default data dir made.
const DEFAULT_KEYRING: &str = ".boxfleet/keyring.json";

/// `boxfleet token issue`: prints the credential.
pub fn issue(args: &TokenIssueArgs) -> anyhow::Result<i32> {
    let path = args
        .keyring
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_KEYRING));
    let ring = load(&path)?;
    let role = Role::parse(&args.role).context("--role")?;
    let ttl = parse_ttl(&args.ttl)?;
    for seat in &args.seats {
        if let Some(problem) = boxfleet_cluster::keys::id_problem(seat) {
            bail!("--seats: {seat:?} is not a seat: {problem}");
        }
    }
    if args.subject.trim().is_empty() {
        bail!("--subject: say who the credential is for");
    }
    let token = ring.issue(&args.subject, role, &args.seats, ttl, chrono::Utc::now());
    println!("{token}");
    eprintln!(
        "a {role} credential for {} ({}), valid {}, signed by key {}",
        args.subject,
        if args.seats.is_empty() {
            "every seat".to_owned()
        } else {
            format!("seats {}", args.seats.join(", "))
        },
        args.ttl,
        ring.signing_key()
    );
    Ok(0)
}

/// `boxfleet keyring …`.
pub fn keyring(command: &KeyringCommand) -> anyhow::Result<i32> {
    match command {
        KeyringCommand::New { file } => {
            if file.exists() {
                bail!(
                    "{} exists: a keyring is made once (rotate it with `boxfleet keyring rotate`)",
                    file.display()
                );
            }
            let ring = Keyring::generate(chrono::Utc::now());
            ring.save(file)?;
            println!("made {} with key {}", file.display(), ring.signing_key());
        }
        KeyringCommand::Rotate { file } => {
            let mut ring = load(file)?;
            let id = ring.rotate(chrono::Utc::now());
            ring.save(file)?;
            println!(
                "key {id} signs new credentials from now on; the others still verify until retired. Restart the fleet's nodes to pick it up"
            );
        }
        KeyringCommand::Retire { file, key } => {
            let mut ring = load(file)?;
            ring.retire(key)?;
            ring.save(file)?;
            println!(
                "key {key} is retired: what it signed is refused once each node restarts with this keyring"
            );
        }
        KeyringCommand::Secret => println!("{}", boxfleet_auth::keyring::fresh_secret_text()),
        KeyringCommand::List { file } => {
            let ring = load(file)?;
            for key in ring.keys() {
                let mark = if key.id == ring.signing_key() {
                    "signs"
                } else if key.retired {
                    "retired"
                } else {
                    "verifies"
                };
                println!("{}  {mark}", key.id);
            }
        }
    }
    Ok(0)
}

fn load(path: &Path) -> anyhow::Result<Keyring> {
    if !path.exists() {
        bail!(
            "no keyring at {}: pass --keyring FILE, or run this where a node's data dir is (./.boxfleet)",
            path.display()
        );
    }
    Ok(Keyring::load(path)?)
}

/// `90`, `90s`, `90m`, `12h`, `30d`.
fn parse_ttl(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .with_context(|| format!("--ttl {text:?}: write seconds, or 90m, 12h, 30d"))?;
    let seconds = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => bail!("--ttl {text:?}: the unit is s, m, h or d"),
    };
    if seconds == 0 {
        bail!("--ttl: a credential must be valid for some time");
    }
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_reads_seconds_or_a_unit() {
        assert_eq!(parse_ttl("90").expect("s"), Duration::from_secs(90));
        assert_eq!(parse_ttl("90m").expect("m"), Duration::from_secs(5400));
        assert_eq!(
            parse_ttl("30d").expect("d"),
            Duration::from_secs(30 * 86_400)
        );
        assert!(parse_ttl("0").is_err());
        assert!(parse_ttl("5w").is_err());
        assert!(parse_ttl("soon").is_err());
    }
}
