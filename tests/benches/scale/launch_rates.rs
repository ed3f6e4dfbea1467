//! Launches per second on a node holding a few seats beside one holding many, measured in
//! interleaved pairs.
//!
//! A batch of 100 launches takes a fraction of a second, and this machine's speed drifts by
//! more than the goal's 20% from one minute to the next (one configuration's fresh rate ran
//! from 1,360 to 2,322/s across four runs). Two rates taken minutes apart, as the bench took
//! them first (the fresh node's, then the same node's once it held its seats), compared that
//! drift as much as the node. So both nodes run side by side: each pair is one batch on the
//! node with few seats and one on the node with many, back to back, the order swapped from one
//! pair to the next, and each pair gives a ratio. The figure is the median of the pairs'
//! ratios; the rates printed beside it are each node's median.

use std::ops::Range;
use std::time::Duration;

use super::Bench;

/// How many pairs of batches are measured.
pub const PAIRS: usize = 9;

/// What the pairs measured.
pub struct Rates {
    /// per pair: launches/s on the node with few seats, then on the one with many
    pub pairs: Vec<(f64, f64)>,
}

impl Rates {
    /// The median rate on the node with few seats.
    pub fn few(&self) -> f64 {
        median(self.pairs.iter().map(|(few, _)| *few).collect())
    }

    /// The median rate on the node with many seats.
    pub fn many(&self) -> f64 {
        median(self.pairs.iter().map(|(_, many)| *many).collect())
    }

    /// Each pair's ratio, many ÷ few.
    fn ratios(&self) -> Vec<f64> {
        self.pairs.iter().map(|(few, many)| many / few).collect()
    }

    /// The median of the pairs' ratios.
    pub fn ratio(&self) -> f64 {
        median(self.ratios())
    }

    /// The lowest and highest of the pairs' ratios.
    pub fn ratio_range(&self) -> (f64, f64) {
        let ratios = self.ratios();
        let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let high = ratios.iter().copied().fold(0.0, f64::max);
        (low, high)
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// [`PAIRS`] pairs of batches on `seats` of each node, every job ended and collected after
/// each batch. `many` holds `seats` already; a first batch, not counted, has `few` take them,
/// so that no batch counted acquires a seat.
pub async fn interleaved(few: &mut Bench, many: &mut Bench, seats: Range<usize>) -> Rates {
    batch(few, seats.clone()).await;
    let mut pairs = Vec::with_capacity(PAIRS);
    for pair in 0..PAIRS {
        let (few_rate, many_rate) = if pair % 2 == 0 {
            let few_rate = batch(few, seats.clone()).await;
            (few_rate, batch(many, seats.clone()).await)
        } else {
            let many_rate = batch(many, seats.clone()).await;
            (batch(few, seats.clone()).await, many_rate)
        };
        println!(
            "  pair {}: {few_rate:.0}/s beside {many_rate:.0}/s ({:.2})",
            pair + 1,
            many_rate / few_rate
        );
        pairs.push((few_rate, many_rate));
    }
    Rates { pairs }
}

/// One batch's launches per second; its jobs then end and are collected.
async fn batch(node: &mut Bench, seats: Range<usize>) -> f64 {
    let (took, _) = node.launch(seats.clone()).await;
    node.end_all(Duration::from_secs(120)).await;
    seats.len() as f64 / took.as_secs_f64()
}
