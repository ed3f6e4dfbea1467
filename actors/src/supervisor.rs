//! The one supervisor type of a node's actor tree, with OTP semantics (DESIGN §7).
//!
//! ractor links a child to its parent (`spawn_linked`) and tells the parent how the child
//! ended ([`SupervisionEvent`]), but decides nothing. [`Supervisor`] decides:
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
//! Layout: policy types → [`ChildSpec`] / [`SupervisorArgs`] → messages and reports → the actor
//! → the restart machinery (`SupervisorState`) → request helpers and [`tree`] → tests.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use ractor::rpc::CallResult;
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, ActorStatus, RactorErr, RpcReplyPort,
    SpawnErr, SupervisionEvent,
};
use serde::Serialize;
use tokio::time::Instant;

/// How long [`start_child`] and [`terminate_child`] wait for the supervisor's answer. Generous:
/// the answer waits on a child's `pre_start` or on its shutdown.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`inspect`] (and each level of [`tree`]) waits for a supervisor's report.
pub const INSPECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How many exited temporary children a supervisor keeps in its reports before it forgets the
/// oldest: enough to see why recent runs ended, bounded because runs never come back.
pub const MAX_EXITED_TEMPORARY: usize = 32;

/// The stop reason a supervisor gives the children it shuts down.
const SHUTDOWN_REASON: &str = "shutdown";

/// How long a child that ignored its stop is given to die after being killed.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Which children go down with one that exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Restart only the child that exited.
    OneForOne,
    /// Restart the child that exited and every running child started after it.
    RestForOne,
}

/// When a child that exited is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Restart {
    /// Always, whatever the exit.
    Permanent,
    /// Only after an abnormal exit (panic, `Err` from a handler, kill); a normal stop is final.
    Transient,
    /// Never.
    Temporary,
}

impl Restart {
    fn restarts_after(self, exit: &Exit) -> bool {
        match self {
            Self::Permanent => true,
            Self::Transient => matches!(exit, Exit::Abnormal(_)),
            Self::Temporary => false,
        }
    }
}

/// The restart budget: at most `max_restarts` restarts within any `period`. One more and the
/// supervisor gives up and escalates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intensity {
    pub max_restarts: u32,
    pub period: Duration,
}

impl Default for Intensity {
    /// 5 restarts in 10 s.
    fn default() -> Self {
        Self {
            max_restarts: 5,
            period: Duration::from_secs(10),
        }
    }
}

/// How a child is stopped when its supervisor shuts it down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Ask it to stop; kill it if it has not stopped within the duration (workers).
    Timeout(Duration),
    /// Ask it to stop and wait as long as it takes (supervisors, which bound their own children).
    Infinity,
}

impl Default for Shutdown {
    /// 5 s, then a kill.
    fn default() -> Self {
        Self::Timeout(Duration::from_secs(5))
    }
}

/// What a start function returns: the started child, linked to the supervisor.
pub type StartFuture = BoxFuture<'static, Result<ActorCell, SpawnErr>>;

/// Spawns a child linked to the supervisor it is given; called once per (re)start.
pub type StartFn = Arc<dyn Fn(ActorCell) -> StartFuture + Send + Sync>;

/// One child of a supervisor: how to start it and when to start it again.
#[derive(Clone)]
pub struct ChildSpec {
    /// the child's actor name, unique within its supervisor and namespaced by node by the caller
    pub name: String,
    pub restart: Restart,
    pub shutdown: Shutdown,
    /// the child is itself a [`Supervisor`]: [`tree`] inspects it recursively
    pub supervisor: bool,
    /// must spawn the child linked to the given supervisor (`Actor::spawn_linked`), named `name`
    pub start: StartFn,
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("name", &self.name)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .field("supervisor", &self.supervisor)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// A child started by `start`, which must spawn it linked to the supervisor it is given; a
    /// child that is not linked is killed and its start counts as failed.
    pub fn new<F, Fut>(name: impl Into<String>, restart: Restart, start: F) -> Self
    where
        F: Fn(ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        Self {
            name: name.into(),
            restart,
            shutdown: Shutdown::default(),
            supervisor: false,
            start: Arc::new(move |supervisor| start(supervisor).boxed()),
        }
    }

    /// A ractor actor as a child, spawned as `name` with what `make` builds (called again on
    /// every restart, so each start gets fresh arguments).
    pub fn worker<A, F>(name: impl Into<String>, restart: Restart, make: F) -> Self
    where
        A: Actor,
        F: Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    {
        let name = name.into();
        let actor_name = name.clone();
        Self::new(name, restart, move |supervisor| {
            let (actor, args) = make();
            A::spawn_linked(Some(actor_name.clone()), actor, args, supervisor)
                .map(|spawned| spawned.map(|(actor_ref, _join)| actor_ref.get_cell()))
        })
    }

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

    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }
}

/// What a [`Supervisor`] is spawned with.
#[derive(Debug, Clone)]
pub struct SupervisorArgs {
    pub strategy: Strategy,
    pub intensity: Intensity,
    /// started in this order, stopped in the reverse
    pub children: Vec<ChildSpec>,
}

impl SupervisorArgs {
    /// No children yet, the default [`Intensity`].
    pub fn new(strategy: Strategy) -> Self {
        Self {
            strategy,
            intensity: Intensity::default(),
            children: Vec::new(),
        }
    }

    pub fn with_intensity(mut self, max_restarts: u32, period: Duration) -> Self {
        self.intensity = Intensity {
            max_restarts,
            period,
        };
        self
    }

    pub fn with_child(mut self, child: ChildSpec) -> Self {
        self.children.push(child);
        self
    }
}

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

/// One child, as [`SupervisorMsg::Inspect`] reports it.
#[derive(Debug, Clone, Serialize)]
pub struct ChildReport {
    pub name: String,
    pub state: ChildState,
    pub restart: Restart,
    /// the child is a [`Supervisor`]
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

/// A supervisor and everything under it, nested supervisors expanded.
#[derive(Debug, Clone, Serialize)]
pub struct ActorTree {
    /// the supervisor's actor name (its id when unnamed)
    pub name: String,
    pub children: Vec<ActorTreeNode>,
    /// why this supervisor's children are missing: it did not answer [`SupervisorMsg::Inspect`]
    pub inspect_error: Option<String>,
}

/// One child in an [`ActorTree`].
#[derive(Debug, Clone, Serialize)]
pub struct ActorTreeNode {
    #[serde(flatten)]
    pub report: ChildReport,
    /// the child's own tree, when it is a running supervisor
    pub subtree: Option<ActorTree>,
}

impl ActorTree {
    /// The report of the child named `name`, anywhere in the tree.
    pub fn find(&self, name: &str) -> Option<&ChildReport> {
        self.children.iter().find_map(|node| {
            if node.report.name == name {
                Some(&node.report)
            } else {
                node.subtree.as_ref().and_then(|tree| tree.find(name))
            }
        })
    }

    /// The subtree of the supervisor child named `name`, anywhere in the tree.
    pub fn subtree(&self, name: &str) -> Option<&ActorTree> {
        self.children.iter().find_map(|node| {
            let subtree = node.subtree.as_ref()?;
            if node.report.name == name {
                Some(subtree)
            } else {
                subtree.subtree(name)
            }
        })
    }
}

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

/// The supervisor behaviour; its [`SupervisorState`] is built in `pre_start` from
/// [`SupervisorArgs`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Supervisor;

/// A running supervisor's children and restart history.
#[derive(Debug)]
pub struct SupervisorState {
    /// for logs: the supervisor's actor name
    name: String,
    strategy: Strategy,
    intensity: Intensity,
    /// in start order
    children: Vec<Child>,
    /// instants of the restarts still inside the intensity period, oldest first
    restarts: VecDeque<Instant>,
}

#[derive(Debug)]
struct Child {
    spec: ChildSpec,
    /// the running instance; `None` once it exited or was shut down, so that its late exit
    /// event matches no child and is ignored
    cell: Option<ActorCell>,
    state: ChildState,
    restart_count: u32,
    last_error: Option<String>,
}

impl Child {
    fn running(spec: ChildSpec, cell: ActorCell) -> Self {
        Self {
            spec,
            cell: Some(cell),
            state: ChildState::Running,
            restart_count: 0,
            last_error: None,
        }
    }

    fn report(&self) -> ChildReport {
        ChildReport {
            name: self.spec.name.clone(),
            state: self.state,
            restart: self.spec.restart,
            supervisor: self.spec.supervisor,
            restart_count: self.restart_count,
            last_error: self.last_error.clone(),
            mailbox_depth: 0,
            actor_id: self.cell.as_ref().map(|cell| cell.get_id().to_string()),
            cell: self.cell.clone(),
        }
    }

    fn is_exited_temporary(&self) -> bool {
        self.spec.restart == Restart::Temporary && self.cell.is_none()
    }
}

/// How a child ended.
#[derive(Debug)]
enum Exit {
    /// stopped by itself or by a stop request
    Normal,
    /// panicked, returned `Err` from a handler, or was killed
    Abnormal(String),
}

impl Exit {
    fn of(event: SupervisionEvent) -> Option<(ActorCell, Self)> {
        match event {
            SupervisionEvent::ActorFailed(cell, err) => {
                Some((cell, Self::Abnormal(err.to_string())))
            }
            // ractor reports a kill (and a runtime that dropped the actor's task) as a
            // termination; only these reason texts tell it from a stop
            SupervisionEvent::ActorTerminated(cell, _state, reason) => {
                let exit = match reason {
                    Some(reason) if reason == "killed" || reason == "actor_task_cancelled" => {
                        Self::Abnormal(reason)
                    }
                    _ => Self::Normal,
                };
                Some((cell, exit))
            }
            _ => None,
        }
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
        let mut state = SupervisorState {
            name: myself
                .get_name()
                .unwrap_or_else(|| myself.get_id().to_string()),
            strategy,
            intensity,
            children: Vec::with_capacity(children.len()),
            restarts: VecDeque::new(),
        };
        for spec in children {
            let started = if state.position_by_name(&spec.name).is_some() {
                Err(format!("two children are named {}", spec.name))
            } else {
                start(&myself.get_cell(), &spec).await
            };
            match started {
                Ok(cell) => state.children.push(Child::running(spec, cell)),
                Err(err) => {
                    state.shut_down_all().await;
                    return Err(format!("start child {}: {err}", spec.name).into());
                }
            }
        }
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
                let _ = reply.send(state.children.iter().map(Child::report).collect());
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

impl SupervisorState {
    fn position_by_id(&self, id: ActorId) -> Option<usize> {
        self.children
            .iter()
            .position(|child| child.cell.as_ref().is_some_and(|cell| cell.get_id() == id))
    }

    fn position_by_name(&self, name: &str) -> Option<usize> {
        self.children
            .iter()
            .position(|child| child.spec.name == name)
    }

    async fn start_child(
        &mut self,
        myself: &ActorCell,
        spec: ChildSpec,
    ) -> Result<ActorCell, String> {
        let existing = self.position_by_name(&spec.name);
        if let Some(index) = existing
            && self.children[index].cell.is_some()
        {
            return Err(format!("a child named {} is already running", spec.name));
        }
        let cell = start(myself, &spec).await?;
        let child = Child::running(spec, cell.clone());
        match existing {
            Some(index) => self.children[index] = child,
            None => self.children.push(child),
        }
        Ok(cell)
    }

    async fn terminate_child(&mut self, name: &str) -> Result<(), String> {
        let index = self
            .position_by_name(name)
            .ok_or_else(|| format!("no child named {name}"))?;
        let child = self.children.remove(index);
        if let Some(cell) = child.cell {
            shut_down(&cell, child.spec.shutdown).await;
        }
        Ok(())
    }

    /// The child at `index` exited: record it, then restart whatever the policy says.
    async fn on_child_exit(
        &mut self,
        myself: &ActorCell,
        index: usize,
        exit: Exit,
    ) -> Result<(), ActorProcessingErr> {
        let child = &mut self.children[index];
        child.cell = None;
        let cause = match &exit {
            Exit::Normal => {
                child.state = ChildState::Stopped;
                "stopped normally".to_string()
            }
            Exit::Abnormal(error) => {
                child.state = ChildState::Failed;
                child.last_error = Some(error.clone());
                error.clone()
            }
        };
        if !child.spec.restart.restarts_after(&exit) {
            tracing::info!(
                supervisor = %self.name,
                child = %child.spec.name,
                error = %cause,
                "actor_exited"
            );
            self.forget_old_temporaries();
            return Ok(());
        }
        self.restart(myself, index, &cause).await
    }

    /// Restarts the child at `index` (and under `rest_for_one` the running children after it),
    /// or escalates when the intensity is exceeded.
    async fn restart(
        &mut self,
        myself: &ActorCell,
        index: usize,
        cause: &str,
    ) -> Result<(), ActorProcessingErr> {
        if !self.note_restart() {
            return Err(self.give_up(index, cause).await);
        }
        let mut group = vec![index];
        if self.strategy == Strategy::RestForOne {
            for later in (index + 1..self.children.len()).rev() {
                let child = &mut self.children[later];
                let Some(cell) = child.cell.take() else {
                    continue;
                };
                shut_down(&cell, child.spec.shutdown).await;
                child.state = ChildState::Stopped;
                if child.spec.restart != Restart::Temporary {
                    group.push(later);
                }
            }
            group[1..].reverse();
        }
        for &member in &group {
            self.children[member].state = ChildState::Restarting;
        }
        let failed_name = self.children[index].spec.name.clone();
        for member in group {
            loop {
                let child = &mut self.children[member];
                match start(myself, &child.spec).await {
                    Ok(cell) => {
                        child.cell = Some(cell);
                        child.state = ChildState::Running;
                        child.restart_count += 1;
                        let error = if member == index {
                            cause.to_string()
                        } else {
                            format!("restarted with {failed_name}: {cause}")
                        };
                        tracing::warn!(
                            supervisor = %self.name,
                            child = %child.spec.name,
                            error = %error,
                            restart_count = child.restart_count,
                            "actor_restarted"
                        );
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(
                            supervisor = %self.name,
                            child = %child.spec.name,
                            error = %error,
                            "actor_restart_failed"
                        );
                        child.last_error = Some(format!("restart: {error}"));
                        if !self.note_restart() {
                            return Err(self.give_up(member, &error).await);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Records one restart; false when it is one too many for the intensity.
    fn note_restart(&mut self) -> bool {
        let now = Instant::now();
        self.restarts.push_back(now);
        while self
            .restarts
            .front()
            .is_some_and(|&at| now.duration_since(at) > self.intensity.period)
        {
            self.restarts.pop_front();
        }
        self.restarts.len() <= self.intensity.max_restarts as usize
    }

    /// Stops every child (reverse order) and returns the error that fails this supervisor.
    async fn give_up(&mut self, index: usize, cause: &str) -> ActorProcessingErr {
        let child = self.children[index].spec.name.clone();
        tracing::error!(
            supervisor = %self.name,
            child = %child,
            error = %cause,
            max_restarts = self.intensity.max_restarts,
            period_ms = u64::try_from(self.intensity.period.as_millis()).unwrap_or(u64::MAX),
            "actor_restart_intensity_exceeded"
        );
        self.shut_down_all().await;
        format!(
            "restart intensity exceeded: more than {} restarts in {:?}, last of child {child}: {cause}",
            self.intensity.max_restarts, self.intensity.period
        )
        .into()
    }

    async fn shut_down_all(&mut self) {
        for child in self.children.iter_mut().rev() {
            if let Some(cell) = child.cell.take() {
                shut_down(&cell, child.spec.shutdown).await;
                child.state = ChildState::Stopped;
            }
        }
    }

    fn forget_old_temporaries(&mut self) {
        let exited = self
            .children
            .iter()
            .filter(|child| child.is_exited_temporary())
            .count();
        let mut excess = exited.saturating_sub(MAX_EXITED_TEMPORARY);
        self.children.retain(|child| {
            if excess > 0 && child.is_exited_temporary() {
                excess -= 1;
                false
            } else {
                true
            }
        });
    }
}

/// Runs a child's start function and checks that the child is linked to `supervisor`.
async fn start(supervisor: &ActorCell, spec: &ChildSpec) -> Result<ActorCell, String> {
    let cell = (spec.start)(supervisor.clone())
        .await
        .map_err(|err| err.to_string())?;
    let linked = cell
        .try_get_supervisor()
        .is_some_and(|parent| parent.get_id() == supervisor.get_id());
    // an unlinked child that already stopped may simply have exited (which unlinks it); its
    // exit event reached the supervisor anyway
    if !linked && cell.get_status() < ActorStatus::Stopping {
        cell.kill();
        return Err(format!(
            "the start function of {} did not link the child to its supervisor (use spawn_linked)",
            spec.name
        ));
    }
    Ok(cell)
}

/// Stops a child and waits for it to be gone, killing it past its shutdown bound.
async fn shut_down(cell: &ActorCell, shutdown: Shutdown) {
    let bound = match shutdown {
        Shutdown::Timeout(bound) => Some(bound),
        Shutdown::Infinity => None,
    };
    match cell
        .stop_and_wait(Some(SHUTDOWN_REASON.to_string()), bound)
        .await
    {
        Ok(()) => {}
        Err(RactorErr::Timeout) => {
            tracing::warn!(child = ?cell.get_name(), "actor_shutdown_timed_out");
            let _ = cell.kill_and_wait(Some(KILL_WAIT)).await;
        }
        // its stop port is closed: it is already on its way out
        Err(_) => {
            let _ = cell.wait(Some(bound.unwrap_or(KILL_WAIT))).await;
        }
    }
}

fn supervisor_name(supervisor: &ActorRef<SupervisorMsg>) -> String {
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

/// `supervisor` and every supervisor under it. A supervisor that does not answer is reported
/// with its `inspect_error` instead of children; the walk goes on.
pub async fn tree(supervisor: &ActorRef<SupervisorMsg>) -> ActorTree {
    tree_of(supervisor.clone()).await
}

// boxed: the walk recurses
fn tree_of(supervisor: ActorRef<SupervisorMsg>) -> BoxFuture<'static, ActorTree> {
    async move {
        let name = supervisor_name(&supervisor);
        let reports = match inspect(&supervisor).await {
            Ok(reports) => reports,
            Err(err) => {
                return ActorTree {
                    name,
                    children: Vec::new(),
                    inspect_error: Some(err.to_string()),
                };
            }
        };
        let mut children = Vec::with_capacity(reports.len());
        for report in reports {
            let subtree = match &report.cell {
                Some(cell) if report.supervisor => Some(tree_of(cell.clone().into()).await),
                _ => None,
            };
            children.push(ActorTreeNode { report, subtree });
        }
        ActorTree {
            name,
            children,
            inspect_error: None,
        }
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Shared record of what the probes did, in order: `start:{name}` / `stop:{name}`.
    type Log = Arc<Mutex<Vec<String>>>;

    fn new_log() -> Log {
        Arc::new(Mutex::new(Vec::new()))
    }

    fn entries(log: &Log) -> Vec<String> {
        log.lock().expect("log lock").clone()
    }

    /// A worker that logs its start and normal stop and misbehaves on request.
    struct Probe;

    enum ProbeMsg {
        Panic,
        StopNormally,
    }

    impl Actor for Probe {
        type Msg = ProbeMsg;
        type State = Log;
        type Arguments = Log;

        async fn pre_start(
            &self,
            myself: ActorRef<ProbeMsg>,
            log: Log,
        ) -> Result<Log, ActorProcessingErr> {
            let name = myself.get_name().unwrap_or_default();
            log.lock().expect("log lock").push(format!("start:{name}"));
            Ok(log)
        }

        async fn post_stop(
            &self,
            myself: ActorRef<ProbeMsg>,
            log: &mut Log,
        ) -> Result<(), ActorProcessingErr> {
            let name = myself.get_name().unwrap_or_default();
            log.lock().expect("log lock").push(format!("stop:{name}"));
            Ok(())
        }

        async fn handle(
            &self,
            myself: ActorRef<ProbeMsg>,
            message: ProbeMsg,
            _log: &mut Log,
        ) -> Result<(), ActorProcessingErr> {
            match message {
                ProbeMsg::Panic => panic!("boom"),
                ProbeMsg::StopNormally => myself.stop(None),
            }
            Ok(())
        }
    }

    fn probe(name: &str, restart: Restart, log: &Log) -> ChildSpec {
        let log = log.clone();
        ChildSpec::worker(name, restart, move || (Probe, log.clone()))
    }

    async fn must_spawn(name: &str, args: SupervisorArgs) -> ActorRef<SupervisorMsg> {
        let (supervisor, _join) = Supervisor::spawn(Some(name.to_string()), Supervisor, args)
            .await
            .expect("spawn supervisor");
        supervisor
    }

    async fn must_report(supervisor: &ActorRef<SupervisorMsg>, name: &str) -> ChildReport {
        inspect(supervisor)
            .await
            .expect("inspect")
            .into_iter()
            .find(|report| report.name == name)
            .unwrap_or_else(|| panic!("no child {name}"))
    }

    async fn must_send(supervisor: &ActorRef<SupervisorMsg>, child: &str, message: ProbeMsg) {
        let cell = must_report(supervisor, child)
            .await
            .cell
            .unwrap_or_else(|| panic!("{child} is not running"));
        cell.send_message(message).expect("send to probe");
    }

    /// Polls `check` every 10 ms for at most 5 s.
    async fn wait_until<F, Fut>(what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        for _ in 0..500 {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting until {what}");
    }

    async fn wait_restarted(supervisor: &ActorRef<SupervisorMsg>, child: &str, count: u32) {
        wait_until(&format!("{child} restarted {count} times"), || async {
            let report = must_report(supervisor, child).await;
            report.restart_count == count && report.state == ChildState::Running
        })
        .await;
    }

    async fn wait_state(supervisor: &ActorRef<SupervisorMsg>, child: &str, state: ChildState) {
        wait_until(&format!("{child} is {state:?}"), || async {
            must_report(supervisor, child).await.state == state
        })
        .await;
    }

    async fn ids(supervisor: &ActorRef<SupervisorMsg>) -> Vec<Option<String>> {
        inspect(supervisor)
            .await
            .expect("inspect")
            .into_iter()
            .map(|report| report.actor_id)
            .collect()
    }

    // Scenario: one of three one_for_one children panics in `handle`; only it is restarted.
    #[tokio::test]
    async fn one_for_one_restarts_only_the_panicked_child() {
        let log = new_log();
        let supervisor = must_spawn(
            "t1/sup",
            SupervisorArgs::new(Strategy::OneForOne)
                .with_child(probe("t1/a", Restart::Permanent, &log))
                .with_child(probe("t1/b", Restart::Permanent, &log))
                .with_child(probe("t1/c", Restart::Permanent, &log)),
        )
        .await;
        let before = ids(&supervisor).await;

        must_send(&supervisor, "t1/b", ProbeMsg::Panic).await;
        wait_restarted(&supervisor, "t1/b", 1).await;

        let after = ids(&supervisor).await;
        assert_eq!(after[0], before[0], "sibling a untouched");
        assert_ne!(after[1], before[1], "b is a new instance");
        assert_eq!(after[2], before[2], "sibling c untouched");
        let b = must_report(&supervisor, "t1/b").await;
        assert_eq!(b.restart_count, 1);
        assert!(b.last_error.as_deref().is_some_and(|e| e.contains("boom")));
        assert_eq!(must_report(&supervisor, "t1/a").await.restart_count, 0);
        assert_eq!(must_report(&supervisor, "t1/c").await.restart_count, 0);

        supervisor.stop_and_wait(None, None).await.expect("stop");
    }

    // Scenario: child 2 of 4 panics under rest_for_one; 4 and 3 are stopped (in that order),
    // then 2, 3, 4 start again in order; 1 is untouched.
    #[tokio::test]
    async fn rest_for_one_restarts_the_children_after_the_failed_one() {
        let log = new_log();
        let supervisor = must_spawn(
            "t2/sup",
            SupervisorArgs::new(Strategy::RestForOne)
                .with_child(probe("t2/c1", Restart::Permanent, &log))
                .with_child(probe("t2/c2", Restart::Permanent, &log))
                .with_child(probe("t2/c3", Restart::Permanent, &log))
                .with_child(probe("t2/c4", Restart::Permanent, &log)),
        )
        .await;
        let before = ids(&supervisor).await;
        log.lock().expect("log lock").clear();

        must_send(&supervisor, "t2/c2", ProbeMsg::Panic).await;
        wait_restarted(&supervisor, "t2/c4", 1).await;

        let after = ids(&supervisor).await;
        assert_eq!(after[0], before[0], "c1 untouched");
        for i in 1..4 {
            assert_ne!(after[i], before[i], "child {} is a new instance", i + 1);
        }
        assert_eq!(must_report(&supervisor, "t2/c1").await.restart_count, 0);
        assert_eq!(must_report(&supervisor, "t2/c2").await.restart_count, 1);
        assert_eq!(must_report(&supervisor, "t2/c3").await.restart_count, 1);
        // c2 panicked, so it has no post_stop line
        assert_eq!(
            entries(&log),
            [
                "stop:t2/c4",
                "stop:t2/c3",
                "start:t2/c2",
                "start:t2/c3",
                "start:t2/c4"
            ]
        );

        supervisor.stop_and_wait(None, None).await.expect("stop");
    }

    // Scenario: each restart type meets a normal stop, then transient and temporary meet a panic.
    #[tokio::test]
    async fn restart_types_decide_what_comes_back() {
        let log = new_log();
        let supervisor = must_spawn(
            "t3/sup",
            SupervisorArgs::new(Strategy::OneForOne)
                .with_child(probe("t3/transient", Restart::Transient, &log))
                .with_child(probe("t3/temporary", Restart::Temporary, &log))
                .with_child(probe("t3/permanent", Restart::Permanent, &log))
                .with_child(probe("t3/transient-panics", Restart::Transient, &log))
                .with_child(probe("t3/temporary-panics", Restart::Temporary, &log)),
        )
        .await;

        // --- normal stops
        for child in ["t3/transient", "t3/temporary", "t3/permanent"] {
            must_send(&supervisor, child, ProbeMsg::StopNormally).await;
        }
        wait_restarted(&supervisor, "t3/permanent", 1).await;
        wait_state(&supervisor, "t3/transient", ChildState::Stopped).await;
        wait_state(&supervisor, "t3/temporary", ChildState::Stopped).await;

        // --- panics
        must_send(&supervisor, "t3/transient-panics", ProbeMsg::Panic).await;
        must_send(&supervisor, "t3/temporary-panics", ProbeMsg::Panic).await;
        wait_restarted(&supervisor, "t3/transient-panics", 1).await;
        wait_state(&supervisor, "t3/temporary-panics", ChildState::Failed).await;

        for child in ["t3/transient", "t3/temporary", "t3/temporary-panics"] {
            let report = must_report(&supervisor, child).await;
            assert_eq!(report.restart_count, 0, "{child} was not restarted");
            assert!(report.cell.is_none(), "{child} has no instance");
        }
        let failed = must_report(&supervisor, "t3/temporary-panics").await;
        assert!(
            failed
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("boom"))
        );

        supervisor.stop_and_wait(None, None).await.expect("stop");
    }

    // Scenario: a nested supervisor allows 2 restarts in 10 s; its crasher panics 3 times. It
    // stops its other child and fails; the root sees the failure and restarts it (permanent),
    // which starts both children afresh.
    #[tokio::test]
    async fn intensity_exceeded_escalates_to_the_parent() {
        let log = new_log();
        let inner = SupervisorArgs::new(Strategy::OneForOne)
            .with_intensity(2, Duration::from_secs(10))
            .with_child(probe("t4/bystander", Restart::Permanent, &log))
            .with_child(probe("t4/crasher", Restart::Permanent, &log));
        let root = must_spawn(
            "t4/root",
            SupervisorArgs::new(Strategy::OneForOne).with_child(ChildSpec::supervisor(
                "t4/sup",
                Restart::Permanent,
                inner,
            )),
        )
        .await;
        let first_sup: ActorRef<SupervisorMsg> = must_report(&root, "t4/sup")
            .await
            .cell
            .expect("t4/sup running")
            .into();

        // --- two panics are within the budget
        for count in 1..=2 {
            must_send(&first_sup, "t4/crasher", ProbeMsg::Panic).await;
            wait_restarted(&first_sup, "t4/crasher", count).await;
        }
        log.lock().expect("log lock").clear();

        // --- the third exceeds it
        must_send(&first_sup, "t4/crasher", ProbeMsg::Panic).await;
        wait_restarted(&root, "t4/sup", 1).await;

        let sup = must_report(&root, "t4/sup").await;
        assert!(
            sup.last_error
                .as_deref()
                .is_some_and(|e| e.contains("restart intensity exceeded")),
            "root saw the failure: {:?}",
            sup.last_error
        );
        assert_eq!(first_sup.get_status(), ActorStatus::Stopped);
        assert_eq!(
            entries(&log),
            [
                "stop:t4/bystander",
                "start:t4/bystander",
                "start:t4/crasher"
            ],
            "the bystander was stopped, then the new supervisor started both afresh"
        );
        let second_sup: ActorRef<SupervisorMsg> = sup.cell.expect("t4/sup running").into();
        assert_eq!(
            must_report(&second_sup, "t4/crasher").await.restart_count,
            0
        );

        root.stop_and_wait(None, None).await.expect("stop");
    }

    // Scenario: children start in order and stop in reverse, nested supervisors included; a
    // child that fails to start fails the supervisor's start after stopping the ones before it.
    #[tokio::test]
    async fn ordered_start_reverse_shutdown() {
        let log = new_log();
        let inner = SupervisorArgs::new(Strategy::OneForOne)
            .with_child(probe("t5/x", Restart::Permanent, &log))
            .with_child(probe("t5/y", Restart::Permanent, &log));
        let supervisor = must_spawn(
            "t5/sup",
            SupervisorArgs::new(Strategy::OneForOne)
                .with_child(probe("t5/a", Restart::Permanent, &log))
                .with_child(ChildSpec::supervisor("t5/inner", Restart::Permanent, inner))
                .with_child(probe("t5/c", Restart::Permanent, &log)),
        )
        .await;
        supervisor.stop_and_wait(None, None).await.expect("stop");
        assert_eq!(
            entries(&log),
            [
                "start:t5/a",
                "start:t5/x",
                "start:t5/y",
                "start:t5/c",
                "stop:t5/c",
                "stop:t5/y",
                "stop:t5/x",
                "stop:t5/a",
            ]
        );

        // --- a failing start
        let log = new_log();
        let refused = ChildSpec::new("t5/refused", Restart::Permanent, |_supervisor| async {
            Err(SpawnErr::StartupFailed("no capacity".into()))
        });
        let spawned = Supervisor::spawn(
            Some("t5/bad".to_string()),
            Supervisor,
            SupervisorArgs::new(Strategy::OneForOne)
                .with_child(probe("t5/p", Restart::Permanent, &log))
                .with_child(probe("t5/q", Restart::Permanent, &log))
                .with_child(refused),
        )
        .await;
        let err = spawned.expect_err("the supervisor's start fails");
        assert!(err.to_string().contains("no capacity"), "{err}");
        assert_eq!(
            entries(&log),
            ["start:t5/p", "start:t5/q", "stop:t5/q", "stop:t5/p"]
        );
    }

    // Scenario: a node-like tree; seats are added and removed at run time and the tree reports
    // names, states and restart counts at every level.
    #[tokio::test]
    async fn dynamic_children_and_the_tree() {
        let log = new_log();
        let root = must_spawn(
            "t6/node",
            SupervisorArgs::new(Strategy::OneForOne)
                .with_child(probe("t6/session", Restart::Permanent, &log))
                .with_child(ChildSpec::supervisor(
                    "t6/seats",
                    Restart::Permanent,
                    SupervisorArgs::new(Strategy::OneForOne),
                )),
        )
        .await;
        let seats: ActorRef<SupervisorMsg> = must_report(&root, "t6/seats")
            .await
            .cell
            .expect("seats running")
            .into();

        // --- add seats at run time
        let seat_1 = start_child(&seats, probe("t6/seat-1", Restart::Transient, &log))
            .await
            .expect("start seat-1");
        let duplicate = start_child(&seats, probe("t6/seat-1", Restart::Transient, &log)).await;
        assert!(
            matches!(&duplicate, Err(Error::Refused { reason, .. }) if reason.contains("already running")),
            "{duplicate:?}"
        );
        let seat_2 = SupervisorArgs::new(Strategy::RestForOne).with_child(probe(
            "t6/run-1",
            Restart::Temporary,
            &log,
        ));
        start_child(
            &seats,
            ChildSpec::supervisor("t6/seat-2", Restart::Transient, seat_2),
        )
        .await
        .expect("start seat-2");

        // --- a seat panics and is restarted
        seat_1.send_message(ProbeMsg::Panic).expect("send");
        wait_restarted(&seats, "t6/seat-1", 1).await;

        // --- the tree
        let tree = tree(&root).await;
        assert_eq!(tree.name, "t6/node");
        assert_eq!(tree.inspect_error, None);
        let names = |tree: &ActorTree| -> Vec<String> {
            tree.children
                .iter()
                .map(|n| n.report.name.clone())
                .collect()
        };
        assert_eq!(names(&tree), ["t6/session", "t6/seats"]);
        let seats_tree = tree.subtree("t6/seats").expect("seats subtree");
        assert_eq!(names(seats_tree), ["t6/seat-1", "t6/seat-2"]);
        let seat_2_tree = tree.subtree("t6/seat-2").expect("seat-2 subtree");
        assert_eq!(names(seat_2_tree), ["t6/run-1"]);
        for (name, restarts) in [
            ("t6/session", 0),
            ("t6/seats", 0),
            ("t6/seat-1", 1),
            ("t6/seat-2", 0),
            ("t6/run-1", 0),
        ] {
            let report = tree.find(name).unwrap_or_else(|| panic!("{name} in tree"));
            assert_eq!(report.state, ChildState::Running, "{name}");
            assert_eq!(report.restart_count, restarts, "{name}");
        }
        assert!(tree.find("t6/seat-1").is_some_and(|r| !r.supervisor));
        assert!(tree.find("t6/seat-2").is_some_and(|r| r.supervisor));
        let json = serde_json::to_value(&tree).expect("serialize tree");
        assert_eq!(json["children"][1]["name"], "t6/seats");
        assert_eq!(json["children"][1]["state"], "running");
        assert_eq!(
            json["children"][1]["subtree"]["children"][0]["restart_count"],
            1
        );

        // --- remove a seat
        let seat_1_now = must_report(&seats, "t6/seat-1")
            .await
            .cell
            .expect("running");
        terminate_child(&seats, "t6/seat-1")
            .await
            .expect("terminate seat-1");
        assert_eq!(seat_1_now.get_status(), ActorStatus::Stopped);
        let remaining: Vec<String> = inspect(&seats)
            .await
            .expect("inspect")
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(remaining, ["t6/seat-2"]);
        let unknown = terminate_child(&seats, "t6/seat-1").await;
        assert!(matches!(unknown, Err(Error::Refused { .. })), "{unknown:?}");
        // the terminated seat's exit is not mistaken for a failure
        assert_eq!(must_report(&root, "t6/seats").await.restart_count, 0);

        root.stop_and_wait(None, None).await.expect("stop");
    }
}
