//! A stand-in OTLP/HTTP collector: what the node's OTLP receiver forwards upstream lands here,
//! recorded as it came (signal, headers, body) and decoded with the OpenTelemetry project's
//! own protobuf types (`opentelemetry-proto`), so a test reads what a real collector would.
//!
//! Behaviour, from the OTLP/HTTP specification (opentelemetry-proto's `docs/specification.md`,
//! "OTLP/HTTP"): `POST /v1/traces`, `/v1/metrics`, `/v1/logs`; a binary protobuf body is
//! `application/x-protobuf`; success is `200` with an empty `Export…ServiceResponse`. With
//! `failing` set it answers `503`, as a collector that is down does.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

/// One export the collector received.
#[derive(Debug, Clone)]
pub struct Export {
    pub signal: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// One span of a traces export, its ids in hex and its attributes as text.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub attributes: std::collections::BTreeMap<String, String>,
    /// the `service.name` of its resource
    pub service: String,
}

impl Export {
    /// The spans in a traces export (OTLP/HTTP protobuf, `/v1/traces`).
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        use opentelemetry_proto::tonic::common::v1::any_value::Value;
        let text = |value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>| match value
            .and_then(|v| v.value.as_ref())
        {
            Some(Value::StringValue(s)) => s.clone(),
            Some(Value::IntValue(i)) => i.to_string(),
            Some(Value::BoolValue(b)) => b.to_string(),
            Some(other) => format!("{other:?}"),
            None => String::new(),
        };
        let Ok(request) = ExportTraceServiceRequest::decode(self.body.clone()) else {
            return Vec::new();
        };
        let mut spans = Vec::new();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .map(|kv| text(kv.value.as_ref()))
                .unwrap_or_default();
            for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                spans.push(ReceivedSpan {
                    name: span.name.clone(),
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                    service: service.clone(),
                });
            }
        }
        spans
    }

    /// The metric names in a metrics export.
    pub fn metric_names(&self) -> Vec<String> {
        ExportMetricsServiceRequest::decode(self.body.clone())
            .map(|request| {
                request
                    .resource_metrics
                    .iter()
                    .flat_map(|r| &r.scope_metrics)
                    .flat_map(|s| &s.metrics)
                    .map(|m| m.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The resource attributes of every resource in a metrics or logs export, `key=value`.
    pub fn resource_attributes(&self) -> Vec<String> {
        let attributes: Vec<_> = match self.signal.as_str() {
            "metrics" => ExportMetricsServiceRequest::decode(self.body.clone())
                .map(|r| {
                    r.resource_metrics
                        .into_iter()
                        .filter_map(|m| m.resource)
                        .flat_map(|r| r.attributes)
                        .collect()
                })
                .unwrap_or_default(),
            "logs" => ExportLogsServiceRequest::decode(self.body.clone())
                .map(|r| {
                    r.resource_logs
                        .into_iter()
                        .filter_map(|l| l.resource)
                        .flat_map(|r| r.attributes)
                        .collect()
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        attributes
            .into_iter()
            .map(|kv| {
                let value = match kv.value.and_then(|v| v.value) {
                    Some(
                        opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s),
                    ) => s,
                    Some(other) => format!("{other:?}"),
                    None => String::new(),
                };
                format!("{}={value}", kv.key)
            })
            .collect()
    }
}

#[derive(Debug, Default)]
struct Shared {
    exports: Mutex<Vec<Export>>,
    failing: std::sync::atomic::AtomicBool,
}

/// A running collector; dropping it stops the server.
#[derive(Debug)]
pub struct OtlpCollector {
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl OtlpCollector {
    pub async fn start() -> OtlpCollector {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/v1/{signal}", post(export))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the collector");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        OtlpCollector { url, shared, task }
    }

    /// The collector's base URL (`/v1/{signal}` is added by whoever exports).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What it received so far.
    pub fn exports(&self) -> Vec<Export> {
        self.shared
            .exports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// From now on, answer as a collector that is down does (`503`).
    pub fn fail(&self, failing: bool) {
        self.shared
            .failing
            .store(failing, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for OtlpCollector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn export(
    State(shared): State<Arc<Shared>>,
    Path(signal): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Bytes) {
    shared
        .exports
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Export {
            signal,
            headers,
            body,
        });
    if shared.failing.load(std::sync::atomic::Ordering::SeqCst) {
        (StatusCode::SERVICE_UNAVAILABLE, Bytes::new())
    } else {
        (StatusCode::OK, Bytes::new())
    }
}
