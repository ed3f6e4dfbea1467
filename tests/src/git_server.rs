//! A real git server on loopback for the git-auth recipe's end-to-end test: git's own
//! `git http-backend` (the smart HTTP protocol, run as a CGI program the way Apache or nginx
//! runs it — git-http-backend(1)) behind a listener that demands HTTP Basic credentials, as a
//! code host does for a token: user `x-access-token`, password the token (GitHub's documented
//! form for an installation or personal access token over HTTPS).
//!
//! What is ours is only the CGI bridge: the request's method, path, query, content type and
//! body handed to `git http-backend` in its CGI environment (RFC 3875), and its `Status:` and
//! headers read back. A request without the token gets `401` with `WWW-Authenticate: Basic`,
//! which is what makes git ask its credential helper.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use tokio::io::AsyncWriteExt;

/// A git server over smart HTTP, requiring `token`.
#[derive(Debug)]
pub struct GitServer {
    pub addr: SocketAddr,
    pub root: PathBuf,
    state: Arc<Served>,
    _dir: tempfile::TempDir,
}

#[derive(Debug)]
struct Served {
    root: PathBuf,
    token: String,
    /// requests refused for a missing or wrong credential
    refused: AtomicUsize,
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl GitServer {
    /// Starts the server with one bare repository, `repo.git`, holding one commit on `main`.
    pub async fn start(token: &str) -> GitServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("srv");
        let seed = dir.path().join("seed");
        std::fs::create_dir_all(&seed).expect("seed dir");
        git(&seed, &["init", "-q", "-b", "main"]);
        std::fs::write(seed.join("README"), "the repo\n").expect("write");
        git(&seed, &["add", "README"]);
        git(
            &seed,
            &[
                "-c",
                "user.name=seed",
                "-c",
                "user.email=seed@example.com",
                "commit",
                "-q",
                "-m",
                "first",
            ],
        );
        std::fs::create_dir_all(&root).expect("root");
        git(
            &root,
            &[
                "clone",
                "-q",
                "--bare",
                seed.to_str().expect("utf-8"),
                "repo.git",
            ],
        );
        // a push over smart HTTP is refused unless the repository allows it
        git(
            &root.join("repo.git"),
            &["config", "http.receivepack", "true"],
        );
        let state = Arc::new(Served {
            root: root.clone(),
            token: token.to_owned(),
            refused: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(serve).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        GitServer {
            addr,
            root,
            state,
            _dir: dir,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests came without the token (or with another).
    pub fn refused(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }

    /// `git` in the bare repository (e.g. `log`), its stdout.
    pub fn repo_git(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(self.root.join("repo.git"))
            .output()
            .expect("run git");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(encoded) = value.strip_prefix("Basic ") else {
        return false;
    };
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .is_some_and(|pair| pair == format!("x-access-token:{token}"))
}

async fn serve(
    State(state): State<Arc<Served>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&headers, &state.token) {
        state.refused.fetch_add(1, Ordering::SeqCst);
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"git\"")],
            "a token is needed",
        )
            .into_response();
    }
    match cgi(&state.root, &method, &uri, &headers, body).await {
        Ok(response) => response,
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error).into_response(),
    }
}

/// Runs `git http-backend` for one request (RFC 3875's environment) and turns its output into
/// the response.
async fn cgi(
    root: &Path,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, String> {
    let header = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header(header::CONTENT_TYPE))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header(header::CONTENT_ENCODING))
        .env(
            "GIT_PROTOCOL",
            header(header::HeaderName::from_static("git-protocol")),
        )
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git http-backend: {e}"))?;
    let mut stdin = child.stdin.take().expect("stdin");
    let feed = tokio::spawn(async move {
        stdin.write_all(&body).await.ok();
    });
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| format!("git http-backend: {e}"))?;
    feed.await.ok();
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        })
        .ok_or_else(|| {
            format!(
                "git http-backend wrote no headers: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let (head, rest) = out.stdout.split_at(split.0);
    let mut response = Response::builder().status(StatusCode::OK);
    for line in String::from_utf8_lossy(head).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            response = response.status(code);
        } else {
            response = response.header(name.trim(), value);
        }
    }
    response
        .body(Body::from(rest[split.1..].to_vec()))
        .map_err(|e| e.to_string())
}
