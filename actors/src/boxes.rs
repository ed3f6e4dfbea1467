//! `Box{sandbox_id}`: one actor per live box this node works with, under the node's `boxes`
//! supervisor. Every control operation on a box — attach (never wakes), connect (resumes),
//! pause, kill — goes through its actor, so operations on one box never interleave: a poll's
//! attach cannot land between a collection's read and its pause, and a kill cannot race a
//! connect. An actor idle for a minute stops; the next operation starts it again.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::time::Instant;

use crate::ports::{BoxError, Provider, Sandbox};

/// A box actor idle this long stops.
pub const IDLE: Duration = Duration::from_secs(60);
/// One box operation's bound (the control plane's whole-request budget).
pub const OP_BOUND: Duration = Duration::from_secs(60);

/// A control operation on a box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoxOp {
    /// Reach it without waking it.
    Attach,
    /// Reach it, resuming it if paused.
    Connect,
    /// Pause it (its jobs stop; its files stay).
    Pause,
    /// Destroy it; gone is success.
    Kill,
}

pub type BoxReply = Result<Option<Arc<dyn Sandbox>>, BoxError>;

#[derive(Debug)]
pub enum BoxMsg {
    Do(BoxOp, RpcReplyPort<BoxReply>),
    IdleCheck,
}

/// One box's actor.
#[derive(Debug)]
pub struct BoxActor;

#[derive(Debug, Clone)]
pub struct BoxArgs {
    pub provider: Arc<dyn Provider>,
    pub sandbox_id: String,
}

#[derive(Debug)]
pub struct BoxState {
    args: BoxArgs,
    last_used: Instant,
}

impl Actor for BoxActor {
    type Msg = BoxMsg;
    type State = BoxState;
    type Arguments = BoxArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: BoxArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(IDLE / 2, || BoxMsg::IdleCheck);
        Ok(BoxState {
            args,
            last_used: Instant::now(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BoxMsg::IdleCheck => {
                if state.last_used.elapsed() >= IDLE {
                    myself.stop(Some("idle".into()));
                }
            }
            BoxMsg::Do(op, reply) => {
                state.last_used = Instant::now();
                let args = &state.args;
                let result =
                    tokio::time::timeout(OP_BOUND, run(&args.provider, &args.sandbox_id, op))
                        .await
                        .unwrap_or_else(|_| {
                            Err(BoxError::Unreachable(format!(
                                "{op:?} on box {} did not answer within {OP_BOUND:?}",
                                state.args.sandbox_id
                            )))
                        });
                let gone = op == BoxOp::Kill && result.is_ok();
                let _ = reply.send(result);
                if gone {
                    myself.stop(Some("box killed".into()));
                }
            }
        }
        Ok(())
    }
}

/// Performs one operation on box `id` against its provider.
pub async fn run(provider: &Arc<dyn Provider>, id: &str, op: BoxOp) -> BoxReply {
    match op {
        BoxOp::Attach => provider.attach(id).await.map(Some),
        BoxOp::Connect => provider.connect(id).await.map(Some),
        BoxOp::Pause => {
            let sandbox = provider.attach(id).await?;
            sandbox.pause().await?;
            Ok(None)
        }
        BoxOp::Kill => provider.kill(id).await.map(|()| None),
    }
}
