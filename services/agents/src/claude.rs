//! The `claude-code` runner: Claude Code headless, its stream-json stream in the job
//! directory (DESIGN §10, §11; the spec's "Claude Code").
//!
//! `start` writes the brief (the preamble and the task) to `brief.md` in
//! `{home}/.boxfleet/jobs/{launch_id}/` and a POSIX-sh wrapper beside it, and starts the
//! wrapper in the background. The wrapper exports `BOXFLEET_REPORT`, puts the ask shim first
//! on `PATH`, runs `claude -p --output-format stream-json --verbose --permission-mode
//! bypassPermissions [--model M] [--max-turns N]` with the brief on stdin (never on argv),
//! its stdout in `stream.jsonl` and stderr in `stderr.log`; after the CLI exits it copies the
//! stream's last line to `result.json` (never through a pipe beside the CLI, whose status
//! would be the copy's) and writes the CLI's exit status to `done.tmp`, renamed to `done`.

use async_trait::async_trait;
use boxfleet_actors::ports::{
    BoxError, Collected, Followed, JobHandle, JobState, LaunchSpec, McpTransport, RenderedMcp,
    Runner, Sandbox,
};

use crate::claude_stream::{ClaudeResult, ClaudeStream};
use crate::common::{self, ReadErrors, tail_lines, whole_chars};
use crate::layout::{self, sh_quote};
use crate::refs::run_refs;
use crate::transcript::{RESULT_REFUSED, USAGE_NEGATIVE};

/// The event stream, in the job directory.
pub const STREAM: &str = "stream.jsonl";
/// The stream's last line, copied after the CLI exits.
pub const RESULT: &str = "result.json";
/// The brief, fed to the CLI on stdin.
pub const BRIEF: &str = "brief.md";
/// The MCP servers the launch gives the agent (`--mcp-config`), in the job directory.
pub const MCP_CONFIG: &str = "mcp.json";
/// The most of the stream's end a collection decodes.
pub const STREAM_READ_BYTES: u64 = 32 * 1024 * 1024;
/// The most a `follow` reads.
pub const FOLLOW_WINDOW_BYTES: u64 = 1024 * 1024;
/// The stderr lines that stand in for a transcript when the stream said nothing.
pub const STDERR_TRANSCRIPT_LINES: usize = 200;

/// The `claude-code` runner.
#[derive(Debug, Clone)]
pub struct ClaudeCodeRunner {
    cli: String,
    shell: Vec<String>,
}

impl Default for ClaudeCodeRunner {
    fn default() -> Self {
        ClaudeCodeRunner::new()
    }
}

impl ClaudeCodeRunner {
    /// A runner for `claude` on the box's `PATH`, its wrapper under `sh`.
    pub fn new() -> Self {
        ClaudeCodeRunner {
            cli: "claude".to_owned(),
            shell: vec!["sh".to_owned()],
        }
    }

    /// The CLI to run: a command on `PATH` or a path.
    pub fn with_cli(mut self, cli: impl Into<String>) -> Self {
        let cli = cli.into();
        if !cli.trim().is_empty() {
            self.cli = cli;
        }
        self
    }

    /// The POSIX shell the wrapper runs under (`["/bin/dash"]`, `["bash", "--posix"]`,
    /// `["busybox", "ash"]`); an empty list keeps `sh`.
    pub fn with_shell<I, S>(mut self, shell: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let shell: Vec<String> = shell.into_iter().map(Into::into).collect();
        if !shell.is_empty() {
            self.shell = shell;
        }
        self
    }

    pub fn cli(&self) -> &str {
        &self.cli
    }

    pub fn shell(&self) -> &[String] {
        &self.shell
    }
}

/// The CLI's arguments after its name (each quoted for sh). `mcp_config` is the MCP servers'
/// file, when the launch gives the agent any: only those servers, never one of the box's own
/// (`--strict-mcp-config`).
pub fn cli_args(model: Option<&str>, max_turns: Option<u32>, mcp_config: Option<&str>) -> String {
    let mut args = String::from(
        "-p --output-format stream-json --verbose --permission-mode bypassPermissions",
    );
    if let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) {
        args.push_str(" --model ");
        args.push_str(&sh_quote(model));
    }
    if let Some(turns) = max_turns.filter(|&n| n > 0) {
        args.push_str(&format!(" --max-turns {turns}"));
    }
    if let Some(file) = mcp_config {
        args.push_str(" --mcp-config ");
        args.push_str(&sh_quote(file));
        args.push_str(" --strict-mcp-config");
    }
    args
}

/// Claude Code's MCP configuration (`--mcp-config`'s file) for `servers`: a stdio server as
/// the command the CLI spawns in the box with its environment, an HTTP one as its URL and
/// headers (Streamable HTTP). Every value is already resolved: nothing here is a reference.
pub fn mcp_config(servers: &[RenderedMcp]) -> serde_json::Value {
    let mut entries = serde_json::Map::new();
    for server in servers {
        let entry = match &server.transport {
            McpTransport::Stdio { command, args, env } => serde_json::json!({
                "type": "stdio",
                "command": command,
                "args": args,
                "env": env,
            }),
            McpTransport::Http { url, headers } => serde_json::json!({
                "type": "http",
                "url": url,
                "headers": headers,
            }),
        };
        entries.insert(server.name.clone(), entry);
    }
    serde_json::json!({ "mcpServers": entries })
}

/// The wrapper script for one job (POSIX sh: it runs under dash, `bash --posix` and busybox
/// ash).
pub fn wrapper_script(
    home: &str,
    dir: &str,
    cli: &str,
    model: Option<&str>,
    max_turns: Option<u32>,
    mcp: bool,
) -> String {
    let mcp_config = mcp.then(|| layout::in_job(dir, MCP_CONFIG));
    format!(
        r#"# boxfleet claude-code wrapper: runs Claude Code headless on the brief, copies the
# stream's last line to result.json, then records the CLI's exit status in done.
# POSIX sh only.
dir={dir}
home={home}
BOXFLEET_REPORT={report}
export BOXFLEET_REPORT
export BOXFLEET_AGENT_HANDLE
BOXFLEET_PATH_BIN={bin}
{path}
export PATH
rm -f "$dir/{done}" "$dir/{done}.tmp" "$dir/{result}" "$dir/{result}.tmp"
{clock}
job_started_ms=$(boxfleet_ms)
if cd "$home"; then
  {cli} {args} <"$dir/{brief}" >"$dir/{stream}" 2>"$dir/{stderr}"
  status=$?
else
  status=126
fi
if [ -s "$dir/{stream}" ]; then
  tail -n 1 "$dir/{stream}" >"$dir/{result}.tmp" && mv -f "$dir/{result}.tmp" "$dir/{result}"
fi
printf '%s\n%s %s\n' "$status" "$job_started_ms" "$(boxfleet_ms)" >"$dir/{done}.tmp" && mv -f "$dir/{done}.tmp" "$dir/{done}"
"#,
        clock = layout::JOB_CLOCK,
        path = layout::JOB_PATH,
        dir = sh_quote(dir),
        home = sh_quote(home),
        report = sh_quote(&layout::report(home)),
        bin = sh_quote(&layout::bin_dir(home)),
        cli = sh_quote(cli),
        args = cli_args(model, max_turns, mcp_config.as_deref()),
        brief = BRIEF,
        stream = STREAM,
        stderr = layout::STDERR,
        result = RESULT,
        done = layout::DONE,
    )
}

/// Decodes the stream's bytes (redaction happens on each piece kept, whole, before it is cut).
pub(crate) fn decode(bytes: &[u8], clipped: bool) -> (ClaudeStream, Option<String>) {
    let text = String::from_utf8_lossy(bytes);
    let text = if clipped {
        text.find('\n').map_or("", |at| &text[at + 1..])
    } else {
        &text[..]
    };
    let mut stream = ClaudeStream::new();
    let mut last_line = None;
    for line in text.lines() {
        stream.push_line(line);
        if !line.trim().is_empty() {
            last_line = Some(line);
        }
    }
    (stream, last_line.map(str::to_owned))
}

#[async_trait]
impl Runner for ClaudeCodeRunner {
    fn name(&self) -> &str {
        "claude-code"
    }

    async fn install(&self, sandbox: &dyn Sandbox) -> Result<(), BoxError> {
        common::install(sandbox, "claude-code").await
    }

    async fn start(
        &self,
        sandbox: &dyn Sandbox,
        launch: &LaunchSpec,
    ) -> Result<JobHandle, BoxError> {
        common::check_brief(launch, "claude-code")?;
        let home = sandbox.home();
        let dir = layout::job_dir(home, &launch.launch_id);
        sandbox
            .write_file(
                &layout::in_job(&dir, BRIEF),
                common::full_brief(&launch.brief).as_bytes(),
            )
            .await?;
        let mcp = !launch.mcp.is_empty();
        if mcp {
            let config = mcp_config(&launch.mcp).to_string();
            sandbox
                .write_file(&layout::in_job(&dir, MCP_CONFIG), config.as_bytes())
                .await?;
        }
        let wrapper = layout::in_job(&dir, layout::WRAPPER);
        sandbox
            .write_file(
                &wrapper,
                wrapper_script(
                    home,
                    &dir,
                    &self.cli,
                    launch.model.as_deref(),
                    launch.max_turns,
                    mcp,
                )
                .as_bytes(),
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

        // the event stream: the transcript, the model, and its last line
        let stream_path = layout::in_job(&job.dir, STREAM);
        let (stream, last_line, stream_read) =
            match sandbox.read_tail(&stream_path, 0, STREAM_READ_BYTES).await {
                Ok(tail) => {
                    let (stream, last_line) = decode(&tail.bytes, tail.offset > 0);
                    (stream, last_line, true)
                }
                Err(error) => {
                    errors.push("event stream", &stream_path, error);
                    (ClaudeStream::new(), None, false)
                }
            };

        // the result line: result.json, else the stream's own last line (what the copy would
        // have held); a result file the box refuses is read that way too, and the refusal said
        let result_path = layout::in_job(&job.dir, RESULT);
        let mut notes = Vec::new();
        let result_line = match sandbox.read_file(&result_path).await {
            Ok(Some(bytes)) if !String::from_utf8_lossy(&bytes).trim().is_empty() => {
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Ok(_) => last_line.clone(),
            Err(refusal @ (BoxError::NotRegular { .. } | BoxError::TooLarge { .. })) => {
                collected
                    .warnings
                    .push(format!("{RESULT_REFUSED}: {refusal}"));
                notes.push(format!(
                    "[boxfleet] {refusal}; the result was read from the event stream's last line"
                ));
                last_line.clone()
            }
            Err(error) => {
                errors.push("result", &result_path, error);
                last_line.clone()
            }
        };
        let result = result_line.as_deref().and_then(ClaudeResult::from_line);

        if let Some(result) = &result {
            let usage = result.usage;
            collected.input_tokens = usage.input_tokens;
            collected.output_tokens = usage.output_tokens;
            collected.cache_read_tokens = usage.cache_read_tokens;
            collected.cache_write_tokens = usage.cache_write_tokens;
            collected.cost_micros = usage.cost_micros;
            collected.cost_reported = result.cost_reported;
            collected.session_id = result.session_id.clone();
            if usage.negative {
                collected.warnings.push(USAGE_NEGATIVE.to_owned());
            }
        }
        if collected.session_id.is_none() {
            collected.session_id = stream.session_id().map(str::to_owned);
        }
        if let Some((model, source)) = stream.effective_model() {
            collected.effective_model = Some(model);
            collected.model_source = Some(source.to_owned());
        }
        let failure = cli_failure(result.as_ref(), &stream, last_line.as_deref(), stream_read);
        let spoke = stream.events() > 0;
        collected.transcript = stream.into_transcript();

        // the report: the findings file, else the final message
        let final_text = result
            .as_ref()
            .and_then(|r| r.text.as_deref())
            .map(boxfleet_redact::redact);
        match common::read_report(sandbox, &mut errors).await {
            Ok(Some(report)) => {
                collected.delivered_refs = run_refs(Some(&report), final_text.as_deref());
                collected.report = report;
            }
            Ok(None) => {
                collected.delivered_refs = run_refs(None, final_text.as_deref());
                collected.report = match (&final_text, &failure) {
                    (Some(text), _) if !text.trim().is_empty() => text.clone(),
                    (_, Some(failure)) => format!("The run did not succeed: {failure}\n"),
                    _ => String::new(),
                };
            }
            // never read as absent: no stand-in report, no refs from it
            Err(()) => {}
        }

        common::read_stderr(sandbox, job, &mut collected, &mut errors).await;
        if !spoke {
            // the error stream is the transcript only where the event stream said nothing
            collected.transcript = tail_lines(
                collected.stderr_tail.as_bytes(),
                false,
                STDERR_TRANSCRIPT_LINES,
            );
        }
        // how a run that did not succeed ended
        if let Some(failure) = &failure {
            collected.transcript.push(format!("[ended] {failure}"));
        }
        if !notes.is_empty() {
            notes.push(std::mem::take(&mut collected.stderr_tail));
            collected.stderr_tail = notes.join("\n");
        }
        common::finish_cli_collect(sandbox, collected, errors, failure.as_deref()).await
    }

    async fn follow_errors(
        &self,
        sandbox: &dyn Sandbox,
        job: &JobHandle,
        from: u64,
    ) -> Result<Followed, BoxError> {
        crate::common::follow_errors(sandbox, job, from).await
    }

    async fn follow(
        &self,
        sandbox: &dyn Sandbox,
        job: &JobHandle,
        from: u64,
    ) -> Result<Followed, BoxError> {
        let stream = layout::in_job(&job.dir, STREAM);
        let tail = sandbox
            .read_tail(&stream, from, FOLLOW_WINDOW_BYTES)
            .await?;
        Ok(follow_lines(&tail.bytes, tail.offset, tail.offset > from))
    }
}

/// How a Claude Code run that did not succeed ended, from its result line, else its stream:
/// `None` when it succeeded, or when the stream could not be read (that read error says it).
/// Never a silent success: a stream that stopped before its result, output that is not the
/// stream, and a CLI that printed nothing each read as what they are.
fn cli_failure(
    result: Option<&ClaudeResult>,
    stream: &ClaudeStream,
    last_line: Option<&str>,
    stream_read: bool,
) -> Option<String> {
    if let Some(result) = result {
        return result.failed().then(|| result.failure());
    }
    if !stream_read {
        return None;
    }
    if stream.events() > 0 {
        let last_type = stream
            .last()
            .and_then(|v| v.get("type"))
            .and_then(|t| t.as_str())
            .unwrap_or("not a message");
        let doing = stream
            .last_said()
            .map(|said| format!("; it was at: {said}"))
            .unwrap_or_default();
        return Some(format!(
            "the stream ended before the run said how it ended (its last line: {last_type}{doing})"
        ));
    }
    Some(match last_line {
        Some(line) => format!(
            "the CLI printed no event stream: its output is not stream-json (its last line: {})",
            crate::transcript::first_line(line)
        ),
        None => "the CLI printed nothing: no event stream and no result (is it installed, and \
                 does it take its arguments? its stderr may say)"
            .to_owned(),
    })
}

/// The transcript of the whole lines in `bytes` (read from `offset`; a partial first line
/// dropped when `clipped`), spanning through the last line break.
pub(crate) fn follow_lines(bytes: &[u8], offset: u64, clipped: bool) -> Followed {
    let mut begin = 0;
    if clipped {
        match bytes.iter().position(|&b| b == b'\n') {
            Some(at) => begin = at + 1,
            None => {
                return Followed {
                    text: String::new(),
                    start: offset,
                    end: offset,
                };
            }
        }
    }
    let body = &bytes[begin..];
    let end = body
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    let (stream, _) = decode(&body[..end], false);
    let (mut text, _, _) = whole_chars(stream.transcript().join("\n").as_bytes(), 0);
    if !text.is_empty() {
        text.push('\n');
    }
    let start = offset + begin as u64;
    Followed {
        text,
        start,
        end: start + end as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invocation_is_pinned() {
        assert_eq!(
            cli_args(Some("claude-sonnet-4-5"), Some(30), None),
            "-p --output-format stream-json --verbose --permission-mode bypassPermissions --model 'claude-sonnet-4-5' --max-turns 30"
        );
        assert_eq!(
            cli_args(None, Some(0), None),
            "-p --output-format stream-json --verbose --permission-mode bypassPermissions"
        );
        assert_eq!(
            cli_args(None, None, Some("/h/.boxfleet/jobs/L/mcp.json")),
            "-p --output-format stream-json --verbose --permission-mode bypassPermissions --mcp-config '/h/.boxfleet/jobs/L/mcp.json' --strict-mcp-config"
        );
    }

    #[test]
    fn mcp_servers_render_as_claude_codes_config() {
        let servers = crate::test_mcp::servers();
        assert_eq!(
            mcp_config(&servers),
            serde_json::json!({"mcpServers": {
                "everything": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"TOKEN": "t0k"}},
                "boxfleet": {"type": "http", "url": "http://127.0.0.1:7480/mcp/bfr1.k1.p.m", "headers": {"X-Seat": "eng"}},
            }})
        );
    }

    #[test]
    fn the_wrapper_is_plain_sh() {
        let script = wrapper_script(
            "/h",
            "/h/.boxfleet/jobs/L",
            "/opt/my claude",
            Some("m'x"),
            None,
            true,
        );
        assert!(script.contains("--mcp-config '/h/.boxfleet/jobs/L/mcp.json' --strict-mcp-config"));
        assert!(script.contains(r"'/opt/my claude' -p --output-format stream-json"));
        assert!(script.contains(r"--model 'm'\''x'"));
        for bashism in [
            "[[",
            "function ",
            "$'",
            "<<<",
            "&>",
            "source ",
            "pipefail",
            "local ",
            "|",
        ] {
            assert!(!script.contains(bashism), "the wrapper has {bashism:?}");
        }
    }

    #[test]
    fn follow_keeps_whole_lines() {
        let bytes = br#"tial"}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":"Bash","input":{"command":"ls"}}]}}
{"type":"assis"#;
        let f = follow_lines(bytes, 100, true);
        assert_eq!(f.text, "[tool] Bash: ls\n");
        assert_eq!(f.start, 107);
        assert_eq!(f.end, 107 + 113);
    }
}
