//! What the lifecycle asks of the node's supervision tree, and nothing more: start or stop a
//! seat's actor, have a run's driver come back to a run, and put a box operation through that
//! box's actor. The node's tree implements [`FollowUps`] (`crate::tree::NodeTree`); the
//! lifecycle never names the actors themselves, so it can be driven without a tree
//! ([`Detached`]) and the actors depend on it, not it on them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::boxes::{BoxOp, BoxReply};
use crate::ports::Provider;

/// What becomes of an answer whose resume failed (the spec's answer-resume retry rule; decided
/// by `answer::after_failed_resume`, carried out by the run's driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerRetry {
    /// resume it again after this pause
    After(Duration),
    /// its attempts or its window are spent: let it go (declined for this question, its copy
    /// handed back to the seat once)
    LetGo { attempts: u32 },
}

/// The follow-ups a lifecycle step leaves to the node's actors.
#[async_trait]
pub trait FollowUps: Send + Sync + std::fmt::Debug {
    /// This node acquired `seat` (and ran its recovery pass): its `Seat` actor starts.
    async fn seat_acquired(&self, seat: &str);
    /// This node let `seat` go: its `Seat` actor stops.
    fn seat_released(&self, seat: &str);
    /// A run owes more than the step that just ran could do (an ending kept for a later try):
    /// its `Run` driver reads it again and does what it owes.
    async fn check_run(&self, turn_id: &str);
    /// An ending the store did not take: the `Run` driver decides it again until the store
    /// answers, then finishes it.
    async fn keep_ending(&self, turn_id: &str, ending: super::ending::KeptEnding);
    /// A recorded answer's resume failed: the `Run` driver of `seat`'s run `turn_id` retries
    /// it or lets it go.
    async fn answer_resume_failed(&self, seat: &str, turn_id: &str, retry: AnswerRetry);
    /// A resume this node's engine took could not be settled: the `Run` driver gives the
    /// claim `launch_id` back until the store takes it.
    async fn hand_back_claim(&self, turn_id: &str, launch_id: &str);
    /// One control operation on a box, in order with the box's other operations (its `Box`
    /// actor), bounded.
    async fn box_op(&self, provider: &Arc<dyn Provider>, sandbox_id: &str, op: BoxOp) -> BoxReply;
}

/// No tree: box operations go straight to the provider, and nothing is followed up (a unit
/// use of the lifecycle, or a node whose tree has not started).
#[derive(Debug, Default)]
pub struct Detached;

#[async_trait]
impl FollowUps for Detached {
    async fn seat_acquired(&self, _seat: &str) {}
    fn seat_released(&self, _seat: &str) {}
    async fn check_run(&self, _turn_id: &str) {}
    async fn keep_ending(&self, _turn_id: &str, _ending: super::ending::KeptEnding) {}
    async fn answer_resume_failed(&self, _seat: &str, _turn_id: &str, _retry: AnswerRetry) {}
    async fn hand_back_claim(&self, _turn_id: &str, _launch_id: &str) {}
    async fn box_op(&self, provider: &Arc<dyn Provider>, sandbox_id: &str, op: BoxOp) -> BoxReply {
        crate::boxes::run(provider, sandbox_id, op).await
    }
}
