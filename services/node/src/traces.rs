//! Trace export (issue 18): the node's operation spans ([`boxfleet_actors::spans`]: a launch,
//! a poll, a collection, an answer, a settle, a recovery) as OpenTelemetry spans over
//! OTLP/HTTP (protobuf), when an endpoint is configured by the standard variables:
//!
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL, `…/v1/traces`), or
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL: `/v1/traces` is added);
//! - `OTEL_EXPORTER_OTLP_HEADERS` / `…_TRACES_HEADERS` (a collector's credential),
//!   `OTEL_SERVICE_NAME` (default `boxfleet`), `OTEL_BSP_SCHEDULE_DELAY` (how often a batch
//!   leaves, 5 s by default).
//!
//! A box is never given these: it inherits nothing of the node's environment, and its
//! telemetry goes to the node's own per-run receiver instead. With no endpoint nothing is
//! installed and no span leaves the node.

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// The provider in use, flushed when the program ends.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The configured trace endpoint, if any.
pub fn endpoint() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// The layer that exports the node's operation spans, when an endpoint is configured; built
/// outside the async runtime (the exporter's HTTP client runs on the batch thread of its own).
pub fn layer<S>() -> Option<Box<dyn Layer<S> + Send + Sync>>
where
    S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
{
    let endpoint = endpoint()?;
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("boxfleet: traces are not exported to {endpoint}: {error}");
            return None;
        }
    };
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("boxfleet");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("boxfleet");
    let _ = PROVIDER.set(provider);
    let spans_only = Targets::new().with_target("boxfleet::span", tracing::Level::INFO);
    Some(Box::new(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(spans_only),
    ))
}

/// Sends what is batched and stops the exporter (the program is ending).
pub fn flush() {
    if let Some(provider) = PROVIDER.get()
        && let Err(error) = provider.shutdown()
    {
        eprintln!("boxfleet: the last traces were not exported: {error}");
    }
}
