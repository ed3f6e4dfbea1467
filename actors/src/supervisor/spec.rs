//! What a supervisor is given: one [`ChildSpec`] per child (a name, its restart and shutdown
//! policy, and a start function called again on every restart) and the [`SupervisorArgs`] it
//! is spawned with. A nested supervisor as a child is [`ChildSpec::supervisor`], defined beside
//! the actor it spawns.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use ractor::{Actor, ActorCell, SpawnErr};

use super::intensity::Intensity;
use super::policy::{Restart, Shutdown, Strategy};

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
    /// the child is itself a [`Supervisor`](super::Supervisor): [`tree`](super::tree) inspects it
    /// recursively
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

    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }
}

/// What a [`Supervisor`](super::Supervisor) is spawned with.
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
