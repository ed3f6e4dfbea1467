//! Every transition of a run as one fenced compare-and-set (DESIGN §5, §6).
//!
//! [`Runs::apply`] reads the row, asks [`transition::decide`] what to write, and writes it in
//! one txn that compares the seat holder's create_revision with the writer's epoch (the fence,
//! I9) and the row's mod_revision with the one read (the CAS). The decision's effects ride the
//! same txn: events are created only when absent (I10), delivery spends go to the ledger,
//! charges move the spend counters under their own CAS.
//!
//! A txn that fails is diagnosed from its failure branch: the seat lost (`seat_not_held`), the
//! row changed (re-read and decide again), or an event already announced (drop it and retry).
//! A write whose outcome is unknown is resolved by re-reading: the row as intended means it
//! landed; the row as read means it did not.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::events;
use crate::ledger;
use crate::record::{RunRecord, Status};
use crate::retention::Retention;
use crate::seat::fence_compare;
use crate::seat_runs;
use crate::spend;
use crate::store::{Compare, KeyValue, Op, OpResult, Store, Txn};
use crate::transition::{self, Decision, Effect, Fence, Next, Refusal, Transition};
use crate::{Error, Keys, keys::check_id};

/// How many times a write is re-decided after the row moved under it.
const MAX_ATTEMPTS: usize = 8;
/// How many times a retryable store error is retried inside one apply.
const MAX_STORE_RETRIES: usize = 3;

/// A record with the revision it was read at.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned {
    pub record: RunRecord,
    pub mod_revision: i64,
}

/// What an applied transition left.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// the row as written
    Written(Box<Versioned>),
    /// the row is gone
    Deleted,
}

impl Outcome {
    pub fn record(&self) -> Option<&RunRecord> {
        match self {
            Outcome::Written(versioned) => Some(&versioned.record),
            Outcome::Deleted => None,
        }
    }
}

/// Why a transition was not applied.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run is not in a state the transition applies to.
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// The writer no longer holds the seat's lease: it must write nothing more on the seat.
    #[error("sandbox_seat_not_held: seat {seat} is not held under epoch {epoch}")]
    SeatNotHeld { seat: String, epoch: i64 },
    /// The row kept changing under the write.
    #[error("run {0} changed under {MAX_ATTEMPTS} attempts in a row")]
    Contended(String),
    /// The store failed; see its class.
    #[error(transparent)]
    Store(#[from] Error),
}

/// The run records of one store.
#[derive(Debug, Clone)]
pub struct Runs {
    store: Arc<dyn Store>,
    keys: Keys,
    ledger: Arc<Retention>,
    events: Arc<Retention>,
    /// the company's clock (seconds east of UTC) the spend windows turn on
    clock: Arc<std::sync::atomic::AtomicI32>,
    /// set once this process has given every run its seat entry ([`seat_runs::backfill`])
    indexed: Arc<tokio::sync::OnceCell<()>>,
}

enum Attempt {
    /// the txn landed at this revision
    Done(i64),
    /// the row or a counter moved: read again and decide again
    Moved,
    /// these announcements are already in the outbox
    Announced(Vec<String>),
}

impl Runs {
    pub fn new(store: Arc<dyn Store>, keys: Keys) -> Self {
        Self {
            store,
            keys,
            ledger: Arc::new(Retention::ledger()),
            events: Arc::new(Retention::events()),
            clock: Arc::new(std::sync::atomic::AtomicI32::new(0)),
            indexed: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    /// Sets the company's clock the spend windows turn on (a reload may move it).
    pub fn set_clock(&self, clock: chrono::FixedOffset) {
        self.clock.store(
            clock.local_minus_utc(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The company's clock the spend windows turn on.
    pub fn clock(&self) -> chrono::FixedOffset {
        let seconds = self.clock.load(std::sync::atomic::Ordering::Relaxed);
        chrono::FixedOffset::east_opt(seconds)
            .unwrap_or_else(|| chrono::FixedOffset::east_opt(0).expect("UTC"))
    }

    /// The same, keeping the events it announces for `events` rather than the default week.
    pub fn keeping_events(mut self, events: Retention) -> Self {
        self.events = Arc::new(events);
        self
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Announces `event` on its own, once: created only if no event with its id exists (an
    /// announcement about a run that no write of the run carries — an answer that found the
    /// run gone, or not waiting on its question). `true` when this call created it.
    pub async fn announce(&self, event: &events::Event) -> Result<bool, Error> {
        for _ in 0..2 {
            let lease = self
                .events
                .lease(self.store.as_ref(), crate::clock::now())
                .await?;
            let budget = self
                .store
                .max_request_bytes()
                .saturating_sub(events::REQUEST_OVERHEAD_BYTES);
            let (compare, puts) = events::create(&self.keys, event, lease, budget);
            let txn = Txn::new().when([compare]).and_then(puts);
            match self.store.txn(txn).await {
                Ok(response) => return Ok(response.succeeded),
                Err(Error::Invalid(message)) if message.contains("lease") => self.events.forget(),
                Err(error) => return Err(error),
            }
        }
        Err(Error::Unavailable(format!(
            "event {} was not announced: its retention lease kept lapsing",
            event.id
        )))
    }

    /// Whether the event with `id` was announced (and is still retained).
    pub async fn announced(&self, id: &str) -> Result<bool, Error> {
        Ok(self.store.get(&self.keys.event(id)).await?.is_some())
    }

    /// Reads one run.
    pub async fn read(&self, turn_id: &str) -> Result<Option<Versioned>, Error> {
        let key = self.keys.run(turn_id);
        self.store
            .get(&key)
            .await?
            .map(|kv| decode(&kv))
            .transpose()
    }

    /// Every run, in turn-id order.
    pub async fn list(&self) -> Result<Vec<Versioned>, Error> {
        let range = self.store.range(&self.keys.runs()).await?;
        range.kvs.iter().map(decode).collect()
    }

    /// The entries of one seat's runs, once every run has its entry.
    async fn seat_entries(&self, seat: &str) -> Result<Vec<seat_runs::Entry>, Error> {
        self.ensure_indexed().await?;
        seat_runs::entries(self.store.as_ref(), &self.keys, seat).await
    }

    /// A run of `seat` that holds its inbox (launching, running, resumed, answered, ending),
    /// from the seat's entries alone: one range, no row read. An entry is written in the txn
    /// that writes its row, so it says what the row says.
    pub async fn seat_held_by(&self, seat: &str) -> Result<Option<String>, Error> {
        Ok(self
            .seat_entries(seat)
            .await?
            .into_iter()
            .find(|entry| entry.status.holds_seat())
            .map(|entry| entry.turn_id))
    }

    /// Every run's seat entry key (no value), at one revision: what a watch of the entries
    /// starts from ([`crate::seat_view`]).
    pub async fn entry_listing(&self) -> Result<crate::store::Range, Error> {
        self.ensure_indexed().await?;
        self.store.range_keys(&self.keys.all_seat_runs()).await
    }

    /// Every run's seat entry: its turn and its status, no row read.
    pub async fn all_entries(&self) -> Result<Vec<seat_runs::Entry>, Error> {
        self.ensure_indexed().await?;
        seat_runs::all_entries(self.store.as_ref(), &self.keys).await
    }

    /// The rows of `turns` (a page of keys per read); a run gone since is left out.
    pub async fn read_many(&self, turns: &[String]) -> Result<Vec<Versioned>, Error> {
        seat_runs::read_runs(self.store.as_ref(), &self.keys, turns).await
    }

    /// Gives every run its seat entry, once per process, before the entries are first read.
    async fn ensure_indexed(&self) -> Result<(), Error> {
        self.indexed
            .get_or_try_init(|| async {
                let done = seat_runs::backfill(self.store.as_ref(), &self.keys).await?;
                if done != seat_runs::Backfilled::default() {
                    tracing::info!(
                        written = done.written,
                        removed = done.removed,
                        "seat_runs_backfilled"
                    );
                }
                Ok::<(), Error>(())
            })
            .await?;
        Ok(())
    }

    /// The runs of one seat, in turn-id order: its entries, then their rows.
    pub async fn list_by_seat(&self, seat: &str) -> Result<Vec<Versioned>, Error> {
        let turns: Vec<String> = self
            .seat_entries(seat)
            .await?
            .into_iter()
            .map(|entry| entry.turn_id)
            .collect();
        let mut runs = seat_runs::read_runs(self.store.as_ref(), &self.keys, &turns).await?;
        runs.retain(|run| run.record.seat == seat);
        Ok(runs)
    }

    /// The runs parked on (or answered on) a conversation.
    pub async fn list_by_conversation(
        &self,
        conversation_key: &str,
    ) -> Result<Vec<Versioned>, Error> {
        let mut runs = self.list().await?;
        runs.retain(|run| run.record.conversation_key.as_deref() == Some(conversation_key));
        Ok(runs)
    }

    /// The runs of a seat that hold its inbox (launching, running, resumed, answered, ending):
    /// the seat is busy while any exists.
    pub async fn list_active(&self, seat: &str) -> Result<Vec<Versioned>, Error> {
        let turns: Vec<String> = self
            .seat_entries(seat)
            .await?
            .into_iter()
            .filter(|entry| entry.status.holds_seat())
            .map(|entry| entry.turn_id)
            .collect();
        let mut runs = seat_runs::read_runs(self.store.as_ref(), &self.keys, &turns).await?;
        // the row, read after the entry, is the truth
        runs.retain(|run| run.record.seat == seat && run.record.status.holds_seat());
        Ok(runs)
    }

    /// The runs the completion poll looks at: running ones.
    pub async fn list_running(&self) -> Result<Vec<Versioned>, Error> {
        let mut runs = self.list().await?;
        runs.retain(|run| run.record.status == Status::Running);
        Ok(runs)
    }

    /// Applies `transition` to the run `turn_id` as it stands now.
    pub async fn apply(
        &self,
        fence: &Fence,
        turn_id: &str,
        transition: Transition,
    ) -> Result<Outcome, RunError> {
        self.apply_at(fence, turn_id, transition, crate::clock::now())
            .await
    }

    /// [`Runs::apply`] with the decision's clock given (tests, replays).
    pub async fn apply_at(
        &self,
        fence: &Fence,
        turn_id: &str,
        transition: Transition,
        now: DateTime<Utc>,
    ) -> Result<Outcome, RunError> {
        self.apply_steps(fence, turn_id, None, (&transition, &[]), now)
            .await
    }

    /// Applies `steps` (a first transition, then the rest) in order as one write: each is
    /// decided on the record the one before it left, and their effects ride the one txn.
    /// `known` is the row as the caller just read it (its revision is compared, so a row that
    /// moved since is read again and decided anew); without it the row is read first. A
    /// refusal of any step refuses them all.
    pub async fn apply_steps(
        &self,
        fence: &Fence,
        turn_id: &str,
        mut known: Option<Box<Versioned>>,
        steps: (&Transition, &[Transition]),
        now: DateTime<Utc>,
    ) -> Result<Outcome, RunError> {
        check_id("turn_id", turn_id)?;
        let mut announced: HashSet<String> = HashSet::new();
        let mut store_retries = 0;
        for _ in 0..MAX_ATTEMPTS {
            // boxed: every `apply` is this future, and a record held in it inline made each
            // of them (and each future awaiting one) a record larger
            let read = match known.take() {
                Some(known) => Ok(Some(*known)),
                None => self.read(turn_id).await,
            };
            let read = match read {
                Ok(read) => read,
                Err(error) if error.is_retryable() && store_retries < MAX_STORE_RETRIES => {
                    store_retries += 1;
                    tokio::time::sleep(Duration::from_millis(50 << store_retries)).await;
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            let mut decision = decide_steps(read.as_ref().map(|v| &v.record), fence, steps, now)?;
            decision.effects.retain(|effect| match effect {
                Effect::Announce(event) => !announced.contains(&event.id),
                _ => true,
            });
            match self
                .attempt(fence, turn_id, read.as_ref(), &decision, now)
                .await
            {
                Ok(Attempt::Done(revision)) => {
                    // the decision is spent: its record moves into the outcome, no copy
                    return Ok(match decision.next {
                        Next::Write(record) => Outcome::Written(Box::new(Versioned {
                            record: *record,
                            mod_revision: revision,
                        })),
                        Next::Delete => Outcome::Deleted,
                    });
                }
                Ok(Attempt::Moved) => continue,
                Ok(Attempt::Announced(ids)) => announced.extend(ids),
                Err(RunError::Store(error)) if error.is_indeterminate() => {
                    match self.resolve(turn_id, read.as_ref(), &decision).await? {
                        Some(outcome) => return Ok(outcome),
                        None => continue,
                    }
                }
                Err(RunError::Store(error))
                    if error.is_retryable() && store_retries < MAX_STORE_RETRIES =>
                {
                    store_retries += 1;
                    tokio::time::sleep(Duration::from_millis(50 << store_retries)).await;
                }
                Err(error) => return Err(error),
            }
        }
        Err(RunError::Contended(turn_id.to_owned()))
    }

    /// Stamps `fence` on every run of its seat that is not ending: the recovery pass's fence,
    /// so a node that lost the seat can neither take nor claim anything on it. Returns the
    /// seat's runs as they stand after the fence.
    pub async fn fence_seat_runs(&self, fence: &Fence) -> Result<Vec<Versioned>, RunError> {
        self.fence_seat_runs_for(fence, None).await
    }

    /// [`Runs::fence_seat_runs`], naming `owner` (the new holder's incarnation) on each run.
    pub async fn fence_seat_runs_for(
        &self,
        fence: &Fence,
        owner: Option<&str>,
    ) -> Result<Vec<Versioned>, RunError> {
        if !crate::seat::holds(self.store.as_ref(), &self.keys, fence).await? {
            return Err(RunError::SeatNotHeld {
                seat: fence.seat.clone(),
                epoch: fence.epoch,
            });
        }
        let mut fenced = Vec::new();
        for run in self.list_by_seat(&fence.seat).await? {
            let turn_id = run.record.turn_id.clone();
            let stamp = Transition::FenceRun {
                owner: owner.map(str::to_owned),
            };
            // decided on the row just listed (read again only if it moved since): one round
            // trip per run, which a failover makes for every run of every seat it takes
            let steps = (&stamp, &[][..]);
            match self
                .apply_steps(
                    fence,
                    &turn_id,
                    Some(Box::new(run)),
                    steps,
                    crate::clock::now(),
                )
                .await
            {
                Ok(Outcome::Written(run)) => fenced.push(*run),
                Ok(Outcome::Deleted) => {}
                Err(RunError::Refused(Refusal::AlreadyDone | Refusal::EndingDecided(_))) => {
                    if let Some(run) = self.read(&turn_id).await? {
                        fenced.push(run);
                    }
                }
                Err(RunError::Refused(Refusal::Missing)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(fenced)
    }

    async fn attempt(
        &self,
        fence: &Fence,
        turn_id: &str,
        read: Option<&Versioned>,
        decision: &Decision,
        now: DateTime<Utc>,
    ) -> Result<Attempt, RunError> {
        let run_key = self.keys.run(turn_id);
        let holder_key = self.keys.seat_holder(&fence.seat);
        let mut compares = vec![
            fence_compare(&self.keys, fence),
            Compare::mod_revision(
                &run_key,
                crate::store::CompareOp::Equal,
                read.map_or(0, |v| v.mod_revision),
            ),
        ];
        let mut success = Vec::new();
        let mut failure = vec![Op::get(&holder_key), Op::get(&run_key)];
        let mut event_ids = Vec::new();
        let mut record_bytes = 0;
        let written = match &decision.next {
            Next::Write(record) => {
                let json = record.to_json();
                record_bytes = json.len();
                success.push(Op::put(&run_key, json));
                Some(record.as_ref())
            }
            Next::Delete => {
                success.push(Op::delete(&run_key));
                None
            }
        };
        // the seat's entry for the run rides the same txn
        success.extend(seat_runs::entry_ops(
            &self.keys,
            read.map(|v| &v.record),
            written,
        ));
        // the events share what the store takes in one request with the record they ride
        let announced = decision
            .effects
            .iter()
            .filter(|effect| matches!(effect, Effect::Announce(_)))
            .count()
            .max(1);
        let event_budget = self
            .store
            .max_request_bytes()
            .saturating_sub(record_bytes + events::REQUEST_OVERHEAD_BYTES)
            / announced;
        for effect in &decision.effects {
            match effect {
                Effect::Announce(event) => {
                    let lease = self.events.lease(self.store.as_ref(), now).await?;
                    let (compare, puts) = events::create(&self.keys, event, lease, event_budget);
                    compares.push(compare);
                    success.extend(puts);
                    failure.push(Op::get(self.keys.event(&event.id)));
                    event_ids.push(event.id.clone());
                }
                Effect::Strand(stranded) => {
                    success.push(crate::stranded::strand_op(&self.keys, stranded));
                }
                Effect::Spend { delivery_id } => {
                    let lease = self.ledger.lease(self.store.as_ref(), now).await?;
                    success.push(ledger::spend_op(&self.keys, delivery_id, lease, now));
                }
                Effect::AddSpend { share, usage } => {
                    let record = read.map(|v| &v.record);
                    let owner = match share {
                        crate::transition::Share::Task => record
                            .and_then(|r| r.work_item.as_deref())
                            .unwrap_or_default(),
                        _ => record.map_or("", |r| r.seat.as_str()),
                    };
                    let scope = spend::scope(*share, owner);
                    let windows: Vec<String> = match share {
                        crate::transition::Share::Task => vec![spend::TASK_WINDOW.to_owned()],
                        _ => spend::windows_on(now, self.clock()).to_vec(),
                    };
                    for window in windows {
                        let (counter, revision) =
                            spend::read(self.store.as_ref(), &self.keys, &scope, &window).await?;
                        let key = self.keys.spend(&scope, &window);
                        compares.push(Compare::mod_revision(
                            &key,
                            crate::store::CompareOp::Equal,
                            revision,
                        ));
                        let value = serde_json::to_vec(&counter.plus(usage)).unwrap_or_default();
                        success.push(Op::put(key, value));
                    }
                }
            }
        }
        let txn = Txn::new().when(compares).and_then(success).or_else(failure);
        let response = match self.store.txn(txn).await {
            Err(Error::Invalid(message)) if message.contains("lease") => {
                // a retention lease is gone (revoked, or expired while the node slept)
                self.ledger.forget();
                self.events.forget();
                return Ok(Attempt::Moved);
            }
            other => other?,
        };
        if response.succeeded {
            return Ok(Attempt::Done(response.revision));
        }
        let mut results = response.results.into_iter();
        let holder = match results.next() {
            Some(OpResult::Get(holder)) => holder,
            _ => None,
        };
        if holder.is_none_or(|kv| kv.create_revision != fence.epoch) {
            return Err(RunError::SeatNotHeld {
                seat: fence.seat.clone(),
                epoch: fence.epoch,
            });
        }
        let run_now = match results.next() {
            Some(OpResult::Get(run)) => run,
            _ => None,
        };
        if run_now.map_or(0, |kv| kv.mod_revision) != read.map_or(0, |v| v.mod_revision) {
            return Ok(Attempt::Moved);
        }
        let already: Vec<String> = event_ids
            .into_iter()
            .zip(results)
            .filter_map(|(id, result)| matches!(result, OpResult::Get(Some(_))).then_some(id))
            .collect();
        if already.is_empty() {
            // a spend counter moved
            return Ok(Attempt::Moved);
        }
        Ok(Attempt::Announced(already))
    }

    /// After a write with an unknown outcome: `Some` when the re-read shows it landed, `None`
    /// when it shows the write did not land (or the row moved on), so the caller decides again.
    async fn resolve(
        &self,
        turn_id: &str,
        read: Option<&Versioned>,
        decision: &Decision,
    ) -> Result<Option<Outcome>, RunError> {
        let now = self.read(turn_id).await?;
        let landed = match (&decision.next, &now) {
            (Next::Delete, None) => return Ok(Some(Outcome::Deleted)),
            (Next::Write(intended), Some(stored)) => {
                stored.record == **intended
                    && read.is_none_or(|read| stored.mod_revision != read.mod_revision)
            }
            _ => false,
        };
        Ok(if landed {
            now.map(|run| Outcome::Written(Box::new(run)))
        } else {
            None
        })
    }
}

pub(crate) fn decode(kv: &KeyValue) -> Result<Versioned, Error> {
    Ok(Versioned {
        record: RunRecord::from_json(&kv.key, &kv.value)?,
        mod_revision: kv.mod_revision,
    })
}

/// `steps` decided one after another, each on the record the one before left: the last
/// one's next record, and every step's effects.
fn decide_steps(
    read: Option<&RunRecord>,
    fence: &Fence,
    (first, then): (&Transition, &[Transition]),
    now: DateTime<Utc>,
) -> Result<Decision, Refusal> {
    let mut decision = transition::decide(read, fence, first, now)?;
    for step in then {
        let current = match &decision.next {
            Next::Write(record) => Some(record.as_ref()),
            Next::Delete => None,
        };
        let mut next = transition::decide(current, fence, step, now)?;
        decision.effects.append(&mut next.effects);
        decision.next = next.next;
    }
    Ok(decision)
}
