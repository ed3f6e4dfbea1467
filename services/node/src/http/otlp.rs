//! The per-run OTLP receiver (the spec's "Per-run OTel, without handing the sandbox a
//! secret"): `POST /otlp/{token}/v1/{traces|metrics|logs}`. The token is the run's own,
//! trace-scoped and expiring, naming the key that signed it: a token of a key the ring no longer
//! holds, or has retired, is refused (401), not tried against the active one. What a box
//! exports is forwarded upstream (`node.http.otlp_upstream`) with the real credential added
//! here, outside the box; with no upstream it is accepted and dropped. A failing upstream is
//! never reported to the box — an exporter that gets a 5xx retries, and retries against a
//! backend that is down turn one outage into two: the box is answered at once, and the forward
//! runs beside it, at most [`FORWARDS_IN_FLIGHT`] at a time (past them an export is dropped and
//! counted in the log).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxfleet_config::http::Upstream;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use super::endpoints::OTLP_AUDIENCE;
use crate::trust::Trust;

/// The signals OTLP/HTTP names.
pub const SIGNALS: [&str; 3] = ["traces", "metrics", "logs"];
/// The most one export may carry.
pub const MAX_EXPORT_BYTES: usize = 16 * 1024 * 1024;
/// Forwards upstream in flight at once.
pub const FORWARDS_IN_FLIGHT: usize = 8;
/// One forward's bound.
pub const FORWARD_BOUND: Duration = Duration::from_secs(30);

/// The receiver.
#[derive(Debug)]
pub struct Receiver {
    trust: Arc<Trust>,
    upstream: Option<Upstream>,
    client: reqwest::Client,
    forwards: Arc<Semaphore>,
}

impl Receiver {
    pub fn new(trust: Arc<Trust>, upstream: Option<Upstream>) -> Self {
        Receiver {
            trust,
            upstream,
            client: reqwest::Client::builder()
                .timeout(FORWARD_BOUND)
                .build()
                .unwrap_or_default(),
            forwards: Arc::new(Semaphore::new(FORWARDS_IN_FLIGHT)),
        }
    }

    /// Forwards one export upstream, beside the box's answer.
    fn forward(&self, signal: &str, turn_id: &str, headers: &HeaderMap, body: Bytes) {
        let Some(upstream) = &self.upstream else {
            debug!(turn_id, signal, bytes = body.len(), "otlp_export_dropped");
            return;
        };
        let Ok(permit) = self.forwards.clone().try_acquire_owned() else {
            warn!(turn_id, signal, bytes = body.len(), "otlp_forward_shed");
            return;
        };
        let url = format!("{}/v1/{signal}", upstream.endpoint);
        let mut request = self.client.post(&url).body(body);
        // what the exporter said of its body, and nothing else of the box's
        for name in [header::CONTENT_TYPE, header::CONTENT_ENCODING] {
            if let Some(value) = headers.get(&name) {
                request = request.header(name, value.clone());
            }
        }
        for (name, value) in &upstream.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let (turn_id, signal) = (turn_id.to_owned(), signal.to_owned());
        tokio::spawn(async move {
            let _permit = permit;
            match request.send().await {
                Ok(response) if response.status().is_success() => {
                    debug!(turn_id, signal, "otlp_forwarded")
                }
                Ok(response) => {
                    warn!(turn_id, signal, status = %response.status(), "otlp_forward_refused")
                }
                Err(error) => warn!(turn_id, signal, %error, "otlp_forward_failed"),
            }
        });
    }
}

/// `POST /otlp/{token}/v1/{signal}`.
pub async fn receive(
    State(receiver): State<Arc<Receiver>>,
    Path((token, signal)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !SIGNALS.contains(&signal.as_str()) {
        return (
            StatusCode::NOT_FOUND,
            format!("no OTLP signal {signal:?}: the receiver takes traces, metrics and logs"),
        )
            .into_response();
    }
    let grant = match receiver.trust.verify_run_token(&token, OTLP_AUDIENCE) {
        Ok(grant) => grant,
        Err(error) => {
            info!(%error, signal, "otlp_export_refused");
            return (
                StatusCode::UNAUTHORIZED,
                format!("the telemetry token is not admitted: {error}"),
            )
                .into_response();
        }
    };
    if body.len() > MAX_EXPORT_BYTES {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("an export is at most {MAX_EXPORT_BYTES} bytes"),
        )
            .into_response();
    }
    receiver.forward(&signal, &grant.turn_id, &headers, body);
    success(&headers)
}

/// An export's success, in the encoding it came in: an empty `Export…ServiceResponse`.
fn success(headers: &HeaderMap) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{}",
        )
            .into_response()
    } else {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            Bytes::new(),
        )
            .into_response()
    }
}
