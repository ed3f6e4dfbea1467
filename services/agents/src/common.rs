//! What every runner shares: the done marker, whole-character and whole-line reads of a
//! stream, the install step, the poll, and the whole-file pieces a collection reads (the exit
//! status, the findings report, the question, stderr's end). Each failed read goes to the
//! collection's read errors: an infrastructure error, never "the file is absent".

use std::collections::BTreeMap;
use std::time::Duration;

use boxfleet_actors::ports::{
    BoxError, Collected, Followed, JobHandle, JobState, LaunchSpec, Sandbox,
};

use crate::ask;
use crate::layout::{self, sh_quote};

/// How long `install`'s one command may take.
const INSTALL_BOUND: Duration = Duration::from_secs(60);
/// The stderr tail a collection keeps.
pub const STDERR_TAIL_BYTES: u64 = 64 * 1024;

/// Parses a done marker's exit status (its first line): `None` while it is absent or empty
/// (not done), `Some(None)` when it holds something that is not an exit status.
pub(crate) fn parse_done(bytes: Option<Vec<u8>>) -> Option<Option<i32>> {
    let bytes = bytes?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(text.lines().next().unwrap_or_default().trim().parse().ok())
}

/// A done marker's second line: the job's start and end on the box's clock, in Unix
/// milliseconds (`None` for a marker without them, or with an end before its start).
pub(crate) fn parse_done_times(bytes: &[u8]) -> Option<(i64, i64)> {
    let text = String::from_utf8_lossy(bytes);
    let mut words = text.lines().nth(1)?.split_whitespace();
    let started: i64 = words.next()?.parse().ok()?;
    let ended: i64 = words.next()?.parse().ok()?;
    (started > 0 && ended >= started).then_some((started, ended))
}

/// Cuts bytes read from `start` of a stream to whole UTF-8 characters: drops a partial
/// character at the front when the read began mid-stream and one still being written at the
/// end. Returns the text and the offsets it spans.
pub(crate) fn whole_chars(bytes: &[u8], start: u64) -> (String, u64, u64) {
    let mut front = 0;
    if start > 0 {
        while front < bytes.len().min(3) && (bytes[front] & 0xC0) == 0x80 {
            front += 1;
        }
    }
    let body = &bytes[front..];
    let keep = match std::str::from_utf8(body) {
        Ok(_) => body.len(),
        // an incomplete character at the very end: leave it for the next reading
        Err(error) if error.error_len().is_none() => error.valid_up_to(),
        Err(_) => {
            // invalid bytes inside: keep all but an incomplete tail
            let tail_start = body.len().saturating_sub(3);
            match (tail_start..body.len()).find(|&i| (body[i] & 0xC0) != 0x80) {
                Some(i)
                    if std::str::from_utf8(&body[i..]).is_err_and(|e| e.error_len().is_none()) =>
                {
                    i
                }
                _ => body.len(),
            }
        }
    };
    let text = String::from_utf8_lossy(&body[..keep]).into_owned();
    let begin = start + front as u64;
    (text, begin, begin + keep as u64)
}

/// The lines of a stream's end, the first dropped when the read began mid-line. What is kept
/// is redacted whole before it is cut into lines and bounded, so a secret straddling a line
/// or the cut never survives as a fragment no rule recognises.
pub(crate) fn tail_lines(bytes: &[u8], clipped: bool, keep: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let text = if clipped {
        text.find('\n').map_or("", |at| &text[at + 1..])
    } else {
        &text[..]
    };
    let text = boxfleet_redact::redact(text);
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(keep);
    lines.into_iter().skip(skip).map(str::to_owned).collect()
}

/// Installs a runner's shared pieces: the ask shim (mode 755), the jobs directory, and no
/// previous job's report, question or done markers.
pub(crate) async fn install(sandbox: &dyn Sandbox, runner: &str) -> Result<(), BoxError> {
    let home = sandbox.home();
    let shim = layout::ask_shim(home);
    sandbox
        .write_file(&shim, ask::shim_script(&layout::ask_dir(home)).as_bytes())
        .await?;
    let jobs = layout::jobs_dir(home);
    let script = format!(
        "chmod 755 {shim} && mkdir -p {jobs} && rm -f {report} && rm -rf {ask} && rm -f {jobs}/*/{done} {jobs}/*/{done}.tmp",
        shim = sh_quote(&shim),
        jobs = sh_quote(&jobs),
        report = sh_quote(&layout::report(home)),
        ask = sh_quote(&layout::ask_dir(home)),
        done = layout::DONE,
    );
    let out = sandbox
        .exec(&script, &BTreeMap::new(), INSTALL_BOUND)
        .await?;
    if out.exit_code != 0 {
        return Err(BoxError::Failed(format!(
            "installing the {runner} runner failed with exit {}: {}",
            out.exit_code,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Refuses a launch a coding agent cannot start: a launch id that cannot name a job
/// directory, or an empty brief.
pub(crate) fn check_brief(launch: &LaunchSpec, runner: &str) -> Result<(), BoxError> {
    if !layout::valid_launch_id(&launch.launch_id) {
        return Err(BoxError::Failed(format!(
            "not a usable launch id: {:?}",
            launch.launch_id
        )));
    }
    if launch.brief.trim().is_empty() {
        return Err(BoxError::Failed(format!(
            "the {runner} runner was given no brief"
        )));
    }
    Ok(())
}

/// Whether a job finished: the done marker, else the wrapper's liveness.
///
/// A marker that cannot be read (the job replaced its directory with a file, left a named pipe
/// there) never skips the liveness probe: a dead wrapper is a finished job whatever the marker
/// says, and the collection names what it could not read; a live one is "not done", with the
/// read's error logged beside it (once a minute per job).
pub(crate) async fn poll(sandbox: &dyn Sandbox, job: &JobHandle) -> Result<JobState, BoxError> {
    let done = layout::in_job(&job.dir, layout::DONE);
    let read = sandbox.read_file(&done).await;
    if let Ok(found) = &read
        && let Some(exit_code) = parse_done(found.clone())
    {
        return Ok(JobState::Done { exit_code });
    }
    if sandbox.job_running(job).await? {
        if let Err(error) = &read
            && boxfleet_actors::streaks::once_per(
                &format!("done-marker {}", job.id),
                boxfleet_actors::streaks::WARN_EVERY,
            )
        {
            tracing::warn!(job = %job.id, path = %done, %error, "sandbox_done_marker_unreadable");
        }
        return Ok(JobState::Running);
    }
    // the wrapper may have written the marker and exited between the two reads
    let exit_code = match sandbox.read_file(&done).await {
        Ok(found) => parse_done(found).flatten(),
        Err(_) => None,
    };
    Ok(JobState::Done { exit_code })
}

/// Starts a wrapper already written to the box under `shell`, from `dir`, with the launch's
/// environment plus what every job gets: `BOXFLEET_REPORT` and `BOXFLEET_AGENT_HANDLE`.
pub(crate) async fn start_wrapper(
    sandbox: &dyn Sandbox,
    shell: &[String],
    wrapper: &str,
    mut env: BTreeMap<String, String>,
    seat: &str,
    dir: &str,
) -> Result<JobHandle, BoxError> {
    env.insert("BOXFLEET_REPORT".to_owned(), layout::report(sandbox.home()));
    env.insert("BOXFLEET_AGENT_HANDLE".to_owned(), seat.to_owned());
    let shell: Vec<String> = shell.iter().map(|part| sh_quote(part)).collect();
    let run = format!("exec {} {}", shell.join(" "), sh_quote(wrapper));
    sandbox.start_background(&run, &env, dir).await
}

/// Read errors, each naming the piece and its path, and the first piece the box did not
/// answer for.
#[derive(Debug, Default)]
pub(crate) struct ReadErrors {
    pieces: Vec<String>,
    unreachable: Option<BoxError>,
}

impl ReadErrors {
    pub(crate) fn push(&mut self, piece: &str, path: &str, error: BoxError) {
        self.pieces.push(format!("{piece} ({path}): {error}"));
        if matches!(error, BoxError::Unreachable(_)) && self.unreachable.is_none() {
            self.unreachable = Some(BoxError::Unreachable(format!("{piece} ({path}): {error}")));
        }
    }

    /// The collection's end: a piece the box did not answer for means the box could not be
    /// read back, which is a collect failure (asked again under the poll's allowance, spec
    /// "Collect failure"), never a run collected without that piece; every other error is
    /// the piece's own and is carried on the run.
    pub(crate) fn finish(self, collected: &mut Collected) -> Result<(), BoxError> {
        if let Some(unreachable) = self.unreachable {
            return Err(unreachable);
        }
        collected.read_errors = self.pieces;
        Ok(())
    }
}

/// The done marker's exit status into `collected` (absent: none, and no error).
pub(crate) async fn read_exit(
    sandbox: &dyn Sandbox,
    job: &JobHandle,
    collected: &mut Collected,
    errors: &mut ReadErrors,
) {
    let done = layout::in_job(&job.dir, layout::DONE);
    match sandbox.read_file(&done).await {
        Ok(bytes) => match parse_done(bytes.inspect(|bytes| {
            if let Some((started, ended)) = parse_done_times(bytes) {
                collected.job_started_ms = Some(started);
                collected.job_ended_ms = Some(ended);
            }
        })) {
            Some(Some(code)) => collected.exit_code = Some(code),
            Some(None) => errors.push(
                "exit status",
                &done,
                BoxError::Failed("the done marker holds no exit status".into()),
            ),
            None => {}
        },
        Err(error) => errors.push("exit status", &done, error),
    }
}

/// The findings report, redacted whole: `Ok(Some)` when written, `Ok(None)` when nothing (or
/// only whitespace) is there, `Err` (already recorded) when it could not be read.
pub(crate) async fn read_report(
    sandbox: &dyn Sandbox,
    errors: &mut ReadErrors,
) -> Result<Option<String>, ()> {
    let report = layout::report(sandbox.home());
    match sandbox.read_file(&report).await {
        Ok(Some(bytes)) if !String::from_utf8_lossy(&bytes).trim().is_empty() => Ok(Some(
            boxfleet_redact::redact(&String::from_utf8_lossy(&bytes)),
        )),
        Ok(_) => Ok(None),
        // a report merely too large to read whole is no collect failure: it is described by
        // its size, and the run is collected without it
        Err(BoxError::TooLarge { path, size, limit }) => {
            Ok(Some(too_large_note("findings report", &path, size, limit)))
        }
        Err(error) => {
            errors.push("report", &report, error);
            Err(())
        }
    }
}

/// What stands in for a piece too large to read whole: its size, the bound, where it is.
pub(crate) fn too_large_note(piece: &str, path: &str, size: u64, limit: u64) -> String {
    format!(
        "[boxfleet] the {piece} at {path} is {size} bytes, over the {limit}-byte bound a \
         collection reads whole, so it was not read; it is still in the box"
    )
}

/// Stderr's end, redacted whole, its unread start said by size.
/// The error stream of a job from `from` (the live tail's fallback while the job's output has
/// said nothing): its last window at most, in whole characters.
pub(crate) async fn follow_errors(
    sandbox: &dyn Sandbox,
    job: &JobHandle,
    from: u64,
) -> Result<Followed, BoxError> {
    let stderr = layout::in_job(&job.dir, layout::STDERR);
    let tail = sandbox
        .read_tail(&stderr, from, crate::command::FOLLOW_WINDOW_BYTES)
        .await?;
    let (text, start, end) = whole_chars(&tail.bytes, tail.offset);
    Ok(Followed { text, start, end })
}

pub(crate) async fn read_stderr(
    sandbox: &dyn Sandbox,
    job: &JobHandle,
    collected: &mut Collected,
    errors: &mut ReadErrors,
) {
    let stderr = layout::in_job(&job.dir, layout::STDERR);
    match sandbox.read_tail(&stderr, 0, STDERR_TAIL_BYTES).await {
        Ok(tail) => {
            let (text, _, _) = whole_chars(&tail.bytes, tail.offset);
            let text = boxfleet_redact::redact(&text);
            collected.stderr_tail = if tail.offset > 0 {
                format!(
                    "[the first {} bytes of stderr are not shown]\n{text}",
                    tail.offset
                )
            } else {
                text
            };
        }
        Err(error) => errors.push("stderr", &stderr, error),
    }
}

/// The question the ask shim recorded.
/// The end of a coding CLI's collection: a CLI that exited 0 on a failed result (or on none)
/// did not succeed, which is said on stderr and read as exit 1; then the question, and the
/// read errors gathered along the way (`Err` when the box did not answer for a piece).
pub(crate) async fn finish_cli_collect(
    sandbox: &dyn Sandbox,
    mut collected: Collected,
    mut errors: ReadErrors,
    failure: Option<&str>,
) -> Result<Collected, BoxError> {
    if let (Some(0), Some(failure)) = (collected.exit_code, failure) {
        collected.exit_code = Some(1);
        collected.stderr_tail = format!(
            "[boxfleet] the CLI exited 0, but the run did not succeed ({failure}); read as exit 1\n{}",
            collected.stderr_tail
        );
    }
    read_question(sandbox, &mut collected, &mut errors).await;
    errors.finish(&mut collected)?;
    Ok(collected)
}

pub(crate) async fn read_question(
    sandbox: &dyn Sandbox,
    collected: &mut Collected,
    errors: &mut ReadErrors,
) {
    let ask_dir = layout::ask_dir(sandbox.home());
    let mut pieces: Vec<Option<Vec<u8>>> = Vec::new();
    let mut readable = true;
    for name in ["question", "audience", "branch"] {
        let path = format!("{ask_dir}/{name}");
        match sandbox.read_file(&path).await {
            Ok(bytes) => pieces.push(bytes),
            // a question too large to read whole still parks the run, described by its size;
            // an audience or branch that large is read as none
            Err(BoxError::TooLarge { path, size, limit }) => pieces.push(
                (name == "question")
                    .then(|| too_large_note("question", &path, size, limit).into_bytes()),
            ),
            Err(error) => {
                readable = false;
                errors.push(&format!("question's {name}"), &path, error);
                pieces.push(None);
            }
        }
    }
    if readable {
        collected.question = ask::from_files(
            pieces[0].as_deref(),
            pieces[1].as_deref(),
            pieces[2].as_deref(),
        );
    }
}

/// The brief's preamble every coding agent is handed before the task: it is not the last
/// step, so it writes a findings report, names what it delivered, and asks through the shim.
pub fn brief_preamble() -> &'static str {
    BRIEF_PREAMBLE
}

const BRIEF_PREAMBLE: &str = "You are running headless inside a sandbox, as one step of a larger piece of work: \
you are not the last step, and nobody is watching to answer a prompt.\n\
\n\
Before you stop, write a findings report in Markdown to the file named by the environment \
variable BOXFLEET_REPORT (for example: cat > \"$BOXFLEET_REPORT\"). Say what you found, what \
you changed and what is left. Name everything you delivered on a line of its own, one per \
branch you pushed and per pull or merge request you opened, for example:\n\
Delivered: fix/retry-backoff\n\
Delivered: https://git.example.com/acme/api/pull/42\n\
\n\
If you cannot go on without a person's answer, commit and push your work in progress to a \
WIP branch, then run: boxfleet-ask \"<your question>\" --to <requester|team|manager|handle> \
--branch <that branch> — and stop.\n\
\n\
The task:\n\n";

/// The whole brief a coding agent reads on stdin: the preamble, then the task.
pub fn full_brief(task: &str) -> String {
    let mut brief = String::from(BRIEF_PREAMBLE);
    brief.push_str(task);
    if !brief.ends_with('\n') {
        brief.push('\n');
    }
    brief
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_markers() {
        assert_eq!(parse_done(None), None);
        assert_eq!(parse_done(Some(Vec::new())), None);
        assert_eq!(parse_done(Some(b"0\n".to_vec())), Some(Some(0)));
        assert_eq!(parse_done(Some(b"124\n".to_vec())), Some(Some(124)));
        assert_eq!(parse_done(Some(b"what".to_vec())), Some(None));
        let timed = b"3\n1796346829000 1796346831250\n".to_vec();
        assert_eq!(parse_done(Some(timed.clone())), Some(Some(3)));
        assert_eq!(
            parse_done_times(&timed),
            Some((1_796_346_829_000, 1_796_346_831_250))
        );
        assert_eq!(parse_done_times(b"0\n"), None);
        assert_eq!(
            parse_done_times(b"0\n5 4\n"),
            None,
            "an end before its start"
        );
    }

    #[test]
    fn whole_characters_only() {
        let text = "aé€".as_bytes(); // 1 + 2 + 3 bytes
        assert_eq!(whole_chars(text, 0), ("aé€".to_owned(), 0, 6));
        assert_eq!(whole_chars(&text[..4], 0), ("aé".to_owned(), 0, 3));
        assert_eq!(whole_chars(&text[2..], 2), ("€".to_owned(), 3, 6));
    }

    #[test]
    fn transcript_keeps_whole_lines_from_the_end() {
        assert_eq!(tail_lines(b"a\nb\nc\n", false, 2), vec!["b", "c"]);
        assert_eq!(tail_lines(b"rtial\nb\nc", true, 10), vec!["b", "c"]);
    }

    #[test]
    fn the_brief_ends_with_the_task() {
        let brief = full_brief("Fix the flake.");
        assert!(brief.starts_with(brief_preamble()));
        assert!(brief.ends_with("The task:\n\nFix the flake.\n"));
    }
}
