//! The Ops service (DESIGN §8.4): what an SRE asks of the fleet — the supervision tree (this
//! node's, or every live node's), the live nodes, who holds which seat, a drain, and a reload
//! of the node's config file.

use std::sync::Arc;

use boxfleet_actors::lifecycle::{self, Coordinator};
use boxfleet_actors::supervisor::{self, ActorTree, SupervisorMsg};
use boxfleet_actors::workers::Observed;
use boxfleet_cluster::record::Status;
use boxfleet_cluster::seat;
use boxfleet_proto::v1 as pb;
use tonic::{Request, Response, Status as GrpcStatus};

use boxfleet_auth::Call;

use super::status::status;
use crate::routing::{OWNER_TAIL_BUDGET, Peers, forwarded};
use crate::trust::{authorize, bearer, principal_of};

/// The Ops service.
#[derive(Debug)]
pub struct OpsService {
    pub peers: Arc<Peers>,
    pub coordinator: Arc<Coordinator>,
    pub errors: Arc<Observed>,
    /// the root supervisor's name
    pub root: String,
    /// the node's reloads
    pub reloader: Arc<crate::reload::Reloader>,
}

/// Converts a supervision tree into `Ops.Tree`'s shape; a worker's handled errors fill its
/// `last_error` when it has not failed.
fn actor_info(tree: &ActorTree, errors: &Observed, node: &str) -> Vec<pb::ActorInfo> {
    tree.children
        .iter()
        .map(|child| {
            let short = child.report.name.rsplit('/').next().unwrap_or_default();
            let last_error = child
                .report
                .last_error
                .clone()
                .or_else(|| errors.get(short))
                .unwrap_or_default();
            pb::ActorInfo {
                name: child
                    .report
                    .name
                    .trim_start_matches(&format!("{node}/"))
                    .to_owned(),
                state: serde_json::to_value(child.report.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                restarts: child.report.restart_count,
                mailbox_depth: child.report.mailbox_depth.max(errors.depth(short)),
                last_error,
                children: child
                    .subtree
                    .as_ref()
                    .map(|sub| actor_info(sub, errors, node))
                    .unwrap_or_default(),
                strategy: String::new(),
            }
        })
        .collect()
}

impl OpsService {
    /// This node's own supervision tree.
    async fn own_tree(&self) -> Result<pb::TreeReply, GrpcStatus> {
        let node = self.coordinator.node.clone();
        let Some(root) = ractor::ActorRef::<SupervisorMsg>::where_is(self.root.clone()) else {
            return Err(GrpcStatus::unavailable(
                "the node's supervision tree is not running",
            ));
        };
        let tree = supervisor::tree(&root).await;
        let children = actor_info(&tree, &self.errors, &node);
        Ok(pb::TreeReply {
            node: node.clone(),
            roots: vec![pb::ActorInfo {
                name: tree.name.clone(),
                state: if tree.inspect_error.is_some() {
                    "unreachable"
                } else {
                    "running"
                }
                .into(),
                last_error: tree.inspect_error.clone().unwrap_or_default(),
                children,
                strategy: "rest_for_one".into(),
                ..pb::ActorInfo::default()
            }],
        })
    }
}

#[tonic::async_trait]
impl pb::ops_server::Ops for OpsService {
    async fn tree(
        &self,
        request: Request<pb::TreeRequest>,
    ) -> Result<Response<pb::TreeReply>, GrpcStatus> {
        let caller = principal_of(&request)?;
        authorize(&caller, &Call::Tree, "")?;
        let token = bearer(request.metadata(), "authorization")
            .unwrap_or_default()
            .to_owned();
        let mut reply = self.own_tree().await?;
        if !request.into_inner().fleet {
            return Ok(Response::new(reply));
        }
        // every other live node's tree, each asked for at most the fleet read budget; a node
        // that does not answer shows as one silent root, never as a missing one
        let nodes = seat::nodes(self.coordinator.store.as_ref(), &self.coordinator.keys)
            .await
            .map_err(status)?;
        let asks = nodes
            .into_iter()
            .filter(|n| n.node != self.coordinator.node)
            .map(|n| {
                let token = &token;
                async move {
                    let asked = match self.peers.ops(&n.node, &n.addr, token) {
                        Ok(mut ops) => tokio::time::timeout(
                            OWNER_TAIL_BUDGET,
                            ops.tree(pb::TreeRequest::default()),
                        )
                        .await
                        .map_err(|_| "did not answer inside 2 s".to_owned())
                        .and_then(|r| r.map_err(|e| e.message().to_owned())),
                        Err(error) => Err(error.message().to_owned()),
                    };
                    match asked {
                        Ok(tree) => tree.into_inner().roots,
                        Err(error) => vec![pb::ActorInfo {
                            name: format!("node/{}", n.node),
                            state: "silent".into(),
                            last_error: error,
                            ..pb::ActorInfo::default()
                        }],
                    }
                }
            });
        for roots in futures::future::join_all(asks).await {
            reply.roots.extend(roots);
        }
        Ok(Response::new(reply))
    }
    async fn nodes(
        &self,
        request: Request<pb::NodesRequest>,
    ) -> Result<Response<pb::NodesReply>, GrpcStatus> {
        authorize(&principal_of(&request)?, &Call::Nodes, "")?;
        let store = self.coordinator.store.as_ref();
        let keys = &self.coordinator.keys;
        let nodes = seat::nodes(store, keys).await.map_err(status)?;
        let held = seat::holders(store, keys).await.map_err(status)?;
        let lost = boxfleet_actors::lifecycle::fleet_watch::lost_nodes(store, keys, &nodes)
            .await
            .map_err(status)?;
        let lost = lost.into_iter().map(|lost| pb::NodeInfo {
            node: lost.node,
            addr: lost.addr,
            incarnation: lost.incarnation,
            started_at: lost.started_at.to_rfc3339(),
            host: lost.host,
            lost: true,
            lost_since: lost.since.to_rfc3339(),
            ..pb::NodeInfo::default()
        });
        Ok(Response::new(pb::NodesReply {
            nodes: nodes
                .into_iter()
                .map(|n| pb::NodeInfo {
                    seats: held
                        .values()
                        .filter(|h| h.holder.incarnation == n.incarnation)
                        .count() as u32,
                    node: n.node,
                    addr: n.addr,
                    incarnation: n.incarnation,
                    started_at: n.started_at.to_rfc3339(),
                    build: n.build,
                    host: n.host,
                    draining: n.draining,
                    insecure: n.insecure,
                    tls: n.tls,
                    ..pb::NodeInfo::default()
                })
                .chain(lost)
                .collect(),
        }))
    }

    async fn seats(
        &self,
        request: Request<pb::SeatsRequest>,
    ) -> Result<Response<pb::SeatsReply>, GrpcStatus> {
        authorize(&principal_of(&request)?, &Call::Seats, "")?;
        let coordinator = &self.coordinator;
        // one read of the seats' prefix: the holders, and the mail each seat holds
        let range = coordinator
            .store
            .range(&coordinator.keys.seats())
            .await
            .map_err(status)?;
        let held = seat::holders_in(&coordinator.keys, &range.kvs).map_err(status)?;
        let runs = coordinator.runs.list().await.map_err(status)?;
        // every seat with a holder, a run or mail: one mid-handover (its holder gone, the
        // next not yet in) is listed unheld rather than left out
        let prefix = coordinator.keys.seats();
        // one pass over each listing, counted by seat: matching every seat against every key
        // and run was quadratic, and `/metrics` reads this on every scrape (at 10,000 seats a
        // scrape took seconds of CPU and starved the session's renewal, issue 20)
        let mut inboxes: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut names: std::collections::BTreeSet<String> = held.keys().cloned().collect();
        for kv in &range.kvs {
            let Some((seat, rest)) = kv
                .key
                .strip_prefix(&prefix)
                .and_then(|rest| rest.split_once('/'))
            else {
                continue;
            };
            if seat.is_empty() {
                continue;
            }
            if rest.starts_with("inbox/") {
                *inboxes.entry(seat).or_default() += 1;
            }
            if !names.contains(seat) {
                names.insert(seat.to_owned());
            }
        }
        let mut counts: std::collections::HashMap<&str, (u32, u32)> =
            std::collections::HashMap::new();
        for run in &runs {
            let (active, awaiting) = counts.entry(run.record.seat.as_str()).or_default();
            *active += u32::from(run.record.status.holds_seat());
            *awaiting += u32::from(matches!(
                run.record.status,
                Status::AwaitingClarification | Status::Reseed
            ));
        }
        names.extend(counts.keys().map(|seat| (*seat).to_owned()));
        let mut seats = Vec::with_capacity(names.len());
        for name in names {
            let held = held.get(&name).cloned();
            let inbox = inboxes.get(name.as_str()).copied().unwrap_or(0);
            let (active, awaiting) = counts.get(name.as_str()).copied().unwrap_or((0, 0));
            let (holder_node, incarnation, epoch) = held
                .map(|held| (held.holder.node, held.holder.incarnation, held.epoch))
                .unwrap_or_default();
            seats.push(pb::SeatInfo {
                seat: name,
                holder_node,
                incarnation,
                epoch,
                active_runs: active,
                awaiting,
                inbox,
            });
        }
        Ok(Response::new(pb::SeatsReply { seats }))
    }

    async fn dead_letters(
        &self,
        request: Request<pb::DeadLettersRequest>,
    ) -> Result<Response<pb::DeadLettersReply>, GrpcStatus> {
        let caller = principal_of(&request)?;
        let asked = request.into_inner().seat;
        if !asked.is_empty() {
            super::inputs::id("seat", &asked)?;
        }
        authorize(&caller, &Call::Seats, &format!("dead_letters seat={asked}"))?;
        let coordinator = &self.coordinator;
        let seats: std::collections::BTreeSet<String> = if asked.is_empty() {
            let prefix = coordinator.keys.seats();
            let range = coordinator.store.range(&prefix).await.map_err(status)?;
            range
                .kvs
                .iter()
                .filter_map(|kv| {
                    let rest = kv.key.strip_prefix(&prefix)?;
                    rest.split_once("/dead/").map(|(seat, _)| seat.to_owned())
                })
                .collect()
        } else {
            [asked].into_iter().collect()
        };
        let mut letters = Vec::new();
        // a credential scoped to seats sees only theirs
        for seat in seats.into_iter().filter(|seat| caller.covers(seat)) {
            for message in coordinator
                .inbox
                .dead_letters(&seat)
                .await
                .map_err(status)?
            {
                let delivery = message.delivery;
                letters.push(pb::DeadLetter {
                    seat: seat.clone(),
                    delivery_id: delivery.delivery_id,
                    from: delivery.from,
                    text: delivery.text,
                    posted_at: delivery.posted_at.to_rfc3339(),
                    deliveries: message.delivery_count,
                    conversation_key: delivery.conversation_key.unwrap_or_default(),
                });
            }
        }
        Ok(Response::new(pb::DeadLettersReply { letters }))
    }

    async fn drain(
        &self,
        request: Request<pb::DrainRequest>,
    ) -> Result<Response<pb::DrainReply>, GrpcStatus> {
        let caller = principal_of(&request)?;
        let token = bearer(request.metadata(), "authorization")
            .unwrap_or_default()
            .to_owned();
        let node = request.into_inner().node;
        authorize(&caller, &Call::Drain, &format!("node={node}"))?;
        let coordinator = &self.coordinator;
        if !node.is_empty() && node != coordinator.node {
            // asked of another node: pass it to that node
            let nodes = seat::nodes(coordinator.store.as_ref(), &coordinator.keys)
                .await
                .map_err(status)?;
            let Some(target) = nodes.into_iter().find(|n| n.node == node) else {
                return Err(GrpcStatus::not_found(format!(
                    "no live node {node}: `boxfleet nodes` lists the live ones"
                )));
            };
            let mut ops = self.peers.ops(&target.node, &target.addr, &token)?;
            return ops
                .drain(pb::DrainRequest { node })
                .await
                .map_err(|e| forwarded(&target.node, e));
        }
        // placed no seats from now on; every seat another node is placed to take is released
        // gracefully, in parallel, and that node recovers its runs; a seat no other node would
        // take stays held here, its runs polled and settled, until one joins
        coordinator.set_draining(true).await.map_err(status)?;
        boxfleet_actors::crash::point(boxfleet_actors::crash::DRAIN_AFTER_MARKED);
        tracing::info!(node = %coordinator.node, "node_draining");
        let before = coordinator.held_seats().len() as u32;
        // the placement pass may release some first: count what is gone
        let still_held = coordinator
            .release_placed_elsewhere(lifecycle::RELEASE_SETTLE)
            .await as u32;
        Ok(Response::new(pb::DrainReply {
            released: before.saturating_sub(still_held),
            still_held,
        }))
    }

    async fn reload(
        &self,
        request: Request<pb::ReloadRequest>,
    ) -> Result<Response<pb::ReloadReply>, GrpcStatus> {
        let caller = principal_of(&request)?;
        authorize(&caller, &Call::Reload, "")?;
        let outcome = self.reloader.reload(crate::reload::Trigger::Rpc).await;
        Ok(Response::new(pb::ReloadReply {
            applied: outcome.applied,
            summary: outcome.summary,
            problems: outcome.problems,
            node: self.coordinator.node.clone(),
        }))
    }

    async fn budget(
        &self,
        request: Request<pb::BudgetRequest>,
    ) -> Result<Response<pb::BudgetReply>, GrpcStatus> {
        authorize(&principal_of(&request)?, &Call::Budget, "")?;
        let pb::BudgetRequest { seat: asked, task } = request.into_inner();
        let coordinator = &self.coordinator;
        let company = coordinator.company();
        let seats: Vec<String> = if !asked.is_empty() {
            vec![asked]
        } else if !company.seats.is_empty() {
            company.seats.iter().map(|s| s.handle.clone()).collect()
        } else {
            seat::holders(coordinator.store.as_ref(), &coordinator.keys)
                .await
                .map_err(status)?
                .into_keys()
                .collect()
        };
        let budgets = &company.budgets;
        let mut scopes = vec![("company".to_owned(), "company".to_owned(), budgets.company)];
        scopes.extend(seats.into_iter().map(|handle| {
            let scope =
                boxfleet_cluster::spend::scope(boxfleet_cluster::transition::Share::Seat, &handle);
            (scope, format!("seat {handle}"), budgets.caps_for(&handle))
        }));
        let now = chrono::Utc::now();
        let clock = budgets.offset();
        let names = boxfleet_cluster::spend::windows_on(now, clock);
        let mut windows = Vec::new();
        for (scope, label, caps) in scopes {
            for (kind, window) in ["day", "week", "month"].into_iter().zip(&names) {
                let (counter, _) = boxfleet_cluster::spend::read(
                    coordinator.store.as_ref(),
                    &coordinator.keys,
                    &scope,
                    window,
                )
                .await
                .map_err(status)?;
                let cap = caps.written().into_iter().find(|(k, _)| *k == kind);
                windows.push(pb::BudgetWindow {
                    scope: label.clone(),
                    kind: kind.to_owned(),
                    window: window.clone(),
                    input_tokens: counter.input_tokens,
                    output_tokens: counter.output_tokens,
                    cost_micros: counter.cost_micros,
                    charges: counter.charges,
                    cap: cap.map_or(0, |(_, cap)| cap),
                    capped: cap.is_some(),
                    turns_at: lifecycle::budget::turns_at(kind, now, clock).to_rfc3339(),
                });
            }
        }
        if !task.is_empty() {
            let scope =
                boxfleet_cluster::spend::scope(boxfleet_cluster::transition::Share::Task, &task);
            let (counter, _) = boxfleet_cluster::spend::read(
                coordinator.store.as_ref(),
                &coordinator.keys,
                &scope,
                boxfleet_cluster::spend::TASK_WINDOW,
            )
            .await
            .map_err(status)?;
            windows.push(pb::BudgetWindow {
                scope: format!("task {task}"),
                kind: "total".to_owned(),
                window: boxfleet_cluster::spend::TASK_WINDOW.to_owned(),
                input_tokens: counter.input_tokens,
                output_tokens: counter.output_tokens,
                cost_micros: counter.cost_micros,
                charges: counter.charges,
                ..pb::BudgetWindow::default()
            });
        }
        Ok(Response::new(pb::BudgetReply {
            windows,
            min_tokens: budgets.floor(),
            clock: clock.to_string(),
        }))
    }
}
