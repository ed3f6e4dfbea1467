//! `Waiter`: the completion poll (DESIGN §7). Every tick lists the running runs of the seats
//! this node holds and polls each (at most 16 at once, never one box twice at once); a
//! finished job's completion goes to the collectors. A local box's job end is heard at once
//! (`completion`): the waiter polls that run the moment its done marker appears, and the tick
//! stays the backstop. It also holds the poll duty for the fleet's remote boxes, reaps paused
//! boxes past their TTL and kills boxes stranded on this host.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxfleet_cluster::record::{RunRecord, Status};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::Semaphore;
use tracing::{info, warn};

use crate::lifecycle::Coordinator;
use crate::outage::duty_failed;
use crate::streaks::Streaks;
use crate::workers::{CollectMsg, MAX_CONCURRENT_POLLS, Observed, POLL_BOUND, failpoint_once};

/// How long a job's end heard before its launch committed it running is put off.
const JOB_END_PUT_OFF: Duration = Duration::from_millis(100);
/// How many times (the poll's tick finds it after that).
const JOB_END_PUT_OFF_LIMIT: u32 = 100;
/// A run whose completion the collectors hold is polled again only this long after its last
/// poll (its box's keepalive), not every tick: at 10,000 ended jobs the re-polls of runs
/// waiting for a collector filled the poll slots (243,116 polls for 10,000 completions).
const COLLECTING_REPOLL: Duration = Duration::from_secs(30);

/// The completion poll.
#[derive(Debug)]
pub struct Waiter;

#[derive(Debug, Clone)]
pub struct WaiterArgs {
    pub coordinator: Arc<Coordinator>,
    pub interval: Duration,
    pub collectors: String,
    pub errors: Arc<Observed>,
}

#[derive(Debug)]
pub struct WaiterState {
    args: WaiterArgs,
    slots: Arc<Semaphore>,
    polling: Arc<Mutex<BTreeSet<String>>>,
    /// when each run's last poll ended: free slots go to the longest-waiting first
    last_polled: Arc<Mutex<std::collections::BTreeMap<String, tokio::time::Instant>>>,
    /// the lease of the poll duty this node holds, renewed every tick
    duty: Option<boxfleet_cluster::store::LeaseId>,
    /// consecutive failed polls per run: gone-detection and the warning's rate limit
    streaks: Arc<Streaks>,
    /// the polls the poll duty authorised, stopped when the duty moves to a peer
    duty_polls: Arc<Mutex<std::collections::BTreeMap<String, tokio::task::AbortHandle>>>,
    /// runs whose job ended while a poll of theirs was in flight: polled again once it ends
    again: Arc<Mutex<BTreeSet<String>>>,
    /// the jobs (turn, launch) whose end was heard and polled: a marker tells more than once
    /// (its rename, its attributes), and each is one poll
    ends_heard: BTreeSet<(String, String)>,
}

#[derive(Debug)]
pub enum WaiterMsg {
    Tick,
    /// A local box's job ended (its done marker appeared): poll that run now. The count is how
    /// many times it was put off while its launch was still being committed.
    JobEnded(String, u32),
}

impl Actor for Waiter {
    type Msg = WaiterMsg;
    type State = WaiterState;
    type Arguments = WaiterArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: WaiterArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // a (re)started waiter polls at once, then on its interval
        let _ = myself.cast(WaiterMsg::Tick);
        myself.send_interval(args.interval, || WaiterMsg::Tick);
        // a local box's job end is heard the moment it comes
        let me = myself.clone();
        args.coordinator
            .completions
            .listen(Arc::new(move |turn_id| {
                let _ = me.cast(WaiterMsg::JobEnded(turn_id, 0));
            }));
        Ok(WaiterState {
            args,
            slots: Arc::new(Semaphore::new(MAX_CONCURRENT_POLLS)),
            polling: Arc::new(Mutex::new(BTreeSet::new())),
            last_polled: Arc::new(Mutex::new(std::collections::BTreeMap::new())),
            duty: None,
            streaks: Arc::new(Streaks::default()),
            duty_polls: Arc::new(Mutex::new(std::collections::BTreeMap::new())),
            again: Arc::new(Mutex::new(BTreeSet::new())),
            ends_heard: BTreeSet::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WaiterMsg::Tick => state.tick(&myself).await,
            WaiterMsg::JobEnded(turn_id, put_off) => {
                state.job_ended(&myself, turn_id, put_off).await;
            }
        }
        Ok(())
    }
}

impl WaiterState {
    /// A local box's job ended: its run is polled now, if it is still running on a seat this
    /// node holds (once more after a poll in flight, which may have read it running).
    async fn job_ended(&mut self, myself: &ActorRef<WaiterMsg>, turn_id: String, put_off: u32) {
        let coordinator = &self.args.coordinator;
        let turn_id = turn_id.as_str();
        let record = match coordinator.runs.read(turn_id).await {
            Ok(Some(run)) => run.record,
            Ok(None) => return,
            Err(error) => {
                // the tick's poll finds it
                warn!(turn_id, %error, "sandbox_job_exit_unread");
                return;
            }
        };
        let held_here = coordinator
            .held_seats()
            .iter()
            .any(|fence| fence.seat == record.seat);
        if record.status == Status::Launching && held_here && put_off < JOB_END_PUT_OFF_LIMIT {
            // a job quicker than its launch: polled once the launch commits it running
            let turn_id = turn_id.to_owned();
            myself.send_after(JOB_END_PUT_OFF, move || {
                WaiterMsg::JobEnded(turn_id, put_off + 1)
            });
            return;
        }
        if record.status != Status::Running || !held_here {
            return;
        }
        let again = self
            .again
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(turn_id);
        if !self
            .ends_heard
            .insert((turn_id.to_owned(), record.launch_id.clone()))
            && !again
        {
            return;
        }
        info!(turn_id, launch_id = %record.launch_id, seat = %record.seat, "sandbox_job_exited");
        if self
            .polling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(turn_id)
        {
            self.again
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(turn_id.to_owned());
            return;
        }
        self.spawn_poll(myself, record, true, false);
    }

    /// One pass of the poll: the duty, stranded boxes, the pause reaper, and a poll of every
    /// running run this node answers for.
    async fn tick(&mut self, myself: &ActorRef<WaiterMsg>) {
        let state = self;
        if failpoint_once("waiter-panic-once") {
            panic!("failpoint waiter-panic-once");
        }
        let coordinator = state.args.coordinator.clone();
        state.claim_poll_duty().await;
        // the boxes runs let go of on this host from a node on another are killed here
        if let Err(error) = coordinator.kill_stranded_boxes().await {
            let error = error.to_string();
            duty_failed(
                coordinator.store.as_ref(),
                "sandbox_stranded_sweep_failed",
                &error,
            );
            state.args.errors.record("waiter", &error);
        }
        let held: BTreeSet<String> = coordinator
            .held_seats()
            .into_iter()
            .map(|fence| fence.seat)
            .collect();
        let (mut runs, in_poll) = match state.runs_to_look_at().await {
            Ok(found) => found,
            Err(error) => {
                duty_failed(coordinator.store.as_ref(), "waiter_list_failed", &error);
                state.args.errors.record("waiter", &error.to_string());
                return;
            }
        };
        // oldest-polled first: a box whose poll just ended goes to the back of the line
        {
            let last = state.last_polled.lock().unwrap_or_else(|p| p.into_inner());
            runs.sort_by_key(|run| last.get(&run.record.turn_id).copied());
        }
        let fresh = coordinator.take_fresh();
        let duty = state.duty.is_some();
        let mut running: BTreeSet<String> = runs
            .iter()
            .filter(|run| run.record.status == Status::Running)
            .map(|run| run.record.turn_id.clone())
            .collect();
        running.extend(in_poll.iter().cloned());
        state.streaks.keep_only(&running);
        // a run whose poll is under way keeps its completion watch (a remote run has none)
        let mut watched = in_poll;
        // a settled run leaves nothing behind: only running runs are polled, so only theirs
        // are kept
        state
            .last_polled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|turn_id, _| running.contains(turn_id));
        for run in runs {
            let record = run.record;
            let held_here = held.contains(&record.seat);
            // a remote box is reachable from every node: the duty holder polls it for the
            // fleet (and the seat's holder once, right after it acquires the seat); a local
            // box is polled by the node on its host that holds the seat
            let remote = coordinator.access.is_remote(&record);
            let polls = if remote {
                duty || (held_here && fresh.contains(&record.seat))
            } else {
                held_here
            };
            if !held_here && !polls {
                continue;
            }
            // a box the pause reaper released and could not kill yet is killed again, and a
            // parked row naming a box holds that box, its pause stamped or not (the pause
            // reaper bounds it by its run's pause TTL): each in a task of its own, on the
            // polls' slots, so one slow kill delays no other box's poll or keepalive
            let owed = held_here && record.reclaim_owed.is_some();
            let parked = held_here
                && record.sandbox_id.is_some()
                && matches!(
                    record.status,
                    Status::AwaitingClarification | Status::Answered
                );
            if owed || parked {
                state.spawn_reclaim(record, owed, parked);
                continue;
            }
            if record.status != Status::Running {
                continue;
            }
            if held_here && !remote {
                watched.insert(record.turn_id.clone());
                coordinator.watch_completion(&record);
            }
            if !polls || state.waits_for_collection(&record) {
                continue;
            }
            state.spawn_poll(myself, record, held_here, remote && duty);
        }
        // a job that ended, or moved to another node, is no longer watched here
        coordinator.completions.retain(&watched);
        state
            .ends_heard
            .retain(|(turn_id, _)| running.contains(turn_id));
    }

    /// The runs this tick reads, and the running ones it leaves unread because a poll of
    /// theirs is queued or under way (that poll reads the box; the tick would only find it
    /// polling). From the runs' entries: at 10,000 running boxes, a tick a second that read
    /// and decoded every row was two fifths of a node's CPU and slowed the sweep (issue 20).
    async fn runs_to_look_at(
        &self,
    ) -> Result<(Vec<boxfleet_cluster::runs::Versioned>, BTreeSet<String>), boxfleet_cluster::Error>
    {
        let entries = self.args.coordinator.runs.all_entries().await?;
        let mut in_poll = BTreeSet::new();
        let mut read = Vec::new();
        {
            // sorted under the lock, which no await crosses: no copy of the set per tick
            let polling = self.polling.lock().unwrap_or_else(|p| p.into_inner());
            for entry in entries {
                if entry.status == Status::Running && polling.contains(&entry.turn_id) {
                    in_poll.insert(entry.turn_id);
                } else {
                    read.push(entry.turn_id);
                }
            }
        }
        let runs = self.args.coordinator.runs.read_many(&read).await?;
        Ok((runs, in_poll))
    }

    /// Whether the run's completion is with the collectors and its box was polled lately.
    fn waits_for_collection(&self, record: &RunRecord) -> bool {
        let key = crate::lifecycle::collection_key(&record.turn_id, &record.launch_id);
        let collecting = self
            .args
            .coordinator
            .collecting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key);
        collecting
            && self
                .last_polled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&record.turn_id)
                .is_some_and(|at| at.elapsed() < COLLECTING_REPOLL)
    }

    /// The poll duty: one node at a time polls the fleet's remote boxes (a local box is polled
    /// by the node on its host that holds the seat, duty or not). Claimed or renewed each tick.
    async fn claim_poll_duty(&mut self) {
        let coordinator = &self.args.coordinator;
        let holder = boxfleet_cluster::seat::Holder {
            node: coordinator.node.clone(),
            incarnation: coordinator.incarnation.clone(),
        };
        let duty_ttl = duty_ttl(self.args.interval);
        match boxfleet_cluster::duty::claim_waiter(
            coordinator.store.as_ref(),
            &coordinator.keys,
            &holder,
            self.duty,
            duty_ttl,
        )
        .await
        {
            Ok(boxfleet_cluster::duty::Duty::Mine { lease, .. }) => self.duty = Some(lease),
            Ok(boxfleet_cluster::duty::Duty::Peer(peer)) => {
                if self.duty.take().is_some() {
                    info!(peer = %peer.node, "waiter_duty_moved");
                    self.stop_duty_polls();
                }
            }
            Err(error) => {
                duty_failed(
                    coordinator.store.as_ref(),
                    "waiter_duty_claim_failed",
                    &error,
                );
                self.args.errors.record("waiter", &error.to_string());
            }
        }
    }

    /// The duty moved to a peer: the polls it authorised stop (the peer polls those boxes now).
    fn stop_duty_polls(&self) {
        let stopped: Vec<(String, tokio::task::AbortHandle)> =
            std::mem::take(&mut *self.duty_polls.lock().unwrap_or_else(|p| p.into_inner()))
                .into_iter()
                .collect();
        let mut polling = self.polling.lock().unwrap_or_else(|p| p.into_inner());
        for (turn_id, poll) in stopped {
            // a poll that already ended took itself off `polling` (a newer one may be there)
            if !poll.is_finished() {
                poll.abort();
                polling.remove(&turn_id);
            }
        }
    }

    /// Polls one running run in the background, in a poll slot, unless it is being polled. A
    /// poll the duty authorised (`by_duty`) is bounded by the duty's claim: its TTL less one
    /// interval, so it never outlives the claim it was made under.
    /// Kills a box owed its kill (`owed`) and applies the pause reaper to a parked run's box
    /// (`parked`), in a task of its own on one of the polls' slots and bounded as a poll is;
    /// passed over while the run's last poll or reclaim is still running.
    fn spawn_reclaim(&self, record: RunRecord, owed: bool, parked: bool) {
        if !self
            .polling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(record.turn_id.clone())
        {
            return;
        }
        let coordinator = self.args.coordinator.clone();
        let slots = self.slots.clone();
        let polling = self.polling.clone();
        let errors = self.args.errors.clone();
        tokio::spawn(async move {
            if let Ok(_slot) = slots.acquire().await {
                let work = async {
                    if owed {
                        let reclaimed = match coordinator.seat_fence(&record.seat).await {
                            Ok(fence) => coordinator.reclaim_owed(&fence, &record).await,
                            Err(error) => Err(error),
                        };
                        if let Err(error) = reclaimed {
                            let error = format!("{}: {error}", record.turn_id);
                            duty_failed(
                                coordinator.store.as_ref(),
                                "sandbox_reclaim_failed",
                                &error,
                            );
                            errors.record("waiter", &error);
                        }
                    }
                    if parked && let Err(error) = coordinator.expire_pause(&record).await {
                        let error = format!("{}: {error}", record.turn_id);
                        duty_failed(
                            coordinator.store.as_ref(),
                            "sandbox_pause_reap_failed",
                            &error,
                        );
                        errors.record("waiter", &error);
                    }
                };
                if tokio::time::timeout(POLL_BOUND, work).await.is_err() {
                    let error = format!(
                        "{}: the box's reclaim took more than {}s",
                        record.turn_id,
                        POLL_BOUND.as_secs()
                    );
                    duty_failed(coordinator.store.as_ref(), "sandbox_reclaim_failed", &error);
                    errors.record("waiter", &error);
                }
            }
            polling
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&record.turn_id);
        });
    }

    fn spawn_poll(
        &self,
        myself: &ActorRef<WaiterMsg>,
        record: RunRecord,
        held_here: bool,
        by_duty: bool,
    ) {
        if !self
            .polling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(record.turn_id.clone())
        {
            return;
        }
        let coordinator = self.args.coordinator.clone();
        let slots = self.slots.clone();
        let polling = self.polling.clone();
        let errors = self.args.errors.clone();
        let collectors = self.args.collectors.clone();
        let last_polled = self.last_polled.clone();
        let streaks = self.streaks.clone();
        let duty_polls = self.duty_polls.clone();
        let again = self.again.clone();
        let me = myself.clone();
        let bound = if by_duty {
            let claim = Duration::from_secs(duty_ttl(self.args.interval) as u64);
            claim
                .saturating_sub(self.args.interval)
                .clamp(Duration::from_secs(1), POLL_BOUND)
        } else {
            POLL_BOUND
        };
        let turn = record.turn_id.clone();
        let poll = tokio::spawn(async move {
            let turn_id = record.turn_id.clone();
            if let Ok(_slot) = slots.acquire().await {
                let polled = tokio::time::timeout(bound, coordinator.access.poll(&record)).await;
                let failed = match polled {
                    Ok(Ok(Some(_))) => {
                        streaks.reached(&turn_id);
                        info!(turn_id, launch_id = %record.launch_id, "sandbox_run_completed");
                        completed(&coordinator, &record, held_here, &collectors, &errors).await;
                        None
                    }
                    Ok(Ok(None)) => {
                        streaks.reached(&turn_id);
                        None
                    }
                    Ok(Err(crate::lifecycle::Error::Box(error))) if error.is_paused_refusal() => {
                        streaks.reached(&turn_id);
                        wake_if_still_running(&coordinator, &record).await;
                        None
                    }
                    Ok(Err(error)) => Some(error.to_string()),
                    Err(_) => Some(format!("no answer within {}s", bound.as_secs())),
                };
                // a box on another host is not this node's to declare gone
                if let Some(error) = failed
                    && coordinator.access.reachable(&record).is_ok()
                {
                    errors.record("waiter", &error);
                    let failure = streaks.failed(&turn_id, tokio::time::Instant::now());
                    if failure.log {
                        warn!(
                            turn_id,
                            %error,
                            failures = failure.failures,
                            repeated = failure.repeated,
                            spanned_seconds = failure.spanned.as_secs(),
                            "sandbox_connect_failed"
                        );
                    }
                    if failure.newly_gone {
                        warn!(
                            turn_id,
                            failures = failure.failures,
                            spanned_seconds = failure.spanned.as_secs(),
                            "sandbox_box_declared_gone"
                        );
                    }
                    if failure.gone {
                        // the completion fires anyway: the collection settles what it can
                        completed(&coordinator, &record, held_here, &collectors, &errors).await;
                    }
                }
            }
            last_polled
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(turn_id.clone(), tokio::time::Instant::now());
            let in_flight = {
                let mut polling = polling.lock().unwrap_or_else(|p| p.into_inner());
                polling.remove(&turn_id);
                polling.len() as u64
            };
            errors.set_depth("waiter", in_flight);
            duty_polls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&turn_id);
            // the job ended while this poll was in flight: look again now
            // (the waiter takes it off `again` when it polls)
            if again
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&turn_id)
            {
                let _ = me.cast(WaiterMsg::JobEnded(turn_id, 0));
            }
        });
        if by_duty {
            self.duty_polls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(turn, poll.abort_handle());
        }
    }
}

/// The poll duty's claim TTL for a waiter ticking every `interval`.
fn duty_ttl(interval: Duration) -> i64 {
    (interval.as_secs() as i64 * 3).max(5)
}

/// A running run's box answered the poll as paused (spec line 511): the poll's list is a
/// moment old, so the record is read again, and only a record still running the same job in
/// the same box has the box woken — a collection that paused it and then handed its claim back
/// to be tried again; the box is the run's again, and the next tick polls it. Anything else
/// (parked, claimed, another job) is the record's, and the box is left as it is.
async fn wake_if_still_running(coordinator: &Coordinator, polled: &RunRecord) {
    let turn_id = &polled.turn_id;
    let current = match coordinator.runs.read(turn_id).await {
        Ok(Some(run)) => run.record,
        Ok(None) => return,
        Err(error) => {
            warn!(turn_id, %error, "sandbox_paused_box_unchecked");
            return;
        }
    };
    let same = current.status == Status::Running
        && current.launch_id == polled.launch_id
        && current.sandbox_id == polled.sandbox_id;
    let Some(sandbox_id) = current.sandbox_id.as_deref().filter(|_| same) else {
        return;
    };
    match coordinator
        .access
        .run_box_op(&current, sandbox_id, crate::boxes::BoxOp::Connect)
        .await
    {
        Ok(_) => info!(turn_id, sandbox_id, "sandbox_paused_box_woken"),
        Err(error) => warn!(turn_id, sandbox_id, %error, "sandbox_paused_box_not_woken"),
    }
}

/// A polled job is done: collected here when this node holds its seat, else (the duty found
/// a remote box's job done) the seat's holder is told, and collects it.
async fn completed(
    coordinator: &Coordinator,
    record: &RunRecord,
    held_here: bool,
    collectors: &str,
    errors: &Observed,
) {
    let turn_id = &record.turn_id;
    crate::crash::point(crate::crash::POLL_AFTER_DONE_SEEN);
    if !held_here {
        if let Err(error) = coordinator
            .completed_elsewhere(&record.seat, turn_id, &record.launch_id)
            .await
        {
            warn!(turn_id, %error, "sandbox_completion_not_forwarded");
            errors.record("waiter", &error);
        }
        return;
    }
    match ActorRef::<CollectMsg>::where_is(collectors) {
        Some(collectors) => {
            let _ = collectors.cast(CollectMsg::Collect {
                turn_id: turn_id.clone(),
                launch_id: record.launch_id.clone(),
            });
        }
        None => warn!(turn_id, "collectors_not_running"),
    }
}
