//! `Run{turn}`: the actor that drives one run's retries on this node, under the node's `runs`
//! supervisor: an answer's resume after a failure (on the spacing `lifecycle::answer` decides),
//! an ending that could not be finished (kept with its terms, finished once the store takes
//! it), and the claim of a resume its engine could not settle (given back). Every step
//! re-reads the run's record, so a restart simply picks the run up again; a run that needs
//! nothing more from this node (settled, parked, or moved to another holder) stops its actor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use boxfleet_cluster::record::Status;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tracing::warn;

use crate::lifecycle::{Coordinator, LostClaim};

/// How soon a kept ending is tried again.
pub const ENDING_RETRY: Duration = Duration::from_secs(30);

/// One run's driver.
#[derive(Debug)]
pub struct RunActor;

#[derive(Debug, Clone)]
pub struct RunArgs {
    pub coordinator: Arc<Coordinator>,
    pub turn_id: String,
    /// set at the driver's first start: a restart (after a panic) reads the record again at
    /// once, while a first start waits for the message that started it — a retry's delay is
    /// waited out, not skipped by a read on start
    pub started: Arc<AtomicBool>,
}

#[derive(Debug)]
pub enum RunMsg {
    /// Read the record and do what it owes: finish an ending, resume an answer.
    Check,
    /// Resume the recorded answer after `delay` (a failed resume's retry).
    RetryAnswer { delay: Duration },
    /// Decide an ending the store did not take, then finish it; asked again every
    /// [`DECISION_RETRY`] while the store does not answer and the seat is held here.
    DecideEnding(Box<crate::lifecycle::KeptEnding>),
    /// Give back the claim `launch_id` of a resume this node's engine could not settle, or
    /// of a claim write whose outcome the store did not say; asked again every
    /// [`DECISION_RETRY`] while the store does not answer or work is in progress on the seat.
    HandBackClaim { launch_id: String },
}

/// How soon a kept ending's decision is asked again.
pub const DECISION_RETRY: Duration = Duration::from_secs(5);

/// Comes back to the run after `delay` with `message`, through the node's tree rather than
/// this actor's own timer: the driver stops once the step in hand owes nothing more, and a
/// timer of its own would die with it — a kept ending's retry was lost so when a claim's
/// hand-back, handled meanwhile, stopped the driver (simulation seeds 24767, 29672, 26380).
/// The tree starts a driver again if none runs by then; a node that is gone starts none.
fn come_back(state: &RunArgs, delay: Duration, message: RunMsg) {
    let follow_ups = state.coordinator.follow_ups();
    let turn_id = state.turn_id.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        match message {
            RunMsg::Check | RunMsg::RetryAnswer { .. } => follow_ups.check_run(&turn_id).await,
            RunMsg::DecideEnding(ending) => follow_ups.keep_ending(&turn_id, *ending).await,
            RunMsg::HandBackClaim { launch_id } => {
                follow_ups.hand_back_claim(&turn_id, &launch_id).await
            }
        }
    });
}

/// The step in hand owes nothing more from this driver: it stops once the messages already
/// in its mailbox are handled (a drain, not a stop, which would drop them); one sent after
/// this is refused, and the tree starts a new driver for it (`NodeTree::drive`).
fn finish(myself: &ActorRef<RunMsg>) {
    let _ = myself.drain();
}

impl Actor for RunActor {
    type Msg = RunMsg;
    type State = RunArgs;
    type Arguments = RunArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RunArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        if args.started.swap(true, Ordering::SeqCst) {
            let _ = myself.cast(RunMsg::Check);
        }
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RunMsg::RetryAnswer { delay } => {
                come_back(state, delay, RunMsg::Check);
                finish(&myself);
            }
            RunMsg::HandBackClaim { launch_id } => {
                let turn_id = &state.turn_id;
                let handed = state
                    .coordinator
                    .hand_back_lost_claim(turn_id, &launch_id)
                    .await;
                match handed {
                    // the answer's retry is queued here
                    Ok(LostClaim::AnswerRetryQueued) => {}
                    Ok(LostClaim::HandedBack | LostClaim::NotOwed) => finish(&myself),
                    Ok(LostClaim::Later) => {
                        come_back(state, DECISION_RETRY, RunMsg::HandBackClaim { launch_id });
                        finish(&myself);
                    }
                    Err(error) => {
                        warn!(turn_id, %error, "sandbox_claim_hand_back_kept");
                        come_back(state, DECISION_RETRY, RunMsg::HandBackClaim { launch_id });
                        finish(&myself);
                    }
                }
            }
            RunMsg::DecideEnding(ending) => {
                let coordinator = &state.coordinator;
                let turn_id = &state.turn_id;
                let fence = match coordinator.seat_fence(&ending.seat).await {
                    Ok(fence) => fence,
                    Err(error) => {
                        // the seat is another node's now: its recovery pass takes the run over
                        warn!(turn_id, %error, "run_driver_stopped");
                        finish(&myself);
                        return Ok(());
                    }
                };
                match coordinator.end_run_kept(&fence, turn_id, &ending).await {
                    // the seat's mail waited behind the ending: it flows again
                    Ok(true) => coordinator.pump(&fence.seat).await,
                    Ok(false) => warn!(turn_id, "sandbox_ending_declined"),
                    Err(error) => {
                        warn!(turn_id, %error, "sandbox_ending_decision_kept");
                        come_back(state, DECISION_RETRY, RunMsg::DecideEnding(ending));
                    }
                }
                finish(&myself);
            }
            RunMsg::Check => {
                if let Err(error) = check(&myself, state).await {
                    // no error fails the driver: a failed actor loses what waits in its
                    // mailbox (a claim's hand-back queued behind this check was lost so,
                    // seed 16145); the check is asked again instead
                    warn!(turn_id = %state.turn_id, %error, "run_check_failed");
                    come_back(state, DECISION_RETRY, RunMsg::Check);
                    finish(&myself);
                }
            }
        }
        Ok(())
    }
}

/// Reads the run's record and does what it owes from this node: finish an ending, resume an
/// answer; the driver finishes once nothing more is owed.
async fn check(myself: &ActorRef<RunMsg>, state: &RunArgs) -> Result<(), ActorProcessingErr> {
    let coordinator = &state.coordinator;
    let turn_id = &state.turn_id;
    let Some(run) = coordinator.runs.read(turn_id).await? else {
        // settled
        finish(myself);
        return Ok(());
    };
    let fence = match coordinator.seat_fence(&run.record.seat).await {
        Ok(fence) => fence,
        Err(error) => {
            // the seat is another node's now: its recovery drives the run
            warn!(turn_id, %error, "run_driver_stopped");
            finish(myself);
            return Ok(());
        }
    };
    match run.record.status {
        Status::Ending => {
            if let Err(error) = coordinator.finish_ending(&fence, turn_id).await {
                warn!(turn_id, %error, "sandbox_ending_kept");
                come_back(state, ENDING_RETRY, RunMsg::Check);
                finish(myself);
                return Ok(());
            }
            // the seat's mail waited behind the ending: it flows again
            coordinator.pump(&fence.seat).await;
        }
        Status::Answered => {
            coordinator.drive_answer(&fence, turn_id).await?;
            let still = coordinator.runs.read(turn_id).await?;
            if still.is_some_and(|run| run.record.status == Status::Answered) {
                // the answer waits for its seat: its recheck is queued here
                return Ok(());
            }
        }
        _ => {}
    }
    // nothing more is owed from here: the next failure starts the driver again
    finish(myself);
    Ok(())
}
