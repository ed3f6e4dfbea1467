//! What both planes share: each box's record ([`BoxState`]), the stand-in's state behind every
//! handler ([`Inner`]: the boxes, the injected faults, the counters), the JSON error body both
//! planes answer with ([`error`]), and the middleware that runs before every request
//! ([`faults`]: expire what timed out, then any injected delay or 503).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::processes::kill_box;

/// The in-box home the stand-in maps onto each box's directory.
pub const HOME: &str = "/home/user";
/// The API key the stand-in accepts.
pub const API_KEY: &str = "e2b_standin_key";

#[derive(Debug, Clone)]
pub(super) struct BoxState {
    pub(super) dir: PathBuf,
    pub(super) token: String,
    pub(super) template: String,
    pub(super) env: BTreeMap<String, String>,
    pub(super) timeout: u64,
    /// when a running box is killed unless a keepalive moves it
    pub(super) deadline: std::time::Instant,
    pub(super) keepalives: u64,
    pub(super) paused: bool,
    /// the create's `metadata`, string to string as E2B keeps it
    pub(super) metadata: BTreeMap<String, String>,
    /// when the box was made, and how long the plan lets it live from then
    pub(super) started: std::time::Instant,
    pub(super) lifetime: Duration,
    /// cuts the box's open command streams: pausing a VM severs envd's connections, which end
    /// with no end event (E2B: the snapshot suspends envd with the VM)
    pub(super) streams_cut: std::sync::Arc<tokio::sync::Notify>,
}

impl BoxState {
    /// A keepalive: the box lives `timeout` seconds from now, but never past its plan's
    /// lifetime from its start (E2B caps the end so, whatever keepalives come).
    pub(super) fn keep_alive(&mut self, timeout: u64) {
        self.timeout = timeout;
        self.deadline = (std::time::Instant::now() + Duration::from_secs(timeout))
            .min(self.started + self.lifetime);
        self.keepalives += 1;
    }
}

/// E2B's refusal of a timeout longer than the plan's lifetime (400), or `None`.
pub(super) fn past_the_cap(timeout: u64, lifetime: Duration) -> Option<String> {
    (timeout > lifetime.as_secs()).then(|| {
        if lifetime.as_secs().is_multiple_of(3600) {
            format!(
                "Timeout cannot be greater than {} hours",
                lifetime.as_secs() / 3600
            )
        } else {
            format!(
                "Timeout cannot be greater than {} seconds",
                lifetime.as_secs()
            )
        }
    })
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) root: PathBuf,
    pub(super) boxes: Mutex<HashMap<String, BoxState>>,
    pub(super) fail_next: AtomicU32,
    pub(super) delay_ms: AtomicU64,
    pub(super) resumes: AtomicU64,
    /// pages of `GET /v2/sandboxes` answered
    pub(super) list_calls: AtomicU64,
    /// how long the plan lets a box live (E2B's hobby plan: 1 h; pro: 24 h)
    pub(super) lifetime: Mutex<Duration>,
    /// the most boxes a page holds, whatever `limit` asks (E2B's is 100; a test's fewer)
    pub(super) page_cap: std::sync::atomic::AtomicUsize,
    pub(super) expired: AtomicU64,
    pub(super) envd_version: Mutex<String>,
}

impl Inner {
    pub(super) fn boxes(&self) -> std::sync::MutexGuard<'_, HashMap<String, BoxState>> {
        self.boxes.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn get(&self, id: &str) -> Option<BoxState> {
        self.boxes().get(id).cloned()
    }

    /// Kills every running box whose timeout passed with no keepalive (a paused box waits).
    pub(super) fn expire(&self) {
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

pub(super) type Shared = State<Arc<Inner>>;

pub(super) fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"code": status.as_u16(), "message": message})),
    )
        .into_response()
}

pub(super) async fn faults(State(inner): Shared, request: Request, next: Next) -> Response {
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
