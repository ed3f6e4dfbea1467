//! The `command` runner: runs a shell command as the job — a check, an eval, a one-off
//! script — with an optional in-box deadline (`timeout N`, exit 124) kept apart from the
//! engine's own backstop (DESIGN §10, §11).
//!
//! `start` writes the command to `{home}/.boxfleet/jobs/{launch_id}/command.sh` (never on
//! argv) and a POSIX-sh wrapper beside it, then starts the wrapper in the background under
//! the configured shell. The wrapper exports `BOXFLEET_REPORT`, puts
//! `{home}/.boxfleet/bin` (the ask shim) first on `PATH`, runs `sh command.sh` (under
//! `timeout N` when the launch has a deadline) with its stdout and stderr in `stdout.log` and
//! `stderr.log`, then writes the exit status to `done.tmp` and renames it to `done`.

use async_trait::async_trait;
use boxfleet_actors::ports::{
    BoxError, Collected, Followed, JobHandle, JobState, LaunchSpec, Runner, Sandbox,
};

use crate::common::{self, ReadErrors, tail_lines, whole_chars};
use crate::layout::{self, sh_quote};
use crate::refs::delivered_refs;

/// The stdout tail that stands in for a report nobody wrote.
pub const REPORT_FALLBACK_BYTES: u64 = 64 * 1024;
/// The stdout lines a transcript keeps (its last ones).
pub const TRANSCRIPT_LINES: usize = 500;
/// How much of stdout's end a transcript is read from.
pub const TRANSCRIPT_READ_BYTES: u64 = 256 * 1024;
/// The most a `follow` returns (the last of it when more was written).
pub const FOLLOW_WINDOW_BYTES: u64 = 1024 * 1024;
/// How long a command that outlives its deadline gets after SIGTERM before SIGKILL.
const KILL_AFTER_SECONDS: u64 = 10;

/// The `command` runner.
#[derive(Debug, Clone)]
pub struct CommandRunner {
    shell: Vec<String>,
}

impl Default for CommandRunner {
    fn default() -> Self {
        CommandRunner::new()
    }
}

impl CommandRunner {
    /// A runner whose wrapper runs under `sh`.
    pub fn new() -> Self {
        CommandRunner {
            shell: vec!["sh".to_owned()],
        }
    }

    /// A runner whose wrapper runs under another POSIX shell: `["/bin/dash"]`,
    /// `["bash", "--posix"]`, `["busybox", "ash"]`. An empty list keeps `sh`.
    pub fn with_shell<I, S>(shell: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let shell: Vec<String> = shell.into_iter().map(Into::into).collect();
        if shell.is_empty() {
            CommandRunner::new()
        } else {
            CommandRunner { shell }
        }
    }

    /// The shell the wrapper runs under.
    pub fn shell(&self) -> &[String] {
        &self.shell
    }
}

/// The wrapper script for one job (POSIX sh: no bashisms; it runs under dash, `bash
/// --posix` and busybox ash).
pub fn wrapper_script(home: &str, dir: &str, timeout_seconds: Option<u64>) -> String {
    // busybox's `timeout` applet (what a busybox box, or a static busybox ash, runs) ends a
    // command past its deadline with the signal's status, 143, not coreutils' 124: a 143 at
    // or past the deadline is read as the deadline
    let (started, run, deadline) = match timeout_seconds {
        Some(seconds) => (
            "started=$(date +%s)\n  ",
            format!(
                "timeout -k {KILL_AFTER_SECONDS} {seconds} sh \"$dir/{}\"",
                layout::COMMAND
            ),
            format!(
                "\n  if [ \"$status\" -eq 143 ] && [ $(( $(date +%s) - started )) -ge {seconds} ]; then status=124; fi"
            ),
        ),
        None => (
            "",
            format!("sh \"$dir/{}\"", layout::COMMAND),
            String::new(),
        ),
    };
    format!(
        r#"# boxfleet command wrapper: runs command.sh, then records its exit status in done.
# POSIX sh only.
dir={dir}
home={home}
BOXFLEET_REPORT={report}
export BOXFLEET_REPORT
export BOXFLEET_AGENT_HANDLE
BOXFLEET_PATH_BIN={bin}
{path}
export PATH
rm -f "$dir/{done}" "$dir/{done}.tmp"
{clock}
job_started_ms=$(boxfleet_ms)
if cd "$home"; then
  {started}{run} </dev/null >"$dir/{stdout}" 2>"$dir/{stderr}"
  status=$?{deadline}
else
  status=126
fi
printf '%s\n%s %s\n' "$status" "$job_started_ms" "$(boxfleet_ms)" >"$dir/{done}.tmp" && mv -f "$dir/{done}.tmp" "$dir/{done}"
"#,
        clock = layout::JOB_CLOCK,
        path = layout::JOB_PATH,
        dir = sh_quote(dir),
        home = sh_quote(home),
        report = sh_quote(&layout::report(home)),
        bin = sh_quote(&layout::bin_dir(home)),
        done = layout::DONE,
        stdout = layout::STDOUT,
        stderr = layout::STDERR,
    )
}

#[async_trait]
impl Runner for CommandRunner {
    fn name(&self) -> &str {
        "command"
    }

    async fn install(&self, sandbox: &dyn Sandbox) -> Result<(), BoxError> {
        common::install(sandbox, "command").await
    }

    async fn start(
        &self,
        sandbox: &dyn Sandbox,
        launch: &LaunchSpec,
    ) -> Result<JobHandle, BoxError> {
        if !layout::valid_launch_id(&launch.launch_id) {
            return Err(BoxError::Failed(format!(
                "not a usable launch id: {:?}",
                launch.launch_id
            )));
        }
        let command = match launch.command.as_deref() {
            Some(command) if !command.trim().is_empty() => command,
            _ if !launch.brief.trim().is_empty() => launch.brief.as_str(),
            _ => {
                return Err(BoxError::Failed(
                    "the command runner was given no command".into(),
                ));
            }
        };
        let home = sandbox.home();
        let dir = layout::job_dir(home, &launch.launch_id);
        let mut body = command.to_owned();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        sandbox
            .write_file(&layout::in_job(&dir, layout::COMMAND), body.as_bytes())
            .await?;
        let wrapper = layout::in_job(&dir, layout::WRAPPER);
        sandbox
            .write_file(
                &wrapper,
                wrapper_script(home, &dir, launch.timeout_seconds).as_bytes(),
            )
            .await?;
        let env = launch.env.clone();
        common::start_wrapper(sandbox, &self.shell, &wrapper, env, &launch.seat, &dir).await
    }

    async fn poll(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> Result<JobState, BoxError> {
        common::poll(sandbox, job).await
    }

    async fn collect(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> Result<Collected, BoxError> {
        let mut collected = Collected::default();
        let mut errors = ReadErrors::default();
        common::read_exit(sandbox, job, &mut collected, &mut errors).await;

        // stdout: the transcript, and the report when none was written
        let stdout = layout::in_job(&job.dir, layout::STDOUT);
        let stdout_tail = match sandbox.read_tail(&stdout, 0, TRANSCRIPT_READ_BYTES).await {
            Ok(tail) => {
                collected.transcript = tail_lines(&tail.bytes, tail.offset > 0, TRANSCRIPT_LINES);
                Some(tail)
            }
            Err(error) => {
                errors.push("stdout", &stdout, error);
                None
            }
        };

        // the report
        match common::read_report(sandbox, &mut errors).await {
            Ok(Some(report)) => collected.report = report,
            Ok(None) => {
                if let Some(tail) = &stdout_tail {
                    let skip = tail.bytes.len().saturating_sub(
                        usize::try_from(REPORT_FALLBACK_BYTES).unwrap_or(usize::MAX),
                    );
                    let (text, _, _) = whole_chars(&tail.bytes[skip..], tail.offset + skip as u64);
                    collected.report = boxfleet_redact::redact(&text);
                }
            }
            Err(()) => {}
        }
        collected.delivered_refs = delivered_refs(&collected.report);

        common::read_stderr(sandbox, job, &mut collected, &mut errors).await;
        common::read_question(sandbox, &mut collected, &mut errors).await;
        errors.finish(&mut collected)?;
        Ok(collected)
    }

    async fn follow(
        &self,
        sandbox: &dyn Sandbox,
        job: &JobHandle,
        from: u64,
    ) -> Result<Followed, BoxError> {
        let stdout = layout::in_job(&job.dir, layout::STDOUT);
        let tail = sandbox
            .read_tail(&stdout, from, FOLLOW_WINDOW_BYTES)
            .await?;
        let (text, start, end) = whole_chars(&tail.bytes, tail.offset);
        Ok(Followed { text, start, end })
    }
    async fn follow_errors(
        &self,
        sandbox: &dyn Sandbox,
        job: &JobHandle,
        from: u64,
    ) -> Result<Followed, BoxError> {
        crate::common::follow_errors(sandbox, job, from).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_is_plain_sh() {
        let script = wrapper_script("/h/o'me", "/h/o'me/.boxfleet/jobs/L", Some(5));
        assert!(script.contains(r"home='/h/o'\''me'"));
        assert!(script.contains("timeout -k 10 5 sh \"$dir/command.sh\""));
        for bashism in [
            "[[",
            "function ",
            "$'",
            "<<<",
            "&>",
            "source ",
            "pipefail",
            "local ",
        ] {
            assert!(!script.contains(bashism), "the wrapper has {bashism:?}");
        }
    }
}
