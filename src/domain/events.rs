//! What a run tells its observers as it goes: typed lifecycle events, pure data. The actor tree
//! emits them; the command layer turns them into progress lines, and later into the event
//! stream (docs/cli.md).

use super::retry::schedule::RetrySchedule;
use super::state::AttemptStatus;

/// One thing that happened during a run.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    /// The retry policy scheduled the next attempt of a phase (after a backoff, a rate-limit
    /// wait or at once with a fallback agent), durably, with the outcome that led to it.
    RetryScheduled {
        schedule: RetrySchedule,
        /// Seconds from now until the attempt is due (exact; the schedule's time is rounded
        /// up to the second).
        delay_seconds: f64,
        /// The most counted attempts the policy allows (n in "attempt k of n").
        of: u32,
        /// The agent template the next attempt runs.
        template: String,
        /// The reset-time phrase of the agent's output a wait is based on.
        reset_phrase: Option<String>,
        /// A schedule found in state and resumed by this run, rather than just made.
        resumed: bool,
    },
    /// A scheduled attempt is due: the phase runs again now.
    RetryDue { phase_id: String, attempt: u32 },
    /// An attempt's outcome is committed (the retry, if any, is a separate event).
    OutcomeCommitted {
        phase_id: String,
        status: AttemptStatus,
    },
}
