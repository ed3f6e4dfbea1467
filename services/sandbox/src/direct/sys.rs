//! The few system calls std has no safe form of: signals and a new session. Each is one
//! `unsafe` call with no memory-safety preconditions, allowed here and nowhere else.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Sends `signal` to every process in the group `pgid`.
#[allow(unsafe_code)]
pub(crate) fn signal_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal group <= 1",
        ));
    }
    // SAFETY: killpg takes two integers and touches no memory of ours; pgid > 1 rules out
    // the "every process" and "my own group" meanings of 0 and 1.
    let rc = unsafe { libc::killpg(pgid, signal) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `signal` to the one process `pid`.
#[allow(unsafe_code)]
pub(crate) fn signal_pid(pid: i32, signal: i32) -> io::Result<()> {
    if pid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal pid <= 1",
        ));
    }
    // SAFETY: kill takes two integers and touches no memory of ours; pid > 1 rules out the
    // group and broadcast meanings of 0, -1 and negative pids.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the child the leader of a new session (and so of a new process group), detached
/// from the node's session: a stopped job is not sent SIGHUP + SIGCONT when the node exits
/// (its group is orphaned from the start rather than made orphan by the node's exit).
#[allow(unsafe_code)]
pub(crate) fn new_session(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and calls only setsid(2),
    // which is async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
