//! Scenario: two nodes drive random interleavings of run transitions on one seat — the old
//! holder keeps writing with its old lease after a handoff, replies get lost, endings race
//! takes — and after every step the invariants are checked against what the store holds.
//! Runs on the embedded store in every test run and on a real etcd.
//!
//! Checked after every step:
//! - every row passes `transition::check_record` (the record-level invariants);
//! - I2: a completion is claimed at most once per (turn, launch);
//! - I3: a share is charged at most once per job, and the counters hold exactly the charges
//!   that landed; a job's phase is published at most once;
//! - I4: a recorded answer was posted at or after its question; an answered row is never
//!   re-answered;
//! - I5: an answer a turn took is never handed back;
//! - I6: a row that was ending moves only by the writes that finish it, under the same terms;
//! - I7/I8: a row disappears only from `ending`, with no copy owed and no box named;
//! - I9: a node that does not hold the seat changes nothing;
//! - I10: no event key is ever written twice.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use boxfleet_cluster::Keys;
use boxfleet_cluster::events;
use boxfleet_cluster::record::{EndingReason, RunRecord, Status, Usage};
use boxfleet_cluster::runs::{RunError, Runs};
use boxfleet_cluster::seat::{self, Acquire, Holder};
use boxfleet_cluster::spend;
use boxfleet_cluster::store::embedded::EmbeddedStore;
use boxfleet_cluster::store::failpoint::{Faults, Faulty};
use boxfleet_cluster::store::{LeaseId, Store};
use boxfleet_cluster::transition::{self, EndingGuard, Fence, Share, Transition};
use boxfleet_tests::{EtcdServer, unique_prefix};
use proptest::prelude::*;
use support::{SEAT, answer, at, launching, question};

const TURNS: usize = 2;

#[derive(Debug, Clone, Copy)]
enum Step {
    Open,
    Commit,
    ClaimCompletion { stale: bool },
    HandBack,
    Charge(bool),
    Publish,
    Park,
    RecordAnswer { delivery: u8, early: bool },
    ClaimAnswer,
    Take,
    Revive,
    LetGo,
    ClearHandBack,
    End { claim_guard: bool },
    ReleaseBox,
    Finish,
    Relaunch,
    FenceAll,
}

#[derive(Debug, Clone, Copy)]
enum Action {
    /// the seat's holder (`by_holder`) or the other node applies `step` to turn `turn`
    Apply {
        by_holder: bool,
        turn: usize,
        step: Step,
    },
    /// the current holder's session ends and the other node acquires the seat
    Handoff,
    /// the next write lands and its reply is lost
    LoseReply,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Open),
        3 => Just(Step::Commit),
        3 => any::<bool>().prop_map(|stale| Step::ClaimCompletion { stale }),
        2 => Just(Step::HandBack),
        2 => any::<bool>().prop_map(Step::Charge),
        2 => Just(Step::Publish),
        3 => Just(Step::Park),
        3 => (0u8..3, any::<bool>()).prop_map(|(delivery, early)| Step::RecordAnswer { delivery, early }),
        3 => Just(Step::ClaimAnswer),
        3 => Just(Step::Take),
        2 => Just(Step::Revive),
        2 => Just(Step::LetGo),
        2 => Just(Step::ClearHandBack),
        2 => any::<bool>().prop_map(|claim_guard| Step::End { claim_guard }),
        2 => Just(Step::ReleaseBox),
        2 => Just(Step::Finish),
        2 => Just(Step::Relaunch),
        1 => Just(Step::FenceAll),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        20 => (prop::bool::weighted(0.85), 0usize..TURNS, step())
            .prop_map(|(by_holder, turn, step)| Action::Apply { by_holder, turn, step }),
        1 => Just(Action::Handoff),
        2 => Just(Action::LoseReply),
    ]
}

/// A stretch of a run's life by the seat's holder, repeats and out-of-order steps included
/// (a second charge, a revival after a take, a finish before the box is reclaimed), so the
/// sequences reach the states the invariants are about, not only their early steps.
fn walk() -> impl Strategy<Value = Vec<Action>> {
    use Step::*;
    let paths: [&[Step]; 3] = [
        &[
            Open,
            Commit,
            ClaimCompletion { stale: false },
            Charge(true),
            Charge(true),
            Publish,
            Publish,
            Park,
            RecordAnswer {
                delivery: 0,
                early: false,
            },
            RecordAnswer {
                delivery: 1,
                early: false,
            },
            ClaimAnswer,
            Take,
            Revive,
            End { claim_guard: false },
            Finish,
            ReleaseBox,
            Finish,
        ],
        &[
            Open,
            Commit,
            ClaimCompletion { stale: false },
            Park,
            RecordAnswer {
                delivery: 2,
                early: false,
            },
            ClaimAnswer,
            End { claim_guard: true },
            Finish,
            ReleaseBox,
            Finish,
            ClearHandBack,
            Finish,
        ],
        &[
            Open,
            Commit,
            ClaimCompletion { stale: false },
            Park,
            RecordAnswer {
                delivery: 1,
                early: false,
            },
            ClaimAnswer,
            Revive,
            Take,
            ClaimAnswer,
            Take,
            Relaunch,
            Commit,
            ClaimCompletion { stale: true },
            ClaimCompletion { stale: false },
        ],
    ];
    (0usize..paths.len(), 0usize..TURNS, 3usize..18).prop_map(move |(path, turn, len)| {
        paths[path]
            .iter()
            .take(len)
            .map(|&step| Action::Apply {
                by_holder: true,
                turn,
                step,
            })
            .collect()
    })
}

fn actions() -> impl Strategy<Value = Vec<Action>> {
    prop::collection::vec(
        prop_oneof![4 => action().prop_map(|a| vec![a]), 1 => walk()],
        1..40,
    )
    .prop_map(|stretches| stretches.concat())
}

struct Node {
    session: LeaseId,
    /// the fence it last acquired; stale once the seat moved
    fence: Option<Fence>,
    incarnation: u32,
}

struct Harness {
    store: Arc<dyn Store>,
    faults: Faults,
    keys: Keys,
    runs: Runs,
    nodes: [Node; 2],
    holder: usize,
    launches: u32,
    // the model: what has landed
    claimed: HashSet<(String, String)>,
    charged: HashMap<(String, String, bool), u32>,
    share_charges: [u64; 2],
    published: HashSet<(String, String)>,
    taken: HashSet<String>,
    /// the reference model's runs
    model: model::Runs,
}

fn turn_id(turn: usize) -> String {
    format!("turn{turn}")
}

impl Harness {
    async fn new(store: Arc<dyn Store>, prefix: &str) -> Self {
        let faulty = Faulty::from_arc(store);
        let faults = faulty.faults();
        faults.only_under(prefix.to_owned());
        let store: Arc<dyn Store> = Arc::new(faulty);
        let keys = Keys::new(prefix);
        let runs = Runs::new(store.clone(), keys.clone());
        let mut harness = Self {
            nodes: [
                Node {
                    session: 0,
                    fence: None,
                    incarnation: 0,
                },
                Node {
                    session: 0,
                    fence: None,
                    incarnation: 0,
                },
            ],
            store,
            faults,
            keys,
            runs,
            holder: 0,
            launches: 0,
            claimed: HashSet::new(),
            charged: HashMap::new(),
            share_charges: [0, 0],
            published: HashSet::new(),
            taken: HashSet::new(),
            model: model::Runs::new(),
        };
        harness.acquire(0).await;
        harness
    }

    async fn acquire(&mut self, who: usize) {
        let node = &mut self.nodes[who];
        node.incarnation += 1;
        node.session = self.store.lease_grant(60).await.expect("grant");
        let holder = Holder {
            node: format!("n{who}"),
            incarnation: node.incarnation.to_string(),
        };
        match seat::acquire(self.store.as_ref(), &self.keys, SEAT, &holder, node.session)
            .await
            .expect("acquire")
        {
            Acquire::Held(fence) => node.fence = Some(fence),
            Acquire::HeldBy { holder, .. } => panic!("seat still held by {holder:?}"),
        }
        self.holder = who;
    }

    async fn rows(&self) -> BTreeMap<String, RunRecord> {
        let runs = self.inner_list().await;
        runs.into_iter()
            .map(|run| (run.turn_id.clone(), run))
            .collect()
    }

    async fn inner_list(&self) -> Vec<RunRecord> {
        self.runs
            .list()
            .await
            .expect("list runs")
            .into_iter()
            .map(|v| v.record)
            .collect()
    }

    fn transition(
        &mut self,
        step: Step,
        row: Option<&RunRecord>,
        turn: &str,
    ) -> Option<Transition> {
        let launch = row.map_or_else(|| "l0".to_owned(), |row| row.launch_id.clone());
        let sandbox = row
            .and_then(|row| row.sandbox_id.clone())
            .unwrap_or_else(|| "box".into());
        Some(match step {
            Step::Open => {
                self.launches += 1;
                Transition::OpenLaunch {
                    record: Box::new(launching(turn, &format!("l{}", self.launches))),
                }
            }
            Step::Commit => {
                // the launch boxes the job first
                Transition::CommitSuspension {
                    launch_id: launch,
                    conversation: b"c".to_vec(),
                }
            }
            Step::ClaimCompletion { stale } => Transition::ClaimCompletion {
                launch_id: if stale { "l-stale".into() } else { launch },
            },
            Step::HandBack => Transition::HandBackClaim {
                launch_id: launch,
                collect_failed: true,
            },
            Step::Charge(seat) => Transition::Charge {
                launch_id: launch,
                share: if seat { Share::Seat } else { Share::Company },
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 1,
                    ..Usage::default()
                },
            },
            Step::Publish => Transition::PublishPhase {
                launch_id: launch,
                phase: serde_json::json!({}),
            },
            Step::Park => Transition::Park {
                launch_id: launch,
                question: question(at(10)),
            },
            Step::RecordAnswer { delivery, early } => Transition::RecordAnswer {
                answer: answer(
                    &format!("{turn}-{launch}-d{delivery}"),
                    if early { at(5) } else { at(20) },
                ),
            },
            Step::ClaimAnswer => Transition::ClaimAnswer { launch_id: launch },
            Step::Take => Transition::Take { launch_id: launch },
            Step::Revive => Transition::Revive,
            Step::LetGo => Transition::LetGo,
            Step::ClearHandBack => Transition::ClearHandBack {
                delivery_ids: row?
                    .hand_back
                    .iter()
                    .map(|copy| copy.delivery_id.clone())
                    .collect(),
            },
            Step::End { claim_guard } => Transition::DecideEnding {
                reason: EndingReason::AbandonedTail,
                detail: String::new(),
                guard: if claim_guard {
                    EndingGuard::Claim { launch_id: launch }
                } else {
                    EndingGuard::Any
                },
                announce: None,
            },
            Step::ReleaseBox => Transition::ReleaseBox {
                sandbox_id: sandbox,
            },
            Step::Finish => Transition::Finish,
            Step::Relaunch => {
                self.launches += 1;
                Transition::Relaunch {
                    launch_id: launch,
                    new_launch_id: format!("l{}", self.launches),
                    brief: String::new(),
                }
            }
            Step::FenceAll => return None,
        })
    }

    async fn act(&mut self, action: Action) {
        match action {
            Action::Handoff => {
                let old = self.holder;
                self.store
                    .lease_revoke(self.nodes[old].session)
                    .await
                    .expect("revoke");
                self.acquire(1 - old).await;
                // the new holder's recovery pass fences every run of the seat first
                let fence = self.nodes[self.holder].fence.clone().expect("fence");
                self.runs.fence_seat_runs(&fence).await.expect("fence runs");
                self.model_fence(fence.epoch);
            }
            Action::LoseReply => self.faults.lose_next_reply(1),
            Action::Apply {
                by_holder,
                turn,
                step,
            } => {
                let who = if by_holder {
                    self.holder
                } else {
                    1 - self.holder
                };
                self.apply(who, turn, step).await
            }
        }
    }

    async fn apply(&mut self, who: usize, turn: usize, step: Step) {
        let turn = turn_id(turn);
        let before = self.rows().await;
        let row = before.get(&turn);
        let fence = self.nodes[who].fence.clone().unwrap_or(Fence {
            seat: SEAT.into(),
            epoch: 0,
        });
        let holds = who == self.holder;
        let result = if let Step::FenceAll = step {
            let fenced = self.runs.fence_seat_runs(&fence).await.map(|_| None);
            assert_eq!(
                fenced.is_ok(),
                holds,
                "fence_seat_runs by holds={holds}: {fenced:?}"
            );
            if holds {
                self.model_fence(fence.epoch);
            }
            fenced
        } else {
            let Some(transition) = self.transition(step, row, &turn) else {
                return;
            };
            // a launch names its box before it commits
            if let (Transition::CommitSuspension { launch_id, .. }, Some(row)) = (&transition, row)
                && row.sandbox_id.is_none()
            {
                let attach = Transition::AttachBox {
                    launch_id: launch_id.clone(),
                    sandbox_id: format!("box-{turn}-{}", row.launch_id),
                    placement: "direct".into(),
                    job: None,
                    host: None,
                    boxes_dir: None,
                };
                let predicted = model::predict(self.model.get(&turn), &attach, fence.epoch, holds);
                let actual = self.runs.apply_at(&fence, &turn, attach, at(30)).await;
                self.follow_model(&turn, "attach_box", predicted, actual.is_ok());
            }
            let kind = transition.clone();
            let predicted = model::predict(self.model.get(&turn), &transition, fence.epoch, holds);
            let actual = self
                .runs
                .apply_at(&fence, &turn, transition, at(30))
                .await
                .map(|_| Some(kind));
            self.follow_model(&turn, &format!("{step:?}"), predicted, actual.is_ok());
            actual
        };
        self.faults.clear();
        let after = self.rows().await;

        // I9: a node that does not hold the seat changes nothing
        if !holds {
            assert!(
                matches!(
                    result,
                    Err(RunError::SeatNotHeld { .. }) | Err(RunError::Refused(_))
                ),
                "{step:?} by a node without the seat: {result:?}"
            );
            assert_eq!(
                before, after,
                "{step:?} by a node without the seat moved a row"
            );
            return;
        }
        let landed = match result {
            Ok(kind) => kind,
            Err(RunError::Refused(_)) => {
                assert_eq!(before, after, "a refused {step:?} moved a row");
                return;
            }
            Err(error) => panic!("{step:?} failed on the store: {error}"),
        };
        let Some(transition) = landed else { return };
        let row_after = after.get(&turn);
        self.account(&transition, row, row_after, &turn);
    }

    /// Updates the model with a transition that landed and checks its invariants.
    fn account(
        &mut self,
        transition: &Transition,
        before: Option<&RunRecord>,
        after: Option<&RunRecord>,
        turn: &str,
    ) {
        if let Some(before) = before
            && let Some(ending) = &before.ending
        {
            // I6
            assert!(
                matches!(
                    transition,
                    Transition::ClearHandBack { .. }
                        | Transition::ReleaseBox { .. }
                        | Transition::Finish
                ),
                "{} landed on an ending row",
                transition.name()
            );
            if let Some(after) = after {
                assert_eq!(after.ending.as_ref(), Some(ending), "ending terms changed");
            }
        }
        match (transition, after) {
            (Transition::ClaimCompletion { launch_id }, _) => {
                // I2: one claim of a job at a time; a hand-back gives it back for the retry
                let fresh = self.claimed.insert((turn.to_owned(), launch_id.clone()));
                assert!(fresh, "completion of {turn}/{launch_id} claimed twice");
            }
            // I12: a revived completion claim gives the job back to be claimed and collected
            // again (its charge and phase record stay once each: they are not revived)
            (Transition::Revive, Some(after)) if after.status == Status::Running => {
                if let Some(claim) = before.and_then(|run| run.claim.as_ref()) {
                    self.claimed
                        .remove(&(turn.to_owned(), claim.launch_id.clone()));
                }
            }
            (Transition::HandBackClaim { launch_id, .. }, after) => {
                self.claimed.remove(&(turn.to_owned(), launch_id.clone()));
                // a claim given back for a retry un-takes its answer: nothing the turn did
                // reached anybody, so the reply may go back to the seat after all
                if let Some(answer) = after.and_then(|run| run.answer.as_ref()) {
                    self.taken.remove(&answer.delivery_id);
                }
            }
            (
                Transition::Charge {
                    launch_id, share, ..
                },
                _,
            ) => {
                let seat = *share == Share::Seat;
                let count = self
                    .charged
                    .entry((turn.to_owned(), launch_id.clone(), seat))
                    .or_default();
                *count += 1;
                assert_eq!(*count, 1, "{turn}/{launch_id} charged twice");
                self.share_charges[usize::from(seat)] += 1;
            }
            (Transition::PublishPhase { launch_id, .. }, _) => {
                let fresh = self.published.insert((turn.to_owned(), launch_id.clone()));
                assert!(fresh, "phase of {turn}/{launch_id} published twice");
            }
            (Transition::RecordAnswer { answer }, Some(after)) => {
                // I4
                let asked = after.question.as_ref().expect("question").asked_at;
                assert!(
                    answer.posted_at >= asked,
                    "an answer posted before its question landed"
                );
                assert_ne!(
                    before.map(|b| b.status),
                    Some(Status::Answered),
                    "re-answered"
                );
            }
            // a completion's take records the findings taken; an answer's spends the answer
            (Transition::Take { .. }, Some(after)) => {
                if let Some(answer) = after.answer.as_ref() {
                    self.taken.insert(answer.delivery_id.clone());
                } else {
                    assert!(after.completion_taken(), "a take that took nothing");
                }
            }
            (_, None) => {
                // I7, I8
                let before = before.expect("a row deleted must have existed");
                assert_eq!(
                    before.status,
                    Status::Ending,
                    "deleted from {}",
                    before.status
                );
                assert!(before.hand_back.is_empty(), "deleted while owing a reply");
                assert!(before.sandbox_id.is_none(), "deleted while naming a box");
            }
            _ => {}
        }
    }

    /// Checks the store's answer against the model's prediction and moves the model on.
    fn follow_model(
        &mut self,
        turn: &str,
        what: &str,
        predicted: Option<Option<model::Run>>,
        landed: bool,
    ) {
        let before = self.model.get(turn).cloned();
        assert_eq!(
            predicted.is_some(),
            landed,
            "{what} on {turn}: the model says {}, the store says {}; run was {before:?}",
            if predicted.is_some() {
                "it lands"
            } else {
                "refused"
            },
            if landed { "landed" } else { "refused" },
        );
        match predicted {
            Some(Some(run)) => {
                self.model.insert(turn.to_owned(), run);
            }
            Some(None) => {
                self.model.remove(turn);
            }
            None => {}
        }
    }

    /// A seat holder's recovery fence, in the model.
    fn model_fence(&mut self, epoch: i64) {
        for run in self.model.values_mut() {
            if let Some(Some(next)) = model::predict(
                Some(run),
                &Transition::FenceRun { owner: None },
                epoch,
                true,
            ) {
                *run = next;
            }
        }
    }

    /// Invariants over the whole store, after every step.
    async fn check_store(&self) {
        // the store holds exactly the runs the model holds, as the model says
        let stored: BTreeMap<String, model::Run> = self
            .rows()
            .await
            .iter()
            .map(|(turn, row)| (turn.clone(), model::Run::project(row)))
            .collect();
        assert_eq!(stored, self.model, "the store and the model disagree");
        for (turn, row) in self.rows().await {
            transition::check_record(&row).unwrap_or_else(|problem| panic!("{turn}: {problem}"));
            for copy in &row.hand_back {
                // I5: a taken answer is spent, never handed back
                assert!(
                    !self.taken.contains(&copy.original_delivery_id),
                    "{turn}: taken answer {} handed back",
                    copy.original_delivery_id
                );
            }
        }
        // I3: the counters hold exactly the charges that landed
        for (index, share) in [(0, Share::Company), (1, Share::Seat)] {
            let scope = spend::scope(share, SEAT);
            let window = &spend::windows(at(30))[0];
            let (counter, _) = spend::read(self.store.as_ref(), &self.keys, &scope, window)
                .await
                .expect("counter");
            assert_eq!(
                counter.charges, self.share_charges[index],
                "{scope} counter"
            );
        }
        // I10: no event written twice
        let range = self.store.range(&self.keys.events()).await.expect("events");
        for kv in range.kvs {
            assert_eq!(
                kv.version, 1,
                "event {} written {} times",
                kv.key, kv.version
            );
        }
        let phases = events::read_from(self.store.as_ref(), &self.keys, 0)
            .await
            .expect("events")
            .into_iter()
            .filter(|stored| stored.event.kind == events::kind::PHASE_COMPLETED)
            .count();
        assert_eq!(
            phases,
            self.published.len(),
            "phase events vs phases published"
        );
    }
}

async fn run_actions(store: Arc<dyn Store>, prefix: &str, actions: Vec<Action>) {
    let mut harness = Harness::new(store, prefix).await;
    for action in actions {
        harness.act(action).await;
        harness.check_store().await;
    }
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn embedded_random_interleavings_keep_the_invariants(actions in actions()) {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = EmbeddedStore::open(dir.path()).await.expect("open");
            run_actions(Arc::new(store), &unique_prefix("sm"), actions).await;
        });
    }

    #[test]
    fn etcd_random_interleavings_keep_the_invariants(actions in actions()) {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let store = EtcdServer::shared().store().await;
            run_actions(Arc::new(store), &unique_prefix("sm"), actions).await;
        });
    }
}

/// The reference model: what each run should look like, written from the spec independently
/// of `transition::decide`, and the oracle for whether each step may land.
mod model {
    use std::collections::{BTreeMap, BTreeSet};

    use boxfleet_cluster::record::{ClaimKind, RunRecord, Status};
    use boxfleet_cluster::transition::{EndingGuard, Share, Transition};

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Claim {
        pub kind: ClaimKind,
        pub launch: String,
        pub epoch: i64,
        pub from: Status,
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Run {
        pub status: Status,
        pub launch: String,
        pub epoch: i64,
        pub claim: Option<Claim>,
        /// (delivery, taken, lost claims)
        pub answer: Option<(String, bool, u32)>,
        pub declined: BTreeSet<String>,
        pub owed: usize,
        pub sandbox: Option<String>,
        pub charged: (bool, bool),
        pub published: bool,
        /// (the job whose findings a turn took, completion claims lost and revived)
        pub completion: (Option<String>, u32),
    }

    impl Run {
        /// The model's view of a stored record.
        pub fn project(record: &RunRecord) -> Run {
            let charged = record
                .charged
                .as_ref()
                .filter(|c| c.launch_id == record.launch_id)
                .map_or((false, false), |c| (c.seat, c.company));
            Run {
                status: record.status,
                launch: record.launch_id.clone(),
                epoch: record.epoch,
                claim: record.claim.as_ref().map(|c| Claim {
                    kind: c.kind,
                    launch: c.launch_id.clone(),
                    epoch: c.epoch,
                    from: c.from,
                }),
                answer: record
                    .answer
                    .as_ref()
                    .map(|a| (a.delivery_id.clone(), a.taken_at.is_some(), a.lost_claims)),
                declined: record
                    .declined_answers
                    .iter()
                    .filter(|d| !d.starts_with("copy-"))
                    .cloned()
                    .collect(),
                owed: record.hand_back.len(),
                sandbox: record.sandbox_id.clone(),
                charged,
                published: record.phase_published.as_deref() == Some(record.launch_id.as_str()),
                completion: record
                    .completion
                    .as_ref()
                    .map_or((None, 0), |c| (c.taken_launch_id.clone(), c.lost_claims)),
            }
        }

        fn own_claim(&self, launch: &str, epoch: i64, kind: Option<ClaimKind>) -> bool {
            self.status == Status::Resumed
                && self.launch == launch
                && self.claim.as_ref().is_some_and(|c| {
                    c.launch == launch && c.epoch == epoch && kind.is_none_or(|k| k == c.kind)
                })
        }

        /// Takes an untaken answer off the run into an owed copy.
        fn let_go(&mut self) {
            if let Some((delivery, taken, _)) = self.answer.take()
                && !taken
            {
                self.declined.insert(delivery);
                self.owed += 1;
            }
        }
    }

    /// What the model predicts for one transition: `None` = refused, `Some(None)` = the row is
    /// deleted, `Some(Some(run))` = the row as it must be after.
    pub fn predict(
        current: Option<&Run>,
        transition: &Transition,
        epoch: i64,
        holds: bool,
    ) -> Option<Option<Run>> {
        if !holds || epoch <= 0 {
            return None;
        }
        let Some(run) = current else {
            let Transition::OpenLaunch { record } = transition else {
                return None;
            };
            return Some(Some(Run {
                status: Status::Launching,
                launch: record.launch_id.clone(),
                epoch,
                claim: None,
                answer: None,
                declined: BTreeSet::new(),
                owed: 0,
                sandbox: None,
                charged: (false, false),
                published: false,
                completion: (None, 0),
            }));
        };
        if run.epoch > epoch {
            return None;
        }
        let mut next = run.clone();
        let ending = run.status == Status::Ending;
        match transition {
            Transition::ClearHandBack { delivery_ids }
                if run.owed > 0 && !delivery_ids.is_empty() =>
            {
                next.owed = 0;
            }
            Transition::ReleaseBox { sandbox_id }
                if ending && run.sandbox.as_ref() == Some(sandbox_id) =>
            {
                next.sandbox = None;
            }
            Transition::Finish if ending && run.owed == 0 && run.sandbox.is_none() => {
                return Some(None);
            }
            _ if ending => return None,
            Transition::AttachBox {
                launch_id,
                sandbox_id,
                ..
            } if run.status == Status::Launching && run.launch == *launch_id => {
                next.sandbox = Some(sandbox_id.clone());
            }
            Transition::CommitSuspension { launch_id, .. }
                if run.status == Status::Launching && run.launch == *launch_id =>
            {
                next.status = Status::Running;
                next.answer = None;
            }
            Transition::ClaimCompletion { launch_id }
                if run.status == Status::Running && run.launch == *launch_id =>
            {
                next.status = Status::Resumed;
                next.epoch = epoch;
                next.claim = Some(Claim {
                    kind: ClaimKind::Completion,
                    launch: launch_id.clone(),
                    epoch,
                    from: Status::Running,
                });
            }
            Transition::HandBackClaim { launch_id, .. }
                if run.own_claim(launch_id, epoch, None) =>
            {
                let claim = next.claim.take().expect("claim");
                next.status = claim.from;
                if claim.from == Status::Answered
                    && let Some(answer) = next.answer.as_mut()
                {
                    answer.1 = false;
                }
            }
            Transition::Charge {
                launch_id, share, ..
            } if run.own_claim(launch_id, epoch, None) => {
                let landed = match share {
                    Share::Seat => &mut next.charged.0,
                    Share::Company => &mut next.charged.1,
                    // the model's runs carry no work item, so it charges no task share
                    Share::Task => return None,
                };
                if *landed {
                    return None;
                }
                *landed = true;
            }
            Transition::PublishPhase { launch_id, .. }
                if run.own_claim(launch_id, epoch, None) && !run.published =>
            {
                next.published = true;
            }
            Transition::Park { launch_id, .. }
                if run.own_claim(launch_id, epoch, Some(ClaimKind::Completion)) =>
            {
                next.status = Status::AwaitingClarification;
                next.claim = None;
                next.answer = None;
            }
            Transition::RecordAnswer { answer }
                if matches!(run.status, Status::AwaitingClarification | Status::Reseed)
                    && answer.posted_at >= crate::support::at(10)
                    && !run.declined.contains(&answer.delivery_id) =>
            {
                next.status = Status::Answered;
                next.epoch = epoch;
                next.answer = Some((answer.delivery_id.clone(), false, 0));
            }
            Transition::ClaimAnswer { launch_id }
                if run.status == Status::Answered && run.launch == *launch_id =>
            {
                next.status = Status::Resumed;
                next.epoch = epoch;
                next.claim = Some(Claim {
                    kind: ClaimKind::Answer,
                    launch: launch_id.clone(),
                    epoch,
                    from: Status::Answered,
                });
            }
            Transition::Take { launch_id }
                if run.own_claim(launch_id, epoch, Some(ClaimKind::Answer))
                    && run.answer.as_ref().is_some_and(|a| !a.1) =>
            {
                next.answer.as_mut().expect("answer").1 = true;
            }
            // a completion's claim: the findings taken once; an untaken claim revived (I12)
            Transition::Take { launch_id }
                if run.own_claim(launch_id, epoch, Some(ClaimKind::Completion))
                    && run.completion.0.as_deref() != Some(launch_id.as_str()) =>
            {
                next.completion.0 = Some(launch_id.clone());
            }
            Transition::Revive
                if run.status == Status::Resumed
                    && run.claim.as_ref().is_some_and(|c| {
                        c.kind == ClaimKind::Completion
                            && run.completion.0.as_deref() != Some(c.launch.as_str())
                    })
                    && run.completion.1 < 3 =>
            {
                next.status = run.claim.as_ref().expect("claim").from;
                next.claim = None;
                next.epoch = epoch;
                next.completion.1 += 1;
            }
            Transition::Revive
                if run.status == Status::Resumed
                    && run
                        .claim
                        .as_ref()
                        .is_some_and(|c| c.kind == ClaimKind::Answer)
                    && run.answer.as_ref().is_some_and(|a| !a.1 && a.2 < 3) =>
            {
                next.status = Status::Answered;
                next.claim = None;
                next.epoch = epoch;
                next.answer.as_mut().expect("answer").2 += 1;
            }
            Transition::LetGo
                if run.status == Status::Answered
                    && run.owed == 0
                    && run.answer.as_ref().is_some_and(|a| !a.1) =>
            {
                next.let_go();
                next.status = if run.sandbox.is_some() {
                    Status::AwaitingClarification
                } else {
                    Status::Reseed
                };
            }
            Transition::DecideEnding { guard, .. }
                if match guard {
                    EndingGuard::Any => true,
                    EndingGuard::Claim { launch_id } => run.own_claim(launch_id, epoch, None),
                    EndingGuard::Launching { launch_id } => {
                        run.status == Status::Launching && run.launch == *launch_id
                    }
                } =>
            {
                next.let_go();
                next.status = Status::Ending;
                next.epoch = epoch;
            }
            Transition::Relaunch {
                launch_id,
                new_launch_id,
                ..
            } if run.own_claim(launch_id, epoch, None) => {
                // the answer stays, taken, until the conversation commits (revert_relaunch)
                let answer = next
                    .answer
                    .clone()
                    .map(|(delivery, _, lost)| (delivery, true, lost));
                next = Run {
                    status: Status::Launching,
                    launch: new_launch_id.clone(),
                    claim: None,
                    answer,
                    declined: BTreeSet::new(),
                    charged: (false, false),
                    published: false,
                    ..next
                };
            }
            Transition::FenceRun { .. } if run.epoch != epoch => next.epoch = epoch,
            _ => return None,
        }
        Some(Some(next))
    }

    /// The model of every run.
    pub type Runs = BTreeMap<String, Run>;
}
