//! Engines: which engine a seat's work goes to (DESIGN §8.2, §8.3, §13). That is
//! configuration — the seat's `engine:`, its role's, else the node's `default_engine` — never
//! whoever attached last:
//!
//! - a seat served by the **built-in** engine ([`builtin`]) has its turns and resumes worked in
//!   this process;
//! - a seat served by an **external** engine has them sent to the one attached engine whose
//!   credential covers the seat (an attach needs the `engine` or `admin` role for every seat it
//!   names, and a seat is served by one engine at a time). With none attached a turn waits
//!   here, its delivery held in the inbox, until one attaches; a resume is handed back for a
//!   retry (a completion comes round again at the next poll).
//!
//! When an engine goes away, every resume it had not taken is handed back, and every turn it
//! had not acked is deferred (keeping its place at the head of the seat's inbox).

mod builtin;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use boxfleet_actors::lifecycle::{Coordinator, EngineDown, Settle};
use boxfleet_auth::Principal;
use boxfleet_cluster::retention::Retention;
use boxfleet_config::company::Company;
use boxfleet_config::engine::EngineChoice;
use tokio::sync::mpsc;
use tracing::{info, warn};

/// An attached external engine: where its work goes, and what it was given.
#[derive(Debug)]
struct Attached {
    id: u64,
    name: String,
    /// the credential it attached with
    principal: Principal,
    /// the seats it asked to serve; empty: every external seat its credential covers
    seats: Vec<String>,
    down: mpsc::Sender<EngineDown>,
    /// resumes sent and not taken: turn → launch
    untaken: HashMap<String, String>,
    /// resumes taken and not settled: turn → launch
    taken: HashMap<String, String>,
    /// turns sent and not acked: seat → delivery
    turns: HashMap<String, String>,
}

impl Attached {
    fn serves(&self, seat: &str) -> bool {
        self.principal.covers(seat)
            && (self.seats.is_empty() || self.seats.iter().any(|s| s == seat))
    }
}

/// Where a piece of work went.
#[derive(Debug)]
pub enum Routed {
    /// to an attached engine
    Sent,
    /// the seat is the built-in engine's
    Builtin(EngineDown),
    /// no engine serves the seat now: a turn waits for one, a resume goes back for a retry
    NoEngine(EngineDown),
}

/// The node's engines.
#[derive(Debug)]
pub struct Engines {
    coordinator: Arc<Coordinator>,
    /// the chart a seat's engine is read from, and the node's default
    company: Company,
    default_engine: EngineChoice,
    attached: Mutex<Vec<Attached>>,
    next_id: Mutex<u64>,
    /// turns of external seats no attached engine serves, by seat (one is out at a time)
    waiting: Mutex<HashMap<String, EngineDown>>,
    retention: Retention,
}

fn seat_of(work: &EngineDown) -> &str {
    match work {
        EngineDown::Turn { seat, .. } => seat,
        EngineDown::Resume(resume) => &resume.seat,
    }
}

impl Engines {
    pub fn new(
        coordinator: Arc<Coordinator>,
        company: Company,
        default_engine: EngineChoice,
    ) -> Self {
        Self {
            coordinator,
            company,
            default_engine,
            attached: Mutex::new(Vec::new()),
            next_id: Mutex::new(0),
            waiting: Mutex::new(HashMap::new()),
            retention: Retention::events(),
        }
    }

    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    /// The engine `seat` is served by.
    pub fn engine_for(&self, seat: &str) -> EngineChoice {
        self.company.engine_for(seat, self.default_engine)
    }

    fn attached(&self) -> std::sync::MutexGuard<'_, Vec<Attached>> {
        self.attached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attaches an external engine for `seats` (empty: every external seat `principal`
    /// covers); returns its id. A seat the built-in engine serves, or one another engine
    /// already serves, is refused; the same subject attaching again replaces its own earlier
    /// attach (a reconnect). The turns waiting for it are sent at once.
    pub fn attach(
        &self,
        name: String,
        principal: Principal,
        seats: Vec<String>,
        down: mpsc::Sender<EngineDown>,
    ) -> Result<u64, String> {
        if let Some(seat) = seats
            .iter()
            .find(|seat| self.engine_for(seat) != EngineChoice::External)
        {
            return Err(format!(
                "seat {seat} is served by the built-in engine: give it (or its role) `engine: external`, or start the node with --default-engine external"
            ));
        }
        let id = {
            let mut next = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        let engine = Attached {
            id,
            name: name.clone(),
            principal,
            seats,
            down,
            untaken: HashMap::new(),
            taken: HashMap::new(),
            turns: HashMap::new(),
        };
        let replaced = {
            let mut attached = self.attached();
            let same = attached
                .iter()
                .position(|a| a.principal.subject == engine.principal.subject);
            let replaced = same.map(|at| attached.remove(at));
            if let Some(other) = attached.iter().find(|a| overlaps(a, &engine)) {
                let other = format!("{} ({})", other.name, other.principal.subject);
                if let Some(replaced) = replaced {
                    attached.push(replaced);
                }
                return Err(format!(
                    "engine {other} already serves these seats: one engine serves a seat at a time"
                ));
            }
            attached.push(engine);
            replaced
        };
        info!(engine = %name, id, "engine_attached");
        if let Some(replaced) = replaced {
            info!(engine = %replaced.name, id = replaced.id, "engine_replaced");
        }
        Ok(id)
    }

    /// The turns waiting for an engine that `id` now serves, sent to it; a seat no longer held
    /// here has its waiting turn dropped (the seat's holder dispatches it again).
    pub fn send_waiting(self: &Arc<Self>, id: u64) {
        let waiting: Vec<EngineDown> = {
            let attached = self.attached();
            let Some(engine) = attached.iter().find(|a| a.id == id) else {
                return;
            };
            let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            let seats: Vec<String> = waiting
                .keys()
                .filter(|seat| engine.serves(seat))
                .cloned()
                .collect();
            seats
                .iter()
                .filter_map(|seat| waiting.remove(seat))
                .collect()
        };
        for work in waiting {
            if !self.coordinator.holds(seat_of(&work)) {
                continue;
            }
            if let Routed::NoEngine(work) = self.to_external(work) {
                self.wait(work);
            }
        }
    }

    /// An external engine went away: every resume it did not take is handed back for a retry,
    /// and every turn it did not ack is deferred.
    pub async fn detach(&self, id: u64) {
        let engine = {
            let mut attached = self.attached();
            attached
                .iter()
                .position(|a| a.id == id)
                .map(|at| attached.remove(at))
        };
        let Some(engine) = engine else {
            return;
        };
        info!(
            engine = %engine.name,
            id,
            untaken = engine.untaken.len(),
            taken = engine.taken.len(),
            unacked = engine.turns.len(),
            "engine_detached"
        );
        for (turn_id, launch_id) in engine.untaken {
            let retry = Settle::Retry {
                error: format!("engine {} went away before it took the resume", engine.name),
            };
            if let Err(error) = self.coordinator.settle(&turn_id, &launch_id, retry).await {
                warn!(turn_id, %error, "sandbox_resume_handback_failed");
            }
        }
        // a resume it took may have been used: not retried, the run ended abandoned_tail
        for (turn_id, launch_id) in engine.taken {
            if let Err(error) = self
                .coordinator
                .abandon_taken(&turn_id, &launch_id, &engine.name)
                .await
            {
                warn!(turn_id, %error, "sandbox_abandoned_resume_not_ended");
            }
        }
        for (seat, delivery_id) in engine.turns {
            if let Err(error) = self.coordinator.turn_done(&seat, &delivery_id, false).await {
                warn!(seat, delivery_id, %error, "engine_turn_handback_failed");
            }
        }
    }

    /// Engine `id` took the resume of `turn_id`: it is no longer handed back when the engine
    /// goes away, but ended, unless the engine settles it first.
    pub fn taken(&self, id: u64, turn_id: &str) {
        if let Some(engine) = self.attached().iter_mut().find(|a| a.id == id)
            && let Some(launch_id) = engine.untaken.remove(turn_id)
        {
            engine.taken.insert(turn_id.to_owned(), launch_id);
        }
    }

    /// Engine `id` settled the resume of `turn_id`: nothing is owed for it when it goes away.
    pub fn settled(&self, id: u64, turn_id: &str) {
        if let Some(engine) = self.attached().iter_mut().find(|a| a.id == id) {
            engine.untaken.remove(turn_id);
            engine.taken.remove(turn_id);
        }
    }

    /// Whether engine `id` was sent `seat`'s turn `delivery_id` (and forgets it: acked or
    /// deferred).
    pub fn holds_turn(&self, id: u64, seat: &str, delivery_id: &str) -> bool {
        let mut attached = self.attached();
        let Some(engine) = attached.iter_mut().find(|a| a.id == id) else {
            return false;
        };
        match engine.turns.get(seat) {
            Some(sent) if sent == delivery_id => {
                engine.turns.remove(seat);
                true
            }
            _ => false,
        }
    }

    /// Whether engine `id` serves `seat`.
    pub fn serves(&self, id: u64, seat: &str) -> bool {
        self.attached().iter().any(|a| a.id == id && a.serves(seat))
    }

    /// Sends work to the engine that serves its seat.
    pub fn to_external(&self, work: EngineDown) -> Routed {
        let seat = seat_of(&work).to_owned();
        if self.engine_for(&seat) == EngineChoice::Builtin {
            return Routed::Builtin(work);
        }
        let mut attached = self.attached();
        let Some(engine) = attached.iter_mut().find(|a| a.serves(&seat)) else {
            return Routed::NoEngine(work);
        };
        let sent = match &work {
            EngineDown::Resume(resume) => (resume.turn_id.clone(), resume.launch_id.clone()),
            EngineDown::Turn { delivery, .. } => (seat.clone(), delivery.delivery_id.clone()),
        };
        let resume = matches!(work, EngineDown::Resume(_));
        match engine.down.try_send(work) {
            Ok(()) => {
                if resume {
                    engine.untaken.insert(sent.0, sent.1);
                } else {
                    engine.turns.insert(sent.0, sent.1);
                }
                Routed::Sent
            }
            Err(
                mpsc::error::TrySendError::Full(work) | mpsc::error::TrySendError::Closed(work),
            ) => Routed::NoEngine(work),
        }
    }

    /// Work for an external seat no engine serves now: a turn waits here for one; a resume is
    /// handed back, so its claim comes round again (a completion at the next poll, an answer
    /// after its retry spacing).
    pub fn wait(self: &Arc<Self>, work: EngineDown) {
        match work {
            EngineDown::Turn { ref seat, .. } => {
                info!(seat, "engine_turn_waiting");
                self.waiting
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(seat.clone(), work);
            }
            EngineDown::Resume(resume) => {
                let engines = self.clone();
                tokio::spawn(async move {
                    let retry = Settle::Retry {
                        error: format!(
                            "no engine attached serves seat {}: the resume waits for one",
                            resume.seat
                        ),
                    };
                    if let Err(error) = engines
                        .coordinator
                        .settle(&resume.turn_id, &resume.launch_id, retry)
                        .await
                    {
                        warn!(turn_id = %resume.turn_id, %error, "sandbox_resume_handback_failed");
                    }
                });
            }
        }
    }
}

/// Whether two engines would serve a seat in common.
fn overlaps(a: &Attached, b: &Attached) -> bool {
    match (a.seats.is_empty(), b.seats.is_empty()) {
        (false, false) => a.seats.iter().any(|seat| b.seats.contains(seat)),
        (true, false) => b.seats.iter().any(|seat| a.principal.covers(seat)),
        (false, true) => a.seats.iter().any(|seat| b.principal.covers(seat)),
        // two engines for every seat their credentials cover: they overlap unless their
        // scopes are disjoint
        (true, true) => {
            a.principal.seats.is_empty()
                || b.principal.seats.is_empty()
                || a.principal
                    .seats
                    .iter()
                    .any(|seat| b.principal.seats.contains(seat))
        }
    }
}

/// Routes the lifecycle's work to the attached engine, or the built-in one.
#[derive(Debug)]
pub struct Router;

#[derive(Debug, Clone)]
pub struct RouterArgs {
    pub engines: Arc<Engines>,
    /// the lifecycle's work queue; it outlives a router restart
    pub receiver: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<EngineDown>>>,
    /// where the queue's depth is shown
    pub observed: Arc<boxfleet_actors::workers::Observed>,
}

#[derive(Debug)]
pub enum RouterMsg {
    Next,
}

impl ractor::Actor for Router {
    type Msg = RouterMsg;
    type State = RouterArgs;
    type Arguments = RouterArgs;

    async fn pre_start(
        &self,
        myself: ractor::ActorRef<Self::Msg>,
        args: RouterArgs,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        let _ = myself.cast(RouterMsg::Next);
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ractor::ActorRef<Self::Msg>,
        RouterMsg::Next: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let next = {
            let mut receiver = state.receiver.lock().await;
            state.observed.set_depth("engines", receiver.len() as u64);
            // bounded, so the router answers its supervisor between pieces of work
            tokio::time::timeout(std::time::Duration::from_millis(500), receiver.recv()).await
        };
        match next {
            Ok(Some(work)) => match state.engines.to_external(work) {
                Routed::Sent => {}
                Routed::Builtin(work) => {
                    let engines = state.engines.clone();
                    tokio::spawn(async move { engines.builtin_guarded(work).await });
                }
                Routed::NoEngine(work) => state.engines.wait(work),
            },
            Ok(None) => return Ok(()),
            Err(_) => {}
        }
        let _ = myself.cast(RouterMsg::Next);
        Ok(())
    }
}
