//! The one supervisor type of a node's actor tree, with OTP semantics (DESIGN §7).
//!
//! ractor links a child to its parent (`spawn_linked`) and tells the parent how the child
//! ended ([`SupervisionEvent`](ractor::SupervisionEvent)), but decides nothing. [`Supervisor`]
//! decides:
//!
//! - strategy ([`Strategy`]): `one_for_one` restarts only the child that exited; `rest_for_one`
//!   also stops, in reverse start order, every running child started after it, then starts them
//!   again in start order;
//! - per child ([`Restart`]): `permanent` children are always restarted, `transient` ones only
//!   after an abnormal exit (a panic, an `Err` from a handler, a kill), `temporary` ones never;
//! - intensity ([`Intensity`]): more than `max_restarts` restarts inside `period` and the
//!   supervisor stops all its children (reverse order) and fails, so that *its* supervisor sees
//!   `ActorFailed` and applies its own policy (escalation);
//! - children start in order (a child that fails to start fails the supervisor's start) and stop
//!   in reverse order, each bounded by its [`Shutdown`].
//!
//! A child is a [`ChildSpec`]: a name plus a start function that spawns any ractor actor linked
//! to the supervisor, called again on every restart. Children can be added and removed at run
//! time ([`SupervisorMsg::StartChild`], [`SupervisorMsg::TerminateChild`]) since seats and runs
//! come and go. Every supervisor reports its children ([`SupervisorMsg::Inspect`]); [`tree`] walks
//! nested supervisors into the [`ActorTree`] that `Ops.Tree` serves.
//!
//! Names: the supervisor registers nothing of its own. Every actor name (the supervisor's and
//! each child's) comes from the caller, who namespaces it by node (`{node}/…`) so several nodes
//! can share one process; ractor's registry is process-global.
//!
//! Layout, each file using only those above it:
//! - `policy`: [`Strategy`], [`Restart`], [`Shutdown`], and how a child ended (`Exit`);
//! - `intensity`: the restart budget [`Intensity`] and its sliding window;
//! - `spec`: [`ChildSpec`] and [`SupervisorArgs`];
//! - `report`: [`ChildReport`] and [`ChildState`];
//! - `restart`: [`SupervisorState`], the restart machinery;
//! - `actor`: the [`Supervisor`] actor and its [`SupervisorMsg`];
//! - `client`: the request helpers ([`start_child`], [`terminate_child`], [`inspect`]) and
//!   their [`Error`];
//! - `tree`: the walk into an [`ActorTree`];
//! - `tests`: the supervisor's behaviour end to end.

mod actor;
mod client;
mod intensity;
mod policy;
mod report;
mod restart;
mod spec;
mod tree;

pub use actor::{Supervisor, SupervisorMsg};
pub use client::{CALL_TIMEOUT, Error, INSPECT_TIMEOUT, inspect, start_child, terminate_child};
pub use intensity::Intensity;
pub use policy::{Restart, Shutdown, Strategy};
pub use report::{ChildReport, ChildState};
pub use restart::{MAX_EXITED_TEMPORARY, SupervisorState};
pub use spec::{ChildSpec, StartFn, StartFuture, SupervisorArgs};
pub use tree::{ActorTree, ActorTreeNode, tree};

#[cfg(test)]
mod tests;
