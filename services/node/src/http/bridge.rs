//! The tool bridge (the spec's "The tool bridge — a seat's own tools, from inside a box"):
//! one MCP server on the node that holds the seat, Streamable HTTP at `POST /mcp/{token}`,
//! served with the official Rust SDK (`rmcp`). A box's MCP client lists its seat's tools and
//! calls them; each call goes to the engine that serves the seat ([`Engines::call_tool`]) and
//! is written down on the run's record.
//!
//! Two gates stand before the SDK sees a request: the token (the run's own, signed by the
//! fleet's keyring for the bridge's audience — never a telemetry token), and the run it names,
//! which must still be on that job on this node. A box that outlived its run keeps no working
//! key (410); a call that reached a node not holding the seat is logged
//! `mcp_bridge_unresolved` — the URL addresses the wrong node — rather than treated as forged
//! (421). The caller is the run's seat, whatever the request says: the grant the gates found
//! rides the request to the handler.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use boxfleet_cluster::record::Status;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use tower::ServiceExt as _;
use tracing::{info, warn};

use super::endpoints::BRIDGE_AUDIENCE;
use crate::engines::Engines;
use crate::engines::tools::ToolCall;
use crate::trust::Trust;

/// The run a request was admitted for: the seat it acts as.
#[derive(Debug, Clone)]
pub struct BridgeGrant {
    pub seat: String,
    pub turn_id: String,
    pub launch_id: String,
}

/// The bridge: its gates and the SDK's service behind them.
#[derive(Clone)]
pub struct Bridge {
    engines: Arc<Engines>,
    trust: Arc<Trust>,
    service: StreamableHttpService<BridgeHandler, LocalSessionManager>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").finish_non_exhaustive()
    }
}

impl Bridge {
    /// A bridge answering for `allowed_hosts` (the `Host`s a box's request may name: the
    /// bridge URL's, and this listener's).
    pub fn new(engines: Arc<Engines>, trust: Arc<Trust>, allowed_hosts: Vec<String>) -> Self {
        let handler = BridgeHandler {
            engines: engines.clone(),
        };
        let mut config = StreamableHttpServerConfig::default();
        config.allowed_hosts = allowed_hosts;
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Bridge {
            engines,
            trust,
            service,
        }
    }

    /// The gates: the token, then the run it names, on this node.
    async fn admit(&self, token: &str) -> Result<BridgeGrant, (StatusCode, String)> {
        let grant = self
            .trust
            .verify_run_token(token, BRIDGE_AUDIENCE)
            .map_err(|error| {
                info!(%error, "mcp_bridge_refused");
                (
                    StatusCode::UNAUTHORIZED,
                    format!("the bridge token is not admitted: {error}"),
                )
            })?;
        let coordinator = self.engines.coordinator();
        let run = match coordinator.runs.read(&grant.turn_id).await {
            Ok(Some(run)) => run.record,
            Ok(None) => {
                return Err((
                    StatusCode::GONE,
                    format!("run {} has ended: its bridge is closed", grant.turn_id),
                ));
            }
            Err(error) => {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the run could not be read now ({error}): try again"),
                ));
            }
        };
        let on_job = run.launch_id == grant.launch_id
            && matches!(run.status, Status::Launching | Status::Running);
        if !on_job {
            return Err((
                StatusCode::GONE,
                format!(
                    "run {} is no longer on job {} ({}): the box's bridge is closed",
                    grant.turn_id, grant.launch_id, run.status
                ),
            ));
        }
        if !coordinator.holds(&run.seat) {
            warn!(
                turn_id = %grant.turn_id,
                seat = %run.seat,
                node = %coordinator.node,
                "mcp_bridge_unresolved"
            );
            return Err((
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "node {} does not hold seat {}: the bridge URL addresses the wrong node (BOXFLEET_MCP_BRIDGE_URL must name the node that holds the seat)",
                    coordinator.node, run.seat
                ),
            ));
        }
        Ok(BridgeGrant {
            seat: run.seat,
            turn_id: grant.turn_id,
            launch_id: grant.launch_id,
        })
    }
}

/// `/mcp/{token}`: the gates, then the SDK.
pub async fn serve(
    State(bridge): State<Arc<Bridge>>,
    Path(token): Path<String>,
    mut request: Request,
) -> Response {
    let grant = match bridge.admit(&token).await {
        Ok(grant) => grant,
        Err((status, message)) => return (status, message).into_response(),
    };
    request.extensions_mut().insert(grant);
    match bridge.service.clone().oneshot(request).await {
        Ok(response) => response.map(Body::new),
        Err(never) => match never {},
    }
}

/// The MCP server a box talks to: the seat's tools, from its engine.
#[derive(Clone)]
struct BridgeHandler {
    engines: Arc<Engines>,
}

/// The grant the gates put on the request.
fn grant_of(context: &RequestContext<RoleServer>) -> Result<BridgeGrant, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<BridgeGrant>())
        .cloned()
        .ok_or_else(|| {
            ErrorData::invalid_request("the request was not admitted by the bridge", None)
        })
}

impl ServerHandler for BridgeHandler {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info.name = "boxfleet".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info.instructions = Some(
            "Your seat's own tools, carried to the engine that runs it: every call acts as your seat.".into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let grant = grant_of(&context)?;
        let specs = self
            .engines
            .tools_for(&grant.seat)
            .map_err(|why| ErrorData::internal_error(why, None))?;
        let tools = specs
            .into_iter()
            .map(|spec| {
                let schema = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(
                    &spec.input_schema_json,
                )
                .unwrap_or_else(|_| {
                    serde_json::Map::from_iter([("type".to_owned(), "object".into())])
                });
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let grant = grant_of(&context)?;
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let tool = request.name.to_string();
        info!(seat = %grant.seat, turn_id = %grant.turn_id, tool, "mcp_bridge_call");
        let output = self
            .engines
            .call_tool(ToolCall {
                seat: grant.seat.clone(),
                turn_id: grant.turn_id.clone(),
                launch_id: grant.launch_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
            })
            .await;
        let line = boxfleet_actors::lifecycle::bridge::bridge_call_line(
            &tool,
            &arguments.to_string(),
            output.is_error,
            &output.text,
        );
        self.engines
            .coordinator()
            .record_bridge_call(&grant.seat, &grant.turn_id, &line)
            .await;
        let content = vec![ContentBlock::text(output.text)];
        Ok(if output.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}
