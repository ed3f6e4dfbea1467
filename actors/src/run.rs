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
                myself.send_after(delay, || RunMsg::Check);
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
                    Ok(LostClaim::HandedBack | LostClaim::NotOwed) => {
                        myself.stop(Some("claim handed back".into()));
                    }
                    Ok(LostClaim::Later) => {
                        myself.send_after(DECISION_RETRY, move || RunMsg::HandBackClaim {
                            launch_id,
                        });
                    }
                    Err(error) => {
                        warn!(turn_id, %error, "sandbox_claim_hand_back_kept");
                        myself.send_after(DECISION_RETRY, move || RunMsg::HandBackClaim {
                            launch_id,
                        });
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
                        myself.stop(Some("seat not held".into()));
                        return Ok(());
                    }
                };
                match coordinator.end_run_kept(&fence, turn_id, &ending).await {
                    // the seat's mail waited behind the ending: it flows again
                    Ok(true) => coordinator.pump(&fence.seat).await,
                    Ok(false) => warn!(turn_id, "sandbox_ending_declined"),
                    Err(error) => {
                        warn!(turn_id, %error, "sandbox_ending_decision_kept");
                        myself.send_after(DECISION_RETRY, move || RunMsg::DecideEnding(ending));
                        return Ok(());
                    }
                }
                myself.stop(Some("ending decided".into()));
            }
            RunMsg::Check => {
                let coordinator = &state.coordinator;
                let turn_id = &state.turn_id;
                let Some(run) = coordinator.runs.read(turn_id).await? else {
                    myself.stop(Some("run settled".into()));
                    return Ok(());
                };
                let fence = match coordinator.seat_fence(&run.record.seat).await {
                    Ok(fence) => fence,
                    Err(error) => {
                        // the seat is another node's now: its recovery drives the run
                        warn!(turn_id, %error, "run_driver_stopped");
                        myself.stop(Some("seat not held".into()));
                        return Ok(());
                    }
                };
                match run.record.status {
                    Status::Ending => {
                        if let Err(error) = coordinator.finish_ending(&fence, turn_id).await {
                            warn!(turn_id, %error, "sandbox_ending_kept");
                            myself.send_after(ENDING_RETRY, || RunMsg::Check);
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
                myself.stop(Some("nothing owed".into()));
            }
        }
        Ok(())
    }
}
