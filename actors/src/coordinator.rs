//! The run lifecycle on one node (DESIGN §4): launch, completion, collection, park, answer,
//! resume, take, settle, endings, and the seat recovery pass. The run state machine in
//! `boxfleet_cluster::transition` decides every step; this module performs them — box and
//! runner I/O around fenced store transitions — and tells the engine what to run.
//!
//! One seat's work is serialized by its [`crate::seat`] actor; the operations here are the
//! bodies those actors (and the waiter's completions) run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use boxfleet_cluster::events::{self, Event};
use boxfleet_cluster::inbox::{Delivery, Enqueued, Inbox, Message};
use boxfleet_cluster::keys::check_id;
use boxfleet_cluster::phase::{FailureReason, PhaseRecord};
use boxfleet_cluster::record::{
    Answer, ClaimKind, EndingReason, Question, RunRecord, Status, Usage,
};
use boxfleet_cluster::runs::{Outcome, RunError, Runs, Versioned};
use boxfleet_cluster::seat::{self, Acquire, Holder, Session};
use boxfleet_cluster::transition::{EndingGuard, Fence, Refusal, Share, Transition};
use boxfleet_cluster::{Keys, Store};
use boxfleet_config::plan::SandboxPlan;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::ports::{
    BoxError, BoxSpec, Collected, JobHandle, JobState, LaunchSpec, Provider, Runner, Sandbox,
};

/// How long a box lives without a keepalive (default_timeout_seconds).
pub const DEFAULT_BOX_TIMEOUT: Duration = Duration::from_secs(900);
/// Bounds on the text a phase record carries (DESIGN §11).
pub const MAX_REPORT_BYTES: usize = 256 * 1024;
pub const MAX_QUESTION_BYTES: usize = 16 * 1024;
/// Resume attempts of one recorded answer before it is let go.
pub const MAX_ANSWER_RESUME_ATTEMPTS: u32 = 10;

/// Why an operation did not happen. Per-request failures travel in replies.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Run(#[from] RunError),
    #[error("{0}")]
    Store(#[from] boxfleet_cluster::Error),
    #[error("{0}")]
    Box(#[from] BoxError),
    #[error("sandbox_seat_not_held: seat {seat} is held by {holder}")]
    SeatHeldElsewhere { seat: String, holder: String },
    #[error("{0}")]
    Invalid(String),
    /// A setup step did not complete; the box was torn down before any brief ran.
    #[error("sandbox_setup_failed: {0}")]
    Setup(String),
}

/// The class of a refused launch (DESIGN §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefusalClass {
    Unavailable,
    Refused,
    Budget,
}

/// What a launch asks for (run_sandbox).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchRequest {
    pub seat: String,
    pub turn_id: Option<String>,
    pub iteration: u32,
    pub brief: String,
    pub task: String,
    pub conversation: Vec<u8>,
    pub requester: Option<String>,
    pub work_item: Option<String>,
    pub conversation_key: Option<String>,
    pub partition: Option<String>,
    pub runner: String,
    pub command: Option<String>,
    pub model: Option<String>,
    pub pause_ttl_seconds: Option<u64>,
    pub timeout_seconds: Option<u64>,
    pub owes_answer: bool,
    pub trace: Option<String>,
}

/// What a launch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchOutcome {
    Launched {
        turn_id: String,
        launch_id: String,
        sandbox_id: String,
    },
    Refused {
        class: RefusalClass,
        reason: String,
    },
}

/// What the resumed turn is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResumeKind {
    Findings,
    Answer,
    Reseed,
}

/// Work for the engine (DESIGN §8.2, down).
#[derive(Debug, Clone, PartialEq)]
pub enum EngineDown {
    /// An ordinary message to run as a turn.
    Turn { seat: String, delivery: Delivery },
    /// A suspended turn to resume.
    Resume(Box<Resume>),
}

/// A resume: everything the engine needs is in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub seat: String,
    pub turn_id: String,
    pub launch_id: String,
    pub kind: ResumeKind,
    pub conversation: Vec<u8>,
    pub iteration: u32,
    pub work_item: Option<String>,
    /// the findings report (Findings), or the answer (Answer / Reseed)
    pub reply: String,
    pub succeeded: bool,
    pub question: Option<String>,
    pub branch: Option<String>,
    pub command: Option<String>,
}

/// How a resumed turn ended (DESIGN §8.2, up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    Finished {
        reply: String,
    },
    Relaunched {
        brief: String,
        conversation: Vec<u8>,
        command: Option<String>,
        env: BTreeMap<String, String>,
    },
    BrokeAfterExternalWrite {
        error: String,
    },
    Retry {
        error: String,
    },
}

/// What answering a run by name did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerOutcome {
    Recorded,
    NotAwaiting(String),
    Gone,
    WrongLaunch(String),
    AlreadyAnswered,
}

impl AnswerOutcome {
    pub fn word(&self) -> &'static str {
        match self {
            AnswerOutcome::Recorded => "recorded",
            AnswerOutcome::NotAwaiting(_) => "not_awaiting",
            AnswerOutcome::Gone => "gone",
            AnswerOutcome::WrongLaunch(_) => "wrong_launch",
            AnswerOutcome::AlreadyAnswered => "already_answered",
        }
    }
}

/// The job handle and runner a record names, as stored in `RunRecord::job`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredJob {
    runner: String,
    handle: JobHandle,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
    /// the model sent to the box (`--model`): the receipt's `requested`
    #[serde(default)]
    model: Option<String>,
    /// when the job started: the engine-side backstop counts from here
    #[serde(default)]
    started_at: Option<chrono::DateTime<Utc>>,
}

/// How long past a check's in-box deadline (and its kill grace) the engine waits before its
/// own backstop ends the job. The two clocks are distinct: neither is shortened to fit the
/// other, and their outcomes are reported differently.
pub const BACKSTOP_MARGIN: Duration = Duration::from_secs(120);

/// The file in a job's directory that says the engine's backstop, not the job, ended it.
const BACKSTOP_FILE: &str = "backstop";

/// How long a graceful release waits for a seat's collections and answers to settle.
pub const RELEASE_SETTLE: Duration = Duration::from_secs(60);

/// A collection or answer in progress on a seat (see [`Coordinator::working_on`]).
#[derive(Debug)]
pub struct WorkGuard {
    working: Arc<Mutex<HashMap<String, usize>>>,
    settled: Arc<tokio::sync::Notify>,
    seat: String,
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        let mut working = self.working.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = working.get_mut(&self.seat) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                working.remove(&self.seat);
            }
        }
        drop(working);
        self.settled.notify_waiters();
    }
}

/// A node's coordinator: its store handles, its boxes and runners, and the engine link.
#[derive(Debug)]
pub struct Coordinator {
    pub node: String,
    pub incarnation: String,
    pub store: Arc<dyn Store>,
    pub keys: Keys,
    pub runs: Runs,
    pub inbox: Inbox,
    providers: BTreeMap<String, Arc<dyn Provider>>,
    runners: BTreeMap<String, Arc<dyn Runner>>,
    default_cell: String,
    session: RwLock<Session>,
    /// when the session was last renewed
    renewed_at: Mutex<tokio::time::Instant>,
    seats: Mutex<HashMap<String, Fence>>,
    /// seats this node is handing over: no new work starts on them
    releasing: Mutex<HashSet<String>>,
    /// collections and answers in progress, by seat: a graceful release waits for them
    working: Arc<Mutex<HashMap<String, usize>>>,
    work_settled: Arc<tokio::sync::Notify>,
    /// the host this node runs on (nodes on one host share its local boxes)
    pub host: String,
    /// the rest of the fleet (the node sets it once its gRPC clients exist)
    fleet: RwLock<Option<Arc<dyn crate::ports::FleetLink>>>,
    /// seats acquired since the waiter last looked: their remote runs are polled at once by
    /// this node, duty or not
    fresh: Mutex<HashSet<String>>,
    /// seats with a turn out at the engine (dispatched, not yet acked)
    in_flight: Mutex<HashMap<String, Message>>,
    /// one seat's launch and inbox work at a time: this node is the seat's only writer (the
    /// fence), so serializing here makes "busy" and "dispatched" checks atomic with their writes
    seat_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// one acquire and recovery pass at a time per seat
    acquiring: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// itself, for the seat actors it starts
    me: Mutex<Option<std::sync::Weak<Coordinator>>>,
    engine: mpsc::UnboundedSender<EngineDown>,
    box_timeout: Duration,
    /// the org chart questions resolve against (empty: seats are implicit)
    company: boxfleet_config::company::Company,
}

/// Applies setup steps to a new box, in order: each step's files, then its commands with the
/// run environment. The error names the step and which of three things failed (the spec's
/// sandbox_setup_failed): a file the box would not take, a command that exited non-zero, or
/// a command that reported no exit status.
async fn apply_setup(
    sandbox: &dyn Sandbox,
    steps: &[boxfleet_config::providers::SetupStep],
    env: &BTreeMap<String, String>,
) -> Result<(), String> {
    use boxfleet_config::providers::{DEFAULT_SETUP_TIMEOUT_SECONDS, clean_setup_path};
    for step in steps {
        let name = &step.name;
        for (path, body) in &step.files {
            let cleaned = clean_setup_path(path, false).map_err(|problem| {
                format!("setup step {name:?}: could not write {path}: {problem}")
            })?;
            sandbox
                .write_file(&cleaned, body.as_bytes())
                .await
                .map_err(|error| format!("setup step {name:?}: could not write {path}: {error}"))?;
        }
        let timeout = step
            .timeout_seconds
            .unwrap_or(DEFAULT_SETUP_TIMEOUT_SECONDS);
        for (i, command) in step.commands.iter().enumerate() {
            let n = i + 1;
            // `timeout` gives the step's own bound its exit 124; the exec bound is a backstop
            let bounded = format!("timeout {timeout} sh -c {}", shell_quote(command));
            let output = sandbox
                .exec(&bounded, env, Duration::from_secs(timeout + 30))
                .await
                .map_err(|error| {
                    format!("setup step {name:?}: command #{n} reported no exit status: {error}")
                })?;
            if output.exit_code == 0 {
                continue;
            }
            let printed = boxfleet_redact::redact(&format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
            let printed = cut(printed.trim(), 4096);
            let code = output.exit_code;
            let mut text = format!("setup step {name:?}: command #{n} failed (exit {code})");
            if code == 124 {
                text.push_str(&format!(": its timeout_seconds of {timeout}s ran out"));
            }
            if !printed.is_empty() {
                text.push_str(&format!(": {printed}"));
            }
            if code > 128 {
                text.push_str(&format!(" (ended by signal {})", code - 128));
            }
            return Err(text);
        }
    }
    Ok(())
}

/// The brief with the setup steps' paragraphs folded into a "## Your environment" block.
fn with_setup_briefs(brief: &str, steps: &[boxfleet_config::providers::SetupStep]) -> String {
    let paragraphs: Vec<&str> = steps
        .iter()
        .filter_map(|step| step.brief.as_deref())
        .filter(|b| !b.trim().is_empty())
        .collect();
    if paragraphs.is_empty() {
        return brief.to_owned();
    }
    format!(
        "{brief}\n\n## Your environment\n\n{}\n",
        paragraphs.join("\n\n")
    )
}

/// Locks the per-seat lock `seat` names in `locks`, making it on first use.
async fn keyed_lock(
    locks: &Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    seat: &str,
) -> tokio::sync::OwnedMutexGuard<()> {
    let lock = locks
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(seat.to_owned())
        .or_default()
        .clone();
    lock.lock_owned().await
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &text[..end];
    let kept = kept.rfind('\n').map_or(kept, |i| &kept[..i]);
    let left = text.len() - kept.len();
    format!("{kept}\n[… {left} bytes left out]")
}

impl Coordinator {
    /// A coordinator for a node whose session is already open.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: String,
        incarnation: String,
        store: Arc<dyn Store>,
        keys: Keys,
        session: Session,
        providers: BTreeMap<String, Arc<dyn Provider>>,
        runners: BTreeMap<String, Arc<dyn Runner>>,
        default_cell: String,
        engine: mpsc::UnboundedSender<EngineDown>,
    ) -> Self {
        Self {
            runs: Runs::new(store.clone(), keys.clone()),
            inbox: Inbox::new(store.clone(), keys.clone()),
            node,
            incarnation,
            store,
            keys,
            providers,
            runners,
            default_cell,
            host: session.info.host.clone(),
            fleet: RwLock::new(None),
            fresh: Mutex::new(HashSet::new()),
            session: RwLock::new(session),
            renewed_at: Mutex::new(tokio::time::Instant::now()),
            seats: Mutex::new(HashMap::new()),
            releasing: Mutex::new(HashSet::new()),
            working: Arc::default(),
            work_settled: Arc::default(),
            in_flight: Mutex::new(HashMap::new()),
            seat_locks: Mutex::new(HashMap::new()),
            acquiring: Mutex::new(HashMap::new()),
            me: Mutex::new(None),
            engine,
            box_timeout: DEFAULT_BOX_TIMEOUT,
            company: boxfleet_config::company::Company::default(),
        }
    }

    /// Sets the org chart a question's audience resolves against.
    pub fn with_company(mut self, company: boxfleet_config::company::Company) -> Self {
        self.company = company;
        self
    }

    /// The node's current session (a new one replaces it when the old lease is lost).
    pub fn session(&self) -> Session {
        self.session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Renews the session. A session whose lease is gone (the node was cut off from the store
    /// past its TTL) has lost every seat it held: they are forgotten here at once — their
    /// writes would not land anyway — and a new session is opened, so the node rejoins the
    /// fleet and is placed seats again.
    pub async fn renew_session(&self) -> Result<(), Error> {
        let session = self.session();
        match session.renew(self.store.as_ref()).await {
            Ok(_) => {
                *self.renewed_at.lock().unwrap_or_else(|p| p.into_inner()) =
                    tokio::time::Instant::now();
                Ok(())
            }
            Err(boxfleet_cluster::Error::LeaseNotFound(_)) => {
                for fence in self.held_seats() {
                    self.lose_seat(&fence.seat);
                }
                warn!(node = %self.node, "session_lost");
                let info = session.info.clone();
                let fresh =
                    Session::open(self.store.as_ref(), &self.keys, info, session.ttl_seconds)
                        .await?;
                info!(node = %self.node, lease = fresh.lease, "session_reopened");
                *self.session.write().unwrap_or_else(|p| p.into_inner()) = fresh;
                Ok(())
            }
            Err(error) => {
                // cut off from the store: once a whole TTL has passed with no renewal the lease
                // may be gone and the seats another node's, so this node stops acting for them
                // now rather than when it hears so (its writes would be refused by the fence
                // anyway; this keeps it from starting work it cannot record)
                let silent = self
                    .renewed_at
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .elapsed();
                if silent >= Duration::from_secs(session.ttl_seconds.max(1) as u64) {
                    for fence in self.held_seats() {
                        self.lose_seat(&fence.seat);
                    }
                }
                Err(error.into())
            }
        }
    }

    /// Sets how this node reaches the rest of the fleet.
    pub fn set_fleet_link(&self, link: Arc<dyn crate::ports::FleetLink>) {
        *self.fleet.write().unwrap_or_else(|p| p.into_inner()) = Some(link);
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

    /// The seats acquired since the last call (and forgets them).
    pub fn take_fresh(&self) -> HashSet<String> {
        std::mem::take(&mut *self.fresh.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether a run's box is remote (reachable from every node: polled by the duty holder).
    pub fn is_remote(&self, run: &RunRecord) -> bool {
        run.placement.as_deref() == Some("e2b")
    }

    /// Marks this node draining (placed no seats) or not, on its registration.
    pub async fn set_draining(&self, draining: bool) -> Result<(), Error> {
        let mut session = self.session();
        session.info.draining = draining;
        seat::register_node(
            self.store.as_ref(),
            &self.keys,
            &session.info,
            session.lease,
        )
        .await?;
        self.session
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .info
            .draining = draining;
        Ok(())
    }

    /// Whether this node is draining.
    pub fn draining(&self) -> bool {
        self.session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .info
            .draining
    }

    /// The live nodes seats may be placed on: registered and not draining.
    pub async fn placeable_nodes(&self) -> Result<Vec<seat::NodeInfo>, Error> {
        Ok(seat::nodes(self.store.as_ref(), &self.keys)
            .await?
            .into_iter()
            .filter(|node| !node.draining)
            .collect())
    }

    /// The node `seat` is placed on among the live nodes (rendezvous hashing), with its info.
    pub async fn placed_on(&self, seat: &str) -> Result<Option<seat::NodeInfo>, Error> {
        let nodes = self.placeable_nodes().await?;
        let owner = boxfleet_cluster::placement::owner(seat, nodes.iter().map(|n| n.node.as_str()))
            .map(str::to_owned);
        Ok(owner.and_then(|owner| nodes.into_iter().find(|n| n.node == owner)))
    }

    /// Counts a collection or an answer in progress on `seat` until the guard drops.
    pub fn working_on(&self, seat: &str) -> WorkGuard {
        *self
            .working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(seat.to_owned())
            .or_default() += 1;
        WorkGuard {
            working: self.working.clone(),
            settled: self.work_settled.clone(),
            seat: seat.to_owned(),
        }
    }

    fn work_count(&self, seat: &str) -> usize {
        self.working
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(seat)
            .copied()
            .unwrap_or(0)
    }

    /// Hands a seat over gracefully: no new work starts on it, the launches, collections and
    /// answers in progress settle (at most `settle`), the inbox work holding its lock
    /// finishes, then the holder key is deleted under the fence and the seat's actor stops.
    /// The node the seat is placed on acquires it and runs its recovery pass. `false` when
    /// this node did not hold it.
    pub async fn release_seat(&self, seat: &str, settle: Duration) -> Result<bool, Error> {
        let Some(fence) = self.known_fence(seat) else {
            return Ok(false);
        };
        if !self
            .releasing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(seat.to_owned())
        {
            return Ok(false);
        }
        // the work in progress first (new work is refused from here on: `seat_fence` says the
        // seat is being handed over), then the lock, which inbox work holds; waiting for the
        // work while holding the lock would stall a launch queued on it until `settle` ran out
        let deadline = tokio::time::Instant::now() + settle;
        loop {
            let settled = self.work_settled.notified();
            if self.work_count(seat) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                warn!(seat, "seat_released_unsettled");
                break;
            }
        }
        // a resume dispatched to the engine is in flight until the engine settles it (its run
        // stays `resumed` till then, and the engine's take and settle still act under this
        // fence, see `in_flight_fence`): handed over before that, the new holder's recovery
        // pass would reap it as an abandoned claim
        loop {
            match self.runs.list_by_seat(seat).await {
                Ok(runs) if runs.iter().all(|r| r.record.status != Status::Resumed) => break,
                Ok(_) => {}
                Err(error) => {
                    warn!(seat, %error, "seat_release_unchecked");
                    break;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                warn!(seat, "seat_released_unsettled");
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _lock = self.seat_lock(seat).await;
        let released = seat::release(self.store.as_ref(), &self.keys, &fence).await;
        self.seats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(seat);
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(seat);
        if let Some(actor) =
            ractor::ActorRef::<crate::seat::SeatMsg>::where_is(format!("{}/seat/{seat}", self.node))
        {
            actor.stop(Some("seat released".into()));
        }
        self.releasing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(seat);
        let released = released?;
        info!(seat, epoch = fence.epoch, node = %self.node, released, "seat_released");
        Ok(released)
    }

    /// Releases every seat this node holds, gracefully and in parallel (see
    /// [`Coordinator::release_seat`]); returns how many it still holds after.
    pub async fn release_all(&self, settle: Duration) -> usize {
        let releases = self
            .held_seats()
            .into_iter()
            .map(|fence| async move { self.release_seat(&fence.seat, settle).await });
        for outcome in futures::future::join_all(releases).await {
            if let Err(error) = outcome {
                warn!(%error, "seat_release_failed");
            }
        }
        self.held_seats().len()
    }

    /// The placement pass (the `Seats` duty, DESIGN §7): every seat with runs, mail or a
    /// holder is placed by rendezvous hashing over the live, non-draining nodes. A seat
    /// placed here that nobody holds is acquired (and recovered); a seat held here that is
    /// placed elsewhere is released gracefully, in the background; a seat this node thought
    /// it held that the store says it does not is forgotten. Returns the seats acquired.
    pub async fn rebalance(self: &Arc<Self>) -> Result<Vec<String>, Error> {
        // what this node believes, read before the store: a seat acquired after this line is
        // in the store's answer below, never judged against an older one
        let believed = self.held_seats();
        let nodes = self.placeable_nodes().await?;
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        let held = seat::holders(self.store.as_ref(), &self.keys).await?;
        let mut seats: BTreeSet<String> = held.keys().cloned().collect();
        seats.extend(
            self.runs
                .list()
                .await?
                .into_iter()
                .map(|run| run.record.seat),
        );
        seats.extend(seat::seats_with_mail(self.store.as_ref(), &self.keys).await?);
        let me = self.holder();
        // what the store no longer says is ours is not ours
        for fence in believed {
            let still = held
                .get(&fence.seat)
                .is_some_and(|h| h.holder == me && h.epoch == fence.epoch);
            if !still {
                self.lose_seat(&fence.seat);
            }
        }
        let mut acquired = Vec::new();
        for seat in seats {
            let placed = boxfleet_cluster::placement::owner(&seat, names.iter().copied());
            match held.get(&seat) {
                Some(h) if h.holder == me => {
                    if placed.is_some_and(|p| p != self.node) {
                        let (me, seat) = (self.clone(), seat.clone());
                        tokio::spawn(async move {
                            if let Err(error) = me.release_seat(&seat, RELEASE_SETTLE).await {
                                warn!(seat, %error, "seat_release_failed");
                            }
                        });
                    } else if h.lease == self.session().lease && !self.holds(&seat) {
                        // ours in the store but not acting for it here (a recovery pass that
                        // failed): acquire is idempotent on our own lease, and runs the pass
                        match self.seat_fence(&seat).await {
                            Ok(_) => acquired.push(seat),
                            Err(error) => warn!(seat, %error, "seat_acquire_failed"),
                        }
                    }
                }
                Some(_) => {}
                None if placed == Some(self.node.as_str()) => match self.seat_fence(&seat).await {
                    Ok(_) => acquired.push(seat),
                    Err(error) => warn!(seat, %error, "seat_acquire_failed"),
                },
                None => {}
            }
        }
        Ok(acquired)
    }

    fn holder(&self) -> Holder {
        Holder {
            node: self.node.clone(),
            incarnation: self.incarnation.clone(),
        }
    }

    /// The seats this node holds, with their fences.
    pub fn held_seats(&self) -> Vec<Fence> {
        let seats = self.seats.lock().unwrap_or_else(|p| p.into_inner());
        let mut held: Vec<Fence> = seats.values().cloned().collect();
        held.sort_by(|a, b| a.seat.cmp(&b.seat));
        held
    }

    /// A run's local box lives on one host: a node on another host cannot reach it, and
    /// must never read its absence as the box being gone.
    pub fn reachable(&self, run: &RunRecord) -> Result<(), Error> {
        match run.host.as_deref() {
            Some(host) if host != self.host => Err(Error::Box(BoxError::Unreachable(format!(
                "box {} of run {} lives on host {host}; node {} runs on host {} and cannot \
                 reach it: give the seat to a node on {host} (nodes on one host share \
                 node.boxes_dir)",
                run.sandbox_id.as_deref().unwrap_or("?"),
                run.turn_id,
                self.node,
                self.host
            )))),
            _ => Ok(()),
        }
    }

    /// Whether this node holds `seat` (as far as it knows; the store has the last word).
    pub fn holds(&self, seat: &str) -> bool {
        self.known_fence(seat).is_some()
    }

    fn known_fence(&self, seat: &str) -> Option<Fence> {
        let seats = self.seats.lock().unwrap_or_else(|p| p.into_inner());
        seats.get(seat).cloned()
    }

    /// The fence for finishing work already in flight on `seat` — an engine's take and settle
    /// of a resume this node dispatched: the fence this node holds, even while it hands the
    /// seat over (the release waits for such work), else [`Coordinator::seat_fence`]. New work
    /// asks `seat_fence`, which a seat being handed over refuses.
    async fn in_flight_fence(&self, seat: &str) -> Result<Fence, Error> {
        match self.known_fence(seat) {
            Some(fence) => Ok(fence),
            None => self.seat_fence(seat).await,
        }
    }

    /// The fence this node holds `seat` under, acquiring it (and running its recovery
    /// pass) when it does not hold it yet.
    pub async fn seat_fence(&self, seat: &str) -> Result<Fence, Error> {
        check_id("seat", seat)?;
        if self
            .releasing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(seat)
        {
            return Err(Error::SeatHeldElsewhere {
                seat: seat.to_owned(),
                holder: format!("{} (handing it over)", self.node),
            });
        }
        if let Some(fence) = self.known_fence(seat) {
            return Ok(fence);
        }
        // one acquire (and one recovery pass) at a time per seat: a second caller waits for
        // the first's recovery and then finds the fence, so no recovery pass ever runs beside
        // work that already holds the fence (it would read a launch in progress as abandoned)
        let _acquiring = keyed_lock(&self.acquiring, seat).await;
        if let Some(fence) = self.known_fence(seat) {
            return Ok(fence);
        }
        // a seat is taken only by the node it is placed on: any other node that reached
        // here on a stale route would take it from its place and hand it straight back
        if let Some(placed) = self.placed_on(seat).await?
            && placed.node != self.node
        {
            return Err(Error::SeatHeldElsewhere {
                seat: seat.to_owned(),
                holder: format!("nobody; it is placed on node {}", placed.node),
            });
        }
        match seat::acquire(
            self.store.as_ref(),
            &self.keys,
            seat,
            &self.holder(),
            self.session().lease,
        )
        .await?
        {
            Acquire::Held(fence) => {
                info!(seat, epoch = fence.epoch, node = %self.node, "seat_acquired");
                self.fresh
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(seat.to_owned());
                self.seats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(seat.to_owned(), fence.clone());
                self.recover(&fence).await?;
                self.start_seat_actor(seat).await;
                Ok(fence)
            }
            Acquire::HeldBy { holder, .. } => Err(Error::SeatHeldElsewhere {
                seat: seat.to_owned(),
                holder: format!("{} ({})", holder.node, holder.incarnation),
            }),
        }
    }

    /// The node's actor `{node}/{kind}/{id}`, started under the node's `{node}/{supervisor}`
    /// when it is not running. `None` outside a node's tree (unit use), or when it could not
    /// start (a concurrent start of the same name is refused: whichever runs is returned).
    async fn child<A>(
        &self,
        supervisor: &str,
        kind: &str,
        id: &str,
        restart: crate::supervisor::Restart,
        make: impl Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    ) -> Option<ractor::ActorRef<A::Msg>>
    where
        A: ractor::Actor,
    {
        let name = format!("{}/{kind}/{id}", self.node);
        if let Some(actor) = ractor::ActorRef::<A::Msg>::where_is(name.clone()) {
            return Some(actor);
        }
        let supervisor = ractor::ActorRef::<crate::supervisor::SupervisorMsg>::where_is(format!(
            "{}/{supervisor}",
            self.node
        ))?;
        let spec = crate::supervisor::ChildSpec::worker(name.clone(), restart, make);
        if let Err(error) = crate::supervisor::start_child(&supervisor, spec).await {
            warn!(kind, id, %error, "child_not_started");
        }
        ractor::ActorRef::<A::Msg>::where_is(name)
    }

    /// Starts the seat's actor under the node's `seats` supervisor (when the tree runs).
    async fn start_seat_actor(&self, seat: &str) {
        let Some(me) = self.me() else { return };
        let args = crate::seat::SeatArgs {
            coordinator: me,
            seat: seat.to_owned(),
            started: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        self.child(
            "seats",
            "seat",
            seat,
            crate::supervisor::Restart::Transient,
            move || (crate::seat::SeatActor, args.clone()),
        )
        .await;
    }

    /// Pokes the run's driver (`{node}/run/{turn}`), starting it under the node's `runs`
    /// supervisor when it is not running. Outside a node's tree (unit use) it does nothing.
    pub async fn drive(&self, turn_id: &str, message: crate::run::RunMsg) {
        let Some(me) = self.me() else { return };
        let args = crate::run::RunArgs {
            coordinator: me,
            turn_id: turn_id.to_owned(),
        };
        let driver = self
            .child(
                "runs",
                "run",
                turn_id,
                crate::supervisor::Restart::Transient,
                move || (crate::run::RunActor, args.clone()),
            )
            .await;
        match driver {
            Some(actor) => {
                let _ = actor.cast(message);
            }
            None => warn!(turn_id, "run_driver_not_started"),
        }
    }

    /// One control operation on a box, through its `Box{sandbox_id}` actor (started under
    /// the node's `boxes` supervisor when needed), or straight to the provider outside a tree.
    pub async fn box_op(
        &self,
        cell: &str,
        sandbox_id: &str,
        op: crate::boxes::BoxOp,
    ) -> Result<Option<Arc<dyn Sandbox>>, BoxError> {
        use crate::boxes::{BoxArgs, BoxMsg};
        let provider = self
            .provider(cell)
            .map_err(|error| BoxError::Failed(error.to_string()))?
            .clone();
        let args = BoxArgs {
            provider,
            sandbox_id: sandbox_id.to_owned(),
        };
        let spawn_args = args.clone();
        let actor = self
            .child(
                "boxes",
                "box",
                sandbox_id,
                crate::supervisor::Restart::Temporary,
                move || (crate::boxes::BoxActor, spawn_args.clone()),
            )
            .await;
        let Some(actor) = actor else {
            return crate::boxes::run(&args, op).await;
        };
        match actor
            .call(
                |reply| BoxMsg::Do(op, reply),
                Some(crate::boxes::OP_BOUND * 2),
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            // the actor stopped under us (idle, or the box was killed): do it directly
            _ => crate::boxes::run(&args, op).await,
        }
    }

    async fn box_handle(
        &self,
        cell: &str,
        sandbox_id: &str,
        op: crate::boxes::BoxOp,
    ) -> Result<Arc<dyn Sandbox>, BoxError> {
        self.box_op(cell, sandbox_id, op)
            .await?
            .ok_or_else(|| BoxError::Failed(format!("{op:?} of box {sandbox_id} gave no handle")))
    }

    /// Re-runs the recovery pass of a seat this node holds (a seat actor's restart).
    pub async fn recover_held(&self, seat: &str) -> Result<(), Error> {
        // under the seat's lock: never beside a launch in progress, which it would read as
        // abandoned
        let _seat = self.seat_lock(seat).await;
        match self.known_fence(seat) {
            Some(fence) => self.recover(&fence).await,
            None => Ok(()),
        }
    }

    /// The coordinator as shared, once the node registered it.
    fn me(&self) -> Option<Arc<Coordinator>> {
        self.me
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(std::sync::Weak::upgrade)
    }

    /// Registers the shared coordinator so seats it acquires get their actors.
    pub fn register(self: &Arc<Self>) {
        *self.me.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::downgrade(self));
    }

    /// The fence of the seat a run belongs to.
    pub async fn seat_fence_of_run(&self, turn_id: &str) -> Result<Fence, Error> {
        let run = self
            .runs
            .read(turn_id)
            .await?
            .ok_or_else(|| Error::Invalid(format!("run {turn_id} is gone")))?;
        self.seat_fence(&run.record.seat).await
    }

    /// Serializes one seat's launches and inbox work on this node.
    async fn seat_lock(&self, seat: &str) -> tokio::sync::OwnedMutexGuard<()> {
        keyed_lock(&self.seat_locks, seat).await
    }

    /// Forgets a seat this node found it no longer holds.
    pub fn lose_seat(&self, seat: &str) {
        self.seats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(seat);
        warn!(seat, node = %self.node, "sandbox_seat_not_held");
    }

    fn provider(&self, cell: &str) -> Result<&Arc<dyn Provider>, Error> {
        self.providers.get(cell).ok_or_else(|| {
            Error::Invalid(format!("no sandbox cell {cell:?} on node {}", self.node))
        })
    }

    fn runner(&self, name: &str) -> Result<&Arc<dyn Runner>, Error> {
        self.runners.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.runners.keys().map(String::as_str).collect();
            Error::Invalid(format!(
                "no runner {name:?}: this node runs {}",
                known.join(", ")
            ))
        })
    }

    /// Whether a run holds the seat's inbox.
    pub async fn seat_busy(&self, seat: &str) -> Result<bool, Error> {
        Ok(!self.runs.list_active(seat).await?.is_empty())
    }

    // ---------------------------------------------------------------------------------------
    // launch

    /// run_sandbox: opens the row (the seat is busy from here), makes the box, starts the job,
    /// and commits the conversation. A failure after the row opened ends the run.
    pub async fn launch(&self, request: LaunchRequest) -> LaunchOutcome {
        match self.try_launch(request).await {
            Ok(outcome) => outcome,
            Err(error) => {
                let class = match &error {
                    Error::Invalid(_) => RefusalClass::Refused,
                    Error::Run(RunError::Refused(_)) => RefusalClass::Refused,
                    _ => RefusalClass::Unavailable,
                };
                LaunchOutcome::Refused {
                    class,
                    reason: error.to_string(),
                }
            }
        }
    }

    async fn try_launch(&self, mut request: LaunchRequest) -> Result<LaunchOutcome, Error> {
        if !self.company.has_seat(&request.seat) {
            return Err(Error::Invalid(format!(
                "seat {:?} is not in the company document: add it under company.seats, or launch for a seat that is",
                request.seat
            )));
        }
        // runner, cell, model and credentials, decided before anything is written: a model
        // the box could not route is refused here, never left to stall in a box
        let plan = self.plan(
            &request.seat,
            Some(request.runner.as_str()).filter(|r| !r.is_empty()),
            request.model.as_deref(),
        )?;
        let runner_name = plan.runner.clone();
        request.runner = runner_name.clone();
        let runner = self.runner(&runner_name)?.clone();
        if runner_name == "command" && request.command.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Invalid("the command runner needs --command".into()));
        }
        let provider = self.provider(&plan.cell)?.clone();
        // a launch is work in progress on its seat until it returns: a graceful release
        // waits for it past the seat lock, which it lets go once its row is open
        let _working = self.working_on(&request.seat);
        let fence = self.seat_fence(&request.seat).await?;
        let seat_guard = self.seat_lock(&request.seat).await;
        if let Some(busy) = self.runs.list_active(&request.seat).await?.first() {
            return Ok(LaunchOutcome::Refused {
                class: RefusalClass::Unavailable,
                reason: format!(
                    "seat {} is busy with run {} ({}); it takes one coding job at a time",
                    request.seat, busy.record.turn_id, busy.record.status
                ),
            });
        }
        let turn_id = request.turn_id.clone().unwrap_or_else(|| new_id("turn"));
        check_id("turn_id", &turn_id)?;
        let launch_id = new_id("launch");
        let now = Utc::now();
        let mut record =
            RunRecord::launching(&turn_id, &launch_id, &request.seat, &runner_name, now);
        record.iteration = request.iteration;
        record.brief = request.brief.clone();
        // the task is shown on the board and announced: a secret pasted into a command or a
        // brief is redacted there (the job itself still gets what it was given)
        record.task = boxfleet_redact::redact(if request.task.is_empty() {
            request.command.as_deref().unwrap_or(&request.brief)
        } else {
            &request.task
        });
        record.requester = request.requester.clone();
        record.work_item = request.work_item.clone();
        record.conversation_key = request.conversation_key.clone();
        record.partition = request.partition.clone();
        record.owes_answer = request.owes_answer;
        record.trace = request.trace.clone();
        record.pause_ttl_seconds = request.pause_ttl_seconds;
        record.owner = Some(self.incarnation.clone());
        record.placement = Some(provider.cell().to_owned());
        if provider.cell() != "e2b" {
            record.host = Some(self.host.clone());
        }
        self.runs
            .apply(
                &fence,
                &turn_id,
                Transition::OpenLaunch {
                    record: Box::new(record),
                },
            )
            .await?;
        // the seat is busy from the open row: a second launch now sees it
        drop(seat_guard);
        info!(seat = %request.seat, turn_id, launch_id, "sandbox_run_started");

        let started = self
            .provision_and_start(
                &fence,
                &turn_id,
                &launch_id,
                provider.as_ref(),
                runner.as_ref(),
                &request,
                &plan,
                None,
            )
            .await;
        match started {
            Ok(sandbox_id) => {
                let commit = Transition::CommitSuspension {
                    launch_id: launch_id.clone(),
                    conversation: request.conversation.clone(),
                };
                if let Err(error) = self.runs.apply(&fence, &turn_id, commit).await {
                    self.end_run(
                        &fence,
                        &turn_id,
                        EndingReason::LaunchFailed,
                        &error.to_string(),
                        EndingGuard::Any,
                    )
                    .await;
                    return Err(error.into());
                }
                Ok(LaunchOutcome::Launched {
                    turn_id,
                    launch_id,
                    sandbox_id,
                })
            }
            Err(error) => {
                warn!(turn_id, %error, "sandbox_launch_failed");
                self.end_run(
                    &fence,
                    &turn_id,
                    EndingReason::LaunchFailed,
                    &error.to_string(),
                    EndingGuard::Any,
                )
                .await;
                Ok(LaunchOutcome::Refused {
                    class: RefusalClass::Unavailable,
                    reason: format!("the launch failed: {error}"),
                })
            }
        }
    }

    /// What a launch for `seat` runs (runner, cell, model, credentials, setup), decided
    /// before any box exists; a model the box could not route is refused here.
    fn plan(
        &self,
        seat: &str,
        runner: Option<&str>,
        model: Option<&str>,
    ) -> Result<SandboxPlan, Error> {
        self.company
            .plan_sandbox(seat, runner, model)
            .map_err(|error| Error::Invalid(error.to_string()))
    }

    /// Makes (or reuses) the box and starts the job, naming both on the row.
    #[allow(clippy::too_many_arguments)]
    async fn provision_and_start(
        &self,
        fence: &Fence,
        turn_id: &str,
        launch_id: &str,
        provider: &dyn Provider,
        runner: &dyn Runner,
        request: &LaunchRequest,
        plan: &SandboxPlan,
        reuse: Option<String>,
    ) -> Result<String, Error> {
        let sandbox: Arc<dyn Sandbox> = match &reuse {
            Some(sandbox_id) => {
                self.box_handle(provider.cell(), sandbox_id, crate::boxes::BoxOp::Connect)
                    .await?
            }
            None => {
                let spec = BoxSpec {
                    turn_id: turn_id.to_owned(),
                    seat: request.seat.clone(),
                    env: BTreeMap::new(),
                    timeout_seconds: self.box_timeout.as_secs(),
                };
                provider.create(&spec).await?
            }
        };
        let sandbox_id = sandbox.id().to_owned();
        let fresh = reuse.is_none();
        let started: Result<(), Error> = async {
            let mut env = plan.env.clone();
            env.insert("BOXFLEET_AGENT_HANDLE".to_owned(), request.seat.clone());
            env.insert("BOXFLEET_TURN_ID".to_owned(), turn_id.to_owned());
            if let Some(url) = plan.base_url.as_ref().filter(|_| plan.runner == "opencode") {
                // OpenCode takes its endpoint in its own config file, which the runner writes from
                // these two (and removes them from the box's env)
                env.insert("BOXFLEET_OPENCODE_BASE_URL".to_owned(), url.clone());
                let wire = match plan.wire {
                    Some(boxfleet_config::providers::Wire::Anthropic) => "anthropic",
                    _ => "openai",
                };
                env.insert("BOXFLEET_OPENCODE_WIRE".to_owned(), wire.to_owned());
            }
            // a reused box skips the steps: its provisioning survives with its disk
            if reuse.is_none()
                && let Err(text) = apply_setup(sandbox.as_ref(), &plan.setup, &env).await
            {
                warn!(turn_id, sandbox_id, %text, "sandbox_setup_failed");
                // a half-provisioned box never receives a brief (it is killed below)
                return Err(Error::Setup(text));
            }
            runner.install(sandbox.as_ref()).await?;
            // a cli-agent entry's login, seeded from the shared directory on every launch (a
            // reused box gets the newest) and recorded in the box's records; written back by
            // compare-and-swap at collection and at any teardown
            if let Some(dir) = &plan.login_dir {
                crate::credentials::seed(
                    sandbox.as_ref(),
                    dir,
                    &crate::credentials::CLAUDE_CODE_FILES,
                    crate::credentials::CLAUDE_CODE_BOX_DIR,
                )
                .await?;
            }
            let spec = LaunchSpec {
                turn_id: turn_id.to_owned(),
                launch_id: launch_id.to_owned(),
                seat: request.seat.clone(),
                brief: with_setup_briefs(&request.brief, &plan.setup),
                command: request.command.clone(),
                timeout_seconds: request.timeout_seconds,
                model: plan.model.clone(),
                max_turns: plan.max_turns,
                env,
            };
            let handle = runner.start(sandbox.as_ref(), &spec).await?;
            let job = StoredJob {
                runner: runner.name().to_owned(),
                handle,
                command: request.command.clone(),
                timeout_seconds: request.timeout_seconds,
                model: plan.model.clone(),
                started_at: Some(Utc::now()),
            };
            let attach = Transition::AttachBox {
                launch_id: launch_id.to_owned(),
                sandbox_id: sandbox_id.clone(),
                placement: provider.cell().to_owned(),
                job: Some(serde_json::to_string(&job).unwrap_or_default()),
            };
            self.runs.apply(fence, turn_id, attach).await?;
            Ok(())
        }
        .await;
        if let Err(error) = started {
            // a box this launch made and could not hand to its record is named by nothing:
            // it goes now, or it would run (and bill) until the orphan reaper finds it. A
            // reused box stays: its record names it, and whoever settles the run kills it.
            if fresh {
                match provider.kill(&sandbox_id).await {
                    Ok(()) => info!(turn_id, sandbox_id, "sandbox_launch_box_killed"),
                    Err(kill) => warn!(turn_id, sandbox_id, error = %kill, "sandbox_kill_failed"),
                }
            }
            return Err(error);
        }
        Ok(sandbox_id)
    }

    fn job_of(record: &RunRecord) -> Option<StoredJob> {
        serde_json::from_str(record.job.as_deref()?).ok()
    }

    // ---------------------------------------------------------------------------------------
    // the completion poll

    /// Polls one running run's job (attach: never wakes), refreshing its keepalive. `Some`
    /// when the job finished.
    pub async fn poll(&self, run: &RunRecord) -> Result<Option<JobState>, Error> {
        let (Some(sandbox_id), Some(job)) = (&run.sandbox_id, Self::job_of(run)) else {
            return Ok(None);
        };
        self.reachable(run)?;
        let provider = self.provider(run.placement.as_deref().unwrap_or(&self.default_cell))?;
        let cell = provider.cell().to_owned();
        let sandbox = match self
            .box_handle(&cell, sandbox_id, crate::boxes::BoxOp::Attach)
            .await
        {
            Ok(sandbox) => sandbox,
            Err(BoxError::Gone(_)) => return Ok(Some(JobState::Done { exit_code: None })),
            Err(error) => return Err(error.into()),
        };
        if let Err(error) = sandbox.set_timeout(self.box_timeout).await {
            warn!(turn_id = %run.turn_id, %error, "sandbox_keepalive_failed");
        }
        let runner = self.runner(&job.runner)?;
        match runner.poll(sandbox.as_ref(), &job.handle).await? {
            JobState::Running => self.backstop(run, &job, sandbox.as_ref()).await,
            done => Ok(Some(done)),
        }
    }

    /// The engine-side backstop of a job with an in-box deadline: past the deadline, its kill
    /// grace and [`BACKSTOP_MARGIN`], the job is ended here, and the job's directory records
    /// that the backstop — not the job's own clock — ended it.
    async fn backstop(
        &self,
        run: &RunRecord,
        job: &StoredJob,
        sandbox: &dyn Sandbox,
    ) -> Result<Option<JobState>, Error> {
        let (Some(deadline), Some(started_at)) = (job.timeout_seconds, job.started_at) else {
            return Ok(None);
        };
        let limit = Duration::from_secs(deadline + 10) + BACKSTOP_MARGIN;
        let ran = (Utc::now() - started_at).to_std().unwrap_or_default();
        if ran < limit {
            return Ok(None);
        }
        let text = format!(
            "the engine's backstop ended the job after {}s: it had not ended on its own {}s past its in-box deadline of {deadline}s; the client timed out, and the job's execution state is uncertain",
            ran.as_secs(),
            limit.as_secs() - deadline
        );
        warn!(turn_id = %run.turn_id, %text, "sandbox_backstop_fired");
        let path = format!("{}/{BACKSTOP_FILE}", job.handle.dir);
        sandbox.write_file(&path, text.as_bytes()).await?;
        sandbox.kill_job(&job.handle).await?;
        Ok(Some(JobState::Done { exit_code: None }))
    }

    // ---------------------------------------------------------------------------------------
    // completion → collect → charge → publish → park or resume

    /// A job finished: claims its completion (at most once), collects everything before the
    /// box is paused, charges, publishes the phase record once, then parks on the job's
    /// question or hands the findings to the engine.
    pub async fn complete(&self, turn_id: &str, launch_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        let _working = self.working_on(&run.record.seat);
        let fence = self.seat_fence(&run.record.seat).await?;
        let claim = Transition::ClaimCompletion {
            launch_id: launch_id.to_owned(),
        };
        let claimed = match self.runs.apply(&fence, turn_id, claim).await {
            Ok(Outcome::Written(run)) => run.record,
            Ok(Outcome::Deleted) => return Ok(()),
            // a duplicate, an old job's completion, or a launch still unwinding: nothing to do
            Err(RunError::Refused(_)) => return Ok(()),
            Err(error) => return Err(error.into()),
        };
        match self.collect_claimed(&fence, &claimed).await {
            Ok(()) => Ok(()),
            Err(error) => {
                warn!(turn_id, %error, "sandbox_collect_retried");
                let hand_back = Transition::HandBackClaim {
                    launch_id: launch_id.to_owned(),
                    collect_failed: true,
                };
                if let Err(error) = self.runs.apply(&fence, turn_id, hand_back).await {
                    warn!(turn_id, %error, "sandbox_claim_unreverted");
                    self.end_run(
                        &fence,
                        turn_id,
                        EndingReason::ClaimUnreverted,
                        &error.to_string(),
                        EndingGuard::Claim {
                            launch_id: launch_id.to_owned(),
                        },
                    )
                    .await;
                }
                Err(error)
            }
        }
    }

    async fn collect_claimed(&self, fence: &Fence, run: &RunRecord) -> Result<(), Error> {
        let turn_id = &run.turn_id;
        let launch_id = &run.launch_id;
        let job = Self::job_of(run)
            .ok_or_else(|| Error::Invalid(format!("run {turn_id} names no job")))?;
        self.reachable(run)?;
        let runner = self.runner(&job.runner)?.clone();
        let provider = self
            .provider(run.placement.as_deref().unwrap_or(&self.default_cell))?
            .clone();
        let sandbox_id = run.sandbox_id.clone().unwrap_or_default();
        let (collected, sandbox) = match self
            .box_handle(provider.cell(), &sandbox_id, crate::boxes::BoxOp::Connect)
            .await
        {
            Ok(sandbox) => match runner.collect(sandbox.as_ref(), &job.handle).await {
                Ok(collected) => (collected, Some(sandbox)),
                Err(error) => (
                    Collected {
                        read_errors: vec![format!("the job's output could not be read: {error}")],
                        ..Collected::default()
                    },
                    Some(sandbox),
                ),
            },
            Err(BoxError::Gone(_)) => (
                Collected {
                    read_errors: vec![format!("box {sandbox_id} is gone")],
                    ..Collected::default()
                },
                None,
            ),
            Err(error) => return Err(error.into()),
        };
        // redacted again at publish: the runner redacted what it read, and nothing from a box
        // reaches the record, an event or a person without passing here
        let mut collected = redact_collected(collected);
        if sandbox.is_none() {
            self.end_run(
                fence,
                turn_id,
                EndingReason::CollectUnreachable,
                &format!("box {sandbox_id} is gone"),
                EndingGuard::Claim {
                    launch_id: launch_id.clone(),
                },
            )
            .await;
            return Ok(());
        }
        let usage = Usage {
            input_tokens: collected.input_tokens,
            output_tokens: collected.output_tokens,
            cache_read_tokens: collected.cache_read_tokens,
            cache_write_tokens: collected.cache_write_tokens,
            cost_micros: collected.cost_micros,
        };
        for share in [Share::Seat, Share::Company] {
            let charge = Transition::Charge {
                launch_id: launch_id.clone(),
                share,
                usage,
            };
            match self.runs.apply(fence, turn_id, charge).await {
                Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        for warning in &collected.warnings {
            warn!(turn_id, launch_id, warning = %warning, "{}", warning);
        }
        // the model receipt: what was sent against what the CLI's own output says ran
        // the backstop's own record, read before anything is torn down: a job the engine ended
        // is told apart from a check that hit its own deadline
        let backstop = match &sandbox {
            Some(sandbox) if job.timeout_seconds.is_some() => {
                let path = format!("{}/{BACKSTOP_FILE}", job.handle.dir);
                match sandbox.read_file(&path).await {
                    Ok(found) => found.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
                    Err(error) => {
                        collected
                            .read_errors
                            .push(format!("{path} could not be read: {error}"));
                        None
                    }
                }
            }
            _ => None,
        };
        let receipt = boxfleet_cluster::phase::ModelReceipt::new(
            job.model.as_deref(),
            collected.effective_model.as_deref(),
            collected.model_source.as_deref(),
        );
        let mismatch = receipt.mismatch_text();
        let mismatch_fails = mismatch.is_some()
            && self.company.providers.sandbox.model_mismatch
                == boxfleet_config::providers::MismatchPolicy::Fail;
        if let Some(text) = &mismatch {
            warn!(turn_id, launch_id, %text, "sandbox_model_mismatch");
        }
        let failed = (!collected.succeeded() || mismatch_fails) && collected.question.is_none();
        let failed = failed || backstop.is_some();
        let reason = if backstop.is_some() {
            Some(FailureReason::Backstop)
        } else if mismatch_fails {
            Some(FailureReason::ModelMismatch)
        } else if !collected.read_errors.is_empty() {
            Some(FailureReason::CollectIncomplete)
        } else {
            None
        };
        let error_text = if failed {
            let mut parts: Vec<String> = mismatch
                .iter()
                .filter(|_| mismatch_fails)
                .cloned()
                .collect();
            parts.extend(collected.read_errors.iter().cloned());
            match collected.exit_code {
                Some(124) if job.timeout_seconds.is_some() => parts.push(format!(
                    "the check timed out (its in-box deadline of {}s)",
                    job.timeout_seconds.unwrap_or_default()
                )),
                Some(code) if code != 0 => parts.push(format!("exited with status {code}")),
                None if backstop.is_some() => parts.extend(backstop.clone()),
                None => parts.push("the job's process group died without an exit status".into()),
                _ => {}
            }
            if !collected.stderr_tail.is_empty() {
                parts.push(collected.stderr_tail.clone());
            }
            parts.join("\n")
        } else {
            String::new()
        };
        let phase = PhaseRecord {
            turn_id: turn_id.clone(),
            iteration: run.iteration,
            launch_id: launch_id.clone(),
            started_at: Some(run.created_at),
            duration_ms: (Utc::now() - run.created_at).num_milliseconds().max(0),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.input_tokens + usage.output_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            cost_usd: usage.cost_micros as f64 / 1e6,
            model: receipt,
            coding_agent: run.coding_agent.clone(),
            sandbox_id: sandbox_id.clone(),
            response: cut(&collected.report, MAX_REPORT_BYTES),
            delivered_refs: collected.delivered_refs.clone(),
            activity_transcript: collected.transcript.clone(),
            failed,
            reason: reason.filter(|_| failed),
            error: cut(&boxfleet_redact::redact(&error_text), MAX_REPORT_BYTES),
            exit_code: collected.exit_code,
            notes: collected.question.as_ref().map(|q| q.question.clone()),
            work_item: run.work_item.clone(),
            conversation_key: run.conversation_key.clone(),
        };
        let publish = Transition::PublishPhase {
            launch_id: launch_id.clone(),
            phase: phase.to_value(),
        };
        match self.runs.apply(fence, turn_id, publish).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
            Err(error) => return Err(error.into()),
        }
        // a login the run refreshed goes back before the box is paused (a kill of the box, by
        // whoever settles the run or by the orphan reaper, gives back what it refreshed later)
        if let Some(sandbox) = &sandbox {
            crate::credentials::give_back(sandbox.as_ref()).await;
        }
        // evidence is read; now the box may be paused
        if sandbox.is_some() {
            match self
                .box_op(provider.cell(), &sandbox_id, crate::boxes::BoxOp::Pause)
                .await
            {
                Ok(_) => {
                    let mark = Transition::MarkPaused {
                        sandbox_id: sandbox_id.clone(),
                    };
                    let _ = self.runs.apply(fence, turn_id, mark).await;
                }
                Err(error) => warn!(turn_id, %error, "sandbox_pause_failed"),
            }
        }
        if let Some(asked) = &collected.question {
            // resolved once, against the org chart, in the same write as the question
            let audience =
                self.company
                    .resolve(&run.seat, run.requester.as_deref(), &asked.audience);
            let question = Question {
                text: cut(&asked.question, MAX_QUESTION_BYTES),
                audience: asked.audience.clone(),
                audience_handles: audience.handles,
                audience_fallback: audience.fallback,
                asked_at: Utc::now(),
                branch: asked.branch.clone(),
            };
            let park = Transition::Park {
                launch_id: launch_id.clone(),
                question,
            };
            self.runs.apply(fence, turn_id, park).await?;
            info!(turn_id, launch_id, "sandbox_clarification_requested");
            // a parked run holds nothing: the seat's mail flows again
            self.pump(&run.seat).await;
            return Ok(());
        }
        let resume = Resume {
            seat: run.seat.clone(),
            turn_id: turn_id.clone(),
            launch_id: launch_id.clone(),
            kind: ResumeKind::Findings,
            conversation: run.conversation.clone().unwrap_or_default(),
            iteration: run.iteration,
            work_item: run.work_item.clone(),
            reply: if failed {
                format!("{}\n{}", collected.report, error_text)
            } else {
                collected.report.clone()
            },
            succeeded: !failed,
            question: None,
            branch: None,
            command: job.command.clone(),
        };
        self.dispatch(EngineDown::Resume(Box::new(resume)));
        Ok(())
    }

    fn dispatch(&self, work: EngineDown) {
        if self.engine.send(work).is_err() {
            warn!(node = %self.node, "engine_detached");
        }
    }

    /// The pause reaper: a parked run whose box has been paused past its pause TTL has the box
    /// reclaimed and re-seeds from its branch when answered. `true` when it reclaimed one.
    pub async fn expire_pause(&self, run: &RunRecord) -> Result<bool, Error> {
        let (Some(sandbox_id), Some(paused_at)) = (&run.sandbox_id, run.paused_at) else {
            return Ok(false);
        };
        if !matches!(run.status, Status::AwaitingClarification | Status::Answered) {
            return Ok(false);
        }
        let ttl = run
            .pause_ttl_seconds
            .unwrap_or(boxfleet_cluster::transition::DEFAULT_PAUSE_TTL_SECONDS);
        if (Utc::now() - paused_at).num_seconds() < ttl as i64 {
            return Ok(false);
        }
        let fence = self.seat_fence(&run.seat).await?;
        // the box goes first: a record naming a dead box re-seeds; a live box named by nothing
        // would be billed for good
        let cell = run
            .placement
            .clone()
            .unwrap_or_else(|| self.default_cell.clone());
        // a failed kill keeps the id on the record: the box is still ours to reclaim
        if let Err(error) = self
            .box_op(&cell, sandbox_id, crate::boxes::BoxOp::Kill)
            .await
        {
            warn!(turn_id = %run.turn_id, sandbox_id, %error, "sandbox_kill_failed");
            return Err(error.into());
        }
        let expire = Transition::ExpirePause {
            sandbox_id: sandbox_id.clone(),
        };
        match self.runs.apply(&fence, &run.turn_id, expire).await {
            Ok(_) => {
                info!(turn_id = %run.turn_id, sandbox_id, ttl, "sandbox_pause_expired");
                Ok(true)
            }
            Err(RunError::Refused(_)) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    // ---------------------------------------------------------------------------------------
    // answers

    /// answer_run: records the answer on a parked run, then drives its resume.
    pub async fn answer(
        &self,
        turn_id: &str,
        launch_id: &str,
        text: &str,
        from: &str,
    ) -> Result<AnswerOutcome, Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(AnswerOutcome::Gone);
        };
        if !launch_id.is_empty() && run.record.launch_id != launch_id {
            return Ok(AnswerOutcome::WrongLaunch(run.record.launch_id.clone()));
        }
        let _working = self.working_on(&run.record.seat);
        let fence = self.seat_fence(&run.record.seat).await?;
        let now = Utc::now();
        let answer = Answer {
            text: text.to_owned(),
            from: from.to_owned(),
            delivery_id: new_id("answer"),
            posted_at: now,
            recorded_at: now,
            taken_at: None,
            lost_claims: 0,
            first_lost_at: None,
            attempts: 0,
            first_failed_at: None,
            conversation_key: run.record.conversation_key.clone(),
            partition: run.record.partition.clone(),
        };
        match self
            .runs
            .apply(&fence, turn_id, Transition::RecordAnswer { answer })
            .await
        {
            Ok(_) => {}
            Err(RunError::Refused(Refusal::AlreadyAnswered | Refusal::AlreadyRecorded)) => {
                return Ok(AnswerOutcome::AlreadyAnswered);
            }
            Err(RunError::Refused(Refusal::WrongStatus { found, .. })) => {
                return Ok(AnswerOutcome::NotAwaiting(found.to_string()));
            }
            Err(RunError::Refused(Refusal::Missing)) => return Ok(AnswerOutcome::Gone),
            Err(error) => return Err(error.into()),
        }
        info!(turn_id, from, "sandbox_answer_recorded");
        self.drive_answer(&fence, turn_id).await?;
        Ok(AnswerOutcome::Recorded)
    }

    /// Claims an answered run and hands its resume to the engine.
    pub async fn drive_answer(&self, fence: &Fence, turn_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        if run.record.status != Status::Answered {
            return Ok(());
        }
        let claim = Transition::ClaimAnswer {
            launch_id: run.record.launch_id.clone(),
        };
        let claimed = match self.runs.apply(fence, turn_id, claim).await? {
            Outcome::Written(run) => run.record,
            Outcome::Deleted => return Ok(()),
        };
        let answer = claimed.answer.clone().map(|a| a.text).unwrap_or_default();
        let job = Self::job_of(&claimed);
        let resume = Resume {
            seat: claimed.seat.clone(),
            turn_id: turn_id.to_owned(),
            launch_id: claimed.launch_id.clone(),
            kind: if claimed.sandbox_id.is_some() {
                ResumeKind::Answer
            } else {
                ResumeKind::Reseed
            },
            conversation: claimed.conversation.clone().unwrap_or_default(),
            iteration: claimed.iteration,
            work_item: claimed.work_item.clone(),
            reply: answer,
            succeeded: true,
            question: claimed.question.as_ref().map(|q| q.text.clone()),
            branch: claimed.question.as_ref().and_then(|q| q.branch.clone()),
            command: job.and_then(|job| job.command),
        };
        self.dispatch(EngineDown::Resume(Box::new(resume)));
        Ok(())
    }

    /// The resume of a recorded answer failed: retried a second later, doubling to 30 s, at
    /// most 10 attempts and at most the run's pause TTL from the first failure; past that the
    /// answer is let go — declined for this question and its copy handed back to the seat once.
    fn schedule_answer_retry(&self, record: &RunRecord) {
        let Some(me) = self.me() else { return };
        let Some(answer) = record.answer.clone() else {
            return;
        };
        let turn_id = record.turn_id.clone();
        let seat = record.seat.clone();
        let pause_ttl = Duration::from_secs(
            record
                .pause_ttl_seconds
                .unwrap_or(boxfleet_cluster::transition::DEFAULT_PAUSE_TTL_SECONDS),
        );
        let attempts = answer.attempts.max(1);
        // the window runs from when the answer was recorded (its first resume's start)
        let spent_window = (Utc::now() - answer.recorded_at)
            .to_std()
            .unwrap_or_default()
            > pause_ttl;
        tokio::spawn(async move {
            let Ok(fence) = me.seat_fence(&seat).await else {
                return;
            };
            if attempts >= MAX_ANSWER_RESUME_ATTEMPTS || spent_window {
                match me.runs.apply(&fence, &turn_id, Transition::LetGo).await {
                    Ok(Outcome::Written(run)) => {
                        warn!(turn_id, attempts, "sandbox_answer_requeue_exhausted");
                        if let Err(error) = me.publish_hand_backs(&fence, &run.record).await {
                            warn!(turn_id, %error, "sandbox_hand_back_owed");
                        }
                        me.pump(&seat).await;
                    }
                    Ok(Outcome::Deleted) => {}
                    Err(error) => warn!(turn_id, %error, "sandbox_answer_let_go_refused"),
                }
                return;
            }
            // the run's driver waits out the spacing and resumes it again
            let delay =
                Duration::from_secs(1 << (attempts - 1).min(5)).min(Duration::from_secs(30));
            me.drive(&turn_id, crate::run::RunMsg::RetryAnswer { delay })
                .await;
        });
    }

    // ---------------------------------------------------------------------------------------
    // take and settle (the engine's side of a resume)

    /// The last moment before the resumed turn runs: an answer's claim records the take.
    pub async fn take(&self, turn_id: &str, launch_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Err(Error::Invalid(format!("run {turn_id} is gone")));
        };
        let fence = self.in_flight_fence(&run.record.seat).await?;
        if run
            .record
            .claim
            .as_ref()
            .is_some_and(|c| c.kind == ClaimKind::Answer)
        {
            let take = Transition::Take {
                launch_id: launch_id.to_owned(),
            };
            self.runs.apply(&fence, turn_id, take).await?;
        }
        Ok(())
    }

    /// How the resumed turn ended.
    pub async fn settle(
        &self,
        turn_id: &str,
        launch_id: &str,
        settle: Settle,
    ) -> Result<Option<String>, Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Err(Error::Invalid(format!("run {turn_id} is gone")));
        };
        let fence = self.in_flight_fence(&run.record.seat).await?;
        let guard = EndingGuard::Claim {
            launch_id: launch_id.to_owned(),
        };
        match settle {
            Settle::Finished { reply } => {
                self.end_run(&fence, turn_id, EndingReason::Finished, &reply, guard)
                    .await;
                self.pump(&run.record.seat).await;
                Ok(None)
            }
            Settle::BrokeAfterExternalWrite { error } => {
                self.end_run(
                    &fence,
                    turn_id,
                    EndingReason::BrokeAfterExternalWrite,
                    &error,
                    guard,
                )
                .await;
                self.pump(&run.record.seat).await;
                Ok(None)
            }
            Settle::Retry { error } => {
                warn!(turn_id, %error, "sandbox_resume_retried");
                let hand_back = Transition::HandBackClaim {
                    launch_id: launch_id.to_owned(),
                    collect_failed: false,
                };
                let handed = self.runs.apply(&fence, turn_id, hand_back).await?;
                if let Some(record) = handed.record()
                    && record.status == Status::Answered
                {
                    self.schedule_answer_retry(record);
                }
                Ok(None)
            }
            Settle::Relaunched {
                brief,
                conversation,
                command,
                env,
            } => {
                let new_launch = new_id("launch");
                let relaunch = Transition::Relaunch {
                    launch_id: launch_id.to_owned(),
                    new_launch_id: new_launch.clone(),
                    brief: brief.clone(),
                };
                let relaunched = match self.runs.apply(&fence, turn_id, relaunch).await? {
                    Outcome::Written(run) => run.record,
                    Outcome::Deleted => return Ok(None),
                };
                let old_job = Self::job_of(&run.record);
                let runner_name = old_job
                    .as_ref()
                    .map_or("command".to_owned(), |j| j.runner.clone());
                let runner = self.runner(&runner_name)?.clone();
                let cell = relaunched
                    .placement
                    .clone()
                    .unwrap_or_else(|| self.default_cell.clone());
                let provider = self.provider(&cell)?.clone();
                let request = LaunchRequest {
                    seat: relaunched.seat.clone(),
                    brief,
                    command: command.or_else(|| old_job.as_ref().and_then(|j| j.command.clone())),
                    timeout_seconds: old_job.as_ref().and_then(|j| j.timeout_seconds),
                    model: old_job.as_ref().and_then(|j| j.model.clone()),
                    ..LaunchRequest::default()
                };
                let mut request = request;
                request.turn_id = Some(turn_id.to_owned());
                let started = self
                    .provision_and_start_with_env(
                        &fence,
                        turn_id,
                        &new_launch,
                        provider.as_ref(),
                        runner.as_ref(),
                        &request,
                        relaunched.sandbox_id.clone(),
                        env,
                    )
                    .await;
                match started {
                    Ok(_) => {
                        let commit = Transition::CommitSuspension {
                            launch_id: new_launch.clone(),
                            conversation,
                        };
                        self.runs.apply(&fence, turn_id, commit).await?;
                        info!(turn_id, launch_id = %new_launch, "sandbox_run_started");
                        Ok(Some(new_launch))
                    }
                    Err(error) => {
                        self.end_run(
                            &fence,
                            turn_id,
                            EndingReason::LaunchFailed,
                            &error.to_string(),
                            EndingGuard::Any,
                        )
                        .await;
                        Err(error)
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn provision_and_start_with_env(
        &self,
        fence: &Fence,
        turn_id: &str,
        launch_id: &str,
        provider: &dyn Provider,
        runner: &dyn Runner,
        request: &LaunchRequest,
        reuse: Option<String>,
        env: BTreeMap<String, String>,
    ) -> Result<String, Error> {
        // the extra environment rides the command: the runner's launch env carries it
        let mut request = request.clone();
        if !env.is_empty() {
            let exports: String = env
                .iter()
                .map(|(k, v)| format!("export {k}={}\n", shell_quote(v)))
                .collect();
            request.command = request.command.map(|command| format!("{exports}{command}"));
        }
        let plan = self.plan(&request.seat, Some(runner.name()), request.model.as_deref())?;
        self.provision_and_start(
            fence, turn_id, launch_id, provider, runner, &request, &plan, reuse,
        )
        .await
    }

    // ---------------------------------------------------------------------------------------
    // endings

    /// Decides an ending (announced once), then finishes it: copies owed handed back, the box
    /// reclaimed, the row deleted. A step that fails keeps the row for the next reader.
    pub async fn end_run(
        &self,
        fence: &Fence,
        turn_id: &str,
        reason: EndingReason,
        detail: &str,
        guard: EndingGuard,
    ) {
        let decide = Transition::DecideEnding {
            reason,
            // a failure's text can quote the box: redacted whole before it is bounded
            detail: cut(&boxfleet_redact::redact(detail), 16 * 1024),
            guard,
        };
        match self.runs.apply(fence, turn_id, decide).await {
            Ok(_) | Err(RunError::Refused(Refusal::EndingDecided(_))) => {}
            Err(error) => {
                warn!(turn_id, %error, reason = reason.as_str(), "sandbox_ending_refused");
                return;
            }
        }
        if reason.is_failure() {
            warn!(turn_id, reason = reason.as_str(), "sandbox_run_failed");
        }
        if let Err(error) = self.finish_ending(fence, turn_id).await {
            warn!(turn_id, %error, "sandbox_ending_kept");
            self.drive(turn_id, crate::run::RunMsg::Check).await;
        }
    }

    /// Finishes a decided ending from wherever it stopped.
    pub async fn finish_ending(&self, fence: &Fence, turn_id: &str) -> Result<(), Error> {
        let Some(run) = self.runs.read(turn_id).await? else {
            return Ok(());
        };
        let record = run.record;
        if record.status != Status::Ending {
            return Ok(());
        }
        self.publish_hand_backs(fence, &record).await?;
        if let Some(sandbox_id) = &record.sandbox_id {
            let cell = record
                .placement
                .clone()
                .unwrap_or_else(|| self.default_cell.clone());
            // a failed kill keeps the id on the record: the box is still ours to reclaim
            if let Err(error) = self
                .box_op(&cell, sandbox_id, crate::boxes::BoxOp::Kill)
                .await
            {
                warn!(turn_id, sandbox_id, %error, "sandbox_kill_failed");
                return Err(error.into());
            }
            let release = Transition::ReleaseBox {
                sandbox_id: sandbox_id.clone(),
            };
            match self.runs.apply(fence, turn_id, release).await {
                Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        match self.runs.apply(fence, turn_id, Transition::Finish).await {
            Ok(_) | Err(RunError::Refused(Refusal::Missing)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Publishes the reply copies a run owes its seat, then clears them.
    async fn publish_hand_backs(&self, fence: &Fence, record: &RunRecord) -> Result<(), Error> {
        if record.hand_back.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::new();
        for copy in &record.hand_back {
            let delivery = Delivery {
                delivery_id: copy.delivery_id.clone(),
                conversation_key: copy.conversation_key.clone(),
                partition: copy.partition.clone(),
                from: copy.from.clone(),
                text: copy.text.clone(),
                posted_at: copy.posted_at,
            };
            self.inbox.enqueue(&record.seat, &delivery).await?;
            ids.push(copy.delivery_id.clone());
        }
        let clear = Transition::ClearHandBack { delivery_ids: ids };
        match self.runs.apply(fence, &record.turn_id, clear).await {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyDone)) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    // ---------------------------------------------------------------------------------------
    // recovery

    /// The recovery pass on acquiring a seat (boot included): fence every run to this lease
    /// first, then take each over as its status says.
    pub async fn recover(&self, fence: &Fence) -> Result<(), Error> {
        let runs = self
            .runs
            .fence_seat_runs_for(fence, Some(&self.incarnation))
            .await?;
        for run in runs {
            let record = &run.record;
            let turn_id = record.turn_id.as_str();
            match record.status {
                Status::Launching => {
                    self.end_run(
                        fence,
                        turn_id,
                        EndingReason::AbandonedTail,
                        "the launch's node stopped before the conversation was written",
                        EndingGuard::Any,
                    )
                    .await;
                }
                Status::Resumed => match record.claim.as_ref().map(|c| c.kind) {
                    Some(ClaimKind::Answer) if !record.answer_taken() => {
                        match self.runs.apply(fence, turn_id, Transition::Revive).await {
                            Ok(_) => {
                                info!(turn_id, "sandbox_answer_revived");
                                self.drive_answer(fence, turn_id).await?;
                            }
                            Err(RunError::Refused(Refusal::RevivalsSpent { .. })) => {
                                info!(turn_id, "sandbox_answer_not_revived");
                                self.end_run(
                                    fence,
                                    turn_id,
                                    EndingReason::AbandonedTail,
                                    "the answer's resume took its node down too often",
                                    EndingGuard::Any,
                                )
                                .await;
                            }
                            Err(error) => return Err(error.into()),
                        }
                    }
                    _ => {
                        self.end_run(
                            fence,
                            turn_id,
                            EndingReason::AbandonedTail,
                            "the claim's node stopped before it settled",
                            EndingGuard::Any,
                        )
                        .await;
                    }
                },
                Status::Answered => self.drive_answer(fence, turn_id).await?,
                Status::Ending => self.finish_ending(fence, turn_id).await?,
                Status::AwaitingClarification | Status::Reseed => {
                    self.publish_hand_backs(fence, record).await?;
                }
                Status::Running => {}
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // the inbox

    /// A message into a seat's inbox; the seat is pumped if this node holds it.
    pub async fn deliver(&self, seat: &str, delivery: Delivery) -> Result<Enqueued, Error> {
        let enqueued = self.inbox.enqueue(seat, &delivery).await?;
        self.pump(seat).await;
        Ok(enqueued)
    }

    /// Works the seat's inbox while nothing holds it: each delivery is offered to a parked
    /// run first, and becomes a turn otherwise. One turn at a time is out at the engine.
    pub async fn pump(&self, seat: &str) {
        if let Err(error) = self.try_pump(seat).await {
            warn!(seat, %error, "seat_pump_failed");
        }
    }

    async fn try_pump(&self, seat: &str) -> Result<(), Error> {
        let fence = self.seat_fence(seat).await?;
        let _seat = self.seat_lock(seat).await;
        loop {
            if self
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(seat)
            {
                return Ok(());
            }
            if self.seat_busy(seat).await? {
                return Ok(());
            }
            let Some(message) = self.inbox.head(seat).await? else {
                return Ok(());
            };
            if self.offer_to_parked(&fence, &message).await? {
                continue;
            }
            self.in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(seat.to_owned(), message.clone());
            self.dispatch(EngineDown::Turn {
                seat: seat.to_owned(),
                delivery: message.delivery.clone(),
            });
            return Ok(());
        }
    }

    /// Offers a delivery to the seat's parked runs: `true` when it was consumed as an answer.
    async fn offer_to_parked(&self, fence: &Fence, message: &Message) -> Result<bool, Error> {
        let Some(conversation) = &message.delivery.conversation_key else {
            return Ok(false);
        };
        let mut parked: Vec<Versioned> = self
            .runs
            .list_by_conversation(conversation)
            .await?
            .into_iter()
            .filter(|run| {
                run.record.seat == fence.seat
                    && matches!(
                        run.record.status,
                        Status::AwaitingClarification | Status::Reseed
                    )
            })
            .collect();
        // the most recently parked question answers a reply that names no thread
        parked.sort_by_key(|run| run.record.question.as_ref().map(|q| q.asked_at));
        let Some(run) = parked.pop() else {
            return Ok(false);
        };
        let delivery = &message.delivery;
        let answer = Answer {
            text: delivery.text.clone(),
            from: delivery.from.clone(),
            delivery_id: delivery.delivery_id.clone(),
            posted_at: delivery.posted_at,
            recorded_at: Utc::now(),
            taken_at: None,
            lost_claims: 0,
            first_lost_at: None,
            attempts: 0,
            first_failed_at: None,
            conversation_key: delivery.conversation_key.clone(),
            partition: delivery.partition.clone(),
        };
        let turn_id = run.record.turn_id.clone();
        match self
            .runs
            .apply(fence, &turn_id, Transition::RecordAnswer { answer })
            .await
        {
            Ok(_) | Err(RunError::Refused(Refusal::AlreadyRecorded)) => {
                // recorded before the delivery is acked
                if let Err(error) = self.inbox.ack(fence, message).await {
                    warn!(seat = %fence.seat, %error, "sandbox_answer_ack_failed");
                }
                self.drive_answer(fence, &turn_id).await?;
                Ok(true)
            }
            Err(RunError::Refused(_)) => Ok(false),
            Err(error) => {
                let _ = self.inbox.defer(fence, message).await;
                Err(error.into())
            }
        }
    }

    /// The engine worked (or handed back) the turn it was given.
    pub async fn turn_done(
        &self,
        seat: &str,
        delivery_id: &str,
        worked: bool,
    ) -> Result<(), Error> {
        let message = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            match in_flight.get(seat) {
                Some(message) if message.delivery.delivery_id == delivery_id => {
                    in_flight.remove(seat)
                }
                _ => None,
            }
        };
        let fence = self.seat_fence(seat).await?;
        if let Some(message) = message {
            if worked {
                self.inbox
                    .ack(&fence, &message)
                    .await
                    .map_err(|e| Error::Invalid(e.to_string()))?;
            } else {
                self.inbox
                    .defer(&fence, &message)
                    .await
                    .map_err(|e| Error::Invalid(e.to_string()))?;
            }
        }
        self.pump(seat).await;
        Ok(())
    }

    /// A job's output from `from` (the live tail's first form).
    pub async fn follow(
        &self,
        run: &RunRecord,
        from: u64,
    ) -> Result<crate::ports::Followed, Error> {
        let (Some(sandbox_id), Some(job)) = (&run.sandbox_id, Self::job_of(run)) else {
            return Err(Error::Invalid("the run names no job".into()));
        };
        let provider = self.provider(run.placement.as_deref().unwrap_or(&self.default_cell))?;
        let sandbox = self
            .box_handle(provider.cell(), sandbox_id, crate::boxes::BoxOp::Attach)
            .await?;
        let runner = self.runner(&job.runner)?;
        Ok(runner.follow(sandbox.as_ref(), &job.handle, from).await?)
    }

    /// The events of one turn, oldest first.
    pub async fn turn_events(&self, turn_id: &str) -> Result<Vec<Event>, Error> {
        Ok(events::read_from(self.store.as_ref(), &self.keys, 0)
            .await?
            .into_iter()
            .filter(|stored| stored.event.turn_id == turn_id)
            .map(|stored| stored.event)
            .collect())
    }
}

fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

/// Everything a runner collected, redacted whole once more. A transcript is redacted as one
/// text, so a key split over its lines reads as the block it is; what the runner already
/// redacted comes through unchanged.
fn redact_collected(mut collected: Collected) -> Collected {
    use boxfleet_redact::redact;
    collected.report = redact(&collected.report);
    if !collected.transcript.is_empty() {
        let whole = redact(&collected.transcript.join("\n"));
        collected.transcript = whole.split('\n').map(str::to_owned).collect();
    }
    for piece in collected
        .delivered_refs
        .iter_mut()
        .chain(collected.read_errors.iter_mut())
    {
        *piece = redact(piece);
    }
    collected.stderr_tail = redact(&collected.stderr_tail);
    if let Some(asked) = collected.question.as_mut() {
        asked.question = redact(&asked.question);
        if let Some(branch) = asked.branch.as_mut() {
            *branch = redact(branch);
        }
    }
    collected
}
