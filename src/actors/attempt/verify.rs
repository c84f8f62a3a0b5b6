//! One Verify check's run, as a blocking job beside the attempt supervisor: a helper process
//! ([`crate::platform::helper_process`]) whose header, output and footer go to the transcript
//! writer, each part waited for (docs/architecture.md, "Attempt lifecycle", Verifying). It is
//! stopped through the [`StopSwitch`] the supervisor keeps.

use std::io;
use std::path::Path;
use std::time::Duration;

use ractor::ActorRef;

use super::messages::{AttemptSpec, EndedCheck};
use super::transcript_writer::{VerifyOutput, WriterMsg};
use crate::domain::lifecycle::GroupReport;
use crate::domain::output_stream::OutputStream;
use crate::domain::transcript::CheckFooter;
use crate::domain::verification::{CheckOutcome, OutputTail, VerifyCheck};
use crate::platform::helper_process::{
    EscapeeSweep, HelperCommand, HelperRun, StopSwitch, run_helper,
};
use crate::platform::proc::ChildSnapshot;

/// Everything one check's run needs, owned, so it can run off the runtime.
pub(crate) struct CheckJob {
    pub(crate) check: VerifyCheck,
    /// Where it runs (the execution workspace), its time limit and the children to spare.
    pub(crate) spec: AttemptSpec,
    pub(crate) writer: ActorRef<WriterMsg>,
    pub(crate) stop: StopSwitch,
}

impl CheckJob {
    /// Runs the check to its end (blocking: off the runtime).
    pub(crate) fn run(self) -> EndedCheck {
        let writer = &self.writer;
        record(writer, VerifyOutput::Header(self.check.transcript_header()));
        let settings = &self.spec.settings;
        let time_limit = settings
            .verify_timeout_seconds
            .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok());
        let ran = run_check(
            &self.check,
            Path::new(&self.spec.execution_workspace),
            time_limit,
            &self.spec.inherited_children,
            &mut |_stream, bytes| record(writer, VerifyOutput::Output(bytes.to_vec())),
            &self.stop,
        );
        let footer = match ran {
            Ok((outcome, run)) => {
                tracing::info!(
                    index = self.check.index,
                    exit_code = outcome.exit_code,
                    signal = outcome.signal,
                    timed_out = outcome.timed_out,
                    stopped = run.interrupted,
                    "verify check ended"
                );
                CheckFooter {
                    index: self.check.index,
                    outcome,
                    start_error: None,
                    stopped: run.interrupted,
                    group: run.group,
                    pipes_abandoned: run.pipes_abandoned,
                }
            }
            Err(error) => {
                let program = self.check.interpreter.program();
                let reason = format!("{program}: {error}");
                tracing::warn!(index = self.check.index, %reason, "verify check not started");
                CheckFooter {
                    index: self.check.index,
                    outcome: CheckOutcome::unstarted(format!(
                        "could not start the check: {reason}"
                    )),
                    start_error: Some(reason),
                    stopped: false,
                    group: GroupReport::default(),
                    pipes_abandoned: false,
                }
            }
        };
        let (outcome, stopped) = (footer.outcome.clone(), footer.stopped);
        record(writer, VerifyOutput::Footer(Box::new(footer)));
        EndedCheck {
            check: self.check,
            outcome,
            stopped,
        }
    }
}

/// Runs `check` to its end — by `/bin/sh -e` or its interpreter ([`VerifyCheck::argv`]), stdin
/// from `/dev/null`, in `cwd` with the handler's environment (the attempt's) — handing its
/// output to `sink` as it arrives and keeping its tail for the outcome. `Err` only when it
/// could not be started (a missing interpreter is `NotFound`).
fn run_check(
    check: &VerifyCheck,
    cwd: &Path,
    time_limit: Option<Duration>,
    inherited: &ChildSnapshot,
    sink: &mut dyn FnMut(OutputStream, &[u8]),
    stop: &StopSwitch,
) -> io::Result<(CheckOutcome, HelperRun)> {
    let argv = check.argv();
    let mut tail = OutputTail::default();
    let command = HelperCommand {
        argv: &argv,
        cwd,
        env_set: &[],
        stdin: None,
        time_limit,
        escapees: EscapeeSweep::Now(inherited),
    };
    let run = run_helper(
        command,
        &mut |stream, bytes| {
            tail.push(bytes);
            sink(stream, bytes);
        },
        stop,
    )?;
    let outcome = CheckOutcome {
        exit_code: run.exit.code,
        signal: run.exit.signal,
        timed_out: run.timed_out,
        duration_ms: run.duration.as_millis().try_into().unwrap_or(u64::MAX),
        output_bytes: run.stdout_bytes.saturating_add(run.stderr_bytes),
        output_tail: tail.text(),
    };
    Ok((outcome, run))
}

/// Hands one part to the transcript writer and waits until it is written (a writer that
/// stopped — only at the attempt's end — costs the part its record).
fn record(writer: &ActorRef<WriterMsg>, part: VerifyOutput) {
    let (reply, written) = ractor::concurrency::oneshot();
    if writer
        .cast(WriterMsg::Verify {
            part,
            reply: reply.into(),
        })
        .is_ok()
    {
        let _ = written.blocking_recv();
    }
}

#[cfg(test)]
mod tests;
