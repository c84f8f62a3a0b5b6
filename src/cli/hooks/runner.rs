//! The hook thread: runs each firing's hooks in order as helper processes in the plan
//! workspace, keeping their output in `hooks.log` (bounded per hook, rotated). While the run
//! goes on, a hook's escaped descendants cannot be told from a worker's, so they are swept only
//! once the run has ended (docs/cli.md, "Notifications").

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};

use super::HookContext;
use crate::actors::observer::RunObserver;
use crate::domain::events::{EventRecord, RunEvent};
use crate::domain::hooks::firing::HookFacts;
use crate::domain::hooks::{Hook, HookValues};
use crate::domain::seconds::format_seconds;
use crate::domain::template::shell_join;
use crate::platform::descendant_sweep;
use crate::platform::event_log::EventLog;
use crate::platform::helper_process::{
    EscapeeSweep, HelperCommand, HelperRun, StopSwitch, run_helper,
};
use crate::platform::proc::ChildSnapshot;
use crate::platform::process_group::signal_name;
use crate::report::{self, Output};
use crate::units;

/// How much of one hook's output `hooks.log` keeps.
pub(super) const OUTPUT_KEPT: usize = 64 * 1024;
/// The size at which `hooks.log` rotates to `hooks.log.1`.
pub(super) const LOG_CAP_BYTES: u64 = 1 << 20;
/// How long the end of the run waits for the log's last block to be written.
const LOG_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// One firing: the hooks that run at it and what they are told.
pub(super) struct HookJob {
    pub hooks: Vec<Hook>,
    pub facts: HookFacts,
    pub run_id: String,
    pub attempt_id: Option<String>,
}

/// The hook thread's state; `reporter` gets `hook-failed` events while the run goes on,
/// `stream` after it.
pub(super) struct HookRunner {
    pub context: Arc<HookContext>,
    pub stop: StopSwitch,
    pub ended: Arc<AtomicBool>,
    pub inherited: ChildSnapshot,
    pub reporter: Arc<dyn RunObserver>,
    pub stream: Arc<dyn RunObserver>,
    pub log_path: String,
    /// `hooks.log` is a link or no regular file (the run was warned): nothing is written.
    pub log_refused: bool,
    /// The earliest start of a hook that ran while the run went on: the end sweeps from there.
    pub sweep_from_ticks: Option<u64>,
}

impl HookRunner {
    /// Runs every job until the queue is closed and empty, then sweeps.
    pub(super) fn run(mut self, queue: Receiver<HookJob>) {
        let started = if self.log_refused {
            Ok(None)
        } else {
            EventLog::start(PathBuf::from(&self.log_path), LOG_CAP_BYTES).map(Some)
        };
        let log = match started {
            Ok(log) => log,
            Err(error) => {
                tracing::warn!(%error, "cannot start the hook log thread; hook output is dropped");
                None
            }
        };
        for job in queue {
            for hook in &job.hooks {
                if self.stop.throws() > 0 {
                    tracing::info!(hook = %hook.origin, event = %job.facts.event, "hook skipped: the handler was interrupted");
                    continue;
                }
                self.run_one(hook, &job, log.as_ref());
            }
        }
        if let Some(ticks) = self.sweep_from_ticks {
            let swept = descendant_sweep::sweep_until_done(0, Some(ticks), &self.inherited);
            if !swept.escaped.is_empty() || !swept.survivors.is_empty() {
                tracing::info!(escaped = ?swept.escaped, survivors = ?swept.survivors, "swept what the run's hooks left outside their groups");
            }
        }
        if let Some(log) = log {
            log.drain(LOG_DRAIN_LIMIT);
        }
    }

    fn run_one(&mut self, hook: &Hook, job: &HookJob, log: Option<&EventLog>) {
        let context = self.context.clone();
        let payload = job.facts.payload(&context.plan_path, &context.state_path);
        let started_at = Utc::now();
        let event_file = match event_file(&payload) {
            Ok(file) => file,
            Err(error) => {
                return self.report(
                    hook,
                    job,
                    format!("cannot write its event file: {error}"),
                    None,
                );
            }
        };
        let event_path = event_file.path().display().to_string();
        let argv = hook.command.render(&HookValues {
            plan: &context.plan_path,
            run_id: &job.run_id,
            phase_id: job.facts.phase_id(),
            status: job.facts.status.as_deref().unwrap_or(""),
            event_file: &event_path,
        });
        let stdin = match File::open(event_file.path()) {
            Ok(file) => file,
            Err(error) => {
                return self.report(
                    hook,
                    job,
                    format!("cannot open its event file: {error}"),
                    None,
                );
            }
        };
        let ended = self.ended.load(Ordering::SeqCst);
        // The attempt the payload's record is about (a run's end is told the last outcome's).
        let attempt_id = payload["attempt_id"]
            .as_str()
            .or(job.attempt_id.as_deref())
            .unwrap_or("");
        let environment =
            job.facts
                .environment(context.run_facts(&job.run_id, attempt_id, job.facts.phase_id()));
        let mut output = Kept::default();
        let result = run_helper(
            HelperCommand {
                argv: &argv,
                cwd: Path::new(&context.workspace),
                env_set: &environment,
                stdin: Some(stdin),
                time_limit: Some(Duration::from_secs_f64(hook.timeout_seconds)),
                escapees: if ended {
                    EscapeeSweep::Now(&self.inherited)
                } else {
                    EscapeeSweep::Later
                },
            },
            &mut |_, bytes| output.push(bytes),
            &self.stop,
        );
        drop(event_file);
        let (failed, verdict) = match &result {
            Ok(run) => {
                if !ended && let Some(ticks) = run.started_ticks {
                    self.sweep_from_ticks =
                        Some(self.sweep_from_ticks.map_or(ticks, |from| from.min(ticks)));
                }
                (
                    !run.succeeded() || !run.group.survivors.is_empty(),
                    describe_run(run, hook),
                )
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => (
                true,
                format!(
                    "program '{}' not found (looked up from {})",
                    argv[0], context.workspace
                ),
            ),
            Err(error) => (true, format!("cannot start '{}': {error}", argv[0])),
        };
        if let Some(log) = log {
            log.append(log_block(started_at, hook, job, &argv, &output, &verdict));
        }
        if failed {
            self.report(hook, job, verdict, result.as_ref().ok());
        }
    }

    /// One `warning:` line and a `hook-failed` event; `run` is `None` when the hook never ran.
    fn report(&self, hook: &Hook, job: &HookJob, reason: String, run: Option<&HelperRun>) {
        let (exit_code, signal) = run.map_or((None, None), |run| (run.exit.code, run.exit.signal));
        let record = EventRecord {
            at: Utc::now(),
            run_id: job.run_id.clone(),
            attempt_id: job.attempt_id.clone(),
            event: RunEvent::HookFailed {
                hook: hook.origin.clone(),
                hook_event: job.facts.event.as_str().to_owned(),
                command: hook.command.raw().to_owned(),
                reason,
                exit_code,
                signal,
                timed_out: run.is_some_and(|run| run.timed_out),
                duration_ms: run.map_or(0, |run| units::millis(run.duration)),
                log_path: self.log_path.clone(),
            },
        };
        if self.ended.load(Ordering::SeqCst) {
            // The progress display is finished: the warning goes straight to stderr.
            if let Some(line) = report::event_line(&record.event, Utc::now()) {
                Output::default().err_line(line).print();
            }
            self.stream.observe(&record);
        } else {
            self.reporter.observe(&record);
        }
    }
}

fn describe_run(run: &HelperRun, hook: &Hook) -> String {
    let how = match (run.exit.code, run.exit.signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!(
            "killed by {}",
            signal_name(signal).map_or_else(|| format!("signal {signal}"), str::to_owned)
        ),
        (None, None) => "ended with an unknown status".to_owned(),
    };
    let mut description = if run.timed_out {
        format!(
            "timed out after {} s and was stopped ({how})",
            format_seconds(hook.timeout_seconds)
        )
    } else if run.interrupted {
        format!("stopped because the handler was interrupted ({how})")
    } else {
        how
    };
    description.push_str(&format!(" after {} ms", run.duration.as_millis()));
    if !run.group.survivors.is_empty() {
        description.push_str(&format!(
            "; processes survived SIGKILL: {:?}",
            run.group.survivors
        ));
    }
    description
}

/// The event object in a private temporary file (mode 0600), removed when dropped.
fn event_file(payload: &serde_json::Value) -> std::io::Result<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new()
        .prefix("ai-session-handler-hook-")
        .suffix(".json")
        .tempfile()?;
    let mut text = serde_json::to_string(payload).map_err(std::io::Error::other)?;
    text.push('\n');
    file.write_all(text.as_bytes())?;
    file.flush()?;
    Ok(file)
}

/// The first [`OUTPUT_KEPT`] bytes of a hook's output, and how many there were.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    total: u64,
}

impl Kept {
    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = OUTPUT_KEPT.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
}

/// One hook's entry in `hooks.log` (written whole, without its final newline).
fn log_block(
    started_at: chrono::DateTime<Utc>,
    hook: &Hook,
    job: &HookJob,
    argv: &[String],
    output: &Kept,
    verdict: &str,
) -> String {
    let mut block = format!(
        "--- {} {} on {}: {} ---\nargv: {}\n",
        started_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        hook.origin,
        job.facts.event,
        hook.command.raw(),
        shell_join(argv)
    );
    block.push_str(&String::from_utf8_lossy(&output.bytes));
    if !output.bytes.is_empty() && !output.bytes.ends_with(b"\n") {
        block.push('\n');
    }
    if output.total > output.bytes.len() as u64 {
        block.push_str(&format!(
            "[kept the first {} of {} bytes of output]\n",
            output.bytes.len(),
            output.total
        ));
    }
    block.push_str(&format!("--- {verdict} ---"));
    block
}
