//! The progress line a silent wait shows on a terminal: what it waits for and for how long,
//! rewritten in place on stderr (`launch --wait`). Nothing at all when stderr is not a
//! terminal (a pipe, a file, CI), so a script reads only the answer; cleared before anything
//! else is printed, so the answer never lands after it on the same line.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How long a wait stays silent before the progress line shows.
const QUIET: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(super) struct Progress {
    enabled: bool,
    started: Instant,
    quiet_since: Instant,
    /// the width of the line on screen (0: none shown)
    shown: usize,
}

impl Progress {
    /// A progress line, shown only when stderr is a terminal.
    pub(super) fn new() -> Self {
        Self::with(std::io::stderr().is_terminal())
    }

    fn with(enabled: bool) -> Self {
        Self {
            enabled,
            started: Instant::now(),
            quiet_since: Instant::now(),
            shown: 0,
        }
    }

    /// Something else is about to be printed: the line goes first.
    pub(super) fn clear(&mut self) {
        if self.shown > 0 {
            let mut stderr = std::io::stderr();
            let _ = write!(stderr, "\r{}\r", " ".repeat(self.shown));
            let _ = stderr.flush();
            self.shown = 0;
        }
    }

    /// Something was printed: the wait is not silent.
    pub(super) fn spoke(&mut self) {
        self.quiet_since = Instant::now();
    }

    /// Shows `what` and the wait's elapsed time, once the wait has been silent a while.
    pub(super) fn tick(&mut self, what: &str) {
        if let Some(line) = self.line(what) {
            let mut stderr = std::io::stderr();
            let pad = self.shown.saturating_sub(line.chars().count());
            let _ = write!(stderr, "\r{line}{}", " ".repeat(pad));
            let _ = stderr.flush();
            self.shown = line.chars().count().max(self.shown);
        }
    }

    fn line(&self, what: &str) -> Option<String> {
        (self.enabled && self.quiet_since.elapsed() >= QUIET)
            .then(|| format!("{what} ({} s)", self.started.elapsed().as_secs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_shows_off_a_terminal_and_nothing_before_the_wait_is_quiet() {
        let mut piped = Progress::with(false);
        piped.quiet_since -= QUIET * 2;
        assert_eq!(piped.line("waiting"), None, "a pipe gets nothing extra");
        let mut shown = Progress::with(true);
        assert_eq!(shown.line("waiting"), None, "not yet quiet");
        shown.quiet_since -= QUIET * 2;
        shown.started -= Duration::from_secs(12);
        assert_eq!(
            shown.line("the job is running").as_deref(),
            Some("the job is running (12 s)")
        );
    }
}
