//! The client commands of `boxfleet` (DESIGN §16): every command but `demo`, `node` and
//! `validate` is a call, or one stream, to a node's Runs or Ops service, printed for people, or
//! with `--json` for scripts. A thin CLI over a typed client: clap parses each command's
//! arguments into its own `cli::*Args` struct, which the command's module takes as it is; the
//! command calls the node through [`conn`], reads the JSON the node answers into the
//! workspace's own types ([`records`]) and prints them ([`render`]).
//!
//! Layout, one module per command or per thing every command shares:
//! - [`conn`]: connecting (a `Conn` → a channel with the bearer token), the bound on each call,
//!   and `Failure`, the one line a user reads when that fails;
//! - [`launch`]: `launch`, and `launch --wait`'s follower (the run's events, the job's live
//!   output, settling a run that may still park, the answer hint);
//! - [`tail`]: `tail` and the tail protocol's cursor;
//! - [`show`]: `show` and `runs` (the board);
//! - [`events`]: `events`, and an event's JSON line and one-line summary;
//! - [`answer`]: `answer` and `deliver`;
//! - [`ops`]: `tree`, `nodes`, `seats`, `drain`;
//! - [`records`]: the node's JSON texts read as the run record, the event and the phase record;
//! - [`render`]: the shared rendering (tables, rows, the phase-record and run-record renderers)
//!   and the two writers.
//!
//! Output rules: what a command answers goes to stdout, one fixed shape per command; notices
//! about the wait itself ("the box is still being provisioned") go to stderr, so a pipe carries
//! only the answer.
//!
//! Exit codes, by class ([`exit`], stable for scripts): 0 done as asked (and a reader that
//! stopped reading); 1 the run failed or the request was refused; 2 usage; 3 not found; 4 the
//! node unreachable or unavailable; 5 unauthenticated or not allowed. A call that fails prints
//! one line on stderr (`conn::Failure`) and exits with its class.

mod answer;
mod conn;
mod events;
pub(crate) mod exit;
mod launch;
mod ops;
mod progress;
mod recent;
mod records;
pub(crate) mod render;
mod show;
mod tail;

use anyhow::bail;

use crate::cli::Command;

/// Runs one client command against a node and returns the process's exit code.
///
/// A node that cannot be reached, or a call that fails, is printed as one line on stderr and
/// exits 1; only a command that is not a client command (`demo`, `node`, `validate`) is an `Err`.
pub async fn run(command: Command) -> anyhow::Result<i32> {
    let result = match command {
        Command::Demo(_)
        | Command::Node(_)
        | Command::Validate { .. }
        | Command::Token(_)
        | Command::Keyring(_) => {
            bail!(
                "demo, node, validate, token and keyring run in this process; they are not client commands"
            )
        }
        Command::Launch(args) => launch::launch(&args).await,
        Command::Runs(args) => show::runs(&args).await,
        Command::Show(args) => show::show(&args).await,
        Command::Tail(args) => tail::tail(&args).await,
        Command::Answer(args) => answer::answer(&args).await,
        Command::Deliver(args) => answer::deliver(&args).await,
        Command::Events(args) => events::events(&args).await,
        Command::Tree(args) => ops::tree(&args).await,
        Command::Nodes(args) => ops::nodes(&args).await,
        Command::Seats(args) => ops::seats(&args).await,
        Command::Drain(args) => ops::drain(&args).await,
        Command::Reload(args) => ops::reload(&args).await,
        Command::Budget(args) => ops::budget(&args).await,
    };
    match result {
        Ok(code) => Ok(code),
        Err(error) => {
            if let Some(failure) = error.downcast_ref::<conn::Failure>() {
                eprintln!("boxfleet: {failure}");
                return Ok(failure.exit_code());
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

/// The events, phase records and run records the modules' tests share.
#[cfg(test)]
mod fixtures;
