//! Engines: which engine a seat's work goes to (DESIGN §8.2, §8.3, §13; `docs/engine.md`).
//! That is configuration — the seat's `engine:`, its role's, else the node's `default_engine`
//! — never whoever attached last:
//!
//! - a seat served by the **built-in** engine ([`builtin`]) has its turns and resumes worked in
//!   this process;
//! - a seat served by an **external** engine has them sent to the one attached engine whose
//!   credential covers the seat (an attach needs the `engine` or `admin` role for every seat it
//!   names, and a seat is served by one engine at a time). Work for such a seat never falls to
//!   the built-in engine: with no engine attached that serves it — or its engine's stream full
//!   ([`STREAM_BUFFER`] messages unread) — it waits here ([`Waiting`]), and is sent when one
//!   attaches or the stream drains. A resume waiting for a seat that leaves this node goes
//!   back to the store uncounted, for the seat's next holder.
//!
//! When an engine goes away (or is replaced by a newer attach of the same credential, which is
//! told so in a `Closing`), every resume it had not taken waits for the next engine, every
//! resume it took and did not settle ends `abandoned_tail`, and every turn it had not acked is
//! deferred (keeping its place at the head of the seat's inbox).

mod builtin;
pub mod tools;
mod waiting;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use boxfleet_actors::lifecycle::{Coordinator, EngineDown};
use boxfleet_auth::Principal;
use boxfleet_config::engine::EngineChoice;
use boxfleet_proto::v1 as pb;
use tokio::sync::mpsc;
use tracing::{info, warn};

use waiting::Waiting;
use wire::{Reason, Refusal};

/// How many messages an engine's stream holds unread before the node holds its work back.
pub const STREAM_BUFFER: usize = 256;

/// A resume sent and not settled, as it was sent (so it can go to the next engine).
#[derive(Debug)]
struct Sent {
    launch_id: String,
    work: EngineDown,
}

/// An attached external engine: where its work goes, and what it was given.
#[derive(Debug)]
struct Attached {
    id: u64,
    name: String,
    /// the credential it attached with
    principal: Principal,
    /// the seats it asked to serve; empty: every external seat its credential covers
    seats: Vec<String>,
    down: mpsc::Sender<pb::EngineDown>,
    /// resumes sent and not taken: turn → what was sent
    untaken: HashMap<String, Sent>,
    /// resumes taken and not settled: turn → launch
    taken: HashMap<String, String>,
    /// turns sent and not acked: seat → delivery
    turns: HashMap<String, String>,
    /// the tools it serves its seats' boxes through the tool bridge (its Hello's)
    tools: Vec<pb::ToolSpec>,
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
    /// no engine can take it now (none serves the seat, or its stream is full): it waits
    NoEngine(EngineDown),
}

/// The node's engines.
#[derive(Debug)]
pub struct Engines {
    coordinator: Arc<Coordinator>,
    /// the engine a seat whose seat and role name none is served by
    default_engine: EngineChoice,
    attached: Mutex<Vec<Attached>>,
    next_id: Mutex<u64>,
    /// work of external seats no attached engine can take now
    waiting: Waiting,
    /// bridged tool calls sent to an engine and not answered: call id → where the answer goes
    calls: tools::Calls,
}

impl Engines {
    pub fn new(coordinator: Arc<Coordinator>, default_engine: EngineChoice) -> Self {
        Self {
            coordinator,
            default_engine,
            attached: Mutex::new(Vec::new()),
            next_id: Mutex::new(0),
            waiting: Waiting::default(),
            calls: tools::Calls::default(),
        }
    }

    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    /// The node's default engine (`node.default_engine`).
    pub fn default_engine(&self) -> EngineChoice {
        self.default_engine
    }

    /// The engine `seat` is served by.
    pub fn engine_for(&self, seat: &str) -> EngineChoice {
        self.coordinator
            .company()
            .engine_for(seat, self.default_engine)
    }

    fn attached(&self) -> std::sync::MutexGuard<'_, Vec<Attached>> {
        self.attached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attaches an external engine for `seats` (empty: every external seat `principal`
    /// covers); returns its id. A seat the built-in engine serves, or one another engine
    /// already serves, is refused; the same subject attaching again replaces its own earlier
    /// attach (a reconnect), which is told so and whose work in hand goes to the new one.
    pub fn attach(
        self: &Arc<Self>,
        name: String,
        principal: Principal,
        (seats, tools): (Vec<String>, Vec<pb::ToolSpec>),
        down: mpsc::Sender<pb::EngineDown>,
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
            tools,
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
                    "engine {other} already serves these seats: one engine serves a seat at a time; attach with Hello.seats naming seats no other engine serves"
                ));
            }
            attached.push(engine);
            replaced
        };
        info!(engine = %name, id, "engine_attached");
        if let Some(replaced) = replaced {
            info!(engine = %replaced.name, id = replaced.id, by = id, "engine_replaced");
            let why = format!(
                "engine {} attached again with the same credential ({}): this stream is replaced by the newer one",
                name, replaced.principal.subject
            );
            let _ = replaced.down.try_send(wire::closing("replaced", why));
            let engines = self.clone();
            tokio::spawn(async move { engines.orphan(replaced).await });
        }
        Ok(id)
    }

    /// An external engine went away: see [`Engines::orphan`].
    pub async fn detach(self: &Arc<Self>, id: u64) {
        let engine = {
            let mut attached = self.attached();
            attached
                .iter()
                .position(|a| a.id == id)
                .map(|at| attached.remove(at))
        };
        if let Some(engine) = engine {
            self.orphan(engine).await;
        }
    }

    /// The work an engine that is gone had in hand: each resume it did not take waits for the
    /// next engine of its seat; each it took and did not settle may have been used, so its run
    /// ends `abandoned_tail`; each turn it did not ack is deferred.
    async fn orphan(self: &Arc<Self>, engine: Attached) {
        info!(
            engine = %engine.name,
            id = engine.id,
            untaken = engine.untaken.len(),
            taken = engine.taken.len(),
            unacked = engine.turns.len(),
            "engine_detached"
        );
        for (_, sent) in engine.untaken {
            self.wait(sent.work);
        }
        for (turn_id, launch_id) in engine.taken {
            if let Err(error) = self
                .coordinator
                .abandon_taken(&turn_id, &launch_id, &engine.name)
                .await
            {
                warn!(turn_id, %error, "sandbox_abandoned_resume_not_ended");
            }
        }
        // a bridged call it was asked and did not answer is answered with an error now
        self.calls.drop_engine(engine.id);
        for (seat, delivery_id) in engine.turns {
            if let Err(error) = self.coordinator.turn_done(&seat, &delivery_id, false).await {
                warn!(seat, delivery_id, %error, "engine_turn_handback_failed");
            }
        }
        self.send_waiting().await;
    }

    /// Engine `id` may take the resume of `turn_id` under `launch_id`: it was sent it, under
    /// that launch, and has not taken it.
    pub fn may_take(&self, id: u64, turn_id: &str, launch_id: &str) -> Result<(), Refusal> {
        let attached = self.attached();
        let engine = attached.iter().find(|a| a.id == id);
        let Some(engine) = engine else {
            return Err(Refusal::new(Reason::NotSent, "this engine is detached"));
        };
        if engine.taken.contains_key(turn_id) {
            return Err(Refusal::new(
                Reason::AlreadyTaken,
                format!("the resume of {turn_id} was already taken: settle it"),
            ));
        }
        let Some(sent) = engine.untaken.get(turn_id) else {
            return Err(not_held(turn_id));
        };
        if sent.launch_id != launch_id {
            return Err(wrong_launch(turn_id, &sent.launch_id, launch_id));
        }
        Ok(())
    }

    /// Engine `id` may settle the resume of `turn_id` under `launch_id`; `needs_take`: the
    /// outcome says the turn ran (finished, broke after an external write), so it must have
    /// been taken.
    pub fn may_settle(
        &self,
        id: u64,
        turn_id: &str,
        launch_id: &str,
        needs_take: bool,
    ) -> Result<(), Refusal> {
        let attached = self.attached();
        let Some(engine) = attached.iter().find(|a| a.id == id) else {
            return Err(Refusal::new(Reason::NotSent, "this engine is detached"));
        };
        let held = engine
            .taken
            .get(turn_id)
            .map(|launch| (launch.as_str(), true))
            .or_else(|| {
                engine
                    .untaken
                    .get(turn_id)
                    .map(|sent| (sent.launch_id.as_str(), false))
            });
        let Some((sent_launch, taken)) = held else {
            return Err(not_held(turn_id));
        };
        if sent_launch != launch_id {
            return Err(wrong_launch(turn_id, sent_launch, launch_id));
        }
        if needs_take && !taken {
            return Err(Refusal::new(
                Reason::NotTaken,
                format!(
                    "the resume of {turn_id} was not taken: send Take before the turn runs, then Settle"
                ),
            ));
        }
        Ok(())
    }

    /// Engine `id` took the resume of `turn_id`: it is no longer offered to another engine
    /// when this one goes away, but ended, unless this one settles it first.
    pub fn taken(&self, id: u64, turn_id: &str) {
        if let Some(engine) = self.attached().iter_mut().find(|a| a.id == id)
            && let Some(sent) = engine.untaken.remove(turn_id)
        {
            engine.taken.insert(turn_id.to_owned(), sent.launch_id);
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

    /// The node ends every engine's stream: each is told why, then its stream closes.
    pub fn close_all(&self, reason: &str, message: &str) {
        let closed: Vec<Attached> = self.attached().drain(..).collect();
        for engine in closed {
            info!(engine = %engine.name, id = engine.id, reason, "engine_stream_closed");
            let _ = engine
                .down
                .try_send(wire::closing(reason, message.to_owned()));
            // the sender dropped here ends the stream after the closing word
        }
    }

    /// Sends a message the node itself writes (a refusal) to engine `id`; one its full stream
    /// cannot take is dropped and logged.
    pub fn tell(&self, id: u64, message: pb::EngineDown) {
        let attached = self.attached();
        if let Some(engine) = attached.iter().find(|a| a.id == id)
            && engine.down.try_send(message).is_err()
        {
            warn!(engine = %engine.name, id, "engine_notice_dropped");
        }
    }

    /// Sends work to the engine that serves its seat.
    pub fn to_external(&self, work: EngineDown) -> Routed {
        let seat = work.seat().to_owned();
        if self.engine_for(&seat) == EngineChoice::Builtin {
            return Routed::Builtin(work);
        }
        let mut attached = self.attached();
        let Some(engine) = attached.iter_mut().find(|a| a.serves(&seat)) else {
            return Routed::NoEngine(work);
        };
        let kept = work.clone();
        match engine.down.try_send(wire::down_message(work)) {
            Ok(()) => {
                match kept {
                    EngineDown::Resume(ref resume) => {
                        let sent = Sent {
                            launch_id: resume.launch_id.clone(),
                            work: kept.clone(),
                        };
                        engine.untaken.insert(resume.turn_id.clone(), sent);
                    }
                    EngineDown::Turn { ref delivery, .. } => {
                        engine.turns.insert(seat, delivery.delivery_id.clone());
                    }
                    EngineDown::Ended(_) | EngineDown::Parked(_) => {}
                }
                Routed::Sent
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                warn!(engine = %engine.name, seat, buffer = STREAM_BUFFER, "engine_backlogged");
                Routed::NoEngine(kept)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Routed::NoEngine(kept),
        }
    }

    /// Work for an external seat no engine can take now: it waits here, and is sent when one
    /// can (an attach, a detach's hand-over, the router's tick).
    pub fn wait(&self, work: EngineDown) {
        self.waiting.add(work);
    }

    /// Sends what waits to the engines that can now take it. A resume waiting for a seat this
    /// node no longer holds (or is handing over) goes back to the store uncounted, for the
    /// seat's next holder; a turn or notice of such a seat is dropped (its holder dispatches
    /// its mail again; a notice's durable record is the run's event).
    pub async fn send_waiting(&self) {
        if self.waiting.is_empty() {
            return;
        }
        for work in self.waiting.take_all() {
            let seat = work.seat().to_owned();
            let leaving = !self.coordinator.holds(&seat) || self.coordinator.releasing(&seat);
            if leaving {
                if let EngineDown::Resume(resume) = &work {
                    info!(seat, turn_id = %resume.turn_id, "engine_resume_returned_unsent");
                    if let Err(error) = self
                        .coordinator
                        .hand_back_unsent(&resume.turn_id, &resume.launch_id)
                        .await
                    {
                        warn!(turn_id = %resume.turn_id, %error, "sandbox_resume_handback_failed");
                    }
                }
                continue;
            }
            if let Routed::NoEngine(work) = self.to_external(work) {
                self.wait(work);
            }
        }
    }
}

fn not_held(turn_id: &str) -> Refusal {
    Refusal::new(
        Reason::NotSent,
        format!("this engine holds no resume of {turn_id}: it was never sent, or already settled"),
    )
}

fn wrong_launch(turn_id: &str, sent: &str, given: &str) -> Refusal {
    Refusal::new(
        Reason::WrongLaunch,
        format!("the resume of {turn_id} was sent for job {sent}, not {given}"),
    )
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
            state.observed.set_depth(
                "engines",
                receiver.len() as u64 + state.engines.waiting.len() as u64,
            );
            // bounded, so the router answers its supervisor between pieces of work, and what
            // waits for an engine is tried again
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
        if state.engines.waiting.sweep_due() {
            state.engines.send_waiting().await;
        }
        let _ = myself.cast(RouterMsg::Next);
        Ok(())
    }
}
