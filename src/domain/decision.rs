//! Deciding an attempt's outcome: a stop cause wins, then a nonzero exit (75 is `rate-limited`),
//! then the framing verdict (docs/worker-protocol.md, "Precedence"). A stop regex outranks a
//! rate-limit pattern in the same chunk ([`crate::domain::stop_regex::PatternKind`]).

use super::budget::CapReached;
use super::failure::ExecutionFailure;
use super::marker::{MarkerVerdict, ResultKind};
use super::seconds::format_seconds;
use super::state::AttemptStatus;

/// Why the attempt was ended before the child finished on its own (or, for a pattern found
/// at the end of input, after).
#[derive(Clone, Debug, PartialEq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub(crate) enum StopCause {
    /// The wall-clock `--timeout`.
    Timeout { seconds: f64 },
    /// No sign of life for `--idle-timeout` (or longer, when the agent extended it).
    IdleTimeout(IdleStop),
    /// A stop regex matched.
    StopRegex { pattern: String },
    /// A `rate_limit.patterns` regex matched.
    RateLimited { pattern: String },
    /// A stopping signal. `during` is the cause the attempt was already being stopped for:
    /// the signal still decides the outcome (the handler exits 128 + signal, so its record
    /// must say interrupted), and the summary keeps the earlier cause.
    Interrupted {
        signal: i32,
        during: Option<Box<StopCause>>,
    },
    /// The attempt's own machinery failed.
    ExecutionIo(ExecutionFailure),
    /// The plan's committed usage plus the attempt's latest report reached a cap.
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
    /// The cause's kind, for events and logs.
    pub(crate) fn kind(&self) -> &'static str {
        self.into()
    }

    /// The cause in words: the summary an outcome decided by it records.
    pub(crate) fn describe(&self) -> String {
        decide_stop(self).summary
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChildExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// `EX_TEMPFAIL` from sysexits.h: an agent (or a shipped wrapper) exits with it when the
/// provider rate-limited it.
pub(crate) const EX_TEMPFAIL: i32 = 75;

/// The decided outcome: its status and its summary (the result body for a result block,
/// otherwise the runner's one-line diagnostic).
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
    if exit.code != Some(0) {
        let summary = match (exit.code, exit.signal) {
            (Some(code), _) => format!("agent command exited with code {code}"),
            (None, Some(signal)) => {
                format!("agent command was killed by {}", signal_name(signal))
            }
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
        StopCause::Timeout { seconds } => {
            let seconds = format_seconds(*seconds);
            let summary = format!("agent command timed out after {seconds} seconds");
            (AttemptStatus::Timeout, summary)
        }
        StopCause::IdleTimeout(idle) => (AttemptStatus::Timeout, idle.summary.clone()),
        StopCause::StopRegex { pattern } => (
            AttemptStatus::StopRegex,
            format!("output matched stop regex: {pattern}"),
        ),
        StopCause::RateLimited { pattern } => (
            AttemptStatus::RateLimited,
            format!("agent output matched rate-limit pattern '{pattern}'"),
        ),
        StopCause::Interrupted { signal, during } => {
            let signal = signal_name(*signal);
            let mut summary = format!("handler interrupted while the worker was active ({signal})");
            if let Some(earlier) = during {
                let earlier = decide_stop(earlier).summary;
                summary.push_str(&format!("; the attempt was already stopping: {earlier}"));
            }
            (AttemptStatus::Interrupted, summary)
        }
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

/// `SIGINT`, `SIGTERM`, …; `signal N` for the signals records have always given by number
/// (those that by default do not end a process, and the rarer ones that do).
pub(crate) fn signal_name(signal: i32) -> String {
    match nix::sys::signal::Signal::try_from(signal) {
        Ok(named) if matches!(signal, 1..=15 | 24 | 25) => named.as_str().to_owned(),
        _ => format!("signal {signal}"),
    }
}

#[cfg(test)]
mod tests;
