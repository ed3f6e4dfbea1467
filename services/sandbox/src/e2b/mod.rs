//! `e2b`: a box is an E2B sandbox (DESIGN §9, the spec's "Sandbox backends"), driven over E2B's
//! documented REST control plane ([`api`]) and its in-box agent, envd ([`envd`]); no SDK. One
//! field, `domain`, switches between E2B's cloud (`e2b.app`) and a self-hosted cluster: the
//! control plane is `https://api.{domain}` and each box's envd `https://49983-{id}.{domain}`.
//!
//! - Every box is created secured (`secure: true`). Its envd access token is read again from
//!   each create, connect and get, and lives only in memory on the handle: it is never written
//!   to a record or a file, never put in a log line or an error, and the handle's `Debug`
//!   hides it. A template whose envd predates secured access (below 0.2.0) is refused at the
//!   create, and the box made for it killed.
//! - [`Provider::attach`] reads the box (`GET /sandboxes/{id}`) and refuses a paused one: a
//!   reader never wakes a box, and `POST /connect` would (and resets its timer).
//!   [`Provider::connect`] resumes (200: it was running, 201: it was resumed);
//!   [`Provider::kill`] deletes and never resumes, and a box already gone is success.
//! - The control plane is bounded per request by the control budget; commands by the
//!   output-silence bound (and the caller's timeout); file transfers by the transfer-idle bound.
//! - When envd does not answer (the edge's 502, a refused connection) the handle asks the
//!   control plane why: gone is [`BoxError::Gone`], paused is [`BoxError::Unreachable`] saying
//!   so (the handle never wakes it), anything else unreachable.
//! - Files are confined to the home (`/home/user`): a path is resolved there and refused when
//!   it leaves it. Before any transfer a small probe (`test -L`, `stat -c %F`, run through
//!   envd) checks each component of the path without opening it: a link anywhere on the path,
//!   a named pipe, a directory is refused, so nothing is followed and a fifo is never opened.
//!   The probe and the transfer are two calls: a path swapped for a link between them is not
//!   caught (E2B offers no no-follow read).
//! - A background job is `sh -c COMMAND` started detached as a session leader (`setsid`),
//!   stdin null, output to `{dir}/wrapper.log`; its identity is `pid:start_time` (the leader's
//!   pid and field 22 of `/proc/{pid}/stat`), checked in the box before every act, so a
//!   recycled pid is never mistaken for it or signalled. A kill reaches every process group in
//!   the job's session.

mod api;
mod envd;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{
    BoxError, BoxSpec, ExecOutput, JobHandle, MAX_FILE_BYTES, Provider, Sandbox, TailRead,
};
use serde_json::json;
use tracing::{debug, warn};

use api::{AccessToken, Api, ApiKey, SandboxInfo};
use envd::{Bounds, Download, Envd, EnvdError};

/// E2B's cloud.
pub const DEFAULT_DOMAIN: &str = "e2b.app";
/// The agent's home in every E2B box.
pub const HOME: &str = "/home/user";
/// The oldest envd that serves secured boxes.
const SECURE_ENVD: (u64, u64) = (0, 2);

/// How the `e2b` cell reaches E2B.
/// The metadata key a box carries its launch under (`find_by_launch`).
const LAUNCH_LABEL: &str = "boxfleet_launch_id";

#[derive(Clone)]
pub struct E2bConfig {
    /// `X-API-Key` (never shown by `Debug`)
    pub api_key: String,
    /// `e2b.app`, or a self-hosted cluster's domain
    pub domain: String,
    /// the control plane; `https://api.{domain}` when unset
    pub api_url: Option<String>,
    /// envd's address, `{sandbox_id}` standing for the box (`https://49983-{sandbox_id}.{domain}`
    /// when unset; a stand-in server for tests sets it)
    pub envd_url: Option<String>,
    /// the template boxes are made from; empty: the prebuilt template of each box's coding agent ([`template_for`])
    pub template: String,
    /// how long a box lives after a connect resumes it (E2B requires one)
    pub connect_timeout: Duration,
    /// the whole-request budget of every control-plane call
    pub control_budget: Duration,
    /// how long a command may print nothing before it is killed and reported
    pub output_silence: Duration,
    /// how long a file transfer may move no byte before it is abandoned
    pub transfer_idle: Duration,
}

impl E2bConfig {
    /// The defaults (DESIGN §9, §15): E2B's cloud, a 60 s control budget, 10 minutes of output
    /// silence, 60 s of transfer idleness, 15 minutes after a resume.
    pub fn new(api_key: impl Into<String>, template: impl Into<String>) -> Self {
        E2bConfig {
            api_key: api_key.into(),
            domain: DEFAULT_DOMAIN.into(),
            api_url: None,
            envd_url: None,
            template: template.into(),
            connect_timeout: Duration::from_secs(15 * 60),
            control_budget: Duration::from_secs(60),
            output_silence: Duration::from_secs(10 * 60),
            transfer_idle: Duration::from_secs(60),
        }
    }

    fn api_base(&self) -> String {
        self.api_url
            .clone()
            .unwrap_or_else(|| format!("https://api.{}", self.domain))
    }

    fn envd_base(&self, sandbox_id: &str, domain: Option<&str>) -> String {
        match &self.envd_url {
            Some(template) => template.replace("{sandbox_id}", sandbox_id),
            None => {
                let domain = domain.filter(|d| !d.is_empty()).unwrap_or(&self.domain);
                format!("https://{}-{sandbox_id}.{domain}", envd::ENVD_PORT)
            }
        }
    }
}

impl fmt::Debug for E2bConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("E2bConfig")
            .field("api_key", &"<redacted>")
            .field("domain", &self.domain)
            .field("api_url", &self.api_url)
            .field("envd_url", &self.envd_url)
            .field("template", &self.template)
            .field("connect_timeout", &self.connect_timeout)
            .field("control_budget", &self.control_budget)
            .field("output_silence", &self.output_silence)
            .field("transfer_idle", &self.transfer_idle)
            .finish()
    }
}

/// The `e2b` cell's provider.
#[derive(Debug, Clone)]
pub struct E2bProvider {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: E2bConfig,
    api: Api,
    http: reqwest::Client,
}

/// Whether an envd version serves secured boxes (0.2.0 and later).
fn envd_is_secure(version: &str) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= SECURE_ENVD
}

/// The template a box is made from: the configured one, or — empty — E2B's prebuilt template
/// with the coding agent's CLI preinstalled (`claude` for claude-code, `opencode` for
/// OpenCode), and `base` for a plain command.
pub fn template_for<'a>(configured: &'a str, coding_agent: &str) -> &'a str {
    if !configured.trim().is_empty() {
        return configured;
    }
    match coding_agent {
        "claude-code" => "claude",
        "opencode" => "opencode",
        _ => "base",
    }
}

/// An E2B sandbox id: lower-case letters and digits (the control plane mints them so, and its
/// edge proxy reads `{port}-{id}.{domain}` up to the first `-`, so an id with one would route
/// to another box).
fn valid_sandbox_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

impl E2bProvider {
    pub fn new(config: E2bConfig) -> Result<Self, BoxError> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.control_budget.min(Duration::from_secs(30)))
            .build()
            .map_err(|error| BoxError::Failed(format!("build the E2B HTTP client: {error}")))?;
        let api = Api::new(
            http.clone(),
            config.api_base(),
            ApiKey(config.api_key.clone()),
            config.control_budget,
        );
        Ok(E2bProvider {
            shared: Arc::new(Shared { config, api, http }),
        })
    }

    pub fn config(&self) -> &E2bConfig {
        &self.shared.config
    }

    /// The team's boxes and their states (`GET /v2/sandboxes`): `(sandbox_id, state)`.
    pub async fn list(&self) -> Result<Vec<(String, String)>, BoxError> {
        Ok(self
            .shared
            .api
            .list()
            .await?
            .into_iter()
            .map(|info| (info.sandbox_id, info.state.unwrap_or_default()))
            .collect())
    }

    fn handle(&self, sandbox_id: &str, info: SandboxInfo) -> Result<E2bSandbox, BoxError> {
        let Some(token) = info.envd_access_token.filter(|t| !t.is_empty()) else {
            return Err(BoxError::Failed(format!(
                "box {sandbox_id} came back without an envd access token: it is not a secured \
                 box, and boxfleet drives only secured ones; kill it and create another"
            )));
        };
        Ok(E2bSandbox {
            id: sandbox_id.to_owned(),
            home: HOME.to_owned(),
            envd: Envd {
                http: self.shared.http.clone(),
                base: self
                    .shared
                    .config
                    .envd_base(sandbox_id, info.domain.as_deref()),
                sandbox_id: sandbox_id.to_owned(),
                token: AccessToken(token),
            },
            shared: self.shared.clone(),
        })
    }

    fn check_id(sandbox_id: &str) -> Result<(), BoxError> {
        if valid_sandbox_id(sandbox_id) {
            Ok(())
        } else {
            Err(BoxError::Failed(format!(
                "{sandbox_id:?} is not an E2B sandbox id (lower-case letters and digits)"
            )))
        }
    }
}

#[async_trait]
impl Provider for E2bProvider {
    fn cell(&self) -> &str {
        "e2b"
    }

    async fn create(&self, spec: &BoxSpec) -> Result<Arc<dyn Sandbox>, BoxError> {
        check_env(&spec.env)?;
        let config = &self.shared.config;
        let template = template_for(&config.template, &spec.coding_agent);
        let info = self
            .shared
            .api
            .create(
                template,
                spec.timeout_seconds,
                // the launch labels the box: a node that dies before the id reaches the run's
                // row leaves a box the reap finds by it (find_by_launch)
                json!({
                    "turn_id": spec.turn_id,
                    "seat": spec.seat,
                    LAUNCH_LABEL: spec.launch_id,
                }),
                json!(spec.env),
            )
            .await?;
        let sandbox_id = info.sandbox_id.clone();
        if !valid_sandbox_id(&sandbox_id) {
            return Err(BoxError::Failed(format!(
                "E2B answered the create with an unusable sandbox id {sandbox_id:?}"
            )));
        }
        let version = info.envd_version.clone().unwrap_or_default();
        if !envd_is_secure(&version) {
            if let Err(error) = self.shared.api.kill(&sandbox_id).await {
                warn!(sandbox_id = %sandbox_id, error = %error, "e2b_sandbox_kill_failed");
            }
            return Err(BoxError::Failed(format!(
                "template {:?} runs envd {version:?}, which predates secured access (0.2.0): \
                 rebuild the template with a current E2B CLI",
                template
            )));
        }
        let sandbox = match self.handle(&sandbox_id, info) {
            Ok(sandbox) => sandbox,
            Err(error) => {
                let _ = self.shared.api.kill(&sandbox_id).await;
                return Err(error);
            }
        };
        debug!(sandbox_id = %sandbox_id, template = %template, "e2b_sandbox_created");
        Ok(Arc::new(sandbox))
    }

    async fn find_by_launch(
        &self,
        turn_id: &str,
        launch_id: &str,
    ) -> Result<Vec<String>, BoxError> {
        if launch_id.is_empty() {
            return Ok(Vec::new());
        }
        let found = self
            .shared
            .api
            .list_labelled(&[("turn_id", turn_id), (LAUNCH_LABEL, launch_id)])
            .await?;
        Ok(found
            .into_iter()
            .map(|info| info.sandbox_id)
            .filter(|id| valid_sandbox_id(id))
            .collect())
    }

    async fn attach(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        Self::check_id(sandbox_id)?;
        let Some(info) = self.shared.api.get(sandbox_id).await? else {
            return Err(BoxError::Gone(sandbox_id.to_owned()));
        };
        if info.state.as_deref() == Some("paused") {
            return Err(BoxError::Unreachable(format!(
                "box {sandbox_id} is paused, and attach never wakes a box; connect resumes it"
            )));
        }
        Ok(Arc::new(self.handle(sandbox_id, info)?))
    }

    async fn connect(&self, sandbox_id: &str) -> Result<Arc<dyn Sandbox>, BoxError> {
        Self::check_id(sandbox_id)?;
        let timeout = self.shared.config.connect_timeout.as_secs();
        let Some((info, resumed)) = self.shared.api.connect(sandbox_id, timeout).await? else {
            return Err(BoxError::Gone(sandbox_id.to_owned()));
        };
        debug!(sandbox_id = %sandbox_id, resumed, "e2b_sandbox_connected");
        Ok(Arc::new(self.handle(sandbox_id, info)?))
    }

    async fn kill(&self, sandbox_id: &str) -> Result<(), BoxError> {
        Self::check_id(sandbox_id)?;
        self.shared.api.kill(sandbox_id).await
    }
}

fn check_env(env: &BTreeMap<String, String>) -> Result<(), BoxError> {
    for (name, value) in env {
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(BoxError::Failed(format!(
                "refused environment variable {name:?}: not a usable name or value"
            )));
        }
    }
    Ok(())
}

/// One E2B box. Its `Debug` never shows the access token.
#[derive(Debug, Clone)]
pub struct E2bSandbox {
    id: String,
    home: String,
    envd: Envd,
    shared: Arc<Shared>,
}

/// Quotes a word for `sh`.
fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A path in the box, confined to its home.
struct BoxPath {
    /// the absolute in-box path
    absolute: String,
    /// its components below the home
    components: Vec<String>,
}

/// Resolves `path` (relative to the home, `~/…`, or absolute inside the home) lexically.
fn resolve(path: &str) -> Result<BoxPath, BoxError> {
    let refuse = |why: &str| {
        BoxError::Failed(format!(
            "refused path {path:?}: {why}; paths are confined to the box's home {HOME}"
        ))
    };
    if path.contains('\0') {
        return Err(refuse("it holds a NUL byte"));
    }
    let relative = if path == "~" {
        ""
    } else if let Some(rest) = path.strip_prefix("~/") {
        rest
    } else if path == HOME {
        ""
    } else if let Some(rest) = path.strip_prefix(&format!("{HOME}/")) {
        rest
    } else if path.starts_with('/') {
        return Err(refuse("it is outside the home"));
    } else {
        path
    };
    let mut components: Vec<String> = Vec::new();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if components.pop().is_none() {
                    return Err(refuse("it climbs out of the home"));
                }
            }
            other => components.push(other.to_owned()),
        }
    }
    let mut absolute = HOME.to_owned();
    for component in &components {
        absolute.push('/');
        absolute.push_str(component);
    }
    Ok(BoxPath {
        absolute,
        components,
    })
}

/// A shell fragment that walks `path` from the home without following anything, leaving in
/// `$p` the path and in `$k` `link` (a link on the way, or at the end), `none` (nothing
/// there), or the file type `stat -c %F` names.
fn probe(path: &BoxPath) -> String {
    let mut script = format!("p={}\nk=\nfor c in", sh_quote(HOME));
    for component in &path.components {
        script.push(' ');
        script.push_str(&sh_quote(component));
    }
    script.push_str(
        "; do p=\"$p/$c\"; if [ -L \"$p\" ]; then k=link; break; fi; \
         if [ ! -e \"$p\" ]; then k=none; break; fi; done\n\
         if [ -z \"$k\" ]; then k=$(stat -c %F -- \"$p\") || exit 3; fi\n",
    );
    script
}

/// What a file type is, in words, for a refusal (as `direct` says it).
fn describe(kind: &str) -> String {
    match kind {
        "link" | "symbolic link" => "a symbolic link".into(),
        "directory" => "a directory".into(),
        "fifo" => "a named pipe".into(),
        "socket" => "a socket".into(),
        "block special file" => "a block device".into(),
        "character special file" => "a character device".into(),
        other => format!("a {other}"),
    }
}

fn is_regular(kind: &str) -> bool {
    kind == "regular file" || kind == "regular empty file"
}

/// A job identity: the leader's pid and its start time (clock ticks since boot).
fn parse_job(job: &JobHandle) -> Result<(u32, u64), BoxError> {
    let parsed = job.id.split_once(':').and_then(|(pid, start)| {
        let pid: u32 = pid.parse().ok()?;
        let start: u64 = start.parse().ok()?;
        (pid > 1).then_some((pid, start))
    });
    parsed.ok_or_else(|| {
        BoxError::Failed(format!(
            "not an e2b job identity (pid:start_time): {:?}",
            job.id
        ))
    })
}

/// A shell fragment that sets `$alive` to 1 when `pid` is still the job started at `start`
/// (neither exited, a zombie, nor a recycled pid).
fn identity_check(pid: u32, start: u64) -> String {
    format!(
        "alive=0\n\
         if s=$(cat /proc/{pid}/stat 2>/dev/null); then r=${{s##*) }}; set -- $r; \
         if [ \"${{20}}\" = {start} ] && [ \"$1\" != Z ] && [ \"$1\" != X ]; then alive=1; fi; fi\n"
    )
}

impl E2bSandbox {
    fn bounds(&self, total: Duration) -> Bounds {
        Bounds {
            total,
            silence: self.shared.config.output_silence,
        }
    }

    /// The bounds of the small probes and file snippets: the transfer-idle bound.
    fn file_bounds(&self) -> Bounds {
        let idle = self.shared.config.transfer_idle;
        Bounds {
            total: idle,
            silence: idle,
        }
    }

    /// Turns an envd failure into the box's error, asking the control plane why envd did not
    /// answer.
    async fn diagnose(&self, error: EnvdError) -> BoxError {
        let detail = match error {
            EnvdError::Box(error) => return error,
            EnvdError::NotServing(detail) => detail,
        };
        match self.shared.api.get(&self.id).await {
            Ok(None) => BoxError::Gone(self.id.clone()),
            Ok(Some(info)) if info.state.as_deref() == Some("paused") => {
                BoxError::Unreachable(format!(
                    "box {} is paused; this handle never wakes it (connect resumes it): {detail}",
                    self.id
                ))
            }
            Ok(Some(_)) => BoxError::Unreachable(detail),
            Err(error) => BoxError::Unreachable(format!("{detail}; and then {error}")),
        }
    }

    async fn sh(&self, script: &str, bounds: Bounds) -> Result<ExecOutput, BoxError> {
        match self.envd.run(script, &BTreeMap::new(), HOME, bounds).await {
            Ok(out) => Ok(out),
            Err(error) => Err(self.diagnose(error).await),
        }
    }

    /// Runs a snippet that must exit 0, returning its stdout.
    async fn snippet(&self, what: &str, script: &str) -> Result<Vec<u8>, BoxError> {
        let out = self.sh(script, self.file_bounds()).await?;
        if out.exit_code != 0 {
            return Err(BoxError::Failed(format!(
                "{what} in box {}: exit {}: {}",
                self.id,
                out.exit_code,
                api::excerpt(&out.stderr)
            )));
        }
        Ok(out.stdout)
    }

    /// What is at a path: `None` when nothing, else its type and size.
    async fn stat(&self, shown: &str, path: &BoxPath) -> Result<Option<(String, u64)>, BoxError> {
        let script = format!(
            "{}case \"$k\" in link) echo 'link 0';; none) echo 'none 0';; \
             *) s=$(stat -c %s -- \"$p\") || exit 3; echo \"$k $s\";; esac\n",
            probe(path)
        );
        let out = self.snippet(&format!("inspect {shown}"), &script).await?;
        let line = String::from_utf8_lossy(&out);
        let line = line.trim_end();
        let Some((kind, size)) = line.rsplit_once(' ') else {
            return Err(BoxError::Failed(format!(
                "inspect {shown} in box {}: unreadable answer {line:?}",
                self.id
            )));
        };
        if kind == "none" {
            return Ok(None);
        }
        let size = size.parse().unwrap_or(0);
        Ok(Some((kind.to_owned(), size)))
    }
}

#[async_trait]
impl Sandbox for E2bSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn home(&self) -> &str {
        &self.home
    }

    async fn exec(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExecOutput, BoxError> {
        check_env(env)?;
        match self
            .envd
            .run(command, env, HOME, self.bounds(timeout))
            .await
        {
            Ok(out) => Ok(out),
            Err(error) => Err(self.diagnose(error).await),
        }
    }

    async fn start_background(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        dir: &str,
    ) -> Result<JobHandle, BoxError> {
        check_env(env)?;
        let dir = resolve(dir)?;
        let script = format!(
            "d={dir}\nmkdir -p -- \"$d\" || exit 3\ncd {home} || exit 3\n\
             setsid sh -c {command} >\"$d/wrapper.log\" 2>&1 </dev/null &\n\
             pid=$!\n\
             s=$(cat /proc/$pid/stat 2>/dev/null) || {{ echo \"$pid:gone\"; exit 0; }}\n\
             r=${{s##*) }}; set -- $r; echo \"$pid:${{20}}\"\n",
            dir = sh_quote(&dir.absolute),
            home = sh_quote(HOME),
            command = sh_quote(command),
        );
        let out = match self.envd.run(&script, env, HOME, self.file_bounds()).await {
            Ok(out) => out,
            Err(error) => return Err(self.diagnose(error).await),
        };
        if out.exit_code != 0 {
            return Err(BoxError::Failed(format!(
                "start a job in box {}: exit {}: {}",
                self.id,
                out.exit_code,
                api::excerpt(&out.stderr)
            )));
        }
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let handle = JobHandle {
            id,
            dir: dir.absolute,
        };
        if parse_job(&handle).is_err() {
            // gone before its identity was read: it ran and ended at once; its pid alone can
            // never be checked again, so the identity names a start time no process has
            let pid = handle.id.split(':').next().unwrap_or("0").to_owned();
            return Ok(JobHandle {
                id: format!("{pid}:0"),
                dir: handle.dir,
            });
        }
        debug!(sandbox_id = %self.id, job = %handle.id, "e2b_sandbox_job_started");
        Ok(handle)
    }

    async fn job_running(&self, job: &JobHandle) -> Result<bool, BoxError> {
        let (pid, start) = parse_job(job)?;
        let script = format!("{}echo $alive\n", identity_check(pid, start));
        let out = self.snippet("check a job", &script).await?;
        Ok(String::from_utf8_lossy(&out).trim() == "1")
    }

    async fn kill_job(&self, job: &JobHandle) -> Result<(), BoxError> {
        let (pid, start) = parse_job(job)?;
        // every process group in the job's session (a `timeout` in it has a group of its own)
        let script = format!(
            "{}if [ $alive = 1 ]; then\n\
             for f in /proc/[0-9]*/stat; do s=$(cat \"$f\" 2>/dev/null) || continue; \
             r=${{s##*) }}; set -- $r; \
             if [ \"$4\" = {pid} ]; then kill -KILL \"-$3\" 2>/dev/null; fi; done\n\
             kill -KILL -{pid} 2>/dev/null\n\
             fi\nexit 0\n",
            identity_check(pid, start)
        );
        self.snippet("kill a job", &script).await.map(|_| ())
    }

    async fn write_file(&self, path: &str, bytes: &[u8]) -> Result<(), BoxError> {
        let resolved = resolve(path)?;
        if resolved.components.is_empty() {
            return Err(BoxError::NotRegular {
                path: path.to_owned(),
                what: describe("directory"),
            });
        }
        match self.stat(path, &resolved).await? {
            Some((kind, _)) if !is_regular(&kind) => {
                return Err(BoxError::NotRegular {
                    path: path.to_owned(),
                    what: describe(&kind),
                });
            }
            _ => {}
        }
        let idle = self.shared.config.transfer_idle;
        match self.envd.upload(&resolved.absolute, bytes, idle).await {
            Ok(()) => Ok(()),
            Err(error) => Err(self.diagnose(error).await),
        }
    }

    async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, BoxError> {
        let resolved = resolve(path)?;
        let Some((kind, size)) = self.stat(path, &resolved).await? else {
            return Ok(None);
        };
        if !is_regular(&kind) {
            return Err(BoxError::NotRegular {
                path: path.to_owned(),
                what: describe(&kind),
            });
        }
        let too_large = |size| BoxError::TooLarge {
            path: path.to_owned(),
            size,
            limit: MAX_FILE_BYTES,
        };
        if size > MAX_FILE_BYTES {
            return Err(too_large(size));
        }
        let idle = self.shared.config.transfer_idle;
        match self
            .envd
            .download(&resolved.absolute, MAX_FILE_BYTES, idle)
            .await
        {
            Ok(Download::Absent) => Ok(None),
            Ok(Download::Bytes(bytes)) => Ok(Some(bytes)),
            Ok(Download::TooLarge(seen)) => Err(too_large(seen)),
            Err(error) => Err(self.diagnose(error).await),
        }
    }

    async fn read_tail(&self, path: &str, offset: u64, max: u64) -> Result<TailRead, BoxError> {
        let resolved = resolve(path)?;
        // one read is at most the whole-file bound; the end of a longer stream is its last
        // MAX_FILE_BYTES
        let max = max.min(MAX_FILE_BYTES);
        let offset = offset.min(i64::MAX as u64);
        let script = format!(
            "{probe}case \"$k\" in none) echo 'none 0 0'; exit 0;; link) echo 'link 0 0'; exit 0;; \
             'regular file'|'regular empty file') ;; *) echo \"$k 0 0\"; exit 0;; esac\n\
             s=$(stat -c %s -- \"$p\") || exit 3\n\
             o={offset}; m={max}\n\
             if [ \"$o\" -gt \"$s\" ]; then o=$s; fi\n\
             if [ $((s - o)) -gt \"$m\" ]; then o=$((s - m)); fi\n\
             echo \"ok $s $o\"\n\
             if [ \"$m\" -gt 0 ] && [ \"$o\" -lt \"$s\" ]; then \
             tail -c +$((o + 1)) -- \"$p\" | head -c \"$m\"; fi\n",
            probe = probe(&resolved),
        );
        let out = self
            .snippet(&format!("read the end of {path}"), &script)
            .await?;
        let newline = out.iter().position(|&b| b == b'\n').unwrap_or(out.len());
        let header = String::from_utf8_lossy(&out[..newline]).into_owned();
        let body = out.get(newline + 1..).unwrap_or_default().to_vec();
        let mut words = header.rsplitn(3, ' ');
        let (Some(at), Some(len), Some(kind)) = (words.next(), words.next(), words.next()) else {
            return Err(BoxError::Failed(format!(
                "read the end of {path} in box {}: unreadable answer {header:?}",
                self.id
            )));
        };
        let (at, len): (u64, u64) = (at.parse().unwrap_or(0), len.parse().unwrap_or(0));
        match kind {
            "none" => Ok(TailRead {
                bytes: Vec::new(),
                offset: 0,
                len: 0,
            }),
            "ok" => Ok(TailRead {
                bytes: body,
                offset: at,
                len,
            }),
            other => Err(BoxError::NotRegular {
                path: path.to_owned(),
                what: describe(other),
            }),
        }
    }

    async fn set_timeout(&self, timeout: Duration) -> Result<(), BoxError> {
        if self
            .shared
            .api
            .set_timeout(&self.id, timeout.as_secs())
            .await?
        {
            Ok(())
        } else {
            Err(BoxError::Gone(self.id.clone()))
        }
    }

    async fn pause(&self) -> Result<(), BoxError> {
        if self.shared.api.pause(&self.id).await? {
            debug!(sandbox_id = %self.id, "e2b_sandbox_paused");
            Ok(())
        } else {
            Err(BoxError::Gone(self.id.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_inside_the_home_and_never_leave_it() {
        for (given, absolute) in [
            ("notes/a.txt", "/home/user/notes/a.txt"),
            ("~/notes/a.txt", "/home/user/notes/a.txt"),
            ("/home/user/notes/./a.txt", "/home/user/notes/a.txt"),
            ("notes/../b", "/home/user/b"),
            ("~", "/home/user"),
        ] {
            assert_eq!(resolve(given).expect(given).absolute, absolute);
        }
        for refused in ["../escape", "/etc/passwd", "/home/userx/a", "a/../../b"] {
            assert!(resolve(refused).is_err(), "{refused} is refused");
        }
    }

    #[test]
    fn words_are_quoted_for_sh() {
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn old_envd_is_not_secure() {
        assert!(envd_is_secure("0.2.0"));
        assert!(envd_is_secure("0.3.1"));
        assert!(envd_is_secure("1.0.0"));
        assert!(!envd_is_secure("0.1.5"));
        assert!(!envd_is_secure(""));
    }

    #[test]
    fn job_identities_parse_strictly() {
        let job = |id: &str| JobHandle {
            id: id.into(),
            dir: String::new(),
        };
        assert_eq!(parse_job(&job("123:456")).expect("parses"), (123, 456));
        for bad in ["1:5", "x:1", "12", "12:3;rm", "-1:2"] {
            assert!(parse_job(&job(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_config_hides_the_key() {
        let config = E2bConfig::new("e2b_secret_key", "base");
        assert!(!format!("{config:?}").contains("e2b_secret_key"));
    }
}
