//! The node's tree as the lifecycle sees it: [`NodeTree`] carries out what a lifecycle step
//! leaves to the node's actors ([`FollowUps`]) — a seat's actor started or stopped, a run's
//! driver poked, a box operation put through that box's actor — starting each actor under its
//! supervisor when it is not running.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use ractor::{ActorRef, MessagingErr};
use tracing::warn;

use crate::boxes::{BoxArgs, BoxMsg, BoxOp, BoxReply};
use crate::lifecycle::{AnswerRetry, Coordinator, FollowUps};
use crate::names::NodeRefs;
use crate::ports::Provider;
use crate::run::{RunActor, RunArgs, RunMsg};
use crate::seat::{SeatActor, SeatArgs, SeatMsg};
use crate::supervisor::{self, ChildSpec, Restart, SupervisorMsg};

/// How many times a message for a run's driver meets one that is finishing before it is
/// given up (each time, the finishing driver is waited out and a new one started).
const DRIVER_STARTS: usize = 3;
/// How long a finishing driver is waited for before a new one is tried.
const DRIVER_EXIT_WAIT: Duration = Duration::from_secs(2);

/// The follow-ups of one node's lifecycle, carried out by its actors.
#[derive(Debug)]
pub struct NodeTree {
    /// the lifecycle the seat and run actors drive (weak: the lifecycle holds this tree)
    coordinator: Weak<Coordinator>,
    refs: NodeRefs,
}

impl NodeTree {
    pub fn new(coordinator: Weak<Coordinator>, refs: NodeRefs) -> Self {
        NodeTree { coordinator, refs }
    }

    /// The actor `name`, started under the supervisor `under` when it is not running.
    /// `None` outside a running tree, or when it could not start (a concurrent start of the
    /// same name is refused: whichever runs is returned).
    async fn child<A>(
        &self,
        under: &str,
        (kind, id): (&str, &str),
        name: String,
        restart: Restart,
        make: impl Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    ) -> Option<ActorRef<A::Msg>>
    where
        A: ractor::Actor,
    {
        if let Some(actor) = ActorRef::<A::Msg>::where_is(name.clone()) {
            return Some(actor);
        }
        let supervisor = ActorRef::<SupervisorMsg>::where_is(under)?;
        let spec = ChildSpec::worker(name.clone(), restart, make);
        if let Err(error) = supervisor::start_child(&supervisor, spec).await {
            warn!(kind, id, %error, "child_not_started");
        }
        ActorRef::<A::Msg>::where_is(name)
    }

    /// Pokes the run's driver (`{node}/run/{turn}`), starting it under the node's `runs`
    /// supervisor when it is not running. A driver that is finishing (draining its mailbox)
    /// refuses the message: once it is gone, a new one is started for it.
    async fn drive(&self, turn_id: &str, mut message: RunMsg) {
        let Some(coordinator) = self.coordinator.upgrade() else {
            return;
        };
        let args = RunArgs {
            coordinator,
            turn_id: turn_id.to_owned(),
            started: Default::default(),
        };
        for _ in 0..DRIVER_STARTS {
            let make = {
                let args = args.clone();
                move || (RunActor, args.clone())
            };
            let driver = self
                .child(
                    &self.refs.runs(),
                    ("run", turn_id),
                    self.refs.run(turn_id),
                    Restart::Transient,
                    make,
                )
                .await;
            let Some(actor) = driver else {
                warn!(turn_id, "run_driver_not_started");
                return;
            };
            match actor.cast(message) {
                Ok(()) => return,
                Err(MessagingErr::SendErr(refused)) => {
                    message = refused;
                    let _ = actor.wait(Some(DRIVER_EXIT_WAIT)).await;
                }
                Err(error) => {
                    warn!(turn_id, %error, "run_driver_refused");
                    return;
                }
            }
        }
        warn!(turn_id, "run_driver_not_started");
    }
}

#[async_trait]
impl FollowUps for NodeTree {
    async fn seat_acquired(&self, seat: &str) {
        let Some(coordinator) = self.coordinator.upgrade() else {
            return;
        };
        let args = SeatArgs {
            coordinator,
            seat: seat.to_owned(),
            started: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        let actor = self
            .child(
                &self.refs.seats(),
                ("seat", seat),
                self.refs.seat(seat),
                Restart::Transient,
                move || (SeatActor, args.clone()),
            )
            .await;
        // an actor still running from before the seat was lost and taken back pumps nothing
        // on its own: the mail that waited while the seat was away flows now (a new actor
        // pumps once more as it starts, which finds nothing)
        if let Some(actor) = actor {
            let _ = actor.cast(SeatMsg::Pump);
        }
    }

    fn seat_released(&self, seat: &str) {
        if let Some(actor) = ActorRef::<SeatMsg>::where_is(self.refs.seat(seat)) {
            actor.stop(Some("seat released".into()));
        }
    }

    async fn check_run(&self, turn_id: &str) {
        self.drive(turn_id, RunMsg::Check).await;
    }

    async fn keep_ending(&self, turn_id: &str, ending: crate::lifecycle::KeptEnding) {
        self.drive(turn_id, RunMsg::DecideEnding(Box::new(ending)))
            .await;
    }

    async fn hand_back_claim(&self, turn_id: &str, launch_id: &str) {
        let launch_id = launch_id.to_owned();
        self.drive(turn_id, RunMsg::HandBackClaim { launch_id })
            .await;
    }

    async fn answer_resume_failed(&self, seat: &str, turn_id: &str, retry: AnswerRetry) {
        match retry {
            AnswerRetry::After(delay) => {
                self.drive(turn_id, RunMsg::RetryAnswer { delay }).await;
            }
            AnswerRetry::LetGo { attempts } => {
                // off the driver: a driver started for it would first re-read the run, find
                // the answer owed and resume it once more
                let Some(coordinator) = self.coordinator.upgrade() else {
                    return;
                };
                let (seat, turn_id) = (seat.to_owned(), turn_id.to_owned());
                tokio::spawn(async move {
                    coordinator.let_answer_go(&seat, &turn_id, attempts).await;
                });
            }
        }
    }

    async fn box_op(&self, provider: &Arc<dyn Provider>, sandbox_id: &str, op: BoxOp) -> BoxReply {
        let args = BoxArgs {
            provider: provider.clone(),
            sandbox_id: sandbox_id.to_owned(),
        };
        let actor = self
            .child(
                &self.refs.boxes(),
                ("box", sandbox_id),
                self.refs.sandbox(sandbox_id),
                Restart::Temporary,
                move || (crate::boxes::BoxActor, args.clone()),
            )
            .await;
        let Some(actor) = actor else {
            return crate::boxes::run(provider, sandbox_id, op).await;
        };
        match actor
            .call(
                |reply| BoxMsg::Do(op, reply),
                Some(crate::boxes::OP_BOUND * 2),
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            // the actor stopped under us (idle, or the box was killed): do it directly
            _ => crate::boxes::run(provider, sandbox_id, op).await,
        }
    }
}
