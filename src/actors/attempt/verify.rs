//! One Verify check's run (issue 20), as a blocking job beside the attempt supervisor: the
//! check's header, its output as it arrives and its footer go to the transcript writer (each
//! part waited for, so a slow transcript or console slows the check's reading, never the
//! handler's memory), the process runs under the worker's cleanup rules
//! ([`crate::platform::verify_check`]), and the job hands back how it ended. It is stopped
//! through the [`StopSwitch`] the supervisor keeps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;

use super::messages::EndedCheck;
use super::transcript_writer::{VerifyOutput, WriterMsg};
use crate::domain::transcript::CheckFooter;
use crate::domain::verification::{CheckOutcome, VerifyCheck};
use crate::platform::helper_process::StopSwitch;
use crate::platform::proc::ChildSnapshot;
use crate::platform::verify_check::{CheckSetting, run_check};

/// Everything one check's run needs, owned, so it can run off the runtime.
pub(crate) struct CheckJob {
    pub(crate) check: VerifyCheck,
    /// The phase's execution workspace.
    pub(crate) cwd: PathBuf,
    /// `verify_timeout_seconds`; `None`: no limit.
    pub(crate) time_limit: Option<Duration>,
    pub(crate) inherited: Arc<ChildSnapshot>,
    pub(crate) writer: ActorRef<WriterMsg>,
    pub(crate) stop: StopSwitch,
}

impl CheckJob {
    /// Runs the check to its end (blocking: off the runtime, never on a runtime worker
    /// thread).
    pub(crate) fn run(self) -> EndedCheck {
        let writer = &self.writer;
        record(writer, VerifyOutput::Header(self.check.transcript_header()));
        let setting = CheckSetting {
            cwd: &self.cwd,
            // The attempt's environment is the handler's; `run_check` removes NOTIFY_SOCKET.
            env_set: &[],
            time_limit: self.time_limit,
            inherited: &self.inherited,
        };
        let ran = run_check(
            &self.check,
            &setting,
            &mut |_stream, bytes| record(writer, VerifyOutput::Output(bytes.to_vec())),
            &self.stop,
        );
        let (outcome, footer) = match ran {
            Ok(run) => {
                tracing::info!(
                    index = self.check.index,
                    exit_code = run.outcome.exit_code,
                    signal = run.outcome.signal,
                    timed_out = run.outcome.timed_out,
                    stopped = run.interrupted,
                    "verify check ended"
                );
                let footer = CheckFooter {
                    index: self.check.index,
                    outcome: run.outcome.clone(),
                    start_error: None,
                    stopped: run.interrupted,
                    leaked: run.leaked,
                    escaped: run.escaped,
                    survivors: run.survivors,
                    pipes_abandoned: run.pipes_abandoned,
                };
                (run.outcome, footer)
            }
            Err(error) => {
                let program = self.check.interpreter.program();
                let reason = format!("{program}: {error}");
                tracing::warn!(index = self.check.index, %reason, "verify check not started");
                let outcome =
                    CheckOutcome::unstarted(format!("could not start the check: {reason}"));
                let footer = CheckFooter {
                    index: self.check.index,
                    outcome: outcome.clone(),
                    start_error: Some(reason),
                    stopped: false,
                    leaked: Vec::new(),
                    escaped: Vec::new(),
                    survivors: Vec::new(),
                    pipes_abandoned: false,
                };
                (outcome, footer)
            }
        };
        let stopped = footer.stopped;
        record(writer, VerifyOutput::Footer(Box::new(footer)));
        EndedCheck {
            check: self.check,
            outcome,
            stopped,
        }
    }
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
