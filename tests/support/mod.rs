//! Shared steps for the run-record scenario tests: a world of one seat on one store, and
//! `must_*` helpers that drive a run to a given point.

#![allow(dead_code)]

use std::sync::Arc;

use boxfleet_cluster::Keys;
use boxfleet_cluster::inbox::Inbox;
use boxfleet_cluster::record::{Answer, Question, RunRecord, Status};
use boxfleet_cluster::runs::{Outcome, RunError, Runs};
use boxfleet_cluster::seat::{self, Acquire, Holder};
use boxfleet_cluster::store::failpoint::{Faults, Faulty};
use boxfleet_cluster::store::{LeaseId, Store};
use boxfleet_cluster::transition::{Fence, Refusal, Transition};
use chrono::{DateTime, Duration, Utc};

pub const SEAT: &str = "eng";

/// One seat on one store, with a node holding it.
pub struct World {
    pub store: Arc<dyn Store>,
    pub faults: Faults,
    pub keys: Keys,
    pub runs: Runs,
    pub inbox: Inbox,
    pub node: Node,
}

/// A node: its session lease and, once acquired, its seat fence.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub session: LeaseId,
    pub fence: Fence,
}

impl World {
    /// A world on `store` under a fresh prefix, with node `a` holding [`SEAT`].
    pub async fn new(store: Arc<dyn Store>, prefix: &str) -> Self {
        let faulty = Faulty::from_arc(store);
        let faults = faulty.faults();
        faults.only_under(prefix.to_owned());
        let store: Arc<dyn Store> = Arc::new(faulty);
        let keys = Keys::new(prefix);
        let runs = Runs::new(store.clone(), keys.clone());
        let inbox = Inbox::new(store.clone(), keys.clone());
        let node = join(&store, &keys, "a").await;
        Self {
            store,
            faults,
            keys,
            runs,
            inbox,
            node,
        }
    }

    pub fn fence(&self) -> &Fence {
        &self.node.fence
    }
}

/// A node session that acquires [`SEAT`] (the seat must be free).
pub async fn join(store: &Arc<dyn Store>, keys: &Keys, name: &str) -> Node {
    let session = store.lease_grant(30).await.expect("grant session lease");
    let holder = Holder {
        node: name.to_owned(),
        incarnation: format!("{name}-1"),
    };
    match seat::acquire(store.as_ref(), keys, SEAT, &holder, session)
        .await
        .expect("acquire seat")
    {
        Acquire::Held(fence) => Node {
            name: name.to_owned(),
            session,
            fence,
        },
        Acquire::HeldBy { holder, .. } => panic!("seat already held by {holder:?}"),
    }
}

pub fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-29T10:00:00Z")
        .expect("valid instant")
        .with_timezone(&Utc)
}

pub fn at(seconds: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(seconds)
}

pub fn launching(turn: &str, launch: &str) -> RunRecord {
    let mut record = RunRecord::launching(turn, launch, SEAT, "command", t0());
    record.conversation_key = Some("dm-alice".into());
    record.pause_ttl_seconds = Some(1800);
    record
}

pub fn question(asked_at: DateTime<Utc>) -> Question {
    Question {
        text: "which database?".into(),
        audience: "requester".into(),
        audience_handles: vec!["alice".into()],
        audience_fallback: false,
        asked_at,
        branch: Some("wip/db".into()),
    }
}

pub fn answer(delivery_id: &str, posted_at: DateTime<Utc>) -> Answer {
    Answer {
        text: "postgres".into(),
        from: "alice".into(),
        delivery_id: delivery_id.into(),
        posted_at,
        recorded_at: posted_at,
        taken_at: None,
        lost_claims: 0,
        first_lost_at: None,
        attempts: 0,
        first_failed_at: None,
        given_by: None,
        conversation_key: Some("dm-alice".into()),
        partition: None,
        for_launch: None,
        route: Default::default(),
        operator: None,
    }
}

pub async fn must_apply(world: &World, fence: &Fence, turn: &str, t: Transition) -> Outcome {
    let name = t.name();
    match world.runs.apply_at(fence, turn, t, at(100)).await {
        Ok(outcome) => outcome,
        Err(error) => panic!("{name} on {turn} must apply: {error}"),
    }
}

pub async fn must_refuse(world: &World, fence: &Fence, turn: &str, t: Transition) -> Refusal {
    let name = t.name();
    match world.runs.apply_at(fence, turn, t, at(100)).await {
        Err(RunError::Refused(refusal)) => refusal,
        other => panic!("{name} on {turn} must be refused, got {other:?}"),
    }
}

pub async fn must_status(world: &World, turn: &str) -> Status {
    world
        .runs
        .read(turn)
        .await
        .expect("read run")
        .unwrap_or_else(|| panic!("run {turn} must exist"))
        .record
        .status
}

/// Opens, boxes and commits a run: `running` on job `launch`.
pub async fn must_run(world: &World, turn: &str, launch: &str) {
    let fence = world.fence().clone();
    let record = Box::new(launching(turn, launch));
    must_apply(world, &fence, turn, Transition::OpenLaunch { record }).await;
    must_apply(
        world,
        &fence,
        turn,
        Transition::AttachBox {
            launch_id: launch.into(),
            sandbox_id: format!("box-{turn}"),
            placement: "direct".into(),
            job: Some("job-1".into()),
            host: None,
            boxes_dir: None,
        },
    )
    .await;
    must_apply(
        world,
        &fence,
        turn,
        Transition::CommitSuspension {
            launch_id: launch.into(),
            conversation: b"conversation".to_vec(),
        },
    )
    .await;
}

/// Runs, completes and parks a run on a question asked at `at(10)`.
pub async fn must_park(world: &World, turn: &str, launch: &str) {
    must_run(world, turn, launch).await;
    let fence = world.fence().clone();
    let claim = Transition::ClaimCompletion {
        launch_id: launch.into(),
    };
    must_apply(world, &fence, turn, claim).await;
    let park = Transition::Park {
        launch_id: launch.into(),
        question: question(at(10)),
    };
    must_apply(world, &fence, turn, park).await;
}

/// Parks, answers (delivery `d1` posted at `at(20)`) and claims the answer.
pub async fn must_claim_answer(world: &World, turn: &str, launch: &str) {
    must_park(world, turn, launch).await;
    let fence = world.fence().clone();
    let record = Transition::RecordAnswer {
        answer: answer("d1", at(20)),
    };
    must_apply(world, &fence, turn, record).await;
    let claim = Transition::ClaimAnswer {
        launch_id: launch.into(),
    };
    must_apply(world, &fence, turn, claim).await;
}

/// Runs each named scenario `fn(Arc<dyn Store>, prefix)` twice: on a fresh embedded store and
/// on the shared real etcd, each under its own prefix.
#[allow(unused_macros)]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                let dir = tempfile::tempdir().expect("tempdir");
                let store = EmbeddedStore::open(dir.path()).await.expect("open embedded store");
                super::$name(Arc::new(store), &unique_prefix(stringify!($name))).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd() {
                let store = EtcdServer::shared().store().await;
                super::$name(Arc::new(store), &unique_prefix(stringify!($name))).await;
            }
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use on_both_stores;
