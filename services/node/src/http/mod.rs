//! The node's HTTP listener (DESIGN §14): one beside the gRPC port, serving what a box calls
//! back on — the tool bridge ([`bridge`], `/mcp/{token}`) and the per-run OTLP receiver
//! ([`otlp`], `/otlp/{token}/v1/{signal}`) — each admitting only a per-run token of its own
//! audience ([`endpoints`] mints them into a job's environment); and what an SRE opens —
//! the [`dashboard`] (`/`, `/runs/{turn}`, `/fleet`, its `/api/…`) and Prometheus metrics
//! ([`metrics`], `/metrics`), both under the gRPC API's credentials. `GET /healthz` answers
//! `ok`.
//!
//! It follows the gRPC listener's rule: beyond loopback it serves TLS (the node's certificate,
//! `node.tls`), or plain HTTP only when told `--insecure-listen`.
//!
//! Layout: this file binds the listener and routes; `tls` serves it over TLS; `endpoints` is
//! what a job is given; `bridge` and `otlp` the two endpoints.

pub mod bridge;
pub mod dashboard;
pub mod endpoints;
pub mod metrics;
pub mod otlp;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post};
use boxfleet_config::NodeConfig;
use boxfleet_config::http::BoxUrl;
use tracing::{info, warn};

use crate::engines::Engines;
use crate::trust::Trust;

/// The running listener.
#[derive(Debug)]
pub struct HttpListener {
    /// the address it is bound to
    pub addr: SocketAddr,
    /// the scheme a box dials it with
    pub scheme: &'static str,
    task: tokio::task::JoinHandle<()>,
}

impl HttpListener {
    /// This listener's own base URL (`{scheme}://{addr}`), what `listener` in a URL means.
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

/// Binds `node.http.listen` and serves the bridge and the receiver; `None` when the listener
/// is off.
pub async fn start(
    config: &NodeConfig,
    engines: Arc<Engines>,
    trust: Arc<Trust>,
    dashboard: Arc<dashboard::Dashboard>,
) -> anyhow::Result<Option<(HttpListener, endpoints::BoxEndpoints)>> {
    let Some(listen) = config.http.listen else {
        return Ok(None);
    };
    let tls = match &config.tls {
        Some(section) => Some(tls::server_config(section)?),
        None if listen.ip().is_loopback() => None,
        None if config.insecure_listen => {
            warn!(%listen, "node_http_listens_insecurely: beyond loopback without TLS (--insecure-listen)");
            None
        }
        None => anyhow::bail!(
            "node.http.listen {listen} is not a loopback address, and the node has no TLS: a box's calls and their tokens would cross the network in the clear. Give node.tls, pass --insecure-listen on a network only the fleet reaches, or set node.http.listen to a loopback address (or off)"
        ),
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| {
            format!(
                "bind the HTTP listener {listen} (node.http.listen, --http-listen; `off` for none)"
            )
        })?;
    let addr = listener
        .local_addr()
        .context("the HTTP listener's address")?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let own = format!("{scheme}://{addr}");
    let url_of = |url: &Option<BoxUrl>| match url {
        Some(BoxUrl::Listener) => Some(own.clone()),
        Some(BoxUrl::Url(url)) => Some(url.clone()),
        None => None,
    };
    let box_endpoints = endpoints::BoxEndpoints {
        trust: trust.clone(),
        bridge: url_of(&config.http.bridge_url),
        receiver: url_of(&config.http.receiver_url),
    };
    let mut allowed_hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
        addr.ip().to_string(),
    ];
    allowed_hosts.extend(box_endpoints.bridge.as_deref().and_then(host_of));
    let bridge = Arc::new(bridge::Bridge::new(engines, trust.clone(), allowed_hosts));
    let receiver = Arc::new(otlp::Receiver::new(trust, config.http.upstream.clone()));
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(metrics::serve).with_state(dashboard.clone()),
        )
        .merge(dashboard::router(dashboard))
        .route("/mcp/{token}", any(bridge::serve).with_state(bridge))
        .route(
            "/otlp/{token}/v1/{signal}",
            post(otlp::receive)
                .with_state(receiver)
                .layer(DefaultBodyLimit::max(otlp::MAX_EXPORT_BYTES)),
        );
    let task = match tls {
        Some(tls) => tokio::spawn(tls::serve(listener, tls, router)),
        None => tokio::spawn(async move {
            // a tail's events and a page's replies leave at once (no Nagle wait)
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            if let Err(error) = axum::serve(listener, router).await {
                warn!(%error, "node_http_listener_stopped");
            }
        }),
    };
    info!(
        %addr,
        bridge = box_endpoints.bridge.as_deref().unwrap_or("off"),
        receiver = box_endpoints.receiver.as_deref().unwrap_or("off"),
        "node_http_listening"
    );
    Ok(Some((HttpListener { addr, scheme, task }, box_endpoints)))
}

/// The host (and port) a base URL names, as a request's `Host` header carries it.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next()?;
    (!authority.is_empty()).then(|| authority.to_owned())
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn a_base_urls_host_is_what_a_request_names() {
        assert_eq!(
            host_of("http://10.0.0.5:7480").as_deref(),
            Some("10.0.0.5:7480")
        );
        assert_eq!(
            host_of("https://node-a.internal/prefix").as_deref(),
            Some("node-a.internal")
        );
    }
}
