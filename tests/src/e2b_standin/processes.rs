//! The boxes' processes: each carries `BOXFLEET_E2B_STANDIN_BOX={id}` ([`MARKER`]) in its
//! environment, inherited by everything it starts, so the stand-in finds a box's processes in
//! `/proc` ([`box_pids`]) to stop, continue or kill them.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The environment variable marking a box's processes.
pub const MARKER: &str = "BOXFLEET_E2B_STANDIN_BOX";

/// The pids whose environment marks them as the box's.
pub fn box_pids(sandbox_id: &str) -> Vec<u32> {
    let wanted = format!("{MARKER}={sandbox_id}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

pub(super) fn signal_box(sandbox_id: &str, signal: &str) {
    // twice: a process forked while the first pass ran is caught by the second
    for _ in 0..2 {
        let pids = box_pids(sandbox_id);
        if pids.is_empty() {
            return;
        }
        let _ = std::process::Command::new("kill")
            .arg(signal)
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status();
    }
}

pub(super) fn kill_box(sandbox_id: &str, dir: &Path) {
    for _ in 0..5 {
        signal_box(sandbox_id, "-KILL");
        if box_pids(sandbox_id).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(dir);
}
