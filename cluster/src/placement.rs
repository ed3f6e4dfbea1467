//! Where a seat belongs: rendezvous (highest-random-weight) hashing over the live nodes
//! (DESIGN §7, `Seats`).
//!
//! Every node computes the same owner from the same list of live nodes, with no coordination:
//! each (node, seat) pair gets a weight from SHA-256, and the node with the highest weight
//! owns the seat. When a node leaves, only its own seats move, each to the node that weighed
//! second for it; when one joins, it takes about 1/n of every other node's seats and nothing
//! else moves. A draining node is left out of the list, so its seats go where they would go
//! if it had left.

use sha2::{Digest, Sha256};

/// The weight of `seat` on `node`.
pub fn weight(node: &str, seat: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(node.as_bytes());
    // a separator no node id holds: ("ab", "c") and ("a", "bc") weigh differently
    hash.update([0u8]);
    hash.update(seat.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The node that owns `seat` among `nodes`, or `None` when there are none. Ties (which
/// SHA-256 makes vanishingly rare) go to the lower node id, so every node agrees.
pub fn owner<'a, I>(seat: &str, nodes: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    nodes
        .into_iter()
        .map(|node| (weight(node, seat), std::cmp::Reverse(node), node))
        .max()
        .map(|(_, _, node)| node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn seats(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("seat-{i}")).collect()
    }

    fn placement<'a>(seats: &'a [String], nodes: &[&'a str]) -> BTreeMap<&'a str, &'a str> {
        seats
            .iter()
            .map(|seat| {
                (
                    seat.as_str(),
                    owner(seat, nodes.iter().copied()).expect("an owner"),
                )
            })
            .collect()
    }

    #[test]
    fn every_node_agrees_whatever_order_it_lists_the_nodes_in() {
        let seats = seats(200);
        let a = placement(&seats, &["n1", "n2", "n3"]);
        let b = placement(&seats, &["n3", "n1", "n2"]);
        assert_eq!(a, b);
        assert_eq!(owner("x", std::iter::empty()), None);
    }

    #[test]
    fn a_leaving_node_moves_only_its_own_seats() {
        let seats = seats(1000);
        let before = placement(&seats, &["n1", "n2", "n3"]);
        let after = placement(&seats, &["n1", "n3"]);
        for (seat, was) in &before {
            if *was != "n2" {
                assert_eq!(after[seat], *was, "{seat} moved though its node stayed");
            } else {
                assert_ne!(after[seat], "n2");
            }
        }
    }

    #[test]
    fn a_joining_node_takes_a_fair_share_and_moves_nothing_else() {
        let seats = seats(3000);
        let before = placement(&seats, &["n1", "n2"]);
        let after = placement(&seats, &["n1", "n2", "n3"]);
        let mut taken = 0;
        for (seat, was) in &before {
            if after[seat] != *was {
                assert_eq!(after[seat], "n3", "{seat} moved between old nodes");
                taken += 1;
            }
        }
        // a third of the seats, within a generous margin
        assert!((800..1200).contains(&taken), "n3 took {taken} of 3000");
    }

    #[test]
    fn the_separator_keeps_node_and_seat_apart() {
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
    }
}
