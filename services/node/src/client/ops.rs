//! The fleet's operations (the Ops service): `boxfleet tree` (the live supervision tree),
//! `nodes` (the live nodes), `seats` (who holds each seat) and `drain` (release a node's seats
//! before it shuts down).
//!
//! Layout: one function per command, each followed by its JSON and its table.

use std::time::Duration;

use boxfleet_proto::v1::{
    ActorInfo, BudgetRequest, DeadLetter, DeadLettersRequest, DrainRequest, NodeInfo, NodesRequest,
    ReloadRequest, SeatInfo, SeatsRequest, TreeReply, TreeRequest,
};
use serde_json::{Value, json};

use super::conn::{CALL_TIMEOUT, connect};
use super::render::{cell, count, note, one_line, out, pretty, table, truncate};
use crate::cli::{BudgetArgs, DrainArgs, NodesArgs, ReloadArgs, SeatsArgs, TreeArgs};

/// Runs `boxfleet tree`.
pub(super) async fn tree(args: &TreeArgs) -> anyhow::Result<i32> {
    let TreeArgs { fleet, json, conn } = args;
    let (fleet, json) = (*fleet, *json);
    let node = connect(conn).await?;
    let reply = node
        .call("tree", CALL_TIMEOUT, node.ops().tree(TreeRequest { fleet }))
        .await?;
    if json {
        out(&format!("{}\n", pretty(&tree_json(&reply))))?;
    } else {
        out(&render_tree(&reply))?;
    }
    Ok(0)
}

fn actor_json(actor: &ActorInfo) -> Value {
    json!({
        "name": actor.name,
        "state": actor.state,
        "restarts": actor.restarts,
        "mailbox_depth": actor.mailbox_depth,
        "last_error": actor.last_error,
        "strategy": actor.strategy,
        "children": actor.children.iter().map(actor_json).collect::<Vec<_>>(),
    })
}

fn tree_json(reply: &TreeReply) -> Value {
    json!({
        "node": reply.node,
        "roots": reply.roots.iter().map(actor_json).collect::<Vec<_>>(),
    })
}

fn render_tree(reply: &TreeReply) -> String {
    fn actor(text: &mut String, actor_info: &ActorInfo, depth: usize) {
        text.push_str(&"  ".repeat(depth));
        text.push_str(&format!(
            "{}  {}  restarts={}  mailbox={}",
            cell(&actor_info.name),
            cell(&actor_info.state),
            actor_info.restarts,
            actor_info.mailbox_depth
        ));
        if !actor_info.strategy.is_empty() {
            text.push_str(&format!("  strategy={}", actor_info.strategy));
        }
        if !actor_info.last_error.is_empty() {
            text.push_str(&format!(
                "  last_error={}",
                truncate(&one_line(&actor_info.last_error), 160)
            ));
        }
        text.push('\n');
        for child in &actor_info.children {
            actor(text, child, depth + 1);
        }
    }
    let mut text = format!("node {}\n", cell(&reply.node));
    for root in &reply.roots {
        actor(&mut text, root, 1);
    }
    text
}

/// Runs `boxfleet nodes`.
pub(super) async fn nodes(args: &NodesArgs) -> anyhow::Result<i32> {
    let node = connect(&args.conn).await?;
    let reply = node
        .call("nodes", CALL_TIMEOUT, node.ops().nodes(NodesRequest {}))
        .await?;
    if args.json {
        let nodes: Vec<Value> = reply.nodes.iter().map(node_json).collect();
        out(&format!("{}\n", pretty(&json!({ "nodes": nodes }))))?;
    } else {
        out(&nodes_table(&reply.nodes))?;
    }
    Ok(0)
}

fn node_json(info: &NodeInfo) -> Value {
    json!({
        "node": info.node,
        "addr": info.addr,
        "incarnation": info.incarnation,
        "started_at": info.started_at,
        "build": info.build,
        "host": info.host,
        "draining": info.draining,
        "seats": info.seats,
        "insecure": info.insecure,
        "tls": info.tls,
        "lost": info.lost,
        "lost_since": (!info.lost_since.is_empty()).then_some(&info.lost_since),
    })
}

fn nodes_table(nodes: &[NodeInfo]) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|info| {
            let mut state = if info.lost {
                format!("lost since {}", info.lost_since)
            } else if info.draining {
                "draining".to_owned()
            } else {
                "live".to_owned()
            };
            if info.insecure {
                // it listens beyond loopback without TLS: say so wherever the fleet is listed
                state.push_str(", insecure (no TLS)");
            }
            [
                &info.node,
                &info.addr,
                &info.host,
                &state,
                &info.seats.to_string(),
                &info.incarnation,
                &info.started_at,
                &info.build,
            ]
            .map(|value| cell(value).to_owned())
            .to_vec()
        })
        .collect();
    table(
        &[
            "NODE",
            "ADDR",
            "HOST",
            "STATE",
            "SEATS",
            "INCARNATION",
            "STARTED",
            "BUILD",
        ],
        &rows,
    )
}

/// Runs `boxfleet seats`.
pub(super) async fn seats(args: &SeatsArgs) -> anyhow::Result<i32> {
    let node = connect(&args.conn).await?;
    if args.dead_letters {
        let request = DeadLettersRequest {
            seat: args.seat.clone().unwrap_or_default(),
        };
        let reply = node
            .call(
                "dead letters",
                CALL_TIMEOUT,
                node.ops().dead_letters(request),
            )
            .await?;
        if args.json {
            let letters: Vec<Value> = reply.letters.iter().map(dead_letter_json).collect();
            out(&format!(
                "{}\n",
                pretty(&json!({ "dead_letters": letters }))
            ))?;
        } else {
            out(&dead_letters_table(&reply.letters))?;
        }
        return Ok(0);
    }
    let reply = node
        .call("seats", CALL_TIMEOUT, node.ops().seats(SeatsRequest {}))
        .await?;
    if args.json {
        let seats: Vec<Value> = reply.seats.iter().map(seat_json).collect();
        out(&format!("{}\n", pretty(&json!({ "seats": seats }))))?;
    } else {
        out(&seats_table(&reply.seats))?;
    }
    Ok(0)
}

fn dead_letter_json(letter: &DeadLetter) -> Value {
    json!({
        "seat": letter.seat,
        "delivery_id": letter.delivery_id,
        "from": letter.from,
        "posted_at": letter.posted_at,
        "deliveries": letter.deliveries,
        "conversation_key": letter.conversation_key,
        "text": letter.text,
    })
}

fn dead_letters_table(letters: &[DeadLetter]) -> String {
    let rows: Vec<Vec<String>> = letters
        .iter()
        .map(|letter| {
            vec![
                cell(&letter.seat).to_owned(),
                cell(&letter.delivery_id).to_owned(),
                cell(&letter.from).to_owned(),
                letter.deliveries.to_string(),
                cell(&letter.posted_at).to_owned(),
                truncate(&one_line(&letter.text), 60),
            ]
        })
        .collect();
    table(
        &["SEAT", "DELIVERY", "FROM", "DELIVERIES", "POSTED", "TEXT"],
        &rows,
    )
}

fn seat_json(info: &SeatInfo) -> Value {
    json!({
        "seat": info.seat,
        "holder_node": info.holder_node,
        "incarnation": info.incarnation,
        "epoch": info.epoch,
        "active_runs": info.active_runs,
        "awaiting": info.awaiting,
        "inbox": info.inbox,
    })
}

fn seats_table(seats: &[SeatInfo]) -> String {
    let rows: Vec<Vec<String>> = seats
        .iter()
        .map(|info| {
            vec![
                cell(&info.seat).to_owned(),
                // a seat between holders (the last one gone, the next not yet in)
                if info.holder_node.is_empty() {
                    "(unheld)".to_owned()
                } else {
                    info.holder_node.clone()
                },
                cell(&info.incarnation).to_owned(),
                if info.epoch == 0 {
                    "-".to_owned()
                } else {
                    info.epoch.to_string()
                },
                info.active_runs.to_string(),
                info.awaiting.to_string(),
                info.inbox.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "SEAT",
            "HOLDER",
            "INCARNATION",
            "EPOCH",
            "RUNS",
            "AWAITING",
            "INBOX",
        ],
        &rows,
    )
}

/// How long `boxfleet drain` waits: every seat's release settles within 60 s.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `boxfleet drain`: exit 1 when some of the node's seats are still held.
pub(super) async fn drain(args: &DrainArgs) -> anyhow::Result<i32> {
    let DrainArgs {
        node: node_id,
        conn,
    } = args;
    let node = connect(conn).await?;
    let reply = node
        .call(
            "drain",
            // a drain waits for its seats' collections and answers to settle
            DRAIN_TIMEOUT,
            node.ops().drain(DrainRequest {
                node: node_id.clone(),
            }),
        )
        .await?;
    out(&format!(
        "drained {node_id}: released {}; it is placed no seats until it restarts\n",
        count(reply.released as usize, "seat")
    ))?;
    if reply.still_held > 0 {
        // what the drain could not do: stderr, beside the exit code that says so
        note(&format!(
            "boxfleet: {} still held: no other live node takes seats (see `boxfleet nodes`), so \
             {node_id} keeps polling and settling their runs and answers, and hands each seat \
             over as soon as another node joins; it takes no new seats meanwhile (a launch for \
             one is refused, naming this)",
            count(reply.still_held as usize, "seat")
        ));
        return Ok(1);
    }
    Ok(0)
}

/// Runs `boxfleet reload`: exit 0 when the node put its file in force, 1 when it refused it
/// (each problem printed at its location; nothing on the node changed).
pub(super) async fn reload(args: &ReloadArgs) -> anyhow::Result<i32> {
    let node = connect(&args.conn).await?;
    let reply = node
        .call(
            "reload",
            Duration::from_secs(60),
            node.ops().reload(ReloadRequest {}),
        )
        .await?;
    if reply.applied {
        out(&format!("{}: {}\n", reply.node, reply.summary))?;
        return Ok(0);
    }
    let mut said = format!("{}: refused: {}\n", reply.node, reply.summary);
    for problem in &reply.problems {
        said.push_str(&format!("  {problem}\n"));
    }
    eprint!("{said}");
    Ok(1)
}

/// Runs `boxfleet budget`: each scope's window of each kind, its tokens beside its cap.
pub(super) async fn budget(args: &BudgetArgs) -> anyhow::Result<i32> {
    let node = connect(&args.conn).await?;
    let reply = node
        .call(
            "budget",
            Duration::from_secs(30),
            node.ops().budget(BudgetRequest {
                seat: args.seat.clone().unwrap_or_default(),
                task: args.task.clone().unwrap_or_default(),
            }),
        )
        .await?;
    if args.json {
        for w in &reply.windows {
            let line = serde_json::json!({
                "scope": w.scope, "kind": w.kind, "window": w.window,
                "input_tokens": w.input_tokens, "output_tokens": w.output_tokens,
                "cost_micros": w.cost_micros, "charges": w.charges,
                "cap": w.capped.then_some(w.cap), "turns_at": w.turns_at,
            });
            out(&format!("{line}\n"))?;
        }
        return Ok(0);
    }
    let mut text = format!(
        "clock UTC{}; a launch needs {} tokens left in every capped window\n{:<16} {:<22} {:>12} {:>12} {:>12} {:>7}  TURNS\n",
        reply.clock, reply.min_tokens, "SCOPE", "WINDOW", "TOKENS", "CAP", "LEFT", "RUNS"
    );
    for w in &reply.windows {
        let used = w.input_tokens + w.output_tokens;
        let (cap, left) = if w.capped {
            (w.cap.to_string(), w.cap.saturating_sub(used).to_string())
        } else {
            ("-".to_owned(), "-".to_owned())
        };
        text.push_str(&format!(
            "{:<16} {:<22} {:>12} {:>12} {:>12} {:>7}  {}\n",
            w.scope, w.window, used, cap, left, w.charges, w.turns_at
        ));
    }
    out(&text)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_indented_by_depth() {
        let reply = TreeReply {
            node: "node-a".to_owned(),
            roots: vec![ActorInfo {
                name: "node".to_owned(),
                state: "running".to_owned(),
                strategy: "one_for_one".to_owned(),
                children: vec![ActorInfo {
                    name: "waiter".to_owned(),
                    state: "restarting".to_owned(),
                    restarts: 2,
                    mailbox_depth: 5,
                    last_error: "store unreachable\nretrying".to_owned(),
                    ..ActorInfo::default()
                }],
                ..ActorInfo::default()
            }],
        };
        assert_eq!(
            render_tree(&reply),
            "node node-a\n\
             \x20 node  running  restarts=0  mailbox=0  strategy=one_for_one\n\
             \x20   waiter  restarting  restarts=2  mailbox=5  last_error=store unreachable retrying\n"
        );
        assert_eq!(tree_json(&reply)["roots"][0]["children"][0]["restarts"], 2);
    }

    #[test]
    fn pin_the_json_and_tables_of_nodes_seats_and_tree() {
        let node = NodeInfo {
            node: "node-a".to_owned(),
            addr: "10.0.0.2:7400".to_owned(),
            incarnation: "node-a-1".to_owned(),
            started_at: "s".to_owned(),
            build: "0.1.0".to_owned(),
            host: "h".to_owned(),
            draining: true,
            seats: 2,
            insecure: false,
            tls: false,
            ..NodeInfo::default()
        };
        assert_eq!(
            pretty(&json!({"nodes": [node_json(&node)]})),
            PIN_NODES_JSON
        );
        assert_eq!(
            nodes_table(std::slice::from_ref(&node)),
            "NODE    ADDR           HOST  STATE     SEATS  INCARNATION  STARTED  BUILD\n\
             node-a  10.0.0.2:7400  h     draining  2      node-a-1     s        0.1.0\n"
        );
        let open = NodeInfo {
            insecure: true,
            draining: false,
            ..node.clone()
        };
        assert!(
            nodes_table(&[open]).contains("live, insecure (no TLS)"),
            "a node that listens without TLS says so"
        );
        let lost = NodeInfo {
            lost: true,
            lost_since: "2026-12-04T01:00:00+00:00".to_owned(),
            draining: false,
            ..node.clone()
        };
        assert!(
            nodes_table(&[lost]).contains("lost since 2026-12-04T01:00:00+00:00"),
            "a lost node is listed, and since when"
        );
        let seat = SeatInfo {
            seat: "alice".to_owned(),
            holder_node: "node-a".to_owned(),
            incarnation: "node-a-1".to_owned(),
            epoch: 4,
            active_runs: 1,
            awaiting: 2,
            inbox: 3,
        };
        assert_eq!(
            pretty(&json!({"seats": [seat_json(&seat)]})),
            PIN_SEATS_JSON
        );
        assert_eq!(
            seats_table(&[seat]),
            "SEAT   HOLDER  INCARNATION  EPOCH  RUNS  AWAITING  INBOX\n\
             alice  node-a  node-a-1     4      1     2         3\n"
        );
        let tree = TreeReply {
            node: "node-a".to_owned(),
            roots: vec![ActorInfo {
                name: "node".to_owned(),
                state: "running".to_owned(),
                restarts: 1,
                mailbox_depth: 2,
                last_error: "e".to_owned(),
                strategy: "one_for_one".to_owned(),
                children: vec![ActorInfo::default()],
            }],
        };
        assert_eq!(pretty(&tree_json(&tree)), PIN_TREE_JSON);
    }

    const PIN_NODES_JSON: &str = "{\n  \"nodes\": [\n    {\n      \"addr\": \"10.0.0.2:7400\",\n      \"build\": \"0.1.0\",\n      \"draining\": true,\n      \"host\": \"h\",\n      \"incarnation\": \"node-a-1\",\n      \"insecure\": false,\n      \"lost\": false,\n      \"lost_since\": null,\n      \"node\": \"node-a\",\n      \"seats\": 2,\n      \"started_at\": \"s\",\n      \"tls\": false\n    }\n  ]\n}";

    const PIN_SEATS_JSON: &str = "{\n  \"seats\": [\n    {\n      \"active_runs\": 1,\n      \"awaiting\": 2,\n      \"epoch\": 4,\n      \"holder_node\": \"node-a\",\n      \"inbox\": 3,\n      \"incarnation\": \"node-a-1\",\n      \"seat\": \"alice\"\n    }\n  ]\n}";

    const PIN_TREE_JSON: &str = "{\n  \"node\": \"node-a\",\n  \"roots\": [\n    {\n      \"children\": [\n        {\n          \"children\": [],\n          \"last_error\": \"\",\n          \"mailbox_depth\": 0,\n          \"name\": \"\",\n          \"restarts\": 0,\n          \"state\": \"\",\n          \"strategy\": \"\"\n        }\n      ],\n      \"last_error\": \"e\",\n      \"mailbox_depth\": 2,\n      \"name\": \"node\",\n      \"restarts\": 1,\n      \"state\": \"running\",\n      \"strategy\": \"one_for_one\"\n    }\n  ]\n}";
}
