//! A running supervisor's children and restart history ([`SupervisorState`]), and the restart
//! machinery: start the children in order, record a child's exit, restart what the policy says
//! (`one_for_one` or `rest_for_one`), give up and escalate past the intensity, stop everything
//! in reverse order.
//!
//! Layout: the state and its `Child` → starting (in order, and one at run time) and
//! terminating → a child's exit and the restart → giving up and shutting down → the two acts
//! on one child, `start` (checked to be linked) and `shut_down` (bounded by its [`Shutdown`]).

use std::collections::VecDeque;
use std::time::Duration;

use ractor::{ActorCell, ActorId, ActorProcessingErr, ActorStatus, RactorErr};
use tokio::time::Instant;

use super::intensity::{Intensity, note_restart};
use super::policy::{Exit, Restart, Shutdown, Strategy};
use super::report::{ChildReport, ChildState};
use super::spec::ChildSpec;

/// How many children that exited for good (a temporary one, or a transient one that stopped
/// normally) a supervisor keeps in its reports before it forgets the oldest: enough to see why
/// recent runs and boxes ended, bounded because they never come back — a node that ran
/// thousands of runs reports its live actors and these, not one line per run it ever drove.
pub const MAX_EXITED_TEMPORARY: usize = 32;

/// The stop reason a supervisor gives the children it shuts down.
const SHUTDOWN_REASON: &str = "shutdown";

/// How long a child that ignored its stop is given to die after being killed.
const KILL_WAIT: Duration = Duration::from_secs(5);

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
        self.cell.is_none()
            && match self.spec.restart {
                Restart::Temporary => true,
                Restart::Transient => self.state == ChildState::Stopped,
                Restart::Permanent => false,
            }
    }
}

impl SupervisorState {
    /// No children yet; `name` is the supervisor's, for logs.
    pub(super) fn new(
        name: String,
        strategy: Strategy,
        intensity: Intensity,
        capacity: usize,
    ) -> Self {
        SupervisorState {
            name,
            strategy,
            intensity,
            children: Vec::with_capacity(capacity),
            restarts: VecDeque::new(),
        }
    }

    /// Starts `children` in order; the first that fails to start stops the ones already
    /// started (reverse order) and fails the supervisor's start.
    pub(super) async fn start_in_order(
        &mut self,
        myself: &ActorCell,
        children: Vec<ChildSpec>,
    ) -> Result<(), ActorProcessingErr> {
        for spec in children {
            let started = if self.position_by_name(&spec.name).is_some() {
                Err(format!("two children are named {}", spec.name))
            } else {
                start(myself, &spec).await
            };
            match started {
                Ok(cell) => self.children.push(Child::running(spec, cell)),
                Err(err) => {
                    self.shut_down_all().await;
                    return Err(format!("start child {}: {err}", spec.name).into());
                }
            }
        }
        Ok(())
    }

    /// Every child, in start order.
    pub(super) fn reports(&self) -> Vec<ChildReport> {
        self.children.iter().map(Child::report).collect()
    }

    pub(super) fn position_by_id(&self, id: ActorId) -> Option<usize> {
        self.children
            .iter()
            .position(|child| child.cell.as_ref().is_some_and(|cell| cell.get_id() == id))
    }

    fn position_by_name(&self, name: &str) -> Option<usize> {
        self.children
            .iter()
            .position(|child| child.spec.name == name)
    }

    pub(super) async fn start_child(
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

    pub(super) async fn terminate_child(&mut self, name: &str) -> Result<(), String> {
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
    pub(super) async fn on_child_exit(
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
                        boxfleet_cluster::metrics::metrics()
                            .restarted(&actor_kind(&child.spec.name));
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
        note_restart(&mut self.restarts, self.intensity, Instant::now())
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

    pub(super) async fn shut_down_all(&mut self) {
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
    // every supervised kind is exposed, at zero until it restarts
    let _ = boxfleet_cluster::metrics::metrics()
        .actor_restarts
        .get_or_create(&boxfleet_cluster::metrics::ActorName {
            actor: actor_kind(&spec.name),
        });
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

/// What kind of actor a name is, without its node and without a seat's, run's or box's own
/// id (a metric's label stays bounded): `node-a/run/t-1` is `run`, `node-a/waiter` is `waiter`.
fn actor_kind(name: &str) -> String {
    let mut parts = name.split('/');
    let first = parts.next().unwrap_or_default();
    let second = parts.next();
    match second {
        None => first.to_owned(),
        Some(kind) => kind.to_owned(),
    }
}

#[cfg(test)]
mod kind_tests {
    #[test]
    fn an_actors_kind_drops_its_node_and_its_id() {
        assert_eq!(super::actor_kind("node-a/run/turn-1"), "run");
        assert_eq!(super::actor_kind("node-a/waiter"), "waiter");
        assert_eq!(super::actor_kind("root"), "root");
    }
}
