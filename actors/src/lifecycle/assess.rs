//! The collection's pure part: from what a finished job left (its collected evidence, the job
//! as the record names it, the backstop's own note) and the company's model-mismatch policy,
//! whether the job failed, why, the failure's text, and the model receipt (DESIGN §11).
//!
//! No I/O: the collection reads the evidence first, then asks this, then publishes.

use boxfleet_cluster::phase::{FailureReason, ModelReceipt};
use boxfleet_config::providers::MismatchPolicy;

use super::job::StoredJob;
use crate::ports::Collected;

/// What a finished job comes to.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Assessment {
    /// the model asked for against the model the agent CLI's own output says ran
    pub receipt: ModelReceipt,
    /// the mismatch's text, naming both ids, when the receipt is a mismatch
    pub mismatch: Option<String>,
    /// whether the job failed (a job that parked on a question did not, unless the backstop
    /// ended it)
    pub failed: bool,
    /// why it failed beyond its exit status; `None` when it did not fail
    pub reason: Option<FailureReason>,
    /// what went wrong, one piece a line; empty when it did not fail
    pub error_text: String,
}

/// Assesses a finished job. `backstop` is the note the engine's backstop left in the job's
/// directory, when it ended the job.
pub(super) fn assess(
    collected: &Collected,
    job: &StoredJob,
    backstop: Option<&str>,
    policy: MismatchPolicy,
) -> Assessment {
    let receipt = ModelReceipt::new(
        job.model.as_deref(),
        collected.effective_model.as_deref(),
        collected.model_source.as_deref(),
    );
    let mismatch = receipt.mismatch_text();
    let mismatch_fails = mismatch.is_some() && policy == MismatchPolicy::Fail;
    let failed = (!collected.succeeded() || mismatch_fails) && collected.question.is_none();
    let failed = failed || backstop.is_some();
    let reason = if backstop.is_some() {
        Some(FailureReason::Backstop)
    } else if mismatch_fails {
        Some(FailureReason::ModelMismatch)
    } else if !collected.read_errors.is_empty() {
        Some(FailureReason::CollectIncomplete)
    } else {
        None
    };
    let error_text = if failed {
        failure_text(
            collected,
            job,
            backstop,
            mismatch.as_ref().filter(|_| mismatch_fails),
        )
    } else {
        String::new()
    };
    Assessment {
        receipt,
        mismatch,
        failed,
        reason: reason.filter(|_| failed),
        error_text,
    }
}

/// A failed job's text: the mismatch that failed it, every piece that could not be read, what
/// its exit says (the check's own deadline is told apart from the backstop), and the end of
/// its stderr.
fn failure_text(
    collected: &Collected,
    job: &StoredJob,
    backstop: Option<&str>,
    failing_mismatch: Option<&String>,
) -> String {
    let mut parts: Vec<String> = failing_mismatch.into_iter().cloned().collect();
    parts.extend(collected.read_errors.iter().cloned());
    match collected.exit_code {
        Some(124) if job.timeout_seconds.is_some() => parts.push(format!(
            "the check timed out (its in-box deadline of {}s)",
            job.timeout_seconds.unwrap_or_default()
        )),
        Some(code) if code != 0 => parts.push(format!("exited with status {code}")),
        None if backstop.is_some() => parts.extend(backstop.map(str::to_owned)),
        None => parts.push("the job's process group died without an exit status".into()),
        _ => {}
    }
    if !collected.stderr_tail.is_empty() {
        parts.push(collected.stderr_tail.clone());
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{AskedQuestion, JobHandle};
    use boxfleet_cluster::phase::ReceiptStatus;

    fn job(model: Option<&str>, timeout_seconds: Option<u64>) -> StoredJob {
        StoredJob {
            runner: "command".into(),
            handle: JobHandle {
                id: "j".into(),
                dir: "~/.boxfleet/jobs/l".into(),
            },
            command: Some("true".into()),
            timeout_seconds,
            model: model.map(str::to_owned),
            started_at: None,
        }
    }

    fn exited(code: Option<i32>) -> Collected {
        Collected {
            exit_code: code,
            report: "done".into(),
            ..Collected::default()
        }
    }

    #[test]
    fn a_clean_exit_with_everything_read_succeeded() {
        let got = assess(
            &exited(Some(0)),
            &job(None, None),
            None,
            MismatchPolicy::Fail,
        );
        assert_eq!(
            got,
            Assessment {
                receipt: ModelReceipt::new(None, None, None),
                mismatch: None,
                failed: false,
                reason: None,
                error_text: String::new(),
            }
        );
    }

    #[test]
    fn a_non_zero_exit_failed_with_its_status_and_stderr() {
        let mut collected = exited(Some(3));
        collected.stderr_tail = "boom".into();
        let got = assess(&collected, &job(None, None), None, MismatchPolicy::Fail);
        assert!(got.failed);
        assert_eq!(got.reason, None, "the exit says why");
        assert_eq!(got.error_text, "exited with status 3\nboom");
    }

    #[test]
    fn a_group_that_died_without_a_status_says_so() {
        let got = assess(&exited(None), &job(None, None), None, MismatchPolicy::Fail);
        assert!(got.failed);
        assert_eq!(
            got.error_text,
            "the job's process group died without an exit status"
        );
    }

    #[test]
    fn a_piece_that_could_not_be_read_fails_the_job_as_collect_incomplete() {
        let mut collected = exited(Some(0));
        collected.read_errors = vec!["result.json could not be read: EIO".into()];
        let got = assess(&collected, &job(None, None), None, MismatchPolicy::Fail);
        assert!(got.failed);
        assert_eq!(got.reason, Some(FailureReason::CollectIncomplete));
        assert_eq!(got.error_text, "result.json could not be read: EIO");
    }

    #[test]
    fn the_checks_own_deadline_and_the_backstop_are_two_clocks() {
        let own = assess(
            &exited(Some(124)),
            &job(None, Some(30)),
            None,
            MismatchPolicy::Fail,
        );
        assert_eq!(own.reason, None);
        assert_eq!(
            own.error_text,
            "the check timed out (its in-box deadline of 30s)"
        );
        let note = "the engine's backstop ended the job after 170s";
        let backstop = assess(
            &exited(None),
            &job(None, Some(30)),
            Some(note),
            MismatchPolicy::Fail,
        );
        assert!(backstop.failed);
        assert_eq!(backstop.reason, Some(FailureReason::Backstop));
        assert_eq!(backstop.error_text, note);
    }

    #[test]
    fn a_mismatch_fails_under_fail_and_is_recorded_under_record() {
        let mut collected = exited(Some(0));
        collected.effective_model = Some("claude-haiku-4-5".into());
        collected.model_source = Some("stream:assistant".into());
        let asked = job(Some("claude-sonnet-4-5"), None);
        let failed = assess(&collected, &asked, None, MismatchPolicy::Fail);
        assert!(failed.failed);
        assert_eq!(failed.reason, Some(FailureReason::ModelMismatch));
        assert_eq!(failed.receipt.status, ReceiptStatus::Mismatch);
        assert_eq!(
            failed.error_text,
            "model_mismatch: the box ran claude-haiku-4-5 (stream:assistant), not the requested claude-sonnet-4-5"
        );
        let recorded = assess(&collected, &asked, None, MismatchPolicy::Record);
        assert!(!recorded.failed);
        assert_eq!(recorded.reason, None);
        assert_eq!(recorded.receipt.status, ReceiptStatus::Mismatch);
        assert!(recorded.mismatch.is_some(), "still logged");
    }

    /// The model-receipt field report's rows, under both policies: what the box ran, as its
    /// CLI named it, against the model asked for.
    #[test]
    fn each_field_report_row_reads_as_it_was_under_both_policies() {
        let asked = "zai-coding-plan/glm-5.2";
        let rows = [
            // the platform chose the model and the CLI named none
            (None, ReceiptStatus::Unknown),
            // the asked id served through the box's own provider
            (
                Some("openai-compat/zai-coding-plan/glm-5.2"),
                ReceiptStatus::Mismatch,
            ),
            // the platform's default model
            (
                Some("openai-compat/deepseek/deepseek-v4-flash"),
                ReceiptStatus::Mismatch,
            ),
            (Some("zai-coding-plan/glm-5.3"), ReceiptStatus::Mismatch),
            (Some("zai-coding-plan/glm-5.2"), ReceiptStatus::Known),
        ];
        for (ran, status) in rows {
            let mut collected = exited(Some(0));
            collected.effective_model = ran.map(str::to_owned);
            collected.model_source = Some("opencode:session".into());
            for policy in [MismatchPolicy::Fail, MismatchPolicy::Record] {
                let got = assess(&collected, &job(Some(asked), None), None, policy);
                assert_eq!(got.receipt.status, status, "{ran:?} under {policy:?}");
                assert_eq!(got.receipt.requested.as_deref(), Some(asked));
                let fails = status == ReceiptStatus::Mismatch && policy == MismatchPolicy::Fail;
                assert_eq!(got.failed, fails, "{ran:?} under {policy:?}");
                assert_eq!(
                    got.reason,
                    fails.then_some(FailureReason::ModelMismatch),
                    "{ran:?} under {policy:?}"
                );
                assert_eq!(
                    got.mismatch.is_some(),
                    status == ReceiptStatus::Mismatch,
                    "a mismatch is logged under either policy"
                );
            }
        }
    }

    #[test]
    fn a_job_that_asked_a_question_did_not_fail_unless_the_backstop_ended_it() {
        let mut collected = exited(None);
        collected.question = Some(AskedQuestion {
            question: "which db?".into(),
            audience: "requester".into(),
            branch: None,
        });
        let asked = assess(&collected, &job(None, None), None, MismatchPolicy::Fail);
        assert!(!asked.failed);
        assert_eq!(asked.error_text, "");
        let ended = assess(
            &collected,
            &job(None, Some(5)),
            Some("backstop"),
            MismatchPolicy::Fail,
        );
        assert!(ended.failed);
    }
}
