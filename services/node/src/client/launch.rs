//! `boxfleet launch` (run_sandbox): launches a job and prints its outcome, one line; with
//! `--wait` it stays attached through [`Follower`] — the turn's events from the events outbox,
//! and the job's live output by the tail protocol while it runs — until the run is collected,
//! printing each phase record, the question a parked job asks and the exact command that
//! answers it.
//!
//! Layout: [`launch`] and the request and outcome lines it builds; [`Follower`] and its states;
//! [`after_phase`], which reads the run record to settle a run whose phase record asked nothing.

use std::time::Duration;

use boxfleet_cluster::events::kind;
use boxfleet_cluster::record::Status;
use boxfleet_proto::v1::{
    Event, GetReply, LaunchRequest, Launched, Refusal, launch_reply, refusal,
};
use serde_json::{Value, json};
use tokio::time::{Instant, MissedTickBehavior};

use super::conn::{Failure, Node, POLL_EVERY, STREAM_RETRIES, connect};
use super::events::{event_value, failure_line};
use super::records::{EventView, run_record};
use super::render::{Question, asks_question, note, out, render_phase_record};
use super::tail::{self, TailCursor};
use crate::cli::{LaunchArgs, Runner};

/// The bound on a launch: it provisions a box and may run setup steps (600 s each) first.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How long `launch --wait` waits, after a job's phase record, for its run to settle (the
/// record gone and the seat free, or parked on a question) before it says so and returns.
const SETTLE_BOUND: Duration = Duration::from_secs(120);
/// How often `launch --wait` looks at a settling run.
const SETTLE_EVERY: Duration = Duration::from_millis(200);

fn launch_request(args: &LaunchArgs) -> LaunchRequest {
    // no --runner: a command is the command runner's; a brief's is the node's to choose (the
    // role's coding agent, the company's default, else Claude Code)
    let runner = match (args.runner, &args.command) {
        (Some(runner), _) => runner.as_str(),
        (None, Some(_)) => Runner::Command.as_str(),
        (None, None) => "",
    };
    LaunchRequest {
        seat: args.seat.clone(),
        turn_id: args.turn.clone().unwrap_or_default(),
        brief: args.brief.clone().unwrap_or_default(),
        task: args.task.clone().unwrap_or_default(),
        work_item: args.work_item.clone().unwrap_or_default(),
        requester: args.requester.clone().unwrap_or_default(),
        runner: runner.to_owned(),
        command: args.command.clone().unwrap_or_default(),
        model: args.model.clone().unwrap_or_default(),
        pause_ttl_seconds: args.pause_ttl,
        conversation_key: args.conversation.clone().unwrap_or_default(),
        timeout_seconds: args.timeout.unwrap_or(0),
        max_turns: args.max_turns.unwrap_or(0),
        ..LaunchRequest::default()
    }
}

/// Runs `boxfleet launch`.
pub(super) async fn launch(args: &LaunchArgs) -> anyhow::Result<i32> {
    let json = args.json;
    let node = connect(&args.conn).await?;
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
            // a refusal is not the command's answer: stderr, so a pipe carries none of it
            // (with --json the refusal object is the answer a script reads: stdout)
            if json {
                out(&format!("{}\n", refusal_json(&refusal)))?;
            } else {
                eprintln!("boxfleet: {}", refusal_line(&refusal));
            }
            return Ok(refusal_exit(&refusal));
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
    if !args.wait {
        return Ok(0);
    }
    Follower::new(&node, &launched, json).follow().await
}

fn refusal_class(refusal: &Refusal) -> &'static str {
    match refusal.class() {
        refusal::Class::Unspecified => "unspecified",
        refusal::Class::Unavailable => "unavailable",
        refusal::Class::Busy => "busy",
        refusal::Class::Refused => "refused",
        refusal::Class::Budget => "budget",
    }
}

/// A refusal's exit code: `unavailable` is the node's state (try again later, exit 4); the
/// rest are this request's (exit 1).
fn refusal_exit(refusal: &Refusal) -> i32 {
    match refusal.class() {
        refusal::Class::Unavailable => super::exit::UNAVAILABLE,
        _ => super::exit::FAILED,
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
///  running ──phase record, a question ─▶ parked ─answer, the turn relaunches─▶ running (new job)
///     │    ──phase record (succeeded or failed) ─▶ settling
///     │    ──sandbox_run_failed (any time) ─────▶ settling (exit 1)
///  settling ─record parked─▶ parked
///           ─record gone or moved on (the seat is free)─▶ exit 0, or 1 when the job failed
///           ─SETTLE_BOUND with the run still ending─▶ the same exit, said on stderr
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
    /// the line a silent wait shows on a terminal
    progress: super::progress::Progress,
    /// when the job's output was last asked for
    tailed_at: Option<Instant>,
}

#[derive(Debug)]
struct Settling {
    launch: String,
    until: Instant,
    /// what the wait exits with once the run is settled: 1 when its job failed
    code: i32,
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
            progress: super::progress::Progress::new(),
            tailed_at: None,
        }
    }

    async fn follow(mut self) -> anyhow::Result<i32> {
        let mut from_revision = 0;
        let mut failures = 0;
        // a settling run is looked at every SETTLE_EVERY; the job's output and the progress
        // line every POLL_EVERY
        let mut tick = tokio::time::interval(SETTLE_EVERY);
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
                                return Err(self.node.failed("events", status).into());
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
        if self.json {
            self.say(&format!("{}\n", event_value(event)))?;
        }
        if !event.launch_id.is_empty() && event.launch_id != self.launch {
            // the turn launched its next job (the relaunch an answer brings)
            self.launch = event.launch_id.clone();
            self.tail = Some(TailCursor::default());
            self.settling = None;
            self.last_notice = None;
            if !self.json {
                self.say(&format!("the turn launched job {}\n", self.launch))?;
            }
        }
        let view = EventView::from_message(event);
        match event.kind.as_str() {
            kind::CLARIFICATION_REQUESTED => {
                self.tail = None;
                self.settling = None;
                if !self.json && self.asked_for.as_deref() != Some(&self.launch) {
                    let question = Question::from_event(&view);
                    self.say(&question.render(&self.turn, &self.launch, &self.node.addr))?;
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
                    self.say(&render_phase_record(&view))?;
                }
                let record = view.phase().record;
                if record.failed
                    || (!asks_question(&record) && self.asked_for.as_deref() != Some(&self.launch))
                {
                    // returned only once the run is settled and its seat free
                    self.settle(i32::from(record.failed));
                }
                Ok(Next::Continue)
            }
            kind::RUN_FAILED => {
                self.tail = None;
                if !self.json {
                    self.say(&format!("{}\n", failure_line(&view)))?;
                }
                self.settle(super::exit::FAILED);
                Ok(Next::Continue)
            }
            _ => Ok(Next::Continue),
        }
    }

    /// The run's job ended (its phase record, or the run's failure): wait for it to settle.
    fn settle(&mut self, code: i32) {
        let code = self.settling.as_ref().map_or(code, |s| s.code.max(code));
        self.settling = Some(Settling {
            launch: self.launch.clone(),
            until: Instant::now() + SETTLE_BOUND,
            code,
        });
    }

    async fn on_tick(&mut self) -> anyhow::Result<Next> {
        if let Some(settling) = &self.settling {
            let launch = settling.launch.clone();
            let until = settling.until;
            let code = settling.code;
            let reply = match self.node.get_or_none(&self.turn).await {
                Ok(reply) => reply,
                Err(failure) => {
                    self.notice(&format!("cannot read the run yet: {failure}"));
                    return Ok(if Instant::now() >= until {
                        Next::Exit(code)
                    } else {
                        Next::Continue
                    });
                }
            };
            return Ok(match after_phase(&reply, &launch) {
                AfterPhase::Parked(question) => {
                    self.settling = None;
                    if !self.json && self.asked_for.as_deref() != Some(&launch) {
                        self.say(&question.render(&self.turn, &launch, &self.node.addr))?;
                    }
                    self.asked_for = Some(launch);
                    Next::Continue
                }
                AfterPhase::Done => {
                    self.progress.clear();
                    Next::Exit(code)
                }
                AfterPhase::Undecided if Instant::now() >= until => {
                    self.progress.clear();
                    note(&format!(
                        "the run is still settling after {} s; `boxfleet show {}` tells when it is",
                        SETTLE_BOUND.as_secs(),
                        self.turn
                    ));
                    Next::Exit(code)
                }
                AfterPhase::Undecided => {
                    if !self.json {
                        self.progress.tick("the job exited; settling the run");
                    }
                    Next::Continue
                }
            });
        }
        if self.tailed_at.is_some_and(|at| at.elapsed() < POLL_EVERY) {
            return Ok(Next::Continue);
        }
        self.tailed_at = Some(Instant::now());
        if self.tail.is_some() && !self.json {
            self.tail_once().await?;
        }
        if !self.json {
            let what = match (&self.tail, &self.asked_for) {
                (Some(_), _) => "the job is running",
                (None, Some(asked)) if *asked == self.launch => {
                    "parked on a question, waiting for its answer"
                }
                (None, _) => "waiting for the run",
            };
            self.progress.tick(what);
        }
        Ok(Next::Continue)
    }

    /// One tail request for the followed job; prints what is new. A failed request is a notice:
    /// the wait goes on, since the run's events still arrive.
    async fn tail_once(&mut self) -> anyhow::Result<()> {
        let Some(cursor) = self.tail.as_mut() else {
            return Ok(());
        };
        let reply = match tail::request(self.node, &self.turn, &self.launch, cursor).await {
            Ok(reply) => reply,
            Err(failure) => {
                let line = format!("cannot tail the job: {failure}");
                self.notice(&line);
                return Ok(());
            }
        };
        let view = cursor.apply(&reply, &self.turn);
        self.say(&view.text)?;
        // a job that stopped running is told by its events (the phase record, the question)
        if let Some(notice) = view.notice.as_ref().filter(|_| !view.stopped) {
            self.notice(notice);
        }
        if view.stopped {
            self.tail = None;
            if !self.json {
                self.notice("the job exited; the node is collecting what it did");
            }
        }
        Ok(())
    }

    /// Prints `text` on stdout, the progress line cleared first.
    fn say(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.progress.clear();
        out(text)?;
        self.progress.spoke();
        Ok(())
    }

    fn notice(&mut self, text: &str) {
        if self.last_notice.as_deref() != Some(text) {
            self.progress.clear();
            self.progress.spoke();
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
    let Some(record) = run_record(&reply.record_json) else {
        return AfterPhase::Undecided;
    };
    if !record.launch_id.is_empty() && record.launch_id != launch {
        return AfterPhase::Done;
    }
    match record.status {
        Status::AwaitingClarification | Status::Reseed | Status::Answered => {
            AfterPhase::Parked(Question::from_record(&record))
        }
        // an ending run still holds its seat: the wait returns once it is gone
        _ => AfterPhase::Undecided,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{
        a_cluster_event, a_full_phase_record, every_kind_of_event, message_of, run_record_with,
    };
    use super::*;

    #[test]
    fn after_a_phase_record_the_record_decides_parked_or_done() {
        let reply = |record: Value| GetReply {
            found: true,
            record_json: run_record_with(record).to_string(),
            ..GetReply::default()
        };
        assert_eq!(after_phase(&GetReply::default(), "l1"), AfterPhase::Done);
        assert!(matches!(
            after_phase(
                &reply(json!({"launch_id": "l1", "status": "awaiting_clarification",
                    "question": {"text": "q", "audience": "team",
                    "asked_at": "2026-05-01T10:00:00Z"}})),
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
            AfterPhase::Undecided,
            "an ending run still holds its seat"
        );
        assert_eq!(
            after_phase(
                &reply(json!({"launch_id": "l2", "status": "launching"})),
                "l1"
            ),
            AfterPhase::Done
        );
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
        assert_eq!(brief.runner, "", "a brief's runner is the node's to choose");
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
    fn pin_the_launch_json_lines() {
        let launched = Launched {
            turn_id: "t1".to_owned(),
            node: "node-a".to_owned(),
            ..Launched::default()
        };
        assert_eq!(
            launched_json(&launched).to_string(),
            r#"{"launched":{"launch_id":"","node":"node-a","sandbox_id":"","turn_id":"t1"}}"#
        );
        let refusal = Refusal {
            class: refusal::Class::Refused as i32,
            reason: "no such seat".to_owned(),
        };
        assert_eq!(
            refusal_json(&refusal).to_string(),
            r#"{"refused":{"class":"refused","reason":"no such seat"}}"#
        );
    }

    #[test]
    fn pin_the_phase_record_and_failure_as_launch_wait_prints_them() {
        let phase = a_cluster_event(
            boxfleet_cluster::events::kind::PHASE_COMPLETED,
            "l2",
            "2026-05-01T10:02:30Z",
            json!({"phase": "sandbox", "record": a_full_phase_record().to_value()}),
        );
        let value = EventView::from_message(&message_of(&phase, 9));
        assert_eq!(render_phase_record(&value), PIN_PHASE_RECORD);
        let failed = &every_kind_of_event()[2];
        assert_eq!(
            failure_line(&EventView::from_message(&message_of(failed, 12))),
            "run failed (collect_unreachable): box gone for good"
        );
        let cancelled = &every_kind_of_event()[3];
        assert_eq!(
            failure_line(&EventView::from_message(&message_of(cancelled, 13))),
            "run failed (cancelled)"
        );
        let asked = &every_kind_of_event()[1];
        let question = Question::from_event(&EventView::from_message(&message_of(asked, 11)));
        assert_eq!(
            question.render("t1", "l1", "http://10.0.0.2:7400"),
            PIN_QUESTION
        );
    }

    const PIN_PHASE_RECORD: &str = "phase sandbox  turn t1  job l2  seat alice  at 2026-05-01T10:02:30Z\n  outcome       failed\n  coding agent  claude-code\n  box           sb-1\n  work item     ENG-7\n  started       2026-05-01T10:00:00.500+00:00\n  duration      12.3 s\n  job ran       11.0 s, collected 0.3 s after it exited\n  model         requested claude-sonnet-4-5, ran claude-haiku-4-5 (mismatch)\n  tokens        input 1200, output 340, cache read 1000\n  cost          $0.0125\n  delivered     (nothing)\n  error\n    model_mismatch: the box ran claude-haiku-4-5\n  notes\n    Which cap?\n  report\n    half done\n\n    more\n  transcript (3 lines)\n    Bash: cargo test\n    ran 3 tests\n    Edit: src/lib.rs\n";

    const PIN_QUESTION: &str = "job l1 asks (team: bob):\n  Which cap?\n  In seconds.\n  work pushed to branch wip/retry\nanswer it with:\n  boxfleet answer t1 --launch l1 --text '<your answer>' --addr http://10.0.0.2:7400\n";
}
