//! A coding CLI's login, seeded into a local box and written back (the spec's "Credentials"
//! under "Local sandboxes"). When a seat's code work runs on a cli-agent entry — a CLI signed
//! in on the engine host — the box gets a copy of the CLI's credential files before the run,
//! and a file the run refreshed goes back afterwards: OAuth access tokens expire in hours and
//! most vendors rotate the refresh token with them, so discarding the rewritten file would log
//! the fleet out at the next expiry.
//!
//! The write-back is a compare-and-swap against what the box was seeded with, recorded as a
//! SHA-256 of the bytes it was given: a file goes back only where the box's copy differs from
//! its seed (the run refreshed it) and the shared login still holds that seed. An idle box
//! writes nothing; a box whose run refreshed while the shared login also moved keeps the
//! shared one, the newer of the two (`local_sandbox_credential_superseded`, `shared=changed`);
//! a credential the shared directory did not hold at seeding is never created from a box, and
//! one removed since (a logout) is not put back (`shared=removed`). The comparison and the
//! write are one step under the shared directory's lock file, which a write-back waits for at
//! most [`LOCK_WAIT`]. No value is ever logged or put in an error: files are named by path.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::ports::{BoxError, Sandbox};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a write-back waits for another writer holding the shared directory's lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);
/// The largest credential file seeded; a login is a few kilobytes.
const MAX_CREDENTIAL_BYTES: u64 = 1024 * 1024;

/// One file seeded into a box.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seeded {
    /// the shared file on the engine host
    pub shared: PathBuf,
    /// where the box has its copy (a path under its home)
    pub in_box: String,
    /// SHA-256 (hex) of the bytes the box was given
    pub sha256: String,
}

/// What a write-back did with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteBack {
    /// the box's copy is its seed: the run refreshed nothing
    Idle,
    /// the box's copy is gone or unreadable as a file; nothing to give back
    Missing,
    /// the refreshed copy replaced the shared one
    Written,
    /// the shared login moved since seeding; it is kept (`shared=changed`)
    SharedChanged,
    /// the shared login was removed since seeding; the refresh is dropped (`shared=removed`)
    SharedRemoved,
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Reads a shared credential file: `None` when there is none. Links are not followed.
fn read_shared(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CREDENTIAL_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CREDENTIAL_BYTES {
        return Err(io::Error::other(format!(
            "{} is over {MAX_CREDENTIAL_BYTES} bytes",
            path.display()
        )));
    }
    Ok(Some(bytes))
}

/// Copies each of `names` from the shared directory into the box under `box_dir` (a path
/// under its home, e.g. `~/.claude`), recording each seed. A name the shared directory does
/// not hold is not seeded, and so is never written back.
pub async fn seed(
    sandbox: &dyn Sandbox,
    shared_dir: &Path,
    names: &[&str],
    box_dir: &str,
) -> Result<Vec<Seeded>, BoxError> {
    let mut seeded = Vec::new();
    for name in names {
        let shared = shared_dir.join(name);
        let read = shared.clone();
        let bytes = tokio::task::spawn_blocking(move || read_shared(&read))
            .await
            .map_err(|e| BoxError::Failed(format!("seeding a credential: {e}")))?
            .map_err(|e| {
                BoxError::Failed(format!(
                    "cannot read the shared credential {}: {e}",
                    shared.display()
                ))
            })?;
        let Some(bytes) = bytes else {
            continue;
        };
        let in_box = format!("{}/{name}", box_dir.trim_end_matches('/'));
        sandbox.write_file(&in_box, &bytes).await?;
        seeded.push(Seeded {
            shared,
            in_box,
            sha256: sha256(&bytes),
        });
    }
    if !seeded.is_empty() {
        let record = serde_json::to_vec_pretty(&seeded)
            .map_err(|e| BoxError::Failed(format!("recording the seeded login: {e}")))?;
        sandbox.keep_login_record(&record).await?;
    }
    Ok(seeded)
}

/// Holds `lock` (an exclusive lock on the file) for as long as it lives.
struct Held(File);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn hold(lock: &Path, wait: Duration) -> io::Result<Held> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(lock)?;
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Held(file)),
            Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} stayed locked for {wait:?}", lock.display()),
                ));
            }
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// The compare and the write, as one step under the lock.
fn swap(seed: &Seeded, refreshed: &[u8], lock: &Path, wait: Duration) -> io::Result<WriteBack> {
    let _held = hold(lock, wait)?;
    let Some(shared) = read_shared(&seed.shared)? else {
        return Ok(WriteBack::SharedRemoved);
    };
    if sha256(&shared) != seed.sha256 {
        return Ok(WriteBack::SharedChanged);
    }
    let dir = seed.shared.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.boxfleet-tmp",
        seed.shared
            .file_name()
            .map_or_else(|| "credential".into(), |n| n.to_string_lossy())
    ));
    {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        io::Write::write_all(&mut file, refreshed)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, &seed.shared)?;
    Ok(WriteBack::Written)
}

/// Gives back what the run refreshed, file by file, under `lock` (waiting at most `wait` for
/// another writer). Each outcome is returned with its file — a file written back with its seed
/// moved to what was written, which the box and the shared login now both hold; a file whose
/// write-back failed is an error naming it, never a value.
pub async fn write_back(
    sandbox: &dyn Sandbox,
    seeded: &[Seeded],
    lock: &Path,
    wait: Duration,
) -> Vec<(Seeded, Result<WriteBack, String>)> {
    let mut outcomes = Vec::new();
    for seed in seeded {
        let outcome = match sandbox.read_file(&seed.in_box).await {
            Err(error) => Err(format!(
                "the box's copy {} could not be read: {error}",
                seed.in_box
            )),
            Ok(None) => Ok(WriteBack::Missing),
            Ok(Some(bytes)) if sha256(&bytes) == seed.sha256 => Ok(WriteBack::Idle),
            Ok(Some(bytes)) => {
                let written = sha256(&bytes);
                let (swapped, lock) = (seed.clone(), lock.to_owned());
                let shown = seed.shared.display().to_string();
                let outcome =
                    tokio::task::spawn_blocking(move || swap(&swapped, &bytes, &lock, wait))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.map_err(|e| format!("writing back {shown}: {e}")));
                if outcome == Ok(WriteBack::Written) {
                    outcomes.push((
                        Seeded {
                            sha256: written,
                            ..seed.clone()
                        },
                        outcome,
                    ));
                    continue;
                }
                outcome
            }
        };
        outcomes.push((seed.clone(), outcome));
    }
    outcomes
}

/// Gives back what a run refreshed of the login seeded into `sandbox`, as its login record
/// says ([`Sandbox::login_record`]): every teardown calls it — a collection before the box is
/// paused, a kill, the orphan reaper — so a login refreshed by a run that was abandoned still
/// goes back. Each file is logged by its path, never its value. A file written back becomes the
/// record's new seed, so a later teardown of the same box finds it idle rather than
/// superseded. An unusable record is logged (`local_sandbox_credential_map_unreadable`) and
/// costs only this write-back.
pub async fn give_back(sandbox: &dyn Sandbox) {
    let sandbox_id = sandbox.id();
    let seeded: Vec<Seeded> = match sandbox.login_record().await {
        Ok(None) => return,
        Ok(Some(bytes)) => match serde_json::from_slice(&bytes) {
            Ok(seeded) => seeded,
            Err(error) => {
                tracing::warn!(sandbox_id, %error, "local_sandbox_credential_map_unreadable");
                return;
            }
        },
        Err(error) => {
            tracing::warn!(sandbox_id, %error, "local_sandbox_credential_map_unreadable");
            return;
        }
    };
    let Some(dir) = seeded.first().and_then(|s| s.shared.parent()) else {
        return;
    };
    let lock = lock_beside(dir);
    let mut kept = Vec::with_capacity(seeded.len());
    let mut moved = false;
    for (seed, outcome) in write_back(sandbox, &seeded, &lock, LOCK_WAIT).await {
        let file = seed.shared.display().to_string();
        match outcome {
            Ok(WriteBack::Written) => {
                moved = true;
                tracing::info!(sandbox_id, file, "local_sandbox_credential_written_back")
            }
            Ok(WriteBack::SharedChanged) => tracing::info!(
                sandbox_id,
                file,
                shared = "changed",
                "local_sandbox_credential_superseded"
            ),
            Ok(WriteBack::SharedRemoved) => tracing::info!(
                sandbox_id,
                file,
                shared = "removed",
                "local_sandbox_credential_superseded"
            ),
            Ok(WriteBack::Idle | WriteBack::Missing) => {}
            Err(error) => {
                tracing::warn!(sandbox_id, file, %error, "local_sandbox_credential_write_back_failed")
            }
        }
        kept.push(seed);
    }
    if moved {
        let record = serde_json::to_vec_pretty(&kept).unwrap_or_default();
        if let Err(error) = sandbox.keep_login_record(&record).await {
            tracing::warn!(sandbox_id, %error, "local_sandbox_credential_map_unwritable");
        }
    }
}

/// Claude Code's credential files in its login directory, and where a box keeps them.
pub const CLAUDE_CODE_FILES: [&str; 1] = [".credentials.json"];
pub const CLAUDE_CODE_BOX_DIR: &str = "~/.claude";

/// OpenCode's exported login (what `opencode auth export` printed) in an opencode entry's login
/// directory, where a box keeps it, and the variable that hands its path to the run.
pub const OPENCODE_FILES: [&str; 1] = ["exported-credentials"];
pub const OPENCODE_BOX_DIR: &str = "~/.boxfleet";
pub const OPENCODE_LOGIN_ENV: &str = "BOXFLEET_OPENCODE_LOGIN";

/// The lock file beside a shared login directory, which every writer of it takes.
pub fn lock_beside(login_dir: &Path) -> PathBuf {
    login_dir
        .parent()
        .unwrap_or(login_dir)
        .join("credentials.lock")
}
