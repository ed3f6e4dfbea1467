//! The client commands of `boxfleet` (DESIGN §16): each one is a call, or one stream, to a
//! node's Runs or Ops service, printed for people, or with `--json` for scripts.
//!
//! Layout: [`run`] dispatches; [`Node`] is the connection and [`Failure`] the one line a user
//! reads when a call fails; then one function per command, `launch --wait`'s [`Follower`], the
//! tail protocol ([`TailCursor`]) and the pure formatting helpers the tests pin down.
//!
//! Output rules: what a command answers goes to stdout, one fixed shape per command; notices
//! about the wait itself ("the box is still being provisioned") go to stderr, so a pipe carries
//! only the answer.

use std::fmt;
use std::future::Future;
use std::io::Write;
use std::time::Duration;

use anyhow::bail;
use boxfleet_proto::v1::ops_client::OpsClient;
use boxfleet_proto::v1::runs_client::RunsClient;
use boxfleet_proto::v1::{
    ActorInfo, AnswerRequest, BoardEntry, BoardRequest, DeliverRequest, DrainRequest, Event,
    EventsRequest, GetReply, GetRequest, LaunchRequest, Launched, NodeInfo, NodesRequest, Refusal,
    SeatInfo, SeatsRequest, TailReply, TailRequest, TreeReply, TreeRequest, launch_reply, refusal,
    tail_reply,
};
use serde_json::{Map, Value, json};
use tokio::time::{Instant, MissedTickBehavior};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::cli::{Command, Conn, DEFAULT_ADDR, Runner};

/// How long connecting to a node may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound on an ordinary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The bound on a launch: it provisions a box and may run setup steps (600 s each) first.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The budget a tail request gives the node (the owner answers within ¾ of it).
const TAIL_BUDGET_MS: u32 = 3_000;
/// The bound on a tail call: its budget and room for the answer to travel.
const TAIL_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a follower asks again (tail) and re-checks a collected run.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// How long `launch --wait` looks, after a phase record with no question in it, for the run to
/// park on one anyway before it calls the run done.
const PARK_GRACE: Duration = Duration::from_secs(5);
/// Consecutive failed attempts to (re)open the events stream before `--wait` gives up.
const STREAM_RETRIES: u32 = 5;
/// The largest reply a client accepts: an event may be 8 MiB and `Get` carries several.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The event kinds the client reads (the spec's names; `cluster::events::kind`).
mod kind {
    pub(super) const RUN_STARTED: &str = "sandbox_run_started";
    pub(super) const RUN_FAILED: &str = "sandbox_run_failed";
    pub(super) const CLARIFICATION_REQUESTED: &str = "sandbox_clarification_requested";
    pub(super) const PHASE_COMPLETED: &str = "agent_phase_completed";
}

/// Runs one client command against a node and returns the process's exit code.
///
/// A node that cannot be reached, or a call that fails, is printed as one line on stderr and
/// exits 1; only a command that is not a client command (`demo`, `node`, `validate`) is an `Err`.
pub async fn run(command: Command) -> anyhow::Result<i32> {
    let result = match command {
        Command::Demo(_) | Command::Node(_) | Command::Validate { .. } => {
            bail!("demo, node and validate run in this process; they are not client commands")
        }
        Command::Launch {
            seat,
            turn,
            runner,
            brief,
            command,
            task,
            timeout,
            model,
            pause_ttl,
            wait,
            json,
            conn,
        } => {
            let args = LaunchArgs {
                seat,
                turn,
                runner,
                brief,
                command,
                task,
                timeout,
                model,
                pause_ttl,
            };
            launch(&conn, &args, wait, json).await
        }
        Command::Runs {
            audience,
            json,
            conn,
        } => runs(&conn, audience.unwrap_or_default(), json).await,
        Command::Show { turn, json, conn } => show(&conn, &turn, json).await,
        Command::Tail {
            turn,
            launch,
            follow,
            conn,
        } => tail(&conn, &turn, launch.unwrap_or_default(), follow).await,
        Command::Answer {
            turn,
            launch,
            text,
            as_whom,
            conn,
        } => answer(&conn, turn, launch, text, as_whom.unwrap_or_default()).await,
        Command::Deliver {
            seat,
            conversation,
            text,
            from,
            conn,
        } => deliver(&conn, seat, conversation, text, from).await,
        Command::Events {
            from,
            follow,
            json,
            conn,
        } => events(&conn, from, follow, json).await,
        Command::Tree { fleet, json, conn } => tree(&conn, fleet, json).await,
        Command::Nodes { json, conn } => nodes(&conn, json).await,
        Command::Seats { json, conn } => seats(&conn, json).await,
        Command::Drain { node, conn } => drain(&conn, node).await,
    };
    match result {
        Ok(code) => Ok(code),
        Err(error) => {
            if let Some(failure) = error.downcast_ref::<Failure>() {
                eprintln!("boxfleet: {failure}");
                return Ok(1);
            }
            if let Some(io) = error.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                // whoever read our output stopped reading (`| head`): nothing more to say
                return Ok(0);
            }
            Err(error)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The connection

/// A connected node and the credentials every call carries.
#[derive(Debug, Clone)]
struct Node {
    /// the address as the user gave it (for messages and the commands we print)
    addr: String,
    channel: Channel,
    auth: Auth,
}

/// Adds `authorization: Bearer …` to every call when a token was given.
#[derive(Debug, Clone, Default)]
struct Auth {
    bearer: Option<MetadataValue<Ascii>>,
}

impl Interceptor for Auth {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(bearer) = &self.bearer {
            request
                .metadata_mut()
                .insert("authorization", bearer.clone());
        }
        Ok(request)
    }
}

type Authed = InterceptedService<Channel, Auth>;

/// Why a client command could not do what it was asked: printed as one line, exit 1.
#[derive(Debug)]
enum Failure {
    /// nothing answered at the address
    Unreachable { addr: String, why: String },
    /// the token cannot travel as a header
    BadToken { why: String },
    /// the node answered the call with an error
    Rpc {
        addr: String,
        what: &'static str,
        status: Status,
    },
    /// the node did not answer the call in time
    TimedOut {
        addr: String,
        what: &'static str,
        after: Duration,
    },
    /// the node answered something this client cannot read
    Unexpected { what: &'static str, why: String },
}

impl std::error::Error for Failure {}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable { addr, why } => write!(
                f,
                "cannot reach a node at {addr}: {why}. Start one with 'boxfleet node' or pass --addr."
            ),
            Failure::BadToken { why } => write!(
                f,
                "the token cannot be sent as an authorization header ({why}); check --token or \
                 BOXFLEET_TOKEN"
            ),
            Failure::Rpc { addr, what, status } => {
                let message = one_line(status.message());
                match status.code() {
                    Code::Unauthenticated => write!(
                        f,
                        "the node at {addr} refused {what}: {message}. Pass --token or set \
                         BOXFLEET_TOKEN."
                    ),
                    Code::PermissionDenied => {
                        write!(f, "{what} is not allowed: {message}")
                    }
                    Code::Unimplemented => write!(
                        f,
                        "the node at {addr} does not serve {what} ({message}); is it a boxfleet \
                         node of this version?"
                    ),
                    Code::Unavailable => write!(
                        f,
                        "{what} failed: the node at {addr} is unavailable: {message}"
                    ),
                    code => write!(f, "{what} failed: {message} ({code:?})"),
                }
            }
            Failure::TimedOut { addr, what, after } => write!(
                f,
                "{what} failed: the node at {addr} did not answer within {} s",
                after.as_secs()
            ),
            Failure::Unexpected { what, why } => write!(f, "{what}: {why}"),
        }
    }
}

/// Connects to the node `conn` names, within [`CONNECT_TIMEOUT`].
async fn connect(conn: &Conn) -> Result<Node, Failure> {
    let auth = match &conn.token {
        Some(token) if !token.trim().is_empty() => {
            let bearer = format!("Bearer {}", token.trim())
                .parse::<MetadataValue<Ascii>>()
                .map_err(|error| Failure::BadToken {
                    why: error.to_string(),
                })?;
            Auth {
                bearer: Some(bearer),
            }
        }
        _ => Auth::default(),
    };
    // an empty BOXFLEET_ADDR reaches clap as a value; it means "not set"
    let addr = match conn.addr.trim() {
        "" => DEFAULT_ADDR,
        addr => addr,
    };
    let unreachable = |why: String| Failure::Unreachable {
        addr: addr.to_owned(),
        why,
    };
    let endpoint = Endpoint::from_shared(with_scheme(addr))
        .map_err(|error| unreachable(format!("not an address ({})", error_chain(&error))))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    let channel = match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
        Err(_) => {
            return Err(unreachable(format!(
                "no answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(error)) => return Err(unreachable(error_chain(&error))),
        Ok(Ok(channel)) => channel,
    };
    Ok(Node {
        addr: addr.to_owned(),
        channel,
        auth,
    })
}

impl Node {
    fn runs(&self) -> RunsClient<Authed> {
        RunsClient::with_interceptor(self.channel.clone(), self.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    fn ops(&self) -> OpsClient<Authed> {
        OpsClient::with_interceptor(self.channel.clone(), self.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Awaits one call within `limit`, turning its failure into the line a user reads.
    async fn call<T>(
        &self,
        what: &'static str,
        limit: Duration,
        call: impl Future<Output = Result<tonic::Response<T>, Status>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(limit, call).await {
            Err(_) => Err(Failure::TimedOut {
                addr: self.addr.clone(),
                what,
                after: limit,
            }),
            Ok(Err(status)) => Err(Failure::Rpc {
                addr: self.addr.clone(),
                what,
                status,
            }),
            Ok(Ok(response)) => Ok(response.into_inner()),
        }
    }

    async fn get(&self, turn: &str) -> Result<GetReply, Failure> {
        let request = GetRequest {
            turn_id: turn.to_owned(),
        };
        self.call("show", CALL_TIMEOUT, self.runs().get(request))
            .await
    }

    async fn tail(
        &self,
        turn: &str,
        launch: &str,
        cursor: &TailCursor,
    ) -> Result<TailReply, Failure> {
        let request = TailRequest {
            turn_id: turn.to_owned(),
            launch_id: launch.to_owned(),
            epoch: cursor.epoch,
            after: cursor.after,
            digest: cursor.digest.clone(),
            budget_ms: TAIL_BUDGET_MS,
        };
        self.call("tail", TAIL_TIMEOUT, self.runs().tail(request))
            .await
    }

    async fn open_events(
        &self,
        from_revision: i64,
        follow: bool,
    ) -> Result<tonic::Streaming<Event>, Failure> {
        let request = EventsRequest {
            from_revision,
            follow,
        };
        self.call("events", CALL_TIMEOUT, self.runs().events(request))
            .await
    }
}

/// An address with no scheme is taken as plain-text HTTP/2 (`127.0.0.1:7400`).
fn with_scheme(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    }
}

/// An error and its sources, each said once: `transport error: tcp connect error: refused`.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        if !text.is_empty() && !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        next = error.source();
    }
    parts.join(": ")
}

/// Writes to stdout and flushes (a follower's output must show as it arrives).
fn out(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// Writes one notice line to stderr.
fn note(text: &str) {
    eprintln!("{text}");
}

// ---------------------------------------------------------------------------------------------
// launch

/// What `launch` asks for.
#[derive(Debug, Clone, Default)]
struct LaunchArgs {
    seat: String,
    turn: Option<String>,
    runner: Option<Runner>,
    brief: Option<String>,
    command: Option<String>,
    task: Option<String>,
    timeout: Option<u64>,
    model: Option<String>,
    pause_ttl: Option<u64>,
}

fn launch_request(args: &LaunchArgs) -> LaunchRequest {
    let runner = args.runner.unwrap_or(if args.command.is_some() {
        Runner::Command
    } else {
        Runner::ClaudeCode
    });
    LaunchRequest {
        seat: args.seat.clone(),
        turn_id: args.turn.clone().unwrap_or_default(),
        brief: args.brief.clone().unwrap_or_default(),
        task: args.task.clone().unwrap_or_default(),
        runner: runner.as_str().to_owned(),
        command: args.command.clone().unwrap_or_default(),
        model: args.model.clone().unwrap_or_default(),
        pause_ttl_seconds: args.pause_ttl,
        timeout_seconds: args.timeout.unwrap_or(0),
        ..LaunchRequest::default()
    }
}

async fn launch(conn: &Conn, args: &LaunchArgs, wait: bool, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = node
        .call(
            "launch",
            LAUNCH_TIMEOUT,
            node.runs().launch(launch_request(args)),
        )
        .await?;
    let launched = match reply.outcome {
        Some(launch_reply::Outcome::Launched(launched)) => launched,
        Some(launch_reply::Outcome::Refused(refusal)) => {
            if json {
                out(&format!("{}\n", refusal_json(&refusal)))?;
            } else {
                out(&format!("{}\n", refusal_line(&refusal)))?;
            }
            return Ok(1);
        }
        None => {
            return Err(Failure::Unexpected {
                what: "launch",
                why: "the node answered neither launched nor refused".to_owned(),
            }
            .into());
        }
    };
    if json {
        out(&format!("{}\n", launched_json(&launched)))?;
    } else {
        out(&format!("{}\n", launched_line(&launched)))?;
    }
    if !wait {
        return Ok(0);
    }
    Follower::new(&node, &launched, json).follow().await
}

fn refusal_class(refusal: &Refusal) -> &'static str {
    match refusal.class() {
        refusal::Class::Unspecified => "unspecified",
        refusal::Class::Unavailable => "unavailable",
        refusal::Class::Refused => "refused",
        refusal::Class::Budget => "budget",
    }
}

fn refusal_line(refusal: &Refusal) -> String {
    format!("refused ({}): {}", refusal_class(refusal), refusal.reason)
}

fn refusal_json(refusal: &Refusal) -> Value {
    json!({"refused": {"class": refusal_class(refusal), "reason": refusal.reason}})
}

fn launched_line(launched: &Launched) -> String {
    format!(
        "launched {} job {} in box {} on {}",
        launched.turn_id, launched.launch_id, launched.sandbox_id, launched.node
    )
}

fn launched_json(launched: &Launched) -> Value {
    json!({"launched": {
        "turn_id": launched.turn_id,
        "launch_id": launched.launch_id,
        "sandbox_id": launched.sandbox_id,
        "node": launched.node,
    }})
}

// ---------------------------------------------------------------------------------------------
// launch --wait

/// Follows one launched run until it is collected: the turn's events from the events outbox
/// (the run's lifecycle), and the job's live output by the tail protocol while it runs.
///
/// ```text
///  running ──phase record, failed──────────────────────▶ exit 1
///     │    ──phase record, a question ─▶ parked ─answer, the turn relaunches─▶ running (new job)
///     │    ──phase record ─▶ settling ─record parked─▶ parked
///     │                             ─record gone / ended / moved on, or PARK_GRACE─▶ exit 0
///     └────sandbox_run_failed (any time)───────────────────────────────────────▶ exit 1
/// ```
#[derive(Debug)]
struct Follower<'a> {
    node: &'a Node,
    json: bool,
    turn: String,
    /// the job being followed: the launched one, then whichever the turn launches next
    launch: String,
    /// whether an event of the launched job was seen: the turn's events before it are an earlier
    /// use of the same turn id
    anchored: bool,
    /// the job's live output while it runs; `None` once it stopped (or while parked)
    tail: Option<TailCursor>,
    /// the last notice printed, so a repeating one is said once
    last_notice: Option<String>,
    /// the job whose question was printed
    asked_for: Option<String>,
    /// a phase record with no question in it: the run is done unless it parks after all
    settling: Option<Settling>,
}

#[derive(Debug)]
struct Settling {
    launch: String,
    until: Instant,
}

/// What a follower does next.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Continue,
    Exit(i32),
}

impl<'a> Follower<'a> {
    fn new(node: &'a Node, launched: &Launched, json: bool) -> Self {
        Self {
            node,
            json,
            turn: launched.turn_id.clone(),
            launch: launched.launch_id.clone(),
            anchored: false,
            tail: Some(TailCursor::default()),
            last_notice: None,
            asked_for: None,
            settling: None,
        }
    }

    async fn follow(mut self) -> anyhow::Result<i32> {
        let mut from_revision = 0;
        let mut failures = 0;
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let mut stream = match self.node.open_events(from_revision, true).await {
                Ok(stream) => {
                    failures = 0;
                    stream
                }
                Err(failure) => {
                    failures += 1;
                    if failures > STREAM_RETRIES {
                        return Err(failure.into());
                    }
                    tokio::time::sleep(POLL_EVERY).await;
                    continue;
                }
            };
            loop {
                tokio::select! {
                    message = stream.message() => match message {
                        Ok(Some(event)) => {
                            failures = 0;
                            from_revision = event.revision + 1;
                            if let Next::Exit(code) = self.on_event(&event).await? {
                                return Ok(code);
                            }
                        }
                        // the node closed the stream (a restart, a drain): open it again
                        Ok(None) => break,
                        Err(status) => {
                            failures += 1;
                            if failures > STREAM_RETRIES {
                                return Err(Failure::Rpc {
                                    addr: self.node.addr.clone(),
                                    what: "events",
                                    status,
                                }
                                .into());
                            }
                            break;
                        }
                    },
                    _ = tick.tick() => {
                        if let Next::Exit(code) = self.on_tick().await? {
                            return Ok(code);
                        }
                    }
                }
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    async fn on_event(&mut self, event: &Event) -> anyhow::Result<Next> {
        if event.turn_id != self.turn {
            return Ok(Next::Continue);
        }
        if !self.anchored {
            if event.launch_id != self.launch {
                return Ok(Next::Continue);
            }
            self.anchored = true;
        }
        let value = event_value(event);
        if self.json {
            out(&format!("{}\n", value))?;
        }
        if !event.launch_id.is_empty() && event.launch_id != self.launch {
            // the turn launched its next job (the relaunch an answer brings)
            self.launch = event.launch_id.clone();
            self.tail = Some(TailCursor::default());
            self.settling = None;
            self.last_notice = None;
            if !self.json {
                out(&format!("the turn launched job {}\n", self.launch))?;
            }
        }
        match event.kind.as_str() {
            kind::CLARIFICATION_REQUESTED => {
                self.tail = None;
                self.settling = None;
                if !self.json && self.asked_for.as_deref() != Some(&self.launch) {
                    let question = Question::from_event(&value);
                    out(&question.render(&self.turn, &self.launch, &self.node.addr))?;
                }
                self.asked_for = Some(self.launch.clone());
                Ok(Next::Continue)
            }
            kind::PHASE_COMPLETED => {
                if self.tail.is_some() && !self.json {
                    // what the job wrote since the last tick, before the record says it ended
                    self.tail_once().await?;
                }
                self.tail = None;
                if !self.json {
                    out(&render_phase_record(&value))?;
                }
                let record = phase_record_of(&value);
                if bool_field(record, "failed") {
                    return Ok(Next::Exit(1));
                }
                if !phase_asks_question(record) && self.asked_for.as_deref() != Some(&self.launch) {
                    self.settling = Some(Settling {
                        launch: self.launch.clone(),
                        until: Instant::now() + PARK_GRACE,
                    });
                }
                Ok(Next::Continue)
            }
            kind::RUN_FAILED => {
                if !self.json {
                    out(&format!("{}\n", failure_line(&value)))?;
                }
                Ok(Next::Exit(1))
            }
            _ => Ok(Next::Continue),
        }
    }

    async fn on_tick(&mut self) -> anyhow::Result<Next> {
        if let Some(settling) = &self.settling {
            let launch = settling.launch.clone();
            let until = settling.until;
            let reply = match self.node.get(&self.turn).await {
                Ok(reply) => reply,
                Err(failure) => {
                    self.notice(&format!("cannot read the run yet: {failure}"));
                    return Ok(if Instant::now() >= until {
                        Next::Exit(0)
                    } else {
                        Next::Continue
                    });
                }
            };
            return Ok(match after_phase(&reply, &launch) {
                AfterPhase::Parked(question) => {
                    self.settling = None;
                    if !self.json && self.asked_for.as_deref() != Some(&launch) {
                        out(&question.render(&self.turn, &launch, &self.node.addr))?;
                    }
                    self.asked_for = Some(launch);
                    Next::Continue
                }
                AfterPhase::Done => Next::Exit(0),
                AfterPhase::Undecided if Instant::now() >= until => Next::Exit(0),
                AfterPhase::Undecided => Next::Continue,
            });
        }
        if self.tail.is_some() && !self.json {
            self.tail_once().await?;
        }
        Ok(Next::Continue)
    }

    /// One tail request for the followed job; prints what is new. A failed request is a notice:
    /// the wait goes on, since the run's events still arrive.
    async fn tail_once(&mut self) -> anyhow::Result<()> {
        let Some(cursor) = self.tail.as_mut() else {
            return Ok(());
        };
        let reply = match self.node.tail(&self.turn, &self.launch, cursor).await {
            Ok(reply) => reply,
            Err(failure) => {
                let line = format!("cannot tail the job: {failure}");
                self.notice(&line);
                return Ok(());
            }
        };
        let view = cursor.apply(&reply, &self.turn);
        out(&view.text)?;
        // a job that stopped running is told by its events (the phase record, the question)
        if let Some(notice) = view.notice.as_ref().filter(|_| !view.stopped) {
            self.notice(notice);
        }
        if view.stopped {
            self.tail = None;
        }
        Ok(())
    }

    fn notice(&mut self, text: &str) {
        if self.last_notice.as_deref() != Some(text) {
            note(text);
            self.last_notice = Some(text.to_owned());
        }
    }
}

/// Where a run stands after a phase record that named no question.
#[derive(Debug, PartialEq)]
enum AfterPhase {
    /// it parked on a question after all
    Parked(Question),
    /// it was collected, ended or moved on to a later job
    Done,
    /// still being settled
    Undecided,
}

fn after_phase(reply: &GetReply, launch: &str) -> AfterPhase {
    if !reply.found || reply.record_json.is_empty() {
        return AfterPhase::Done;
    }
    let Ok(record) = serde_json::from_str::<Value>(&reply.record_json) else {
        return AfterPhase::Undecided;
    };
    let record_launch = str_field(&record, "launch_id");
    if !record_launch.is_empty() && record_launch != launch {
        return AfterPhase::Done;
    }
    match str_field(&record, "status") {
        "awaiting_clarification" | "reseed" | "answered" => {
            AfterPhase::Parked(Question::from_record(&record))
        }
        "ending" => AfterPhase::Done,
        _ => AfterPhase::Undecided,
    }
}

/// A question a run parked on, as an event or a record carries it.
#[derive(Debug, Clone, Default, PartialEq)]
struct Question {
    text: String,
    audience: String,
    audience_handles: Vec<String>,
    branch: String,
}

impl Question {
    /// From a `sandbox_clarification_requested` event: its body holds `question` (text, or an
    /// object with `text`), `audience`, `audience_handles` and `branch`.
    fn from_event(event: &Value) -> Self {
        Self::from_fields(body_of(event))
    }

    /// From a run record: its `question` object.
    fn from_record(record: &Value) -> Self {
        Self::from_fields(record)
    }

    fn from_fields(holder: &Value) -> Self {
        let question = holder.get("question").unwrap_or(&Value::Null);
        let pick = |key: &str| {
            let own = str_field(question, key);
            if own.is_empty() {
                str_field(holder, key).to_owned()
            } else {
                own.to_owned()
            }
        };
        let text = match question {
            Value::String(text) => text.clone(),
            _ => str_field(question, "text").to_owned(),
        };
        let handles = question
            .get("audience_handles")
            .or_else(|| holder.get("audience_handles"));
        Self {
            text,
            audience: pick("audience"),
            audience_handles: strings(handles),
            branch: pick("branch"),
        }
    }

    /// The question, whom it is put to, and the exact command that answers it.
    fn render(&self, turn: &str, launch: &str, addr: &str) -> String {
        let mut to = cell(&self.audience).to_owned();
        if !self.audience_handles.is_empty() {
            to = format!("{to}: {}", self.audience_handles.join(", "));
        }
        let mut text = format!("job {launch} asks ({to}):\n");
        text.push_str(&indent(non_empty(&self.text, "(no question text)"), 2));
        if !self.branch.is_empty() {
            text.push_str(&format!("  work pushed to branch {}\n", self.branch));
        }
        text.push_str("answer it with:\n  ");
        text.push_str(&answer_command(turn, launch, addr));
        text.push('\n');
        text
    }
}

/// The exact `boxfleet answer` command for a parked job.
fn answer_command(turn: &str, launch: &str, addr: &str) -> String {
    let mut command = format!(
        "boxfleet answer {} --launch {} --text '<your answer>'",
        shell_quote(turn),
        shell_quote(launch)
    );
    if addr != DEFAULT_ADDR {
        command.push_str(&format!(" --addr {}", shell_quote(addr)));
    }
    command
}

/// A word as a POSIX shell reads it back unchanged.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

// ---------------------------------------------------------------------------------------------
// tail

/// What a viewer holds of a job's output (the spec's "Watching a run live"): the reading's
/// epoch, the offset it holds through and the owner's digest there; all zero on a first request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TailCursor {
    epoch: u64,
    after: u64,
    digest: String,
    /// the job the last answer was about
    launch: String,
    /// whether any answer has been applied yet
    asked: bool,
    /// what the last answer held back
    held: u64,
}

/// What one tail answer shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TailView {
    /// new output, for stdout
    text: String,
    /// a line about the job's state, for stderr
    notice: Option<String>,
    /// the job is not running: a follower stops
    stopped: bool,
}

impl TailCursor {
    /// Applies one answer: returns only what is new and moves the cursor past it.
    fn apply(&mut self, reply: &TailReply, turn: &str) -> TailView {
        let first = !self.asked;
        self.asked = true;
        let mut view = TailView::default();
        if !reply.launch_id.is_empty() && reply.launch_id != self.launch {
            if !self.launch.is_empty() {
                view.notice = Some(format!("now showing job {}", reply.launch_id));
            }
            self.launch = reply.launch_id.clone();
        }
        match reply.outcome() {
            tail_reply::Outcome::Tail => {
                let held_before = self.after;
                let text = if reply.epoch == self.epoch
                    && reply.start < self.after
                    && reply.end >= self.after
                {
                    // an answer overlapping what we hold: show only past it
                    skip_bytes(&reply.text, (self.after - reply.start) as usize)
                } else {
                    reply.text.as_str()
                };
                view.text = text.to_owned();
                self.hold(reply);
                if first && held_before == 0 && reply.end == 0 && view.text.is_empty() {
                    view.notice = Some(if reply.held > 0 {
                        "the job has written nothing that can be shown yet".to_owned()
                    } else {
                        "the job has written nothing yet".to_owned()
                    });
                }
            }
            tail_reply::Outcome::Reset => {
                if !first {
                    view.notice = Some(format!(
                        "the output was reset; showing its last {}",
                        human_bytes(reply.text.len() as u64)
                    ));
                }
                view.text = reply.text.clone();
                self.hold(reply);
            }
            tail_reply::Outcome::Launching => {
                view.notice = Some("the job's box is still being provisioned".to_owned());
            }
            tail_reply::Outcome::NotRunning => {
                view.notice = Some(not_running_notice(&reply.detail, turn));
                view.stopped = true;
            }
            tail_reply::Outcome::OwnerSilent => {
                view.notice = Some(if reply.detail.is_empty() {
                    "no node holds the run right now".to_owned()
                } else {
                    format!("the run's owner {} did not answer in time", reply.detail)
                });
            }
            tail_reply::Outcome::BoxPaused => {
                view.notice =
                    Some("the job's box is paused (the run is being collected)".to_owned());
            }
            tail_reply::Outcome::Unspecified => {
                view.notice = Some(format!(
                    "the node answered the tail with an outcome this client does not know ({})",
                    reply.outcome
                ));
                view.stopped = true;
            }
        }
        if first && reply.front {
            add_notice(
                &mut view,
                "the output's front is not shown: the reading began after its start",
            );
        }
        if reply.held > 0 && self.held == 0 {
            add_notice(
                &mut view,
                &format!(
                    "{} not shown yet: what the job writes next decides how they are redacted",
                    human_bytes(reply.held)
                ),
            );
        }
        self.held = reply.held;
        if !view.text.is_empty() && !view.text.ends_with('\n') {
            // shown text is whole lines; a stray fragment must not glue to the next notice
            view.text.push('\n');
        }
        view
    }

    fn hold(&mut self, reply: &TailReply) {
        self.epoch = reply.epoch;
        self.after = reply.end;
        self.digest = reply.digest.clone();
    }
}

fn add_notice(view: &mut TailView, notice: &str) {
    view.notice = Some(match view.notice.take() {
        Some(first) => format!("{first}; {notice}"),
        None => notice.to_owned(),
    });
}

fn not_running_notice(detail: &str, turn: &str) -> String {
    match detail {
        "collected" => format!(
            "the job is not running: the run was collected; 'boxfleet show {}' prints what it did",
            shell_quote(turn)
        ),
        "awaiting_clarification" => format!(
            "the job is not running: the run is parked on a question; 'boxfleet show {}' prints it",
            shell_quote(turn)
        ),
        "" => "the job is not running".to_owned(),
        status => format!("the job is not running: the run is {status}"),
    }
}

/// `text` without its first `n` bytes, cut forward to a character boundary.
fn skip_bytes(text: &str, n: usize) -> &str {
    let mut at = n.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

async fn tail(conn: &Conn, turn: &str, launch: String, follow: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let mut cursor = TailCursor::default();
    let mut last_notice: Option<String> = None;
    let mut showed_anything = false;
    loop {
        let reply = node.tail(turn, &launch, &cursor).await?;
        let outcome = reply.outcome();
        let view = cursor.apply(&reply, turn);
        out(&view.text)?;
        if let Some(notice) = view.notice
            && last_notice.as_ref() != Some(&notice)
        {
            note(&notice);
            last_notice = Some(notice);
        }
        if view.stopped {
            return Ok(if showed_anything { 0 } else { 1 });
        }
        showed_anything = true;
        if !follow {
            return Ok(match outcome {
                tail_reply::Outcome::OwnerSilent => 1,
                _ => 0,
            });
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

// ---------------------------------------------------------------------------------------------
// runs, show

async fn runs(conn: &Conn, audience: String, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = node
        .call(
            "runs",
            CALL_TIMEOUT,
            node.runs().board(BoardRequest {
                audience: audience.clone(),
            }),
        )
        .await?;
    if json {
        let runs: Vec<Value> = reply.runs.iter().map(board_entry_json).collect();
        out(&format!("{}\n", pretty(&json!({ "runs": runs }))))?;
    } else if reply.runs.is_empty() {
        if audience.is_empty() {
            out("no runs in flight\n")?;
        } else {
            out(&format!("nothing is waiting on {audience}\n"))?;
        }
    } else {
        out(&board_table(&reply.runs))?;
    }
    Ok(0)
}

fn board_entry_json(entry: &BoardEntry) -> Value {
    json!({
        "turn_id": entry.turn_id,
        "role": entry.role,
        "agent_handle": entry.agent_handle,
        "agent_id": entry.agent_id,
        "coding_agent": entry.coding_agent,
        "sandbox_id": entry.sandbox_id,
        "task": entry.task,
        "status": entry.status,
        "started_at": entry.started_at,
        "question": entry.question,
        "audience": entry.audience,
        "work_item": entry.work_item,
        "owner": entry.owner,
        "paused_at": entry.paused_at,
        "launch_id": entry.launch_id,
        "audience_handles": entry.audience_handles,
    })
}

fn board_table(entries: &[BoardEntry]) -> String {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|entry| {
            vec![
                cell(&entry.turn_id).to_owned(),
                truncate(cell(&entry.agent_handle), 24),
                cell(&entry.status).to_owned(),
                cell(&entry.coding_agent).to_owned(),
                truncate(cell(&entry.sandbox_id), 24),
                truncate(cell(&entry.task), 32),
                truncate(cell(&entry.question), 48),
            ]
        })
        .collect();
    table(
        &["TURN", "SEAT", "STATUS", "AGENT", "BOX", "TASK", "QUESTION"],
        &rows,
    )
}

async fn show(conn: &Conn, turn: &str, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = match node.get(turn).await {
        Ok(reply) => reply,
        Err(Failure::Rpc { status, .. }) if status.code() == Code::NotFound => GetReply::default(),
        Err(failure) => return Err(failure.into()),
    };
    let nothing = reply.record_json.is_empty()
        && reply.phase_records_json.is_empty()
        && reply.events_json.is_empty();
    if !reply.found || nothing {
        note(&format!(
            "boxfleet: no run with turn id {turn}: no record and no phase records ('boxfleet runs' \
             lists the runs in flight)"
        ));
        return Ok(1);
    }
    if json {
        out(&format!("{}\n", pretty(&show_json(&reply))))?;
    } else {
        out(&render_show(&reply, turn, &node.addr))?;
    }
    Ok(0)
}

/// `show --json`: `{record, phase_records, events}`, each piece parsed (a piece that is not
/// JSON is carried as its text).
fn show_json(reply: &GetReply) -> Value {
    let record = if reply.record_json.is_empty() {
        Value::Null
    } else {
        parse_or_text(&reply.record_json)
    };
    json!({
        "record": record,
        "phase_records": reply.phase_records_json.iter().map(|p| parse_or_text(p)).collect::<Vec<_>>(),
        "events": reply.events_json.iter().map(|e| parse_or_text(e)).collect::<Vec<_>>(),
    })
}

fn render_show(reply: &GetReply, turn: &str, addr: &str) -> String {
    let mut text = String::new();
    if reply.record_json.is_empty() {
        text.push_str(&format!(
            "run {turn} was collected: its record is gone; what its jobs did follows\n"
        ));
    } else {
        text.push_str(&render_record(&parse_or_text(&reply.record_json), addr));
    }
    for phase in &reply.phase_records_json {
        text.push('\n');
        text.push_str(&render_phase_record(&parse_or_text(phase)));
    }
    if !reply.events_json.is_empty() {
        text.push_str("\nevents\n");
        for event in &reply.events_json {
            let event = parse_or_text(event);
            text.push_str(&format!(
                "  {}  {}  {}  {}\n",
                cell(str_field(&event, "at")),
                cell(str_field(&event, "type")),
                cell(str_field(&event, "launch_id")),
                event_summary(&event)
            ));
        }
    }
    text
}

/// A run record, readably: its identity, state, question and answer, then its brief.
fn render_record(record: &Value, addr: &str) -> String {
    let mut rows: Vec<(&str, String)> = Vec::new();
    let mut field = |label: &'static str, value: String| {
        if !value.is_empty() {
            rows.push((label, value));
        }
    };
    field("job", str_field(record, "launch_id").to_owned());
    field("seat", str_field(record, "seat").to_owned());
    field("status", str_field(record, "status").to_owned());
    field("coding agent", str_field(record, "coding_agent").to_owned());
    let placement = str_field(record, "placement");
    let sandbox = str_field(record, "sandbox_id");
    field(
        "box",
        match (sandbox, placement) {
            ("", _) => String::new(),
            (sandbox, "") => sandbox.to_owned(),
            (sandbox, placement) => format!("{sandbox} ({placement})"),
        },
    );
    field("owner", str_field(record, "owner").to_owned());
    field("task", one_line(str_field(record, "task")));
    field("work item", str_field(record, "work_item").to_owned());
    field("requester", str_field(record, "requester").to_owned());
    field("model", model_text(record.get("model")));
    field(
        "pause ttl",
        record
            .get("pause_ttl_seconds")
            .and_then(Value::as_u64)
            .map(|s| format!("{s} s"))
            .unwrap_or_default(),
    );
    field("paused at", str_field(record, "paused_at").to_owned());
    field("created", str_field(record, "created_at").to_owned());
    field("updated", str_field(record, "updated_at").to_owned());
    if let Some(ending) = record.get("ending").filter(|e| e.is_object()) {
        let detail = str_field(ending, "detail");
        field(
            "ending",
            if detail.is_empty() {
                str_field(ending, "reason").to_owned()
            } else {
                format!("{}: {}", str_field(ending, "reason"), one_line(detail))
            },
        );
    }
    if let Some(answer) = record.get("answer").filter(|a| a.is_object()) {
        field(
            "answer",
            format!(
                "from {} at {}: {}",
                cell(str_field(answer, "from")),
                cell(str_field(answer, "recorded_at")),
                one_line(str_field(answer, "text"))
            ),
        );
    }
    let mut text = format!("run {}\n", cell(str_field(record, "turn_id")));
    text.push_str(&labelled(&rows));
    let parked = matches!(
        str_field(record, "status"),
        "awaiting_clarification" | "reseed"
    );
    if record.get("question").is_some_and(|q| q.is_object()) {
        let question = Question::from_record(record);
        if parked {
            text.push_str(&indent(
                &question.render(
                    str_field(record, "turn_id"),
                    str_field(record, "launch_id"),
                    addr,
                ),
                2,
            ));
        } else {
            text.push_str("  question\n");
            text.push_str(&indent(&question.text, 4));
        }
    }
    let brief = str_field(record, "brief");
    if !brief.is_empty() {
        text.push_str("  brief\n");
        text.push_str(&indent(brief, 4));
    }
    text
}

// ---------------------------------------------------------------------------------------------
// The phase record

/// The record inside an `agent_phase_completed` event (`body.record`); tolerant of a record
/// handed over bare.
fn phase_record_of(event: &Value) -> &Value {
    let body = body_of(event);
    body.get("record").filter(|r| r.is_object()).unwrap_or(body)
}

/// Whether a phase record is that of a job that stopped to ask (its `notes` carry the question).
fn phase_asks_question(record: &Value) -> bool {
    let present = |value: Option<&Value>| match value {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(fields)) => !fields.is_empty(),
        Some(_) => true,
    };
    present(record.get("notes")) || present(record.get("question"))
}

/// An `agent_phase_completed{phase: sandbox}` event, readably: outcome, tokens, what the job
/// delivered, its report and its transcript.
fn render_phase_record(event: &Value) -> String {
    let body = body_of(event);
    let record = phase_record_of(event);
    let first = |key: &str| {
        let own = str_field(record, key);
        if own.is_empty() {
            str_field(event, key)
        } else {
            own
        }
    };
    let phase = non_empty(str_field(body, "phase"), "sandbox");
    let mut text = format!(
        "phase {phase}  turn {}  job {}",
        cell(first("turn_id")),
        cell(first("launch_id"))
    );
    for (label, key) in [("seat", "seat"), ("at", "at")] {
        let value = str_field(event, key);
        if !value.is_empty() {
            text.push_str(&format!("  {label} {value}"));
        }
    }
    text.push('\n');

    let failed = bool_field(record, "failed");
    let error = str_field(record, "error");
    let asks = phase_asks_question(record);
    let mut rows: Vec<(&str, String)> = Vec::new();
    rows.push((
        "outcome",
        if failed {
            "failed".to_owned()
        } else if asks {
            "asked a question".to_owned()
        } else {
            "succeeded".to_owned()
        },
    ));
    for (label, key) in [
        ("coding agent", "coding_agent"),
        ("box", "sandbox_id"),
        ("task", "task"),
        ("work item", "work_item"),
        ("started", "started_at"),
    ] {
        let value = str_field(record, key);
        if !value.is_empty() {
            rows.push((label, one_line(value)));
        }
    }
    if let Some(ms) = record.get("duration_ms").and_then(Value::as_f64) {
        rows.push(("duration", format!("{:.1} s", ms / 1000.0)));
    }
    let model = model_text(record.get("model"));
    if !model.is_empty() {
        rows.push(("model", model));
    }
    rows.push(("tokens", tokens_text(record)));
    if let Some(cost) = record.get("cost_usd").and_then(Value::as_f64)
        && cost > 0.0
    {
        rows.push(("cost", format!("${cost:.4}")));
    }
    let refs = strings(record.get("delivered_refs"));
    let elided_refs = record
        .get("delivered_refs_elided")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut delivered = if refs.is_empty() {
        "(nothing)".to_owned()
    } else {
        refs.join("\n")
    };
    if elided_refs > 0 {
        delivered.push_str(&format!("\n(and {elided_refs} more not listed)"));
    }
    rows.push(("delivered", delivered));
    text.push_str(&labelled(&rows));

    if !error.is_empty() {
        text.push_str("  error\n");
        text.push_str(&indent(error, 4));
    }
    if asks {
        text.push_str("  notes\n");
        text.push_str(&indent(&notes_text(record), 4));
    }
    text.push_str("  report\n");
    text.push_str(&indent(
        non_empty(str_field(record, "response"), "(no report)"),
        4,
    ));
    let transcript = transcript_lines(record.get("activity_transcript"));
    text.push_str(&format!(
        "  transcript ({})\n",
        count(transcript.len(), "line")
    ));
    if transcript.is_empty() {
        text.push_str("    (empty)\n");
    }
    for line in &transcript {
        text.push_str(&format!("    {line}\n"));
    }
    let elided_lines = record
        .get("activity_transcript_elided_lines")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let elided_bytes = record
        .get("activity_transcript_elided_bytes")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if elided_lines > 0 || elided_bytes > 0 {
        text.push_str(&format!(
            "    ({} and {} of the middle were left out of the record)\n",
            count(elided_lines as usize, "line"),
            human_bytes(elided_bytes)
        ));
    }
    text
}

fn tokens_text(record: &Value) -> String {
    let number = |key: &str| record.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut text = format!(
        "input {}, output {}",
        number("input_tokens"),
        number("output_tokens")
    );
    for (label, key) in [
        ("cache read", "cache_read_tokens"),
        ("cache write", "cache_write_tokens"),
    ] {
        let value = number(key);
        if value > 0 {
            text.push_str(&format!(", {label} {value}"));
        }
    }
    text
}

/// `model` as a string, or a receipt `{requested, effective, source, status}`.
fn model_text(model: Option<&Value>) -> String {
    match model {
        Some(Value::String(model)) => model.clone(),
        Some(receipt @ Value::Object(_)) => {
            let requested = str_field(receipt, "requested");
            let effective = str_field(receipt, "effective");
            let status = str_field(receipt, "status");
            if requested.is_empty() && effective.is_empty() {
                // a command job: no model was asked for and none reported
                return "none (no model requested or reported)".into();
            }
            let mut text = format!(
                "requested {}, ran {}",
                non_empty(requested, "(none)"),
                non_empty(effective, "(unknown)")
            );
            if !status.is_empty() {
                text.push_str(&format!(" ({status})"));
            }
            text
        }
        _ => String::new(),
    }
}

fn notes_text(record: &Value) -> String {
    match record.get("notes").or_else(|| record.get("question")) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(_)) => {
            let question = Question::from_fields(record);
            let mut text = question.text.clone();
            if !question.audience.is_empty() {
                text.push_str(&format!("\n(to {})", question.audience));
            }
            text
        }
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A transcript held as a list of lines, or as one text.
fn transcript_lines(transcript: Option<&Value>) -> Vec<String> {
    match transcript {
        Some(Value::String(text)) => text.lines().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .flat_map(|item| match item {
                Value::String(line) => line.lines().map(str::to_owned).collect::<Vec<_>>(),
                other => vec![other.to_string()],
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn failure_line(event: &Value) -> String {
    let body = body_of(event);
    let reason = non_empty(str_field(body, "reason"), "failed");
    let detail = [
        str_field(body, "detail"),
        str_field(body, "error"),
        str_field(body, "message"),
    ]
    .into_iter()
    .find(|d| !d.is_empty())
    .unwrap_or("");
    if detail.is_empty() {
        format!("run failed ({reason})")
    } else {
        format!("run failed ({reason}): {}", one_line(detail))
    }
}

// ---------------------------------------------------------------------------------------------
// answer, deliver

async fn answer(
    conn: &Conn,
    turn: String,
    launch: String,
    text: String,
    as_whom: String,
) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let request = AnswerRequest {
        turn_id: turn.clone(),
        launch_id: launch,
        text,
        as_whom,
    };
    let reply = node
        .call("answer", CALL_TIMEOUT, node.runs().answer(request))
        .await?;
    out(&format!(
        "{}\n",
        answer_line(&reply.outcome, &reply.detail, &turn)
    ))?;
    Ok(if reply.outcome == "recorded" { 0 } else { 1 })
}

fn answer_line(outcome: &str, detail: &str, turn: &str) -> String {
    let meaning = match outcome {
        "recorded" => "the answer is on the run; its turn resumes with it".to_owned(),
        "not_awaiting" => "the run is not waiting on a question".to_owned(),
        "gone" => "no such run: it was collected or ended".to_owned(),
        "wrong_launch" => format!(
            "the question is another job's; 'boxfleet show {}' names the job that asked",
            shell_quote(turn)
        ),
        "already_answered" => "the question was answered already".to_owned(),
        _ => String::new(),
    };
    // the node's own sentence says it best; ours stands in when it gave none
    let said = if detail.is_empty() {
        meaning
    } else {
        one_line(detail)
    };
    let mut line = non_empty(outcome, "unknown").to_owned();
    if !said.is_empty() {
        line.push_str(&format!(": {said}"));
    }
    line
}

async fn deliver(
    conn: &Conn,
    seat: String,
    conversation: String,
    text: String,
    from: String,
) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let request = DeliverRequest {
        seat,
        conversation_key: conversation,
        from,
        text,
        ..DeliverRequest::default()
    };
    let reply = node
        .call("deliver", CALL_TIMEOUT, node.runs().deliver(request))
        .await?;
    out(&format!(
        "{} delivery {} seq {}\n",
        non_empty(&reply.outcome, "unknown"),
        cell(&reply.delivery_id),
        reply.seq
    ))?;
    Ok(0)
}

// ---------------------------------------------------------------------------------------------
// events

async fn events(conn: &Conn, from: i64, follow: bool, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let mut from_revision = from;
    let mut failures = 0;
    loop {
        let mut stream = match node.open_events(from_revision, follow).await {
            Ok(stream) => {
                failures = 0;
                stream
            }
            Err(failure) if follow && failures < STREAM_RETRIES => {
                failures += 1;
                note(&format!("boxfleet: {failure}; trying again"));
                tokio::time::sleep(POLL_EVERY).await;
                continue;
            }
            Err(failure) => return Err(failure.into()),
        };
        let ended = loop {
            match stream.message().await {
                Ok(Some(event)) => {
                    failures = 0;
                    from_revision = event.revision + 1;
                    let line = if json {
                        event_value(&event).to_string()
                    } else {
                        event_line(&event)
                    };
                    out(&format!("{line}\n"))?;
                }
                Ok(None) => break None,
                Err(status) => break Some(status),
            }
        };
        if !follow {
            return match ended {
                None => Ok(0),
                Some(status) => Err(Failure::Rpc {
                    addr: node.addr.clone(),
                    what: "events",
                    status,
                }
                .into()),
            };
        }
        // a follower outlives a node that closed the stream (a restart, a drain): resume after
        // the last event printed
        failures += 1;
        if failures > STREAM_RETRIES {
            let status = ended.unwrap_or_else(|| Status::unavailable("the node closed the stream"));
            return Err(Failure::Rpc {
                addr: node.addr.clone(),
                what: "events",
                status,
            }
            .into());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// An event as one JSON object: the event's own JSON with `revision` merged in, and `type`,
/// `id`, `turn_id`, `launch_id` always present.
fn event_value(event: &Event) -> Value {
    let mut object = match serde_json::from_str::<Value>(&event.json) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            let mut object = Map::new();
            object.insert("body".to_owned(), other);
            object
        }
        Err(_) => {
            let mut object = Map::new();
            if !event.json.is_empty() {
                object.insert("raw".to_owned(), Value::String(event.json.clone()));
            }
            object
        }
    };
    for (key, value) in [
        ("type", &event.kind),
        ("id", &event.id),
        ("turn_id", &event.turn_id),
        ("launch_id", &event.launch_id),
        ("seat", &event.seat),
    ] {
        let missing = object
            .get(key)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if missing && (!value.is_empty() || key != "seat") {
            object.insert(key.to_owned(), Value::String(value.clone()));
        }
    }
    object.insert("revision".to_owned(), Value::from(event.revision));
    Value::Object(object)
}

/// `rev  type  turn  launch  summary`, one line.
fn event_line(event: &Event) -> String {
    let value = event_value(event);
    format!(
        "{}  {}  {}  {}  {}",
        event.revision,
        cell(&event.kind),
        cell(&event.turn_id),
        cell(&event.launch_id),
        event_summary(&value)
    )
}

/// A few words on what an event says.
fn event_summary(event: &Value) -> String {
    let body = body_of(event);
    let kind = str_field(event, "type");
    let summary = match kind {
        kind::RUN_STARTED => {
            let mut parts = Vec::new();
            for (label, key) in [
                ("seat", "seat"),
                ("box", "sandbox_id"),
                ("agent", "coding_agent"),
                ("task", "task"),
            ] {
                let mut value = str_field(body, key);
                if value.is_empty() {
                    value = str_field(event, key);
                }
                if !value.is_empty() {
                    parts.push(format!("{label}={value}"));
                }
            }
            parts.join(" ")
        }
        kind::CLARIFICATION_REQUESTED => {
            let question = Question::from_event(event);
            format!("asks {}: {}", cell(&question.audience), question.text)
        }
        kind::PHASE_COMPLETED => {
            let record = phase_record_of(event);
            let outcome = if bool_field(record, "failed") {
                let error = str_field(record, "error");
                if error.is_empty() {
                    "failed".to_owned()
                } else {
                    format!("failed: {error}")
                }
            } else if phase_asks_question(record) {
                "asked a question".to_owned()
            } else {
                "succeeded".to_owned()
            };
            let refs = strings(record.get("delivered_refs")).len();
            format!(
                "{outcome}; tokens {}; {}",
                tokens_text(record),
                count(refs, "ref")
            )
        }
        kind::RUN_FAILED => failure_line(event),
        _ => {
            let seat = str_field(event, "seat");
            let mut text = if seat.is_empty() {
                String::new()
            } else {
                format!("seat={seat}")
            };
            if body.as_object().is_some_and(|b| !b.is_empty()) && !std::ptr::eq(body, event) {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&body.to_string());
            }
            text
        }
    };
    truncate(&one_line(&summary), 120)
}

// ---------------------------------------------------------------------------------------------
// tree, nodes, seats, drain

async fn tree(conn: &Conn, fleet: bool, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = node
        .call("tree", CALL_TIMEOUT, node.ops().tree(TreeRequest { fleet }))
        .await?;
    if json {
        out(&format!("{}\n", pretty(&tree_json(&reply))))?;
    } else {
        out(&render_tree(&reply))?;
    }
    Ok(0)
}

fn actor_json(actor: &ActorInfo) -> Value {
    json!({
        "name": actor.name,
        "state": actor.state,
        "restarts": actor.restarts,
        "mailbox_depth": actor.mailbox_depth,
        "last_error": actor.last_error,
        "strategy": actor.strategy,
        "children": actor.children.iter().map(actor_json).collect::<Vec<_>>(),
    })
}

fn tree_json(reply: &TreeReply) -> Value {
    json!({
        "node": reply.node,
        "roots": reply.roots.iter().map(actor_json).collect::<Vec<_>>(),
    })
}

fn render_tree(reply: &TreeReply) -> String {
    fn actor(text: &mut String, actor_info: &ActorInfo, depth: usize) {
        text.push_str(&"  ".repeat(depth));
        text.push_str(&format!(
            "{}  {}  restarts={}  mailbox={}",
            cell(&actor_info.name),
            cell(&actor_info.state),
            actor_info.restarts,
            actor_info.mailbox_depth
        ));
        if !actor_info.strategy.is_empty() {
            text.push_str(&format!("  strategy={}", actor_info.strategy));
        }
        if !actor_info.last_error.is_empty() {
            text.push_str(&format!(
                "  last_error={}",
                truncate(&one_line(&actor_info.last_error), 160)
            ));
        }
        text.push('\n');
        for child in &actor_info.children {
            actor(text, child, depth + 1);
        }
    }
    let mut text = format!("node {}\n", cell(&reply.node));
    for root in &reply.roots {
        actor(&mut text, root, 1);
    }
    text
}

async fn nodes(conn: &Conn, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = node
        .call("nodes", CALL_TIMEOUT, node.ops().nodes(NodesRequest {}))
        .await?;
    if json {
        let nodes: Vec<Value> = reply.nodes.iter().map(node_json).collect();
        out(&format!("{}\n", pretty(&json!({ "nodes": nodes }))))?;
    } else {
        out(&nodes_table(&reply.nodes))?;
    }
    Ok(0)
}

fn node_json(info: &NodeInfo) -> Value {
    json!({
        "node": info.node,
        "addr": info.addr,
        "incarnation": info.incarnation,
        "started_at": info.started_at,
        "build": info.build,
        "host": info.host,
        "draining": info.draining,
        "seats": info.seats,
    })
}

fn nodes_table(nodes: &[NodeInfo]) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|info| {
            let state = if info.draining { "draining" } else { "live" };
            [
                &info.node,
                &info.addr,
                &info.host,
                state,
                &info.seats.to_string(),
                &info.incarnation,
                &info.started_at,
                &info.build,
            ]
            .map(|value| cell(value).to_owned())
            .to_vec()
        })
        .collect();
    table(
        &[
            "NODE",
            "ADDR",
            "HOST",
            "STATE",
            "SEATS",
            "INCARNATION",
            "STARTED",
            "BUILD",
        ],
        &rows,
    )
}

async fn seats(conn: &Conn, json: bool) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = node
        .call("seats", CALL_TIMEOUT, node.ops().seats(SeatsRequest {}))
        .await?;
    if json {
        let seats: Vec<Value> = reply.seats.iter().map(seat_json).collect();
        out(&format!("{}\n", pretty(&json!({ "seats": seats }))))?;
    } else {
        out(&seats_table(&reply.seats))?;
    }
    Ok(0)
}

fn seat_json(info: &SeatInfo) -> Value {
    json!({
        "seat": info.seat,
        "holder_node": info.holder_node,
        "incarnation": info.incarnation,
        "epoch": info.epoch,
        "active_runs": info.active_runs,
        "awaiting": info.awaiting,
        "inbox": info.inbox,
    })
}

fn seats_table(seats: &[SeatInfo]) -> String {
    let rows: Vec<Vec<String>> = seats
        .iter()
        .map(|info| {
            vec![
                cell(&info.seat).to_owned(),
                cell(&info.holder_node).to_owned(),
                cell(&info.incarnation).to_owned(),
                info.epoch.to_string(),
                info.active_runs.to_string(),
                info.awaiting.to_string(),
                info.inbox.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "SEAT",
            "HOLDER",
            "INCARNATION",
            "EPOCH",
            "RUNS",
            "AWAITING",
            "INBOX",
        ],
        &rows,
    )
}

/// How long `boxfleet drain` waits: every seat's release settles within 60 s.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(90);

async fn drain(conn: &Conn, node_id: String) -> anyhow::Result<i32> {
    let node = connect(conn).await?;
    let reply = node
        .call(
            "drain",
            // a drain waits for its seats' collections and answers to settle
            DRAIN_TIMEOUT,
            node.ops().drain(DrainRequest {
                node: node_id.clone(),
            }),
        )
        .await?;
    out(&format!(
        "drained {node_id}: released {}; it is placed no seats until it restarts\n",
        count(reply.released as usize, "seat")
    ))?;
    if reply.still_held > 0 {
        out(&format!(
            "{} still held: no other live node can take them (see `boxfleet nodes`)\n",
            count(reply.still_held as usize, "seat")
        ))?;
        return Ok(1);
    }
    Ok(0)
}

// ---------------------------------------------------------------------------------------------
// Formatting helpers

/// An aligned table: columns two spaces apart, the last column unpadded (no trailing blanks).
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, value) in widths.iter_mut().zip(row) {
            *width = (*width).max(value.chars().count());
        }
    }
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    let mut text = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().min(widths.len()).saturating_sub(1);
        for (index, (value, width)) in row.iter().zip(&widths).enumerate() {
            text.push_str(value);
            if index < last {
                let pad = width - value.chars().count() + 2;
                text.push_str(&" ".repeat(pad));
            }
        }
        text.push('\n');
    }
    text
}

/// Labelled rows: `  label         value`, a multi-line value continued under its first line.
fn labelled(rows: &[(&str, String)]) -> String {
    let width = rows
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0);
    let mut text = String::new();
    for (label, value) in rows {
        let mut lines = value.lines();
        let first = lines.next().unwrap_or("");
        text.push_str(&format!("  {label:<width$}  {first}\n"));
        for line in lines {
            text.push_str(&format!("  {:<width$}  {line}\n", ""));
        }
    }
    text
}

/// Every line of `text` indented by `by` spaces, ending in a newline.
fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    let mut out = String::new();
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("{pad}{line}\n"));
        }
    }
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// At most `max` characters, the cut marked with `…`.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Text on one line: line breaks and tabs become spaces, runs of blanks one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: `-` for nothing, so every column has a word.
fn cell(value: &str) -> &str {
    non_empty(value, "-")
}

fn non_empty<'a>(value: &'a str, otherwise: &'a str) -> &'a str {
    if value.is_empty() { otherwise } else { value }
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn parse_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// An event's `body`, or the event itself when it carries its fields at the top.
fn body_of(event: &Value) -> &Value {
    event.get("body").filter(|b| b.is_object()).unwrap_or(event)
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn bool_field(value: &Value, key: &str) -> bool {
    value.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect(),
        Some(Value::String(text)) if !text.is_empty() => vec![text.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase_event(failed: bool) -> Value {
        json!({
            "id": "e1",
            "type": "agent_phase_completed",
            "turn_id": "t1",
            "launch_id": "l1",
            "seat": "alice",
            "at": "2026-05-01T10:00:00Z",
            "body": {
                "phase": "sandbox",
                "record": {
                    "response": "Fixed the retry.\nAll tests pass.",
                    "delivered_refs": ["fix/retry", "https://git.example.com/acme/api/pull/42"],
                    "activity_transcript": ["[tool] Bash: go test ./...", "done"],
                    "input_tokens": 1,
                    "output_tokens": 2,
                    "failed": failed,
                    "error": if failed { "exit status 1" } else { "" }
                }
            }
        })
    }

    fn proto_event(revision: i64, json: &Value) -> Event {
        Event {
            id: str_field(json, "id").to_owned(),
            kind: str_field(json, "type").to_owned(),
            turn_id: str_field(json, "turn_id").to_owned(),
            launch_id: str_field(json, "launch_id").to_owned(),
            seat: str_field(json, "seat").to_owned(),
            revision,
            json: json.to_string(),
        }
    }

    #[test]
    fn tables_align_columns_and_leave_no_trailing_blanks() {
        let rows = vec![
            vec!["t-1".to_owned(), "running".to_owned(), "x".to_owned()],
            vec!["turn-22".to_owned(), "-".to_owned(), "ü-wide".to_owned()],
        ];
        let text = table(&["TURN", "STATUS", "TASK"], &rows);
        assert_eq!(
            text,
            "TURN     STATUS   TASK\n\
             t-1      running  x\n\
             turn-22  -        ü-wide\n"
        );
        assert!(text.lines().all(|line| !line.ends_with(' ')));
    }

    #[test]
    fn the_board_truncates_long_cells_for_width() {
        let entry = BoardEntry {
            turn_id: "t1".to_owned(),
            agent_handle: "alice".to_owned(),
            status: "awaiting_clarification".to_owned(),
            coding_agent: "claude-code".to_owned(),
            question: "Should the retry back off exponentially or linearly, and up to what cap \
                       in seconds?"
                .to_owned(),
            ..BoardEntry::default()
        };
        let text = board_table(&[entry]);
        let row = text.lines().nth(1).expect("a row");
        assert!(row.starts_with("t1    alice  awaiting_clarification  claude-code  -    -     "));
        assert!(row.ends_with('…'), "{row}");
        let shown = "Should the retry back off exponentially or line…";
        assert_eq!(shown.chars().count(), 48);
        assert!(row.ends_with(&format!("-     {shown}")), "{row}");
    }

    #[test]
    fn board_json_uses_the_spec_field_names() {
        let value = board_entry_json(&BoardEntry {
            turn_id: "t1".to_owned(),
            audience_handles: vec!["bob".to_owned()],
            ..BoardEntry::default()
        });
        let keys: Vec<&str> = value
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        for key in [
            "turn_id",
            "role",
            "agent_handle",
            "agent_id",
            "coding_agent",
            "sandbox_id",
            "task",
            "status",
            "started_at",
            "question",
            "audience",
            "work_item",
            "owner",
            "paused_at",
            "launch_id",
            "audience_handles",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        assert_eq!(value["audience_handles"], json!(["bob"]));
    }

    #[test]
    fn json_lines_carry_type_id_ids_and_revision_with_the_body() {
        let event = proto_event(42, &phase_event(false));
        let line = event_value(&event).to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        let back: Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(back["type"], "agent_phase_completed");
        assert_eq!(back["id"], "e1");
        assert_eq!(back["turn_id"], "t1");
        assert_eq!(back["launch_id"], "l1");
        assert_eq!(back["revision"], 42);
        assert_eq!(back["body"]["record"]["output_tokens"], 2);
    }

    #[test]
    fn json_lines_fill_fields_the_event_json_left_out() {
        // `cluster::events::Event` skips an empty launch_id; the proto fields fill the gaps
        let event = Event {
            id: "e2".to_owned(),
            kind: "sandbox_run_failed".to_owned(),
            turn_id: "t9".to_owned(),
            launch_id: String::new(),
            seat: "s".to_owned(),
            revision: 7,
            json: r#"{"id":"e2","type":"sandbox_run_failed","turn_id":"t9","seat":"s","body":{"reason":"launch_failed"}}"#.to_owned(),
        };
        let value = event_value(&event);
        assert_eq!(value["launch_id"], "");
        assert_eq!(value["revision"], 7);
        assert_eq!(value["body"]["reason"], "launch_failed");
        let broken = Event {
            json: "not json".to_owned(),
            ..event
        };
        let value = event_value(&broken);
        assert_eq!(value["type"], "sandbox_run_failed");
        assert_eq!(value["raw"], "not json");
    }

    #[test]
    fn event_lines_are_rev_type_turn_launch_summary() {
        let line = event_line(&proto_event(42, &phase_event(false)));
        assert_eq!(
            line,
            "42  agent_phase_completed  t1  l1  succeeded; tokens input 1, output 2; 2 refs"
        );
        let failed = json!({"id": "e3", "type": "sandbox_run_failed", "turn_id": "t1",
            "body": {"reason": "collect_unreachable", "detail": "box gone\nfor good"}});
        assert_eq!(
            event_line(&proto_event(43, &failed)),
            "43  sandbox_run_failed  t1  -  run failed (collect_unreachable): box gone for good"
        );
    }

    #[test]
    fn a_phase_record_renders_readably() {
        let text = render_phase_record(&phase_event(false));
        assert_eq!(
            text,
            "phase sandbox  turn t1  job l1  seat alice  at 2026-05-01T10:00:00Z\n\
             \x20 outcome    succeeded\n\
             \x20 tokens     input 1, output 2\n\
             \x20 delivered  fix/retry\n\
             \x20            https://git.example.com/acme/api/pull/42\n\
             \x20 report\n\
             \x20   Fixed the retry.\n\
             \x20   All tests pass.\n\
             \x20 transcript (2 lines)\n\
             \x20   [tool] Bash: go test ./...\n\
             \x20   done\n"
        );
    }

    #[test]
    fn a_failed_phase_record_says_why() {
        let event = phase_event(true);
        let text = render_phase_record(&event);
        assert!(text.contains("  outcome    failed\n"), "{text}");
        assert!(text.contains("  error\n    exit status 1\n"), "{text}");
        assert!(bool_field(phase_record_of(&event), "failed"));
    }

    #[test]
    fn a_phase_record_with_notes_asked_a_question() {
        let mut event = phase_event(false);
        event["body"]["record"]["notes"] = json!("Which database should I use?");
        assert!(phase_asks_question(phase_record_of(&event)));
        let text = render_phase_record(&event);
        assert!(text.contains("  outcome    asked a question\n"), "{text}");
        assert!(
            text.contains("  notes\n    Which database should I use?\n"),
            "{text}"
        );
        assert!(!phase_asks_question(phase_record_of(&phase_event(false))));
    }

    #[test]
    fn a_question_prints_the_exact_answer_command() {
        let event = json!({"type": "sandbox_clarification_requested", "turn_id": "t1",
            "launch_id": "l1", "body": {"question": "Postgres or SQLite?", "audience": "team",
            "audience_handles": ["bob", "carol"], "branch": "wip/db"}});
        let question = Question::from_event(&event);
        assert_eq!(
            question.render("t1", "l1", DEFAULT_ADDR),
            "job l1 asks (team: bob, carol):\n\
             \x20 Postgres or SQLite?\n\
             \x20 work pushed to branch wip/db\n\
             answer it with:\n\
             \x20 boxfleet answer t1 --launch l1 --text '<your answer>'\n"
        );
        assert_eq!(
            answer_command("t 1", "l1", "http://10.0.0.2:7400"),
            "boxfleet answer 't 1' --launch l1 --text '<your answer>' --addr http://10.0.0.2:7400"
        );
        let record = json!({"status": "awaiting_clarification", "question": {
            "text": "Which?", "audience": "requester", "asked_at": "2026-05-01T10:00:00Z"}});
        let from_record = Question::from_record(&record);
        assert_eq!(from_record.text, "Which?");
        assert_eq!(from_record.audience, "requester");
    }

    #[test]
    fn shell_quoting_round_trips_awkward_words() {
        assert_eq!(shell_quote("abc-1.2"), "abc-1.2");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn after_a_phase_record_the_record_decides_parked_or_done() {
        let reply = |record: Value| GetReply {
            found: true,
            record_json: record.to_string(),
            ..GetReply::default()
        };
        assert_eq!(after_phase(&GetReply::default(), "l1"), AfterPhase::Done);
        assert!(matches!(
            after_phase(
                &reply(json!({"launch_id": "l1", "status": "awaiting_clarification",
                    "question": {"text": "q", "audience": "team"}})),
                "l1"
            ),
            AfterPhase::Parked(Question { ref text, .. }) if text == "q"
        ));
        assert_eq!(
            after_phase(
                &reply(json!({"launch_id": "l1", "status": "resumed"})),
                "l1"
            ),
            AfterPhase::Undecided
        );
        assert_eq!(
            after_phase(&reply(json!({"launch_id": "l1", "status": "ending"})), "l1"),
            AfterPhase::Done
        );
        assert_eq!(
            after_phase(
                &reply(json!({"launch_id": "l2", "status": "launching"})),
                "l1"
            ),
            AfterPhase::Done
        );
    }

    fn tail_answer(outcome: tail_reply::Outcome, text: &str, start: u64, end: u64) -> TailReply {
        TailReply {
            outcome: outcome as i32,
            text: text.to_owned(),
            start,
            end,
            epoch: 3,
            digest: format!("d{end}"),
            launch_id: "l1".to_owned(),
            detail: String::new(),
            held: 0,
            front: false,
        }
    }

    #[test]
    fn the_tail_cursor_sends_back_what_it_holds_and_shows_only_what_is_new() {
        let mut cursor = TailCursor::default();
        let view = cursor.apply(&tail_answer(tail_reply::Outcome::Tail, "", 0, 0), "t1");
        assert_eq!(view.text, "");
        assert_eq!(
            view.notice.as_deref(),
            Some("the job has written nothing yet")
        );
        let view = cursor.apply(
            &tail_answer(tail_reply::Outcome::Tail, "a\nb\n", 0, 4),
            "t1",
        );
        assert_eq!(view.text, "a\nb\n");
        assert_eq!(
            (cursor.epoch, cursor.after, cursor.digest.as_str()),
            (3, 4, "d4")
        );
        // an answer overlapping what is held shows only what lies past it
        let view = cursor.apply(
            &tail_answer(tail_reply::Outcome::Tail, "b\nc\n", 2, 6),
            "t1",
        );
        assert_eq!(view.text, "c\n");
        assert_eq!(cursor.after, 6);
        let view = cursor.apply(
            &tail_answer(tail_reply::Outcome::Reset, "x\n", 900, 902),
            "t1",
        );
        assert_eq!(view.text, "x\n");
        assert!(view.notice.is_some_and(|n| n.contains("reset")));
        assert_eq!(cursor.after, 902);
    }

    #[test]
    fn tail_outcomes_say_what_they_mean() {
        let mut cursor = TailCursor::default();
        let view = cursor.apply(&tail_answer(tail_reply::Outcome::Launching, "", 0, 0), "t1");
        assert_eq!(
            view.notice.as_deref(),
            Some("the job's box is still being provisioned")
        );
        assert!(!view.stopped);
        assert_eq!(cursor.after, 0, "a launching answer holds nothing");
        let mut gone = tail_answer(tail_reply::Outcome::NotRunning, "", 0, 0);
        gone.detail = "collected".to_owned();
        let view = cursor.apply(&gone, "t1");
        assert!(view.stopped);
        assert_eq!(
            view.notice.as_deref(),
            Some(
                "the job is not running: the run was collected; 'boxfleet show t1' prints what \
                 it did"
            )
        );
        let mut silent = tail_answer(tail_reply::Outcome::OwnerSilent, "", 0, 0);
        silent.detail = "node-b".to_owned();
        assert_eq!(
            cursor.apply(&silent, "t1").notice.as_deref(),
            Some("the run's owner node-b did not answer in time")
        );
    }

    #[test]
    fn the_tree_is_indented_by_depth() {
        let reply = TreeReply {
            node: "node-a".to_owned(),
            roots: vec![ActorInfo {
                name: "node".to_owned(),
                state: "running".to_owned(),
                strategy: "one_for_one".to_owned(),
                children: vec![ActorInfo {
                    name: "waiter".to_owned(),
                    state: "restarting".to_owned(),
                    restarts: 2,
                    mailbox_depth: 5,
                    last_error: "store unreachable\nretrying".to_owned(),
                    ..ActorInfo::default()
                }],
                ..ActorInfo::default()
            }],
        };
        assert_eq!(
            render_tree(&reply),
            "node node-a\n\
             \x20 node  running  restarts=0  mailbox=0  strategy=one_for_one\n\
             \x20   waiter  restarting  restarts=2  mailbox=5  last_error=store unreachable retrying\n"
        );
        assert_eq!(tree_json(&reply)["roots"][0]["children"][0]["restarts"], 2);
    }

    #[test]
    fn show_json_is_one_document_of_record_phase_records_and_events() {
        let reply = GetReply {
            found: true,
            record_json: String::new(),
            phase_records_json: vec![phase_event(false).to_string()],
            events_json: vec![r#"{"type":"sandbox_run_started"}"#.to_owned()],
        };
        let value = show_json(&reply);
        assert_eq!(value["record"], Value::Null);
        assert_eq!(
            value["phase_records"][0]["body"]["record"]["input_tokens"],
            1
        );
        assert_eq!(value["events"][0]["type"], "sandbox_run_started");
        let text = render_show(&reply, "t1", DEFAULT_ADDR);
        assert!(text.starts_with("run t1 was collected"), "{text}");
        assert!(text.contains("phase sandbox  turn t1  job l1"), "{text}");
    }

    #[test]
    fn a_parked_record_shows_its_question_and_answer_command() {
        let record = json!({
            "turn_id": "t1", "launch_id": "l1", "seat": "alice", "status": "awaiting_clarification",
            "coding_agent": "command", "sandbox_id": "sb-1", "placement": "direct",
            "question": {"text": "Which?", "audience": "team", "audience_handles": ["bob"],
                "asked_at": "2026-05-01T10:00:00Z"},
            "brief": "do it", "created_at": "c", "updated_at": "u"
        });
        let text = render_record(&record, DEFAULT_ADDR);
        assert!(text.starts_with("run t1\n"), "{text}");
        assert!(text.contains("  box           sb-1 (direct)\n"), "{text}");
        assert!(
            text.contains("boxfleet answer t1 --launch l1 --text '<your answer>'"),
            "{text}"
        );
        assert!(text.ends_with("  brief\n    do it\n"), "{text}");
    }

    #[test]
    fn launch_requests_default_the_runner_by_what_is_launched() {
        let command = launch_request(&LaunchArgs {
            seat: "ci".to_owned(),
            command: Some("cargo test".to_owned()),
            timeout: Some(60),
            pause_ttl: Some(0),
            ..LaunchArgs::default()
        });
        assert_eq!(command.runner, "command");
        assert_eq!(command.timeout_seconds, 60);
        assert_eq!(
            command.pause_ttl_seconds,
            Some(0),
            "0 is sent: it means never pause"
        );
        let brief = launch_request(&LaunchArgs {
            seat: "alice".to_owned(),
            brief: Some("fix it".to_owned()),
            ..LaunchArgs::default()
        });
        assert_eq!(brief.runner, "claude-code");
        assert_eq!(brief.pause_ttl_seconds, None);
        assert_eq!(brief.turn_id, "", "the node makes the turn id");
    }

    #[test]
    fn launch_outcomes_print_one_fixed_line() {
        let launched = Launched {
            turn_id: "t1".to_owned(),
            launch_id: "l1".to_owned(),
            sandbox_id: "sb-1".to_owned(),
            node: "node-a".to_owned(),
        };
        assert_eq!(
            launched_line(&launched),
            "launched t1 job l1 in box sb-1 on node-a"
        );
        let refusal = Refusal {
            class: refusal::Class::Budget as i32,
            reason: "the seat's budget is spent".to_owned(),
        };
        assert_eq!(
            refusal_line(&refusal),
            "refused (budget): the seat's budget is spent"
        );
        assert_eq!(refusal_json(&refusal)["refused"]["class"], "budget");
    }

    #[test]
    fn failures_read_as_one_actionable_line() {
        let unreachable = Failure::Unreachable {
            addr: DEFAULT_ADDR.to_owned(),
            why: "connection refused".to_owned(),
        };
        assert_eq!(
            unreachable.to_string(),
            "cannot reach a node at http://127.0.0.1:7400: connection refused. Start one with \
             'boxfleet node' or pass --addr."
        );
        let denied = Failure::Rpc {
            addr: DEFAULT_ADDR.to_owned(),
            what: "answer",
            status: Status::unauthenticated("no token"),
        };
        assert!(
            denied
                .to_string()
                .contains("Pass --token or set BOXFLEET_TOKEN")
        );
    }

    #[test]
    fn answer_lines_lead_with_the_outcome() {
        assert_eq!(
            answer_line("recorded", "", "t1"),
            "recorded: the answer is on the run; its turn resumes with it"
        );
        assert_eq!(
            answer_line("wrong_launch", "the run is on job l2 now", "t1"),
            "wrong_launch: the run is on job l2 now"
        );
        assert_eq!(
            answer_line("not_awaiting", "", "t1"),
            "not_awaiting: the run is not waiting on a question"
        );
    }

    #[test]
    fn small_helpers() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(one_line("a\n  b\tc"), "a b c");
        assert_eq!(skip_bytes("héllo", 2), "llo");
        assert_eq!(with_scheme("127.0.0.1:7400"), "http://127.0.0.1:7400");
        assert_eq!(with_scheme("https://n:1"), "https://n:1");
        assert_eq!(count(1, "seat"), "1 seat");
        assert_eq!(count(2, "seat"), "2 seats");
        assert_eq!(human_bytes(2048), "2.0 KiB");
    }

    // ---- pins of whole renderings, written before the client read typed values ----

    fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&chrono::Utc)
    }

    /// A stored event as the node sends it (`grpc::event_json`): the event's JSON and its revision.
    fn stored_json(event: &boxfleet_cluster::events::Event, revision: i64) -> String {
        let mut value = serde_json::to_value(event).expect("event");
        value["revision"] = json!(revision);
        value.to_string()
    }

    fn message_of(event: &boxfleet_cluster::events::Event, revision: i64) -> Event {
        Event {
            id: event.id.clone(),
            kind: event.kind.clone(),
            turn_id: event.turn_id.clone(),
            launch_id: event.launch_id.clone(),
            seat: event.seat.clone(),
            revision,
            json: stored_json(event, revision),
        }
    }

    fn a_cluster_event(
        kind: &str,
        launch: &str,
        when: &str,
        body: Value,
    ) -> boxfleet_cluster::events::Event {
        boxfleet_cluster::events::Event::new(
            kind,
            &[launch, when],
            "t1",
            launch,
            "alice",
            at(when),
            body,
        )
    }

    fn a_full_phase_record() -> boxfleet_cluster::phase::PhaseRecord {
        use boxfleet_cluster::phase::{FailureReason, ModelReceipt, PhaseRecord};
        PhaseRecord {
            turn_id: "t1".into(),
            iteration: 1,
            launch_id: "l2".into(),
            started_at: Some(at("2026-05-01T10:00:00.5+00:00")),
            duration_ms: 12_345,
            input_tokens: 1200,
            output_tokens: 340,
            total_tokens: 1540,
            cache_read_tokens: 1000,
            cache_write_tokens: 0,
            cost_usd: 0.0125,
            model: ModelReceipt::new(
                Some("claude-sonnet-4-5"),
                Some("claude-haiku-4-5"),
                Some("stream:assistant"),
            ),
            coding_agent: "claude-code".into(),
            sandbox_id: "sb-1".into(),
            response: "half done\n\nmore".into(),
            delivered_refs: vec![],
            activity_transcript: vec![
                "Bash: cargo test\nran 3 tests".into(),
                "Edit: src/lib.rs".into(),
            ],
            failed: true,
            reason: Some(FailureReason::ModelMismatch),
            error: "model_mismatch: the box ran claude-haiku-4-5".into(),
            exit_code: Some(0),
            notes: Some("Which cap?".into()),
            work_item: Some("ENG-7".into()),
            conversation_key: None,
        }
    }

    fn a_full_record() -> boxfleet_cluster::record::RunRecord {
        use boxfleet_cluster::record::{
            Answer, Ending, EndingReason, ModelReceipt, Question as Asked, RunRecord, Status,
        };
        let mut record = RunRecord::launching(
            "t1",
            "l2",
            "alice",
            "claude-code",
            at("2026-05-01T09:59:00Z"),
        );
        record.status = Status::Answered;
        record.placement = Some("container".into());
        record.sandbox_id = Some("sb-1".into());
        record.owner = Some("node-a-1".into());
        record.task = "fix the\nretry".into();
        record.work_item = Some("ENG-7".into());
        record.requester = Some("bob".into());
        record.model = Some(ModelReceipt::new(Some("claude-sonnet-4-5"), None, None));
        record.pause_ttl_seconds = Some(600);
        record.paused_at = Some(at("2026-05-01T10:01:00.123Z"));
        record.updated_at = at("2026-05-01T10:02:00.123456Z");
        record.brief = "Fix the flaky retry test.\n\nKeep the API.".into();
        record.question = Some(Asked {
            text: "Which cap?\nIn seconds.".into(),
            audience: "team".into(),
            audience_handles: vec!["bob".into(), "carol".into()],
            audience_fallback: false,
            asked_at: at("2026-05-01T10:00:30Z"),
            branch: Some("wip/retry".into()),
        });
        record.answer = Some(Answer {
            text: "30\nseconds".into(),
            from: "bob".into(),
            delivery_id: "d1".into(),
            posted_at: at("2026-05-01T10:01:30Z"),
            recorded_at: at("2026-05-01T10:01:31.000000001Z"),
            taken_at: None,
            lost_claims: 0,
            first_lost_at: None,
            attempts: 0,
            first_failed_at: None,
            conversation_key: None,
            partition: None,
        });
        record.ending = Some(Ending {
            reason: EndingReason::CollectUnreachable,
            detail: "box gone\nfor good".into(),
            decided_at: at("2026-05-01T10:03:00Z"),
            epoch: 3,
            event_id: String::new(),
            reply_goes_back: true,
        });
        record
    }

    fn every_kind_of_event() -> Vec<boxfleet_cluster::events::Event> {
        use boxfleet_cluster::events::kind;
        vec![
            a_cluster_event(
                kind::RUN_STARTED,
                "l1",
                "2026-05-01T10:00:00Z",
                json!({
                "coding_agent": "claude-code", "work_item": "ENG-7", "task": "fix the retry", "iteration": 0}),
            ),
            a_cluster_event(
                kind::CLARIFICATION_REQUESTED,
                "l1",
                "2026-05-01T10:00:30.25Z",
                json!({
                "question": "Which cap?\nIn seconds.", "audience": "team", "audience_handles": ["bob"],
                "audience_fallback": false, "conversation_key": null, "work_item": null, "branch": "wip/retry"}),
            ),
            a_cluster_event(
                kind::RUN_FAILED,
                "l2",
                "2026-05-01T10:03:00Z",
                json!({
                "reason": "collect_unreachable", "detail": "box gone\nfor good", "reply_went_back": true,
                "sandbox_id": "sb-1"}),
            ),
            a_cluster_event(
                kind::RUN_FAILED,
                "l2",
                "2026-05-01T10:03:01Z",
                json!({
                "reason": "cancelled", "detail": "", "reply_went_back": false, "sandbox_id": null}),
            ),
            a_cluster_event(
                "turn_replied",
                "l2",
                "2026-05-01T10:04:00Z",
                json!({"reply": "done", "succeeded": true}),
            ),
            a_cluster_event("seat_moved", "", "2026-05-01T10:05:00Z", json!({})),
        ]
    }

    fn a_full_reply() -> GetReply {
        let phase = a_cluster_event(
            boxfleet_cluster::events::kind::PHASE_COMPLETED,
            "l2",
            "2026-05-01T10:02:30Z",
            json!({"phase": "sandbox", "record": a_full_phase_record().to_value()}),
        );
        let mut events_json: Vec<String> = every_kind_of_event()
            .iter()
            .enumerate()
            .map(|(n, event)| stored_json(event, n as i64 + 10))
            .collect();
        events_json.push("not an event".to_owned());
        GetReply {
            found: true,
            record_json: String::from_utf8(a_full_record().to_json()).expect("utf-8"),
            phase_records_json: vec![stored_json(&phase, 9), "not a record".to_owned()],
            events_json,
        }
    }

    #[test]
    fn pin_show_of_a_full_record_its_phase_records_and_events() {
        assert_eq!(
            render_show(&a_full_reply(), "t1", "http://10.0.0.2:7400"),
            PIN_SHOW
        );
    }

    #[test]
    fn pin_show_of_a_parked_record() {
        let mut record = a_full_record();
        record.status = boxfleet_cluster::record::Status::AwaitingClarification;
        record.answer = None;
        record.ending = None;
        record.model = None;
        let reply = GetReply {
            found: true,
            record_json: String::from_utf8(record.to_json()).expect("utf-8"),
            ..GetReply::default()
        };
        assert_eq!(render_show(&reply, "t1", DEFAULT_ADDR), PIN_SHOW_PARKED);
    }

    #[test]
    fn pin_show_of_texts_that_are_not_json() {
        let reply = GetReply {
            found: true,
            record_json: "not a record".to_owned(),
            phase_records_json: vec!["not a phase record".to_owned()],
            events_json: vec!["not an event".to_owned()],
        };
        assert_eq!(render_show(&reply, "t1", DEFAULT_ADDR), PIN_SHOW_TEXTS);
        assert_eq!(pretty(&show_json(&reply)), PIN_SHOW_TEXTS_JSON);
    }

    #[test]
    fn pin_show_json_of_a_full_reply() {
        assert_eq!(pretty(&show_json(&a_full_reply())), PIN_SHOW_JSON);
    }

    #[test]
    fn pin_event_lines_and_json_lines_of_every_kind() {
        let mut lines = String::new();
        let mut json_lines = String::new();
        for (n, event) in every_kind_of_event().iter().enumerate() {
            let message = message_of(event, n as i64 + 10);
            lines.push_str(&event_line(&message));
            lines.push('\n');
            json_lines.push_str(&event_value(&message).to_string());
            json_lines.push('\n');
        }
        let broken = Event {
            id: "e9".to_owned(),
            kind: "sandbox_run_failed".to_owned(),
            turn_id: "t9".to_owned(),
            launch_id: "l9".to_owned(),
            seat: "s".to_owned(),
            revision: 99,
            json: "not json".to_owned(),
        };
        for kind in [
            "sandbox_run_started",
            "sandbox_clarification_requested",
            "agent_phase_completed",
            "sandbox_run_failed",
            "other",
        ] {
            let message = Event {
                kind: kind.to_owned(),
                ..broken.clone()
            };
            lines.push_str(&event_line(&message));
            lines.push('\n');
            json_lines.push_str(&event_value(&message).to_string());
            json_lines.push('\n');
        }
        assert_eq!(lines, PIN_EVENT_LINES);
        assert_eq!(json_lines, PIN_EVENT_JSON_LINES);
    }

    #[test]
    fn pin_the_phase_record_and_failure_as_launch_wait_prints_them() {
        let phase = a_cluster_event(
            boxfleet_cluster::events::kind::PHASE_COMPLETED,
            "l2",
            "2026-05-01T10:02:30Z",
            json!({"phase": "sandbox", "record": a_full_phase_record().to_value()}),
        );
        let value = event_value(&message_of(&phase, 9));
        assert_eq!(render_phase_record(&value), PIN_PHASE_RECORD);
        let failed = &every_kind_of_event()[2];
        assert_eq!(
            failure_line(&event_value(&message_of(failed, 12))),
            "run failed (collect_unreachable): box gone for good"
        );
        let cancelled = &every_kind_of_event()[3];
        assert_eq!(
            failure_line(&event_value(&message_of(cancelled, 13))),
            "run failed (cancelled)"
        );
        let asked = &every_kind_of_event()[1];
        let question = Question::from_event(&event_value(&message_of(asked, 11)));
        assert_eq!(
            question.render("t1", "l1", "http://10.0.0.2:7400"),
            PIN_QUESTION
        );
    }

    #[test]
    fn pin_every_json_rendering_of_the_ops_and_launch_replies() {
        let launched = Launched {
            turn_id: "t1".to_owned(),
            launch_id: "l1".to_owned(),
            sandbox_id: "sb-1".to_owned(),
            node: "node-a".to_owned(),
        };
        assert_eq!(
            launched_json(&launched).to_string(),
            r#"{"launched":{"launch_id":"l1","node":"node-a","sandbox_id":"sb-1","turn_id":"t1"}}"#
        );
        let refusal = Refusal {
            class: refusal::Class::Refused as i32,
            reason: "no such seat".to_owned(),
        };
        assert_eq!(
            refusal_json(&refusal).to_string(),
            r#"{"refused":{"class":"refused","reason":"no such seat"}}"#
        );
        let entry = BoardEntry {
            turn_id: "t1".to_owned(),
            role: "eng".to_owned(),
            agent_handle: "alice".to_owned(),
            agent_id: "a-1".to_owned(),
            coding_agent: "command".to_owned(),
            sandbox_id: "sb-1".to_owned(),
            task: "T".to_owned(),
            status: "awaiting_clarification".to_owned(),
            started_at: "s".to_owned(),
            question: "q".to_owned(),
            audience: "team".to_owned(),
            work_item: "w".to_owned(),
            owner: "o".to_owned(),
            paused_at: "p".to_owned(),
            launch_id: "l1".to_owned(),
            audience_handles: vec!["bob".to_owned()],
        };
        assert_eq!(
            pretty(&json!({"runs": [board_entry_json(&entry)]})),
            PIN_BOARD_JSON
        );
        let node = NodeInfo {
            node: "node-a".to_owned(),
            addr: "10.0.0.2:7400".to_owned(),
            incarnation: "node-a-1".to_owned(),
            started_at: "s".to_owned(),
            build: "0.1.0".to_owned(),
            host: "h".to_owned(),
            draining: true,
            seats: 2,
        };
        assert_eq!(
            pretty(&json!({"nodes": [node_json(&node)]})),
            PIN_NODES_JSON
        );
        assert_eq!(
            nodes_table(&[node]),
            "NODE    ADDR           HOST  STATE     SEATS  INCARNATION  STARTED  BUILD\n\
             node-a  10.0.0.2:7400  h     draining  2      node-a-1     s        0.1.0\n"
        );
        let seat = SeatInfo {
            seat: "alice".to_owned(),
            holder_node: "node-a".to_owned(),
            incarnation: "node-a-1".to_owned(),
            epoch: 4,
            active_runs: 1,
            awaiting: 2,
            inbox: 3,
        };
        assert_eq!(
            pretty(&json!({"seats": [seat_json(&seat)]})),
            PIN_SEATS_JSON
        );
        assert_eq!(
            seats_table(&[seat]),
            "SEAT   HOLDER  INCARNATION  EPOCH  RUNS  AWAITING  INBOX\n\
             alice  node-a  node-a-1     4      1     2         3\n"
        );
        let tree = TreeReply {
            node: "node-a".to_owned(),
            roots: vec![ActorInfo {
                name: "node".to_owned(),
                state: "running".to_owned(),
                restarts: 1,
                mailbox_depth: 2,
                last_error: "e".to_owned(),
                strategy: "one_for_one".to_owned(),
                children: vec![ActorInfo::default()],
            }],
        };
        assert_eq!(pretty(&tree_json(&tree)), PIN_TREE_JSON);
    }

    const PIN_SHOW: &str = "run t1\n  job           l2\n  seat          alice\n  status        answered\n  coding agent  claude-code\n  box           sb-1 (container)\n  owner         node-a-1\n  task          fix the retry\n  work item     ENG-7\n  requester     bob\n  model         requested claude-sonnet-4-5, ran (unknown) (unknown)\n  pause ttl     600 s\n  paused at     2026-05-01T10:01:00.123Z\n  created       2026-05-01T09:59:00Z\n  updated       2026-05-01T10:02:00.123456Z\n  ending        collect_unreachable: box gone for good\n  answer        from bob at 2026-05-01T10:01:31.000000001Z: 30 seconds\n  question\n    Which cap?\n    In seconds.\n  brief\n    Fix the flaky retry test.\n\n    Keep the API.\n\nphase sandbox  turn t1  job l2  seat alice  at 2026-05-01T10:02:30Z\n  outcome       failed\n  coding agent  claude-code\n  box           sb-1\n  work item     ENG-7\n  started       2026-05-01T10:00:00.500+00:00\n  duration      12.3 s\n  model         requested claude-sonnet-4-5, ran claude-haiku-4-5 (mismatch)\n  tokens        input 1200, output 340, cache read 1000\n  cost          $0.0125\n  delivered     (nothing)\n  error\n    model_mismatch: the box ran claude-haiku-4-5\n  notes\n    Which cap?\n  report\n    half done\n\n    more\n  transcript (3 lines)\n    Bash: cargo test\n    ran 3 tests\n    Edit: src/lib.rs\n\nphase sandbox  turn -  job -\n  outcome    succeeded\n  tokens     input 0, output 0\n  delivered  (nothing)\n  report\n    (no report)\n  transcript (0 lines)\n    (empty)\n\nevents\n  2026-05-01T10:00:00Z  sandbox_run_started  l1  seat=alice agent=claude-code task=fix the retry\n  2026-05-01T10:00:30.250Z  sandbox_clarification_requested  l1  asks team: Which cap? In seconds.\n  2026-05-01T10:03:00Z  sandbox_run_failed  l2  run failed (collect_unreachable): box gone for good\n  2026-05-01T10:03:01Z  sandbox_run_failed  l2  run failed (cancelled)\n  2026-05-01T10:04:00Z  turn_replied  l2  seat=alice {\"reply\":\"done\",\"succeeded\":true}\n  2026-05-01T10:05:00Z  seat_moved  -  seat=alice\n  -  -  -  \n";
    const PIN_SHOW_PARKED: &str = "run t1\n  job           l2\n  seat          alice\n  status        awaiting_clarification\n  coding agent  claude-code\n  box           sb-1 (container)\n  owner         node-a-1\n  task          fix the retry\n  work item     ENG-7\n  requester     bob\n  pause ttl     600 s\n  paused at     2026-05-01T10:01:00.123Z\n  created       2026-05-01T09:59:00Z\n  updated       2026-05-01T10:02:00.123456Z\n  job l2 asks (team: bob, carol):\n    Which cap?\n    In seconds.\n    work pushed to branch wip/retry\n  answer it with:\n    boxfleet answer t1 --launch l2 --text '<your answer>'\n  brief\n    Fix the flaky retry test.\n\n    Keep the API.\n";
    const PIN_SHOW_TEXTS: &str = "run -\n\nphase sandbox  turn -  job -\n  outcome    succeeded\n  tokens     input 0, output 0\n  delivered  (nothing)\n  report\n    (no report)\n  transcript (0 lines)\n    (empty)\n\nevents\n  -  -  -  \n";
    const PIN_SHOW_TEXTS_JSON: &str = "{\n  \"events\": [\n    \"not an event\"\n  ],\n  \"phase_records\": [\n    \"not a phase record\"\n  ],\n  \"record\": \"not a record\"\n}";
    const PIN_SHOW_JSON: &str = "{\n  \"events\": [\n    {\n      \"at\": \"2026-05-01T10:00:00Z\",\n      \"body\": {\n        \"coding_agent\": \"claude-code\",\n        \"iteration\": 0,\n        \"task\": \"fix the retry\",\n        \"work_item\": \"ENG-7\"\n      },\n      \"id\": \"2988790baac6190203cd3f8771932f2f\",\n      \"launch_id\": \"l1\",\n      \"revision\": 10,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_run_started\"\n    },\n    {\n      \"at\": \"2026-05-01T10:00:30.250Z\",\n      \"body\": {\n        \"audience\": \"team\",\n        \"audience_fallback\": false,\n        \"audience_handles\": [\n          \"bob\"\n        ],\n        \"branch\": \"wip/retry\",\n        \"conversation_key\": null,\n        \"question\": \"Which cap?\\nIn seconds.\",\n        \"work_item\": null\n      },\n      \"id\": \"b44be7cd9783e4c01e9fcef4a0b2d28e\",\n      \"launch_id\": \"l1\",\n      \"revision\": 11,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_clarification_requested\"\n    },\n    {\n      \"at\": \"2026-05-01T10:03:00Z\",\n      \"body\": {\n        \"detail\": \"box gone\\nfor good\",\n        \"reason\": \"collect_unreachable\",\n        \"reply_went_back\": true,\n        \"sandbox_id\": \"sb-1\"\n      },\n      \"id\": \"5dfc1189844005f33cf2368ae9d2b26e\",\n      \"launch_id\": \"l2\",\n      \"revision\": 12,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_run_failed\"\n    },\n    {\n      \"at\": \"2026-05-01T10:03:01Z\",\n      \"body\": {\n        \"detail\": \"\",\n        \"reason\": \"cancelled\",\n        \"reply_went_back\": false,\n        \"sandbox_id\": null\n      },\n      \"id\": \"06e144b0451294aa17c7eaa6f2173df2\",\n      \"launch_id\": \"l2\",\n      \"revision\": 13,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"sandbox_run_failed\"\n    },\n    {\n      \"at\": \"2026-05-01T10:04:00Z\",\n      \"body\": {\n        \"reply\": \"done\",\n        \"succeeded\": true\n      },\n      \"id\": \"659f1737da7a135f079fb1b77e3451a2\",\n      \"launch_id\": \"l2\",\n      \"revision\": 14,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"turn_replied\"\n    },\n    {\n      \"at\": \"2026-05-01T10:05:00Z\",\n      \"body\": {},\n      \"id\": \"188d7b8ed7172c1fd3722935140ee503\",\n      \"revision\": 15,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"seat_moved\"\n    },\n    \"not an event\"\n  ],\n  \"phase_records\": [\n    {\n      \"at\": \"2026-05-01T10:02:30Z\",\n      \"body\": {\n        \"phase\": \"sandbox\",\n        \"record\": {\n          \"activity_transcript\": [\n            \"Bash: cargo test\\nran 3 tests\",\n            \"Edit: src/lib.rs\"\n          ],\n          \"cache_read_tokens\": 1000,\n          \"cache_write_tokens\": 0,\n          \"coding_agent\": \"claude-code\",\n          \"conversation_key\": null,\n          \"cost_usd\": 0.0125,\n          \"delivered_refs\": [],\n          \"duration_ms\": 12345,\n          \"error\": \"model_mismatch: the box ran claude-haiku-4-5\",\n          \"exit_code\": 0,\n          \"failed\": true,\n          \"input_tokens\": 1200,\n          \"iteration\": 1,\n          \"launch_id\": \"l2\",\n          \"model\": {\n            \"effective\": \"claude-haiku-4-5\",\n            \"requested\": \"claude-sonnet-4-5\",\n            \"source\": \"stream:assistant\",\n            \"status\": \"mismatch\"\n          },\n          \"notes\": \"Which cap?\",\n          \"output_tokens\": 340,\n          \"reason\": \"model_mismatch\",\n          \"response\": \"half done\\n\\nmore\",\n          \"sandbox_id\": \"sb-1\",\n          \"started_at\": \"2026-05-01T10:00:00.500+00:00\",\n          \"total_tokens\": 1540,\n          \"turn_id\": \"t1\",\n          \"work_item\": \"ENG-7\"\n        }\n      },\n      \"id\": \"ce118ef6331d200e568d06ba46e6608d\",\n      \"launch_id\": \"l2\",\n      \"revision\": 9,\n      \"seat\": \"alice\",\n      \"turn_id\": \"t1\",\n      \"type\": \"agent_phase_completed\"\n    },\n    \"not a record\"\n  ],\n  \"record\": {\n    \"answer\": {\n      \"attempts\": 0,\n      \"delivery_id\": \"d1\",\n      \"from\": \"bob\",\n      \"lost_claims\": 0,\n      \"posted_at\": \"2026-05-01T10:01:30Z\",\n      \"recorded_at\": \"2026-05-01T10:01:31.000000001Z\",\n      \"text\": \"30\\nseconds\"\n    },\n    \"bridge_calls_elided\": 0,\n    \"brief\": \"Fix the flaky retry test.\\n\\nKeep the API.\",\n    \"coding_agent\": \"claude-code\",\n    \"collect_failures\": 0,\n    \"created_at\": \"2026-05-01T09:59:00Z\",\n    \"ending\": {\n      \"decided_at\": \"2026-05-01T10:03:00Z\",\n      \"detail\": \"box gone\\nfor good\",\n      \"epoch\": 3,\n      \"reason\": \"collect_unreachable\",\n      \"reply_goes_back\": true\n    },\n    \"epoch\": 0,\n    \"iteration\": 0,\n    \"launch_id\": \"l2\",\n    \"model\": {\n      \"effective\": null,\n      \"requested\": \"claude-sonnet-4-5\",\n      \"source\": null,\n      \"status\": \"unknown\"\n    },\n    \"owes_answer\": false,\n    \"owner\": \"node-a-1\",\n    \"pause_ttl_seconds\": 600,\n    \"paused_at\": \"2026-05-01T10:01:00.123Z\",\n    \"placement\": \"container\",\n    \"question\": {\n      \"asked_at\": \"2026-05-01T10:00:30Z\",\n      \"audience\": \"team\",\n      \"audience_fallback\": false,\n      \"audience_handles\": [\n        \"bob\",\n        \"carol\"\n      ],\n      \"branch\": \"wip/retry\",\n      \"text\": \"Which cap?\\nIn seconds.\"\n    },\n    \"requester\": \"bob\",\n    \"sandbox_id\": \"sb-1\",\n    \"seat\": \"alice\",\n    \"status\": \"answered\",\n    \"task\": \"fix the\\nretry\",\n    \"turn_id\": \"t1\",\n    \"updated_at\": \"2026-05-01T10:02:00.123456Z\",\n    \"work_item\": \"ENG-7\"\n  }\n}";
    const PIN_EVENT_LINES: &str = "10  sandbox_run_started  t1  l1  seat=alice agent=claude-code task=fix the retry\n11  sandbox_clarification_requested  t1  l1  asks team: Which cap? In seconds.\n12  sandbox_run_failed  t1  l2  run failed (collect_unreachable): box gone for good\n13  sandbox_run_failed  t1  l2  run failed (cancelled)\n14  turn_replied  t1  l2  seat=alice {\"reply\":\"done\",\"succeeded\":true}\n15  seat_moved  t1  -  seat=alice\n99  sandbox_run_started  t9  l9  seat=s\n99  sandbox_clarification_requested  t9  l9  asks -:\n99  agent_phase_completed  t9  l9  succeeded; tokens input 0, output 0; 0 refs\n99  sandbox_run_failed  t9  l9  run failed (failed)\n99  other  t9  l9  seat=s\n";
    const PIN_EVENT_JSON_LINES: &str = "{\"at\":\"2026-05-01T10:00:00Z\",\"body\":{\"coding_agent\":\"claude-code\",\"iteration\":0,\"task\":\"fix the retry\",\"work_item\":\"ENG-7\"},\"id\":\"2988790baac6190203cd3f8771932f2f\",\"launch_id\":\"l1\",\"revision\":10,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_run_started\"}\n{\"at\":\"2026-05-01T10:00:30.250Z\",\"body\":{\"audience\":\"team\",\"audience_fallback\":false,\"audience_handles\":[\"bob\"],\"branch\":\"wip/retry\",\"conversation_key\":null,\"question\":\"Which cap?\\nIn seconds.\",\"work_item\":null},\"id\":\"b44be7cd9783e4c01e9fcef4a0b2d28e\",\"launch_id\":\"l1\",\"revision\":11,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_clarification_requested\"}\n{\"at\":\"2026-05-01T10:03:00Z\",\"body\":{\"detail\":\"box gone\\nfor good\",\"reason\":\"collect_unreachable\",\"reply_went_back\":true,\"sandbox_id\":\"sb-1\"},\"id\":\"5dfc1189844005f33cf2368ae9d2b26e\",\"launch_id\":\"l2\",\"revision\":12,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_run_failed\"}\n{\"at\":\"2026-05-01T10:03:01Z\",\"body\":{\"detail\":\"\",\"reason\":\"cancelled\",\"reply_went_back\":false,\"sandbox_id\":null},\"id\":\"06e144b0451294aa17c7eaa6f2173df2\",\"launch_id\":\"l2\",\"revision\":13,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"sandbox_run_failed\"}\n{\"at\":\"2026-05-01T10:04:00Z\",\"body\":{\"reply\":\"done\",\"succeeded\":true},\"id\":\"659f1737da7a135f079fb1b77e3451a2\",\"launch_id\":\"l2\",\"revision\":14,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"turn_replied\"}\n{\"at\":\"2026-05-01T10:05:00Z\",\"body\":{},\"id\":\"188d7b8ed7172c1fd3722935140ee503\",\"launch_id\":\"\",\"revision\":15,\"seat\":\"alice\",\"turn_id\":\"t1\",\"type\":\"seat_moved\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"sandbox_run_started\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"sandbox_clarification_requested\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"agent_phase_completed\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"sandbox_run_failed\"}\n{\"id\":\"e9\",\"launch_id\":\"l9\",\"raw\":\"not json\",\"revision\":99,\"seat\":\"s\",\"turn_id\":\"t9\",\"type\":\"other\"}\n";
    const PIN_PHASE_RECORD: &str = "phase sandbox  turn t1  job l2  seat alice  at 2026-05-01T10:02:30Z\n  outcome       failed\n  coding agent  claude-code\n  box           sb-1\n  work item     ENG-7\n  started       2026-05-01T10:00:00.500+00:00\n  duration      12.3 s\n  model         requested claude-sonnet-4-5, ran claude-haiku-4-5 (mismatch)\n  tokens        input 1200, output 340, cache read 1000\n  cost          $0.0125\n  delivered     (nothing)\n  error\n    model_mismatch: the box ran claude-haiku-4-5\n  notes\n    Which cap?\n  report\n    half done\n\n    more\n  transcript (3 lines)\n    Bash: cargo test\n    ran 3 tests\n    Edit: src/lib.rs\n";
    const PIN_QUESTION: &str = "job l1 asks (team: bob):\n  Which cap?\n  In seconds.\n  work pushed to branch wip/retry\nanswer it with:\n  boxfleet answer t1 --launch l1 --text '<your answer>' --addr http://10.0.0.2:7400\n";
    const PIN_BOARD_JSON: &str = "{\n  \"runs\": [\n    {\n      \"agent_handle\": \"alice\",\n      \"agent_id\": \"a-1\",\n      \"audience\": \"team\",\n      \"audience_handles\": [\n        \"bob\"\n      ],\n      \"coding_agent\": \"command\",\n      \"launch_id\": \"l1\",\n      \"owner\": \"o\",\n      \"paused_at\": \"p\",\n      \"question\": \"q\",\n      \"role\": \"eng\",\n      \"sandbox_id\": \"sb-1\",\n      \"started_at\": \"s\",\n      \"status\": \"awaiting_clarification\",\n      \"task\": \"T\",\n      \"turn_id\": \"t1\",\n      \"work_item\": \"w\"\n    }\n  ]\n}";
    const PIN_NODES_JSON: &str = "{\n  \"nodes\": [\n    {\n      \"addr\": \"10.0.0.2:7400\",\n      \"build\": \"0.1.0\",\n      \"draining\": true,\n      \"host\": \"h\",\n      \"incarnation\": \"node-a-1\",\n      \"node\": \"node-a\",\n      \"seats\": 2,\n      \"started_at\": \"s\"\n    }\n  ]\n}";
    const PIN_SEATS_JSON: &str = "{\n  \"seats\": [\n    {\n      \"active_runs\": 1,\n      \"awaiting\": 2,\n      \"epoch\": 4,\n      \"holder_node\": \"node-a\",\n      \"inbox\": 3,\n      \"incarnation\": \"node-a-1\",\n      \"seat\": \"alice\"\n    }\n  ]\n}";
    const PIN_TREE_JSON: &str = "{\n  \"node\": \"node-a\",\n  \"roots\": [\n    {\n      \"children\": [\n        {\n          \"children\": [],\n          \"last_error\": \"\",\n          \"mailbox_depth\": 0,\n          \"name\": \"\",\n          \"restarts\": 0,\n          \"state\": \"\",\n          \"strategy\": \"\"\n        }\n      ],\n      \"last_error\": \"e\",\n      \"mailbox_depth\": 2,\n      \"name\": \"node\",\n      \"restarts\": 1,\n      \"state\": \"running\",\n      \"strategy\": \"one_for_one\"\n    }\n  ]\n}";
}
