//! A run's live tail as server-sent events, over the same settled-prefix protocol the CLI
//! speaks: the connection holds the viewer's reading (epoch, offset, digest), asks the run's
//! owner (through `Runs.Tail`) every [`ASK_EVERY`], each ask chained after the last answer,
//! and sends only what is new — or a reset that replaces what the page holds. It stops when
//! the run is not running any more, or when the page closes (the channel's receiver drops).
//!
//! Each event's data is JSON: `outcome` (tail, reset, launching, not_running, owner_silent,
//! box_paused, failure), `text`, `start`, `end`, `held`, `front`, `detail`, `launch_id`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use boxfleet_proto::v1 as pb;
use pb::tail_reply::Outcome;
use serde::Deserialize;
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;

use super::{Dashboard, Failure};

/// How often the page's reading is asked again (the spec's dashboard asks every 3 s).
pub const ASK_EVERY: Duration = Duration::from_secs(3);
/// How long the owner may take per ask (the asker's budget, carried on the request).
const ASK_BUDGET_MS: u32 = 4_000;

#[derive(Debug, Default, Deserialize)]
pub(super) struct TailQuery {
    #[serde(default)]
    launch_id: String,
}

fn outcome_word(outcome: i32) -> &'static str {
    match Outcome::try_from(outcome) {
        Ok(Outcome::Tail) => "tail",
        Ok(Outcome::Reset) => "reset",
        Ok(Outcome::Launching) => "launching",
        Ok(Outcome::NotRunning) => "not_running",
        Ok(Outcome::OwnerSilent) => "owner_silent",
        Ok(Outcome::BoxPaused) => "box_paused",
        _ => "unknown",
    }
}

pub(super) async fn tail(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Path(turn): Path<String>,
    Query(query): Query<TailQuery>,
) -> Result<Response, Failure> {
    let viewer = dashboard.viewer(&headers)?;
    let mut runs = dashboard.runs(&viewer)?;
    let (events, stream) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(4);
    tokio::spawn(async move {
        let (mut epoch, mut after, mut digest) = (0u64, 0u64, String::new());
        loop {
            let asked = runs
                .tail(pb::TailRequest {
                    turn_id: turn.clone(),
                    launch_id: query.launch_id.clone(),
                    epoch,
                    after,
                    digest: digest.clone(),
                    budget_ms: ASK_BUDGET_MS,
                })
                .await;
            let (data, last) = match asked {
                Ok(reply) => {
                    let reply = reply.into_inner();
                    let outcome = outcome_word(reply.outcome);
                    if matches!(outcome, "tail" | "reset") {
                        (epoch, after, digest) = (reply.epoch, reply.end, reply.digest.clone());
                    }
                    let data = json!({
                        "outcome": outcome,
                        "text": reply.text,
                        "start": reply.start,
                        "end": reply.end,
                        "held": reply.held,
                        "front": reply.front,
                        "detail": reply.detail,
                        "launch_id": reply.launch_id,
                    });
                    (data, outcome == "not_running")
                }
                Err(status) => {
                    let failure = Failure::from(status);
                    let last = matches!(
                        failure.status,
                        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND
                    );
                    (
                        json!({ "outcome": "failure", "detail": failure.message }),
                        last,
                    )
                }
            };
            let event = Event::default().event("tail").data(data.to_string());
            if events.send(Ok(event)).await.is_err() || last {
                return;
            }
            tokio::time::sleep(ASK_EVERY).await;
        }
    });
    Ok(Sse::new(ReceiverStream::new(stream))
        .keep_alive(KeepAlive::default())
        .into_response())
}
