//! A fake box's scripted job: what it prints, how long it runs, what it leaves.

use std::time::Duration;

/// One scripted background job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptedJob {
    /// how many `job_running` calls answer `true`; the last of them finishes the job
    pub polls_until_done: u32,
    /// what the done marker (`{dir}/done`) holds when the job finishes
    pub exit_code: i32,
    /// files written when the job finishes, after the done marker: `(path, bytes)`, the path
    /// relative to the home, absolute inside it, or starting `{dir}/`
    pub files: Vec<(String, Vec<u8>)>,
    /// what the job's stdout stream (`{dir}/stdout.log`) shows
    pub output: String,
    /// finish without writing the done marker (a wrapper that died without one)
    pub skip_done_marker: bool,
    /// run for this long instead of a count of polls
    pub runs_for: Option<Duration>,
    /// what the job writes at its environment's `BOXFLEET_REPORT` when it finishes
    pub report: Option<String>,
    /// with `runs_for`: the job runs on past that time until this file exists on the host
    pub until_file: Option<std::path::PathBuf>,
}

impl ScriptedJob {
    /// A job that answers running for `polls_until_done` polls, then exits `exit_code`.
    pub fn new(polls_until_done: u32, exit_code: i32) -> Self {
        ScriptedJob {
            polls_until_done,
            exit_code,
            ..ScriptedJob::default()
        }
    }

    /// Adds a file written when the job finishes.
    pub fn file(mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.files.push((path.into(), bytes.into()));
        self
    }

    /// A job that runs for `runs_for`, then exits `exit_code` having written `report`.
    pub fn timed(runs_for: Duration, exit_code: i32, report: Option<String>) -> Self {
        ScriptedJob {
            exit_code,
            runs_for: Some(runs_for),
            report,
            ..ScriptedJob::default()
        }
    }

    /// Sets the job's stdout.
    pub fn output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }
}
