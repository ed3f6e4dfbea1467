//! A worked external engine for boxfleet (`docs/engine.md`), built on the generated gRPC
//! client and nothing else of boxfleet's. It attaches to one node for the seats it is given and
//! works their turns:
//!
//! - a **Turn** becomes a `command` job launched under the turn's own id (so a repeat is the
//!   same launch). Its command is this engine's `--job` script, never the message text, which
//!   is the job's brief. The turn is acked, or deferred when the seat is busy or the node
//!   unavailable;
//! - a **findings Resume** is taken, and settled finished with a reply quoting the job's report;
//! - an **answer (or re-seed) Resume** is settled relaunched with an empty command: the node
//!   reruns the job with `BOXFLEET_ANSWER` and `BOXFLEET_QUESTION` exported;
//! - a **ToolCall** from a box, through the node's tool bridge, to the one tool this engine
//!   declares in its `Hello` (`seat_clock`: the time where the seat works, acting as the seat)
//!   is answered with a `ToolResult`;
//! - a **FAILED Resume**, a **Parked** notice, a **Refused** and a **Closing** are printed.
//!
//! ```text
//! boxfleet token issue --role engine --subject example-engine --seats eng > engine.token
//! example-engine --node http://127.0.0.1:7400 --token-file engine.token --seat eng
//! ```
//!
//! The engine attaches to one node. In a fleet, run one per node (or give it each node's
//! address in turn): a seat's work comes only from the node that holds it.

use std::path::PathBuf;

use anyhow::{Context, bail};
use boxfleet_proto::v1 as pb;
use clap::Parser;
use tokio::sync::mpsc;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// The job each turn runs when `--job` is not given: it reports which turn it ran for and, on
/// a rerun after an answer, the answer it was given.
const DEFAULT_JOB: &str = r#"if [ -n "$BOXFLEET_ANSWER" ]; then echo "answered: $BOXFLEET_ANSWER" > "$BOXFLEET_REPORT"; else echo "worked turn $BOXFLEET_TURN_ID" > "$BOXFLEET_REPORT"; fi"#;

#[derive(Debug, Parser)]
#[command(about = "A worked external engine for boxfleet's Engine API (docs/engine.md)")]
struct Args {
    /// The node to attach to.
    #[arg(long, default_value = "http://127.0.0.1:7400", env = "BOXFLEET_NODE")]
    node: String,
    /// The engine credential (role engine; `boxfleet token issue --role engine …`).
    #[arg(long, env = "BOXFLEET_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the credential.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The CA that signed the node's certificate, for an https:// node.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// A seat to serve (repeat for several; none: every external seat the credential covers).
    #[arg(long = "seat", value_name = "SEAT")]
    seats: Vec<String>,
    /// The shell script every turn's job runs (the message is its brief, never its command).
    #[arg(long, default_value = DEFAULT_JOB)]
    job: String,
    /// The name this engine attaches under.
    #[arg(long, default_value = "example-engine")]
    name: String,
    /// Stop after this many findings have been settled (0: run until the node closes).
    #[arg(long, default_value_t = 0)]
    settle_count: u32,
}

/// Adds the credential to every call.
#[derive(Clone)]
struct Bearer(MetadataValue<Ascii>);

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

type Authed = tonic::service::interceptor::InterceptedService<Channel, Bearer>;

async fn channel(args: &Args) -> anyhow::Result<Channel> {
    let mut endpoint = Endpoint::from_shared(args.node.clone())
        .with_context(|| format!("{} is not a node address (http://HOST:PORT)", args.node))?;
    if args.node.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &args.ca {
            let pem = std::fs::read(ca).with_context(|| format!("read {}", ca.display()))?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        endpoint = endpoint.tls_config(tls)?;
    }
    endpoint.connect().await.with_context(|| {
        format!(
            "no node answers at {}: is `boxfleet node` running?",
            args.node
        )
    })
}

fn bearer(args: &Args) -> anyhow::Result<Bearer> {
    let token = match (&args.token, &args.token_file) {
        (Some(token), _) => token.clone(),
        (None, Some(file)) => std::fs::read_to_string(file)
            .with_context(|| format!("read the credential in {}", file.display()))?,
        (None, None) => bail!("no credential: pass --token, --token-file or BOXFLEET_TOKEN"),
    };
    Ok(Bearer(format!("Bearer {}", token.trim()).parse()?))
}

/// What the engine keeps between messages.
struct Engine {
    up: mpsc::Sender<pb::EngineUp>,
    runs: pb::runs_client::RunsClient<Authed>,
    job: String,
    settled: u32,
}

impl Engine {
    async fn send(&self, msg: pb::engine_up::Msg) -> anyhow::Result<()> {
        self.up
            .send(pb::EngineUp { msg: Some(msg) })
            .await
            .context("the node closed the stream")
    }

    /// A message to run: launched under the turn's id, then acked (or deferred).
    async fn turn(&mut self, turn: pb::Turn) -> anyhow::Result<()> {
        println!(
            "turn {} for {} (attempt {}): {:?}",
            turn.turn_id, turn.seat, turn.attempt, turn.text
        );
        let request = pb::LaunchRequest {
            seat: turn.seat.clone(),
            turn_id: turn.turn_id.clone(),
            brief: turn.text.clone(),
            task: turn.text.clone(),
            runner: "command".into(),
            command: self.job.clone(),
            requester: turn.from.clone(),
            conversation_key: turn.conversation_key.clone(),
            partition: turn.partition.clone(),
            owes_answer: true,
            ..pb::LaunchRequest::default()
        };
        let outcome = self.runs.launch(request).await?.into_inner().outcome;
        let defer = match outcome {
            Some(pb::launch_reply::Outcome::Launched(launched)) => {
                println!(
                    "  launched job {} in box {}",
                    launched.launch_id, launched.sandbox_id
                );
                false
            }
            Some(pb::launch_reply::Outcome::Refused(refused)) => {
                let class = refused.class();
                println!("  refused ({}): {}", class.as_str_name(), refused.reason);
                matches!(
                    class,
                    pb::refusal::Class::Busy | pb::refusal::Class::Unavailable
                )
            }
            None => bail!("a launch reply with no outcome"),
        };
        let (seat, delivery_id) = (turn.seat, turn.delivery_id);
        if defer {
            self.send(pb::engine_up::Msg::Defer(pb::Defer { seat, delivery_id }))
                .await
        } else {
            self.send(pb::engine_up::Msg::Ack(pb::Ack { seat, delivery_id }))
                .await
        }
    }

    /// A suspended turn to resume.
    async fn resume(&mut self, resume: pb::Resume) -> anyhow::Result<()> {
        let (turn_id, launch_id) = (resume.turn_id.clone(), resume.launch_id.clone());
        let outcome = match resume.kind() {
            pb::resume::Kind::Findings => {
                println!(
                    "findings of {turn_id} (succeeded: {}, refs: {:?}):\n{}",
                    resume.succeeded, resume.refs, resume.reply
                );
                self.send(pb::engine_up::Msg::Take(pb::Take {
                    turn_id: turn_id.clone(),
                    launch_id: launch_id.clone(),
                }))
                .await?;
                let first = resume.reply.lines().next().unwrap_or_default();
                self.settled += 1;
                pb::settle::Outcome::Finished(pb::Finished {
                    reply: format!("the job reported: {first}"),
                })
            }
            pb::resume::Kind::Answer | pb::resume::Kind::Reseed => {
                println!(
                    "{turn_id} was answered: {:?} → {:?}",
                    resume.question, resume.answer
                );
                // an empty command reruns the job; the node exports the answer to it
                pb::settle::Outcome::Relaunched(pb::Relaunched {
                    brief: format!("{}\nThe answer: {}", resume.question, resume.answer),
                    conversation: resume.conversation,
                    ..pb::Relaunched::default()
                })
            }
            pb::resume::Kind::Failed => {
                println!("{turn_id} ended {}: {}", resume.ending, resume.reply);
                return Ok(());
            }
            pb::resume::Kind::Unspecified => bail!("a resume of no kind"),
        };
        self.send(pb::engine_up::Msg::Settle(pb::Settle {
            turn_id,
            launch_id,
            outcome: Some(outcome),
        }))
        .await
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let channel = channel(&args).await?;
    let bearer = bearer(&args)?;
    let mut client =
        pb::engine_client::EngineClient::with_interceptor(channel.clone(), bearer.clone());
    let (up, rx) = mpsc::channel(64);
    let hello = pb::Hello {
        engine: args.name.clone(),
        seats: args.seats.clone(),
        // the seat's own tools, which the node's tool bridge lists to its boxes
        tools: vec![pb::ToolSpec {
            name: "seat_clock".into(),
            description: "The time where this seat works, and which seat is asking.".into(),
            input_schema_json: r#"{"type": "object", "properties": {}}"#.into(),
        }],
    };
    up.send(pb::EngineUp {
        msg: Some(pb::engine_up::Msg::Hello(hello)),
    })
    .await?;
    let mut down = client
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .context("the node refused the attach")?
        .into_inner();
    println!("attached to {} for {:?}", args.node, args.seats);
    let mut engine = Engine {
        up,
        runs: pb::runs_client::RunsClient::with_interceptor(channel, bearer),
        job: args.job.clone(),
        settled: 0,
    };
    while let Some(message) = down.message().await? {
        match message.msg {
            Some(pb::engine_down::Msg::Turn(turn)) => engine.turn(turn).await?,
            Some(pb::engine_down::Msg::Resume(resume)) => engine.resume(resume).await?,
            Some(pb::engine_down::Msg::Parked(parked)) => println!(
                "{} parked: {:?} (for {})",
                parked.turn_id, parked.question, parked.audience
            ),
            Some(pb::engine_down::Msg::Refused(refused)) => println!(
                "refused {} ({}): {}",
                refused.up, refused.reason, refused.message
            ),
            Some(pb::engine_down::Msg::ToolCall(call)) => {
                // a tool runs as the seat the call names: the node vouches for it
                let result = match call.tool.as_str() {
                    "seat_clock" => pb::ToolResult {
                        call_id: call.call_id,
                        text: format!(
                            "it is {} for seat {}",
                            chrono::Utc::now().to_rfc3339(),
                            call.seat
                        ),
                        is_error: false,
                    },
                    other => pb::ToolResult {
                        call_id: call.call_id,
                        text: format!("this engine serves no tool {other:?}"),
                        is_error: true,
                    },
                };
                engine
                    .up
                    .send(pb::EngineUp {
                        msg: Some(pb::engine_up::Msg::ToolResult(result)),
                    })
                    .await?;
            }
            Some(pb::engine_down::Msg::Closing(closing)) => {
                println!(
                    "the node closes the stream ({}): {}",
                    closing.reason, closing.message
                );
            }
            None => {}
        }
        if args.settle_count > 0 && engine.settled >= args.settle_count {
            println!("settled {} findings: leaving", engine.settled);
            // leave cleanly: close the send side and read on until the node ends the stream,
            // so everything sent has been acted on (or refused) before the process exits
            drop(engine);
            while let Some(message) = down.message().await? {
                if let Some(pb::engine_down::Msg::Refused(refused)) = message.msg {
                    println!(
                        "refused {} ({}): {}",
                        refused.up, refused.reason, refused.message
                    );
                }
            }
            println!("the node closed the stream: done");
            return Ok(());
        }
    }
    println!("the stream ended");
    Ok(())
}
