//! The `opencode` runner: OpenCode 2 driven by a POSIX-sh script around a server of its own
//! (DESIGN §10; the spec's "OpenCode").
//!
//! `start` writes OpenCode's configuration (`opencode.json`) into the checkout (the box's
//! home, where the job runs), the brief to `brief.md` and the script to `wrapper.sh` in the
//! job directory, and starts the script. The script refuses a 1.x box by name; imports the
//! box's exported login when it was given one; unsets `OPENCODE_PASSWORD` and
//! `OPENCODE_SERVER_PASSWORD`, starts `opencode serve` on a loopback port of its own and
//! waits (at most 60 s) until the server has printed where it listens and the password it
//! minted, naming whichever it never printed; runs the brief on stdin against that server
//! (`opencode run --attach … --format json --session … --title … --model …`, the password
//! handed to the client alone), its events in `stream.jsonl`; appends the session's report
//! (`opencode api session.get`) as the stream's last line; exports the login back (every
//! 30 s while it works, once more at its end and on SIGTERM/SIGINT/SIGHUP, exiting
//! 143/130/129); stops the server; and writes the CLI's exit status to `done`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use boxfleet_actors::ports::{
    BoxError, Collected, Followed, JobHandle, JobState, LaunchSpec, McpTransport, RenderedMcp,
    Runner, Sandbox,
};
use serde_json::{Value, json};

use crate::common::{self, ReadErrors, tail_lines, whole_chars};
use crate::layout::{self, sh_quote};
use crate::opencode_stream::OpenCodeStream;
use crate::refs::run_refs;
use crate::transcript::USAGE_NEGATIVE;

/// The event stream, in the job directory.
pub const STREAM: &str = "stream.jsonl";
/// The brief, fed to the CLI on stdin.
pub const BRIEF: &str = "brief.md";
/// OpenCode's configuration, written into the checkout.
pub const CONFIG: &str = "opencode.json";
/// The custom provider's name when the role's entry sets a base URL.
pub const PROVIDER: &str = "boxfleet";
/// The exit status of a run refused before anything ran (a 1.x box, a server that never
/// came up): `EX_CONFIG`.
pub const REFUSED_EXIT: i32 = 78;
/// The launch env keys that carry the role's endpoint (read, and not exported to the box).
pub const ENV_BASE_URL: &str = "BOXFLEET_OPENCODE_BASE_URL";
/// `openai` (the default) or `anthropic`: the wire of the entry behind `ENV_BASE_URL`.
pub const ENV_WIRE: &str = "BOXFLEET_OPENCODE_WIRE";
/// The run's variable naming the exported login seeded into the box (the node's
/// `credentials::OPENCODE_LOGIN_ENV`), which the script imports and exports back over.
pub const ENV_LOGIN: &str = "BOXFLEET_OPENCODE_LOGIN";
/// The most of the stream's end a collection decodes.
pub const STREAM_READ_BYTES: u64 = 32 * 1024 * 1024;
/// The most a `follow` reads.
pub const FOLLOW_WINDOW_BYTES: u64 = 1024 * 1024;

/// The wire of the role's LLM entry, as OpenCode's native package for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    #[default]
    OpenAi,
    Anthropic,
}

/// A custom endpoint: declared as OpenCode's provider `boxfleet`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomProvider {
    pub base_url: String,
    pub wire: Wire,
}

/// The runner's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCodeOptions {
    /// the CLI: a command on `PATH` or a path
    pub cli: String,
    /// the shell the script runs under
    pub shell: Vec<String>,
    /// a custom endpoint for every launch that names none of its own
    pub provider: Option<CustomProvider>,
    /// where the box keeps the exported login (`opencode auth export`), when it was given one
    pub credentials: Option<String>,
}

impl Default for OpenCodeOptions {
    fn default() -> Self {
        OpenCodeOptions {
            cli: "opencode".to_owned(),
            shell: vec!["sh".to_owned()],
            provider: None,
            credentials: None,
        }
    }
}

/// The `opencode` runner.
#[derive(Debug, Clone, Default)]
pub struct OpenCodeRunner {
    options: OpenCodeOptions,
}

impl OpenCodeRunner {
    pub fn new() -> Self {
        OpenCodeRunner::default()
    }

    pub fn with_options(options: OpenCodeOptions) -> Self {
        OpenCodeRunner { options }
    }

    pub fn with_cli(mut self, cli: impl Into<String>) -> Self {
        let cli = cli.into();
        if !cli.trim().is_empty() {
            self.options.cli = cli;
        }
        self
    }

    pub fn with_shell<I, S>(mut self, shell: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let shell: Vec<String> = shell.into_iter().map(Into::into).collect();
        if !shell.is_empty() {
            self.options.shell = shell;
        }
        self
    }

    pub fn options(&self) -> &OpenCodeOptions {
        &self.options
    }
}

/// OpenCode's configuration for one run: every permission allowed but `question`, sharing,
/// self-update and snapshots off, the MCP servers the launch gives the agent (OpenCode 2's
/// `mcp.servers`: a stdio server `local`, its command and arguments one list, its variables
/// `environment`; an HTTP one `remote` with its headers — every value resolved), and the
/// custom provider when the entry sets a base URL — its key read from the run environment,
/// never written here.
pub fn config(
    provider: Option<&CustomProvider>,
    model: Option<&str>,
    mcp: &[RenderedMcp],
) -> Value {
    let mut servers = serde_json::Map::new();
    for server in mcp {
        let entry = match &server.transport {
            McpTransport::Stdio { command, args, env } => {
                let argv: Vec<&str> = std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect();
                json!({ "type": "local", "command": argv, "environment": env })
            }
            McpTransport::Http { url, headers } => {
                json!({ "type": "remote", "url": url, "headers": headers })
            }
        };
        servers.insert(server.name.clone(), entry);
    }
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "permission": { "*": "allow", "question": "deny" },
        "share": "disabled",
        "update": "disable",
        "snapshots": false,
        "mcp": { "servers": servers },
    });
    if let Some(provider) = provider {
        let (package, key_env, base_url) = match provider.wire {
            Wire::OpenAi => (
                "@opencode/ai/providers/openai-compatible",
                "OPENAI_API_KEY",
                provider.base_url.clone(),
            ),
            Wire::Anthropic => (
                "@opencode/ai/providers/anthropic-compatible",
                "ANTHROPIC_API_KEY",
                format!("{}/v1", provider.base_url.trim_end_matches('/')),
            ),
        };
        let mut models = serde_json::Map::new();
        if let Some(model) = model.map(bare_model).filter(|m| !m.is_empty()) {
            models.insert(model.to_owned(), json!({ "name": model }));
        }
        config["provider"] = json!({
            PROVIDER: {
                "package": package,
                "env": [key_env],
                "settings": { "baseURL": base_url },
                "models": models,
            }
        });
    }
    config
}

fn bare_model(model: &str) -> &str {
    model
        .strip_prefix(PROVIDER)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(model)
}

/// The `--model` a run is handed: as written, or `boxfleet/<model>` under a custom provider.
pub fn run_model(provider: Option<&CustomProvider>, model: Option<&str>) -> Option<String> {
    let model = model.map(str::trim).filter(|m| !m.is_empty())?;
    Some(match provider {
        Some(_) => format!("{PROVIDER}/{}", bare_model(model)),
        None => model.to_owned(),
    })
}

/// The script for one job (POSIX sh: it runs under dash, `bash --posix` and busybox ash).
pub fn wrapper_script(
    home: &str,
    dir: &str,
    cli: &str,
    model: Option<&str>,
    launch_id: &str,
    credentials: Option<&str>,
) -> String {
    let model_args = match model {
        Some(model) => format!(" --model {}", sh_quote(model)),
        None => String::new(),
    };
    SCRIPT
        .replace("__DIR__", &sh_quote(dir))
        .replace("__HOME__", &sh_quote(home))
        .replace("__REPORT__", &sh_quote(&layout::report(home)))
        .replace("__BIN__", &sh_quote(&layout::bin_dir(home)))
        .replace("__CLI__", &sh_quote(cli))
        .replace("__SESSION__", &sh_quote(&format!("boxfleet-{launch_id}")))
        .replace("__TITLE__", &sh_quote(&format!("boxfleet run {launch_id}")))
        .replace("__CREDS__", &sh_quote(credentials.unwrap_or("")))
        .replace("__MODEL_ARGS__", &model_args)
        .replace("__REFUSED__", &REFUSED_EXIT.to_string())
        .replace("__CLOCK__", layout::JOB_CLOCK)
        .replace("__PATH__", layout::JOB_PATH)
}

const SCRIPT: &str = r#"# boxfleet opencode wrapper: OpenCode 2 around a server of its own. POSIX sh only.
dir=__DIR__
home=__HOME__
cli=__CLI__
session=__SESSION__
title=__TITLE__
creds=__CREDS__
BOXFLEET_REPORT=__REPORT__
export BOXFLEET_REPORT
export BOXFLEET_AGENT_HANDLE
BOXFLEET_PATH_BIN=__BIN__
__PATH__
export PATH
# the server's password is always its own: it prints none when handed one
unset OPENCODE_PASSWORD OPENCODE_SERVER_PASSWORD
rm -f "$dir/done" "$dir/done.tmp" "$dir/session.json"
__CLOCK__
job_started_ms=$(boxfleet_ms)
: >"$dir/stream.jsonl"
: >"$dir/stderr.log"
server_pid=
exporter_pid=
url=
password=

export_login() {
  [ -n "$creds" ] && [ -n "$url" ] && [ -n "$password" ] || return 0
  OPENCODE_PASSWORD=$password "$cli" auth export --attach "$url" >"$dir/login.tmp" 2>/dev/null || return 0
  squeezed=$(tr -d ' \t\r\n' <"$dir/login.tmp")
  case $squeezed in
    '['*']') ;;
    *) return 0 ;;
  esac
  [ "$squeezed" = '[]' ] && return 0
  cmp -s "$dir/login.tmp" "$creds" && return 0
  cp "$dir/login.tmp" "$creds.tmp" && mv -f "$creds.tmp" "$creds"
}

finish() {
  trap '' TERM INT HUP
  if [ -n "$exporter_pid" ]; then kill "$exporter_pid" 2>/dev/null; fi
  export_login
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -f "$dir/login.tmp"
  printf '%s\n%s %s\n' "$1" "$job_started_ms" "$(boxfleet_ms)" >"$dir/done.tmp" && mv -f "$dir/done.tmp" "$dir/done"
  exit "$1"
}

trap 'finish 143' TERM
trap 'finish 130' INT
trap 'finish 129' HUP

cd "$home" || finish 126

# OpenCode 1.x cannot run this script: refused by name before anything runs
version=$("$cli" --version 2>>"$dir/stderr.log")
vstatus=$?
if [ "$vstatus" -ne 0 ]; then
  echo "boxfleet: $cli --version failed (exit $vstatus); is OpenCode 2 (@opencode/cli) installed?" >>"$dir/stderr.log"
  finish "$vstatus"
fi
number=${version##* }
number=${number#v}
case $number in
  [01].*)
    echo "boxfleet: this box runs OpenCode $number; the opencode runner drives OpenCode 2 (the @opencode/cli package, whose opencode --version prints opencode v2...). Install @opencode/cli in the box image." >>"$dir/stderr.log"
    finish __REFUSED__
    ;;
esac

# the box's login, imported before the server starts
if [ -n "$creds" ] && [ -s "$creds" ]; then
  "$cli" auth import "$creds" >/dev/null 2>>"$dir/stderr.log" || echo "boxfleet: importing the login failed" >>"$dir/stderr.log"
fi

"$cli" serve --hostname 127.0.0.1 --port 0 </dev/null >"$dir/serve.log" 2>&1 &
server_pid=$!
waited=0
while [ "$waited" -lt 600 ]; do
  url=$(sed -n 's/.*listening on \(https*:\/\/[^ ]*\).*/\1/p' "$dir/serve.log" | head -n 1)
  password=$(sed -n 's/.*password: *\([^ ]*\).*/\1/p' "$dir/serve.log" | head -n 1)
  [ -n "$url" ] && [ -n "$password" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1 2>/dev/null || sleep 1
  waited=$((waited + 1))
done
if [ -z "$url" ] || [ -z "$password" ]; then
  [ -n "$url" ] || echo "boxfleet: opencode serve never printed where it listens" >>"$dir/stderr.log"
  [ -n "$password" ] || echo "boxfleet: opencode serve never printed the password it minted" >>"$dir/stderr.log"
  finish __REFUSED__
fi

if [ -n "$creds" ]; then
  ( while sleep 30; do export_login; done ) &
  exporter_pid=$!
fi

OPENCODE_PASSWORD=$password "$cli" run --attach "$url" --format json --session "$session" --title "$title"__MODEL_ARGS__ <"$dir/brief.md" >>"$dir/stream.jsonl" 2>>"$dir/stderr.log"
status=$?

if OPENCODE_PASSWORD=$password "$cli" api session.get --attach "$url" --session "$session" >"$dir/session.json" 2>>"$dir/stderr.log" && [ -s "$dir/session.json" ]; then
  {
    printf '{"type":"session_report","session":'
    tr -d '\r\n' <"$dir/session.json"
    printf '}\n'
  } >>"$dir/stream.jsonl"
else
  echo "boxfleet: the session's usage report could not be read" >>"$dir/stderr.log"
fi
finish "$status"
"#;

fn decode(bytes: &[u8], clipped: bool) -> OpenCodeStream {
    let text = String::from_utf8_lossy(bytes);
    let text = if clipped {
        text.find('\n').map_or("", |at| &text[at + 1..])
    } else {
        &text[..]
    };
    let mut stream = OpenCodeStream::new();
    for line in text.lines() {
        stream.push_line(line);
    }
    stream
}

/// The agentic-round cap (`max_turns`): OpenCode counts an agent's rounds as its `steps`, so the
/// agent a run uses (`build`) is capped there; none or 0 leaves it uncapped.
pub fn cap_steps(config: &mut Value, max_turns: Option<u32>) {
    if let Some(steps) = max_turns.filter(|&n| n > 0) {
        config["agent"] = json!({ "build": { "steps": steps } });
    }
}

fn launch_provider(
    default: Option<&CustomProvider>,
    env: &BTreeMap<String, String>,
) -> Option<CustomProvider> {
    match env
        .get(ENV_BASE_URL)
        .map(|u| u.trim())
        .filter(|u| !u.is_empty())
    {
        Some(base_url) => Some(CustomProvider {
            base_url: base_url.to_owned(),
            wire: match env.get(ENV_WIRE).map(|w| w.trim().to_ascii_lowercase()) {
                Some(wire) if wire == "anthropic" => Wire::Anthropic,
                _ => Wire::OpenAi,
            },
        }),
        None => default.cloned(),
    }
}

#[async_trait]
impl Runner for OpenCodeRunner {
    fn name(&self) -> &str {
        "opencode"
    }

    async fn install(&self, sandbox: &dyn Sandbox) -> Result<(), BoxError> {
        common::install(sandbox, "opencode").await
    }

    async fn start(
        &self,
        sandbox: &dyn Sandbox,
        launch: &LaunchSpec,
    ) -> Result<JobHandle, BoxError> {
        common::check_brief(launch, "opencode")?;
        let home = sandbox.home();
        let dir = layout::job_dir(home, &launch.launch_id);
        let provider = launch_provider(self.options.provider.as_ref(), &launch.env);
        let model = run_model(provider.as_ref(), launch.model.as_deref());
        // written on every run: a run that wrote none would inherit the last run's
        let mut config = config(provider.as_ref(), launch.model.as_deref(), &launch.mcp);
        cap_steps(&mut config, launch.max_turns);
        let mut config_text = serde_json::to_string_pretty(&config)
            .map_err(|e| BoxError::Failed(format!("opencode.json: {e}")))?;
        config_text.push('\n');
        sandbox
            .write_file(
                &format!("{}/{CONFIG}", home.trim_end_matches('/')),
                config_text.as_bytes(),
            )
            .await?;
        sandbox
            .write_file(
                &layout::in_job(&dir, BRIEF),
                common::full_brief(&launch.brief).as_bytes(),
            )
            .await?;
        let wrapper = layout::in_job(&dir, layout::WRAPPER);
        sandbox
            .write_file(
                &wrapper,
                wrapper_script(
                    home,
                    &dir,
                    &self.options.cli,
                    model.as_deref(),
                    &launch.launch_id,
                    launch
                        .env
                        .get(ENV_LOGIN)
                        .map(String::as_str)
                        .or(self.options.credentials.as_deref()),
                )
                .as_bytes(),
            )
            .await?;
        let mut env = launch.env.clone();
        env.remove(ENV_BASE_URL);
        env.remove(ENV_WIRE);
        env.remove(ENV_LOGIN);
        common::start_wrapper(
            sandbox,
            &self.options.shell,
            &wrapper,
            env,
            &launch.seat,
            &dir,
        )
        .await
    }

    async fn poll(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> Result<JobState, BoxError> {
        common::poll(sandbox, job).await
    }

    async fn collect(&self, sandbox: &dyn Sandbox, job: &JobHandle) -> Result<Collected, BoxError> {
        let mut collected = Collected::default();
        let mut errors = ReadErrors::default();
        common::read_exit(sandbox, job, &mut collected, &mut errors).await;

        let stream_path = layout::in_job(&job.dir, STREAM);
        let (stream, stream_read) =
            match sandbox.read_tail(&stream_path, 0, STREAM_READ_BYTES).await {
                Ok(tail) => (decode(&tail.bytes, tail.offset > 0), true),
                Err(error) => {
                    errors.push("event stream", &stream_path, error);
                    (OpenCodeStream::new(), false)
                }
            };
        // a missing report reports zero rather than an estimate
        if let Some(usage) = stream.usage() {
            collected.input_tokens = usage.input_tokens;
            collected.output_tokens = usage.output_tokens;
            collected.cache_read_tokens = usage.cache_read_tokens;
            collected.cache_write_tokens = usage.cache_write_tokens;
            collected.cost_micros = usage.cost_micros;
            // zero where OpenCode has no pricing for the provider: no price
            collected.cost_reported = usage.cost_micros > 0;
            if usage.negative {
                collected.warnings.push(USAGE_NEGATIVE.to_owned());
            }
        }
        if let Some((model, source)) = stream.effective_model() {
            collected.effective_model = Some(model);
            collected.model_source = Some(source.to_owned());
        }
        collected.session_id = stream
            .report()
            .and_then(|report| report.get("id"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        collected.transcript = stream.transcript();
        let failure = stream.errors().first().cloned().or_else(|| {
            // never a silent success, and never an ending left unsaid
            if !stream_read {
                None
            } else if stream.events() == 0 {
                let nothing = "OpenCode printed no events and no session report";
                Some(match collected.exit_code {
                    Some(code) if code != 0 => format!("{nothing} (exited with status {code})"),
                    _ => nothing.to_owned(),
                })
            } else {
                match collected.exit_code {
                    Some(code) if code != 0 => Some(format!(
                        "exited with status {code} without an error event{}",
                        stream
                            .last_said()
                            .map(|said| format!(" (it was at: {said})"))
                            .unwrap_or_default()
                    )),
                    _ => None,
                }
            }
        });

        let final_text = stream.final_text().map(boxfleet_redact::redact);
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
            Err(()) => {}
        }

        common::read_stderr(sandbox, job, &mut collected, &mut errors).await;
        if stream.events() == 0 {
            collected.transcript = tail_lines(collected.stderr_tail.as_bytes(), false, 200);
        }
        // how a run that did not succeed ended, where its events did not already say it
        if let Some(failure) = &failure
            && stream.errors().is_empty()
        {
            collected.transcript.push(format!("[ended] {failure}"));
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
        let clipped = tail.offset > from;
        let mut begin = 0;
        if clipped {
            match tail.bytes.iter().position(|&b| b == b'\n') {
                Some(at) => begin = at + 1,
                None => {
                    return Ok(Followed {
                        text: String::new(),
                        start: tail.offset,
                        end: tail.offset,
                    });
                }
            }
        }
        let body = &tail.bytes[begin..];
        let end = body
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        let decoded = decode(&body[..end], false);
        let (mut text, _, _) = whole_chars(decoded.transcript().join("\n").as_bytes(), 0);
        if !text.is_empty() {
            text.push('\n');
        }
        let start = tail.offset + begin as u64;
        Ok(Followed {
            text,
            start,
            end: start + end as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_servers_render_as_opencode_2s_servers() {
        let servers = crate::test_mcp::servers();
        assert_eq!(
            config(None, None, &servers)["mcp"],
            json!({"servers": {
                "everything": {"type": "local", "command": ["npx", "-y", "@modelcontextprotocol/server-everything"], "environment": {"TOKEN": "t0k"}},
                "boxfleet": {"type": "remote", "url": "http://127.0.0.1:7480/mcp/bfr1.k1.p.m", "headers": {"X-Seat": "eng"}},
            }})
        );
        assert_eq!(config(None, None, &[])["mcp"], json!({"servers": {}}));
    }

    #[test]
    fn max_turns_caps_the_build_agents_steps() {
        let mut capped = config(None, None, &[]);
        cap_steps(&mut capped, Some(12));
        assert_eq!(capped["agent"], json!({"build": {"steps": 12}}));
        let mut uncapped = config(None, None, &[]);
        cap_steps(&mut uncapped, Some(0));
        assert!(uncapped.get("agent").is_none());
    }

    #[test]
    fn the_config_declares_a_custom_provider_only_for_a_base_url() {
        let plain = config(None, Some("anthropic/claude-sonnet-4-5"), &[]);
        assert_eq!(
            plain["permission"],
            json!({"*": "allow", "question": "deny"})
        );
        assert_eq!(plain["share"], "disabled");
        assert_eq!(plain["update"], "disable");
        assert_eq!(plain["snapshots"], false);
        assert!(plain.get("provider").is_none());
        let anthropic = CustomProvider {
            base_url: "https://gw.example.com/".into(),
            wire: Wire::Anthropic,
        };
        let custom = config(Some(&anthropic), Some("claude-sonnet-4-5"), &[]);
        assert_eq!(
            custom["provider"]["boxfleet"],
            json!({
                "package": "@opencode/ai/providers/anthropic-compatible",
                "env": ["ANTHROPIC_API_KEY"],
                "settings": {"baseURL": "https://gw.example.com/v1"},
                "models": {"claude-sonnet-4-5": {"name": "claude-sonnet-4-5"}},
            })
        );
        assert_eq!(
            run_model(Some(&anthropic), Some("claude-sonnet-4-5")).as_deref(),
            Some("boxfleet/claude-sonnet-4-5")
        );
        assert_eq!(
            run_model(None, Some("openrouter/anthropic/claude-sonnet-5")).as_deref(),
            Some("openrouter/anthropic/claude-sonnet-5")
        );
        let openai = CustomProvider {
            base_url: "https://llm.internal/v1".into(),
            wire: Wire::OpenAi,
        };
        assert_eq!(
            config(Some(&openai), None, &[])["provider"]["boxfleet"]["settings"]["baseURL"],
            "https://llm.internal/v1"
        );
    }

    #[test]
    fn the_script_is_plain_sh() {
        let script = wrapper_script(
            "/h",
            "/h/.boxfleet/jobs/L",
            "opencode",
            Some("a/b"),
            "L",
            None,
        );
        assert!(script.contains("--title \"$title\" --model 'a/b' <\"$dir/brief.md\""));
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
            assert!(!script.contains(bashism), "the script has {bashism:?}");
        }
    }
}
