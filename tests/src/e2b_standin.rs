//! A stand-in E2B for the `e2b` backend's tests: one axum server on `127.0.0.1:0` speaking both
//! planes — the control plane at `/` (`POST /sandboxes`, `GET /sandboxes/{id}`,
//! `POST /sandboxes/{id}/connect|timeout|pause`, `DELETE /sandboxes/{id}`, `GET /v2/sandboxes`)
//! and each box's envd under `/envd/{id}/` (`process.Process/Start` as a Connect server stream
//! of JSON envelopes, `process.Process/SendSignal`, `GET`/`POST /files`). The backend reaches
//! envd there through `E2bConfig::envd_url` ([`E2bStandIn::config`] sets it).
//!
//! Each box is a directory standing for `/home/user` (in argv, env, a process's cwd and an
//! uploaded shell script, `/home/user` is rewritten to it), and commands are real local `sh`
//! processes, so a contract job really runs. Paths: the stand-in rewrites every `/home/user`
//! in a command's arguments, environment values and working directory, and in a file call's
//! path, to the box's directory, and runs commands with `HOME` set to it. Each process carries
//! `BOXFLEET_E2B_STANDIN_BOX={id}` in its environment (inherited by everything it starts), which
//! is how a pause finds the box's processes to SIGSTOP (a resuming connect SIGCONTs them, a
//! delete SIGKILLs them).
//!
//! Like E2B it checks `X-API-Key` (401 otherwise), refuses a create without `secure: true`,
//! checks each envd call's `X-Access-Token` against the box's (401 otherwise), and answers an
//! envd call for a paused or unknown box with the edge's 502. Like E2B it kills a running box
//! once its timeout (from its create, its last `timeout` call or its last connect) passes with
//! no keepalive — its processes killed, its directory and record gone, so every later call
//! answers 404 — and never times out a paused one; it counts keepalives and expiries.
//!
//! Faults through the handle: [`E2bStandIn::fail_next`] (the next N requests answer 503),
//! [`E2bStandIn::delay`] (every request waits first), [`E2bStandIn::vanish`] (a box disappears
//! behind the client's back), [`E2bStandIn::pause_behind`] (the provider pauses a box), and
//! [`E2bStandIn::resumes`] counts the connects that resumed a paused box.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Multipart, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use boxfleet_sandbox::e2b::E2bConfig;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// The in-box home the stand-in maps onto each box's directory.
pub const HOME: &str = "/home/user";
/// The environment variable marking a box's processes.
pub const MARKER: &str = "BOXFLEET_E2B_STANDIN_BOX";
/// The API key the stand-in accepts.
pub const API_KEY: &str = "e2b_standin_key";

#[derive(Debug, Clone)]
struct BoxState {
    dir: PathBuf,
    token: String,
    template: String,
    env: BTreeMap<String, String>,
    timeout: u64,
    /// when a running box is killed unless a keepalive moves it
    deadline: std::time::Instant,
    keepalives: u64,
    paused: bool,
}

impl BoxState {
    /// A keepalive: the box lives `timeout` seconds from now.
    fn keep_alive(&mut self, timeout: u64) {
        self.timeout = timeout;
        self.deadline = std::time::Instant::now() + Duration::from_secs(timeout);
        self.keepalives += 1;
    }
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    boxes: Mutex<HashMap<String, BoxState>>,
    fail_next: AtomicU32,
    delay_ms: AtomicU64,
    resumes: AtomicU64,
    expired: AtomicU64,
    envd_version: Mutex<String>,
}

impl Inner {
    fn boxes(&self) -> std::sync::MutexGuard<'_, HashMap<String, BoxState>> {
        self.boxes.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn get(&self, id: &str) -> Option<BoxState> {
        self.boxes().get(id).cloned()
    }

    /// Kills every running box whose timeout passed with no keepalive (a paused box waits).
    fn expire(&self) {
        let now = std::time::Instant::now();
        let expired: Vec<(String, BoxState)> = {
            let mut boxes = self.boxes();
            let ids: Vec<String> = boxes
                .iter()
                .filter(|(_, b)| !b.paused && b.deadline <= now)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| boxes.remove(&id).map(|b| (id, b)))
                .collect()
        };
        for (id, state) in expired {
            self.expired.fetch_add(1, Ordering::SeqCst);
            kill_box(&id, &state.dir);
        }
    }
}

/// A running stand-in; dropping it stops the server and kills every box's processes.
#[derive(Debug)]
pub struct E2bStandIn {
    inner: Arc<Inner>,
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
    reaper: tokio::task::JoinHandle<()>,
    _root: tempfile::TempDir,
}

impl E2bStandIn {
    /// Starts a stand-in on a free loopback port.
    pub async fn start() -> E2bStandIn {
        let root = tempfile::tempdir().expect("a directory for the stand-in's boxes");
        let inner = Arc::new(Inner {
            root: root.path().join("boxes"),
            boxes: Mutex::new(HashMap::new()),
            fail_next: AtomicU32::new(0),
            delay_ms: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            envd_version: Mutex::new("0.2.4".into()),
        });
        std::fs::create_dir_all(&inner.root).expect("the boxes directory");
        let app = Router::new()
            .route("/sandboxes", post(create))
            .route("/v2/sandboxes", get(list))
            .route("/sandboxes/{id}", get(read).delete(delete))
            .route("/sandboxes/{id}/connect", post(connect))
            .route("/sandboxes/{id}/timeout", post(set_timeout))
            .route("/sandboxes/{id}/pause", post(pause))
            .route("/envd/{id}/process.Process/Start", post(start_process))
            .route("/envd/{id}/process.Process/SendSignal", post(send_signal))
            .route("/envd/{id}/files", get(download).post(upload))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .layer(middleware::from_fn_with_state(inner.clone(), faults))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in on loopback");
        let addr = listener.local_addr().expect("the stand-in's address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        // the timeouts run whether or not anyone calls (every call checks them too)
        let reaper = {
            let inner = inner.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let inner = inner.clone();
                    let _ = tokio::task::spawn_blocking(move || inner.expire()).await;
                }
            })
        };
        E2bStandIn {
            inner,
            addr,
            server,
            reaper,
            _root: root,
        }
    }

    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn envd_url(&self) -> String {
        format!("http://{}/envd/{{sandbox_id}}", self.addr)
    }

    /// A backend configuration pointing at this stand-in, with the given control budget.
    pub fn config(&self) -> E2bConfig {
        let mut config = E2bConfig::new(API_KEY, "boxfleet-standin");
        config.domain = "standin.invalid".into();
        config.api_url = Some(self.api_url());
        config.envd_url = Some(self.envd_url());
        config.control_budget = Duration::from_secs(10);
        config.transfer_idle = Duration::from_secs(10);
        config.output_silence = Duration::from_secs(30);
        config
    }

    /// The directory standing for a box's `/home/user`.
    pub fn box_home(&self, sandbox_id: &str) -> PathBuf {
        self.inner.root.join(sandbox_id)
    }

    /// Where every box's directory lives.
    pub fn boxes_root(&self) -> PathBuf {
        self.inner.root.clone()
    }

    pub fn is_paused(&self, sandbox_id: &str) -> Option<bool> {
        self.inner.get(sandbox_id).map(|b| b.paused)
    }

    /// The box's recorded timeout and how many keepalives (creates, re-times, connects) it had.
    pub fn keepalive(&self, sandbox_id: &str) -> Option<(u64, u64)> {
        self.inner
            .get(sandbox_id)
            .map(|b| (b.timeout, b.keepalives))
    }

    /// The boxes' access tokens (to prove none leaked).
    pub fn tokens(&self) -> Vec<String> {
        self.inner
            .boxes()
            .values()
            .map(|b| b.token.clone())
            .collect()
    }

    /// The next `n` requests (either plane) answer 503.
    pub fn fail_next(&self, n: u32) {
        self.inner.fail_next.store(n, Ordering::SeqCst);
    }

    /// Every request waits `delay` before it is answered (zero: none).
    pub fn delay(&self, delay: Duration) {
        self.inner
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// The box disappears behind the client's back: its processes killed, its directory and
    /// record gone.
    pub fn vanish(&self, sandbox_id: &str) {
        let gone = self.inner.boxes().remove(sandbox_id);
        if let Some(gone) = gone {
            kill_box(sandbox_id, &gone.dir);
        }
    }

    /// The provider pauses the box (its processes SIGSTOPped), as an auto-pause would.
    pub fn pause_behind(&self, sandbox_id: &str) {
        let mut boxes = self.inner.boxes();
        if let Some(state) = boxes.get_mut(sandbox_id) {
            state.paused = true;
            signal_box(sandbox_id, "-STOP");
        }
    }

    /// How many boxes were killed at their timeout.
    pub fn expired(&self) -> u64 {
        self.inner.expired.load(Ordering::SeqCst)
    }

    /// How many connects resumed a paused box.
    pub fn resumes(&self) -> u64 {
        self.inner.resumes.load(Ordering::SeqCst)
    }

    /// The envd version new boxes report (an old one tests the create's refusal).
    pub fn set_envd_version(&self, version: &str) {
        *self
            .inner
            .envd_version
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = version.into();
    }
}

impl Drop for E2bStandIn {
    fn drop(&mut self) {
        self.server.abort();
        self.reaper.abort();
        let boxes: Vec<(String, PathBuf)> = self
            .inner
            .boxes()
            .drain()
            .map(|(id, b)| (id, b.dir))
            .collect();
        for (id, dir) in boxes {
            kill_box(&id, &dir);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// processes

/// The pids whose environment marks them as the box's.
pub fn box_pids(sandbox_id: &str) -> Vec<u32> {
    let wanted = format!("{MARKER}={sandbox_id}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

fn signal_box(sandbox_id: &str, signal: &str) {
    // twice: a process forked while the first pass ran is caught by the second
    for _ in 0..2 {
        let pids = box_pids(sandbox_id);
        if pids.is_empty() {
            return;
        }
        let _ = std::process::Command::new("kill")
            .arg(signal)
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status();
    }
}

fn kill_box(sandbox_id: &str, dir: &Path) {
    for _ in 0..5 {
        signal_box(sandbox_id, "-KILL");
        if box_pids(sandbox_id).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(dir);
}

// ---------------------------------------------------------------------------------------------
// the control plane

type Shared = State<Arc<Inner>>;

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"code": status.as_u16(), "message": message})),
    )
        .into_response()
}

async fn faults(State(inner): Shared, request: Request, next: Next) -> Response {
    {
        let inner = inner.clone();
        let _ = tokio::task::spawn_blocking(move || inner.expire()).await;
    }
    let delay = inner.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let failing = inner
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "stand-in: an injected fault",
        );
    }
    next.run(request).await
}

fn authorised(headers: &HeaderMap) -> Result<(), Box<Response>> {
    match headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(API_KEY) => Ok(()),
        _ => Err(Box::new(error(StatusCode::UNAUTHORIZED, "Invalid API key"))),
    }
}

fn info(id: &str, state: &BoxState, version: &str) -> Value {
    json!({
        "templateID": state.template,
        "sandboxID": id,
        "clientID": "standin",
        "envdVersion": version,
        "envdAccessToken": state.token,
        "domain": null,
        "state": if state.paused { "paused" } else { "running" },
        "metadata": {},
    })
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        &format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
    )
}

async fn create(State(inner): Shared, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    if body["secure"] != json!(true) {
        return error(
            StatusCode::BAD_REQUEST,
            "stand-in: every box must be created with secure: true",
        );
    }
    let Some(template) = body["templateID"].as_str() else {
        return error(StatusCode::BAD_REQUEST, "templateID is required");
    };
    let env: BTreeMap<String, String> =
        serde_json::from_value(body["envVars"].clone()).unwrap_or_default();
    let id: String = uuid::Uuid::new_v4().simple().to_string()[..20].to_owned();
    let dir = inner.root.join(&id);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    let state = BoxState {
        dir,
        token: uuid::Uuid::new_v4().to_string(),
        template: template.to_owned(),
        env,
        timeout: body["timeout"].as_u64().unwrap_or(300),
        deadline: std::time::Instant::now()
            + Duration::from_secs(body["timeout"].as_u64().unwrap_or(300)),
        keepalives: 1,
        paused: false,
    };
    let version = inner
        .envd_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let answer = info(&id, &state, &version);
    inner.boxes().insert(id, state);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

fn version(inner: &Inner) -> String {
    inner
        .envd_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

async fn read(State(inner): Shared, headers: HeaderMap, UrlPath(id): UrlPath<String>) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    match inner.get(&id) {
        Some(state) => axum::Json(info(&id, &state, &version(&inner))).into_response(),
        None => not_found(&id),
    }
}

async fn list(State(inner): Shared, headers: HeaderMap) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let version = version(&inner);
    let all: Vec<Value> = inner
        .boxes()
        .iter()
        .map(|(id, state)| {
            let mut one = info(id, state, &version);
            one["envdAccessToken"] = Value::Null;
            one
        })
        .collect();
    axum::Json(all).into_response()
}

async fn connect(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let timeout = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["timeout"].as_u64());
    let Some(timeout) = timeout else {
        return error(StatusCode::BAD_REQUEST, "timeout is required");
    };
    let mut boxes = inner.boxes();
    let Some(state) = boxes.get_mut(&id) else {
        return not_found(&id);
    };
    let resumed = state.paused;
    if resumed {
        signal_box(&id, "-CONT");
        state.paused = false;
        inner.resumes.fetch_add(1, Ordering::SeqCst);
    }
    state.keep_alive(timeout);
    let answer = info(&id, state, &version(&inner));
    let status = if resumed {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, axum::Json(answer)).into_response()
}

async fn set_timeout(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let Some(timeout) = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["timeout"].as_u64())
    else {
        return error(StatusCode::BAD_REQUEST, "timeout is required");
    };
    let mut boxes = inner.boxes();
    let Some(state) = boxes.get_mut(&id) else {
        return not_found(&id);
    };
    state.keep_alive(timeout);
    StatusCode::NO_CONTENT.into_response()
}

async fn pause(State(inner): Shared, headers: HeaderMap, UrlPath(id): UrlPath<String>) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let mut boxes = inner.boxes();
    let Some(state) = boxes.get_mut(&id) else {
        return not_found(&id);
    };
    if state.paused {
        return error(StatusCode::CONFLICT, "sandbox is already paused");
    }
    signal_box(&id, "-STOP");
    state.paused = true;
    StatusCode::NO_CONTENT.into_response()
}

async fn delete(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let gone = inner.boxes().remove(&id);
    match gone {
        Some(state) => {
            kill_box(&id, &state.dir);
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found(&id),
    }
}

// ---------------------------------------------------------------------------------------------
// envd

/// The box an envd call may act on: unknown or paused is the edge's 502, a wrong token 401.
fn envd_box(inner: &Inner, id: &str, headers: &HeaderMap) -> Result<BoxState, Box<Response>> {
    let refuse = |status, message: &str| Err(Box::new(error(status, message)));
    let Some(state) = inner.get(id) else {
        return refuse(
            StatusCode::BAD_GATEWAY,
            &format!("The sandbox {id} was not found"),
        );
    };
    if state.paused {
        return refuse(
            StatusCode::BAD_GATEWAY,
            &format!("The sandbox {id} is paused"),
        );
    }
    let token = headers.get("x-access-token").and_then(|v| v.to_str().ok());
    if token != Some(state.token.as_str()) {
        return refuse(StatusCode::UNAUTHORIZED, "invalid or missing access token");
    }
    Ok(state)
}

fn rewrite(text: &str, dir: &Path) -> String {
    text.replace(HOME, &dir.to_string_lossy())
}

/// Maps an in-box path (absolute under the home, or relative to it) onto the box's directory.
fn box_path(path: &str, dir: &Path) -> Option<PathBuf> {
    if path == HOME {
        return Some(dir.to_owned());
    }
    if let Some(rest) = path.strip_prefix(&format!("{HOME}/")) {
        return Some(dir.join(rest));
    }
    (!path.starts_with('/')).then(|| dir.join(path))
}

fn envelope(flag: u8, message: &Value) -> Bytes {
    let json = message.to_string();
    let mut out = Vec::with_capacity(json.len() + 5);
    out.push(flag);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(json.as_bytes());
    Bytes::from(out)
}

async fn start_process(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    let state = match envd_box(&inner, &id, &headers) {
        Ok(state) => state,
        Err(refused) => return *refused,
    };
    if body.len() < 5 || body[0] != 0 {
        return error(StatusCode::BAD_REQUEST, "expected one Connect envelope");
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body[5..]) else {
        return error(StatusCode::BAD_REQUEST, "the envelope is not JSON");
    };
    let process = &request["process"];
    let dir = state.dir.clone();
    let cmd = rewrite(process["cmd"].as_str().unwrap_or("/bin/sh"), &dir);
    let args: Vec<String> = process["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|s| rewrite(s, &dir))
                .collect()
        })
        .unwrap_or_default();
    let envs: BTreeMap<String, String> =
        serde_json::from_value(process["envs"].clone()).unwrap_or_default();
    let cwd = process["cwd"]
        .as_str()
        .and_then(|c| box_path(c, &dir))
        .unwrap_or_else(|| dir.clone());

    let mut command = tokio::process::Command::new(cmd);
    command
        .args(args)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("HOME", &dir)
        .env("USER", "user")
        .env("LANG", "C.UTF-8")
        .envs(&state.env)
        .envs(envs.iter().map(|(k, v)| (k.clone(), rewrite(v, &dir))))
        .env(MARKER, &id)
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(64);
    match command.spawn() {
        Err(e) => {
            let _ = tx.try_send(Ok(envelope(
                0x02,
                &json!({"error": {"code": "internal", "message": format!("start: {e}")}}),
            )));
        }
        Ok(mut child) => {
            let pid = child.id().unwrap_or(0);
            tokio::spawn(async move {
                let _ = tx
                    .send(Ok(envelope(0, &json!({"event": {"start": {"pid": pid}}}))))
                    .await;
                let forward = |stream: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>,
                               name: &'static str| {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let Some(mut stream) = stream else { return };
                        let mut buf = vec![0u8; 32 * 1024];
                        while let Ok(n) = stream.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            let data = BASE64.encode(&buf[..n]);
                            let _ = tx
                                .send(Ok(envelope(0, &json!({"event": {"data": {name: data}}}))))
                                .await;
                        }
                    })
                };
                let out = forward(
                    child
                        .stdout
                        .take()
                        .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
                    "stdout",
                );
                let err = forward(
                    child
                        .stderr
                        .take()
                        .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
                    "stderr",
                );
                let status = child.wait().await;
                let _ = out.await;
                let _ = err.await;
                let end = match status {
                    Ok(status) => {
                        use std::os::unix::process::ExitStatusExt;
                        match (status.code(), status.signal()) {
                            (Some(code), _) => json!({"exitCode": code, "exited": true,
                                "status": format!("exit status {code}")}),
                            (None, Some(9)) => json!({"exitCode": -1, "exited": false,
                                "status": "signal: killed"}),
                            (None, signal) => json!({"exitCode": -1, "exited": false,
                                "status": format!("signal: {}", signal.unwrap_or(0))}),
                        }
                    }
                    Err(e) => json!({"exitCode": -1, "exited": false, "status": "error",
                        "error": e.to_string()}),
                };
                let _ = tx
                    .send(Ok(envelope(0, &json!({"event": {"end": end}}))))
                    .await;
                let _ = tx.send(Ok(envelope(0x02, &json!({})))).await;
            });
        }
    }
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/connect+json")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "response"))
}

async fn send_signal(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = envd_box(&inner, &id, &headers) {
        return *refused;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(pid) = request["process"]["pid"].as_u64() else {
        return error(StatusCode::BAD_REQUEST, "process.pid is required");
    };
    let signal = match request["signal"].as_str() {
        Some("SIGNAL_SIGTERM") => "-TERM",
        _ => "-KILL",
    };
    if box_pids(&id).contains(&(pid as u32)) {
        let _ = std::process::Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status();
    }
    axum::Json(json!({})).into_response()
}

async fn download(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let state = match envd_box(&inner, &id, &headers) {
        Ok(state) => state,
        Err(refused) => return *refused,
    };
    let Some(path) = query.get("path").and_then(|p| box_path(p, &state.dir)) else {
        return error(StatusCode::BAD_REQUEST, "path outside the home");
    };
    match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.is_dir() => return error(StatusCode::BAD_REQUEST, "path is a directory"),
        Ok(_) => {}
        Err(_) => return error(StatusCode::NOT_FOUND, "file not found"),
    }
    match tokio::fs::read(&path).await {
        Ok(bytes) => (
            StatusCode::OK,
            [("content-type", "application/octet-stream")],
            bytes,
        )
            .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

async fn upload(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Query(query): Query<HashMap<String, String>>,
    mut multipart: Multipart,
) -> Response {
    let state = match envd_box(&inner, &id, &headers) {
        Ok(state) => state,
        Err(refused) => return *refused,
    };
    let shown = query.get("path").cloned().unwrap_or_default();
    let Some(path) = box_path(&shown, &state.dir) else {
        return error(StatusCode::BAD_REQUEST, "path outside the home");
    };
    loop {
        match multipart.next_field().await {
            Ok(Some(field)) if field.name() == Some("file") => {
                let bytes = match field.bytes().await {
                    Ok(bytes) => bytes,
                    Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
                };
                if let Some(parent) = path.parent()
                    && let Err(e) = tokio::fs::create_dir_all(parent).await
                {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
                }
                // a script a runner uploads names in-box paths (`/home/user/…`) that only
                // the box's own filesystem has: a shell script is mapped like argv and env
                let bytes = match std::str::from_utf8(&bytes) {
                    Ok(text) if text.starts_with("#!") || shown.ends_with(".sh") => {
                        Bytes::from(rewrite(text, &state.dir))
                    }
                    _ => bytes,
                };
                if let Err(e) = tokio::fs::write(&path, &bytes).await {
                    return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
                }
                let name = shown.rsplit('/').next().unwrap_or_default();
                return axum::Json(json!([{"path": shown, "name": name, "type": "file"}]))
                    .into_response();
            }
            Ok(Some(_)) => continue,
            Ok(None) => return error(StatusCode::BAD_REQUEST, "no part named file"),
            Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
        }
    }
}
