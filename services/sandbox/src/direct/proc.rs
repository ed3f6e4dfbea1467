//! The kernel's own record of a process (`/proc/{pid}/stat`) and the job identity built
//! from it: a pid is not an identity, a pid with its start time and the boot id is.

use std::fmt;
use std::fs;
use std::io;

use super::sys;

/// The fields of `/proc/{pid}/stat` the direct box needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    /// `R`, `S`, `D`, `T` (stopped), `t`, `Z` (zombie), `X`, …
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// clock ticks after boot (field 22)
    pub start_time: u64,
}

impl ProcStat {
    /// Reads the kernel's record of `pid`; `Ok(None)` when there is no such process.
    pub fn read(pid: i32) -> io::Result<Option<ProcStat>> {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(text) => Self::parse(&text).map(Some).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unparsable /proc/{pid}/stat"),
                )
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            // ESRCH: the process went away between the open and the read
            Err(error) if error.raw_os_error() == Some(libc::ESRCH) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Parses one `/proc/{pid}/stat` line. The command name (field 2) is in parentheses and
    /// may hold spaces and parentheses itself, so fields are counted from the last `)`.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let pid = text.get(..open)?.trim().parse().ok()?;
        let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
        // rest[0] is field 3 (state); field n is rest[n - 3]
        let field = |n: usize| rest.get(n - 3).copied();
        Some(ProcStat {
            pid,
            state: field(3)?.chars().next()?,
            ppid: field(4)?.parse().ok()?,
            pgrp: field(5)?.parse().ok()?,
            session: field(6)?.parse().ok()?,
            start_time: field(22)?.parse().ok()?,
        })
    }

    /// Whether the process has ended (a zombie is dead: it only waits to be reaped).
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// Whether the process is stopped by a signal.
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, 'T' | 't')
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> io::Result<String> {
    Ok(fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

/// Every live process of the session `sid`.
pub fn session_members(sid: i32) -> io::Result<Vec<ProcStat>> {
    let mut members = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        if let Ok(Some(stat)) = ProcStat::read(pid)
            && stat.session == sid
            && !stat.is_dead()
        {
            members.push(stat);
        }
    }
    Ok(members)
}

/// A job's identity: its leader's pid, the leader's start time and the boot it started in.
/// Encoded as `pid:start_time:boot_id` in [`JobHandle::id`](boxfleet_actors::ports::JobHandle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdentity {
    pub pid: i32,
    pub start_time: u64,
    pub boot_id: String,
}

impl fmt::Display for JobIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.pid, self.start_time, self.boot_id)
    }
}

/// What the kernel says of a recorded job now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// the leader is alive and is the job's own (same pid, start time and boot)
    Alive(ProcStat),
    /// the leader is gone, a zombie, or the pid now belongs to a later process
    Gone,
}

impl JobIdentity {
    pub fn parse(id: &str) -> Option<JobIdentity> {
        let mut parts = id.splitn(3, ':');
        let pid: i32 = parts.next()?.parse().ok()?;
        let start_time = parts.next()?.parse().ok()?;
        let boot_id = parts.next()?.to_owned();
        (pid > 1 && !boot_id.is_empty()).then_some(JobIdentity {
            pid,
            start_time,
            boot_id,
        })
    }

    /// Reads the identity of a process the caller still holds unreaped (so its pid cannot
    /// have been handed out again).
    pub fn of_held(pid: i32) -> io::Result<JobIdentity> {
        let stat = ProcStat::read(pid)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("process {pid} is gone"))
        })?;
        Ok(JobIdentity {
            pid,
            start_time: stat.start_time,
            boot_id: boot_id()?,
        })
    }

    /// Asks the kernel whether this job's leader still lives. An error means the kernel's
    /// record could not be read: the caller can tell neither a live job nor a recycled pid.
    pub fn liveness(&self) -> io::Result<Liveness> {
        if boot_id()? != self.boot_id {
            return Ok(Liveness::Gone);
        }
        match ProcStat::read(self.pid)? {
            Some(stat) if stat.start_time == self.start_time && !stat.is_dead() => {
                Ok(Liveness::Alive(stat))
            }
            _ => Ok(Liveness::Gone),
        }
    }

    /// Signals the job's whole session — its own process group and any group a process in it
    /// made (GNU `timeout` puts itself in a group of its own) — only while the leader is still
    /// this job's. Returns whether it was signalled.
    pub fn signal(&self, signal: i32) -> io::Result<bool> {
        let Liveness::Alive(stat) = self.liveness()? else {
            return Ok(false);
        };
        // a job is a session leader by construction (setsid); one that is not is not ours
        if stat.session != self.pid {
            return Ok(false);
        }
        // a few rounds, so a process forked while the groups were being signalled is caught
        let rounds = if signal == libc::SIGCONT { 1 } else { 3 };
        let mut signalled = std::collections::BTreeSet::new();
        for _ in 0..rounds {
            let mut fresh = false;
            for member in session_members(self.pid)? {
                let needed = match signal {
                    libc::SIGSTOP => !member.is_stopped(),
                    _ => !signalled.contains(&member.pgrp),
                };
                if needed {
                    fresh = true;
                    if sys::signal_group(member.pgrp, signal).is_ok() {
                        signalled.insert(member.pgrp);
                    } else {
                        // a group that went away meanwhile; the member itself, still ours
                        let _ = sys::signal_pid(member.pid, signal);
                    }
                }
            }
            if !fresh {
                break;
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_a_strange_command_name() {
        let line = "4242 (we(ird) na me) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200 18446744073709551615";
        let stat = ProcStat::parse(line).expect("parses");
        assert_eq!(stat.pid, 4242);
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.ppid, 1);
        assert_eq!(stat.pgrp, 4242);
        assert_eq!(stat.session, 4242);
        assert_eq!(stat.start_time, 987654);
    }

    #[test]
    fn identity_round_trips_and_refuses_nonsense() {
        let id = JobIdentity {
            pid: 77,
            start_time: 12,
            boot_id: "ab-cd".into(),
        };
        assert_eq!(JobIdentity::parse(&id.to_string()), Some(id));
        assert_eq!(JobIdentity::parse("1:2:x"), None);
        assert_eq!(JobIdentity::parse("x:2:y"), None);
        assert_eq!(JobIdentity::parse("5:2:"), None);
    }

    #[test]
    fn my_own_identity_reads_alive_and_a_wrong_start_time_does_not() {
        let me = JobIdentity::of_held(std::process::id() as i32).expect("reads");
        assert!(matches!(me.liveness(), Ok(Liveness::Alive(_))));
        let recycled = JobIdentity {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert_eq!(recycled.liveness().ok(), Some(Liveness::Gone));
        let other_boot = JobIdentity {
            boot_id: "not-this-boot".into(),
            ..me
        };
        assert_eq!(other_boot.liveness().ok(), Some(Liveness::Gone));
    }
}
