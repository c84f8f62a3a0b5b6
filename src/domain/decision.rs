//! Deciding an attempt's outcome from what happened to it (docs/worker-protocol.md).
//!
//! The supervisor remembers the first *stop cause* that made it end the attempt early (timeout,
//! idle timeout, stop regex, rate-limit pattern, interruption, an I/O failure while streaming);
//! the child's exit status and the two streams' framing verdict arrive at the end. A stop cause
//! always wins, then a nonzero exit, then the framing verdict: a result block counts only after
//! a zero exit of an attempt nobody had to stop.
//!
//! Rate limits (issue 11) fit in without a new precedence level: a matched rate-limit pattern
//! is one more stop cause (the first cause still wins, an interruption still decides the
//! outcome, and a stop regex outranks a rate-limit pattern found in the same chunk, having the lower index in the one
//! pattern set — see [`crate::domain::stop_regex::PatternKind`]), and exit code 75 (`EX_TEMPFAIL`) is the one nonzero exit that
//! means `rate-limited` rather than `agent-failed`. Because it is a nonzero exit, it beats a
//! result block printed before it.

use super::budget::CapReached;
use super::failure::ExecutionFailure;
use super::marker::{MarkerVerdict, ResultKind};
use super::seconds::format_seconds;
use super::state::AttemptStatus;

/// Why the supervisor ended an attempt before the child finished on its own (or, for a stop
/// regex found in the final drain, after).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StopCause {
    /// The wall-clock `--timeout` expired.
    Timeout { seconds: f64 },
    /// No sign of life (output, an accepted notification, activity) for `--idle-timeout`
    /// seconds, or longer when the agent extended the idle deadline.
    IdleTimeout(IdleStop),
    /// A stop regex matched the combined output.
    StopRegex { pattern: String },
    /// A `rate_limit.patterns` regex matched the combined output: the provider refused for now.
    RateLimited { pattern: String },
    /// The handler caught SIGINT, SIGTERM, SIGHUP or SIGQUIT. `during` is the cause the attempt was already
    /// being stopped for when the signal came: the signal still decides the outcome (the
    /// handler exits 130/143, so its record must say interrupted), and the summary keeps the
    /// earlier cause.
    Interrupted {
        signal: i32,
        during: Option<Box<StopCause>>,
    },
    /// The attempt's own machinery failed: reading a pipe, writing the transcript, recording
    /// the running attempt, an attempt actor.
    ExecutionIo(ExecutionFailure),
    /// The committed usage of the invocation plus the attempt's latest usage report reached a
    /// budget cap (`--max-tokens`, `--max-cost`, config `budget`).
    BudgetExceeded(CapReached),
}

/// How an idle timeout stopped an attempt: the limit, and the summary that names the silence
/// and the agent's last status ([`crate::domain::liveness::idle::IdleDeadline::stop_message`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct IdleStop {
    pub seconds: f64,
    pub summary: String,
}

impl StopCause {
    /// The cause's kind, for events and logs: `timeout`, `idle-timeout`, `stop-regex`,
    /// `rate-limited`, `interrupted`, `execution-io`, `budget-exceeded`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "timeout",
            Self::IdleTimeout { .. } => "idle-timeout",
            Self::StopRegex { .. } => "stop-regex",
            Self::RateLimited { .. } => "rate-limited",
            Self::Interrupted { .. } => "interrupted",
            Self::ExecutionIo(_) => "execution-io",
            Self::BudgetExceeded(_) => "budget-exceeded",
        }
    }

    /// The cause in words: the summary an outcome decided by it records.
    pub(crate) fn describe(&self) -> String {
        decide_stop(self).summary
    }
}

/// How the child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChildExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ChildExit {
    pub(crate) fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// `EX_TEMPFAIL` from sysexits.h: "temporary failure, try again later". An agent (or a shipped
/// wrapper) exits with it when the provider rate-limited it, so the attempt is recorded as
/// `rate-limited` instead of `agent-failed`.
pub(crate) const EX_TEMPFAIL: i32 = 75;

/// The decided outcome: its status and the summary recorded with it (the result body for
/// result blocks, otherwise the runner's one-line diagnostic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub status: AttemptStatus,
    pub summary: String,
}

/// Applies the precedence rules.
pub(crate) fn decide(
    cause: Option<&StopCause>,
    exit: ChildExit,
    verdict: MarkerVerdict,
) -> Decision {
    if let Some(cause) = cause {
        return decide_stop(cause);
    }
    if exit.code == Some(EX_TEMPFAIL) {
        return Decision {
            status: AttemptStatus::RateLimited,
            summary: format!(
                "agent command exited with code {EX_TEMPFAIL} (temporary failure: rate limited)"
            ),
        };
    }
    if !exit.success() {
        let summary = match (exit.code, exit.signal) {
            (Some(code), _) => format!("agent command exited with code {code}"),
            (None, Some(signal)) => format!("agent command was killed by signal {signal}"),
            (None, None) => "agent command ended without an exit status".to_owned(),
        };
        return Decision {
            status: AttemptStatus::AgentFailed,
            summary,
        };
    }
    match verdict {
        MarkerVerdict::Result(block) => Decision {
            status: match block.kind {
                ResultKind::Complete => AttemptStatus::PhaseComplete,
                ResultKind::Blocked => AttemptStatus::Blocked,
                ResultKind::NeedsClarification => AttemptStatus::NeedsClarification,
            },
            summary: block.text,
        },
        MarkerVerdict::Missing(_) => Decision {
            status: AttemptStatus::MissingMarker,
            summary: "agent output did not contain a terminal marker".to_owned(),
        },
        MarkerVerdict::Invalid(detail) => Decision {
            status: AttemptStatus::InvalidMarker,
            summary: format!("agent output contained an invalid terminal marker ({detail})"),
        },
        MarkerVerdict::Multiple(detail) => Decision {
            status: AttemptStatus::MultipleMarkers,
            summary: format!("agent output contained multiple terminal markers ({detail})"),
        },
    }
}

fn decide_stop(cause: &StopCause) -> Decision {
    let (status, summary) = match cause {
        StopCause::Timeout { seconds } => (
            AttemptStatus::Timeout,
            format!(
                "agent command timed out after {} seconds",
                format_seconds(*seconds)
            ),
        ),
        StopCause::IdleTimeout(idle) => (AttemptStatus::Timeout, idle.summary.clone()),
        StopCause::StopRegex { pattern } => (
            AttemptStatus::StopRegex,
            format!("output matched stop regex: {pattern}"),
        ),
        StopCause::RateLimited { pattern } => (
            AttemptStatus::RateLimited,
            format!("agent output matched rate-limit pattern '{pattern}'"),
        ),
        StopCause::Interrupted { signal, during } => (
            AttemptStatus::Interrupted,
            match during {
                None => format!(
                    "handler interrupted while the worker was active ({})",
                    signal_name(*signal)
                ),
                Some(earlier) => format!(
                    "handler interrupted while the worker was active ({}); the attempt was already stopping: {}",
                    signal_name(*signal),
                    decide_stop(earlier).summary
                ),
            },
        ),
        StopCause::ExecutionIo(failure) => (
            AttemptStatus::ExecutionIoFailed,
            format!("attempt execution IO failed: {failure}"),
        ),
        StopCause::BudgetExceeded(reached) => {
            (AttemptStatus::BudgetExceeded, reached.stop_message())
        }
    };
    Decision { status, summary }
}

/// `SIGINT`, `SIGTERM`, … for the signals the handler deals with; `signal N` otherwise.
pub(crate) fn signal_name(signal: i32) -> String {
    match signal {
        1 => "SIGHUP".to_owned(),
        2 => "SIGINT".to_owned(),
        3 => "SIGQUIT".to_owned(),
        9 => "SIGKILL".to_owned(),
        15 => "SIGTERM".to_owned(),
        other => format!("signal {other}"),
    }
}

#[cfg(test)]
mod tests;
