//! An answer given by naming its run, taken at once when nothing would hold it on the inbox:
//! the node that holds the run's seat is the one answering, the seat runs no other job, has no
//! turn out with the engine, is not cooling, paused by its budget or stalled on a failed pass,
//! and is still one of the company's agent seats. The inbox's own pass would take such an
//! answer off the head of the inbox at once and record it, then claim the run and resume it
//! (`answer_given`, `drive_answer`) — four writes and a dozen reads between the call and the
//! engine. Here the same three steps are one fenced write: the answer recorded on the run and
//! the run claimed for its resume (`RecordAnswer` then `ClaimAnswer`, decided in turn on the
//! row the call read, its revision compared), then the resume goes to the engine. What a crash
//! leaves is what the inbox's way leaves after its claim: an answered run claimed for a resume
//! no turn took, which the seat's next holder revives (recovery) — the answer is on the row.
//!
//! When any condition does not hold, or the write is refused (another answer won, the run moved
//! on, the seat changed hands), the answer takes the inbox's way, which waits, records or
//! spends it and announces what it became exactly as before.
//!
//! Decisions: `transition::answer` (record_answer, claim_answer).

use boxfleet_cluster::inbox::Delivery;
use boxfleet_cluster::runs::{Outcome, RunError, Versioned};
use boxfleet_cluster::transition::Transition;
use tracing::info;

use crate::crash;

use super::Coordinator;
use super::answer::answer_resume;
use super::answer_given::given_answer;
use super::api::{AnswerOutcome, EngineDown};

impl Coordinator {
    /// Records `delivery` (an answer given by name) on `run` and resumes the run with it in
    /// one write, when nothing would hold it on the seat's inbox; `None` sends it the inbox's
    /// way.
    pub(super) async fn answer_at_once(
        &self,
        run: &Versioned,
        delivery: &Delivery,
    ) -> Option<AnswerOutcome> {
        // a test failpoint: every answer takes the inbox's way (the crash matrix walks it)
        if crate::workers::failpoint_armed("answer-takes-the-inbox") {
            return None;
        }
        let seat = run.record.seat.as_str();
        let given = delivery.answer_given.as_deref()?;
        let fence = self.seats.fence(seat)?;
        // the seat's lock, as the inbox's pass takes it: the idle check and the write are one
        // step for this node, the seat's only writer
        let _seat = self.seats.seat.lock(seat).await;
        if self.seats.fence(seat).as_ref() != Some(&fence)
            || self.seats.releasing(seat)
            || self.seats.has_turn_out(seat)
            || self.seats.cooling(seat)
            || self.offers.stalled(seat)
            || !self.seat_is_agents(seat)
            || self.budget_parked(seat).await
        {
            return None;
        }
        match self.runs.seat_held_by(seat).await {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => return None,
        }
        let steps = [
            Transition::RecordAnswer {
                answer: given_answer(delivery, given, &run.record),
            },
            Transition::ClaimAnswer {
                launch_id: given.launch_id.clone(),
            },
        ];
        let turn_id = run.record.turn_id.as_str();
        let claimed = match self
            .runs
            .apply_steps(
                &fence,
                turn_id,
                Some(Box::new(run.clone())),
                (&steps[0], &steps[1..]),
                boxfleet_cluster::clock::now(),
            )
            .await
        {
            Ok(Outcome::Written(claimed)) => claimed.record,
            Ok(Outcome::Deleted) => return None,
            Err(RunError::Refused(refusal)) => {
                info!(turn_id, %refusal, "sandbox_answer_takes_the_inbox");
                return None;
            }
            Err(error) => {
                // landed or not, the store did not say: a landed claim is given back to the
                // answer it recorded, and the inbox's way finds it recorded
                info!(turn_id, %error, "sandbox_answer_takes_the_inbox");
                self.claim_unknown(turn_id, &given.launch_id, &error).await;
                return None;
            }
        };
        self.offers.answered(seat);
        info!(
            turn_id,
            from = %delivery.from,
            given_by = given.given_by.as_deref(),
            delivery_id = %delivery.delivery_id,
            "sandbox_answer_recorded"
        );
        crash::point(crash::ANSWER_AT_ONCE_AFTER_WRITE);
        self.dispatch(EngineDown::Resume(Box::new(answer_resume(&claimed))));
        crash::point(crash::ANSWER_AT_ONCE_AFTER_RESUME_DISPATCH);
        Some(AnswerOutcome::Recorded)
    }
}
