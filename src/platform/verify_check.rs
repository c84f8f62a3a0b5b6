//! Running one verification check (issue 20; docs/plan-format.md, "Verify"): the check's
//! script by `/bin/sh -e` or its named interpreter ([`VerifyCheck::argv`]), as a helper process
//! under the worker's cleanup rules ([`super::helper_process`]): its own session and process
//! group, stdin from `/dev/null`, the caller's working directory (the phase's execution
//! workspace) and environment without `NOTIFY_SOCKET`, a time limit after which the group
//! gets SIGTERM, the grace period and SIGKILL, leaked and escaped descendants stopped, and a
//! stop switch the caller throws on a signal.
//!
//! Its output goes to the caller's sink chunk by chunk as it arrives (the attempt writes it to
//! the console and the transcript under the check's `--- verify N: <first line> ---` header);
//! the runner keeps only its tail ([`OutputTail`]) for the report and the next prompt.
//! Blocking: run it on a thread of its own.

use std::io;
use std::path::Path;
use std::time::Duration;

use super::helper_process::{
    EscapeeSweep, HelperCommand, HelperExit, HelperStdin, StopSwitch, run_helper,
};
use super::proc::ChildSnapshot;
use crate::domain::output_stream::OutputStream;
use crate::domain::verification::{CheckOutcome, OutputTail, VerifyCheck};

/// What running one check came to.
#[derive(Debug)]
pub(crate) struct CheckRun {
    /// How it ended, with its duration, size and output tail.
    pub outcome: CheckOutcome,
    /// The stop switch was thrown while it ran: the attempt was interrupted, whatever the
    /// check would have said.
    pub interrupted: bool,
    /// Members of its group left after it exited (killed).
    pub leaked: Vec<u32>,
    /// Descendants that had left its group (killed).
    pub escaped: Vec<u32>,
    /// Processes alive after every SIGKILL.
    pub survivors: Vec<u32>,
    /// A pipe held open by a process outside its group was closed unread.
    pub pipes_abandoned: bool,
}

/// Where and how a check runs.
pub(crate) struct CheckSetting<'a> {
    /// The phase's execution workspace.
    pub cwd: &'a Path,
    /// Variables set over the handler's environment (the attempt's).
    pub env_set: &'a [(String, String)],
    /// `verify_timeout_seconds`; `None`: none.
    pub time_limit: Option<Duration>,
    /// The handler's children before its first worker: never a check's descendants.
    pub inherited: &'a ChildSnapshot,
}

/// Runs `check` to its end. `Err` only when it could not be started (a missing interpreter
/// is `NotFound`).
pub(crate) fn run_check(
    check: &VerifyCheck,
    setting: &CheckSetting<'_>,
    sink: &mut dyn FnMut(OutputStream, &[u8]),
    stop: &StopSwitch,
) -> io::Result<CheckRun> {
    let argv = check.argv();
    let mut tail = OutputTail::default();
    let run = run_helper(
        HelperCommand {
            argv: &argv,
            cwd: setting.cwd,
            env_set: setting.env_set,
            stdin: HelperStdin::Null,
            time_limit: setting.time_limit,
            escapees: EscapeeSweep::Now(setting.inherited),
        },
        &mut |stream, bytes| {
            tail.push(bytes);
            sink(stream, bytes);
        },
        stop,
    )?;
    let (exit_code, signal) = match run.exit {
        HelperExit::Code(code) => (Some(code), None),
        HelperExit::Signal(signal) => (None, Some(signal)),
        HelperExit::Unknown => (None, None),
    };
    Ok(CheckRun {
        outcome: CheckOutcome {
            exit_code,
            signal,
            timed_out: run.timed_out,
            duration_ms: run.duration.as_millis().try_into().unwrap_or(u64::MAX),
            output_bytes: run.stdout_bytes.saturating_add(run.stderr_bytes),
            output_tail: tail.text(),
        },
        interrupted: run.interrupted,
        leaked: run.leaked,
        escaped: run.escaped,
        survivors: run.survivors,
        pipes_abandoned: run.pipes_abandoned,
    })
}

#[cfg(test)]
mod tests;
