//! The disk a local box shares with the node (DESIGN §11, I14): a box may write up to its
//! budget (`local.max_box_bytes`), and never so much that the disk holding the store keeps
//! less than its reserve (`local.store_reserve_bytes`). The node's poll asks
//! [`Sandbox::disk_check`](boxfleet_actors::ports::Sandbox::disk_check) of each running job's
//! box, and a box past either bound has its job ended with the reason this names — a
//! watchdog, since the hosts boxfleet runs on seldom have per-directory quotas.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a local box may write unless configured otherwise.
pub const DEFAULT_MAX_BOX_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// What the disk holding the store keeps free unless configured otherwise.
pub const DEFAULT_STORE_RESERVE_BYTES: u64 = 256 * 1024 * 1024;

/// A local box's disk bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskBudget {
    /// the most a box's directory may hold, in allocated bytes
    pub max_box_bytes: u64,
    /// the least the disk holding `store_dir` keeps free
    pub store_reserve_bytes: u64,
    /// a directory on the disk holding the store (the node's data dir); `None`: unwatched
    pub store_dir: Option<PathBuf>,
}

impl Default for DiskBudget {
    fn default() -> Self {
        Self {
            max_box_bytes: DEFAULT_MAX_BOX_BYTES,
            store_reserve_bytes: DEFAULT_STORE_RESERVE_BYTES,
            store_dir: None,
        }
    }
}

impl DiskBudget {
    /// Why the box at `root` must stop writing, or `None` while it is inside both bounds.
    pub fn check(&self, root: &Path) -> std::io::Result<Option<String>> {
        if let (Some(store_dir), Some(free)) = (&self.store_dir, self.store_short()?) {
            return Ok(Some(format!(
                "disk_budget: the disk holding the store ({}) has {} free, under its reserve of {} (local.store_reserve_bytes): the job was ended so the store can still write",
                store_dir.display(),
                mib(free),
                mib(self.store_reserve_bytes)
            )));
        }
        let used = allocated_bytes(root, self.max_box_bytes)?;
        if used > self.max_box_bytes {
            return Ok(Some(format!(
                "disk_budget: the box holds more than {} on disk, past its budget of {} (local.max_box_bytes): the job was ended",
                mib(used),
                mib(self.max_box_bytes)
            )));
        }
        Ok(None)
    }
}

impl DiskBudget {
    /// What the disk holding the store has free, when that is under its reserve (`None`: the
    /// reserve holds, or no store is watched). One `statvfs`: cheap enough to ask every second.
    pub fn store_short(&self) -> std::io::Result<Option<u64>> {
        let Some(store_dir) = &self.store_dir else {
            return Ok(None);
        };
        let stat = rustix::fs::statvfs(store_dir.as_path())?;
        let free = stat.f_bavail.saturating_mul(stat.f_frsize);
        Ok((free < self.store_reserve_bytes).then_some(free))
    }
}

/// The bytes allocated under `root` (what the disk gives it, sparse files at their real
/// size), counted until past `stop_past` — the walk ends as soon as the answer is known.
fn allocated_bytes(root: &Path, stop_past: u64) -> std::io::Result<u64> {
    let mut total = 0u64;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // a directory the job removed (or made unreadable) meanwhile holds nothing to count
            Err(error) if dir != root => {
                tracing::debug!(dir = %dir.display(), %error, "box_dir_unreadable");
                continue;
            }
            Err(error) => return Err(error),
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                pending.push(entry.path());
            }
            if total > stop_past {
                return Ok(total);
            }
        }
    }
    Ok(total)
}

/// [`DiskBudget::check`] of the box at `root`, off the async threads (the walk reads every
/// directory of the box).
pub(crate) async fn check_in_background(
    budget: DiskBudget,
    root: PathBuf,
) -> Result<Option<String>, boxfleet_actors::ports::BoxError> {
    use boxfleet_actors::ports::BoxError;
    tokio::task::spawn_blocking(move || budget.check(&root))
        .await
        .map_err(|error| BoxError::Failed(format!("the disk check failed: {error}")))?
        .map_err(|error| {
            BoxError::Failed(format!("the disk check could not read the box: {error}"))
        })
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes.div_ceil(1024 * 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_past_its_budget_is_named_with_both_sizes() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("work")).expect("mkdir");
        std::fs::write(dir.path().join("work/out.txt"), vec![b'y'; 3 << 20]).expect("write");
        let budget = DiskBudget {
            max_box_bytes: 2 << 20,
            ..DiskBudget::default()
        };
        let why = budget.check(dir.path()).expect("checked").expect("over");
        assert!(
            why.starts_with("disk_budget: the box holds more than "),
            "{why}"
        );
        assert!(
            why.contains("budget of 2 MiB (local.max_box_bytes)"),
            "{why}"
        );
        let roomy = DiskBudget::default();
        assert_eq!(roomy.check(dir.path()).expect("checked"), None);
    }

    #[test]
    fn a_disk_under_the_stores_reserve_ends_the_job() {
        let dir = tempfile::tempdir().expect("dir");
        let budget = DiskBudget {
            store_reserve_bytes: u64::MAX,
            store_dir: Some(dir.path().to_path_buf()),
            ..DiskBudget::default()
        };
        let why = budget
            .check(dir.path())
            .expect("checked")
            .expect("under reserve");
        assert!(why.contains("under its reserve"), "{why}");
        assert!(why.contains("local.store_reserve_bytes"), "{why}");
    }
}
