//! What a supervisor says of each child ([`ChildReport`], with its [`ChildState`]), as
//! [`SupervisorMsg::Inspect`](super::SupervisorMsg::Inspect) answers and `Ops.Tree` serves.

use ractor::ActorCell;
use serde::Serialize;

use super::policy::Restart;

/// A child's lifecycle as its supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    Running,
    /// exited; its restart is under way (a failed restart attempt is retried until the
    /// intensity runs out)
    Restarting,
    /// stopped normally (or shut down by its supervisor) and not restarted
    Stopped,
    /// exited abnormally and not restarted
    Failed,
}

/// One child, as [`SupervisorMsg::Inspect`](super::SupervisorMsg::Inspect) reports it.
#[derive(Debug, Clone, Serialize)]
pub struct ChildReport {
    pub name: String,
    pub state: ChildState,
    pub restart: Restart,
    /// the child is a [`Supervisor`](super::Supervisor)
    pub supervisor: bool,
    /// restarts since the child was added, including restarts with a `rest_for_one` sibling
    pub restart_count: u32,
    /// the last abnormal exit or failed start
    pub last_error: Option<String>,
    /// Always 0: ractor 0.16 exposes no queue length (its mailbox is an unbounded tokio channel
    /// behind a crate-private field).
    pub mailbox_depth: u64,
    /// the running instance's id; a restart changes it
    pub actor_id: Option<String>,
    /// the running instance, for callers in the process (not serialized)
    #[serde(skip)]
    pub cell: Option<ActorCell>,
}
