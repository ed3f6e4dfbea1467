//! An answer given by naming its run (the spec's "Answering a parked run", `answer_run`): the
//! call checks who may answer and that the run waits on a question, then puts a
//! `sandbox_answer_given` delivery on the seat's own inbox (`answer`). The seat's holder takes
//! it off the inbox before its screening — it is addressed to the run, so no parked question is
//! offered it and it never becomes a turn — and records it on the run as it records a chat
//! reply, then resumes the run with it (`work_answer_given`). Because it travels on the inbox,
//! an answer given while the seat runs another job waits until that job settles or parks and is
//! then the first thing offered, and one given while the holder restarts is still there
//! afterwards. It answers the question it was given against (its launch id) and no other.
//!
//! What it became is announced once (`sandbox_run_answered`): resumed (at the claim), declined
//! (let go), gone (its run ended) or not_awaiting (another answer had it first, or the run moved
//! on). A redelivery of one already spent is acknowledged without reaching the run.
//!
//! Decisions: `transition::answer` (record_answer, let_go), `boxfleet_cluster::inbox`.

use boxfleet_cluster::events::Answered;
use boxfleet_cluster::inbox::{AnswerGiven, Delivery, Message};
use boxfleet_cluster::record::{Answer, AnswerRoute, Operator, RunRecord, Status};
use boxfleet_cluster::runs::RunError;
use boxfleet_cluster::transition::{Fence, Refusal, Transition};
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::api::{AnswerOutcome, Answerer};
use super::error::Error;
use super::text::new_id;

impl Coordinator {
    /// Whether job `launch_id` of `turn_id` had its question answered and resumed (its
    /// `sandbox_run_answered` event, `became: resumed`); a read that fails says no.
    async fn answer_resumed(&self, turn_id: &str, launch_id: &str) -> bool {
        let Ok(stored) =
            boxfleet_cluster::events::read_turn(self.store.as_ref(), &self.keys, turn_id).await
        else {
            return false;
        };
        stored.iter().any(|s| {
            s.event.turn_id == turn_id
                && s.event.launch_id == launch_id
                && s.event.kind == boxfleet_cluster::events::kind::RUN_ANSWERED
                && s.event.body["became"] == "resumed"
        })
    }

    /// answer_run: checks the answer may be given and the run waits on a question, then puts it
    /// on the seat's inbox (`sandbox_answer_given`). Who may answer is the spec's answer
    /// authority: the run's requester, whoever leads its seat, or an admin — never a seat.
    pub async fn answer(
        &self,
        turn_id: &str,
        launch_id: &str,
        text: &str,
        answerer: &Answerer,
    ) -> Result<AnswerOutcome, Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(AnswerOutcome::Gone);
        };
        let span = self.span_of(crate::spans::Op::Answer, &run.record);
        tracing::Instrument::instrument(
            Box::pin(self.answer_read(run, turn_id, launch_id, text, answerer)),
            span,
        )
        .await
    }

    async fn answer_read(
        &self,
        run: boxfleet_cluster::runs::Versioned,
        turn_id: &str,
        launch_id: &str,
        text: &str,
        answerer: &Answerer,
    ) -> Result<AnswerOutcome, Error> {
        let record = &run.record;
        if !answerer.admin {
            self.company()
                .may_answer(&record.seat, record.requester.as_deref(), &answerer.from)
                .map_err(Error::Denied)?;
        }
        if !launch_id.is_empty() && record.launch_id != launch_id {
            // the job asked, was answered, and the turn went on: say so, not "wrong job"
            if self.answer_resumed(turn_id, launch_id).await {
                return Ok(AnswerOutcome::AlreadyAnswered);
            }
            return Ok(AnswerOutcome::WrongLaunch(record.launch_id.clone()));
        }
        match record.status {
            Status::AwaitingClarification | Status::Reseed => {}
            Status::Answered => return Ok(AnswerOutcome::AlreadyAnswered),
            other => return Ok(AnswerOutcome::NotAwaiting(other.to_string())),
        }
        let delivery = Delivery {
            delivery_id: new_id("answer"),
            conversation_key: None,
            partition: None,
            from: answerer.from.clone(),
            text: text.to_owned(),
            posted_at: boxfleet_cluster::clock::now(),
            // the question it answers: the job the run held when this call checked it
            answer_given: Some(Box::new(AnswerGiven {
                turn_id: turn_id.to_owned(),
                launch_id: record.launch_id.clone(),
                given_by: answerer.given_by.clone(),
                operator: Some(Operator {
                    answered_by_kind: self.company().kind_of(&answerer.from).to_owned(),
                    operator_id: answerer.operator_id.clone(),
                }),
            })),
        };
        crash::point(crash::ANSWER_BEFORE_RECORD);
        if let Some(outcome) = self.answer_at_once(&run, &delivery).await {
            return Ok(outcome);
        }
        self.inbox.enqueue(&record.seat, &delivery).await?;
        crash::point(crash::ANSWER_AFTER_ENQUEUE);
        info!(
            turn_id,
            seat = %record.seat,
            delivery_id = %delivery.delivery_id,
            from = %answerer.from,
            given_by = answerer.given_by.as_deref(),
            "sandbox_answer_given"
        );
        // the holder takes it now when the seat is free (this node, routed here as the holder)
        self.pump(&record.seat).await;
        self.answer_became(record, &delivery).await
    }

    /// What an answer given by name became by now: recorded (on the row, or announced
    /// resumed), taken by another answer, gone, or still pending on the seat's inbox.
    async fn answer_became(
        &self,
        run: &RunRecord,
        delivery: &Delivery,
    ) -> Result<AnswerOutcome, Error> {
        let ours = |answer: &Answer| answer.delivery_id == delivery.delivery_id;
        if let Some(now) = self.runs.read(&run.turn_id).await?
            && now.record.answer.as_ref().is_some_and(ours)
        {
            return Ok(AnswerOutcome::Recorded);
        }
        let answered = announcement(&run.turn_id, &run.seat, delivery);
        if self.runs.announced(&answered.event_id("resumed")).await? {
            return Ok(AnswerOutcome::Recorded);
        }
        if self
            .runs
            .announced(&answered.event_id("not_awaiting"))
            .await?
        {
            return Ok(AnswerOutcome::AlreadyAnswered);
        }
        if self.runs.announced(&answered.event_id("gone")).await? {
            return Ok(AnswerOutcome::Gone);
        }
        Ok(AnswerOutcome::Pending)
    }

    /// Works an answer given by name off the head of the seat's inbox: recorded on its run
    /// (before the delivery is acked) when the run still waits on the question it was given
    /// against, else spent and announced as what it became. A store failure hands it back.
    pub(super) async fn work_answer_given(
        &self,
        fence: &Fence,
        message: &Message,
        given: &AnswerGiven,
    ) -> Result<(), Error> {
        let delivery = &message.delivery;
        let turn_id = given.turn_id.as_str();
        // spent already (a turn took it, or it was let go): acknowledged, announced nothing more
        if boxfleet_cluster::ledger::is_worked(
            self.store.as_ref(),
            &self.keys,
            &delivery.delivery_id,
        )
        .await?
        {
            info!(turn_id, delivery_id = %delivery.delivery_id, "sandbox_answer_by_turn_already_spent");
            return self.spend_given(fence, message, None).await;
        }
        let Some(run) = self.runs.read(turn_id).await? else {
            return self.spend_given(fence, message, Some("gone")).await;
        };
        if given.launch_id.is_empty() {
            warn!(turn_id, delivery_id = %delivery.delivery_id, "sandbox_answer_names_no_question");
            return self.spend_given(fence, message, None).await;
        }
        if run.record.seat != fence.seat {
            // an answer on one seat's inbox naming another seat's run answers nothing here
            warn!(turn_id, seat = %fence.seat, "sandbox_answer_names_another_seats_run");
            return self.spend_given(fence, message, None).await;
        }
        let record = Transition::RecordAnswer {
            answer: given_answer(delivery, given, &run.record),
        };
        match self.runs.apply(fence, turn_id, record).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyRecorded)) => {
                self.offers.answered(&fence.seat);
                info!(
                    turn_id,
                    from = %delivery.from,
                    given_by = given.given_by.as_deref(),
                    "sandbox_answer_recorded"
                );
                crash::point(crash::ANSWER_AFTER_RECORD);
                // recorded before the delivery is acked; the pump resumes the run next
                if let Err(error) = self.inbox.ack(fence, message).await {
                    warn!(seat = %fence.seat, %error, "sandbox_answer_ack_failed");
                }
                crash::point(crash::ANSWER_AFTER_ACK);
                Ok(())
            }
            Err(RunError::Refused(Refusal::Missing)) => {
                self.spend_given(fence, message, Some("gone")).await
            }
            Err(RunError::Refused(Refusal::Declined)) => {
                self.spend_given(fence, message, None).await
            }
            Err(RunError::Refused(refusal)) => {
                info!(turn_id, %refusal, "sandbox_answer_not_awaiting");
                self.spend_given(fence, message, Some("not_awaiting")).await
            }
            Err(error) => {
                // the store could not say: handed back, offered again after the holder's next
                // renew (an answer naming its run cannot answer anything else meanwhile)
                let _ = self.inbox.defer(fence, message).await;
                Err(error.into())
            }
        }
    }

    /// Works every answer given by name on the seat's inbox whose run no longer waits on the
    /// question it answers (gone, answered by another, on another job): each is spent and
    /// announced as what it became, while the ones still owed their run wait for the seat.
    pub(super) async fn spend_stale_answers(&self, fence: &Fence) -> Result<(), Error> {
        for message in self.inbox.list(&fence.seat).await? {
            let Some(given) = &message.delivery.answer_given else {
                continue;
            };
            let waiting = self.runs.read(&given.turn_id).await?.is_some_and(|run| {
                matches!(
                    run.record.status,
                    Status::AwaitingClarification | Status::Reseed
                ) && run.record.launch_id == given.launch_id
            });
            if !waiting {
                self.work_answer_given(fence, &message, given).await?;
            }
        }
        Ok(())
    }

    /// Spends an answer given by name that answers nothing now: announced as what it became
    /// (`became`), then acked.
    async fn spend_given(
        &self,
        fence: &Fence,
        message: &Message,
        became: Option<&str>,
    ) -> Result<(), Error> {
        if let (Some(became), Some(given)) = (became, &message.delivery.answer_given) {
            let event = announcement(&given.turn_id, &fence.seat, &message.delivery)
                .event(became, boxfleet_cluster::clock::now());
            self.runs.announce(&event).await?;
            info!(turn_id = %given.turn_id, became, "sandbox_run_answered");
        }
        self.inbox.ack(fence, message).await?;
        Ok(())
    }
}

/// The answer an answer given by name records on its run.
pub(super) fn given_answer(delivery: &Delivery, given: &AnswerGiven, run: &RunRecord) -> Answer {
    let mut answer = Answer::of_delivery(
        delivery,
        &given.launch_id,
        AnswerRoute::Operator,
        boxfleet_cluster::clock::now(),
    );
    answer.given_by = given.given_by.clone();
    answer.operator = given.operator.clone();
    answer.conversation_key = run.conversation_key.clone();
    answer.partition = run.partition.clone();
    answer
}

/// The `sandbox_run_answered` of an answer given by name to `turn_id`'s run on `seat`.
fn announcement<'a>(turn_id: &'a str, seat: &'a str, delivery: &'a Delivery) -> Answered<'a> {
    Answered {
        turn_id,
        launch_id: delivery
            .answer_given
            .as_ref()
            .map_or("", |given| given.launch_id.as_str()),
        seat,
        route: AnswerRoute::Operator.as_str(),
        answered_by: &delivery.from,
        given_by: delivery
            .answer_given
            .as_ref()
            .and_then(|given| given.given_by.as_deref()),
        delivery_id: &delivery.delivery_id,
        operator: delivery
            .answer_given
            .as_ref()
            .and_then(|given| given.operator.as_ref()),
    }
}
