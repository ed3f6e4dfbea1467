//! Holding seats: the node's session (renewed, lost, reopened), acquiring a seat under its
//! fence (and running its recovery pass), and the graceful hand-over of a seat placed
//! elsewhere (DESIGN §7 `Seats`, the README's "A fleet"). The pass that decides which seats
//! to take and give is `placement_pass`.

use std::time::Duration;

use boxfleet_cluster::keys::check_id;
use boxfleet_cluster::record::Status;
use boxfleet_cluster::seat::{self, Acquire, Session};
use boxfleet_cluster::transition::Fence;
use tracing::{debug, info, warn};

use crate::crash;

use super::Coordinator;
use super::error::Error;
use super::work::WorkGuard;

/// How much longer than its own settle a release waits for one already under way, which
/// started earlier with a settle of its own.
const RELEASE_WAIT_MARGIN: Duration = Duration::from_secs(5);
/// How long a hand-over waits, past its settle, for the work it stopped to write that down.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);

impl Coordinator {
    /// The node's current session (a new one replaces it when the old lease is lost).
    pub fn session(&self) -> Session {
        self.seats.session()
    }

    /// Renews the session. A session whose lease is gone (the node was cut off from the store
    /// past its TTL) has lost every seat it held: they are forgotten here at once — their
    /// writes would not land anyway — and a new session is opened, so the node rejoins the
    /// fleet and is placed seats again.
    pub async fn renew_session(&self) -> Result<(), Error> {
        let session = self.session();
        match session.renew(self.store.as_ref()).await {
            Ok(_) => {
                self.seats.renewed();
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
                self.seats.replace_session(fresh);
                Ok(())
            }
            Err(error) => {
                // cut off from the store: once a whole TTL has passed with no renewal the lease
                // may be gone and the seats another node's, so this node stops acting for them
                // now rather than when it hears so (its writes would be refused by the fence
                // anyway; this keeps it from starting work it cannot record)
                let silent = self.seats.silent_for();
                if silent >= Duration::from_secs(session.ttl_seconds.max(1) as u64) {
                    for fence in self.held_seats() {
                        self.lose_seat(&fence.seat);
                    }
                }
                Err(error.into())
            }
        }
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
        let began = draining && !self.seats.draining();
        self.seats.set_draining(draining);
        if began {
            self.announce_draining().await;
        }
        Ok(())
    }

    /// Whether this node is draining.
    pub fn draining(&self) -> bool {
        self.seats.draining()
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

    /// Counts a launch, collection or answer in progress on `seat` until the guard drops.
    pub fn working_on(&self, seat: &str) -> WorkGuard {
        self.work.start(seat)
    }

    /// Hands a seat over gracefully: no new work starts on it, the launches, collections and
    /// answers in progress settle (at most `settle`), the inbox work holding its lock
    /// finishes, then the holder key is deleted under the fence and the seat's actor stops.
    /// The node the seat is placed on acquires it and runs its recovery pass. `false` when
    /// this node did not hold it.
    pub async fn release_seat(&self, seat: &str, settle: Duration) -> Result<bool, Error> {
        let Some(fence) = self.seats.fence(seat) else {
            return Ok(false);
        };
        if !self.seats.start_release(seat) {
            // a hand-over already under way (the placement pass starts one for a seat placed
            // elsewhere, say as a drain begins): this caller waits for it and says how it went
            let deadline = tokio::time::Instant::now() + settle + RELEASE_WAIT_MARGIN;
            while self.seats.releasing(seat) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            return Ok(!self.holds(seat));
        }
        // the work in progress first (new work is refused from here on: `seat_fence` says the
        // seat is being handed over), then the lock, which inbox work holds; waiting for the
        // work while holding the lock would stall a launch queued on it until `settle` ran out
        let deadline = tokio::time::Instant::now() + settle;
        self.work.settle(seat, deadline).await;
        if self.work.count(seat) > 0 {
            // what is still in progress past the wait is stopped where it can be (a
            // collection still reading its box hands its claim back uncounted), and given a
            // moment to write that down under this fence
            self.work.interrupt(seat);
            self.work
                .settle(seat, tokio::time::Instant::now() + INTERRUPT_GRACE)
                .await;
        }
        self.settle_resumes(seat, deadline).await;
        let _lock = self.seats.seat.lock(seat).await;
        crash::point(crash::RELEASE_AFTER_SETTLE);
        let released = seat::release(self.store.as_ref(), &self.keys, &fence).await;
        crash::point(crash::RELEASE_AFTER_DELETE);
        self.seats.released(seat);
        self.follow_ups.seat_released(seat);
        self.seats.end_release(seat);
        self.work.resume(seat);
        let released = released?;
        info!(seat, epoch = fence.epoch, node = %self.node, released, "seat_released");
        Ok(released)
    }

    /// Waits, at most until `deadline`, until none of `seat`'s runs is `resumed`. A resume
    /// dispatched to the engine is in flight until the engine settles it (its run stays
    /// `resumed` till then, and the engine's take and settle still act under this fence, see
    /// [`Coordinator::in_flight_fence`]): handed over before that, the new holder's recovery
    /// pass would reap it as an abandoned claim.
    async fn settle_resumes(&self, seat: &str, deadline: tokio::time::Instant) {
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
    }

    /// Releases every seat this node holds, gracefully and in parallel (see
    /// [`Coordinator::release_seat`]); returns how many it still holds after.
    pub async fn release_all(&self, settle: Duration) -> usize {
        let seats: Vec<String> = self.held_seats().into_iter().map(|f| f.seat).collect();
        self.release_seats(&seats, settle).await
    }

    /// Releases `seats` gracefully and in parallel; returns how many this node still holds.
    async fn release_seats(&self, seats: &[String], settle: Duration) -> usize {
        let releases = seats
            .iter()
            .map(|seat| async move { self.release_seat(seat, settle).await });
        for outcome in futures::future::join_all(releases).await {
            if let Err(error) = outcome {
                warn!(%error, "seat_release_failed");
            }
        }
        self.held_seats().len()
    }

    /// The seats this node holds, with their fences.
    pub fn held_seats(&self) -> Vec<Fence> {
        self.seats.held()
    }

    /// How many seats this node holds (as far as it knows; the store has the last word).
    pub fn held_count(&self) -> usize {
        self.seats.held_count()
    }

    /// Whether this node holds `seat` (as far as it knows; the store has the last word).
    pub fn holds(&self, seat: &str) -> bool {
        self.seats.fence(seat).is_some()
    }

    /// Whether this node is handing `seat` over now.
    pub fn releasing(&self, seat: &str) -> bool {
        self.seats.releasing(seat)
    }

    /// A drain: every seat held here that another live node is placed to take is handed over
    /// (in parallel, each once its work settles); a seat no other node would take stays
    /// held, polled and settled here until one joins (the placement pass hands it over then).
    /// Returns the seats still held.
    pub async fn release_placed_elsewhere(&self, settle: Duration) -> usize {
        let mut movable = Vec::new();
        for fence in self.held_seats() {
            match self.placed_on(&fence.seat).await {
                Ok(Some(placed)) if placed.node != self.node => movable.push(fence.seat),
                Ok(_) => info!(seat = %fence.seat, node = %self.node, "seat_kept_while_draining"),
                Err(error) => warn!(seat = %fence.seat, %error, "seat_release_failed"),
            }
        }
        self.release_seats(&movable, settle).await
    }

    /// The seats acquired since the last call (and forgets them).
    pub fn take_fresh(&self) -> std::collections::BTreeSet<String> {
        self.seats.take_fresh()
    }

    /// The fence for finishing work already in flight on `seat` — an engine's take and settle
    /// of a resume this node dispatched: the fence this node holds, even while it hands the
    /// seat over (the release waits for such work), else [`Coordinator::seat_fence`]. New work
    /// asks `seat_fence`, which a seat being handed over refuses.
    pub(crate) async fn in_flight_fence(&self, seat: &str) -> Result<Fence, Error> {
        match self.seats.fence(seat) {
            Some(fence) => Ok(fence),
            None => self.seat_fence(seat).await,
        }
    }

    /// The fence this node holds `seat` under, acquiring it (and running its recovery
    /// pass) when it does not hold it yet.
    pub async fn seat_fence(&self, seat: &str) -> Result<Fence, Error> {
        check_id("seat", seat)?;
        if self.seats.releasing(seat) {
            return Err(Error::SeatHeldElsewhere {
                seat: seat.to_owned(),
                holder: format!("{} (handing it over)", self.node),
            });
        }
        if let Some(fence) = self.seats.fence(seat) {
            return Ok(fence);
        }
        // one acquire (and one recovery pass) at a time per seat: a second caller waits for
        // the first's recovery and then finds the fence, so no recovery pass ever runs beside
        // work that already holds the fence (it would read a launch in progress as abandoned)
        let _acquiring = self.seats.acquiring.lock(seat).await;
        if let Some(fence) = self.seats.fence(seat) {
            return Ok(fence);
        }
        // a seat is taken only by the node it is placed on: any other node that reached
        // here on a stale route would take it from its place and hand it straight back
        match self.placed_on(seat).await? {
            Some(placed) if placed.node != self.node => {
                return Err(Error::SeatHeldElsewhere {
                    seat: seat.to_owned(),
                    holder: format!("nobody; it is placed on node {}", placed.node),
                });
            }
            // a draining node takes no new seat, even when no other node would: it keeps
            // only what the store says it holds already (a recovery pass to finish)
            None if self.draining() && !self.holds_in_store(seat).await? => {
                return Err(Error::SeatHeldElsewhere {
                    seat: seat.to_owned(),
                    holder: format!(
                        "nobody; node {} is draining and takes no new seats, and no other live \
                         node takes seats: start another node (`boxfleet node`) or restart \
                         {}, then retry",
                        self.node, self.node
                    ),
                });
            }
            _ => {}
        }
        self.acquire_here(seat).await
    }

    /// Acquires a seat nobody holds that this pass placed here (from the live nodes it read):
    /// [`Coordinator::seat_fence`] without reading the nodes again for each seat, which a
    /// failover does for every seat of the dead node.
    pub(super) async fn acquire_placed(&self, seat: &str) -> Result<bool, Error> {
        if self.seats.releasing(seat) {
            return Ok(false);
        }
        let _acquiring = self.seats.acquiring.lock(seat).await;
        if self.seats.fence(seat).is_none() {
            match self.acquire_here(seat).await {
                Ok(_) => {}
                // the view the pass decided from had not seen its holder yet
                Err(Error::SeatHeldElsewhere { holder, .. }) => {
                    debug!(seat, holder, "seat_held_since_the_view");
                    return Ok(false);
                }
                Err(error) => return Err(error),
            }
        }
        Ok(true)
    }

    /// Takes back a seat the store still says this node holds on its session, but that this
    /// node stopped acting for: a recovery pass that failed, or a session renewal given up
    /// for lost while the store kept the lease (etcd restarts a lease's clock when its leader
    /// changes). Work this node started on the seat under its fence may still be in flight —
    /// a launch creating its box, an inbox pass — and the fence is still good, so the seat is
    /// taken back only once that work is over: a recovery pass beside it would read the launch
    /// as abandoned and reap it. `false` while such work goes on (the next pass tries again).
    pub(super) async fn take_back(&self, seat: &str) -> Result<bool, Error> {
        let _acquiring = self.seats.acquiring.lock(seat).await;
        if self.seats.fence(seat).is_some() {
            return Ok(true);
        }
        // a launch counts itself before it asks for the fence, which waits for this lock:
        // one that starts after this check runs after the pass
        let seat_lock = self.seats.seat.try_lock(seat);
        if seat_lock.is_none() || self.work.count(seat) > 0 {
            info!(seat, node = %self.node, "seat_take_back_deferred");
            return Ok(false);
        }
        // the view the pass decided from may not have seen a release this node just made: a
        // seat handed over is not taken back
        if !self.holds_in_store(seat).await? {
            return Ok(false);
        }
        self.acquire_here(seat).await.map(|_| true)
    }

    /// Acquires `seat` for this node (idempotent on its own lease) and runs its recovery pass,
    /// under the seat's `acquiring` lock.
    async fn acquire_here(&self, seat: &str) -> Result<Fence, Error> {
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
                self.note_acquired(&fence).await;
                self.seats.hold(fence.clone());
                if let Err(error) = self.recover(&fence).await {
                    // a seat whose recovery pass did not run whole is not acted for: the
                    // store still names this node, so the next placement pass takes it back
                    // and runs the pass again (an ending kept, a claim to revive)
                    self.seats.forget(seat);
                    return Err(error);
                }
                self.follow_ups.seat_acquired(seat).await;
                Ok(fence)
            }
            Acquire::HeldBy { holder, .. } => Err(Error::SeatHeldElsewhere {
                seat: seat.to_owned(),
                holder: format!("{} ({})", holder.node, holder.incarnation),
            }),
        }
    }

    /// A seat actor's restart: the seat's truth is the store's, so its recovery pass runs
    /// again. When the store cannot be read, this node stops acting for the seat until a pass
    /// succeeds (the placement pass and the next pump both re-run it, re-acquiring on this
    /// node's own lease) rather than failing into a restart loop that would take the node
    /// down. The seat's actor pumps its inbox next, whatever came of it: mail that waited
    /// behind a run the pass finished flows then.
    pub async fn recover_after_restart(&self, seat: &str) {
        info!(seat, "seat_recovered_after_restart");
        if let Err(error) = self.recover_held(seat).await {
            warn!(seat, %error, "seat_recovery_failed");
            self.lose_seat(seat);
        }
    }

    /// Re-runs the recovery pass of a seat this node holds (a seat actor's restart).
    pub async fn recover_held(&self, seat: &str) -> Result<(), Error> {
        // under the seat's lock: never beside a launch in progress, which it would read as
        // abandoned
        let _seat = self.seats.seat.lock(seat).await;
        match self.seats.fence(seat) {
            Some(fence) => self.recover(&fence).await,
            None => Ok(()),
        }
    }

    /// The fence of the seat a run belongs to.
    pub async fn seat_fence_of_run(&self, turn_id: &str) -> Result<Fence, Error> {
        let run = self
            .runs
            .read(turn_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("run {turn_id} is gone")))?;
        self.seat_fence(&run.record.seat).await
    }

    /// Forgets a seat this node found it no longer holds.
    pub fn lose_seat(&self, seat: &str) {
        self.seats.forget(seat);
        warn!(seat, node = %self.node, "sandbox_seat_not_held");
    }
}
