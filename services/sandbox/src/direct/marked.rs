//! Every process a direct box started, found through `/proc` by the per-box marker in its
//! environment ([`BOX_MARKER`]`={sandbox_id}`), which every command and job of the box is
//! given and every process they start inherits. It finds what the job's session cannot: a
//! process that called `setsid` or moved to a group of its own, one re-parented to init after
//! its parent died, the rest of a command that killed its own wrapper.
//!
//! A teardown stops every marked process, then kills them, round after round until a scan
//! finds none (a process forked between two scans is caught by the next); a pause stops them
//! and a resume continues them. Each process is opened as a pidfd before its environment is
//! read and signalled through that pidfd, so a pid the kernel hands to another process between
//! the read and the signal is never signalled.
//!
//! Limits, said in `docs/architecture.md`: a process that clears or rewrites its environment
//! (`env -i`, `execve` with a fresh one) sheds the marker and escapes the scan; a process whose
//! environment cannot be read (another user's, after a setuid exec) is counted unreadable and
//! left alone; on a host without pidfds (Linux before 5.3) a marked process is signalled by
//! pid. A cgroup would hold what the marker cannot, but needs a delegated hierarchy a node
//! cannot count on; the container backend has one of its own (its runtime's), and so does E2B
//! (the VM).

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// The environment variable marking a direct box's processes.
pub const BOX_MARKER: &str = "BOXFLEET_SANDBOX_ID";

/// Rounds a teardown makes before it gives up on a box whose processes keep forking.
const KILL_ROUNDS: usize = 50;

/// What one pass over `/proc` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Signalled {
    /// marked processes signalled
    pub sent: usize,
    /// processes whose environment could not be read (left alone)
    pub unreadable: usize,
}

/// Sends `signal` to every live process marked as `sandbox_id`'s, never this process.
pub fn signal_marked(sandbox_id: &str, signal: i32) -> Signalled {
    let Some(named) = Signal::from_named_raw(signal) else {
        return Signalled::default();
    };
    scan(sandbox_id, |pid, pidfd| match pidfd {
        Ok(pidfd) => pidfd_send_signal(pidfd, named).is_ok(),
        // no pidfds on this kernel: by pid
        Err(error) if *error == rustix::io::Errno::NOSYS => {
            super::sys::signal_pid(pid, signal).is_ok()
        }
        // gone before it was opened
        Err(_) => false,
    })
}

/// How many live processes are marked as `sandbox_id`'s.
pub fn count_marked(sandbox_id: &str) -> usize {
    scan(sandbox_id, |_, pidfd| pidfd.is_ok()).sent
}

/// Every process marked as `sandbox_id`'s, each opened as a pidfd before its environment is
/// read, handed to `act`; counts those `act` says it reached.
fn scan(
    sandbox_id: &str,
    mut act: impl FnMut(i32, &rustix::io::Result<OwnedFd>) -> bool,
) -> Signalled {
    let wanted = format!("{BOX_MARKER}={sandbox_id}");
    let own = std::process::id() as i32;
    let mut done = Signalled::default();
    let Ok(entries) = fs::read_dir("/proc") else {
        return done;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Some(raw) = Pid::from_raw(pid).filter(|_| pid != own) else {
            continue;
        };
        // opened first: whatever the environment read says is about this process
        let pidfd = pidfd_open(raw, PidfdFlags::empty());
        let environ = match fs::read(entry.path().join("environ")) {
            Ok(environ) => environ,
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                done.unreadable += 1;
                continue;
            }
            Err(_) => continue,
        };
        if environ
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_bytes())
            && act(pid, &pidfd)
        {
            done.sent += 1;
        }
    }
    done
}

/// Kills every process marked as `sandbox_id`'s: stopped first, so none forks while the rest
/// die, then killed, until a scan finds none. Returns how many were signalled in all.
pub fn kill_marked(sandbox_id: &str) -> usize {
    let mut killed = 0;
    signal_marked(sandbox_id, libc::SIGSTOP);
    for _ in 0..KILL_ROUNDS {
        let round = signal_marked(sandbox_id, libc::SIGKILL);
        if round.sent == 0 {
            return killed;
        }
        killed += round.sent;
        // a killed process keeps its environment until it exits: give the kernel a moment
        std::thread::sleep(Duration::from_millis(5));
        signal_marked(sandbox_id, libc::SIGSTOP);
    }
    tracing::warn!(
        sandbox_id,
        killed,
        "local_sandbox_processes_outlived_teardown"
    );
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn state(pid: u32) -> Option<char> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = stat.rsplit_once(") ")?.1;
        after.chars().next()
    }

    #[test]
    fn a_marked_process_that_left_its_session_is_stopped_continued_and_killed() {
        let id = format!("d-test-{}", std::process::id());
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg("setsid sleep 1000 & wait")
            .env(BOX_MARKER, &id)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(300));
        let stopped = signal_marked(&id, libc::SIGSTOP);
        assert_eq!(
            stopped.sent, 2,
            "the shell and the sleep that left its session"
        );
        let settles_to = |want: bool| {
            (0..100).any(|_| {
                std::thread::sleep(Duration::from_millis(10));
                (state(child.id()) == Some('T')) == want
            })
        };
        assert!(settles_to(true), "stopped");
        signal_marked(&id, libc::SIGCONT);
        assert!(settles_to(false), "continued");
        assert!(kill_marked(&id) >= 2);
        let _ = child.wait();
        assert_eq!(count_marked(&id), 0, "nothing marked is left");
        assert_eq!(
            count_marked("another-box"),
            0,
            "another box's marker matches nothing"
        );
    }
}
