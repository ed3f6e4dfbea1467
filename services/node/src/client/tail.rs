//! `boxfleet tail`: the newest output of a running job, by the spec's tail protocol ("Watching
//! a run live"): the viewer sends back what it holds ([`TailCursor`]: the reading's epoch, the
//! offset it holds through, the owner's digest there) and is shown only what is new
//! ([`TailView`]). `launch --wait` follows a job's output the same way.
//!
//! Layout: [`tail`], the command; [`request`], one tail call; the cursor and what one answer
//! shows; the notices a job that is not running gets.

use std::time::Duration;

use boxfleet_proto::v1::{TailReply, TailRequest, tail_reply};

use super::conn::{Failure, Node, POLL_EVERY, connect};
use super::render::{human_bytes, note, out, shell_quote};
use crate::cli::TailArgs;

/// The budget a tail request gives the node (the owner answers within ¾ of it).
const TAIL_BUDGET_MS: u32 = 3_000;
/// The bound on a tail call: its budget and room for the answer to travel.
const TAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `boxfleet tail`: one answer, or with `--follow` one a second until the job stops.
pub(super) async fn tail(args: &TailArgs) -> anyhow::Result<i32> {
    let TailArgs {
        turn,
        launch,
        follow,
        conn,
    } = args;
    let launch = launch.as_deref().unwrap_or_default();
    let node = connect(conn).await?;
    let mut cursor = TailCursor::default();
    let mut last_notice: Option<String> = None;
    let mut showed_anything = false;
    loop {
        let reply = request(&node, turn, launch, &cursor).await?;
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

/// One tail request for `launch` of `turn` (empty: the job the run's record holds now),
/// carrying what `cursor` holds.
pub(super) async fn request(
    node: &Node,
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
    node.call("tail", TAIL_TIMEOUT, node.runs().tail(request))
        .await
}

/// What a viewer holds of a job's output (the spec's "Watching a run live"): the reading's
/// epoch, the offset it holds through and the owner's digest there; all zero on a first request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct TailCursor {
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
pub(super) struct TailView {
    /// new output, for stdout
    pub(super) text: String,
    /// a line about the job's state, for stderr
    pub(super) notice: Option<String>,
    /// the job is not running: a follower stops
    pub(super) stopped: bool,
}

impl TailCursor {
    /// Applies one answer: returns only what is new and moves the cursor past it.
    pub(super) fn apply(&mut self, reply: &TailReply, turn: &str) -> TailView {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn small_helpers() {
        assert_eq!(skip_bytes("héllo", 2), "llo");
    }
}
