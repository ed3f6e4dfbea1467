//! The dashboard (issue 18): the board, a run's page and the fleet, served by every node on
//! its HTTP listener as plain pages with a little JavaScript, over a JSON API.
//!
//! The API answers with the node's own gRPC API, asked as the viewer: the viewer's token
//! (an `Authorization: Bearer` header, or the `boxfleet_token` cookie `/login` sets) is the
//! credential of every call, so the dashboard sees exactly what that credential may see
//! through `boxfleet` or gRPC, routed to the seat's holder the same way, and nothing else.
//! A page itself holds no data and is served to anyone; its API calls are what is checked.
//!
//! | route | what |
//! |---|---|
//! | `GET /`, `/runs/{turn}`, `/fleet`, `/login` | the pages ([`assets`]) |
//! | `POST /login`, `GET /logout` | the cookie (HttpOnly, SameSite=Strict) |
//! | `GET /api/whoami` | the viewer's credential: subject, role, seats |
//! | `GET /api/board?seat=&status=&node=&mine=1` | the runs in flight ([`api`]) |
//! | `GET /api/runs/{turn}` | a run's record, phase records and events |
//! | `POST /api/runs/{turn}/answer` | an answer, as the viewer (JSON only: no form posts it) |
//! | `GET /api/runs/{turn}/tail` | the live tail as server-sent events ([`live`]) |
//! | `GET /api/fleet` | nodes, seats and every node's supervision tree |

mod api;
mod assets;
mod live;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use boxfleet_auth::credential::Principal;

use crate::routing::{OpsPeer, Peers, RunsPeer};
use crate::trust::Trust;

/// The cookie `/login` sets.
pub const COOKIE: &str = "boxfleet_token";

/// What the dashboard asks with: its own node's API, as the viewer.
pub struct Dashboard {
    trust: Arc<Trust>,
    peers: Peers,
    /// this node's name and the address its gRPC API is registered under
    node: String,
    grpc_addr: String,
    /// how many seats this node holds, read from its seat table (`/metrics`)
    seats_held: Box<dyn Fn() -> usize + Send + Sync>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("node", &self.node)
            .field("grpc_addr", &self.grpc_addr)
            .finish_non_exhaustive()
    }
}

impl Dashboard {
    pub fn new(
        trust: Arc<Trust>,
        node: String,
        grpc_addr: String,
        seats_held: Box<dyn Fn() -> usize + Send + Sync>,
    ) -> Self {
        Dashboard {
            peers: Peers::new(trust.clone()),
            trust,
            node,
            grpc_addr,
            seats_held,
        }
    }

    /// How many seats this node holds.
    pub fn seats_held(&self) -> usize {
        (self.seats_held)()
    }

    fn runs(&self, viewer: &Viewer) -> Result<RunsPeer, Failure> {
        self.peers
            .runs(&self.node, &self.grpc_addr, &viewer.token)
            .map_err(Failure::from)
    }

    fn ops(&self, viewer: &Viewer) -> Result<OpsPeer, Failure> {
        self.peers
            .ops(&self.node, &self.grpc_addr, &viewer.token)
            .map_err(Failure::from)
    }

    /// A scraper's credential, checked (`/metrics`): its token.
    pub fn scraper(&self, headers: &HeaderMap) -> Result<String, impl IntoResponse + use<>> {
        self.viewer(headers).map(|viewer| viewer.token)
    }

    /// The Runs and Ops clients of this node's API, asked under `token`.
    pub fn clients(&self, token: &str) -> Result<(RunsPeer, OpsPeer), tonic::Status> {
        Ok((
            self.peers.runs(&self.node, &self.grpc_addr, token)?,
            self.peers.ops(&self.node, &self.grpc_addr, token)?,
        ))
    }

    /// The viewer a request carries a credential for: its bearer header, else its cookie.
    fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Failure> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let token = bearer.or_else(|| cookie(headers, COOKIE)).ok_or(Failure {
            status: StatusCode::UNAUTHORIZED,
            message: "no credential: sign in at /login with a token (`boxfleet token issue`), or \
                      send Authorization: Bearer <token>"
                .into(),
        })?;
        let principal = self.trust.verify(token).map_err(|denied| Failure {
            status: StatusCode::UNAUTHORIZED,
            message: format!("the credential is refused: {denied}; sign in again at /login"),
        })?;
        Ok(Viewer {
            token: token.to_owned(),
            principal,
        })
    }
}

/// A viewer and the credential it presented.
#[derive(Debug)]
struct Viewer {
    token: String,
    principal: Principal,
}

/// An API call that failed: its HTTP status and the sentence a viewer reads.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    message: String,
}

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Self {
        use tonic::Code;
        let http = match status.code() {
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                StatusCode::BAD_REQUEST
            }
            Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::BAD_GATEWAY,
        };
        Failure {
            status: http,
            message: status.message().to_owned(),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

/// A cookie's value from a request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// The dashboard's routes.
pub fn router(dashboard: Arc<Dashboard>) -> Router {
    Router::new()
        .route("/", get(assets::board))
        .route("/runs/{turn}", get(assets::run))
        .route("/fleet", get(assets::fleet))
        .route("/login", get(assets::login).post(api::login))
        .route("/logout", get(api::logout))
        .route("/assets/app.js", get(assets::script))
        .route("/assets/style.css", get(assets::style))
        .route("/api/whoami", get(api::whoami))
        .route("/api/board", get(api::board))
        .route("/api/runs/{turn}", get(api::run))
        .route("/api/runs/{turn}/answer", post(api::answer))
        .route("/api/runs/{turn}/tail", get(live::tail))
        .route("/api/fleet", get(api::fleet))
        .with_state(dashboard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_read_among_others_and_an_empty_one_is_none() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "a=1; boxfleet_token=tok.en; b=2".parse().expect("header"),
        );
        assert_eq!(cookie(&headers, COOKIE), Some("tok.en"));
        headers.insert(header::COOKIE, "boxfleet_token=".parse().expect("header"));
        assert_eq!(cookie(&headers, COOKIE), None);
    }
}
