//! The HTTP listener over TLS: the node's own certificate and key (`node.tls`, the ones its
//! gRPC listener serves), rustls with ring, HTTP/1.1 and HTTP/2 by ALPN. A box presents no
//! client certificate — its per-run token is its credential — so none is asked for.

use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use boxfleet_config::auth::TlsSection;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tracing::debug;

/// The listener's TLS from `node.tls`.
pub fn server_config(tls: &TlsSection) -> anyhow::Result<Arc<ServerConfig>> {
    let certs = CertificateDer::pem_file_iter(&tls.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("read node.tls.cert {}", tls.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .with_context(|| format!("read node.tls.key {}", tls.key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("the HTTP listener's TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("node.tls: the certificate and key do not make an identity")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TLS connections and serves `router` on each until the task is aborted.
pub async fn serve(listener: tokio::net::TcpListener, tls: Arc<ServerConfig>, router: Router) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(error) => {
                    debug!(%peer, %error, "node_http_tls_refused");
                    return;
                }
            };
            let service = TowerToHyperService::new(router);
            let served = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                debug!(%peer, %error, "node_http_connection_ended");
            }
        });
    }
}
