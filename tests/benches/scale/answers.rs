//! The scale bench's answer figures, in process: a person's answer to a parked run, from the
//! `answer_run` call to the resume handed to the seat's engine — its store round trips and
//! its latency, on the embedded store and on etcd.
//!
//! A node's lifecycle (`Coordinator`) is built on a store through [`Counting`], with no
//! supervision tree ([`Detached`]: the answer's own pump does the whole path in the call, and
//! nothing else on the node touches the store meanwhile, so every call counted is the
//! answer's). Its engine link is a channel: a resume is delivered when it is on it. An
//! attached engine's gRPC stream is one more hop after that, which the node's store does not
//! see. Each sample is a fresh seat with one parked run, its row written as a park leaves it
//! (a running job that asked, its question on the row); the seat is acquired, and its recovery
//! pass run, before the answer is timed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boxfleet_actors::lifecycle::cells::Cells;
use boxfleet_actors::lifecycle::{Answerer, Coordinator, Detached, EngineDown, Parts};
use boxfleet_cluster::Keys;
use boxfleet_cluster::record::{Question, RunRecord, Status};
use boxfleet_cluster::seat::{NodeInfo, Session};
use boxfleet_cluster::store::{Op, Store, Txn};
use boxfleet_tests::counting::{CallSnapshot, CallStats, Counting};
use tokio::sync::mpsc;

/// Answers measured on one store.
pub struct Measured {
    /// store calls from the answer's arrival to its resume on the engine link, per answer
    pub to_resume: Vec<CallSnapshot>,
    /// store calls of the whole `answer_run` call (it reads what the answer became after)
    pub whole_call: Vec<CallSnapshot>,
    /// from the call to the resume on the engine link, per answer
    pub latency: Vec<Duration>,
    /// the last answer's store calls to its resume, a line each
    pub calls: Vec<String>,
}

impl Measured {
    /// The store round trips of the median answer to its resume (every answer makes the same
    /// calls; the median guards the figure against one that did not).
    pub fn round_trips(&self) -> CallSnapshot {
        median_calls(&self.to_resume)
    }

    pub fn whole(&self) -> CallSnapshot {
        median_calls(&self.whole_call)
    }

    /// The latency at quantile `q` (0.5, 0.99).
    pub fn quantile(&self, q: f64) -> Duration {
        quantile(&self.latency, q)
    }
}

/// The value of `samples` at quantile `q` (0.5, 0.99): the smallest with at least that share
/// of the samples at or below it.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[at - 1]
}

fn median_calls(calls: &[CallSnapshot]) -> CallSnapshot {
    let mut sorted = calls.to_vec();
    sorted.sort_by_key(total);
    sorted[sorted.len() / 2]
}

/// All the store calls in `c`.
pub fn total(c: &CallSnapshot) -> u64 {
    c.gets + c.txns + c.others
}

fn node_info(node: &str) -> NodeInfo {
    NodeInfo {
        node: node.to_owned(),
        addr: "http://127.0.0.1:1".into(),
        incarnation: format!("{node}-1"),
        started_at: chrono::Utc::now(),
        build: "bench".into(),
        host: "bench-host".into(),
        draining: false,
        insecure: false,
        tls: false,
    }
}

/// A run parked on a question, as the park leaves its row: the job ran, asked, and waits.
async fn park(store: &dyn Store, keys: &Keys, seat: &str, turn: &str) -> String {
    let now = chrono::Utc::now();
    let launch = format!("launch-{turn}");
    let mut record = RunRecord::launching(turn, &launch, seat, "command", now);
    record.status = Status::AwaitingClarification;
    record.sandbox_id = Some(format!("box-{turn}"));
    record.placement = Some("fake".into());
    record.conversation = Some(b"conversation".to_vec());
    record.question = Some(Question {
        text: "which region?".into(),
        audience: "alice".into(),
        audience_handles: vec!["alice".into()],
        audience_fallback: false,
        asked_at: now,
        branch: None,
    });
    store
        .txn(Txn::new().and_then(vec![
            Op::put(keys.run(turn), record.to_json()),
            Op::put(keys.seat_run(seat, turn), record.status.as_str()),
        ]))
        .await
        .expect("park a run");
    launch
}

/// `samples` answers, each to a parked run of its own seat, through a lifecycle on `store`.
pub async fn measure(store: Arc<dyn Store>, prefix: &str, samples: usize) -> Measured {
    let stats = Arc::new(CallStats::default());
    let counted: Arc<dyn Store> = Arc::new(Counting {
        inner: store,
        stats: stats.clone(),
    });
    let keys = Keys::new(prefix);
    let info = node_info("answers");
    let session = Session::open(counted.as_ref(), &keys, info.clone(), 60)
        .await
        .expect("a session");
    let (engine, mut engine_rx) = mpsc::unbounded_channel::<EngineDown>();
    let provider: Arc<dyn boxfleet_actors::ports::Provider> =
        Arc::new(boxfleet_sandbox::fake::FakeProvider::new());
    let parts = Parts {
        node: info.node.clone(),
        incarnation: info.incarnation.clone(),
        store: counted.clone(),
        keys: keys.clone(),
        session,
        cells: Cells::of(BTreeMap::from([("fake".to_owned(), provider)]), "fake"),
        runners: BTreeMap::new(),
        engine,
        company: boxfleet_config::live::LiveCompany::new(Default::default()),
        events_keep_seconds: 3_600,
    };
    let coordinator = Arc::new(Coordinator::new(parts, Arc::new(Detached)));
    let answerer = Answerer {
        from: "alice".into(),
        given_by: None,
        admin: true,
        operator_id: "admin:bench@k1".into(),
    };
    let mut measured = Measured {
        to_resume: Vec::new(),
        whole_call: Vec::new(),
        latency: Vec::new(),
        calls: Vec::new(),
    };
    for sample in 0..samples {
        let seat = format!("asked-{sample}");
        let turn = format!("turn-asked-{sample}");
        let launch = park(counted.as_ref(), &keys, &seat, &turn).await;
        coordinator.seat_fence(&seat).await.expect("hold the seat");
        stats.reset();
        let began = Instant::now();
        let answering = {
            let (coordinator, answerer) = (coordinator.clone(), answerer.clone());
            let (turn, launch) = (turn.clone(), launch.clone());
            tokio::spawn(async move {
                coordinator
                    .answer(&turn, &launch, "eu-west", &answerer)
                    .await
            })
        };
        let resumed = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match engine_rx.recv().await.expect("the engine link is open") {
                    EngineDown::Resume(resume) if resume.turn_id == turn => break resume,
                    _ => {}
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no resume of {turn} within 30 s"));
        let took = began.elapsed();
        let to_resume = stats.snapshot();
        measured.calls = stats.calls_made().clone();
        let outcome = answering
            .await
            .expect("the answer's task")
            .expect("the answer");
        assert_eq!(resumed.reply, "eu-west", "the resume carries the answer");
        assert!(
            matches!(outcome, boxfleet_actors::lifecycle::AnswerOutcome::Recorded),
            "{outcome:?}"
        );
        measured.whole_call.push(stats.snapshot());
        measured.to_resume.push(to_resume);
        measured.latency.push(took);
    }
    // a count, not a time: every answer to an idle seat's run takes its one read, the seat's
    // entries and one write (the first may also open the events' retention lease)
    let trips = measured.round_trips();
    assert!(
        total(&trips) <= 3,
        "an answer to an idle seat's parked run made {} store round trips before its resume \
         (goal ≤ 3): {:#?}",
        total(&trips),
        measured.calls
    );
    measured
}
