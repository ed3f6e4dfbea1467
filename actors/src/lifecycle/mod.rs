//! The run lifecycle on one node (DESIGN §4): launch, completion, collection, park, answer,
//! resume, take, settle, endings, the seat recovery pass and the inbox. The run state machine
//! in `boxfleet_cluster::transition` decides every step; this module performs them — box and
//! runner I/O around fenced store transitions — and tells the engine what to run.
//!
//! One file per thing a rule does, named as its decision's file in `cluster/src/transition/`
//! where there is one:
//!
//! | file | what it performs |
//! |---|---|
//! | [`api`] | the request and outcome types: launch, resume, settle, answer |
//! | [`error`] | `lifecycle::Error` and its kind (the gRPC code table is `boxfleet_proto::errors`) |
//! | `seats` | the seat table, the session, the per-seat locks and their order |
//! | `work` | work in progress on a seat, which a graceful release waits for |
//! | `placement` | acquiring a seat (and its recovery pass), the placement pass, the graceful release |
//! | [`access`] | providers, runners, box operations, reachability, the poll and backstop, follow |
//! | `launch` | run_sandbox: open the row, make the box, start the job, commit the conversation |
//! | `setup` | the setup steps a new box is provisioned with |
//! | `collect` | a finished job: claim, read the evidence, charge, publish the phase record, park or resume |
//! | `assess` | the collection's pure part: failed, reason, error text, model receipt |
//! | `answer` | recording an answer, claiming it for its resume, the answer-resume retry rule |
//! | [`bridge`] | a bridged tool call written down on its run's record |
//! | `settle` | the engine's side of a resume: take, and how the resumed turn ended |
//! | `ending` | deciding an ending and finishing it; the pause reaper |
//! | `recovery` | the recovery pass on acquiring a seat |
//! | `strand` | a box on a host this node cannot reach: named for that host's nodes to kill |
//! | `inbox` | a seat's mail: offered to a parked run, else a turn for the engine |
//! | [`follow_ups`] | what a step leaves to the node's actors (seat and run drivers, box actors) |
//! | [`limits`] | the bounds more than one step applies |
//!
//! The rule index — every spec rule and DESIGN invariant, its decision, its performer here,
//! the actor that drives it, and its test — is in the project's `docs/architecture.md`.
//!
//! The lifecycle names no actor: what it leaves to them goes through [`FollowUps`], which the
//! node's tree implements (`crate::tree::NodeTree`). One seat's work is serialized by the
//! per-seat locks of `seats`; the operations here are the bodies the seat's actors, the
//! waiter's completions, the collectors and the gRPC services run.

pub mod access;
mod answer;
mod answer_at_once;
mod answer_given;
pub mod api;
mod assess;
pub mod bounds;
pub mod bridge;
pub mod budget;
pub mod cells;
mod collect;
mod condense;
mod ending;
pub mod error;
pub mod fleet_watch;
pub mod follow_ups;
mod inbox;
mod job;
mod launch;
pub mod limits;
mod lost_claim;
pub mod offers;
pub mod phase_record;
mod placement;
mod placement_pass;
mod recovery;
mod reply;
mod retire;
mod seats;
mod settle;
mod setup;
mod strand;
pub mod text;
mod work;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use boxfleet_cluster::inbox::Inbox;
use boxfleet_cluster::retention::Retention;
use boxfleet_cluster::runs::Runs;
use boxfleet_cluster::seat::Session;
use boxfleet_cluster::{Keys, Store};
use tokio::sync::mpsc;
use tracing::warn;

pub use access::{Access, BACKSTOP_MARGIN, DEFAULT_BOX_TIMEOUT};
pub use api::{
    AnswerOutcome, Answerer, Ended, EngineDown, LaunchOutcome, LaunchRequest, Parked, RefusalClass,
    Resume, ResumeKind, Settle,
};
pub use ending::KeptEnding;
pub use error::Error;
pub use follow_ups::{AnswerRetry, Detached, FollowUps};
pub use limits::{
    MAX_ANSWER_RESUME_ATTEMPTS, MAX_FINDINGS_RESUME_REFUSALS, MAX_QUESTION_BYTES, MAX_REPORT_BYTES,
    RELEASE_SETTLE,
};
pub use lost_claim::LostClaim;
pub use work::WorkGuard;

use crate::ports::{FleetLink, Runner};

/// A collection's entry in [`Coordinator::collecting`]: the job `launch_id` of `turn_id`.
pub fn collection_key(turn_id: &str, launch_id: &str) -> String {
    format!("{turn_id}/{launch_id}")
}

/// What a node's lifecycle is made of (see [`Coordinator::new`]).
#[derive(Debug)]
pub struct Parts {
    /// the node's id
    pub node: String,
    /// this run of the node process: a seat's holder and a run's owner name it
    pub incarnation: String,
    pub store: Arc<dyn Store>,
    pub keys: Keys,
    /// the session already opened on the store
    pub session: Session,
    /// the sandbox cells the company reaches, their default and the box keepalive
    pub cells: cells::Cells,
    /// the coding-agent runners, by name
    pub runners: BTreeMap<String, Arc<dyn Runner>>,
    /// where work for the engine goes (the node routes it to an attached or the built-in one)
    pub engine: mpsc::UnboundedSender<EngineDown>,
    /// the org chart and catalogue launches are planned and questions resolved against
    pub company: boxfleet_config::live::LiveCompany,
    /// how long the events outbox keeps what this node announces (`store.events_keep_seconds`)
    pub events_keep_seconds: i64,
}

/// A node's lifecycle: its store handles, its seats, its ways into boxes, and the engine link.
#[derive(Debug)]
pub struct Coordinator {
    pub node: String,
    pub incarnation: String,
    pub store: Arc<dyn Store>,
    pub keys: Keys,
    pub runs: Runs,
    pub inbox: Inbox,
    /// providers, runners and box operations (the tail owner reads jobs through it)
    pub access: Arc<Access>,
    /// the seat table, session and per-seat locks
    seats: seats::Seats,
    /// launches, collections and answers in progress, by seat
    work: work::WorkInProgress,
    /// what this node keeps of its offers to parked runs: their bounds, each seat's awaiting
    /// count, the inboxes stopped on a hand-back
    offers: offers::Offers,
    /// the rest of the fleet (the node sets it once its gRPC clients exist)
    fleet: RwLock<Option<Arc<dyn FleetLink>>>,
    /// the seats' auxiliary models, condensing what a box wrote past its bounds (the node sets
    /// it; none: every piece is cut)
    condenser: RwLock<Option<Arc<dyn crate::ports::Condenser>>>,
    /// when the placement pass last looked for removed seats (`retire`)
    retirement_checked: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// the ways back out of a box the node mounts (the tool bridge, the OTLP receiver); none:
    /// a job is given neither
    endpoints: RwLock<Option<Arc<dyn crate::ports::RunEndpoints>>>,
    /// what the steps leave to the node's actors
    follow_ups: Arc<dyn FollowUps>,
    engine: mpsc::UnboundedSender<EngineDown>,
    /// the company document in force (a reload swaps it whole); its chart is what questions
    /// resolve against (empty: seats are implicit)
    company: boxfleet_config::live::LiveCompany,
    /// the lease the engine side's announcements ride (a turn's reply, a dead letter), kept as
    /// long as every event
    announcements: Retention,
    /// the seats whose inbox the budget park holds (`budget`)
    budget_held: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// the job directories of this node's local boxes, watched for their done markers
    pub completions: crate::completion::CompletionWatch,
    /// the collections queued or in flight ([`collection_key`]): a completion the collectors
    /// have is not polled again every tick while it waits (`Collectors`, the waiter)
    pub collecting: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// what the placement passes saw of the fleet (`fleet_watch`)
    fleet_seen: std::sync::Mutex<fleet_watch::Seen>,
    /// the seats as the placement pass sees them, while the placement duty's watch keeps
    /// them (`placement_pass`)
    pub seat_view: boxfleet_cluster::seat_view::SeatView,
    /// what the last placement pass that found nothing to do decided from
    settled_pass: std::sync::Mutex<Option<placement_pass::Settled>>,
    /// the seat of each turn whose resume this node handed to the engine, until it settles:
    /// a settle that cannot read the run's record still knows whose fence to end it under
    resumes_out: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl Coordinator {
    /// What the steps leave to the node's actors (the run's driver comes back to a run
    /// through it, so a retry outlives the driver that scheduled it).
    pub fn follow_ups(&self) -> Arc<dyn FollowUps> {
        self.follow_ups.clone()
    }

    /// A lifecycle for a node whose session is already open; `follow_ups` is the node's tree
    /// (or [`Detached`]).
    pub fn new(parts: Parts, follow_ups: Arc<dyn FollowUps>) -> Self {
        let Parts {
            node,
            incarnation,
            store,
            keys,
            session,
            cells,
            runners,
            engine,
            company,
            events_keep_seconds,
        } = parts;
        let access = Access::new(
            node.clone(),
            session.info.host.clone(),
            cells,
            runners,
            follow_ups.clone(),
        );
        let runs = Runs::new(store.clone(), keys.clone())
            .keeping_events(Retention::new(events_keep_seconds));
        runs.set_clock(company.get().budgets.offset());
        Self {
            runs,
            inbox: Inbox::new(store.clone(), keys.clone()),
            node,
            incarnation,
            store,
            keys,
            access: Arc::new(access),
            seats: seats::Seats::new(session),
            work: work::WorkInProgress::default(),
            resumes_out: std::sync::Mutex::default(),
            offers: offers::Offers::default(),
            fleet: RwLock::new(None),
            condenser: RwLock::new(None),
            endpoints: RwLock::new(None),
            retirement_checked: std::sync::Mutex::new(None),
            follow_ups,
            engine,
            company,
            announcements: Retention::new(events_keep_seconds),
            budget_held: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            completions: crate::completion::CompletionWatch::default(),
            collecting: Default::default(),
            fleet_seen: std::sync::Mutex::new(fleet_watch::Seen::default()),
            seat_view: Default::default(),
            settled_pass: std::sync::Mutex::new(None),
        }
    }

    /// Watches a running run's job for its end when its box lives on this host (`direct`,
    /// `container`): the waiter polls it the moment its done marker appears. A remote box, or
    /// one on another host, is left to the poll.
    pub fn watch_completion(&self, run: &boxfleet_cluster::record::RunRecord) {
        let (Some(sandbox_id), Some(job)) = (&run.sandbox_id, job::StoredJob::of(run)) else {
            return;
        };
        if self.access.is_remote(run) || self.access.reachable(run).is_err() {
            return;
        }
        let Ok(provider) = self.access.provider_of(run) else {
            return;
        };
        if let Some(dir) = provider.host_path(sandbox_id, &job.handle.dir) {
            self.completions.watch(&run.turn_id, dir);
        }
    }

    /// The company document in force.
    pub fn company(&self) -> Arc<boxfleet_config::company::Company> {
        self.company.get()
    }

    /// The shared handle on the company in force (what a reload swaps).
    pub fn live_company(&self) -> &boxfleet_config::live::LiveCompany {
        &self.company
    }

    /// Sets how this node reaches the rest of the fleet.
    pub fn set_fleet_link(&self, link: Arc<dyn FleetLink>) {
        *self.fleet.write().unwrap_or_else(|p| p.into_inner()) = Some(link);
    }

    /// Sets the ways back out of a box that the node mounts.
    pub fn set_endpoints(&self, endpoints: Arc<dyn crate::ports::RunEndpoints>) {
        *self.endpoints.write().unwrap_or_else(|p| p.into_inner()) = Some(endpoints);
    }

    /// The ways back out of a box, when the node mounts any.
    fn endpoints(&self) -> Option<Arc<dyn crate::ports::RunEndpoints>> {
        self.endpoints
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sets the condenser of what a box wrote past its bounds.
    pub fn set_condenser(&self, condenser: Arc<dyn crate::ports::Condenser>) {
        *self.condenser.write().unwrap_or_else(|p| p.into_inner()) = Some(condenser);
    }

    /// The condenser, when the node set one.
    fn condenser(&self) -> Option<Arc<dyn crate::ports::Condenser>> {
        self.condenser
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Tells `seat`'s holder that a remote box's job is done (the poll duty found it).
    pub async fn completed_elsewhere(
        &self,
        seat: &str,
        turn_id: &str,
        launch_id: &str,
    ) -> Result<(), String> {
        let link = self
            .fleet
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| "this node has no link to the fleet".to_owned())?;
        link.completed(seat, turn_id, launch_id).await
    }

    /// Hands work to the engine.
    fn dispatch(&self, work: EngineDown) {
        if let EngineDown::Resume(resume) = &work {
            self.resumes_out
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(resume.turn_id.clone(), resume.seat.clone());
        }
        if self.engine.send(work).is_err() {
            warn!(node = %self.node, "engine_detached");
        }
    }
}
