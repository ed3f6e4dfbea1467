//! `boxfleet answer` (answer_run) and `boxfleet deliver`: the two ways a person's words reach
//! a run — naming the parked run and the job that asked, or a chat message into a seat's inbox
//! (a reply on a parked run's conversation answers it).
//!
//! Layout: [`answer`] and its outcome line; [`deliver`].

use boxfleet_proto::v1::{AnswerRequest, DeliverRequest};

use boxfleet_cluster::record::Status;

use super::conn::{CALL_TIMEOUT, Node, connect};
use super::exit;
use super::records::run_record;
use super::render::{cell, non_empty, note, one_line, out, shell_quote};
use crate::cli::{AnswerArgs, DeliverArgs};

/// Runs `boxfleet answer`: exit 0 when the answer was recorded or is pending on the seat's
/// inbox (durable either way; the run resumes with it), 1 for any other outcome.
pub(super) async fn answer(args: &AnswerArgs) -> anyhow::Result<i32> {
    let AnswerArgs {
        turn,
        launch,
        text,
        as_whom,
        conn,
    } = args;
    let node = connect(conn).await?;
    let launch = match launch {
        Some(launch) => launch.clone(),
        None => match parked_job(&node, turn).await? {
            Ok(launch) => launch,
            Err(code) => return Ok(code),
        },
    };
    let request = AnswerRequest {
        turn_id: turn.clone(),
        launch_id: launch.clone(),
        text: text.clone(),
        as_whom: as_whom.clone().unwrap_or_default(),
    };
    let reply = node
        .call("answer", CALL_TIMEOUT, node.runs().answer(request))
        .await?;
    let line = answer_line(&reply.outcome, &reply.detail, turn);
    // an answer that answers nothing is a refusal: stderr, so a pipe carries only answers
    if matches!(reply.outcome.as_str(), "recorded" | "pending") {
        out(&format!("{line}\n"))?;
    } else {
        note(&format!("boxfleet: {line}"));
    }
    Ok(match reply.outcome.as_str() {
        "recorded" | "pending" => exit::OK,
        "gone" => exit::NOT_FOUND,
        _ => exit::FAILED,
    })
}

/// The job run `turn` is parked on now, said on stderr; `Err(exit code)` (said) when it is not
/// parked on a question.
async fn parked_job(node: &Node, turn: &str) -> anyhow::Result<Result<String, i32>> {
    let reply = node.get(turn).await?;
    let Some(record) = run_record(&reply.record_json) else {
        note(&format!(
            "boxfleet: run {turn} has settled: there is no question to answer ('boxfleet show {}' prints what it did)",
            shell_quote(turn)
        ));
        return Ok(Err(exit::NOT_FOUND));
    };
    match record.status {
        Status::AwaitingClarification | Status::Reseed => {
            let question = record
                .question
                .as_ref()
                .map(|q| q.text.as_str())
                .unwrap_or("");
            note(&format!(
                "answering job {} of run {turn}, parked on: {}",
                record.launch_id,
                one_line(question)
            ));
            Ok(Ok(record.launch_id))
        }
        Status::Answered => {
            note(&format!(
                "boxfleet: run {turn}'s question was answered already; its turn resumes with that answer"
            ));
            Ok(Err(exit::FAILED))
        }
        other => {
            note(&format!(
                "boxfleet: run {turn} is not waiting on a question (it is {other})"
            ));
            Ok(Err(exit::FAILED))
        }
    }
}

fn answer_line(outcome: &str, detail: &str, turn: &str) -> String {
    let meaning = match outcome {
        "recorded" => "the answer is on the run; its turn resumes with it".to_owned(),
        "pending" => {
            "the answer waits on the seat's inbox behind its current job; the run resumes with \
             it once that job settles or parks"
                .to_owned()
        }
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

/// Runs `boxfleet deliver`.
pub(super) async fn deliver(args: &DeliverArgs) -> anyhow::Result<i32> {
    let DeliverArgs {
        seat,
        conversation,
        text,
        from,
        conn,
    } = args;
    let node = connect(conn).await?;
    let request = DeliverRequest {
        seat: seat.clone(),
        conversation_key: conversation.clone(),
        from: from.clone(),
        text: text.clone(),
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
    if reply.engine == "builtin" && reply.outcome == "queued" {
        note(&format!(
            "seat {seat} is worked by the node's built-in engine: it runs the message's text as a \
             shell command (a command job); attach an engine over Engine.Attach to work messages \
             otherwise"
        ));
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
