//! Each box's envd, under `/envd/{id}/`: `process.Process/Start` ([`start_process`], a Connect
//! server stream of JSON envelopes from a real local `sh`), `process.Process/SendSignal`
//! ([`send_signal`]) and `GET`/`POST /files` ([`download`], [`upload`]). Every call checks the
//! box's `X-Access-Token` (401 otherwise); a paused or unknown box is the edge's 502. Every
//! `/home/user` in a command's arguments, environment and working directory, and in a file
//! call's path, is rewritten to the box's directory.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use axum::body::{Body, Bytes};
use axum::extract::{Multipart, Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::processes::{MARKER, box_pids};
use super::shared::{BoxState, HOME, Inner, Shared, error};

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

/// Whether the stand-in's envd is older than 0.3.0, which ignores a request's `stdin: false`.
fn ignores_stdin_false(inner: &super::shared::Inner) -> bool {
    let version = inner
        .envd_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut parts = version
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) < (0, 3)
}

pub(super) async fn start_process(
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
        // envd before 0.3.0 ignores `stdin: false`: the process gets a pipe nobody writes to
        // or closes while it runs (e2b-dev/infra's envd process handler, fixed in 0.3.0)
        .stdin(if ignores_stdin_false(&inner) {
            Stdio::piped()
        } else {
            Stdio::null()
        })
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
            let cut = state.streams_cut.clone();
            // held open until the process ends, as such an envd holds it
            let stdin = child.stdin.take();
            let (inner, id) = (inner.clone(), id.clone());
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
                // a pause severs the stream: it just stops, as a suspended VM's envd's does
                let status = tokio::select! {
                    status = child.wait() => status,
                    () = cut.notified() => {
                        out.abort();
                        err.abort();
                        return;
                    }
                };
                drop(stdin);
                let _ = out.await;
                let _ = err.await;
                if inner.get(&id).is_none() {
                    // the box was killed under the command: E2B's envd dies with the VM, so its
                    // stream just stops — no end event, no end of stream
                    return;
                }
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

pub(super) async fn send_signal(
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

pub(super) async fn download(
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

pub(super) async fn upload(
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
