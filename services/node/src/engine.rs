//! Engines: work for the seats goes to an engine attached over `Engine.Attach`, or to the
//! node's built-in engine (DESIGN §8.3) when none is attached.
//!
//! The built-in engine makes boxfleet useful with no engine at all: a delivery becomes a
//! `command` launch whose command is the message; a resume with findings settles the turn
//! and publishes the findings as the turn's reply event; a resume with an answer relaunches
//! into the same box with the answer in `BOXFLEET_ANSWER`; a re-seed relaunches in a new box.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use boxfleet_actors::lifecycle::{
    self, Coordinator, EngineDown, LaunchOutcome, LaunchRequest, RefusalClass, Resume, ResumeKind,
    Settle,
};
use boxfleet_cluster::events::{self, Event};
use boxfleet_cluster::retention::Retention;
use boxfleet_cluster::store::{Op, Txn};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// An attached external engine: where its work goes, and the resumes it has not taken.
#[derive(Debug)]
struct Attached {
    id: u64,
    name: String,
    down: mpsc::Sender<EngineDown>,
    untaken: HashMap<String, String>,
}

/// The node's engines.
#[derive(Debug)]
pub struct Engines {
    coordinator: Arc<Coordinator>,
    attached: Mutex<Option<Attached>>,
    next_id: Mutex<u64>,
    retention: Retention,
}

impl Engines {
    pub fn new(coordinator: Arc<Coordinator>) -> Self {
        Self {
            coordinator,
            attached: Mutex::new(None),
            next_id: Mutex::new(0),
            retention: Retention::events(),
        }
    }

    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    /// Attaches an external engine; returns its id. A second attach replaces the first.
    pub fn attach(&self, name: String, down: mpsc::Sender<EngineDown>) -> u64 {
        let id = {
            let mut next = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        info!(engine = %name, id, "engine_attached");
        *self.attached.lock().unwrap_or_else(|p| p.into_inner()) = Some(Attached {
            id,
            name,
            down,
            untaken: HashMap::new(),
        });
        id
    }

    /// An external engine went away: every resume it did not take is handed back for a retry.
    pub async fn detach(&self, id: u64) {
        let untaken = {
            let mut attached = self.attached.lock().unwrap_or_else(|p| p.into_inner());
            match attached.as_ref() {
                Some(current) if current.id == id => attached.take().map(|a| (a.name, a.untaken)),
                _ => None,
            }
        };
        let Some((name, untaken)) = untaken else {
            return;
        };
        info!(engine = %name, id, untaken = untaken.len(), "engine_detached");
        for (turn_id, launch_id) in untaken {
            let retry = Settle::Retry {
                error: format!("engine {name} went away before it took the resume"),
            };
            if let Err(error) = self.coordinator.settle(&turn_id, &launch_id, retry).await {
                warn!(turn_id, %error, "sandbox_resume_handback_failed");
            }
        }
    }

    /// The external engine took a resume.
    pub fn taken(&self, turn_id: &str) {
        if let Some(attached) = self
            .attached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            attached.untaken.remove(turn_id);
        }
    }

    /// Sends work to the attached engine; `Err` hands it back when none is attached.
    #[allow(clippy::result_large_err)]
    fn to_external(&self, work: EngineDown) -> Result<(), EngineDown> {
        let mut attached = self.attached.lock().unwrap_or_else(|p| p.into_inner());
        let Some(engine) = attached.as_mut() else {
            return Err(work);
        };
        if let EngineDown::Resume(resume) = &work {
            engine
                .untaken
                .insert(resume.turn_id.clone(), resume.launch_id.clone());
        }
        engine.down.try_send(work).map_err(|error| match error {
            mpsc::error::TrySendError::Full(work) | mpsc::error::TrySendError::Closed(work) => work,
        })
    }

    /// The built-in engine's handling of one piece of work.
    async fn builtin(&self, work: EngineDown) {
        match work {
            EngineDown::Turn { seat, delivery } => {
                let request = LaunchRequest {
                    seat: seat.clone(),
                    brief: delivery.text.clone(),
                    task: delivery.text.clone(),
                    runner: "command".into(),
                    command: Some(delivery.text.clone()),
                    requester: Some(delivery.from.clone()),
                    conversation_key: delivery.conversation_key.clone(),
                    partition: delivery.partition.clone(),
                    owes_answer: true,
                    ..LaunchRequest::default()
                };
                let worked = match self.coordinator.launch(request).await {
                    LaunchOutcome::Launched { turn_id, .. } => {
                        info!(seat, turn_id, "builtin_engine_launched");
                        true
                    }
                    LaunchOutcome::Refused {
                        class: RefusalClass::Unavailable,
                        reason,
                    } => {
                        warn!(seat, reason, "builtin_engine_deferred");
                        false
                    }
                    LaunchOutcome::Refused { reason, .. } => {
                        warn!(seat, reason, "builtin_engine_refused");
                        true
                    }
                };
                if let Err(error) = self
                    .coordinator
                    .turn_done(&seat, &delivery.delivery_id, worked)
                    .await
                {
                    warn!(seat, %error, "builtin_engine_ack_failed");
                }
            }
            EngineDown::Resume(resume) => {
                if let Err(error) = self.resume(*resume).await {
                    warn!(%error, "builtin_engine_resume_failed");
                }
            }
        }
    }

    async fn resume(&self, resume: Resume) -> Result<(), lifecycle::Error> {
        let Resume {
            turn_id,
            launch_id,
            kind,
            conversation,
            reply,
            question,
            command,
            succeeded,
            seat,
            branch,
            ..
        } = resume;
        // a test failpoint: the first resume of this process is slow to be taken, as an
        // engine's can be, so a scenario can hand the seat over while the resume is in flight
        if boxfleet_actors::workers::failpoint_once("engine-resume-slow") {
            tokio::time::sleep(std::time::Duration::from_secs(4)).await;
        }
        self.coordinator.take(&turn_id, &launch_id).await?;
        match kind {
            ResumeKind::Findings => {
                self.publish_reply(&turn_id, &launch_id, &seat, &reply, succeeded)
                    .await;
                self.coordinator
                    .settle(&turn_id, &launch_id, Settle::Finished { reply })
                    .await?;
            }
            ResumeKind::Answer | ResumeKind::Reseed => {
                let question = question.unwrap_or_default();
                let mut env = BTreeMap::new();
                env.insert("BOXFLEET_ANSWER".to_owned(), reply.clone());
                env.insert("BOXFLEET_QUESTION".to_owned(), question.clone());
                if let Some(branch) = &branch {
                    // a re-seeded box starts empty: the job checks its work out from here
                    env.insert("BOXFLEET_BRANCH".to_owned(), branch.clone());
                }
                let relaunch = Settle::Relaunched {
                    brief: format!("{question}\nThe answer: {reply}"),
                    conversation,
                    command,
                    env,
                };
                self.coordinator
                    .settle(&turn_id, &launch_id, relaunch)
                    .await?;
            }
        }
        Ok(())
    }

    /// The built-in engine's turn reply: the findings, as an event of the turn.
    async fn publish_reply(
        &self,
        turn_id: &str,
        launch_id: &str,
        seat: &str,
        reply: &str,
        succeeded: bool,
    ) {
        let coordinator = &self.coordinator;
        let now = chrono::Utc::now();
        let event = Event::new(
            events::kind::TURN_REPLIED,
            &[turn_id, launch_id],
            turn_id,
            launch_id,
            seat,
            now,
            serde_json::json!({ "reply": reply, "succeeded": succeeded }),
        );
        let lease = match self.retention.lease(coordinator.store.as_ref(), now).await {
            Ok(lease) => lease,
            Err(error) => {
                warn!(turn_id, %error, "turn_reply_not_published");
                return;
            }
        };
        let (compare, put) = events::create(&coordinator.keys, &event, lease);
        let txn = Txn::new()
            .when([compare])
            .and_then([put])
            .or_else([Op::get(coordinator.keys.event(&event.id))]);
        if let Err(error) = coordinator.store.txn(txn).await {
            warn!(turn_id, %error, "turn_reply_not_published");
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
            Ok(Some(work)) => {
                if let Err(work) = state.engines.to_external(work) {
                    let engines = state.engines.clone();
                    tokio::spawn(async move { engines.builtin(work).await });
                }
            }
            Ok(None) => return Ok(()),
            Err(_) => {}
        }
        let _ = myself.cast(RouterMsg::Next);
        Ok(())
    }
}
