//! The run state machine's decisions, without I/O (DESIGN §6).
//!
//! [`decide`] takes the record as read, the writer's seat lease and one [`Transition`], and
//! returns the next record (or its deletion) plus the effects that must land in the same txn
//! (announcements, ledger spends) — or a [`Refusal`] naming why the transition does not apply.
//! [`crate::runs::Runs`] performs a decision as one fenced compare-and-set. Every transition
//! is decided here and nowhere else; anything unexpected fails closed.
//!
//! The rules that cut across transitions:
//! - a writer must hold the seat's lease (epoch > 0) and that lease must not be older than the
//!   one stamped on the row: a node that lost the seat writes nothing (I9);
//! - once an ending is decided the row takes no write but the ones that finish it (I6);
//! - a claim's own writes (take, hand-back, relaunch, park) carry the claim's lease (I5).

use chrono::{DateTime, Duration, Utc};

use crate::events::{self, Event};
use crate::record::{
    Answer, Charged, Claim, ClaimKind, Ending, EndingReason, HandBack, Question, RunRecord, Status,
    Usage,
};

/// Revivals of one answer before its next dead claim is reaped (sandbox.MaxAnswerRevivals).
pub const MAX_ANSWER_REVIVALS: u32 = 3;
/// The pause TTL when a run names none.
pub const DEFAULT_PAUSE_TTL_SECONDS: u64 = 1800;

/// The seat lease a write is made under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub seat: String,
    /// the seat holder key's create_revision when this node acquired it
    pub epoch: i64,
}

/// Which share of a job's charge a write lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    Seat,
    Company,
}

/// What must hold for an ending to be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndingGuard {
    /// any run not already ending (a reap, an operator, a failed launch)
    Any,
    /// only while the run is still the claim this writer took for `launch_id`
    Claim { launch_id: String },
}

/// One transition of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// Opens the row as `launching`; the seat is busy from this write.
    OpenLaunch { record: Box<RunRecord> },
    /// Names the box and job the launch started.
    AttachBox {
        launch_id: String,
        sandbox_id: String,
        placement: String,
        job: Option<String>,
    },
    /// The unwinding turn writes its conversation: `launching → running`.
    CommitSuspension {
        launch_id: String,
        conversation: Vec<u8>,
    },
    /// At most once per job: `running → resumed` (I2).
    ClaimCompletion { launch_id: String },
    /// Gives a claim back to the status it was taken from.
    HandBackClaim {
        launch_id: String,
        collect_failed: bool,
    },
    /// Lands one share of the job's charge (I3).
    Charge {
        launch_id: String,
        share: Share,
        usage: Usage,
    },
    /// Publishes the job's phase record once (I3).
    PublishPhase {
        launch_id: String,
        phase: serde_json::Value,
    },
    /// Parks the claimed run on its question: `resumed → awaiting_clarification`.
    Park {
        launch_id: String,
        question: Question,
    },
    /// Records the first qualifying reply: `awaiting_clarification | reseed → answered` (I4).
    RecordAnswer { answer: Answer },
    /// Claims an answered run for its resume: `answered → resumed`.
    ClaimAnswer { launch_id: String },
    /// The last moment before the resumed turn runs: the answer is spent (I5).
    Take { launch_id: String },
    /// Gives a dead claim back to its answer, within the revival bounds (I5).
    Revive,
    /// Lets an answer go: declined for this question, its copy owed to the seat (I7).
    LetGo,
    /// Clears copies that were published to the seat's inbox.
    ClearHandBack { delivery_ids: Vec<String> },
    /// Decides how the run ends; the terms never change afterwards (I6).
    DecideEnding {
        reason: EndingReason,
        detail: String,
        guard: EndingGuard,
    },
    /// The box the record names was killed (I8).
    ReleaseBox { sandbox_id: String },
    /// Deletes an ended row: only with its box reclaimed and nothing owed (I7, I8).
    Finish,
    /// The pause TTL passed and the box was killed: parked → re-seed.
    ExpirePause { sandbox_id: String },
    /// The box was paused after collection.
    MarkPaused { sandbox_id: String },
    /// A resumed turn starts another job in the same box: `resumed → launching`.
    Relaunch {
        launch_id: String,
        new_launch_id: String,
        brief: String,
    },
    /// A seat's new holder stamps its lease on the run (the reap's fence), and itself as the
    /// run's owner when it names one.
    FenceRun { owner: Option<String> },
    /// Appends a tool-bridge call to the bounded log.
    AppendBridgeCall { line: String },
}

impl Transition {
    /// The transition's name, for logs and refusals.
    pub fn name(&self) -> &'static str {
        match self {
            Transition::OpenLaunch { .. } => "open_launch",
            Transition::AttachBox { .. } => "attach_box",
            Transition::CommitSuspension { .. } => "commit_suspension",
            Transition::ClaimCompletion { .. } => "claim_completion",
            Transition::HandBackClaim { .. } => "hand_back_claim",
            Transition::Charge { .. } => "charge",
            Transition::PublishPhase { .. } => "publish_phase",
            Transition::Park { .. } => "park",
            Transition::RecordAnswer { .. } => "record_answer",
            Transition::ClaimAnswer { .. } => "claim_answer",
            Transition::Take { .. } => "take",
            Transition::Revive => "revive",
            Transition::LetGo => "let_go",
            Transition::ClearHandBack { .. } => "clear_hand_back",
            Transition::DecideEnding { .. } => "decide_ending",
            Transition::ReleaseBox { .. } => "release_box",
            Transition::Finish => "finish",
            Transition::ExpirePause { .. } => "expire_pause",
            Transition::MarkPaused { .. } => "mark_paused",
            Transition::Relaunch { .. } => "relaunch",
            Transition::FenceRun { .. } => "fence_run",
            Transition::AppendBridgeCall { .. } => "append_bridge_call",
        }
    }
}

/// Why a transition does not apply to the run as read. None of these is a store failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no run record")]
    Missing,
    #[error("the run already exists")]
    Exists,
    #[error("{transition} needs status {expected}, the run is {found}")]
    WrongStatus {
        transition: &'static str,
        expected: &'static str,
        found: Status,
    },
    #[error("{transition} is for job {asked}, the run is on job {current}")]
    WrongLaunch {
        transition: &'static str,
        asked: String,
        current: String,
    },
    #[error("an ending is decided ({0}); the run takes no other write")]
    EndingDecided(EndingReason),
    #[error("sandbox_seat_not_held: no seat lease held")]
    NoLease,
    #[error("sandbox_seat_not_held: the run is fenced by a newer lease ({row} > {writer})")]
    Fenced { row: i64, writer: i64 },
    #[error("the run belongs to seat {0}")]
    WrongSeat(String),
    #[error("the claim was taken under another lease")]
    NotClaimant,
    #[error("the question has no anchor (asked_at)")]
    NoAnchor,
    #[error("the delivery was posted before the question was asked")]
    PostedBeforeQuestion,
    #[error("the delivery was declined for this question")]
    Declined,
    #[error("this delivery's answer is already recorded")]
    AlreadyRecorded,
    #[error("the question is already answered")]
    AlreadyAnswered,
    #[error("a turn took the answer: it is spent")]
    AnswerTaken,
    #[error("no turn took the answer")]
    AnswerNotTaken,
    #[error("the answer's revivals are spent ({lost_claims} lost claims)")]
    RevivalsSpent { lost_claims: u32 },
    #[error("the run still owes the seat a reply copy")]
    OwesHandBack,
    #[error("the box {0} is not reclaimed")]
    BoxNotReclaimed(String),
    #[error("the record names box {found:?}, not {asked}")]
    WrongBox {
        asked: String,
        found: Option<String>,
    },
    #[error("already done for this job")]
    AlreadyDone,
    #[error("the record is not valid: {0}")]
    Invalid(String),
}

/// What must land in the decision's txn besides the record.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Create the event if it is not there yet (I10).
    Announce(Box<Event>),
    /// Record the delivery as worked in the completion ledger.
    Spend { delivery_id: String },
    /// Add the job's usage to the share's spend counters.
    AddSpend { share: Share, usage: Usage },
}

/// The next state of the row.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Write(Box<RunRecord>),
    Delete,
}

/// A decided transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub next: Next,
    pub effects: Vec<Effect>,
}

fn wrong_status(
    transition: &Transition,
    expected: &'static str,
    found: Status,
) -> Result<Decision, Refusal> {
    Err(Refusal::WrongStatus {
        transition: transition.name(),
        expected,
        found,
    })
}

fn same_launch(transition: &Transition, asked: &str, record: &RunRecord) -> Result<(), Refusal> {
    if asked == record.launch_id {
        Ok(())
    } else {
        Err(Refusal::WrongLaunch {
            transition: transition.name(),
            asked: asked.to_owned(),
            current: record.launch_id.clone(),
        })
    }
}

/// The claim this writer holds on the run for `launch_id`, of `kind` when given.
fn own_claim<'r>(
    transition: &Transition,
    record: &'r RunRecord,
    fence: &Fence,
    launch_id: &str,
    kind: Option<ClaimKind>,
) -> Result<&'r Claim, Refusal> {
    if record.status != Status::Resumed {
        return Err(Refusal::WrongStatus {
            transition: transition.name(),
            expected: "resumed",
            found: record.status,
        });
    }
    same_launch(transition, launch_id, record)?;
    let claim = record
        .claim
        .as_ref()
        .ok_or_else(|| Refusal::Invalid("a resumed run carries no claim".into()))?;
    if kind.is_some_and(|kind| kind != claim.kind) || claim.launch_id != launch_id {
        return Err(Refusal::WrongLaunch {
            transition: transition.name(),
            asked: launch_id.to_owned(),
            current: claim.launch_id.clone(),
        });
    }
    if claim.epoch != fence.epoch {
        return Err(Refusal::NotClaimant);
    }
    Ok(claim)
}

fn copy_of(answer: &Answer) -> HandBack {
    HandBack {
        delivery_id: format!(
            "copy-{}",
            events::derive_id(&["hand_back", &answer.delivery_id])
        ),
        original_delivery_id: answer.delivery_id.clone(),
        text: answer.text.clone(),
        from: answer.from.clone(),
        posted_at: answer.posted_at,
        conversation_key: answer.conversation_key.clone(),
        partition: answer.partition.clone(),
    }
}

/// Takes the untaken answer off the run into a copy owed to the seat; a taken one stays spent.
/// Either way its original delivery is recorded as worked.
fn let_answer_go(record: &mut RunRecord, effects: &mut Vec<Effect>) -> bool {
    let Some(answer) = record.answer.take() else {
        return false;
    };
    effects.push(Effect::Spend {
        delivery_id: answer.delivery_id.clone(),
    });
    if answer.taken_at.is_some() {
        return false;
    }
    let copy = copy_of(&answer);
    for id in [&answer.delivery_id, &copy.delivery_id] {
        if !record.declined_answers.contains(id) {
            record.declined_answers.push(id.clone());
        }
    }
    record.hand_back.push(copy);
    true
}

fn started_event(record: &RunRecord, now: DateTime<Utc>) -> Effect {
    Effect::Announce(Box::new(Event::new(
        events::kind::RUN_STARTED,
        &[&record.turn_id, &record.launch_id],
        &record.turn_id,
        &record.launch_id,
        &record.seat,
        now,
        serde_json::json!({
            "coding_agent": record.coding_agent,
            "work_item": record.work_item,
            "task": record.task,
            "iteration": record.iteration,
        }),
    )))
}

/// Decides `transition` on the row as read (`None`: absent) for a writer holding `fence`.
pub fn decide(
    current: Option<&RunRecord>,
    fence: &Fence,
    transition: &Transition,
    now: DateTime<Utc>,
) -> Result<Decision, Refusal> {
    if fence.epoch <= 0 {
        return Err(Refusal::NoLease);
    }
    let Some(current) = current else {
        return open_launch(fence, transition, now);
    };
    if current.seat != fence.seat {
        return Err(Refusal::WrongSeat(current.seat.clone()));
    }
    if current.epoch > fence.epoch {
        return Err(Refusal::Fenced {
            row: current.epoch,
            writer: fence.epoch,
        });
    }
    if let Some(ending) = &current.ending {
        let finishes = matches!(
            transition,
            Transition::ClearHandBack { .. } | Transition::ReleaseBox { .. } | Transition::Finish
        );
        if !finishes {
            return Err(Refusal::EndingDecided(ending.reason));
        }
    }
    let mut next = current.clone();
    next.updated_at = now;
    let mut effects = Vec::new();
    match transition {
        Transition::OpenLaunch { .. } => return Err(Refusal::Exists),

        Transition::AttachBox {
            launch_id,
            sandbox_id,
            placement,
            job,
        } => {
            if current.status != Status::Launching {
                return wrong_status(transition, "launching", current.status);
            }
            same_launch(transition, launch_id, current)?;
            next.sandbox_id = Some(sandbox_id.clone());
            next.placement = Some(placement.clone());
            next.job = job.clone();
        }

        Transition::CommitSuspension {
            launch_id,
            conversation,
        } => {
            if current.status != Status::Launching {
                return wrong_status(transition, "launching", current.status);
            }
            same_launch(transition, launch_id, current)?;
            next.conversation = Some(conversation.clone());
            next.status = Status::Running;
        }

        Transition::ClaimCompletion { launch_id } => {
            if current.status != Status::Running {
                return wrong_status(transition, "running", current.status);
            }
            same_launch(transition, launch_id, current)?;
            next.status = Status::Resumed;
            next.epoch = fence.epoch;
            next.claim = Some(Claim {
                kind: ClaimKind::Completion,
                launch_id: launch_id.clone(),
                from: Status::Running,
                epoch: fence.epoch,
                claimed_at: now,
            });
        }

        Transition::HandBackClaim {
            launch_id,
            collect_failed,
        } => {
            let claim = own_claim(transition, current, fence, launch_id, None)?;
            next.status = claim.from;
            if claim.from == Status::Answered
                && let Some(answer) = next.answer.as_mut()
            {
                answer.taken_at = None;
            }
            next.claim = None;
            if *collect_failed {
                next.collect_failures += 1;
            }
        }

        Transition::Charge {
            launch_id,
            share,
            usage,
        } => {
            own_claim(transition, current, fence, launch_id, None)?;
            let charged = next.charged.get_or_insert_with(|| Charged {
                launch_id: launch_id.clone(),
                ..Charged::default()
            });
            if charged.launch_id != *launch_id {
                *charged = Charged {
                    launch_id: launch_id.clone(),
                    ..Charged::default()
                };
            }
            let landed = match share {
                Share::Seat => &mut charged.seat,
                Share::Company => &mut charged.company,
            };
            if *landed {
                return Err(Refusal::AlreadyDone);
            }
            *landed = true;
            charged.input_tokens = usage.input_tokens;
            charged.output_tokens = usage.output_tokens;
            charged.cost_micros = usage.cost_micros;
            effects.push(Effect::AddSpend {
                share: *share,
                usage: *usage,
            });
        }

        Transition::PublishPhase { launch_id, phase } => {
            own_claim(transition, current, fence, launch_id, None)?;
            if current.phase_published.as_deref() == Some(launch_id) {
                return Err(Refusal::AlreadyDone);
            }
            next.phase_published = Some(launch_id.clone());
            effects.push(Effect::Announce(Box::new(Event::new(
                events::kind::PHASE_COMPLETED,
                &[&current.turn_id, launch_id],
                &current.turn_id,
                launch_id,
                &current.seat,
                now,
                serde_json::json!({ "phase": "sandbox", "record": phase }),
            ))));
        }

        Transition::Park {
            launch_id,
            question,
        } => {
            own_claim(
                transition,
                current,
                fence,
                launch_id,
                Some(ClaimKind::Completion),
            )?;
            next.status = Status::AwaitingClarification;
            next.claim = None;
            next.answer = None;
            next.question = Some(question.clone());
            effects.push(Effect::Announce(Box::new(Event::new(
                events::kind::CLARIFICATION_REQUESTED,
                &[&current.turn_id, launch_id, &question.asked_at.to_rfc3339()],
                &current.turn_id,
                launch_id,
                &current.seat,
                now,
                serde_json::json!({
                    "question": question.text,
                    "audience": question.audience,
                    "audience_handles": question.audience_handles,
                    "audience_fallback": question.audience_fallback,
                    "conversation_key": current.conversation_key,
                    "work_item": current.work_item,
                    "branch": question.branch,
                }),
            ))));
        }

        Transition::RecordAnswer { answer } => {
            match current.status {
                Status::AwaitingClarification | Status::Reseed => {}
                Status::Answered | Status::Resumed
                    if current
                        .answer
                        .as_ref()
                        .is_some_and(|a| a.delivery_id == answer.delivery_id) =>
                {
                    return Err(Refusal::AlreadyRecorded);
                }
                Status::Answered => return Err(Refusal::AlreadyAnswered),
                found => return wrong_status(transition, "awaiting_clarification", found),
            }
            let question = current.question.as_ref().ok_or(Refusal::NoAnchor)?;
            if answer.posted_at < question.asked_at {
                return Err(Refusal::PostedBeforeQuestion);
            }
            if current.declined_answers.contains(&answer.delivery_id) {
                return Err(Refusal::Declined);
            }
            let mut answer = answer.clone();
            answer.recorded_at = now;
            answer.taken_at = None;
            next.answer = Some(answer);
            next.status = Status::Answered;
            next.epoch = fence.epoch;
        }

        Transition::ClaimAnswer { launch_id } => {
            if current.status != Status::Answered {
                return wrong_status(transition, "answered", current.status);
            }
            same_launch(transition, launch_id, current)?;
            let answer = next
                .answer
                .as_mut()
                .ok_or_else(|| Refusal::Invalid("an answered run carries no answer".into()))?;
            answer.attempts += 1;
            next.status = Status::Resumed;
            next.epoch = fence.epoch;
            next.claim = Some(Claim {
                kind: ClaimKind::Answer,
                launch_id: launch_id.clone(),
                from: Status::Answered,
                epoch: fence.epoch,
                claimed_at: now,
            });
        }

        Transition::Take { launch_id } => {
            own_claim(
                transition,
                current,
                fence,
                launch_id,
                Some(ClaimKind::Answer),
            )?;
            let answer = next
                .answer
                .as_mut()
                .ok_or_else(|| Refusal::Invalid("an answer's claim carries no answer".into()))?;
            if answer.taken_at.is_some() {
                return Err(Refusal::AnswerTaken);
            }
            answer.taken_at = Some(now);
            effects.push(Effect::Spend {
                delivery_id: answer.delivery_id.clone(),
            });
        }

        Transition::Revive => {
            if current.status != Status::Resumed {
                return wrong_status(transition, "resumed", current.status);
            }
            let claim = current
                .claim
                .as_ref()
                .ok_or_else(|| Refusal::Invalid("a resumed run carries no claim".into()))?;
            if claim.kind != ClaimKind::Answer {
                return Err(Refusal::WrongStatus {
                    transition: transition.name(),
                    expected: "resumed for an answer",
                    found: current.status,
                });
            }
            let pause_ttl = current
                .pause_ttl_seconds
                .unwrap_or(DEFAULT_PAUSE_TTL_SECONDS);
            let answer = next
                .answer
                .as_mut()
                .ok_or_else(|| Refusal::Invalid("an answer's claim carries no answer".into()))?;
            if answer.taken_at.is_some() {
                return Err(Refusal::AnswerTaken);
            }
            let window_passed = answer.first_lost_at.is_some_and(|first| {
                now.signed_duration_since(first) >= Duration::seconds(pause_ttl as i64)
            });
            if answer.lost_claims >= MAX_ANSWER_REVIVALS || window_passed {
                return Err(Refusal::RevivalsSpent {
                    lost_claims: answer.lost_claims,
                });
            }
            answer.lost_claims += 1;
            answer.first_lost_at.get_or_insert(now);
            next.status = Status::Answered;
            next.claim = None;
            next.epoch = fence.epoch;
        }

        Transition::LetGo => {
            if current.status != Status::Answered {
                return wrong_status(transition, "answered", current.status);
            }
            if !current.hand_back.is_empty() {
                return Err(Refusal::OwesHandBack);
            }
            if current.answer_taken() {
                return Err(Refusal::AnswerTaken);
            }
            let_answer_go(&mut next, &mut effects);
            next.status = next.parked_status();
        }

        Transition::ClearHandBack { delivery_ids } => {
            next.hand_back
                .retain(|copy| !delivery_ids.contains(&copy.delivery_id));
            if next.hand_back.len() == current.hand_back.len() {
                return Err(Refusal::AlreadyDone);
            }
        }

        Transition::DecideEnding {
            reason,
            detail,
            guard,
        } => {
            if let EndingGuard::Claim { launch_id } = guard {
                own_claim(transition, current, fence, launch_id, None)?;
            }
            let reply_goes_back = let_answer_go(&mut next, &mut effects);
            let mut ending = Ending {
                reason: *reason,
                detail: detail.clone(),
                decided_at: now,
                epoch: fence.epoch,
                event_id: String::new(),
                reply_goes_back,
            };
            if reason.is_failure() {
                let event = Event::new(
                    events::kind::RUN_FAILED,
                    &[&current.turn_id, reason.as_str(), &now.to_rfc3339()],
                    &current.turn_id,
                    &current.launch_id,
                    &current.seat,
                    now,
                    serde_json::json!({
                        "reason": reason.as_str(),
                        "detail": detail,
                        "reply_went_back": reply_goes_back,
                        "sandbox_id": current.sandbox_id,
                    }),
                );
                ending.event_id = event.id.clone();
                effects.push(Effect::Announce(Box::new(event)));
            }
            next.status = Status::Ending;
            next.epoch = fence.epoch;
            next.ending = Some(ending);
        }

        Transition::ReleaseBox { sandbox_id } => {
            if current.status != Status::Ending {
                return wrong_status(transition, "ending", current.status);
            }
            match &current.sandbox_id {
                None => return Err(Refusal::AlreadyDone),
                Some(id) if id != sandbox_id => {
                    return Err(Refusal::WrongBox {
                        asked: sandbox_id.clone(),
                        found: current.sandbox_id.clone(),
                    });
                }
                Some(_) => {}
            }
            next.sandbox_id = None;
            next.job = None;
            next.paused_at = None;
        }

        Transition::Finish => {
            if current.status != Status::Ending {
                return wrong_status(transition, "ending", current.status);
            }
            if !current.hand_back.is_empty() {
                return Err(Refusal::OwesHandBack);
            }
            if let Some(id) = &current.sandbox_id {
                return Err(Refusal::BoxNotReclaimed(id.clone()));
            }
            return Ok(Decision {
                next: Next::Delete,
                effects,
            });
        }

        Transition::ExpirePause { sandbox_id } => {
            if !matches!(
                current.status,
                Status::AwaitingClarification | Status::Answered
            ) {
                return wrong_status(transition, "awaiting_clarification", current.status);
            }
            if current.sandbox_id.as_deref() != Some(sandbox_id) {
                return Err(Refusal::WrongBox {
                    asked: sandbox_id.clone(),
                    found: current.sandbox_id.clone(),
                });
            }
            // the job's description (runner, command) stays: the re-seed relaunches it
            next.sandbox_id = None;
            next.paused_at = None;
            if current.status == Status::AwaitingClarification {
                next.status = Status::Reseed;
            }
        }

        Transition::MarkPaused { sandbox_id } => {
            if !matches!(
                current.status,
                Status::Resumed | Status::AwaitingClarification | Status::Answered
            ) {
                return wrong_status(transition, "resumed", current.status);
            }
            if current.sandbox_id.as_deref() != Some(sandbox_id) {
                return Err(Refusal::WrongBox {
                    asked: sandbox_id.clone(),
                    found: current.sandbox_id.clone(),
                });
            }
            next.paused_at = Some(now);
        }

        Transition::Relaunch {
            launch_id,
            new_launch_id,
            brief,
        } => {
            let claim = own_claim(transition, current, fence, launch_id, None)?;
            if claim.kind == ClaimKind::Answer && !current.answer_taken() {
                return Err(Refusal::AnswerNotTaken);
            }
            if new_launch_id == launch_id {
                return Err(Refusal::Invalid("a relaunch needs a new launch id".into()));
            }
            next.status = Status::Launching;
            next.launch_id = new_launch_id.clone();
            next.iteration += 1;
            next.brief = brief.clone();
            next.claim = None;
            next.question = None;
            next.answer = None;
            next.declined_answers.clear();
            next.conversation = None;
            next.charged = None;
            next.phase_published = None;
            next.paused_at = None;
            next.collect_failures = 0;
            next.model = None;
            effects.push(started_event(&next, now));
        }

        Transition::FenceRun { owner } => {
            if current.epoch == fence.epoch {
                return Err(Refusal::AlreadyDone);
            }
            next.epoch = fence.epoch;
            if let Some(owner) = owner {
                next.owner = Some(owner.clone());
            }
        }

        Transition::AppendBridgeCall { line } => {
            use crate::record::{BRIDGE_LOG_HEAD, BRIDGE_LOG_TAIL};
            next.bridge_calls.push(line.clone());
            if next.bridge_calls.len() > BRIDGE_LOG_HEAD + BRIDGE_LOG_TAIL {
                next.bridge_calls.remove(BRIDGE_LOG_HEAD);
                next.bridge_calls_elided += 1;
            }
        }
    }
    Ok(Decision {
        next: Next::Write(Box::new(next)),
        effects,
    })
}

fn open_launch(
    fence: &Fence,
    transition: &Transition,
    now: DateTime<Utc>,
) -> Result<Decision, Refusal> {
    let Transition::OpenLaunch { record } = transition else {
        return Err(Refusal::Missing);
    };
    if record.status != Status::Launching {
        return Err(Refusal::Invalid(format!(
            "a launch opens its row as launching, not {}",
            record.status
        )));
    }
    if record.seat != fence.seat {
        return Err(Refusal::WrongSeat(record.seat.clone()));
    }
    let mut record = record.as_ref().clone();
    record.epoch = fence.epoch;
    record.created_at = now;
    record.updated_at = now;
    let effects = vec![started_event(&record, now)];
    Ok(Decision {
        next: Next::Write(Box::new(record)),
        effects,
    })
}

/// The record-level invariants every stored row satisfies; the property tests check them
/// after every step.
pub fn check_record(record: &RunRecord) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{} ({}): {what}", record.turn_id, record.status));
    match record.status {
        Status::Launching if record.claim.is_some() => return fail("launching with a claim"),
        Status::Resumed if record.claim.is_none() => return fail("resumed without a claim"),
        Status::Answered if record.answer.is_none() => return fail("answered without an answer"),
        Status::Ending if record.ending.is_none() => return fail("ending without terms"),
        Status::AwaitingClarification | Status::Reseed if record.question.is_none() => {
            return fail("parked without a question");
        }
        Status::AwaitingClarification | Status::Reseed if record.answer.is_some() => {
            return fail("parked while holding an answer");
        }
        _ => {}
    }
    if record.status != Status::Ending && record.ending.is_some() {
        return fail("ending terms on a run that is not ending");
    }
    if record.status == Status::Reseed && record.sandbox_id.is_some() {
        return fail("re-seed still naming a box");
    }
    if let Some(claim) = &record.claim
        && claim.epoch > record.epoch
    {
        return fail("a claim under a lease newer than the row's");
    }
    Ok(())
}
