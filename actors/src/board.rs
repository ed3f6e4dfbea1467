//! `Board`: the node's live-state projection of the runs in flight (spec: "Dashboard").
//!
//! Two sources, because neither is enough alone: the events keep the set current (each event
//! of a turn re-reads that turn's record), and the durable record decides which runs exist —
//! read in full when the board starts and every 30 seconds, replacing what the events built.
//! A resumed or ending run is over for the board and is not listed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use boxfleet_cluster::record::{RunRecord, Status};
use boxfleet_cluster::runs::Runs;
use boxfleet_cluster::store::WatchEvent;
use boxfleet_cluster::{Keys, Store};
use futures::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tracing::warn;

use crate::outage::duty_failed;

/// How often the board re-reads the whole record (livestate.ReconcileInterval).
pub const RECONCILE: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub enum BoardMsg {
    /// The runs in flight, those waiting on `audience` when given.
    List {
        audience: Option<String>,
        reply: RpcReplyPort<Vec<RunRecord>>,
    },
    /// An event named this turn: re-read its record.
    Touched(String),
    Reconcile,
}

/// The live board.
#[derive(Debug)]
pub struct Board;

/// What the board reads: the run records and the events outbox.
#[derive(Debug, Clone)]
pub struct BoardArgs {
    pub runs: Runs,
    pub store: Arc<dyn Store>,
    pub keys: Keys,
}

#[derive(Debug)]
pub struct BoardState {
    records: Runs,
    store: Arc<dyn Store>,
    runs: BTreeMap<String, RunRecord>,
    watch: tokio::task::JoinHandle<()>,
    /// when the record was last read whole
    reconciled: tokio::time::Instant,
}

/// How old a whole read may be when the board is asked for.
const FRESH_FOR: Duration = Duration::from_secs(1);

fn listed(record: &RunRecord) -> bool {
    !matches!(record.status, Status::Resumed | Status::Ending)
}

impl Actor for Board {
    type Msg = BoardMsg;
    type State = BoardState;
    type Arguments = BoardArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: BoardArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // the watch keeps itself alive: a broken watch (the store unreachable, a node cut
        // off) is re-opened after a pause, with a reconcile for what it missed; the board
        // never fails for the store, so a node cut off from it keeps serving what it knows
        let watch = tokio::spawn(watch_events(
            args.store.clone(),
            args.keys.clone(),
            myself.clone(),
        ));
        let state = BoardState {
            records: args.runs,
            store: args.store.clone(),
            runs: BTreeMap::new(),
            watch,
            // never read yet: the first ask reads it whole
            reconciled: {
                let now = tokio::time::Instant::now();
                now.checked_sub(FRESH_FOR * 2).unwrap_or(now)
            },
        };
        let _ = myself.cast(BoardMsg::Reconcile);
        myself.send_interval(RECONCILE, || BoardMsg::Reconcile);
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.watch.abort();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BoardMsg::List { audience, reply } => {
                // a run's record changes without an event (its box attached, its fence moved to
                // a new holder): a board asked for is read whole when its last read is stale
                if state.reconciled.elapsed() > FRESH_FOR
                    && let Err(error) = state.reconcile().await
                {
                    duty_failed(state.store.as_ref(), "board_reconcile_failed", &error);
                }
                let rows = state
                    .runs
                    .values()
                    .filter(|record| match &audience {
                        None => true,
                        Some(who) => record
                            .question
                            .as_ref()
                            .is_some_and(|q| q.audience_handles.contains(who)),
                    })
                    .cloned()
                    .collect();
                let _ = reply.send(rows);
            }
            BoardMsg::Touched(turn_id) => match state.records.read(&turn_id).await {
                Ok(Some(run)) if listed(&run.record) => {
                    state.runs.insert(turn_id, run.record);
                }
                Ok(_) => {
                    state.runs.remove(&turn_id);
                }
                Err(error) => warn!(turn_id, %error, "board_read_failed"),
            },
            BoardMsg::Reconcile => {
                if let Err(error) = state.reconcile().await {
                    duty_failed(state.store.as_ref(), "board_reconcile_failed", &error);
                }
            }
        }
        Ok(())
    }
}

/// Feeds the board the turns the events name, re-opening the watch whenever it breaks.
async fn watch_events(store: Arc<dyn Store>, keys: Keys, feed: ActorRef<BoardMsg>) {
    let mut pause = Duration::from_millis(250);
    loop {
        let opened = async {
            let from = boxfleet_cluster::StoreExt::revision(store.as_ref()).await? + 1;
            store.watch(&keys.events(), from).await
        };
        match opened.await {
            Ok(mut events) => {
                // whatever happened while it was down is read whole
                let _ = feed.cast(BoardMsg::Reconcile);
                pause = Duration::from_millis(250);
                while let Some(event) = events.next().await {
                    match event {
                        Ok(WatchEvent::Put(kv)) => {
                            if let Ok(stored) = boxfleet_cluster::events::from_watch(&kv) {
                                let _ = feed.cast(BoardMsg::Touched(stored.event.turn_id));
                            }
                        }
                        Ok(WatchEvent::Delete { .. }) => {}
                        Err(error) => {
                            duty_failed(store.as_ref(), "board_watch_broke", &error);
                            break;
                        }
                    }
                }
            }
            Err(error) => duty_failed(store.as_ref(), "board_watch_not_opened", &error),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

impl BoardState {
    /// What the record holds replaces what the events built.
    async fn reconcile(&mut self) -> Result<(), boxfleet_cluster::Error> {
        let runs = self.records.list().await?;
        self.runs = runs
            .into_iter()
            .map(|run| run.record)
            .filter(listed)
            .map(|record| (record.turn_id.clone(), record))
            .collect();
        self.reconciled = tokio::time::Instant::now();
        Ok(())
    }
}
