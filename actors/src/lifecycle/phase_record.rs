//! The phase record a collection publishes (the spec's `agent_phase_completed{phase: sandbox,
//! backend: sandbox}`, lines 275–288): what the runner collected, redacted whole and held to
//! its bounds, assessed, and written as one [`PhaseRecord`]. No I/O: the collection reads the
//! evidence and charges, then asks this.
//!
//! [`record_for`] is the same path end to end for a collection read elsewhere (the per-runner
//! golden tests), so what they pin is what a node publishes.

use boxfleet_cluster::phase::{FailureReason, PhaseRecord};
use boxfleet_cluster::record::{RunRecord, Usage};
use boxfleet_config::providers::MismatchPolicy;
use chrono::{DateTime, Utc};

use super::assess::{Assessment, assess};
use super::bounds::{self, Unaskable};
use super::job::StoredJob;
use super::limits::MAX_REPORT_BYTES;
use crate::ports::Collected;

/// What the bounds left out of a collection (the record's `*_elided` fields), and a question
/// that could not be asked as it was written.
#[derive(Debug, Default)]
pub(super) struct Elided {
    pub refs: u64,
    pub transcript_lines: u64,
    pub transcript_bytes: u64,
    pub unaskable: Option<Unaskable>,
}

/// The notes the engine left in a job's directory when it ended the job itself.
#[derive(Debug, Default)]
pub(super) struct EngineNotes {
    /// the backstop's: it ended a job past its in-box deadline
    pub backstop: Option<String>,
    /// the disk watchdog's: it ended a job over its disk budget
    pub disk_budget: Option<String>,
}

/// The job assessed (`assess`), then what the bounds and the engine's own notes add: a
/// question that could not be put to anyone, and the disk watchdog's ending, each fail it.
pub(super) fn assess_evidence(
    collected: &Collected,
    job: &StoredJob,
    notes: &EngineNotes,
    elided: &Elided,
    policy: MismatchPolicy,
) -> Assessment {
    let mut assessment = assess(collected, job, notes.backstop.as_deref(), policy);
    if let Some(Unaskable(why)) = &elided.unaskable {
        // the question could not be put to anyone: the run resumes as not succeeded
        assessment.failed = true;
        assessment.error_text = if assessment.error_text.is_empty() {
            why.clone()
        } else {
            format!("{why}\n{}", assessment.error_text)
        };
    }
    if let Some(why) = &notes.disk_budget {
        assessment.failed = true;
        assessment.reason = Some(FailureReason::DiskBudget);
        assessment.error_text = format!("{why}\n{}", assessment.error_text);
    }
    assessment
}

/// What a collection charges: the job's tokens and its price, as its CLI reported them.
pub(super) fn usage_of(collected: &Collected) -> Usage {
    Usage {
        input_tokens: collected.input_tokens,
        output_tokens: collected.output_tokens,
        cache_read_tokens: collected.cache_read_tokens,
        cache_write_tokens: collected.cache_write_tokens,
        cost_micros: collected.cost_micros,
    }
}

/// The job's phase record, collected `now`: timed from when the store named the job (its
/// launch or the relaunch that answered or re-seeded it), priced only where its CLI said.
pub(super) fn phase_record(
    run: &RunRecord,
    collected: &Collected,
    elided: &Elided,
    assessment: &Assessment,
    usage: Usage,
    sandbox_id: &str,
    now: DateTime<Utc>,
) -> PhaseRecord {
    let started_at = run.launched_at.unwrap_or(run.created_at);
    PhaseRecord {
        turn_id: run.turn_id.clone(),
        iteration: run.iteration,
        launch_id: run.launch_id.clone(),
        started_at: Some(started_at),
        duration_ms: (now - started_at).num_milliseconds().max(0),
        job_runtime_ms: collected
            .job_started_ms
            .zip(collected.job_ended_ms)
            .map(|(started, ended)| ended - started),
        collect_lag_ms: collected
            .job_ended_ms
            .map(|ended| (now.timestamp_millis() - ended).max(0)),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        total_tokens: usage.input_tokens + usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        cost_usd: collected
            .cost_reported
            .then(|| usage.cost_micros as f64 / 1e6),
        model: assessment.receipt.clone(),
        coding_agent: run.coding_agent.clone(),
        sandbox_id: sandbox_id.to_owned(),
        session_id: collected.session_id.clone(),
        response: collected.report.clone(),
        delivered_refs: collected.delivered_refs.clone(),
        activity_transcript: collected.transcript.clone(),
        delivered_refs_elided: elided.refs,
        activity_transcript_elided_lines: elided.transcript_lines,
        activity_transcript_elided_bytes: elided.transcript_bytes,
        failed: assessment.failed,
        reason: assessment.reason,
        error: if assessment.failed {
            bounds::failure(
                &boxfleet_redact::redact(&assessment.error_text),
                MAX_REPORT_BYTES,
            )
        } else {
            String::new()
        },
        exit_code: collected.exit_code,
        notes: collected.question.as_ref().map(|q| q.question.clone()),
        work_item: run.work_item.clone(),
        work_key: run.partition.clone(),
        conversation_key: run.conversation_key.clone(),
    }
}

/// The phase record a node would publish for `collected`, read from the job `run` names and
/// collected `now`: redacted, bounded, assessed under `policy` and written as a collection
/// writes it (no condensation: that needs the seat's model). For the per-runner golden tests.
pub fn record_for(
    run: &RunRecord,
    collected: Collected,
    policy: MismatchPolicy,
    now: DateTime<Utc>,
) -> Option<PhaseRecord> {
    let job = StoredJob::of(run)?;
    let (collected, elided) = bound_collected(redact_collected(collected));
    let mut assessment =
        assess_evidence(&collected, &job, &EngineNotes::default(), &elided, policy);
    assessment.error_text = bounds::failure(&assessment.error_text, MAX_REPORT_BYTES);
    let usage = usage_of(&collected);
    let sandbox_id = run.sandbox_id.clone().unwrap_or_default();
    Some(phase_record(
        run,
        &collected,
        &elided,
        &assessment,
        usage,
        &sandbox_id,
        now,
    ))
}

/// The job a golden test's record names: what a launch of `runner` writes onto its row.
pub fn job_json(runner: &str, model: Option<&str>, dir: &str) -> String {
    StoredJob {
        runner: runner.to_owned(),
        handle: crate::ports::JobHandle {
            id: "job".into(),
            dir: dir.to_owned(),
        },
        command: None,
        timeout_seconds: None,
        model: model.map(str::to_owned),
        started_at: None,
    }
    .to_json()
}

/// Everything a collection read, held to its bounds ([`bounds`]): the report, the transcript,
/// the refs and the question. A question that cannot be asked is taken off the collection.
pub(super) fn bound_collected(mut collected: Collected) -> (Collected, Elided) {
    let mut elided = Elided::default();
    let transcript = bounds::transcript(std::mem::take(&mut collected.transcript));
    collected.transcript = transcript.lines;
    elided.transcript_lines = transcript.elided_lines;
    elided.transcript_bytes = transcript.elided_bytes;
    let (refs, refs_elided) = bounds::delivered_refs(std::mem::take(&mut collected.delivered_refs));
    collected.delivered_refs = refs;
    elided.refs = refs_elided;
    // never dropped unsaid: the resumed executor reads the count beside the report, inside
    // the report's bound
    let refs_note = (refs_elided > 0).then(|| {
        format!(
            "\n[… {refs_elided} more delivered refs are not listed: the record lists them up to 16 KiB]"
        )
    });
    let room = MAX_REPORT_BYTES - refs_note.as_ref().map_or(0, String::len);
    collected.report = bounds::from_start(&collected.report, room);
    if let Some(note) = refs_note {
        collected.report.push_str(&note);
    }
    if let Some(asked) = collected.question.take() {
        match bounds::question(&asked.question, &asked.audience) {
            Ok(question) => {
                collected.question = Some(crate::ports::AskedQuestion { question, ..asked });
            }
            Err(unaskable) => elided.unaskable = Some(unaskable),
        }
    }
    (collected, elided)
}

/// Everything a runner collected, redacted whole once more. A transcript is redacted as one
/// text, so a key split over its lines reads as the block it is; what the runner already
/// redacted comes through unchanged.
pub(super) fn redact_collected(mut collected: Collected) -> Collected {
    use boxfleet_redact::redact;
    collected.report = redact(&collected.report);
    if !collected.transcript.is_empty() {
        let whole = redact(&collected.transcript.join("\n"));
        collected.transcript = whole.split('\n').map(str::to_owned).collect();
    }
    for piece in collected
        .delivered_refs
        .iter_mut()
        .chain(collected.read_errors.iter_mut())
    {
        *piece = redact(piece);
    }
    collected.stderr_tail = redact(&collected.stderr_tail);
    if let Some(asked) = collected.question.as_mut() {
        asked.question = redact(&asked.question);
        if let Some(branch) = asked.branch.as_mut() {
            *branch = redact(branch);
        }
    }
    collected
}
