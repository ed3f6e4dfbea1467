//! The placement pass (the `Seats` duty, DESIGN §7): every seat with runs, mail or a holder
//! is placed by rendezvous hashing over the live, non-draining nodes. A seat placed here that
//! nobody holds is acquired (and recovered); a seat held here that is placed elsewhere is
//! released gracefully, in the background; a seat this node thought it held that the store
//! says it does not is forgotten.
//!
//! The pass decides from the seats' view (`boxfleet_cluster::seat_view`), which a watch keeps
//! in memory, and reads the store whole only while no watch keeps it: at 10,000 seats the
//! reads were 20,000 keys a second (issue 20). A view is never older than what it says it is
//! complete through, and a seat this node acquired after that is not judged by it.
//!
//! A pass that found nothing to do is not decided again until something it decides from
//! changes ([`Settled`]): the view's seats or holders, the seats this node holds, its session,
//! the placeable nodes. Deciding walked every seat each second — a tenth of the CPU of a node
//! holding 10,000 seats while it launched (issue 20's scale bench); a launch on a held seat
//! changes none of them.

use std::sync::Arc;

use boxfleet_cluster::seat::{self, Holder, NodeInfo};
use boxfleet_cluster::seat_view::{Known, Shape};
use boxfleet_cluster::store::LeaseId;
use boxfleet_cluster::transition::Fence;
use futures::StreamExt;
use tracing::warn;

use super::Coordinator;
use super::error::Error;
use super::limits::{ACQUIRE_AT_ONCE, RELEASE_SETTLE};

/// What the pass knows of this node as it decides.
struct Me<'a> {
    holder: Holder,
    lease: LeaseId,
    /// the fences this node acted under before the view was looked at
    believed: &'a [Fence],
    /// the live nodes seats are placed on
    nodes: &'a [NodeInfo],
}

/// A seat the store says this node holds, that the pass must look at.
#[derive(Debug)]
struct HeldHere {
    seat: String,
    /// placed on another node
    placed_elsewhere: bool,
    /// ... on another host, which could not reach a box of this one
    on_another_host: bool,
    /// held on this node's session, but this node does not act for it
    not_acted_for: bool,
}

/// What one pass does.
#[derive(Debug, Default)]
struct Plan {
    /// seats this node believed it held that the store no longer says are its
    lost: Vec<String>,
    held_here: Vec<HeldHere>,
    /// seats placed here that nobody holds
    free_here: Vec<String>,
    /// a seat held under a fence the view is not complete through was left to a later pass
    deferred: bool,
}

impl Plan {
    /// Nothing to do, and nothing left for later.
    fn is_settled(&self) -> bool {
        self.lost.is_empty()
            && self.held_here.is_empty()
            && self.free_here.is_empty()
            && !self.deferred
    }
}

/// What a pass that found nothing to do decided from: while all of it stays the same, so does
/// the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Settled {
    view: Shape,
    /// the seats this node holds, as `Seats::held_changes` counts their changes
    held_changes: u64,
    lease: LeaseId,
    /// the placeable nodes, each its name and host
    nodes: Vec<(String, String)>,
}

impl Coordinator {
    /// One placement pass; returns the seats acquired.
    pub async fn rebalance(self: &Arc<Self>) -> Result<Vec<String>, Error> {
        // what this node believes, before the view is looked at: a seat acquired after this
        // line is either in the view or past what it is complete through, never judged by
        // an older one (and counted in a later `held_changes`)
        let held_changes = self.seats.held_changes();
        let believed = self.held_seats();
        let nodes = self.placeable_nodes().await?;
        // what changed in the fleet since the last pass: a node lost
        if let Err(error) = self.watch_nodes().await {
            warn!(%error, "fleet_watch_failed");
        }
        let me = Me {
            holder: self.holder(),
            lease: self.session().lease,
            believed: &believed,
            nodes: &nodes,
        };
        let plan = match self
            .seat_view
            .look(|known| self.plan_unless_settled(known, &me, held_changes))
        {
            Some(plan) => plan,
            None => {
                *self.lock_settled() = None;
                let known = Known::read(self.store.as_ref(), &self.keys, &self.runs).await?;
                self.plan_pass(&known, &me)
            }
        };
        for seat in &plan.lost {
            self.lose_seat(seat);
        }
        let mut to_acquire: Vec<(String, bool)> = plan
            .free_here
            .into_iter()
            .map(|seat| (seat, false))
            .collect();
        for held in plan.held_here {
            // a seat whose run has a box on this host stays with a node on this host while
            // the box lives: a node elsewhere could neither poll, collect nor resume into it
            // (its runs are read only when it is placed elsewhere)
            let kept_for_its_box = held.placed_elsewhere
                && held.on_another_host
                && self.boxed_here(&held.seat).await?;
            if held.not_acted_for {
                // ours in the store but not acting for it here (a recovery pass that failed,
                // a session given up for lost that the store kept, a hand-over whose delete
                // the store refused): taken back once the work this node still does on it is
                // over — and a seat placed elsewhere is then handed over by the next pass.
                // Released from here it was not released at all: the release found no hold
                // to hand over, and the holder key kept the seat from every other node
                to_acquire.push((held.seat, true));
            } else if held.placed_elsewhere && !kept_for_its_box {
                let (me, seat) = (self.clone(), held.seat);
                tokio::spawn(async move {
                    if let Err(error) = me.release_seat(&seat, RELEASE_SETTLE).await {
                        warn!(seat, %error, "seat_release_failed");
                    }
                });
            }
        }
        let acquired = self.acquire_all(to_acquire).await;
        // a held seat that left the company's agent seats: its retirement grace, then its end
        // (looked at every minute, not every pass: one store read per held seat a second kept
        // the store and its blocking threads busy on an idle node). An agent's seat the view
        // shows unmarked has nothing to look at: a store read for each, every minute, was a
        // tenth of the store reads of a node holding 10,000 seats while it launched.
        let mut retirement = if self.retirement_check_due() {
            self.held_seats()
        } else {
            Vec::new()
        };
        if !retirement.is_empty() {
            self.seat_view.look(|known| {
                retirement.retain(|fence| {
                    known.is_retiring(&fence.seat) || !self.seat_is_agents(&fence.seat)
                });
            });
        }
        for fence in retirement {
            if let Err(error) = self.retire_if_removed(&fence).await {
                warn!(seat = %fence.seat, %error, "seat_retirement_failed");
            }
        }
        Ok(acquired)
    }

    fn lock_settled(&self) -> std::sync::MutexGuard<'_, Option<Settled>> {
        self.settled_pass
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Decides the pass from the view, unless the last pass found nothing to do from the same
    /// inputs: then there is nothing to do again.
    fn plan_unless_settled(&self, known: &Known, me: &Me<'_>, held_changes: u64) -> Plan {
        let inputs = Settled {
            view: known.shape(),
            held_changes,
            lease: me.lease,
            nodes: me
                .nodes
                .iter()
                .map(|n| (n.node.clone(), n.host.clone()))
                .collect(),
        };
        let mut settled = self.lock_settled();
        if settled.as_ref() == Some(&inputs) {
            return Plan::default();
        }
        let plan = self.plan_pass(known, me);
        *settled = plan.is_settled().then_some(inputs);
        plan
    }

    /// Decides the pass from `known`, without I/O (the view is looked at under its lock).
    fn plan_pass(&self, known: &Known, me: &Me<'_>) -> Plan {
        self.note_holders(known.holders());
        let names: Vec<&str> = me.nodes.iter().map(|n| n.node.as_str()).collect();
        let mut plan = Plan::default();
        // what the store no longer says is ours is not ours; a fence the view is not complete
        // through yet is left to a later pass
        for fence in me.believed {
            if fence.epoch > known.complete_through() {
                plan.deferred = true;
                continue;
            }
            let still = known
                .holders()
                .get(&fence.seat)
                .is_some_and(|h| h.holder == me.holder && h.epoch == fence.epoch);
            if !still {
                plan.lost.push(fence.seat.clone());
            }
        }
        for seat in known.seats() {
            let placed = boxfleet_cluster::placement::owner(seat, names.iter().copied());
            match known.holders().get(seat) {
                Some(h) if h.holder == me.holder => {
                    let placed_elsewhere = placed.is_some_and(|p| p != self.node);
                    let on_another_host = placed.is_some_and(|p| {
                        me.nodes
                            .iter()
                            .find(|n| n.node == p)
                            .is_some_and(|n| n.host != self.access.host)
                    });
                    let not_acted_for = h.lease == me.lease && !self.holds(seat);
                    if placed_elsewhere || not_acted_for {
                        plan.held_here.push(HeldHere {
                            seat: seat.to_owned(),
                            placed_elsewhere,
                            on_another_host,
                            not_acted_for,
                        });
                    }
                }
                Some(_) => {}
                None if placed == Some(self.node.as_str()) => plan.free_here.push(seat.to_owned()),
                None => {}
            }
        }
        plan
    }

    /// Acquires (or takes back, `true`) several seats at once, each with its own recovery
    /// pass (`ACQUIRE_AT_ONCE`); returns those acquired.
    async fn acquire_all(&self, seats: Vec<(String, bool)>) -> Vec<String> {
        futures::stream::iter(seats)
            .map(|(seat, ours)| async move {
                // boxed: an acquire with its recovery pass is a large future, and the pass
                // holds up to `ACQUIRE_AT_ONCE` of them
                let taken = if ours {
                    Box::pin(self.take_back(&seat)).await
                } else {
                    Box::pin(self.acquire_placed(&seat)).await
                };
                match taken {
                    Ok(true) => Some(seat),
                    Ok(false) => None,
                    Err(error) => {
                        warn!(seat, %error, "seat_acquire_failed");
                        None
                    }
                }
            })
            .buffer_unordered(ACQUIRE_AT_ONCE)
            .filter_map(std::future::ready)
            .collect()
            .await
    }

    /// Whether a run of `seat` has a box on this node's host.
    async fn boxed_here(&self, seat: &str) -> Result<bool, Error> {
        Ok(self.runs.list_by_seat(seat).await?.iter().any(|run| {
            run.record.sandbox_id.is_some()
                && run.record.host.as_deref() == Some(self.access.host.as_str())
        }))
    }

    /// This node's incarnation as a seat's holder.
    pub(super) fn holder(&self) -> Holder {
        Holder {
            node: self.node.clone(),
            incarnation: self.incarnation.clone(),
        }
    }

    /// Whether the store names this node's incarnation as `seat`'s holder.
    pub(super) async fn holds_in_store(&self, seat: &str) -> Result<bool, Error> {
        let me = self.holder();
        Ok(seat::holder(self.store.as_ref(), &self.keys, seat)
            .await?
            .is_some_and(|(holder, _)| holder == me))
    }
}
