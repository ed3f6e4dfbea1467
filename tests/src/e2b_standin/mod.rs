//! A stand-in E2B for the `e2b` backend's tests: one axum server on `127.0.0.1:0` speaking both
//! planes — the control plane at `/` (`POST /sandboxes`, `GET /sandboxes/{id}`,
//! `POST /sandboxes/{id}/connect|timeout|pause`, `DELETE /sandboxes/{id}`, `GET /v2/sandboxes`,
//! filtered by `metadata` and `state` as E2B's list is)
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
//!
//! Layout: `processes` (finding and signalling a box's processes) → `shared` (the boxes'
//! records, the faults, the error body) → `control` (the control plane) and `envd` (each box's
//! envd) → this file: the handle, [`E2bStandIn`], which starts the server and the timeout
//! reaper and kills every box when dropped.

mod control;
mod envd;
mod processes;
mod shared;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use boxfleet_sandbox::e2b::E2bConfig;

use control::{connect, create, delete, list, pause, read, set_timeout};
use envd::{download, send_signal, start_process, upload};
use processes::{kill_box, signal_box};
use shared::{Inner, faults};

pub use processes::{MARKER, box_pids};
pub use shared::{API_KEY, HOME};

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
            list_calls: AtomicU64::new(0),
            lifetime: Mutex::new(Duration::from_secs(3600)),
            page_cap: std::sync::atomic::AtomicUsize::new(control::LIST_LIMIT),
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

    /// The node config's `providers.sandbox` entries (flow style) that put a fleet's boxes in
    /// this stand-in by default.
    pub fn sandbox_config(&self) -> String {
        format!(
            "default_run_in: e2b, e2b: {{ api_key: {API_KEY}, template: boxfleet-standin, api_url: \"{}\", envd_url: \"{}\" }}",
            self.api_url(),
            self.envd_url()
        )
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

    /// The template the box was made from (the create call's `templateID`).
    pub fn template(&self, sandbox_id: &str) -> Option<String> {
        self.inner.get(sandbox_id).map(|b| b.template.clone())
    }

    /// The box's recorded timeout and how many keepalives (creates, re-times, connects) it had.
    pub fn keepalive(&self, sandbox_id: &str) -> Option<(u64, u64)> {
        self.inner
            .get(sandbox_id)
            .map(|b| (b.timeout, b.keepalives))
    }

    /// The ids of the boxes alive (running or paused).
    pub fn live_boxes(&self) -> Vec<String> {
        self.inner.boxes().keys().cloned().collect()
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
            state.streams_cut.notify_waiters();
        }
    }

    /// How many boxes were killed at their timeout.
    pub fn expired(&self) -> u64 {
        self.inner.expired.load(Ordering::SeqCst)
    }

    /// How many connects resumed a paused box.
    /// Boxes made from now on live at most `lifetime` (the plan's cap), whatever keepalives
    /// arrive; a timeout asked past it is refused 400.
    pub fn cap_lifetime(&self, lifetime: Duration) {
        *self
            .inner
            .lifetime
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = lifetime;
    }

    /// Pages of `GET /v2/sandboxes` hold at most `boxes` from now on (so a test pages through
    /// a few boxes rather than a hundred).
    pub fn cap_pages(&self, boxes: usize) {
        self.inner.page_cap.store(boxes.max(1), Ordering::SeqCst);
    }

    /// How many pages of `GET /v2/sandboxes` were answered.
    pub fn list_calls(&self) -> u64 {
        self.inner.list_calls.load(Ordering::SeqCst)
    }

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
