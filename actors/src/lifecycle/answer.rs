//! Answers (the spec's "Answering"; DESIGN §6 I4, I5, I7): a reply to a parked run's question
//! is recorded once, before its delivery is acked (`answer`, or `inbox` for a chat reply);
//! the answered run is claimed for its resume and handed to the engine (`drive_answer`); a
//! resume that failed is retried a second later, doubling to 30 s, at most
//! [`MAX_ANSWER_RESUME_ATTEMPTS`] times and at most the run's pause TTL from the answer's
//! recording (`after_failed_resume`, carried out by the run's driver), and past that the
//! answer is let go — declined for this question and its copy handed back to the seat once
//! (`let_answer_go`).
//!
//! Decisions: `transition::answer` (record_answer, claim_answer, take, revive, let_go,
//! clear_hand_back).

use std::time::Duration;

use boxfleet_cluster::record::{Answer, RunRecord, Status};
use boxfleet_cluster::runs::{Outcome, RunError};
use boxfleet_cluster::transition::{DEFAULT_PAUSE_TTL_SECONDS, Fence, Transition};
use chrono::{DateTime, Utc};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::api::{EngineDown, Resume, ResumeKind};
use super::error::Error;
use super::follow_ups::AnswerRetry;
use super::job::StoredJob;
use super::limits::MAX_ANSWER_RESUME_ATTEMPTS;

/// How often a recorded answer waiting for its seat looks again.
const SEAT_WAIT_RECHECK: Duration = Duration::from_secs(2);

impl Coordinator {
    /// Claims an answered run and hands its resume to the engine.
    pub async fn drive_answer(&self, fence: &Fence, turn_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        if run.record.status != Status::Answered {
            return Ok(());
        }
        // one coding run of a seat at a time (spec line 20): an answer given while the seat
        // runs another job waits; the seat's pump resumes it first when that job parks or
        // settles, and its Run driver looks again a few seconds on (an ending pumps nothing)
        if let Some(busy) = self
            .seat_working_on_another(&run.record.seat, turn_id)
            .await?
        {
            info!(turn_id, busy_with = %busy, "sandbox_answer_waits_for_seat");
            self.follow_ups
                .answer_resume_failed(
                    &run.record.seat,
                    turn_id,
                    AnswerRetry::After(SEAT_WAIT_RECHECK),
                )
                .await;
            return Ok(());
        }
        let claim = Transition::ClaimAnswer {
            launch_id: run.record.launch_id.clone(),
        };
        let claimed = match self.runs.apply(fence, turn_id, claim).await {
            Ok(Outcome::Written(run)) => run.record,
            Ok(Outcome::Deleted) => return Ok(()),
            Err(RunError::Refused(refusal)) => return Err(RunError::Refused(refusal).into()),
            Err(error) => {
                // landed or not, the store did not say: a landed claim is given back
                self.claim_unknown(turn_id, &run.record.launch_id, &error)
                    .await;
                return Err(error.into());
            }
        };
        crash::point(crash::ANSWER_AFTER_CLAIM);
        self.dispatch(EngineDown::Resume(Box::new(answer_resume(&claimed))));
        crash::point(crash::ANSWER_AFTER_RESUME_DISPATCH);
        Ok(())
    }

    /// Another run of `seat` with a job in flight (launching, running, claimed or ending), if
    /// any: while there is one, a recorded answer of `turn_id` waits.
    pub(super) async fn seat_working_on_another(
        &self,
        seat: &str,
        turn_id: &str,
    ) -> Result<Option<String>, Error> {
        let active = self.runs.list_active(seat).await?;
        Ok(active
            .into_iter()
            .find(|run| run.record.turn_id != turn_id && run.record.status != Status::Answered)
            .map(|run| run.record.turn_id))
    }

    /// The resume of a recorded answer failed (its claim is handed back): the run's driver
    /// retries it or lets it go, as [`after_failed_resume`] decides.
    pub(super) async fn answer_resume_failed(&self, record: &RunRecord) {
        let Some(answer) = &record.answer else {
            return;
        };
        let retry = after_failed_resume(
            answer,
            record.pause_ttl_seconds,
            boxfleet_cluster::clock::now(),
        );
        self.follow_ups
            .answer_resume_failed(&record.seat, &record.turn_id, retry)
            .await;
    }

    /// Lets a recorded answer of `seat`'s run go for good: declined for this question, its
    /// copy handed back to the seat once, and the seat's mail flows again.
    pub async fn let_answer_go(&self, seat: &str, turn_id: &str, attempts: u32) {
        let Ok(fence) = self.seat_fence(seat).await else {
            return;
        };
        match self.runs.apply(&fence, turn_id, Transition::LetGo).await {
            Ok(Outcome::Written(run)) => {
                warn!(turn_id, attempts, "sandbox_answer_requeue_exhausted");
                // the run waits on its question again
                self.offers.parked(seat);
                if let Err(error) = self.publish_hand_backs(&fence, &run.record).await {
                    warn!(turn_id, %error, "sandbox_hand_back_owed");
                }
                self.pump(seat).await;
            }
            Ok(Outcome::Deleted) => {}
            Err(error) => warn!(turn_id, %error, "sandbox_answer_let_go_refused"),
        }
    }
}

/// The resume an answered run's claim hands the engine: the answer, in the same box (or, when
/// the box was reclaimed, a re-seed from the pushed branch).
pub(super) fn answer_resume(claimed: &RunRecord) -> Resume {
    let attempt = claimed.answer.as_ref().map_or(1, |a| a.attempts.max(1));
    let answer = claimed.answer.clone().map(|a| a.text).unwrap_or_default();
    let job = StoredJob::of(claimed);
    Resume {
        seat: claimed.seat.clone(),
        turn_id: claimed.turn_id.clone(),
        launch_id: claimed.launch_id.clone(),
        kind: if claimed.sandbox_id.is_some() {
            ResumeKind::Answer
        } else {
            ResumeKind::Reseed
        },
        conversation: claimed.conversation.clone().unwrap_or_default(),
        iteration: claimed.iteration,
        work_item: claimed.work_item.clone(),
        reply: answer,
        succeeded: true,
        question: claimed.question.as_ref().map(|q| q.text.clone()),
        branch: claimed.question.as_ref().and_then(|q| q.branch.clone()),
        command: job.and_then(|job| job.command),
        attempt,
        refs: Vec::new(),
    }
}

/// The answer-resume retry rule: after a failed resume, the next is a second later, doubling
/// to 30 s; once [`MAX_ANSWER_RESUME_ATTEMPTS`] were made, or the run's pause TTL has passed
/// since the first failure (spec line 444: `first_failed_at`, stamped by the hand-back of its
/// first failed claim; now, when none is stamped), the answer is let go. An answer that waited
/// behind a busy seat longer than the TTL is not let go on its first failure.
pub(super) fn after_failed_resume(
    answer: &Answer,
    pause_ttl_seconds: Option<u64>,
    now: DateTime<Utc>,
) -> AnswerRetry {
    let pause_ttl = Duration::from_secs(pause_ttl_seconds.unwrap_or(DEFAULT_PAUSE_TTL_SECONDS));
    let attempts = answer.attempts.max(1);
    let first_failed = answer.first_failed_at.unwrap_or(now);
    let spent_window = (now - first_failed).to_std().unwrap_or_default() > pause_ttl;
    if attempts >= MAX_ANSWER_RESUME_ATTEMPTS || spent_window {
        return AnswerRetry::LetGo { attempts };
    }
    AnswerRetry::After(Duration::from_secs(1 << (attempts - 1).min(5)).min(Duration::from_secs(30)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use boxfleet_cluster::record::AnswerRoute;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .expect("time")
            .with_timezone(&Utc)
            + chrono::Duration::seconds(seconds)
    }

    fn answer(attempts: u32) -> Answer {
        Answer {
            text: "pg".into(),
            from: "ada".into(),
            delivery_id: "d1".into(),
            posted_at: at(0),
            recorded_at: at(0),
            taken_at: None,
            lost_claims: 0,
            first_lost_at: None,
            attempts,
            first_failed_at: None,
            given_by: None,
            conversation_key: None,
            partition: None,
            for_launch: None,
            route: AnswerRoute::Chat,
            operator: None,
        }
    }

    #[test]
    fn a_failed_resume_is_retried_a_second_later_doubling_to_thirty() {
        let delays: Vec<AnswerRetry> = (1..=9)
            .map(|attempts| after_failed_resume(&answer(attempts), None, at(10)))
            .collect();
        let secs = |s| AnswerRetry::After(Duration::from_secs(s));
        assert_eq!(
            delays,
            [
                secs(1),
                secs(2),
                secs(4),
                secs(8),
                secs(16),
                secs(30),
                secs(30),
                secs(30),
                secs(30)
            ]
        );
    }

    #[test]
    fn the_tenth_attempt_lets_the_answer_go() {
        assert_eq!(
            after_failed_resume(&answer(10), None, at(10)),
            AnswerRetry::LetGo { attempts: 10 }
        );
    }

    fn failed_first_at(attempts: u32, seconds: i64) -> Answer {
        Answer {
            first_failed_at: Some(at(seconds)),
            ..answer(attempts)
        }
    }

    #[test]
    fn past_the_pause_ttl_from_its_first_failure_the_answer_is_let_go() {
        assert_eq!(
            after_failed_resume(&failed_first_at(2, 0), Some(60), at(60)),
            AnswerRetry::After(Duration::from_secs(2)),
            "at the TTL itself it is still retried"
        );
        assert_eq!(
            after_failed_resume(&failed_first_at(2, 0), Some(60), at(61)),
            AnswerRetry::LetGo { attempts: 2 }
        );
        assert_eq!(
            after_failed_resume(&failed_first_at(2, 0), None, at(1801)),
            AnswerRetry::LetGo { attempts: 2 },
            "the default pause TTL is 1800 s"
        );
    }

    #[test]
    fn an_answer_that_waited_past_the_ttl_is_not_let_go_on_its_first_failure() {
        // recorded at 0, its seat busy for an hour, its first resume failing at 3,600
        assert_eq!(
            after_failed_resume(&answer(1), Some(60), at(3_600)),
            AnswerRetry::After(Duration::from_secs(1)),
            "no failure was stamped yet: the window starts now"
        );
        assert_eq!(
            after_failed_resume(&failed_first_at(1, 3_600), Some(60), at(3_601)),
            AnswerRetry::After(Duration::from_secs(1))
        );
    }
}
