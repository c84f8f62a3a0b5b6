//! What the attempt supervisor is told: by its preparation, recording and check tasks, by its
//! children (pipe readers, stop scanner, deadline timer, transcript writer, group killer), by
//! the notification receiver's thread (usage reports), by its own timers, and by the run
//! supervisor (an interrupt). Children import this file, never the supervisor's.

use super::prepare::{Launch, SetupFailure};
use crate::domain::decision::ChildExit;
use crate::domain::failure::ExecutionFailure;
use crate::domain::lifecycle::GroupReport;
use crate::domain::lifecycle::attempt::Gathered;
use crate::domain::notify::NotifyTally;
use crate::domain::outcome::OutputBytes;
use crate::domain::output_stream::OutputStream;
use crate::domain::state::StateWriteError;
use crate::domain::stop_regex::StopMatch;
use crate::domain::token_usage::report::{UsageReport, UsageReportError};
use crate::domain::verification::{CheckOutcome, VerifyCheck};
use crate::domain::watchdog::WatchdogLoss;

pub(crate) enum AttemptMsg {
    /// The preparation task finished: the worker runs, or why it does not.
    Prepared(Box<Result<Launch, SetupFailure>>),
    /// The `running` record write reported.
    RunningRecorded(Result<(), StateWriteError>),
    /// The worker (the group leader) exited and was reaped.
    ChildExited(ChildExit),
    /// A pipe reached EOF, or reading it failed.
    StreamEnded {
        stream: OutputStream,
        error: Option<String>,
    },
    /// A stop regex or rate-limit pattern matched.
    StopMatched(StopMatch),
    /// These deadlines passed at the timer's last check: the wall clock, and the idle one
    /// with its stop message.
    DeadlinesPassed {
        wall_clock: bool,
        idle: Option<String>,
    },
    /// A usage report (`X_AISH_USAGE`) from a process of the attempt, or why it was ignored.
    UsageReported(Box<Result<UsageReport, UsageReportError>>),
    /// The notification socket was drained and closed: what became of its datagrams.
    NotificationsDrained(NotifyTally),
    /// A stopping signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) forwarded by the run supervisor.
    Interrupt(i32),
    /// The transcript could not be written, or the like: the attempt's machinery failed.
    Failed(ExecutionFailure),
    /// The killer found the group empty and swept escaped descendants.
    GroupEmptied(GroupReport),
    LeakGraceElapsed,
    DrainLimitElapsed,
    /// The recording task wrote the trailer and gathered the verdicts.
    Gathered(Box<Recorded>),
    /// The Verify check job finished a check (issue 20).
    CheckEnded(Box<EndedCheck>),
    /// The run's watchdog was lost, and replaced or not (`platform::watchdog`'s monitor).
    WatchdogLost(Box<WatchdogLoss>),
}

/// How a Verify check's run ended, as its job reports it.
pub(crate) struct EndedCheck {
    pub(crate) check: VerifyCheck,
    pub(crate) outcome: CheckOutcome,
    /// It was stopped by the handler (the attempt's stop switch).
    pub(crate) stopped: bool,
}

/// What the recording task found, and what the outcome record needs besides.
pub(crate) struct Recorded {
    pub(crate) gathered: Gathered,
    pub(crate) output: OutputBytes,
}
