//! [`Launcher`]: launches arriving throughout a scenario, as an engine sends them — one
//! `boxfleet launch` after another through one node's CLI, each timed and its answer kept, so
//! a test can say which were accepted while the store had a quorum and which were not.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::node::{NodeProcess, boxfleet_bin, launched_turn};

/// One launch: when it was sent and answered, and the turn it started or the error it met.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub started: Instant,
    pub ended: Instant,
    pub outcome: Result<String, String>,
}

impl Attempt {
    /// Whether the launch was accepted.
    pub fn accepted(&self) -> bool {
        self.outcome.is_ok()
    }

    /// Whether any of it fell inside `[from, to)`.
    pub fn overlaps(&self, from: Instant, to: Instant) -> bool {
        self.started < to && self.ended > from
    }
}

/// Launches `command` on seats `{tag}-0` … `{tag}-{seats-1}` in turn, `pause` apart, until
/// stopped.
#[derive(Debug)]
pub struct Launcher {
    stop: Arc<AtomicBool>,
    attempts: Arc<Mutex<Vec<Attempt>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Launcher {
    /// Starts launching through `node`.
    pub fn start(
        node: &NodeProcess,
        tag: &str,
        seats: usize,
        command: &str,
        pause: Duration,
    ) -> Launcher {
        let stop = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let addr = node.addr();
        let token: PathBuf = node.token_file();
        let (tag, command) = (tag.to_owned(), command.to_owned());
        let thread = std::thread::spawn({
            let (stop, attempts) = (stop.clone(), attempts.clone());
            move || {
                let mut n = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let seat = format!("{tag}-{}", n % seats.max(1));
                    n += 1;
                    let started = Instant::now();
                    let output = Command::new(boxfleet_bin())
                        .args(["launch", "--seat", &seat, "--command", &command])
                        .env("BOXFLEET_ADDR", &addr)
                        .env("BOXFLEET_TOKEN_FILE", &token)
                        .output();
                    let outcome = match output {
                        Ok(out) if out.status.success() => {
                            Ok(launched_turn(&String::from_utf8_lossy(&out.stdout)))
                        }
                        Ok(out) => Err(format!(
                            "exit {}: {}{}",
                            out.status.code().unwrap_or(-1),
                            String::from_utf8_lossy(&out.stdout).trim(),
                            String::from_utf8_lossy(&out.stderr).trim()
                        )),
                        Err(error) => Err(format!("could not run the CLI: {error}")),
                    };
                    let attempt = Attempt {
                        started,
                        ended: Instant::now(),
                        outcome,
                    };
                    attempts
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(attempt);
                    std::thread::sleep(pause);
                }
            }
        });
        Launcher {
            stop,
            attempts,
            thread: Some(thread),
        }
    }

    /// Stops launching (the launch in flight finishes) and returns every attempt.
    pub fn finish(mut self) -> Vec<Attempt> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
