//! What `status` (per phase) and `run --json` (for the last attempt) say about a phase's
//! verification, from the number of checks the plan names and what the phase's latest
//! committed outcome recorded.

use serde::Serialize;

use super::{CheckRecord, FailedCheck, Verification};
use crate::units;

/// The verdict in one word (the `result` of the JSON forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum VerificationResult {
    /// Every check passed: the completion was accepted.
    Passed,
    /// A check failed: the attempt is `verification-failed`.
    Failed,
    /// `--no-verify`: no check ran and the completion was accepted.
    Skipped,
    /// The checks were running when the attempt was stopped (a signal, or the runner's own
    /// failure to record their output): no verdict.
    Stopped,
    /// The phase has checks, but its latest attempt did not reach them (it did not report
    /// completion, or there is no attempt yet).
    NotRun,
    /// The phase names no check.
    NotConfigured,
    /// Neither the plan nor the latest outcome record can say (one of them is unreadable).
    Unknown,
}

/// A phase's verification as `status --json` and `run --json` report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct VerificationReport {
    pub result: VerificationResult,
    /// How many checks the plan's Verify section names; `None` when the plan is unreadable.
    pub configured: Option<usize>,
    /// The checks the latest attempt ran, in order (the failing or stopped one last).
    pub checks: Vec<CheckRecord>,
    /// The check that failed, with the tail of its output.
    pub failed_check: Option<FailedCheck>,
}

impl VerificationReport {
    /// The report for a phase with `configured` checks (`None`: the plan is unreadable) whose
    /// latest committed attempt recorded `verification` (`None` when no attempt was committed
    /// or it recorded none; read with [`Verification::read`]).
    pub(crate) fn of(configured: Option<usize>, latest: Option<Verification>) -> Self {
        let report = |result, checks, failed_check| Self {
            result,
            configured,
            checks,
            failed_check,
        };
        match latest {
            Some(Verification::Failed { checks, failure }) => {
                report(VerificationResult::Failed, checks, Some(failure))
            }
            Some(Verification::Skipped) => report(VerificationResult::Skipped, Vec::new(), None),
            Some(Verification::Passed(checks)) => report(VerificationResult::Passed, checks, None),
            Some(Verification::Stopped(checks)) => {
                report(VerificationResult::Stopped, checks, None)
            }
            None => {
                let result = match configured {
                    Some(0) => VerificationResult::NotConfigured,
                    Some(_) => VerificationResult::NotRun,
                    None => VerificationResult::Unknown,
                };
                report(result, Vec::new(), None)
            }
        }
    }

    /// The report when the latest outcome record cannot be read.
    pub(crate) fn unknown(configured: Option<usize>) -> Self {
        Self {
            result: VerificationResult::Unknown,
            ..Self::of(configured, None)
        }
    }

    /// In words, for `status`: `passed (2 checks)`, `failed: verify check 2 (cargo test)
    /// exited with code 101`, `skipped (--no-verify)`, `stopped during verify check 1`,
    /// `not run (1 check)`, `not configured`, `unknown`.
    pub(crate) fn describe(&self) -> String {
        let count = |count| units::count(count, "check");
        match self.result {
            VerificationResult::Passed => format!("passed ({})", count(self.checks.len())),
            VerificationResult::Failed => match &self.failed_check {
                Some(failure) => format!("failed: {}", failure.describe()),
                None => "failed".to_owned(),
            },
            VerificationResult::Skipped => "skipped (--no-verify)".to_owned(),
            VerificationResult::Stopped => match self.checks.last() {
                Some(check) => format!(
                    "stopped during verify check {} ({})",
                    check.index, check.command_first_line
                ),
                None => "stopped".to_owned(),
            },
            VerificationResult::NotRun => match self.configured {
                Some(configured) => format!("not run ({})", count(configured)),
                None => "not run".to_owned(),
            },
            VerificationResult::NotConfigured => "not configured".to_owned(),
            VerificationResult::Unknown => "unknown".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: usize, exit_code: Option<i32>) -> CheckRecord {
        CheckRecord {
            index,
            command_first_line: format!("check {index}"),
            exit_code,
            duration_ms: 1,
            output_bytes: 2,
        }
    }

    fn failure() -> FailedCheck {
        FailedCheck {
            index: 2,
            command_first_line: "check 2".into(),
            exit_code: Some(101),
            signal: None,
            timed_out: false,
            output_tail: "boom".into(),
        }
    }

    #[test]
    fn each_recorded_verification_has_its_verdict() {
        let passed = VerificationReport::of(
            Some(2),
            Some(Verification::Passed(vec![
                record(1, Some(0)),
                record(2, Some(0)),
            ])),
        );
        assert_eq!(passed.result, VerificationResult::Passed);
        assert_eq!(passed.describe(), "passed (2 checks)");
        let failed = VerificationReport::of(
            Some(2),
            Some(Verification::Failed {
                checks: vec![record(1, Some(0)), record(2, Some(101))],
                failure: failure(),
            }),
        );
        assert_eq!(failed.result, VerificationResult::Failed);
        assert_eq!(
            failed.describe(),
            "failed: verify check 2 (check 2) exited with code 101"
        );
        assert_eq!(failed.failed_check, Some(failure()));
        let skipped = VerificationReport::of(Some(2), Some(Verification::Skipped));
        assert_eq!(skipped.describe(), "skipped (--no-verify)");
        let stopped =
            VerificationReport::of(Some(2), Some(Verification::Stopped(vec![record(1, None)])));
        assert_eq!(stopped.result, VerificationResult::Stopped);
        assert_eq!(
            stopped.describe(),
            "stopped during verify check 1 (check 1)"
        );
    }

    #[test]
    fn without_a_record_the_plan_decides() {
        assert_eq!(
            VerificationReport::of(Some(1), None).describe(),
            "not run (1 check)"
        );
        assert_eq!(
            VerificationReport::of(Some(3), None).describe(),
            "not run (3 checks)"
        );
        assert_eq!(
            VerificationReport::of(Some(0), None).result,
            VerificationResult::NotConfigured
        );
        assert_eq!(
            VerificationReport::of(None, None).result,
            VerificationResult::Unknown
        );
        assert_eq!(VerificationReport::unknown(Some(2)).describe(), "unknown");
    }

    #[test]
    fn the_json_form_names_the_result_in_kebab_case() {
        let value = serde_json::to_value(VerificationReport::of(Some(1), None)).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"result": "not-run", "configured": 1, "checks": [], "failed_check": null})
        );
    }
}
