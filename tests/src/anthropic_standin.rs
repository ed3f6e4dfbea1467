//! A local, scripted stand-in for the Anthropic Messages API, so the **real** Claude Code CLI
//! (see [`crate::claude_cli`]) runs offline in a test.
//!
//! - [`AnthropicStandin::start`] serves on `127.0.0.1:<free port>` from its own thread (with
//!   its own tokio runtime), so both plain `#[test]`s and `#[tokio::test]`s can use it; point
//!   the CLI at [`AnthropicStandin::url`] with `ANTHROPIC_BASE_URL`. Dropping it stops it.
//! - `POST /v1/messages`: streaming (SSE: `message_start`, `content_block_start` /
//!   `content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta`,
//!   `signature_delta`) / `content_block_stop`,
//!   `message_delta`, `message_stop`) or plain JSON, as the request's `stream` asks.
//!   `POST /v1/messages/count_tokens` answers a count; anything else answers `200 {}`.
//! - The main conversation (a request that offers `tools`) is answered from the [`Script`]:
//!   the turn served is the number of assistant messages already in the request, so a retried
//!   request gets the same turn again. Side requests (no tools: the CLI's title / summary /
//!   quota calls) get a short text and never consume the script.
//! - A main-conversation request that enables extended thinking (`thinking.type: enabled`,
//!   which Claude Code sends when `MAX_THINKING_TOKENS` is set) is answered with a
//!   [`SCRIPT_THINKING`] block first, as the Messages API documents; one that does not gets none.
//! - The model in `message_start` is the requested one, or [`StandinOptions::served_model`]
//!   when set (a gateway that serves another model than it was asked for).
//! - Every request is recorded ([`AnthropicStandin::requests`]) and logged to stderr; a body
//!   may be up to 32 MB, as the real API's request limit is.

use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The four token counts every answer reports. All non-zero by default, and different from
/// each other, so a test can tell which one ended up where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// the uncached remainder of the prompt
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 120,
            output_tokens: 45,
            cache_creation_input_tokens: 300,
            cache_read_input_tokens: 4_000,
        }
    }
}

impl Usage {
    fn to_json(self) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": self.output_tokens,
        })
    }
}

/// The usage a side request (no tools) is answered with: small and cache-free, so it is
/// never mistaken for a scripted turn's.
pub const SIDE_USAGE: Usage = Usage {
    input_tokens: 7,
    output_tokens: 3,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
};

/// The text a side request is answered with.
pub const SIDE_TEXT: &str = "Stand-in side answer";

/// One scripted assistant turn of the main conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Optional text, then one `tool_use` block; `stop_reason: tool_use`.
    ToolUse {
        text: Option<String>,
        name: String,
        input: Value,
    },
    /// A final text; `stop_reason: end_turn`.
    Text(String),
}

/// The main conversation's turns, in order. Once they run out, every further turn is the
/// last one again (a script ending on text ends the conversation).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script {
    pub turns: Vec<Turn>,
}

/// The branch the scripted final message names in its `Delivered:` line.
pub const DELIVERED_BRANCH: &str = "feature/standin-test";
/// What the scripted `Bash` turn runs (in the CLI's cwd).
pub const SCRIPT_BASH_COMMAND: &str = "echo hello from bash > bash.txt";
/// What the scripted `Write` turn writes to `notes.md`.
pub const SCRIPT_NOTES: &str = "# Notes\n\nWritten by the stand-in's scripted Write call.\n";

impl Script {
    pub fn new(turns: Vec<Turn>) -> Script {
        Script { turns }
    }

    /// Three turns: `Bash` runs [`SCRIPT_BASH_COMMAND`] (writes `bash.txt` in the cwd),
    /// `Write` puts [`SCRIPT_NOTES`] in `<workdir>/notes.md`, then a final text with a line
    /// `Delivered: feature/standin-test`.
    pub fn bash_write_deliver(workdir: &Path) -> Script {
        let notes = workdir.join("notes.md");
        Script::new(vec![
            Turn::ToolUse {
                text: Some("I'll start by running a command.".into()),
                name: "Bash".into(),
                input: json!({
                    "command": SCRIPT_BASH_COMMAND,
                    "description": "Write a greeting to bash.txt",
                }),
            },
            Turn::ToolUse {
                text: Some("Now I'll write the notes.".into()),
                name: "Write".into(),
                input: json!({
                    "file_path": notes.to_string_lossy(),
                    "content": SCRIPT_NOTES,
                }),
            },
            Turn::Text(format!(
                "Done: bash.txt and notes.md are written.\n\nDelivered: {DELIVERED_BRANCH}\n"
            )),
        ])
    }

    fn turn(&self, index: usize) -> Option<&Turn> {
        self.turns.get(index).or_else(|| self.turns.last())
    }
}

/// How a stand-in answers.
#[derive(Debug, Clone, Default)]
pub struct StandinOptions {
    /// The model `message_start` reports; `None` echoes the requested one.
    pub served_model: Option<String>,
    /// The usage every scripted turn reports.
    pub usage: Usage,
    pub script: Script,
}

/// One request the stand-in received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// the path, without the query
    pub path: String,
    pub query: Option<String>,
    /// the `model` of a messages request
    pub model: Option<String>,
    /// whether the request offered tools (i.e. is the main conversation)
    pub has_tools: bool,
    pub stream: bool,
    /// the scripted turn served, for a main-conversation messages request
    pub turn: Option<usize>,
    /// the model the answer reported
    pub served_model: Option<String>,
    /// the JSON body (`Null` when there was none or it was not JSON)
    pub body: Value,
}

impl RecordedRequest {
    /// A `POST /v1/messages` request.
    pub fn is_messages(&self) -> bool {
        self.path == "/v1/messages"
    }
}

struct Shared {
    options: StandinOptions,
    requests: Mutex<Vec<RecordedRequest>>,
    next_id: Mutex<u64>,
}

impl Shared {
    fn record(&self, request: RecordedRequest) {
        eprintln!(
            "anthropic-standin: {} {}{} model={:?} tools={} stream={} turn={:?} served={:?}",
            request.method,
            request.path,
            request
                .query
                .as_deref()
                .map(|q| format!("?{q}"))
                .unwrap_or_default(),
            request.model,
            request.has_tools,
            request.stream,
            request.turn,
            request.served_model,
        );
        lock(&self.requests).push(request);
    }

    fn next_id(&self) -> u64 {
        let mut next = lock(&self.next_id);
        *next += 1;
        *next
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running stand-in; dropping it stops the server.
pub struct AnthropicStandin {
    port: u16,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AnthropicStandin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicStandin")
            .field("url", &self.url())
            .field("served_model", &self.shared.options.served_model)
            .finish()
    }
}

impl AnthropicStandin {
    /// Starts serving on a free loopback port; returns once it accepts connections.
    pub fn start(options: StandinOptions) -> AnthropicStandin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in's port");
        listener
            .set_nonblocking(true)
            .expect("stand-in listener non-blocking");
        let port = listener.local_addr().expect("stand-in address").port();
        let shared = Arc::new(Shared {
            options,
            requests: Mutex::new(Vec::new()),
            next_id: Mutex::new(0),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("anthropic-standin".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the stand-in's runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .expect("stand-in listener into tokio");
                    let router = Router::new()
                        .route("/v1/messages", post(messages))
                        .route("/v1/messages/count_tokens", post(count_tokens))
                        .fallback(anything_else)
                        // the Messages API takes requests up to 32 MB (Anthropic's documented
                        // request size limit), far past axum's 2 MB default
                        .layer(axum::extract::DefaultBodyLimit::max(32 * 1024 * 1024))
                        .with_state(state);
                    let served = axum::serve(listener, router)
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        })
                        .await;
                    if let Err(error) = served {
                        eprintln!("anthropic-standin: server stopped: {error}");
                    }
                });
            })
            .expect("spawn the stand-in's thread");
        AnthropicStandin {
            port,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn options(&self) -> &StandinOptions {
        &self.shared.options
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The main-conversation messages requests (those that offered tools).
    pub fn main_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_messages() && r.has_tools)
            .collect()
    }

    /// One line per request (`METHOD path model tools turn`), for failure messages.
    pub fn request_log(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                format!(
                    "{} {} model={:?} tools={} stream={} turn={:?} served={:?}\n",
                    r.method, r.path, r.model, r.has_tools, r.stream, r.turn, r.served_model
                )
            })
            .collect()
    }
}

impl Drop for AnthropicStandin {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn parse_body(body: &Bytes) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// The turn of the main conversation a request asks for: how many assistant messages it
/// already holds.
fn turn_index(body: &Value) -> usize {
    body.get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count()
        })
        .unwrap_or(0)
}

async fn messages(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let body = parse_body(&body);
    let model = body.get("model").and_then(Value::as_str).map(str::to_owned);
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty());
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let thinking = body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled");
    let served = shared
        .options
        .served_model
        .clone()
        .or_else(|| model.clone())
        .unwrap_or_else(|| "claude-standin".into());

    let (turn_no, turn, usage) = if has_tools {
        let index = turn_index(&body);
        let turn = shared
            .options
            .script
            .turn(index)
            .cloned()
            .unwrap_or_else(|| Turn::Text("The stand-in has no script.".into()));
        (Some(index), turn, shared.options.usage)
    } else {
        (None, Turn::Text(SIDE_TEXT.into()), SIDE_USAGE)
    };

    let id = shared.next_id();
    shared.record(RecordedRequest {
        method: "POST".into(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        model,
        has_tools,
        stream,
        turn: turn_no,
        served_model: Some(served.clone()),
        body,
    });

    let answer = Answer {
        message_id: format!("msg_standin_{id:04}"),
        tool_use_id: format!("toolu_standin_{id:04}"),
        model: served,
        usage,
        turn,
        thinking: thinking && turn_no.is_some(),
    };
    if stream {
        (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            answer.sse(),
        )
            .into_response()
    } else {
        json_response(StatusCode::OK, &answer.message())
    }
}

async fn count_tokens(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let body = parse_body(&body);
    shared.record(RecordedRequest {
        method: "POST".into(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
        has_tools: body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty()),
        stream: false,
        turn: None,
        served_model: None,
        body,
    });
    json_response(
        StatusCode::OK,
        &json!({ "input_tokens": shared.options.usage.input_tokens }),
    )
}

async fn anything_else(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    _headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.record(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        model: None,
        has_tools: false,
        stream: false,
        turn: None,
        served_model: None,
        body: parse_body(&body),
    });
    json_response(StatusCode::OK, &json!({}))
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// The thinking a main-conversation answer opens with when its request enables extended
/// thinking (`"thinking": {"type": "enabled", …}`): the Messages API answers such a request
/// with a `thinking` block (its text and an opaque `signature`) before the rest, and only then.
pub const SCRIPT_THINKING: &str = "STANDIN-THINKING: the user wants the files written first.";

/// One answer, as SSE or as a message object.
struct Answer {
    message_id: String,
    tool_use_id: String,
    model: String,
    usage: Usage,
    turn: Turn,
    /// the request enabled extended thinking: the answer opens with a thinking block
    thinking: bool,
}

impl Answer {
    fn content(&self) -> Vec<Value> {
        let mut content = Vec::new();
        if self.thinking {
            content.push(json!({
                "type": "thinking",
                "thinking": SCRIPT_THINKING,
                "signature": "c3RhbmRpbi1zaWduYXR1cmU=",
            }));
        }
        content.extend(self.blocks());
        content
    }

    fn blocks(&self) -> Vec<Value> {
        match &self.turn {
            Turn::Text(text) => vec![json!({ "type": "text", "text": text })],
            Turn::ToolUse { text, name, input } => {
                let mut blocks = Vec::new();
                if let Some(text) = text {
                    blocks.push(json!({ "type": "text", "text": text }));
                }
                blocks.push(json!({
                    "type": "tool_use",
                    "id": self.tool_use_id,
                    "name": name,
                    "input": input,
                }));
                blocks
            }
        }
    }

    fn stop_reason(&self) -> &'static str {
        match self.turn {
            Turn::Text(_) => "end_turn",
            Turn::ToolUse { .. } => "tool_use",
        }
    }

    fn message(&self) -> Value {
        json!({
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.content(),
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": self.usage.to_json(),
        })
    }

    fn sse(&self) -> String {
        let mut out = String::new();
        let mut event = |name: &str, data: Value| {
            out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        };
        let mut start_usage = self.usage.to_json();
        start_usage["output_tokens"] = json!(1);
        event(
            "message_start",
            json!({
                "type": "message_start",
                "message": {
                    "id": self.message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": start_usage,
                },
            }),
        );
        for (index, block) in self.content().iter().enumerate() {
            match block.get("type").and_then(Value::as_str) {
                Some("thinking") => {
                    event(
                        "content_block_start",
                        json!({
                            "type": "content_block_start",
                            "index": index,
                            "content_block": { "type": "thinking", "thinking": "", "signature": "" },
                        }),
                    );
                    for chunk in split_in_two(block["thinking"].as_str().unwrap_or("")) {
                        event(
                            "content_block_delta",
                            json!({
                                "type": "content_block_delta",
                                "index": index,
                                "delta": { "type": "thinking_delta", "thinking": chunk },
                            }),
                        );
                    }
                    event(
                        "content_block_delta",
                        json!({
                            "type": "content_block_delta",
                            "index": index,
                            "delta": { "type": "signature_delta", "signature": block["signature"] },
                        }),
                    );
                }
                Some("tool_use") => {
                    let input = block.get("input").cloned().unwrap_or(Value::Null);
                    event(
                        "content_block_start",
                        json!({
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {
                                "type": "tool_use",
                                "id": block.get("id"),
                                "name": block.get("name"),
                                "input": {},
                            },
                        }),
                    );
                    for chunk in split_in_two(&input.to_string()) {
                        event(
                            "content_block_delta",
                            json!({
                                "type": "content_block_delta",
                                "index": index,
                                "delta": { "type": "input_json_delta", "partial_json": chunk },
                            }),
                        );
                    }
                }
                _ => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                    event(
                        "content_block_start",
                        json!({
                            "type": "content_block_start",
                            "index": index,
                            "content_block": { "type": "text", "text": "" },
                        }),
                    );
                    for chunk in split_in_two(text) {
                        event(
                            "content_block_delta",
                            json!({
                                "type": "content_block_delta",
                                "index": index,
                                "delta": { "type": "text_delta", "text": chunk },
                            }),
                        );
                    }
                }
            }
            event(
                "content_block_stop",
                json!({ "type": "content_block_stop", "index": index }),
            );
        }
        event(
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": { "stop_reason": self.stop_reason(), "stop_sequence": null },
                "usage": { "output_tokens": self.usage.output_tokens },
            }),
        );
        event("message_stop", json!({ "type": "message_stop" }));
        out
    }
}

/// `text` in two pieces (split on a char boundary), so deltas really are partial.
fn split_in_two(text: &str) -> Vec<&str> {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle -= 1;
    }
    let (a, b) = text.split_at(middle);
    [a, b].into_iter().filter(|s| !s.is_empty()).collect()
}
