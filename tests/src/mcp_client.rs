//! A minimal MCP client over Streamable HTTP for the tests, written from the MCP
//! specification's "Transports — Streamable HTTP" (2025-06-18): every JSON-RPC message is a
//! `POST` to the endpoint with `Accept: application/json, text/event-stream`; the server
//! answers a request with JSON or with an SSE stream whose `data:` events carry the response;
//! `initialize` may hand back an `Mcp-Session-Id` that every later request carries, with the
//! negotiated `MCP-Protocol-Version`. It speaks to the tool bridge as a box's coding agent
//! would, and shows the HTTP status of a refusal before any JSON-RPC.

use reqwest::StatusCode;
use serde_json::{Value, json};

/// The protocol version the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// One MCP session with a server.
#[derive(Debug)]
pub struct McpClient {
    url: String,
    http: reqwest::Client,
    session: Option<String>,
    next_id: u64,
}

/// A request's outcome: the HTTP status, and the JSON-RPC response when there was one.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    /// the body as text, when it was not JSON-RPC (a refusal's reason)
    pub text: String,
}

impl McpClient {
    pub fn new(url: &str) -> McpClient {
        McpClient {
            url: url.to_owned(),
            http: reqwest::Client::new(),
            session: None,
            next_id: 0,
        }
    }

    /// `initialize`, then `notifications/initialized`: the session is open when it returns OK.
    pub async fn initialize(&mut self) -> Reply {
        let reply = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "boxfleet-tests", "version": "1"},
                }),
            )
            .await;
        if reply.status.is_success() {
            self.notify("notifications/initialized").await;
        }
        reply
    }

    /// A JSON-RPC request.
    pub async fn request(&mut self, method: &str, params: Value) -> Reply {
        self.next_id += 1;
        let message =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let response = self.post(&message).await;
        let status = response.status();
        if let Some(session) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.session = Some(session.to_owned());
        }
        let sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let text = response.text().await.unwrap_or_default();
        let body = if sse {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|value| value.get("id").is_some())
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        Reply { status, body, text }
    }

    async fn notify(&self, method: &str) {
        let message = json!({"jsonrpc": "2.0", "method": method});
        let _ = self.post(&message).await;
    }

    async fn post(&self, message: &Value) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .json(message);
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request.send().await.expect("reach the MCP server")
    }
}
