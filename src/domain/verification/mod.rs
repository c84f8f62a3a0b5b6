//! Verification gates (docs/plan-format.md, "Verify"): the checks a phase names, which must
//! pass before its `phase-complete` is accepted — how each is run as an argv, what a run of
//! them comes to, and its record in the outcome (read strictly). Finding the section is
//! [`crate::domain::plan`]'s; running a check process is `platform::verify_check`'s.

use serde::de::{self, Deserializer, SeqAccess, Unexpected, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use strum::{EnumIter, EnumString, IntoStaticStr, VariantNames};

use super::decision::{StopCause, signal_name};
use super::state::AttemptStatus;
use super::status_text::first_chars;
use super::strict_json::positive;

/// The interpreters an info string may name, by that name (`python3`). An empty info string
/// is `/bin/sh -e`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames, EnumIter)]
#[strum(serialize_all = "lowercase")]
pub enum Interpreter {
    Sh,
    Bash,
    Dash,
    Zsh,
    Ksh,
    Python3,
    Python,
    Perl,
    Ruby,
    Node,
}

impl Interpreter {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The interpreter of a fence's info string: its first word, or `sh` when it is empty.
    pub fn from_info(info: &str) -> Result<Self, UnknownInterpreter> {
        let word = info.split_whitespace().next().unwrap_or("sh");
        word.parse()
            .map_err(|_| UnknownInterpreter(word.to_owned()))
    }

    /// The program `exec` runs: `/bin/sh` itself for `sh`, else the name, looked up in `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Self::Sh => "/bin/sh",
            other => other.name(),
        }
    }

    /// The argv that runs `script` as check `index`: a shell with `-e` (stop at the first
    /// failing command) and `$0` set to `verify-<index>`, so its messages say which check;
    /// the other interpreters with their inline-script flag.
    pub fn argv(self, script: &str, index: usize) -> Vec<String> {
        let (flags, dollar_zero): (&[&str], _) = match self {
            Self::Sh | Self::Bash | Self::Dash | Self::Zsh | Self::Ksh => {
                (&["-e", "-c"], Some(format!("verify-{index}")))
            }
            Self::Python3 | Self::Python => (&["-c"], None),
            Self::Perl | Self::Ruby | Self::Node => (&["-e"], None),
        };
        let mut argv = vec![self.program().to_owned()];
        argv.extend(flags.iter().map(|flag| (*flag).to_owned()));
        argv.push(script.to_owned());
        argv.extend(dollar_zero);
        argv
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown verify interpreter '{0}' in the fence's info string; use one of {known}, or no info string for /bin/sh -e",
    known = Interpreter::VARIANTS.join(", ")
)]
pub struct UnknownInterpreter(pub String);

/// The largest script a check block may hold: it is passed as one argument, which Linux
/// limits to 128 KiB.
pub(crate) const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// How much of a check's first line reports show.
const FIRST_LINE_CHARS: usize = 120;

/// One check of a phase's `### Verify` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyCheck {
    /// 1-based, in section order.
    pub index: usize,
    pub interpreter: Interpreter,
    /// The block's lines without the fence's own indentation, ending in `\n`; never blank.
    pub script: String,
    /// The plan line of the opening fence.
    pub line: usize,
}

impl VerifyCheck {
    /// Its first non-blank line, trimmed, cut to [`FIRST_LINE_CHARS`] characters (`…` marks
    /// a cut): what `--- verify N: <first line> ---` and `command_first_line` show.
    pub fn first_line(&self) -> String {
        let line = self
            .script
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or_default();
        first_chars(line, FIRST_LINE_CHARS)
    }

    pub fn argv(&self) -> Vec<String> {
        self.interpreter.argv(&self.script, self.index)
    }

    /// The transcript header before its output: `--- verify 2: cargo test ---`.
    pub fn transcript_header(&self) -> String {
        format!("--- verify {}: {} ---", self.index, self.first_line())
    }
}

/// How many lines of a failed check's output its report and the next prompt show, and how
/// many bytes [`OutputTail`] keeps to find them in (memory does not grow with the output).
pub(crate) const TAIL_LINES: usize = 40;
pub(crate) const TAIL_BYTES: usize = 16 * 1024;
/// How many characters of a line cut at the front the tail shows when it is the only line
/// kept (output with no newline in its last [`TAIL_BYTES`]).
pub(crate) const PARTIAL_LINE_CHARS: usize = 1024;

/// The last [`TAIL_BYTES`] of a check's output, both streams in arrival order.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutputTail {
    kept: Vec<u8>,
    /// Output was dropped from the front: the first kept line may be partial.
    cut: bool,
}

impl OutputTail {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= TAIL_BYTES {
            self.kept.clear();
            self.kept
                .extend_from_slice(&chunk[chunk.len() - TAIL_BYTES..]);
            self.cut = true;
            return;
        }
        let overflow = (self.kept.len() + chunk.len()).saturating_sub(TAIL_BYTES);
        if overflow > 0 {
            self.kept.drain(..overflow);
            self.cut = true;
        }
        self.kept.extend_from_slice(chunk);
    }

    /// The last [`TAIL_LINES`] complete or final lines, as text (invalid UTF-8 replaced),
    /// without a trailing newline; a line cut at the front of what was kept is left out —
    /// unless it is the only one: then its last [`PARTIAL_LINE_CHARS`] characters, after `…`.
    pub(crate) fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.kept);
        let mut lines: Vec<&str> = text.lines().collect();
        if self.cut && lines.len() == 1 {
            let line = lines[0];
            let skip = line.chars().count().saturating_sub(PARTIAL_LINE_CHARS);
            return format!("…{}", line.chars().skip(skip).collect::<String>());
        }
        if self.cut && !lines.is_empty() {
            lines.remove(0);
        }
        let from = lines.len().saturating_sub(TAIL_LINES);
        lines[from..].join("\n")
    }
}

/// One check as the outcome records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRecord {
    #[serde(deserialize_with = "positive")]
    pub index: usize,
    pub command_first_line: String,
    /// `None` when it was killed (a timeout, a signal).
    #[serde(deserialize_with = "Option::deserialize")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub output_bytes: u64,
}

/// The check that failed, with what the next attempt and the report need.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedCheck {
    #[serde(deserialize_with = "positive")]
    pub index: usize,
    pub command_first_line: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub exit_code: Option<i32>,
    /// After a timeout, the runner's.
    #[serde(deserialize_with = "Option::deserialize")]
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// [`OutputTail::text`]; may be empty.
    pub output_tail: String,
}

impl FailedCheck {
    /// `verify check 2 (cargo test) exited with code 101`, `… timed out and was stopped`,
    /// `… was killed by SIGKILL`.
    pub fn describe(&self) -> String {
        format!(
            "verify check {} ({}) {}",
            self.index,
            self.command_first_line,
            self.how()
        )
    }

    pub fn how(&self) -> String {
        ended_how(self.timed_out, self.exit_code, self.signal)
    }
}

/// How one check's run ended, as its runner reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CheckOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Both streams.
    pub output_bytes: u64,
    pub output_tail: String,
}

impl CheckOutcome {
    /// Exited 0 within its limit.
    pub(crate) fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// A check that could not be started (its interpreter vanished since the run was
    /// checked, the system is out of processes): it fails, and `reason` is all the output it
    /// has, so the report and the next prompt say why.
    pub(crate) fn unstarted(reason: String) -> Self {
        Self {
            output_tail: reason,
            ..Self::default()
        }
    }

    pub(crate) fn record(&self, check: &VerifyCheck) -> CheckRecord {
        CheckRecord {
            index: check.index,
            command_first_line: check.first_line(),
            exit_code: self.exit_code,
            duration_ms: self.duration_ms,
            output_bytes: self.output_bytes,
        }
    }

    pub(crate) fn failure(&self, check: &VerifyCheck) -> Option<FailedCheck> {
        (!self.passed()).then(|| FailedCheck {
            index: check.index,
            command_first_line: check.first_line(),
            exit_code: self.exit_code,
            signal: self.signal,
            timed_out: self.timed_out,
            output_tail: self.output_tail.clone(),
        })
    }

    /// `exited with code 101`, `timed out and was stopped`, `was killed by SIGKILL`.
    pub(crate) fn how(&self) -> String {
        ended_how(self.timed_out, self.exit_code, self.signal)
    }
}

/// `exited with code 101`, `timed out and was stopped`, `was killed by SIGKILL`.
pub(crate) fn ended_how(timed_out: bool, exit_code: Option<i32>, signal: Option<i32>) -> String {
    match (timed_out, exit_code, signal) {
        (true, _, _) => "timed out and was stopped".to_owned(),
        (false, Some(code), _) => format!("exited with code {code}"),
        (false, None, Some(signal)) => format!("was killed by {}", signal_name(signal)),
        (false, None, None) => "ended with an unknown status".to_owned(),
    }
}

/// Which checks an attempt is held to, fixed when it starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum VerifyPlan {
    /// The phase names no check.
    #[default]
    None,
    /// `--no-verify`: the phase has checks and none runs (the outcome says `skipped`).
    Skip,
    /// The phase's checks, in section order; never empty.
    Run(Vec<VerifyCheck>),
}

impl VerifyPlan {
    /// The plan for a phase with `checks`, under `--no-verify` when `verify` is false.
    pub(crate) fn for_phase(checks: &[VerifyCheck], verify: bool) -> Self {
        match (checks.is_empty(), verify) {
            (true, _) => Self::None,
            (false, false) => Self::Skip,
            (false, true) => Self::Run(checks.to_vec()),
        }
    }

    pub(crate) fn checks(&self) -> &[VerifyCheck] {
        match self {
            Self::Run(checks) => checks,
            Self::None | Self::Skip => &[],
        }
    }
}

/// The summary of an attempt whose completion was being verified when the handler was
/// interrupted: which check it stopped, the signal, and the agent's own summary, kept for
/// the next attempt.
pub(crate) fn interrupted_summary(signal: i32, check: &VerifyCheck, agent_summary: &str) -> String {
    format!(
        "handler interrupted while verify check {} ({}) ran ({}); the agent had reported phase-complete: {agent_summary}",
        check.index,
        check.first_line(),
        signal_name(signal)
    )
}

/// Why a running check is being stopped, for the `stop-requested` event.
pub(crate) fn stop_detail(cause: &StopCause) -> String {
    match cause {
        StopCause::Interrupted { signal, .. } => format!(
            "handler interrupted while a verify check ran ({})",
            signal_name(*signal)
        ),
        other => other.describe(),
    }
}

/// The next check to run: none once one failed (the first failing check stops the rest) or
/// all ran.
pub(crate) fn next_check<'a>(
    checks: &'a [VerifyCheck],
    outcomes: &[CheckOutcome],
) -> Option<&'a VerifyCheck> {
    if outcomes.iter().any(|outcome| !outcome.passed()) {
        return None;
    }
    checks.get(outcomes.len())
}

/// What the checks that ran, in order, come to; `None` while checks are still due.
pub(crate) fn verification_of(
    checks: &[VerifyCheck],
    outcomes: &[CheckOutcome],
) -> Option<Verification> {
    let mut records = Vec::with_capacity(outcomes.len());
    for (check, outcome) in checks.iter().zip(outcomes) {
        records.push(outcome.record(check));
        if let Some(failure) = outcome.failure(check) {
            return Some(Verification::Failed {
                checks: records,
                failure,
            });
        }
    }
    (outcomes.len() >= checks.len()).then_some(Verification::Passed(records))
}

/// What verification came to, as an attempt's outcome records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verification {
    /// Every check passed, in order.
    Passed(Vec<CheckRecord>),
    /// The checks that ran, the failing one last; the rest did not run.
    Failed {
        checks: Vec<CheckRecord>,
        failure: FailedCheck,
    },
    /// `--no-verify`: the phase has checks and none ran.
    Skipped,
    /// The checks that ran until the attempt was stopped (interrupted, or their output could
    /// not be recorded), the stopped one last: no verdict. Written like a list of passes;
    /// read back as this from an outcome whose status is not `phase-complete`.
    Stopped(Vec<CheckRecord>),
}

/// The outcome's `verification` key: the records of the checks that ran, or `"skipped"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum VerificationRecord {
    Checks(Vec<CheckRecord>),
    #[serde(serialize_with = "skipped")]
    Skipped,
}

const SKIPPED: &str = "skipped";

fn skipped<S: Serializer>(serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(SKIPPED)
}

impl<'de> Deserialize<'de> for VerificationRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RecordVisitor)
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = VerificationRecord;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a list of checks or \"skipped\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        if text == SKIPPED {
            Ok(VerificationRecord::Skipped)
        } else {
            Err(E::invalid_value(Unexpected::Str(text), &self))
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
        let mut checks = Vec::new();
        while let Some(check) = items.next_element()? {
            checks.push(check);
        }
        Ok(VerificationRecord::Checks(checks))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerificationError {
    #[error("verification_failure cannot go with verification \"skipped\"")]
    FailureWhenSkipped,
    #[error("verification_failure.index {index} is not the last check in verification")]
    FailureNotLast { index: usize },
    #[error("expected verification[{position}].index to be {}", .position + 1)]
    OutOfOrder { position: usize },
    #[error("expected verification[{position}].command_first_line to be non-empty")]
    EmptyFirstLine { position: usize },
}

impl Verification {
    /// The outcome keys it is written as: `verification`, and `verification_failure` for a
    /// failure.
    pub fn to_record(&self) -> (VerificationRecord, Option<FailedCheck>) {
        match self {
            Self::Passed(checks) => (VerificationRecord::Checks(checks.clone()), None),
            Self::Failed { checks, failure } => (
                VerificationRecord::Checks(checks.clone()),
                Some(failure.clone()),
            ),
            Self::Skipped => (VerificationRecord::Skipped, None),
            Self::Stopped(checks) => (VerificationRecord::Checks(checks.clone()), None),
        }
    }

    /// Reads the two outcome keys of an outcome with `status`: a list without a failure is
    /// a pass only when the completion was accepted, else the checks were stopped.
    pub fn read(
        status: AttemptStatus,
        record: &VerificationRecord,
        failure: Option<&FailedCheck>,
    ) -> Result<Self, VerificationError> {
        Ok(match Self::from_record(record, failure)? {
            Self::Passed(checks) if status != AttemptStatus::PhaseComplete => Self::Stopped(checks),
            verification => verification,
        })
    }

    /// A failure needs its record list, whose last check is the failing one.
    pub fn from_record(
        record: &VerificationRecord,
        failure: Option<&FailedCheck>,
    ) -> Result<Self, VerificationError> {
        match (record, failure) {
            (VerificationRecord::Skipped, None) => Ok(Self::Skipped),
            (VerificationRecord::Skipped, Some(_)) => Err(VerificationError::FailureWhenSkipped),
            (VerificationRecord::Checks(checks), None) => Ok(Self::Passed(checks.clone())),
            (VerificationRecord::Checks(checks), Some(failure)) => {
                if checks.last().map(|check| check.index) != Some(failure.index) {
                    return Err(VerificationError::FailureNotLast {
                        index: failure.index,
                    });
                }
                Ok(Self::Failed {
                    checks: checks.clone(),
                    failure: failure.clone(),
                })
            }
        }
    }
}

impl VerificationRecord {
    /// Index rules: 1, 2, 3, … in order, non-empty first lines.
    pub(crate) fn validate(&self) -> Result<(), VerificationError> {
        let Self::Checks(checks) = self else {
            return Ok(());
        };
        for (position, check) in checks.iter().enumerate() {
            if check.index != position + 1 {
                return Err(VerificationError::OutOfOrder { position });
            }
            if check.command_first_line.is_empty() {
                return Err(VerificationError::EmptyFirstLine { position });
            }
        }
        Ok(())
    }
}

mod standing;

pub(crate) use standing::{VerificationReport, VerificationResult};

#[cfg(test)]
mod tests;
