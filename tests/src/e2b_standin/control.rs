//! The stand-in's control plane, as E2B's API answers it: `POST /sandboxes` ([`create`]),
//! `GET /sandboxes/{id}` ([`read`]), `GET /v2/sandboxes` ([`list`]),
//! `POST /sandboxes/{id}/connect|timeout|pause` ([`connect`], [`set_timeout`], [`pause`]) and
//! `DELETE /sandboxes/{id}` ([`delete`]). Every call checks `X-API-Key` (401 otherwise); an
//! unknown box is 404.
//!
//! Where each behaviour comes from (E2B's own sources, `e2b-dev/infra` and `e2b-dev/E2B`):
//! - a POST with neither `Content-Length` nor a chunked body is answered 411 ([`length_given`]):
//!   the cloud API sits behind a load balancer that refuses them so, which is why both SDKs
//!   always send a body;
//! - `POST /sandboxes/{id}/timeout` re-times running boxes only: a paused one is not among
//!   them, so it answers 404 though the box is kept (infra's API handler looks the box up in
//!   the running set and answers "not found" when it is not there);
//! - `GET /v2/sandboxes` answers at most `limit` boxes (default and most 100) and names the
//!   next page's cursor in `X-Next-Token`, read back from `nextToken` (infra's OpenAPI spec,
//!   `spec/openapi.yml`; the SDKs' paginators follow it);
//! - a box lives at most its plan's lifetime from its start (1 h on the hobby plan, 24 h on
//!   pro), whatever keepalives arrive; a timeout asked past it is refused 400 "Timeout cannot
//!   be greater than N hours" (infra's API: the end time is capped at start + the team's max
//!   instance length, and a longer timeout refused);
//! - sandbox ids are lower-case letters and digits (the API mints them so);
//! - (`envd.rs`) a box killed under a running command: envd runs inside the VM and dies with
//!   it, so the process stream stops with no end event and no end of stream (infra's
//!   orchestrator tears the VM down; nothing is left to send one);
//! - (`envd.rs`) a box paused under a running command (`POST /pause`, or an auto-pause): the
//!   stream stops the same way, with no end event (infra's orchestrator snapshots the VM,
//!   suspending envd with the connections it was serving), and the process is frozen, not
//!   ended;
//! - (`envd.rs`) envd before 0.3.0 (the stand-in's default 0.2.4) ignores `stdin: false` and
//!   gives the process a pipe that stays open while it runs.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::processes::{kill_box, signal_box};
use super::shared::{API_KEY, BoxState, Inner, Shared, error, past_the_cap};

/// The most boxes a page of `GET /v2/sandboxes` holds, and its default (E2B's).
pub const LIST_LIMIT: usize = 100;

fn authorised(headers: &HeaderMap) -> Result<(), Box<Response>> {
    match headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(API_KEY) => Ok(()),
        _ => Err(Box::new(error(StatusCode::UNAUTHORIZED, "Invalid API key"))),
    }
}

/// A POST says how long its body is: 411 otherwise, as E2B's load balancer answers.
fn length_given(headers: &HeaderMap) -> Result<(), Box<Response>> {
    let chunked = headers
        .get("transfer-encoding")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("chunked"));
    if headers.contains_key("content-length") || chunked {
        Ok(())
    } else {
        Err(Box::new(error(
            StatusCode::LENGTH_REQUIRED,
            "411 Length Required: POST requests require a Content-length header",
        )))
    }
}

/// Both checks every POST passes: the API key, then the body's length.
fn post_allowed(headers: &HeaderMap) -> Result<(), Box<Response>> {
    authorised(headers)?;
    length_given(headers)
}

fn info(id: &str, state: &BoxState, version: &str) -> Value {
    json!({
        "templateID": state.template,
        "sandboxID": id,
        "clientID": "standin",
        "envdVersion": version,
        "envdAccessToken": state.token,
        "domain": null,
        "state": if state.paused { "paused" } else { "running" },
        "metadata": state.metadata,
    })
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        &format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
    )
}

pub(super) async fn create(State(inner): Shared, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = post_allowed(&headers) {
        return *refused;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    if body["secure"] != json!(true) {
        return error(
            StatusCode::BAD_REQUEST,
            "stand-in: every box must be created with secure: true",
        );
    }
    let Some(template) = body["templateID"].as_str() else {
        return error(StatusCode::BAD_REQUEST, "templateID is required");
    };
    let env: BTreeMap<String, String> =
        serde_json::from_value(body["envVars"].clone()).unwrap_or_default();
    // E2B's metadata is a map of strings to strings (the API's SandboxMetadata)
    let Ok(metadata) =
        serde_json::from_value::<Option<BTreeMap<String, String>>>(body["metadata"].clone())
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "metadata must map strings to strings",
        );
    };
    let lifetime = *inner.lifetime.lock().unwrap_or_else(|p| p.into_inner());
    let timeout = body["timeout"].as_u64().unwrap_or(300);
    if let Some(refusal) = past_the_cap(timeout, lifetime) {
        return error(StatusCode::BAD_REQUEST, &refusal);
    }
    let id: String = uuid::Uuid::new_v4().simple().to_string()[..20].to_owned();
    let dir = inner.root.join(&id);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    let state = BoxState {
        dir,
        token: uuid::Uuid::new_v4().to_string(),
        template: template.to_owned(),
        env,
        timeout,
        deadline: std::time::Instant::now() + Duration::from_secs(timeout).min(lifetime),
        keepalives: 1,
        paused: false,
        metadata: metadata.unwrap_or_default(),
        started: std::time::Instant::now(),
        lifetime,
        streams_cut: std::sync::Arc::new(tokio::sync::Notify::new()),
    };
    let version = inner
        .envd_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let answer = info(&id, &state, &version);
    inner.boxes().insert(id, state);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

fn version(inner: &Inner) -> String {
    inner
        .envd_version
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

pub(super) async fn read(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    match inner.get(&id) {
        Some(state) => axum::Json(info(&id, &state, &version(&inner))).into_response(),
        None => not_found(&id),
    }
}

pub(super) async fn list(
    State(inner): Shared,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    // as E2B's list filters: `metadata` is a form-encoded query of key=value pairs a box's
    // metadata must all hold exactly; `state` a comma-separated list of states (E2B's SDKs
    // send both so: the pairs URL-encoded into the one parameter, the states joined by commas)
    let wanted: Vec<(String, String)> = match query.get("metadata") {
        Some(metadata) => {
            let pairs = format!("/?{metadata}")
                .parse::<axum::http::Uri>()
                .ok()
                .and_then(|uri| Query::<Vec<(String, String)>>::try_from_uri(&uri).ok());
            match pairs {
                Some(Query(pairs)) => pairs,
                None => return error(StatusCode::BAD_REQUEST, "metadata is not a query string"),
            }
        }
        None => Vec::new(),
    };
    let states: Option<Vec<&str>> = query.get("state").map(|s| s.split(',').collect());
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => LIST_LIMIT,
        Some(Ok(limit)) if (1..=LIST_LIMIT).contains(&limit) => limit,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("limit must be between 1 and {LIST_LIMIT}"),
            );
        }
    };
    // the cursor is the last id of the page before (boxes are listed in id order)
    let after = query.get("nextToken").cloned().unwrap_or_default();
    let version = version(&inner);
    let mut all: Vec<(String, Value)> = inner
        .boxes()
        .iter()
        .filter(|(id, _)| after.is_empty() || id.as_str() > after.as_str())
        .filter(|(_, state)| {
            wanted
                .iter()
                .all(|(k, v)| state.metadata.get(k).is_some_and(|held| held == v))
        })
        .filter(|(_, state)| {
            let now = if state.paused { "paused" } else { "running" };
            states.as_ref().is_none_or(|states| states.contains(&now))
        })
        .map(|(id, state)| {
            let mut one = info(id, state, &version);
            one["envdAccessToken"] = Value::Null;
            (id.clone(), one)
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    inner.list_calls.fetch_add(1, Ordering::SeqCst);
    let limit = limit.min(inner.page_cap.load(Ordering::SeqCst));
    let more = all.len() > limit;
    let page: Vec<(String, Value)> = all.into_iter().take(limit).collect();
    let next = page.last().map(|(id, _)| id.clone()).filter(|_| more);
    let body = axum::Json(page.into_iter().map(|(_, one)| one).collect::<Vec<_>>());
    match next {
        Some(cursor) => ([("x-next-token", cursor)], body).into_response(),
        None => body.into_response(),
    }
}

pub(super) async fn connect(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = post_allowed(&headers) {
        return *refused;
    }
    let timeout = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["timeout"].as_u64());
    let Some(timeout) = timeout else {
        return error(StatusCode::BAD_REQUEST, "timeout is required");
    };
    let mut boxes = inner.boxes();
    let Some(state) = boxes.get_mut(&id) else {
        return not_found(&id);
    };
    let resumed = state.paused;
    if let Some(refusal) = past_the_cap(timeout, state.lifetime) {
        return error(StatusCode::BAD_REQUEST, &refusal);
    }
    if resumed {
        signal_box(&id, "-CONT");
        state.paused = false;
        inner.resumes.fetch_add(1, Ordering::SeqCst);
    }
    state.keep_alive(timeout);
    let answer = info(&id, state, &version(&inner));
    let status = if resumed {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, axum::Json(answer)).into_response()
}

pub(super) async fn set_timeout(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = post_allowed(&headers) {
        return *refused;
    }
    let Some(timeout) = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["timeout"].as_u64())
    else {
        return error(StatusCode::BAD_REQUEST, "timeout is required");
    };
    let mut boxes = inner.boxes();
    let Some(state) = boxes.get_mut(&id) else {
        return not_found(&id);
    };
    if state.paused {
        // E2B re-times running boxes only: a paused one is not found among them
        return not_found(&id);
    }
    if let Some(refusal) = past_the_cap(timeout, state.lifetime) {
        return error(StatusCode::BAD_REQUEST, &refusal);
    }
    state.keep_alive(timeout);
    StatusCode::NO_CONTENT.into_response()
}

pub(super) async fn pause(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    if let Err(refused) = post_allowed(&headers) {
        return *refused;
    }
    let mut boxes = inner.boxes();
    let Some(state) = boxes.get_mut(&id) else {
        return not_found(&id);
    };
    if state.paused {
        return error(StatusCode::CONFLICT, "sandbox is already paused");
    }
    signal_box(&id, "-STOP");
    state.paused = true;
    state.streams_cut.notify_waiters();
    StatusCode::NO_CONTENT.into_response()
}

pub(super) async fn delete(
    State(inner): Shared,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Response {
    if let Err(refused) = authorised(&headers) {
        return *refused;
    }
    let gone = inner.boxes().remove(&id);
    match gone {
        Some(state) => {
            kill_box(&id, &state.dir);
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found(&id),
    }
}
