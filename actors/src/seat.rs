//! `Seat{handle}`: one actor per seat this node holds, under the node's `seats` supervisor.
//!
//! The seat's work (launches, the inbox, answers) is serialized by the lifecycle's per-seat
//! locks on its holder; the actor is the seat's place in the tree. It pumps the seat's inbox when told, and
//! a restart re-runs the seat's recovery pass, so a seat actor that failed reads its truth
//! again from the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef};

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
            // a restart: the recovery pass again
            args.coordinator.recover_after_restart(&args.seat).await;
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
