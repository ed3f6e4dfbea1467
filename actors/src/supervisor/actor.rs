//! The supervisor actor ([`Supervisor`]) and what it is asked ([`SupervisorMsg`]): ractor
//! links a child to its parent and reports how the child ended ([`SupervisionEvent`]); this
//! actor hands each event to its [`SupervisorState`], which decides. Also here:
//! [`ChildSpec::supervisor`], a nested supervisor as a child.

use futures::FutureExt;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::policy::{Exit, Restart, Shutdown};
use super::report::ChildReport;
use super::restart::SupervisorState;
use super::spec::{ChildSpec, SupervisorArgs};

/// What a [`Supervisor`] is asked. Refusals travel in the replies, as text.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Start a child after the existing ones. Refused when a running child has the name; a
    /// stopped or failed child of that name is replaced.
    StartChild(ChildSpec, RpcReplyPort<Result<ActorCell, String>>),
    /// Stop a child (within its [`Shutdown`]) and forget it. Refused for an unknown name.
    TerminateChild(String, RpcReplyPort<Result<(), String>>),
    /// Report every child, in start order.
    Inspect(RpcReplyPort<Vec<ChildReport>>),
}

/// The supervisor behaviour; its [`SupervisorState`] is built in `pre_start` from
/// [`SupervisorArgs`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Supervisor;

impl ChildSpec {
    /// A nested [`Supervisor`] as a child; it is waited for without a bound on shutdown, since it
    /// bounds the shutdown of each of its own children.
    pub fn supervisor(name: impl Into<String>, restart: Restart, args: SupervisorArgs) -> Self {
        let name = name.into();
        let actor_name = name.clone();
        let mut spec = Self::new(name, restart, move |supervisor| {
            Supervisor::spawn_linked(
                Some(actor_name.clone()),
                Supervisor,
                args.clone(),
                supervisor,
            )
            .map(|spawned| spawned.map(|(actor_ref, _join)| actor_ref.get_cell()))
        });
        spec.supervisor = true;
        spec.shutdown = Shutdown::Infinity;
        spec
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    /// Starts the children in order; the first that fails to start stops the ones already
    /// started (reverse order) and fails this supervisor's spawn.
    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let SupervisorArgs {
            strategy,
            intensity,
            children,
        } = args;
        let mut state = SupervisorState::new(
            myself
                .get_name()
                .unwrap_or_else(|| myself.get_id().to_string()),
            strategy,
            intensity,
            children.len(),
        );
        state.start_in_order(&myself.get_cell(), children).await?;
        Ok(state)
    }

    /// A normal stop shuts the children down in reverse order. (ractor skips `post_stop` when
    /// the supervisor is killed or fails; it then kills the children itself, in no order.)
    async fn post_stop(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        state.shut_down_all().await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::StartChild(spec, reply) => {
                let started = state.start_child(&myself.get_cell(), spec).await;
                let _ = reply.send(started);
            }
            SupervisorMsg::TerminateChild(name, reply) => {
                let terminated = state.terminate_child(&name).await;
                let _ = reply.send(terminated);
            }
            SupervisorMsg::Inspect(reply) => {
                let _ = reply.send(state.reports());
            }
        }
        Ok(())
    }

    /// Returns `Err` only when the restart intensity is exceeded: that is the escalation.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, exit)) = Exit::of(event) else {
            return Ok(());
        };
        // no match: an instance already shut down, replaced or terminated by this supervisor
        let Some(index) = state.position_by_id(cell.get_id()) else {
            return Ok(());
        };
        state.on_child_exit(&myself.get_cell(), index, exit).await
    }
}
