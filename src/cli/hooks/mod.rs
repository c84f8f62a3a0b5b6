//! Hooks for `run` (docs/cli.md, "Notifications"): one more observer of the run's events,
//! mapping them to hook events ([`crate::domain::hooks::firing`]) and handing each firing to a
//! thread of its own ([`runner`]), so no actor ever waits for a hook. The events of a run's end
//! need how it ended, which only the command knows: [`Hooks::run_ended`] fires them.

mod runner;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::actors::observer::RunObserver;
use crate::actors::run::{RunEnd, RunResult};
use crate::cli::lock;
use crate::domain::events::{EventRecord, RunEvent};
use crate::domain::exit_code::ExitCode;
use crate::domain::hooks::firing::{HookFacts, HookTrigger, RunEndFacts, end_events};
use crate::domain::hooks::{Hook, HookEvent};
use crate::domain::lifecycle::run::Uncommitted;
use crate::domain::recovery::NextStep;
use crate::domain::run_env::RunFacts;
use crate::domain::selection::Refusal;
use crate::domain::state::AttemptStatus;
use crate::platform::event_log;
use crate::platform::helper_process::StopSwitch;
use crate::platform::locate::PlanLocation;
use crate::platform::proc::ChildSnapshot;
use crate::platform::signal_disposition::CaughtSignals;
use crate::report::{self, Output};
use runner::{HookJob, HookRunner};

/// How long the end of a run waits for the hook thread once a signal stopped its hooks: the
/// grace period, SIGKILL and a sweep take well under this.
const STOPPED_HOOKS_LIMIT: Duration = Duration::from_secs(2);
/// How often the end-of-run wait looks for a caught signal.
const SIGNAL_POLL: Duration = Duration::from_millis(10);

/// What the hooks need to know about the run besides its events.
pub(super) struct HookContext {
    pub plan_path: String,
    pub state_path: String,
    /// The plan workspace: where hooks run.
    pub workspace: String,
    /// The state directory: `hooks.log` goes there.
    pub state_dir: String,
    /// Every phase's id, title and execution workspace.
    pub phases: Vec<HookPhase>,
}

impl HookContext {
    pub(super) fn new(location: &PlanLocation, phases: Vec<HookPhase>) -> Self {
        Self {
            plan_path: location.plan_path.clone(),
            state_path: location.layout.state_path(),
            workspace: location.workspace.clone(),
            state_dir: location.layout.dir.clone(),
            phases,
        }
    }

    fn title(&self, phase_id: &str) -> String {
        self.phase(phase_id)
            .map(|phase| phase.title.clone())
            .unwrap_or_default()
    }

    fn phase(&self, phase_id: &str) -> Option<&HookPhase> {
        self.phases.iter().find(|phase| phase.id == phase_id)
    }

    /// What a hook is told in `AISH_*` besides its firing's own facts.
    pub(super) fn run_facts<'a>(
        &'a self,
        run_id: &'a str,
        attempt_id: &'a str,
        phase_id: &str,
    ) -> RunFacts<'a> {
        RunFacts {
            plan: &self.plan_path,
            plan_workspace: &self.workspace,
            state_file: &self.state_path,
            run_id,
            attempt_id,
            execution_workspace: self
                .phase(phase_id)
                .map_or("", |phase| phase.execution_workspace.as_str()),
            ..RunFacts::default()
        }
    }
}

/// A phase of the plan, as hooks are told about it.
pub(super) struct HookPhase {
    pub id: String,
    pub title: String,
    pub execution_workspace: String,
}

/// The hooks observer of one `run`.
pub(super) struct Hooks {
    hooks: Arc<Vec<Hook>>,
    context: Arc<HookContext>,
    jobs: Mutex<Option<mpsc::Sender<HookJob>>>,
    /// Disconnected by the hook thread when it has run everything.
    done: Mutex<Option<mpsc::Receiver<()>>>,
    stop: StopSwitch,
    /// The run has ended: failures are printed directly (the progress display is finished).
    ended: Arc<AtomicBool>,
    state: Mutex<Seen>,
}

/// What the observer remembers of the run's events: the phase of the last attempt prepared,
/// the last committed outcome's record and status, the `run-finished` record.
#[derive(Default)]
struct Seen {
    trigger: HookTrigger,
    run_id: Option<String>,
    last_phase: Option<String>,
    last_outcome: Option<(Value, AttemptStatus)>,
    finished: Option<Value>,
}

impl Hooks {
    /// Starts the hook thread; `None` when there are no hooks. `reporter` (progress and the
    /// event stream) gets `hook-failed` events during the run, `stream` after it.
    pub(super) fn start(
        hooks: Vec<Hook>,
        context: HookContext,
        reporter: Arc<dyn RunObserver>,
        stream: Arc<dyn RunObserver>,
    ) -> std::io::Result<Option<Self>> {
        if hooks.is_empty() {
            return Ok(None);
        }
        let hooks = Arc::new(hooks);
        let context = Arc::new(context);
        let stop = StopSwitch::new()?;
        let ended = Arc::new(AtomicBool::new(false));
        let (jobs, queue) = mpsc::channel();
        let (done_sender, done) = mpsc::channel::<()>();
        let log_path = Path::new(&context.state_dir).join("hooks.log");
        // Before the run's output starts: the hooks' output would be lost without a word.
        let log_refused = event_log::refusal(&log_path);
        if let Some(why) = log_refused {
            let line = format!(
                "{} {why}: the hooks' output is not kept (remove it, or replace it with a file)",
                log_path.display()
            );
            Output::stderr(report::prefixed("warning", &[line])).print();
        }
        let runner = HookRunner {
            log_path: log_path.display().to_string(),
            log_refused: log_refused.is_some(),
            context: context.clone(),
            stop: stop.clone(),
            ended: ended.clone(),
            // Taken before any worker exists: the handler's children now (the watchdog, a
            // shell's background jobs) are never a hook's.
            inherited: ChildSnapshot::take(),
            reporter,
            stream,
            sweep_from_ticks: None,
        };
        std::thread::Builder::new()
            .name("ash-hooks".into())
            .spawn(move || {
                runner.run(queue);
                drop(done_sender);
            })?;
        Ok(Some(Self {
            hooks,
            context,
            jobs: Mutex::new(Some(jobs)),
            done: Mutex::new(Some(done)),
            stop,
            ended,
            state: Mutex::new(Seen::default()),
        }))
    }

    /// Queues the hooks that run at `facts.event`, with what they are told.
    fn fire(&self, facts: HookFacts, run_id: &str, attempt_id: Option<String>) {
        let hooks: Vec<Hook> = self
            .hooks
            .iter()
            .filter(|hook| hook.runs_on(facts.event))
            .cloned()
            .collect();
        if hooks.is_empty() {
            return;
        }
        let job = HookJob {
            hooks,
            facts,
            run_id: run_id.to_owned(),
            attempt_id,
        };
        if let Some(jobs) = lock(&self.jobs).as_ref() {
            let _ = jobs.send(job);
        }
    }

    /// Fires the events of the run's end: `phase-stopped` when a phase waits for a person,
    /// `interrupted` on a signal, and `run-finished` always. `message` is the first line the
    /// run's report shows; `next` the step its `next:` line names, which the hooks get as
    /// `next` and `recovery`, run from the invocation's directory.
    pub(super) fn run_ended(
        &self,
        result: &RunResult,
        message: Option<String>,
        next: Option<&NextStep>,
    ) {
        self.ended.store(true, Ordering::SeqCst);
        let seen = lock(&self.state);
        let run_id = seen.run_id.clone().unwrap_or_default();
        let finished = seen.finished.clone().unwrap_or_else(|| {
            serde_json::json!({"run_id": run_id, "event": "run-finished", "exit_code": result.exit().code()})
        });
        let (end, mut told) = end_facts(result, &seen, &self.context);
        let phase_id = told.phase.as_ref().map(|(id, _)| id.clone());
        told.exit_code = Some(result.exit().code());
        told.message = message;
        told.next = next.cloned();
        for event in end_events(&end) {
            let record = match (event, &seen.last_outcome) {
                (HookEvent::PhaseStopped, Some((record, _)))
                    if record["phase_id"].as_str() == phase_id.as_deref() =>
                {
                    record.clone()
                }
                _ => finished.clone(),
            };
            let facts = HookFacts {
                event,
                record,
                ..told.clone()
            };
            self.fire(facts, &run_id, None);
        }
    }

    /// Waits until every queued hook has run, while the caller owns the stopping signals
    /// (`caught`): the first signal stops the hook that runs (SIGTERM, grace, SIGKILL) and
    /// skips the rest, a second one skips the grace. Then sweeps what the run's hooks left
    /// outside their groups.
    pub(super) fn finish(&self, caught: &CaughtSignals) {
        lock(&self.jobs).take();
        let Some(done) = lock(&self.done).take() else {
            return;
        };
        let mut signals_seen = 0;
        let mut stopped_at = None;
        loop {
            match done.recv_timeout(SIGNAL_POLL) {
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let count = caught.count();
            if count > signals_seen {
                for _ in signals_seen..count.min(signals_seen + 2) {
                    self.stop.stop();
                }
                signals_seen = count;
                stopped_at.get_or_insert_with(std::time::Instant::now);
                tracing::info!(
                    signal = caught.first(),
                    "signal while hooks run: stopping them; the exit code stays"
                );
            }
            if stopped_at.is_some_and(|at| at.elapsed() >= STOPPED_HOOKS_LIMIT) {
                tracing::warn!("the hooks did not stop in time; leaving them");
                break;
            }
        }
    }
}

impl RunObserver for Hooks {
    fn observe(&self, record: &EventRecord) {
        let mut seen = lock(&self.state);
        seen.run_id.get_or_insert_with(|| record.run_id.clone());
        match &record.event {
            RunEvent::AttemptPrepared { phase_id, .. } => {
                seen.last_phase = Some(phase_id.clone());
            }
            RunEvent::OutcomeCommitted { status, .. } => {
                seen.last_outcome = Some((record_value(record), *status));
            }
            RunEvent::RunFinished { .. } => seen.finished = Some(record_value(record)),
            _ => {}
        }
        let Some(trigger) = seen.trigger.observe(&record.event) else {
            return;
        };
        drop(seen);
        let mut facts = HookFacts::new(trigger.event, record_value(record));
        facts.phase = Some((
            trigger.phase_id.clone(),
            self.context.title(&trigger.phase_id),
        ));
        facts.status = Some(trigger.status.to_string());
        facts.message = Some(match trigger.event {
            // The line the run prints for the wait, when it has one.
            HookEvent::WaitStarted => {
                report::event_line(&record.event, chrono::Utc::now()).unwrap_or(trigger.message)
            }
            _ => trigger.message,
        });
        self.fire(facts, &record.run_id, record.attempt_id.clone());
    }
}

/// A record as the JSON object `events.jsonl` holds for it.
fn record_value(record: &EventRecord) -> Value {
    serde_json::to_value(record).unwrap_or(Value::Null)
}

/// How the run ended, for its end events, and what they tell every hook of it: the phase, the
/// status, a blocker's reason or a question.
fn end_facts(result: &RunResult, seen: &Seen, context: &HookContext) -> (RunEndFacts, HookFacts) {
    let signal = match result.exit() {
        ExitCode::Signal(signal) => Some(signal),
        _ => None,
    };
    let mut end = RunEndFacts {
        status: None,
        retry_scheduled: false,
        unresolved: false,
        signal,
    };
    let mut phase_id = seen.last_phase.clone();
    let mut status = seen.last_outcome.as_ref().map(|(_, status)| *status);
    let mut told = HookFacts::new(HookEvent::RunFinished, Value::Null);
    match &result.end {
        RunEnd::PhaseStopped {
            decision,
            retry_scheduled,
            ..
        } => {
            end.status = Some(decision.status);
            end.retry_scheduled = *retry_scheduled;
            status = Some(decision.status);
            if decision.status == AttemptStatus::Blocked {
                told.reason = Some(decision.summary.clone());
            }
            if decision.status == AttemptStatus::NeedsClarification {
                told.question = Some(decision.summary.clone());
            }
        }
        RunEnd::Uncommitted {
            end: Uncommitted::NotPrepared { .. },
            ..
        } => {
            end.unresolved = true;
            phase_id = phase_id.or_else(|| result.next_phase.clone());
        }
        RunEnd::Uncommitted {
            end: Uncommitted::Unresolved {
                decision, attempt, ..
            },
            ..
        } => {
            end.unresolved = true;
            end.status = Some(decision.status);
            status = Some(decision.status);
            phase_id = Some(attempt.phase.id.clone());
        }
        // A reached budget stopped no phase (the next one was not launched): only
        // `run-finished` (exit 4) tells of it.
        RunEnd::InterruptedDuringWait { phase_id: id, .. }
        | RunEnd::BudgetReached { phase_id: id, .. } => {
            phase_id = Some(id.clone());
        }
        RunEnd::Refused(refused) => match &refused.refusal {
            Refusal::Stopped(stop) => {
                phase_id = Some(stop.phase_id.clone());
                status = Some(stop.reason);
                if stop.reason == AttemptStatus::Blocked {
                    told.reason = stop.message.clone();
                }
                // Only a needs-clarification stop has one.
                told.question = stop.clarification_request.clone();
            }
            Refusal::UnresolvedAttempt(attempt) => {
                phase_id = Some(attempt.phase.id.clone());
            }
            Refusal::PlanHashMismatch(_)
            | Refusal::PlanPathMismatch { .. }
            | Refusal::CompletedPhasesMissing { .. }
            | Refusal::RetriedPhaseMissing { .. } => {}
        },
        RunEnd::InterruptedBeforeLaunch { .. }
        | RunEnd::PhaseLimitReached { .. }
        | RunEnd::PlanChanged(_)
        | RunEnd::AllComplete
        | RunEnd::Input(_)
        | RunEnd::AcceptanceFailed(_)
        | RunEnd::Internal { .. } => {}
    }
    told.phase = phase_id.map(|id| {
        let title = context.title(&id);
        (id, title)
    });
    told.status = status.map(|status| status.to_string());
    (end, told)
}
