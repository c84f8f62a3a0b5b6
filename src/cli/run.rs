//! `run`: validates every input, hands the invocation to the actor tree ([`crate::actors::run`])
//! with the run's observers, then prints how it ended and returns its exit code. With hooks,
//! the end waits for them while the command catches the stopping signals itself (the tree's
//! signal intake is gone by then): a signal stops the hooks, and the report is printed from a
//! thread of its own so a stdout nobody reads cannot hold the handler either.

use crate::domain::budget::{BudgetCaps, Spent};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::Actor;
use tokio::sync::oneshot;

use super::args::{LogFormat, LoggingArgs, RunArgs};
use super::event_stream::EventStream;
use super::hooks::{HookContext, HookPhase, Hooks};
use super::progress::{Progress, ProgressMode};
use crate::actors::observer::RunObserver;
use crate::actors::run::{
    RunArgs as SupervisorArgs, RunEnd, RunResult, RunSupervisor, STOPPING_SIGNALS,
};
use crate::domain::events::EventRecord;
use crate::domain::exit_code::ExitCode;
use crate::domain::hooks::{HOOK_MARKER, hooks_off};
use crate::domain::selection::{RecoveryFlags, Refusal, next_pending};
use crate::domain::watchdog::WATCHDOG_LOG_TARGET;
use crate::invocation::history;
use crate::invocation::{
    InputError, PlanSnapshot, RunOverrides, RunSettings, agent_program_problems,
    effective_settings, execution_workspace_of, generated_paths_are_real, locate, read_config,
    read_plan_snapshot, read_state, verify_interpreter_problems,
};
use crate::platform::console::Console;
use crate::platform::locate::PlanLocation;
use crate::platform::signal_disposition::{self, CaughtSignals};
use crate::platform::{job_control, process_group, watchdog};
use crate::report::{self, Output, RunJsonContext};

/// How long the runtime may take to wind down after the result is in: only abandoned tasks
/// (a prompt write to a worker that never read it) can still be running then.
const RUNTIME_SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);
/// How often the end looks at a report still being printed, for a signal.
const PRINT_POLL: Duration = Duration::from_millis(10);

/// Hands every event to each observer in turn.
struct AllOf(Vec<Arc<dyn RunObserver>>);

impl RunObserver for AllOf {
    fn observe(&self, record: &EventRecord) {
        for observer in &self.0 {
            observer.observe(record);
        }
    }
}

struct Inputs {
    location: Arc<PlanLocation>,
    settings: Arc<RunSettings>,
    snapshot: Arc<PlanSnapshot>,
}

/// What watches the run from outside the tree.
struct Observers {
    console: Arc<Console>,
    progress: Arc<Progress>,
    stream: Arc<EventStream>,
    hooks: Option<Arc<Hooks>>,
}

/// The inputs, the watchdog, the runtime and the observers, then the supervision tree until it
/// hands back the result, and the end.
pub(super) fn run(args: &RunArgs, logging: &LoggingArgs) -> ExitCode {
    let started = Instant::now();
    // Every record of the invocation is in this span, from the first: who started it, how.
    let run_id = uuid::Uuid::new_v4().to_string();
    let span = tracing::info_span!(
        "run",
        run_id = %run_id,
        plan = tracing::field::Empty,
        workspace = tracing::field::Empty
    );
    span.in_scope(|| {
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            pid = std::process::id(),
            args = ?std::env::args().collect::<Vec<_>>(),
            "ai-session-handler run"
        );
    });
    let inputs = match span.in_scope(|| read_inputs(args, started)) {
        Ok(inputs) => inputs,
        Err(exit) => return exit,
    };
    span.record("plan", inputs.location.plan_path.as_str());
    span.record("workspace", inputs.location.workspace.as_str());
    // The caller's descriptors are not the workers': marked close-on-exec once.
    process_group::keep_inherited_descriptors_from_workers();
    start_watchdog(&inputs.location, &span, &run_id, logging);
    if let Err(error) = job_control::start() {
        tracing::warn!(%error, "cannot catch SIGTSTP; Ctrl-Z would stop the handler alone");
    }
    let threads = start_runtime().and_then(|runtime| {
        let observers = Observers::start(args, &inputs, runtime.handle())
            .map_err(|error| format!("cannot start the output threads: {error}"))?;
        Ok((observers, runtime))
    });
    let (observers, runtime) = match threads {
        Ok(threads) => threads,
        Err(message) => {
            watchdog::finish();
            let exit = ExitCode::AgentFailed;
            print_error(args.json, exit, &message, Some(&inputs.location), started);
            return exit;
        }
    };
    let (done, result) = oneshot::channel();
    let tree = SupervisorArgs {
        run_id,
        span,
        location: inputs.location.clone(),
        snapshot: inputs.snapshot.clone(),
        settings: inputs.settings.clone(),
        observer: observers.all(),
        console: (!args.quiet).then(|| observers.console.clone()),
        done,
    };
    let result = runtime.block_on(supervise(tree, result));
    end(args, started, &inputs, observers, runtime, result)
}

/// Reads and checks every input of the run; a problem is printed and its exit code returned.
fn read_inputs(args: &RunArgs, started: Instant) -> Result<Inputs, ExitCode> {
    let mut located = None;
    let checked = (|| -> Result<Inputs, InputError> {
        let location = locate(args.plan.path())?;
        located = Some(location.clone());
        generated_paths_are_real(&location)?;
        let overrides = RunOverrides {
            agent_cmd: args.agent_cmd.clone(),
            max_phases: args.max_phases,
            timeout_seconds: args.timeout,
            idle_timeout_seconds: args.idle_timeout,
            stop_on_regex: args.stop_on_regex.clone(),
            flags: RecoveryFlags {
                retry_stopped: args.retry_stopped,
                accept_plan_change: args.accept_plan_change,
            },
            retries: args.retries,
            wait: args.wait,
            hooks: args.hooks.clone(),
            no_verify: args.no_verify,
            no_record_changes: args.no_record_changes,
            verify_timeout_seconds: args.verify_timeout,
            max_tokens: args.max_tokens,
            max_cost_usd: args.max_cost,
        };
        let (mut settings, snapshot, missing) = inputs_and_missing_programs(&location, &overrides)?;
        if let Some(problem) = missing
            .agents
            .into_iter()
            .chain(missing.interpreters)
            .next()
        {
            return Err(problem);
        }
        let in_a_hook = std::env::var_os(HOOK_MARKER).is_some();
        settings.hooks_off = hooks_off(in_a_hook, settings.hooks.len());
        if let Some(reason) = &settings.hooks_off {
            settings.hooks.clear();
            Output::stderr(report::prefixed("warning", std::slice::from_ref(reason))).print();
        }
        Ok(Inputs {
            location: Arc::new(location),
            settings: Arc::new(settings),
            snapshot: Arc::new(snapshot),
        })
    })();
    checked.map_err(|error| {
        let exit = error.exit_code();
        print_error(
            args.json,
            exit,
            &error.to_string(),
            located.as_ref(),
            started,
        );
        exit
    })
}

/// The programs a run needs that are not installed: a missing agent program is input to fix,
/// not an attempt to record; so is a check's missing interpreter, unless the checks are skipped.
pub(super) struct MissingPrograms {
    pub(super) agents: Vec<InputError>,
    pub(super) interpreters: Vec<InputError>,
}

/// The settings and plan of a run, once every input `run` checks before it locks or writes
/// anything is valid (the plan's warnings are printed), with the missing programs left to the
/// caller (`check --prompt` only notes a missing agent: the prompt does not depend on it).
pub(super) fn inputs_and_missing_programs(
    location: &PlanLocation,
    overrides: &RunOverrides,
) -> Result<(RunSettings, PlanSnapshot, MissingPrograms), InputError> {
    let config = read_config(location)?;
    let settings = effective_settings(location, &config, overrides)?;
    let snapshot = read_plan_snapshot(location)?;
    report::plan_warnings(&snapshot).print();
    // Every phase's workspace, not only the next one: `check` and `run` must agree on what is
    // valid before anything is locked or written.
    for phase in &snapshot.plan.phases {
        execution_workspace_of(location, phase)?;
    }
    let missing = MissingPrograms {
        agents: agent_program_problems(location, &snapshot, &settings),
        interpreters: if settings.verify {
            verify_interpreter_problems(location, &snapshot)
        } else {
            Vec::new()
        },
    };
    Ok((settings, snapshot, missing))
}

/// Starts the watchdog before any worker exists — every worker (and hook) registers its
/// group with it, so a SIGKILLed handler leaves no worker running. What it stops carries the
/// invocation's id, and is logged to the log file when the handler's warnings go there.
fn start_watchdog(
    location: &PlanLocation,
    span: &tracing::Span,
    run_id: &str,
    logging: &LoggingArgs,
) {
    let warns =
        span.in_scope(|| tracing::enabled!(target: WATCHDOG_LOG_TARGET, tracing::Level::WARN));
    let log = logging
        .log_file
        .as_ref()
        .filter(|_| warns)
        .map(|path| watchdog::WatchdogLog {
            // Absolute: the file the handler opened, whatever the watchdog's directory.
            path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            json: logging.log_format == LogFormat::Json,
        });
    let events = Path::new(&location.layout.dir).join("events.jsonl");
    span.in_scope(|| match watchdog::start(events, run_id, log) {
        Ok(pid) => tracing::info!(pid, "watchdog started"),
        Err(error) => tracing::warn!(
            %error,
            "cannot start the watchdog; a worker would outlive a SIGKILLed handler"
        ),
    });
}

impl Observers {
    fn start(
        args: &RunArgs,
        inputs: &Inputs,
        runtime: &tokio::runtime::Handle,
    ) -> std::io::Result<Self> {
        let console = Arc::new(Console::start(args.json)?);
        let stream = Arc::new(EventStream::start(&inputs.location.layout.dir)?);
        // A terminal that cannot redraw a line (TERM=dumb) gets what a log gets.
        let terminal = crate::report::terminal::redraws(crate::report::terminal::Stream::Stderr);
        let mode = match (args.quiet, terminal) {
            (false, _) => ProgressMode::Lines,
            (true, true) => ProgressMode::StatusLine,
            (true, false) => ProgressMode::Quiet,
        };
        let progress = Arc::new(Progress::new(mode, console.clone(), terminal, runtime));
        // A hook that failed is reported like any other event, except to the hooks.
        let reporter: Arc<dyn RunObserver> =
            Arc::new(AllOf(vec![progress.clone(), stream.clone()]));
        // Every workspace resolved when the inputs were checked.
        let phases = inputs
            .snapshot
            .plan
            .phases
            .iter()
            .map(|phase| HookPhase {
                id: phase.id.clone(),
                title: phase.title.clone(),
                execution_workspace: execution_workspace_of(&inputs.location, phase)
                    .unwrap_or_default(),
            })
            .collect();
        let hooks = Hooks::start(
            inputs.settings.hooks.clone(),
            HookContext::new(&inputs.location, phases),
            reporter,
            stream.clone(),
        );
        let hooks = match hooks {
            Ok(hooks) => hooks.map(Arc::new),
            Err(error) => {
                tracing::warn!(%error, "cannot start the hook thread; no hook will run");
                None
            }
        };
        Ok(Self {
            console,
            progress,
            stream,
            hooks,
        })
    }

    fn all(&self) -> Arc<dyn RunObserver> {
        let mut observers: Vec<Arc<dyn RunObserver>> =
            vec![self.progress.clone(), self.stream.clone()];
        if let Some(hooks) = &self.hooks {
            observers.push(hooks.clone());
        }
        Arc::new(AllOf(observers))
    }
}

fn start_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ash-worker")
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))
}

async fn supervise(
    tree: SupervisorArgs,
    result: oneshot::Receiver<RunResult>,
) -> Result<RunResult, String> {
    if let Err(error) = Actor::spawn(None, RunSupervisor, tree).await {
        return Err(format!("cannot start the run supervisor: {error}"));
    }
    result
        .await
        .map_err(|_| "internal error: the run supervisor stopped without an exit code".into())
}

/// After the tree: the hooks of the run's end, the report, the watchdog's end.
fn end(
    args: &RunArgs,
    started: Instant,
    inputs: &Inputs,
    observers: Observers,
    runtime: tokio::runtime::Runtime,
    result: Result<RunResult, String>,
) -> ExitCode {
    let invocation = args.invocation();
    let Inputs {
        location, snapshot, ..
    } = inputs;
    let Observers {
        progress,
        stream,
        hooks,
        ..
    } = observers;
    // The tree stopped its signal intake before it handed the result over: with hooks still
    // to run, the signals are ours from here on. The intake's state, which gives the signals
    // their default action back when it is dropped, may only go with the runtime, so the
    // handler is installed again once the runtime is gone.
    let caught = hooks
        .as_ref()
        .map(|_| signal_disposition::catch(&STOPPING_SIGNALS));
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_LIMIT);
    if let Some(caught) = &caught {
        caught.reinstall();
    }
    let ended = result.map(|mut result| {
        if result.next_phase.is_none() && matches!(result.end, RunEnd::Refused(_)) {
            // A refused run never took the state over: read it (unchanged) for the phase a
            // caller continues with.
            result.next_phase = read_state(&location.layout)
                .ok()
                .and_then(|state| next_pending(&state, &snapshot.phase_ids()).map(str::to_owned));
        }
        let facts = end_facts(location, &inputs.settings.budget, &result.end);
        let next = report::next_step(&result.end, &invocation, &facts);
        if let Some(hooks) = &hooks {
            let first = report::end_message(&result.end, &facts);
            hooks.run_ended(&result, first, next.as_ref());
        }
        (result, facts, next)
    });
    let interrupted = ended
        .as_ref()
        .is_ok_and(|(result, _, _)| matches!(result.exit(), ExitCode::Signal(_)));
    progress.finish(!interrupted);
    stream.finish();
    if hooks.is_none() {
        watchdog::finish();
    }
    let exit = match ended {
        Ok((result, facts, next)) => {
            // `next:` is the last line: a hook that fails at the run's end warns before it.
            let (report, last) = if args.json {
                let context = RunJsonContext {
                    invocation: &invocation,
                    location,
                    snapshot,
                    elapsed: started.elapsed(),
                    facts: &facts,
                };
                let object = report::RunJson::of(&result, &progress.ledger().view(), &context);
                (Output::json(&object.to_json()), None)
            } else {
                (
                    report::end_report(&result.end, &facts),
                    next.map(|step| Output::stderr(vec![step.line()])),
                )
            };
            let printed = match (&hooks, &caught) {
                (Some(hooks), Some(caught)) => print_while_hooks_run(report, hooks, caught),
                _ => {
                    report.print();
                    true
                }
            };
            if printed && let Some(last) = last {
                last.print();
            }
            result.exit()
        }
        Err(message) => {
            let exit = ExitCode::AgentFailed;
            print_error(args.json, exit, &message, Some(location), started);
            // Hooks fired before the failure still run (bounded); no end event can be told.
            if let (Some(hooks), Some(caught)) = (&hooks, &caught) {
                hooks.finish(caught);
            }
            exit
        }
    };
    if hooks.is_some() {
        // The hooks' `hook-failed` events came after the stream's first drain; the hooks were
        // registered with the watchdog until they ended.
        stream.finish();
        watchdog::finish();
    }
    drop(caught);
    exit
}

/// Prints the report on a thread of its own while the hooks run, and waits for both — for
/// the report only until a signal: a report blocked on a stalled stdout must not keep a
/// handler asked to stop. Whether the report was printed.
fn print_while_hooks_run(report: Output, hooks: &Hooks, caught: &CaughtSignals) -> bool {
    let printer = std::thread::Builder::new()
        .name("ash-report".into())
        .spawn(move || report.print());
    hooks.finish(caught);
    let Ok(printer) = printer else {
        tracing::warn!("cannot start the report thread; the report is not printed");
        return false;
    };
    while !printer.is_finished() {
        if caught.count() > 0 {
            tracing::info!("interrupted while the report is printed; exiting without it");
            return false;
        }
        std::thread::sleep(PRINT_POLL);
    }
    printer.join().is_ok()
}

/// What the run's end report and next step need beyond the run's end: when a scheduled retry
/// is due, what the watchdog of a dead handler did to the abandoned attempt it refused, and
/// the cap the plan's recorded attempts have reached.
fn end_facts(location: &PlanLocation, caps: &BudgetCaps, end: &RunEnd) -> report::EndFacts {
    let state = read_state(&location.layout).ok();
    let retry_due = state
        .as_ref()
        .and_then(|state| state.retry_schedule.as_ref())
        .map(|schedule| schedule.not_before.to_string());
    let budget_reached = state
        .as_ref()
        .and_then(|state| caps.reached(Spent::of_state(state)));
    let watchdog_stop = if let RunEnd::Refused(refused) = end
        && let Refusal::UnresolvedAttempt(attempt) = &refused.refusal
    {
        history::watchdog_stop(&location.layout, &attempt.id)
    } else {
        None
    };
    report::EndFacts {
        retry_due,
        watchdog_stop,
        budget_reached,
    }
}

/// An error before or around the run: on stderr, and with `--json` as the one result object.
fn print_error(
    json: bool,
    exit: ExitCode,
    message: &str,
    location: Option<&PlanLocation>,
    started: Instant,
) {
    if json {
        print_json_error(exit, message, location, started);
    }
    Output::error(message).print();
}

/// The `run --json` object of a run that never started: `error` is `error: <message>`.
pub(super) fn print_json_error(
    exit: ExitCode,
    message: &str,
    location: Option<&PlanLocation>,
    started: Instant,
) {
    let object = report::RunJson::error(exit, message, location, started.elapsed());
    Output::json(&object.to_json()).print();
}
