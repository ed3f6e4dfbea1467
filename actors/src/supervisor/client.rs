//! Asking a running supervisor: [`start_child`], [`terminate_child`] and [`inspect`] send a
//! [`SupervisorMsg`] and wait a bounded time for its reply; a missing answer and a refusal come
//! back as the two kinds of [`Error`].

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorCell, ActorRef, RpcReplyPort};

use super::actor::SupervisorMsg;
use super::report::ChildReport;
use super::spec::ChildSpec;

/// How long [`start_child`] and [`terminate_child`] wait for the supervisor's answer. Generous:
/// the answer waits on a child's `pre_start` or on its shutdown.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`inspect`] (and each level of [`tree`](super::tree)) waits for a supervisor's report.
pub const INSPECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a [`SupervisorMsg`] request failed, as seen by the helpers below.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The supervisor is gone or did not answer in time; retry once it is restarted.
    #[error("supervisor {supervisor} did not answer: {detail}")]
    Unreachable { supervisor: String, detail: String },
    /// The supervisor answered with a refusal.
    #[error("supervisor {supervisor} refused: {reason}")]
    Refused { supervisor: String, reason: String },
}

pub(super) fn supervisor_name(supervisor: &ActorRef<SupervisorMsg>) -> String {
    supervisor
        .get_name()
        .unwrap_or_else(|| supervisor.get_id().to_string())
}

/// Sends a request and waits at most `timeout` for its reply.
async fn request<T, F>(
    supervisor: &ActorRef<SupervisorMsg>,
    build: F,
    timeout: Duration,
) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce(RpcReplyPort<T>) -> SupervisorMsg,
{
    let unreachable = |detail: String| Error::Unreachable {
        supervisor: supervisor_name(supervisor),
        detail,
    };
    match supervisor.call(build, Some(timeout)).await {
        Ok(CallResult::Success(reply)) => Ok(reply),
        Ok(CallResult::Timeout) => Err(unreachable(format!("no answer within {timeout:?}"))),
        Ok(CallResult::SenderError) => Err(unreachable("it dropped the request".to_string())),
        Err(err) => Err(unreachable(err.to_string())),
    }
}

/// Asks `supervisor` to start `spec` as a new child.
pub async fn start_child(
    supervisor: &ActorRef<SupervisorMsg>,
    spec: ChildSpec,
) -> Result<ActorCell, Error> {
    request(
        supervisor,
        |reply| SupervisorMsg::StartChild(spec, reply),
        CALL_TIMEOUT,
    )
    .await?
    .map_err(|reason| Error::Refused {
        supervisor: supervisor_name(supervisor),
        reason,
    })
}

/// Asks `supervisor` to stop the child `name` and forget it.
pub async fn terminate_child(
    supervisor: &ActorRef<SupervisorMsg>,
    name: &str,
) -> Result<(), Error> {
    let name = name.to_string();
    request(
        supervisor,
        |reply| SupervisorMsg::TerminateChild(name, reply),
        CALL_TIMEOUT,
    )
    .await?
    .map_err(|reason| Error::Refused {
        supervisor: supervisor_name(supervisor),
        reason,
    })
}

/// `supervisor`'s children, in start order.
pub async fn inspect(supervisor: &ActorRef<SupervisorMsg>) -> Result<Vec<ChildReport>, Error> {
    request(supervisor, SupervisorMsg::Inspect, INSPECT_TIMEOUT).await
}
