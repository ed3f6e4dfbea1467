//! `GET /metrics`: the node's Prometheus metrics ([`boxfleet_cluster::metrics`]) in the text
//! exposition format, under the gRPC API's credentials (a scrape sends
//! `Authorization: Bearer <token>`; Prometheus's `authorization` scrape setting does). The
//! gauges that are readings are read at the scrape: runs by status through the node's own API
//! as the scraper (its board), the seats held from the node's seat table (`Ops.Seats` lists
//! every seat of the fleet: a tenth of a node's CPU holding 10,000 seats, scraped every 250 ms
//! in issue 20's bench).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use boxfleet_cluster::metrics::metrics;
use boxfleet_proto::v1 as pb;
use tracing::debug;

use super::dashboard::Dashboard;

/// How long a scrape waits for the readings before serving what it has.
const READ_BOUND: Duration = Duration::from_secs(3);

/// The exposition format's content type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub async fn serve(State(dashboard): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    let token = match dashboard.scraper(&headers) {
        Ok(token) => token,
        Err(failure) => return failure.into_response(),
    };
    let m = metrics();
    if let Some(runs) = runs_by_status(&dashboard, &token).await {
        m.set_runs(runs.iter().map(|(status, count)| (status.as_str(), *count)));
    }
    m.seats_held.set(dashboard.seats_held() as i64);
    let (read, changed) = boxfleet_redact::bytes_counted();
    m.redacted_so_far(read, changed);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], m.encode()).into_response()
}

/// Runs in flight by status; `None` when the API did not say.
async fn runs_by_status(dashboard: &Dashboard, token: &str) -> Option<BTreeMap<String, i64>> {
    let (mut runs, _) = dashboard.clients(token).ok()?;
    let asked = runs.board(pb::BoardRequest::default());
    let board = match tokio::time::timeout(READ_BOUND, asked).await {
        Ok(Ok(read)) => read.into_inner(),
        Ok(Err(status)) => {
            debug!(%status, "metrics_readings_unread");
            return None;
        }
        Err(_) => return None,
    };
    let mut by_status = BTreeMap::new();
    for entry in board.runs {
        *by_status.entry(entry.status).or_insert(0) += 1;
    }
    Some(by_status)
}
