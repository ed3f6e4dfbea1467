//! `Seat{handle}`: one actor per seat this node holds, under the node's `seats` supervisor.
//!
//! The seat's work (launches, the inbox, answers) is serialized by the lifecycle's per-seat
//! locks on its holder; the actor is the seat's place in the tree. It pumps the seat's inbox when told, and
//! a restart re-runs the seat's recovery pass, so a seat actor that failed reads its truth
//! again from the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tracing::info;

use crate::lifecycle::Coordinator;

/// A seat held by this node.
#[derive(Debug)]
pub struct SeatActor;

#[derive(Debug, Clone)]
pub struct SeatArgs {
    pub coordinator: Arc<Coordinator>,
    pub seat: String,
    /// set once the first instance started: every later start is a restart
    pub started: Arc<AtomicBool>,
}

#[derive(Debug)]
pub enum SeatMsg {
    /// Work the inbox while nothing holds the seat.
    Pump,
}

impl Actor for SeatActor {
    type Msg = SeatMsg;
    type State = SeatArgs;
    type Arguments = SeatArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SeatArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        if args.started.swap(true, Ordering::SeqCst) {
            // a restart: the seat's truth is the store's; recover it again
            info!(seat = %args.seat, "seat_recovered_after_restart");
            if let Err(error) = args.coordinator.recover_held(&args.seat).await {
                // the store cannot be read now: this node stops acting for the seat until a
                // recovery pass succeeds (the placement pass and the next pump both re-run it,
                // re-acquiring on this node's own lease), rather than failing into a restart
                // loop that would take the node down
                tracing::warn!(seat = %args.seat, %error, "seat_recovery_failed");
                args.coordinator.lose_seat(&args.seat);
            }
        }
        let _ = myself.cast(SeatMsg::Pump);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        SeatMsg::Pump: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // boxed: the pump's future (a launch, an answer, a resume, all inlined) is some 18 KiB,
        // and an actor's message loop is one future that lives as long as the actor: unboxed,
        // every seat held kept that much resident while idle (issue 20's scale bench)
        Box::pin(state.coordinator.pump(&state.seat)).await;
        Ok(())
    }
}
