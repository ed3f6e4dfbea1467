//! The fleet watch: what each node's placement pass sees change in the fleet, said as events
//! and kept where `nodes` shows it.
//!
//! - A node that vanished from the registry without draining first was lost: its session
//!   lease expired (a `kill -9`, a host gone, a partition). Every node that saw it announces
//!   `node_lost` once (the event's id is the lost incarnation's), logs it at warn, and keeps
//!   it under `lost/{node}` on the events' lease, so `boxfleet nodes` lists it as lost, with
//!   since when, for as long as events are kept. A node that drained first (a graceful stop,
//!   `boxfleet drain`) simply leaves.
//! - A node that starts draining announces `node_draining` itself.
//! - A seat acquired from a holder that was lost is a takeover: `seat_taken_over`, naming the
//!   node it was taken from. A seat handed over by a draining node is not.

use std::collections::{BTreeMap, BTreeSet};

use boxfleet_cluster::events::{Event, kind};
use boxfleet_cluster::seat::{self, Held, Holder, NodeInfo};
use boxfleet_cluster::store::{Compare, Op, Txn};
use boxfleet_cluster::transition::Fence;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Coordinator;
use super::error::Error;

/// What this node's last passes saw of the fleet.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// the live nodes at the last pass, by incarnation (`None` before the first pass: a node
    /// that starts sees every other as already there, not as arriving)
    nodes: Option<BTreeMap<String, NodeInfo>>,
    /// the incarnations seen draining
    drained: BTreeSet<String>,
    /// each seat's last holder seen
    holders: BTreeMap<String, Holder>,
}

/// A node found gone without draining, as `lost/{node}` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostNode {
    pub node: String,
    pub incarnation: String,
    pub addr: String,
    pub host: String,
    /// when a node first found it gone
    pub since: DateTime<Utc>,
    /// when the lost incarnation had started
    pub started_at: DateTime<Utc>,
}

/// The nodes kept as lost, whose name no live node has taken again.
pub async fn lost_nodes(
    store: &dyn boxfleet_cluster::Store,
    keys: &boxfleet_cluster::Keys,
    live: &[NodeInfo],
) -> Result<Vec<LostNode>, boxfleet_cluster::Error> {
    let range = store.range(&keys.lost_nodes()).await?;
    Ok(range
        .kvs
        .iter()
        .filter_map(|kv| serde_json::from_slice::<LostNode>(&kv.value).ok())
        .filter(|lost| !live.iter().any(|node| node.node == lost.node))
        .collect())
}

impl Coordinator {
    /// Notes each seat's holder as the placement pass sees it (what changed only: the pass
    /// runs every second over every seat).
    pub(super) fn note_holders(&self, holders: &BTreeMap<String, Held>) {
        let mut seen = self.fleet_seen.lock().unwrap_or_else(|p| p.into_inner());
        for held in holders.values() {
            if seen.holders.get(&held.seat) != Some(&held.holder) {
                seen.holders.insert(held.seat.clone(), held.holder.clone());
            }
        }
    }

    /// Reads the live nodes, and says which were lost since the last look.
    pub(super) async fn watch_nodes(&self) -> Result<(), Error> {
        let live: BTreeMap<String, NodeInfo> = seat::nodes(self.store.as_ref(), &self.keys)
            .await?
            .into_iter()
            .map(|node| (node.incarnation.clone(), node))
            .collect();
        let lost: Vec<NodeInfo> = {
            let mut seen = self.fleet_seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.drained.extend(
                live.values()
                    .filter(|node| node.draining)
                    .map(|node| node.incarnation.clone()),
            );
            let before = seen.nodes.replace(live.clone());
            let lost = before
                .unwrap_or_default()
                .into_values()
                .filter(|node| {
                    !live.contains_key(&node.incarnation)
                        && !seen.drained.contains(&node.incarnation)
                        && node.incarnation != self.incarnation
                })
                .collect();
            // forget what is gone for good: the drained that left, the holders of nobody
            seen.drained
                .retain(|incarnation| live.contains_key(incarnation));
            lost
        };
        for node in lost {
            self.announce_lost(&node).await;
        }
        Ok(())
    }

    /// Says node `node` was lost: its event once, a warning, and its `lost/` entry.
    async fn announce_lost(&self, node: &NodeInfo) {
        let now = boxfleet_cluster::clock::now();
        warn!(node = %node.node, incarnation = %node.incarnation, addr = %node.addr, "node_lost");
        let lost = LostNode {
            node: node.node.clone(),
            incarnation: node.incarnation.clone(),
            addr: node.addr.clone(),
            host: node.host.clone(),
            since: now,
            started_at: node.started_at,
        };
        let body = serde_json::to_value(&lost).unwrap_or_default();
        let event = Event::new(
            kind::NODE_LOST,
            &[&node.incarnation],
            &format!("fleet-{}", node.node),
            "",
            "",
            now,
            body,
        );
        self.publish_once(event).await;
        let kept = async {
            let lease = self.announcements.lease(self.store.as_ref(), now).await?;
            let key = self.keys.lost_node(&node.node);
            let value = serde_json::to_vec(&lost).unwrap_or_default();
            // the first to find it gone keeps its `since`, unless it is an older incarnation's
            let current = self.store.get(&key).await?;
            let same = current
                .as_ref()
                .and_then(|kv| serde_json::from_slice::<LostNode>(&kv.value).ok())
                .is_some_and(|kept| kept.incarnation == node.incarnation);
            if !same {
                let compare = Compare::unchanged(key.clone(), current.as_ref());
                self.store
                    .txn(
                        Txn::new()
                            .when([compare])
                            .and_then([Op::put_on_lease(key, value, lease)]),
                    )
                    .await?;
            }
            Ok::<(), boxfleet_cluster::Error>(())
        };
        if let Err(error) = kept.await {
            warn!(node = %node.node, %error, "node_lost_unkept");
        }
    }

    /// Says this node began to drain.
    pub(super) async fn announce_draining(&self) {
        info!(node = %self.node, "node_draining");
        let event = Event::new(
            kind::NODE_DRAINING,
            &[&self.incarnation],
            &format!("fleet-{}", self.node),
            "",
            "",
            boxfleet_cluster::clock::now(),
            serde_json::json!({"node": self.node, "incarnation": self.incarnation}),
        );
        self.publish_once(event).await;
    }

    /// A seat this node just acquired: a takeover when its last holder seen was lost (gone
    /// without draining), said as `seat_taken_over`.
    pub(super) async fn note_acquired(&self, fence: &Fence) {
        // the seat's last holder seen, unless it is this node or it drained
        let last = |seen: &Seen| {
            seen.holders.get(&fence.seat).cloned().filter(|holder| {
                holder.incarnation != self.incarnation
                    && !seen.drained.contains(&holder.incarnation)
            })
        };
        let seen_live = |seen: &Seen, holder: &Holder| {
            seen.nodes
                .as_ref()
                .is_some_and(|live| live.contains_key(&holder.incarnation))
        };
        let stale = {
            let seen = self.fleet_seen.lock().unwrap_or_else(|p| p.into_inner());
            last(&seen).is_some_and(|holder| seen_live(&seen, &holder))
        };
        // the seat was acquired before this node's pass saw its holder go: look now (once: the
        // look forgets the gone node, so the rest of its seats need none)
        if stale && let Err(error) = self.watch_nodes().await {
            warn!(seat = %fence.seat, %error, "fleet_watch_failed");
        }
        let from = {
            let seen = self.fleet_seen.lock().unwrap_or_else(|p| p.into_inner());
            last(&seen).filter(|holder| !seen_live(&seen, holder))
        };
        let Some(from) = from else {
            return;
        };
        info!(seat = %fence.seat, from_node = %from.node, node = %self.node, epoch = fence.epoch, "seat_taken_over");
        let event = Event::new(
            kind::SEAT_TAKEN_OVER,
            &[&fence.seat, &fence.epoch.to_string()],
            &format!("fleet-{}", self.node),
            "",
            &fence.seat,
            boxfleet_cluster::clock::now(),
            serde_json::json!({
                "seat": fence.seat,
                "from_node": from.node,
                "from_incarnation": from.incarnation,
                "node": self.node,
                "epoch": fence.epoch,
            }),
        );
        self.publish_once(event).await;
    }
}
