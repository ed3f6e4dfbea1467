//! envd, the in-box agent (port 49983, `https://49983-{sandboxID}.{domain}`), reached with the
//! box's own access token (`X-Access-Token`). Two services:
//!
//! - processes: `POST /process.Process/Start`, the Connect protocol's server stream in JSON
//!   (`application/connect+json`): the request and every answer are envelopes — one flag byte,
//!   a 4-byte big-endian length, the JSON — and flag `0x02` marks the end-of-stream message
//!   (`{}` or `{"error": …}`). Events are `start{pid}`, `data{stdout|stderr}` (base64 bytes),
//!   `end{exitCode, exited, status, error}` and `keepalive{}`. `SendSignal` is unary Connect
//!   (plain JSON).
//! - files: `GET /files?path=…&username=user` (the bytes; 404 when nothing is there) and
//!   `POST /files?path=…&username=user` (multipart, part `file`; parents are made).
//!
//! This plane carries no overall deadline: a command is bounded by the gap between its output
//! frames (the output-silence bound — envd's keepalives do not count as output), and by the
//! caller's own timeout; a transfer by the gap between bytes (the transfer-idle bound).
//!
//! A box whose address does not answer as envd (the edge's 502, a refused connection) is
//! reported as [`EnvdError::NotServing`], for the caller to ask the control plane whether the
//! box is gone, paused or merely unreachable.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use boxfleet_actors::ports::{BoxError, ExecOutput};
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::api::{AccessToken, excerpt};

/// envd's port.
pub const ENVD_PORT: u16 = 49983;
/// The user commands run as and relative paths resolve against.
pub const USER: &str = "user";
/// The largest output `exec` keeps of each stream (the rest is read and dropped), as `direct`.
pub const EXEC_OUTPUT_BOUND: usize = 32 * 1024 * 1024;
/// The largest single envelope accepted from envd.
const ENVELOPE_BOUND: usize = 16 * 1024 * 1024;
/// Connect's end-of-stream flag.
const END_STREAM: u8 = 0x02;

/// Why an envd call did not succeed.
#[derive(Debug)]
pub(crate) enum EnvdError {
    /// The box's address did not answer as envd: gone, paused or unreachable — the control
    /// plane says which.
    NotServing(String),
    Box(BoxError),
}

impl From<BoxError> for EnvdError {
    fn from(error: BoxError) -> Self {
        EnvdError::Box(error)
    }
}

/// One box's envd.
#[derive(Debug, Clone)]
pub(crate) struct Envd {
    pub http: reqwest::Client,
    /// `https://49983-{id}.{domain}` (or the configured override)
    pub base: String,
    pub sandbox_id: String,
    pub token: AccessToken,
}

#[derive(Deserialize)]
struct StartResponse {
    #[serde(default)]
    event: Option<ProcessEvent>,
}

#[derive(Deserialize)]
struct ProcessEvent {
    #[serde(default)]
    start: Option<StartEvent>,
    #[serde(default)]
    data: Option<DataEvent>,
    #[serde(default)]
    end: Option<EndEvent>,
}

#[derive(Deserialize)]
struct StartEvent {
    #[serde(default)]
    pid: u32,
}

#[derive(Deserialize)]
struct DataEvent {
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndEvent {
    #[serde(default)]
    exit_code: i32,
    #[serde(default)]
    exited: bool,
    #[serde(default)]
    status: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct EndOfStream {
    #[serde(default)]
    error: Option<ConnectError>,
}

#[derive(Deserialize)]
struct ConnectError {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// How a command's run is bounded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// the caller's whole-run timeout
    pub total: Duration,
    /// the longest gap between output frames
    pub silence: Duration,
}

/// A signal's number from Go's `ProcessState.String()` ("signal: killed", "signal: aborted
/// (core dumped)"): envd reports a process a signal ended by the signal's name as Go's
/// `syscall` package spells it on Linux, with " (core dumped)" when it dumped core.
fn signal_number(status: &str) -> Option<i32> {
    let name = status.strip_prefix("signal: ")?;
    let name = name.strip_suffix(" (core dumped)").unwrap_or(name);
    Some(match name {
        "hangup" => 1,
        "interrupt" => 2,
        "quit" => 3,
        "illegal instruction" => 4,
        "trace/breakpoint trap" => 5,
        "aborted" => 6,
        "bus error" => 7,
        "floating point exception" => 8,
        "killed" => 9,
        "user defined signal 1" => 10,
        "segmentation fault" => 11,
        "user defined signal 2" => 12,
        "broken pipe" => 13,
        "alarm clock" => 14,
        "terminated" => 15,
        "stack fault" => 16,
        "child exited" => 17,
        "continued" => 18,
        "stopped (signal)" => 19,
        "stopped" => 20,
        "stopped (tty input)" => 21,
        "stopped (tty output)" => 22,
        "urgent I/O condition" => 23,
        "CPU time limit exceeded" => 24,
        "file size limit exceeded" => 25,
        "virtual timer expired" => 26,
        "profiling timer expired" => 27,
        "window changed" => 28,
        "I/O possible" => 29,
        "power failure" => 30,
        "bad system call" => 31,
        // Go names a real-time or unknown signal by its number
        other => other.strip_prefix("signal ")?.parse().ok()?,
    })
}

fn envelope(flag: u8, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 5);
    out.push(flag);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(json);
    out
}

/// Splits whole envelopes off the front of `buffer`.
fn next_envelope(buffer: &mut Vec<u8>) -> Result<Option<(u8, Vec<u8>)>, BoxError> {
    if buffer.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
    if len > ENVELOPE_BOUND {
        return Err(BoxError::Failed(format!(
            "envd sent a {len}-byte message, past the {ENVELOPE_BOUND}-byte bound"
        )));
    }
    if buffer.len() < 5 + len {
        return Ok(None);
    }
    let flag = buffer[0];
    let message = buffer[5..5 + len].to_vec();
    buffer.drain(..5 + len);
    Ok(Some((flag, message)))
}

fn keep(kept: &mut Vec<u8>, encoded: &str) -> Result<(), BoxError> {
    let bytes = BASE64.decode(encoded).map_err(|error| {
        BoxError::Failed(format!("envd sent output that is not base64: {error}"))
    })?;
    let room = EXEC_OUTPUT_BOUND.saturating_sub(kept.len());
    kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    Ok(())
}

impl Envd {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("X-Access-Token", &self.token.0)
            .header("E2b-Sandbox-Id", &self.sandbox_id)
            .header("E2b-Sandbox-Port", ENVD_PORT.to_string())
            // envd picks the process's and the files' user from basic auth, no password
            .header(
                "Authorization",
                format!("Basic {}", BASE64.encode(format!("{USER}:"))),
            )
    }

    /// Reads a refusal into the error it is.
    fn refused(&self, status: StatusCode, body: &[u8], what: &str) -> EnvdError {
        let code = status.as_u16();
        if matches!(code, 502..=504) {
            return EnvdError::NotServing(format!(
                "{what}: box {}'s in-box agent did not answer (HTTP {code}: {})",
                self.sandbox_id,
                excerpt(body)
            ));
        }
        if code == 401 || code == 403 {
            // envd answers 401 for a wrong token and for a user the box does not have alike
            return EnvdError::Box(BoxError::Failed(format!(
                "{what}: box {}'s in-box agent refused the call (HTTP {code}: {}): either the \
                 box's access token (reconnect to the box to read it again) or the user {USER:?}, \
                 which the box's template must have",
                self.sandbox_id,
                excerpt(body)
            )));
        }
        if code == 409 {
            // the edge proxy: the box is pausing or resuming — the control plane says which
            return EnvdError::NotServing(format!(
                "{what}: box {} is pausing or resuming (HTTP 409 from E2B's edge: {})",
                self.sandbox_id,
                excerpt(body)
            ));
        }
        if code == 429 {
            return EnvdError::Box(BoxError::Unreachable(format!(
                "{what}: E2B's edge refused the connection to box {} for now (HTTP 429, a \
                 connection or team limit: {})",
                self.sandbox_id,
                excerpt(body)
            )));
        }
        if code == 507 {
            // the box's disk is full: asking again finds it as full
            return EnvdError::Box(BoxError::Failed(format!(
                "{what}: box {}'s disk is full (HTTP 507: {})",
                self.sandbox_id,
                excerpt(body)
            )));
        }
        if status.is_server_error() {
            return EnvdError::Box(BoxError::Unreachable(format!(
                "{what}: box {}'s in-box agent answered HTTP {code}: {}",
                self.sandbox_id,
                excerpt(body)
            )));
        }
        EnvdError::Box(BoxError::Failed(format!(
            "{what}: box {}'s in-box agent refused it with HTTP {code}: {}",
            self.sandbox_id,
            excerpt(body)
        )))
    }

    fn transport(&self, error: reqwest::Error, what: &str) -> EnvdError {
        let connect = error.is_connect();
        let detail = format!(
            "{what}: box {}'s in-box agent could not be reached: {}",
            self.sandbox_id,
            error.without_url()
        );
        if connect {
            EnvdError::NotServing(detail)
        } else {
            EnvdError::Box(BoxError::Unreachable(detail))
        }
    }

    /// Runs `sh -c command` to completion in `cwd`, with `env` in its environment (never on
    /// argv). Its stdin is `/dev/null`: the request says `stdin: false`, but envd before 0.3.0
    /// ignores it and leaves the process an open pipe nobody writes, on which a command that
    /// reads its input would wait for ever — so the shell itself reads from `/dev/null`.
    pub async fn run(
        &self,
        command: &str,
        env: &BTreeMap<String, String>,
        cwd: &str,
        bounds: Bounds,
    ) -> Result<ExecOutput, EnvdError> {
        let what = "run a command";
        let started = Instant::now();
        let deadline = started + bounds.total;
        let request = json!({
            "process": {
                "cmd": "/bin/sh",
                "args": ["-c", format!("exec </dev/null\n{command}")],
                "envs": env,
                "cwd": cwd,
            },
            "stdin": false,
        });
        let body = envelope(0, request.to_string().as_bytes());
        let send = self
            .request(reqwest::Method::POST, "/process.Process/Start")
            .header("Content-Type", "application/connect+json")
            .header("Connect-Protocol-Version", "1")
            .body(body)
            .send();
        let first = bounds.silence.min(bounds.total);
        let mut response = match tokio::time::timeout(first, send).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => return Err(self.transport(error, what)),
            Err(_) => {
                return Err(EnvdError::Box(BoxError::Unreachable(format!(
                    "{what}: box {}'s in-box agent did not start the command within {:.1}s",
                    self.sandbox_id,
                    first.as_secs_f64()
                ))));
            }
        };
        let status = response.status();
        if !status.is_success() {
            let body = tokio::time::timeout(first, response.bytes())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(self.refused(status, &body, what));
        }

        let mut buffer = Vec::new();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let mut pid = None;
        let mut ended: Option<EndEvent> = None;
        let mut last_output = Instant::now();
        loop {
            let now = Instant::now();
            let silent_at = last_output + bounds.silence;
            let wait_until = silent_at.min(deadline);
            let chunk = match tokio::time::timeout(
                wait_until.saturating_duration_since(now),
                response.chunk(),
            )
            .await
            {
                Ok(Ok(Some(chunk))) => chunk,
                Ok(Ok(None)) => break,
                Ok(Err(error)) => {
                    if ended.is_some() {
                        break;
                    }
                    // a box killed or paused under the command drops the stream with no end
                    // event: the control plane says which
                    return Err(EnvdError::NotServing(format!(
                        "{what}: the command reported no exit status: box {}'s in-box agent's \
                         stream broke: {}",
                        self.sandbox_id,
                        error.without_url()
                    )));
                }
                Err(_) => {
                    if ended.is_some() {
                        break;
                    }
                    if let Some(pid) = pid {
                        self.kill_process(pid, bounds.silence).await;
                    }
                    return Err(EnvdError::Box(if Instant::now() >= deadline {
                        BoxError::Failed(format!(
                            "the command did not finish within {:.1}s; it was killed",
                            bounds.total.as_secs_f64()
                        ))
                    } else {
                        BoxError::Unreachable(format!(
                            "{what}: the command printed nothing for {:.0}s (the output-silence \
                             bound) in box {}; it was killed",
                            bounds.silence.as_secs_f64(),
                            self.sandbox_id
                        ))
                    }));
                }
            };
            buffer.extend_from_slice(&chunk);
            while let Some((flag, message)) = next_envelope(&mut buffer)? {
                if flag & END_STREAM != 0 {
                    let end: EndOfStream =
                        serde_json::from_slice(&message).unwrap_or(EndOfStream { error: None });
                    if let Some(error) = end.error
                        && ended.is_none()
                    {
                        return Err(EnvdError::Box(BoxError::Failed(format!(
                            "{what}: the command reported no exit status: box {}'s in-box \
                                 agent closed its stream with an error: {} ({})",
                            self.sandbox_id, error.message, error.code
                        ))));
                    }
                    return self.finish(ended, stdout, stderr);
                }
                let parsed: StartResponse = serde_json::from_slice(&message).map_err(|error| {
                    BoxError::Failed(format!(
                        "{what}: envd sent a message that is not a process event: {error}"
                    ))
                })?;
                let Some(event) = parsed.event else { continue };
                if let Some(start) = event.start {
                    pid = Some(start.pid);
                    last_output = Instant::now();
                }
                if let Some(data) = event.data {
                    if let Some(out) = data.stdout {
                        keep(&mut stdout, &out)?;
                    }
                    if let Some(err) = data.stderr {
                        keep(&mut stderr, &err)?;
                    }
                    last_output = Instant::now();
                }
                if let Some(end) = event.end {
                    ended = Some(end);
                    last_output = Instant::now();
                }
                // a keepalive is not output: it does not reset the silence bound
            }
        }
        self.finish(ended, stdout, stderr)
    }

    fn finish(
        &self,
        ended: Option<EndEvent>,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    ) -> Result<ExecOutput, EnvdError> {
        let Some(end) = ended else {
            // the stream stopped before the process's end event (the box went under it): the
            // control plane says whether it is gone, paused or still there
            return Err(EnvdError::NotServing(format!(
                "the command reported no exit status: box {}'s in-box agent ended its stream \
                 without one",
                self.sandbox_id
            )));
        };
        let exit_code = if end.exited && end.exit_code >= 0 {
            end.exit_code
        } else if let Some(signal) = signal_number(&end.status) {
            128 + signal
        } else if end.exit_code >= 0 && end.error.is_none() {
            end.exit_code
        } else {
            return Err(EnvdError::Box(BoxError::Failed(format!(
                "the command reported no exit status: {} {}",
                end.status,
                end.error.unwrap_or_default()
            ))));
        };
        Ok(ExecOutput {
            exit_code,
            stdout,
            stderr,
        })
    }

    /// SIGKILLs a process envd started (best effort, bounded).
    pub async fn kill_process(&self, pid: u32, bound: Duration) {
        let request = self
            .request(reqwest::Method::POST, "/process.Process/SendSignal")
            .header("Content-Type", "application/json")
            .header("Connect-Protocol-Version", "1")
            .body(json!({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}).to_string())
            .send();
        let _ = tokio::time::timeout(bound, request).await;
    }

    /// Downloads a file: [`Download::Absent`] when nothing is there (404),
    /// [`Download::TooLarge`] once more than `limit` bytes arrived.
    pub async fn download(
        &self,
        path: &str,
        limit: u64,
        idle: Duration,
    ) -> Result<Download, EnvdError> {
        let what = format!("read {path}");
        let send = self
            .request(reqwest::Method::GET, "/files")
            .query(&[("path", path), ("username", USER)])
            .send();
        let mut response = match tokio::time::timeout(idle, send).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => return Err(self.transport(error, &what)),
            Err(_) => return Err(EnvdError::Box(self.idle_error(&what, idle))),
        };
        let status = response.status();
        if status == StatusCode::NOT_FOUND {
            return Ok(Download::Absent);
        }
        if !status.is_success() {
            let body = tokio::time::timeout(idle, response.bytes())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(self.refused(status, &body, &what));
        }
        let mut bytes = Vec::new();
        loop {
            match tokio::time::timeout(idle, response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() as u64 > limit {
                        return Ok(Download::TooLarge(bytes.len() as u64));
                    }
                }
                Ok(Ok(None)) => return Ok(Download::Bytes(bytes)),
                Ok(Err(error)) => {
                    return Err(EnvdError::Box(BoxError::Unreachable(format!(
                        "{what}: the transfer from box {} broke: {}",
                        self.sandbox_id,
                        error.without_url()
                    ))));
                }
                Err(_) => return Err(EnvdError::Box(self.idle_error(&what, idle))),
            }
        }
    }

    fn idle_error(&self, what: &str, idle: Duration) -> BoxError {
        BoxError::Unreachable(format!(
            "{what}: box {} moved no byte for {:.0}s (the transfer bound); abandoned",
            self.sandbox_id,
            idle.as_secs_f64()
        ))
    }

    /// Uploads a whole file (multipart, part `file`); envd makes its parents. Abandoned when no
    /// byte moves for `idle`.
    pub async fn upload(&self, path: &str, bytes: &[u8], idle: Duration) -> Result<(), EnvdError> {
        let what = format!("write {path}");
        let progress = Arc::new(AtomicU64::new(0));
        let origin = Instant::now();
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = bytes
            .chunks(64 * 1024)
            .map(|chunk| Ok(chunk.to_vec()))
            .collect();
        let seen = progress.clone();
        // each chunk taken by the connection marks progress
        let stream = futures::StreamExt::map(futures::stream::iter(chunks), move |chunk| {
            seen.store(origin.elapsed().as_millis() as u64, Ordering::Relaxed);
            chunk
        });
        let name = path.rsplit('/').next().unwrap_or("file").to_owned();
        let part = reqwest::multipart::Part::stream_with_length(
            reqwest::Body::wrap_stream(stream),
            bytes.len() as u64,
        )
        .file_name(name)
        .mime_str("application/octet-stream")
        .map_err(|error| BoxError::Failed(format!("{what}: {error}")))?;
        let form = reqwest::multipart::Form::new().part("file", part);
        let send = self
            .request(reqwest::Method::POST, "/files")
            .query(&[("path", path), ("username", USER)])
            .multipart(form)
            .send();
        tokio::pin!(send);
        let response = loop {
            let last = Duration::from_millis(progress.load(Ordering::Relaxed));
            let quiet_until = origin + last + idle;
            match tokio::time::timeout(
                quiet_until.saturating_duration_since(Instant::now()),
                &mut send,
            )
            .await
            {
                Ok(Ok(response)) => break response,
                Ok(Err(error)) => return Err(self.transport(error, &what)),
                Err(_) => {
                    let moved = Duration::from_millis(progress.load(Ordering::Relaxed));
                    if moved == last {
                        return Err(EnvdError::Box(self.idle_error(&what, idle)));
                    }
                }
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = tokio::time::timeout(idle, response.bytes())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Err(self.refused(status, &body, &what))
    }
}

/// What a download found.
#[derive(Debug)]
pub(crate) enum Download {
    Absent,
    Bytes(Vec<u8>),
    /// more bytes than the limit arrived (the file grew since it was measured)
    TooLarge(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_split_whole_and_wait_for_the_rest() {
        let mut buffer = envelope(0, b"{\"a\":1}");
        buffer.extend_from_slice(&envelope(END_STREAM, b"{}")[..3]);
        let (flag, message) = next_envelope(&mut buffer)
            .expect("parses")
            .expect("one whole");
        assert_eq!((flag, message.as_slice()), (0, &b"{\"a\":1}"[..]));
        assert!(next_envelope(&mut buffer).expect("parses").is_none());
        buffer.extend_from_slice(&envelope(END_STREAM, b"{}")[3..]);
        let (flag, message) = next_envelope(&mut buffer)
            .expect("parses")
            .expect("the end");
        assert_eq!((flag, message.as_slice()), (END_STREAM, &b"{}"[..]));
    }

    #[test]
    fn go_signal_statuses_read_as_shell_codes() {
        assert_eq!(signal_number("signal: killed"), Some(9));
        assert_eq!(signal_number("signal: terminated"), Some(15));
        assert_eq!(signal_number("signal: aborted (core dumped)"), Some(6));
        assert_eq!(
            signal_number("signal: segmentation fault (core dumped)"),
            Some(11)
        );
        assert_eq!(signal_number("signal: bus error"), Some(7));
        assert_eq!(signal_number("signal: bad system call"), Some(31));
        assert_eq!(signal_number("signal: CPU time limit exceeded"), Some(24));
        assert_eq!(signal_number("signal 34"), None, "not Go's shape");
        assert_eq!(signal_number("signal: signal 34"), Some(34));
        assert_eq!(signal_number("exit status 1"), None);
        assert_eq!(signal_number("signal: what"), None);
    }

    fn client() -> Envd {
        Envd {
            http: reqwest::Client::new(),
            base: "http://127.0.0.1:1".into(),
            sandbox_id: "abc123".into(),
            token: AccessToken("t".into()),
        }
    }

    #[test]
    fn the_edges_refusals_read_as_what_they_are() {
        let envd = client();
        let read =
            |code: u16| envd.refused(StatusCode::from_u16(code).expect("a code"), b"x", "read");
        assert!(matches!(read(409), EnvdError::NotServing(m) if m.contains("pausing or resuming")));
        assert!(matches!(read(429), EnvdError::Box(BoxError::Unreachable(m)) if m.contains("429")));
        assert!(
            matches!(read(507), EnvdError::Box(BoxError::Failed(m)) if m.contains("disk is full"))
        );
        assert!(matches!(read(401), EnvdError::Box(BoxError::Failed(m)) if m.contains("the user")));
        assert!(matches!(read(502), EnvdError::NotServing(_)));
        assert!(matches!(
            read(500),
            EnvdError::Box(BoxError::Unreachable(_))
        ));
        assert!(matches!(read(400), EnvdError::Box(BoxError::Failed(_))));
    }
}
