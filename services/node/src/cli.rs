//! The `boxfleet` command line (DESIGN §16): the clap definitions of every command.
//!
//! `demo`, `node` and `validate` run in this process; every other command is a gRPC client of a
//! running node ([`Conn`] says which) and is carried out by `client::run`.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

/// The node a client command talks to when neither `--addr` nor `BOXFLEET_ADDR` names one.
pub const DEFAULT_ADDR: &str = "http://127.0.0.1:7400";

/// boxfleet runs coding agents in sandboxes on behalf of agent seats, as a fleet of nodes.
#[derive(Debug, Parser)]
#[command(
    name = "boxfleet",
    version,
    about,
    long_about = None,
    after_help = "Start a node with 'boxfleet node', then launch work with 'boxfleet launch'. \
                  Client commands reach the node at --addr (env BOXFLEET_ADDR, default \
                  http://127.0.0.1:7400).\n\n\
                  Exit codes: 0 ok; 1 the run failed or the request was refused; 2 usage (a \
                  flag or argument that cannot be used); 3 not found (no such turn, job, seat \
                  or node); 4 the node is unreachable or unavailable; 5 unauthenticated or not \
                  allowed.\n\n\
                  Logs: a node logs its lifecycle at info to stderr; BOXFLEET_LOG takes a \
                  tracing filter (e.g. BOXFLEET_LOG=debug, BOXFLEET_LOG=warn,boxfleet_actors=debug); \
                  --log-format json writes one JSON object per line; NO_COLOR turns colour off."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written to stderr: `text` (one line each, colour only on a terminal
    /// and without NO_COLOR) or `json` (one JSON object per line, for a collector).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "BOXFLEET_LOG_FORMAT")]
    pub log_format: LogFormat,
}

/// The log's format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Every `boxfleet` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a one-process walkthrough on embedded defaults (a node, a launch, a question, an
    /// answer, a collection); exits 0 when it all worked.
    Demo(DemoArgs),

    /// Run a node: the gRPC services, the supervision tree and the built-in engine. Flags
    /// override the config file.
    Node(NodeArgs),

    /// Check a config file; exits non-zero and prints each problem at its location with its
    /// remedy.
    Validate {
        /// The YAML config file to check (the same file `boxfleet node --config` reads).
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },

    /// Launch a coding job for a seat (run_sandbox): a box is provisioned and the job started.
    #[command(
        group(ArgGroup::new("job").required(true).args(["brief", "command"])),
        after_help = "Examples:\n  boxfleet launch --seat ci --command 'cargo test' --wait\n  \
                      boxfleet launch --seat alice --brief 'Fix the flaky retry test' --task FLAKE-12"
    )]
    Launch(LaunchArgs),

    /// Show the board of runs in flight (the sandbox_runs list).
    Runs(RunsArgs),

    /// Show a run's record, or the phase records of a collected run.
    Show(ShowArgs),

    /// Show the newest output of a running job.
    Tail(TailArgs),

    /// Answer the question a parked run asked (answer_run).
    Answer(AnswerArgs),

    /// Deliver a chat message into a seat's inbox (a reply on a parked run's conversation
    /// answers it). On a seat the node's built-in engine works (the default with no engine
    /// attached), the message's text runs as a shell command: a `command` job.
    Deliver(DeliverArgs),

    /// Print the events outbox from a store revision.
    Events(EventsArgs),

    /// Print the node's live supervision tree (name, state, restarts, mailbox, last error).
    Tree(TreeArgs),

    /// List the live nodes of the fleet.
    Nodes(NodesArgs),

    /// List the seats: who holds each, its lease epoch, its runs and its inbox.
    Seats(SeatsArgs),

    /// Release a node's seats gracefully (before shutting it down); other nodes take them.
    Drain(DrainArgs),

    /// Read the node's config file again and put it in force if it builds (else nothing
    /// changes); the node also reloads on a change to the file and on SIGHUP.
    Reload(ReloadArgs),

    /// Show the spend counters this day, week and month, the company's and the seats', beside
    /// their caps (`company.budgets`).
    Budget(BudgetArgs),

    /// Mint a credential from the fleet's keyring (no node is asked).
    #[command(subcommand)]
    Token(TokenCommand),

    /// Make, rotate or retire the keys of a keyring file.
    #[command(subcommand)]
    Keyring(KeyringCommand),
}

/// `boxfleet token`.
#[derive(Debug, Clone, Subcommand)]
pub enum TokenCommand {
    /// Mint a credential and print it on stdout.
    #[command(
        after_help = "Examples:\n  boxfleet token issue --role operator --subject ada --ttl 30d\n  \
                      boxfleet token issue --role engine --subject triage-bot --seats eng,ops --keyring /etc/boxfleet/keyring.json"
    )]
    Issue(TokenIssueArgs),
}

/// `boxfleet token issue`.
#[derive(Debug, Clone, Args)]
pub struct TokenIssueArgs {
    /// viewer | operator | engine | admin | node
    #[arg(long, value_parser = ["viewer", "operator", "engine", "admin", "node"])]
    pub role: String,
    /// Who it is: a person's or an engine's handle, or a node's id.
    #[arg(long)]
    pub subject: String,
    /// The seats it acts for, comma-separated [default: every seat].
    #[arg(long, value_delimiter = ',')]
    pub seats: Vec<String>,
    /// How long it is valid: seconds, or with a unit (90m, 12h, 30d) [default: 30d].
    #[arg(long, default_value = "30d")]
    pub ttl: String,
    /// The keyring file [default: ./.boxfleet/keyring.json, the default data dir's].
    #[arg(long, value_name = "FILE")]
    pub keyring: Option<PathBuf>,
}

/// `boxfleet keyring`.
#[derive(Debug, Clone, Subcommand)]
pub enum KeyringCommand {
    /// Make a keyring file with one fresh key (refused if the file exists).
    New {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Add a fresh key that signs from now on; the others keep verifying until retired.
    Rotate {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Retire a key: the credentials it signed are refused from now on.
    Retire {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[arg(value_name = "KEY_ID")]
        key: String,
    },
    /// Print a fresh key secret (base64), for a key given in the config as ${VAR}.
    Secret,
    /// List a keyring file's keys (ids, which signs, which are retired; never a secret).
    List {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// `boxfleet launch`.
#[derive(Debug, Clone, Default, Args)]
pub struct LaunchArgs {
    /// The seat (agent handle) the job runs for; with no company document any name is a seat.
    #[arg(long, value_name = "SEAT")]
    pub seat: String,
    /// The turn to launch under; omit it and the node makes a new turn id.
    #[arg(long, value_name = "TURN")]
    pub turn: Option<String>,
    /// The coding agent that runs the job [default: command with --command; with a brief, the
    /// seat's role's coding agent, then the company's default, else claude-code].
    #[arg(long, value_enum, value_name = "RUNNER")]
    pub runner: Option<Runner>,
    /// The brief for a coding agent: what to do, in prose.
    #[arg(long, value_name = "TEXT")]
    pub brief: Option<String>,
    /// A shell command to run as the job (the `command` runner): a check, an eval, a script.
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    /// The task the job is for, shown on the board (e.g. a ticket id).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// The work item (the engine's task) the job is for: its tokens are charged to it too
    /// (`boxfleet budget --task ITEM`).
    #[arg(long, value_name = "ITEM")]
    pub work_item: Option<String>,
    /// Who the job is for: a question the job puts `--to requester` goes to them, and
    /// `runs --audience HANDLE` finds it. Default: the credential's subject (`admin` for the
    /// node's admin credential); only an engine or an admin names someone else.
    #[arg(long, value_name = "HANDLE")]
    pub requester: Option<String>,
    /// The in-box deadline of a `command` job in seconds (the check's own clock; it exits 124
    /// when it runs out). Omit it for none; a coding run takes none (it is never stopped on a
    /// wall-clock timer).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// The model the coding agent is pointed at (passed to the box as --model).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// How long a box parked on a question may stay paused before it is reclaimed, in
    /// seconds; 0 = never pause. Omit it for the seat's default.
    #[arg(long, value_name = "SECS")]
    pub pause_ttl: Option<u64>,
    /// The conversation the turn reports back to (its conversation key): a reply posted
    /// there (`boxfleet deliver --conversation KEY`) answers the job's question.
    #[arg(long, value_name = "CONVERSATION")]
    pub conversation: Option<String>,
    /// Cap the coding agent's agentic rounds for this job (Claude Code's `--max-turns`,
    /// OpenCode's steps). Omit it for the role's cap, then the company default.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Stay attached: show the job's live output and its phase record when it is collected;
    /// exit 0 when the run succeeded, 1 when it did not.
    #[arg(long)]
    pub wait: bool,
    /// Print the launch's outcome as one JSON line ({"launched": …} or {"refused": …}); with
    /// --wait, then each of the run's events as a JSON line (as `events --json` prints them).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet runs`.
#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    /// Only the runs waiting on this person: "what is waiting on me". A handle is a seat of
    /// the company's chart; with no chart it is the credential's subject of whoever launched
    /// (`admin` for the node's admin credential, `ada` for `token issue --subject ada`).
    #[arg(long, value_name = "HANDLE", conflicts_with = "recent")]
    pub audience: Option<String>,
    /// The runs that finished lately instead (newest first, from the events outbox; a settled
    /// run leaves the board).
    #[arg(long)]
    pub recent: bool,
    /// How many finished runs `--recent` lists.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "recent")]
    pub limit: usize,
    /// Print one JSON document {"runs": [...]} with the board's field names.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet show`.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The run's turn id.
    #[arg(value_name = "TURN")]
    pub turn: String,
    /// Print one JSON document {"record", "phase_records", "events"}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet tail`.
#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// The run's turn id.
    #[arg(value_name = "TURN")]
    pub turn: String,
    /// The job to show; omit it for the job the run's record holds now.
    #[arg(long, value_name = "LAUNCH")]
    pub launch: Option<String>,
    /// Keep showing new output every second until the job stops running.
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet answer`.
#[derive(Debug, Clone, Args)]
pub struct AnswerArgs {
    /// The parked run's turn id.
    #[arg(value_name = "TURN")]
    pub turn: String,
    /// The job that asked (its launch id, as `boxfleet show TURN` or `runs --json` print it);
    /// omit it to answer the job the run is parked on now (printed on stderr).
    #[arg(long, value_name = "LAUNCH")]
    pub launch: Option<String>,
    /// The answer.
    #[arg(long, value_name = "TEXT")]
    pub text: String,
    /// Whom the answer is from (a seat handle); omit it to answer as the token's identity.
    #[arg(long = "as", value_name = "PERSON")]
    pub as_whom: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet deliver`.
#[derive(Debug, Clone, Args)]
pub struct DeliverArgs {
    /// The seat whose inbox receives the message.
    #[arg(long, value_name = "SEAT")]
    pub seat: String,
    /// The conversation the message is posted on (its conversation key).
    #[arg(long, value_name = "CONVERSATION")]
    pub conversation: String,
    /// The message.
    #[arg(long, value_name = "TEXT")]
    pub text: String,
    /// Who posted it.
    #[arg(long, value_name = "PERSON", default_value = "operator")]
    pub from: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet events`.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// The first store revision to print (an event's revision + 1 resumes after it).
    #[arg(long, value_name = "REV", default_value_t = 0)]
    pub from: i64,
    /// Keep printing new events as they are written (Ctrl-C to stop).
    #[arg(long)]
    pub follow: bool,
    /// Print JSON Lines: one event per line with type, id, turn_id, launch_id and revision.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet tree`.
#[derive(Debug, Clone, Args)]
pub struct TreeArgs {
    /// Every node's tree, not only this node's.
    #[arg(long)]
    pub fleet: bool,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet nodes`.
#[derive(Debug, Clone, Args)]
pub struct NodesArgs {
    /// Print one JSON document {"nodes": [...]}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet seats`.
#[derive(Debug, Clone, Args)]
pub struct SeatsArgs {
    /// Print one JSON document {"seats": [...]} ({"dead_letters": [...]} with --dead-letters).
    #[arg(long)]
    pub json: bool,
    /// List the messages deferred past their bound (on their 26th delivery) instead, oldest first.
    #[arg(long)]
    pub dead_letters: bool,
    /// With --dead-letters: only this seat's.
    #[arg(long, value_name = "SEAT", requires = "dead_letters")]
    pub seat: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet drain`.
#[derive(Debug, Clone, Args)]
pub struct DrainArgs {
    /// The node to drain (its id, as `boxfleet nodes` prints it).
    #[arg(value_name = "NODE")]
    pub node: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet reload`.
#[derive(Debug, Clone, Args)]
pub struct ReloadArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// `boxfleet budget`.
#[derive(Debug, Clone, Args)]
pub struct BudgetArgs {
    /// One seat's counters (beside the company's); omitted: every seat of the chart, else
    /// every seat held
    #[arg(long, value_name = "SEAT")]
    pub seat: Option<String>,
    /// A work item's total too (what the runs launched for it were charged)
    #[arg(long, value_name = "ITEM")]
    pub task: Option<String>,
    /// One JSON object per window
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// How a client command reaches a node.
#[derive(Debug, Clone, Default, Args)]
pub struct Conn {
    /// The node's gRPC address.
    #[arg(long, value_name = "URL", env = "BOXFLEET_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: String,
    /// The credential every call carries (`authorization: Bearer <TOKEN>`); without it, and
    /// without --token-file, the CLI reads ./.boxfleet/admin.token (what a node started here
    /// with its default data dir writes).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BOXFLEET_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// A file holding the credential (e.g. DATA_DIR/admin.token, or one `boxfleet token issue`
    /// wrote).
    #[arg(long, value_name = "FILE", env = "BOXFLEET_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// The CA certificate (PEM) a TLS node's certificate is checked against; an https://
    /// address needs it.
    #[arg(long, value_name = "FILE", env = "BOXFLEET_CA")]
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM) to present, with --key.
    #[arg(long, value_name = "FILE", env = "BOXFLEET_CERT", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", env = "BOXFLEET_KEY", requires = "cert")]
    pub key: Option<PathBuf>,
}

/// `boxfleet demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Where the demo keeps its store and boxes [default: a fresh temporary directory].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Keep the data directory afterwards, to look around in it.
    #[arg(long)]
    pub keep: bool,
}

/// `boxfleet node` (DESIGN §12): each flag overrides its field of the config file.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// The YAML config file (node, store and company sections); without one the defaults make
    /// a working single node.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// This node's id in the fleet (node.id) [default: the host name].
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The address the gRPC services listen on (node.listen) [default: 127.0.0.1:7400].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The address the HTTP listener binds (node.http.listen): the tool bridge and the OTLP
    /// receiver a box calls back on; `off` for none [default: the gRPC host, its port + 80].
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<String>,
    /// Where the embedded store and local boxes live (node.data_dir) [default: ./.boxfleet].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Seconds the node's store lease lives without a keep-alive (node.lease_ttl_seconds)
    /// [default: 15].
    #[arg(long, value_name = "SECS")]
    pub lease_ttl: Option<u64>,
    /// Seconds between completion polls of running jobs (node.poll_interval_seconds)
    /// [default: 15].
    #[arg(long, value_name = "SECS")]
    pub poll_interval: Option<u64>,
    /// Seconds a stopping node (SIGTERM, Ctrl-C) waits for the engine to settle the resumes it
    /// was sent before it lets them go (node.settle_window_seconds) [default: 60].
    #[arg(long, value_name = "SECS", env = "BOXFLEET_SETTLE_WINDOW_SECONDS")]
    pub settle_window: Option<u64>,
    /// The address other nodes reach this one at, HOST:PORT (node.advertise) [default: the
    /// listen address; on 0.0.0.0, the host name with the listen port].
    #[arg(long, value_name = "ADDR")]
    pub advertise: Option<String>,
    /// The host name local boxes are recorded under (node.host) [default: the machine's].
    /// Nodes that share a boxes dir and a process namespace give the same one.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Where `direct` boxes live (node.boxes_dir) [default: DATA_DIR/boxes]. Nodes on one
    /// host that share it share their boxes.
    #[arg(long, value_name = "DIR")]
    pub boxes_dir: Option<PathBuf>,
    /// etcd endpoints, comma-separated; naming any makes the store etcd (store.endpoints).
    #[arg(long, value_name = "URL[,URL]", value_delimiter = ',')]
    pub etcd: Vec<String>,
    /// The key prefix every store key lives under (store.prefix) [default: /boxfleet/v1].
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
    /// The fleet's keyring file (auth.keyring_file) [default: DATA_DIR/keyring.json, made on
    /// first start]. Every node of a fleet reads the same one.
    #[arg(long, value_name = "FILE")]
    pub keyring: Option<PathBuf>,
    /// The node's TLS certificate (node.tls.cert), with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The node's TLS key (node.tls.key).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The CA that signs the fleet's node certificates (node.tls.ca): calls between nodes
    /// are then mutual TLS.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Listen beyond loopback without TLS, on purpose (node.insecure_listen): calls and their
    /// credentials cross the network in the clear.
    #[arg(long)]
    pub insecure_listen: bool,
    /// The engine a seat whose seat and role name none is served by (node.default_engine)
    /// [default: builtin].
    #[arg(long, value_name = "ENGINE", value_parser = ["builtin", "external"])]
    pub default_engine: Option<String>,
}

/// The coding agent a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Runner {
    /// a shell command (checks, evals, scripts)
    Command,
    /// Claude Code, headless
    ClaudeCode,
    /// OpenCode
    Opencode,
}

impl Runner {
    /// The runner's name on the wire (`LaunchRequest.runner`).
    pub fn as_str(self) -> &'static str {
        match self {
            Runner::Command => "command",
            Runner::ClaudeCode => "claude-code",
            Runner::Opencode => "opencode",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("boxfleet").chain(args.iter().copied()))
    }

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn launch_takes_exactly_one_of_brief_and_command() {
        assert!(parse(&["launch", "--seat", "s"]).is_err(), "neither");
        assert!(
            parse(&["launch", "--seat", "s", "--brief", "b", "--command", "c"]).is_err(),
            "both"
        );
        let cli = parse(&["launch", "--seat", "s", "--command", "true", "--wait"]).expect("parses");
        match cli.command {
            Command::Launch(LaunchArgs {
                command,
                wait,
                runner,
                ..
            }) => {
                assert_eq!(command.as_deref(), Some("true"));
                assert!(wait);
                assert_eq!(runner, None);
            }
            other => panic!("parsed as {other:?}"),
        }
        let cli = parse(&[
            "launch",
            "--seat",
            "s",
            "--brief",
            "b",
            "--runner",
            "claude-code",
        ])
        .expect("parses");
        assert!(matches!(
            cli.command,
            Command::Launch(LaunchArgs {
                runner: Some(Runner::ClaudeCode),
                ..
            })
        ));
    }

    #[test]
    fn answer_as_and_deliver_from_default() {
        let cli = parse(&[
            "answer", "t1", "--launch", "l1", "--text", "yes", "--as", "bob",
        ])
        .expect("parses");
        assert!(matches!(
            cli.command,
            Command::Answer(AnswerArgs { ref as_whom, .. }) if as_whom.as_deref() == Some("bob")
        ));
        let cli = parse(&[
            "deliver",
            "--seat",
            "s",
            "--conversation",
            "c",
            "--text",
            "hi",
        ])
        .expect("parses");
        assert!(
            matches!(cli.command, Command::Deliver(DeliverArgs { ref from, .. }) if from == "operator")
        );
    }

    #[test]
    fn node_flags_and_etcd_endpoints_split_on_commas() {
        let cli = parse(&[
            "node",
            "--etcd",
            "http://a:2379,http://b:2379",
            "--lease-ttl",
            "5",
        ])
        .expect("parses");
        match cli.command {
            Command::Node(args) => {
                assert_eq!(args.etcd, ["http://a:2379", "http://b:2379"]);
                assert_eq!(args.lease_ttl, Some(5));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn events_default_from_zero() {
        let cli = parse(&["events", "--follow"]).expect("parses");
        assert!(matches!(
            cli.command,
            Command::Events(EventsArgs {
                from: 0,
                follow: true,
                json: false,
                ..
            })
        ));
    }
}
