//! The dashboard's JSON API: each call is the node's gRPC API asked as the viewer, its reply
//! served as JSON (the proto's field names; enums as their numbers).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use boxfleet_proto::v1 as pb;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{COOKIE, Dashboard, Failure, Viewer};

/// The bound on one API call (a fleet-wide tree asks every node for at most 2 s).
const CALL_BOUND: Duration = Duration::from_secs(10);

/// A gRPC call bounded by [`CALL_BOUND`], its failure as the viewer reads it.
async fn bounded<T>(
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(CALL_BOUND, call).await {
        Ok(Ok(reply)) => Ok(reply.into_inner()),
        Ok(Err(status)) => Err(status.into()),
        Err(_) => Err(Failure {
            status: StatusCode::GATEWAY_TIMEOUT,
            message: format!(
                "the node's API did not answer inside {} s",
                CALL_BOUND.as_secs()
            ),
        }),
    }
}

pub(super) async fn whoami(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
) -> Result<Json<Value>, Failure> {
    let Viewer { principal, .. } = dashboard.viewer(&headers)?;
    Ok(Json(json!({
        "subject": principal.subject,
        "role": principal.role.as_str(),
        "seats": principal.seats,
        "node": dashboard.node,
    })))
}

/// The board's filters: a seat, a status, the node driving the run, and "waiting on me".
#[derive(Debug, Default, Deserialize)]
pub(super) struct BoardFilter {
    #[serde(default)]
    seat: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    node: String,
    #[serde(default)]
    mine: String,
}

impl BoardFilter {
    fn keeps(&self, entry: &pb::BoardEntry, me: &str) -> bool {
        let owner_node = entry.owner.split('/').next().unwrap_or_default();
        (self.seat.is_empty() || entry.agent_handle == self.seat)
            && (self.status.is_empty() || entry.status == self.status)
            && (self.node.is_empty() || owner_node == self.node || entry.owner == self.node)
            && (self.mine.is_empty() || waits_on(entry, me))
    }
}

/// Whether a run is parked on a question `me` may answer: named in its audience.
fn waits_on(entry: &pb::BoardEntry, me: &str) -> bool {
    entry.status == "awaiting_clarification"
        && (entry
            .audience_handles
            .iter()
            .any(|handle| handle.eq_ignore_ascii_case(me))
            || entry.audience.eq_ignore_ascii_case(me))
}

pub(super) async fn board(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(filter): Query<BoardFilter>,
) -> Result<Json<Value>, Failure> {
    let viewer = dashboard.viewer(&headers)?;
    let mut runs = dashboard.runs(&viewer)?;
    let reply = bounded(runs.board(pb::BoardRequest::default())).await?;
    let me = viewer.principal.subject.as_str();
    let waiting_on_me = reply.runs.iter().filter(|e| waits_on(e, me)).count();
    let kept: Vec<_> = reply
        .runs
        .into_iter()
        .filter(|entry| filter.keeps(entry, me))
        .collect();
    Ok(Json(
        json!({ "runs": kept, "waiting_on_me": waiting_on_me }),
    ))
}

/// A JSON document carried as a string, as its value (a string that is not JSON stays one).
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

pub(super) async fn run(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Path(turn): Path<String>,
) -> Result<Json<Value>, Failure> {
    let viewer = dashboard.viewer(&headers)?;
    let mut runs = dashboard.runs(&viewer)?;
    let reply = bounded(runs.get(pb::GetRequest {
        turn_id: turn.clone(),
    }))
    .await?;
    let record = (!reply.record_json.is_empty()).then(|| parsed(&reply.record_json));
    Ok(Json(json!({
        "turn_id": turn,
        "record": record,
        "phase_records": reply.phase_records_json.iter().map(|t| parsed(t)).collect::<Vec<_>>(),
        "events": reply.events_json.iter().map(|t| parsed(t)).collect::<Vec<_>>(),
    })))
}

#[derive(Debug, Deserialize)]
pub(super) struct AnswerBody {
    text: String,
    #[serde(default)]
    launch_id: String,
}

/// An answer from the page, as the viewer: JSON only (a cross-site form cannot send it, and
/// the cookie is SameSite=Strict besides).
pub(super) async fn answer(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Path(turn): Path<String>,
    body: Result<Json<AnswerBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, Failure> {
    let viewer = dashboard.viewer(&headers)?;
    let Json(body) = body.map_err(|rejection| Failure {
        status: StatusCode::BAD_REQUEST,
        message: format!(
            "an answer is a JSON body {{\"text\": …, \"launch_id\": …}} sent as application/json: {rejection}"
        ),
    })?;
    let mut runs = dashboard.runs(&viewer)?;
    let reply = bounded(runs.answer(pb::AnswerRequest {
        turn_id: turn,
        launch_id: body.launch_id,
        text: body.text,
        as_whom: String::new(),
    }))
    .await?;
    Ok(Json(
        json!({ "outcome": reply.outcome, "detail": reply.detail }),
    ))
}

pub(super) async fn fleet(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
) -> Result<Json<Value>, Failure> {
    let viewer = dashboard.viewer(&headers)?;
    let mut ops = dashboard.ops(&viewer)?;
    let nodes = bounded(ops.nodes(pb::NodesRequest {})).await?;
    let seats = bounded(ops.seats(pb::SeatsRequest {})).await?;
    // the tree is an operator's; a viewer who may not read it still sees nodes and seats
    let tree = match bounded(ops.tree(pb::TreeRequest { fleet: true })).await {
        Ok(tree) => json!({ "node": tree.node, "roots": tree.roots }),
        Err(failure) => json!({ "error": failure.message }),
    };
    Ok(Json(json!({
        "nodes": nodes.nodes,
        "seats": seats.seats,
        "tree": tree,
        "served_by": dashboard.node,
    })))
}

#[derive(Debug, Deserialize)]
pub(super) struct LoginForm {
    token: String,
}

/// Signs a viewer in: the token is checked, then kept in an HttpOnly, SameSite=Strict cookie
/// (`Secure` when the listener serves TLS).
pub(super) async fn login(
    State(dashboard): State<Arc<Dashboard>>,
    Query(query): Query<HashMap<String, String>>,
    Form(form): Form<LoginForm>,
) -> Response {
    let token = form.token.trim();
    if let Err(denied) = dashboard.trust.verify(token) {
        let page = super::assets::login_page(Some(&format!("That token is refused: {denied}")));
        return (StatusCode::UNAUTHORIZED, page).into_response();
    }
    let secure = if dashboard.trust.tls() {
        "; Secure"
    } else {
        ""
    };
    let cookie =
        format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=86400{secure}");
    // only a path of this site is followed back
    let next = query
        .get("next")
        .filter(|n| n.starts_with('/') && !n.starts_with("//"))
        .cloned()
        .unwrap_or_else(|| "/".to_owned());
    ([(header::SET_COOKIE, cookie)], Redirect::to(&next)).into_response()
}

pub(super) async fn logout() -> Response {
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}
