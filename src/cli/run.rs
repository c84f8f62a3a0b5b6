//! `run`: validates every input, hands the invocation to the actor tree
//! ([`crate::actors::run_supervisor`]) with the run's observers (progress on stderr, the event
//! stream), then prints how it ended — as lines, or as one JSON object with `--json` — and
//! returns its exit code.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::Actor;
use tokio::sync::oneshot;

use super::args::RunArgs;
use super::event_stream::EventStream;
use super::progress::{Progress, ProgressMode};
use crate::actors::observer::RunObserver;
use crate::actors::run_supervisor::{RunArgs as SupervisorArgs, RunSupervisor};
use crate::domain::events::EventRecord;
use crate::domain::exit_code::ExitCode;
use crate::domain::selection::RecoveryFlags;
use crate::invocation::{
    InputError, RunOverrides, agent_program_problems, effective_settings, execution_workspace_of,
    generated_paths_are_real, locate, read_config, read_plan_snapshot,
};
use crate::platform::console::Console;
use crate::platform::{spawn, watchdog};
use crate::report::{self, Output};

/// How long the runtime may take to wind down after the result is in: only abandoned tasks
/// (a prompt write to a worker that never read it) can still be running then.
const RUNTIME_SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// Hands every event to each observer in turn.
struct Observers(Vec<Arc<dyn RunObserver>>);

impl RunObserver for Observers {
    fn observe(&self, record: &EventRecord) {
        for observer in &self.0 {
            observer.observe(record);
        }
    }
}

pub fn run(args: &RunArgs) -> ExitCode {
    let started = Instant::now();
    let prepared = (|| {
        let location = locate(&args.plan)?;
        generated_paths_are_real(&location)?;
        let config = read_config(&location)?;
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
        };
        let settings = effective_settings(&location, &config, &overrides)?;
        let snapshot = read_plan_snapshot(&location)?;
        // Every phase's workspace, not only the next one: `check` and `run` must agree on
        // what is valid before anything is locked or written.
        for phase in &snapshot.plan.phases {
            execution_workspace_of(&location, phase)?;
        }
        // A missing agent program is input to fix, not an attempt to record.
        if let Some(problem) = agent_program_problems(&location, &snapshot, &settings)
            .into_iter()
            .next()
        {
            return Err(problem);
        }
        Ok::<_, InputError>((location, settings, snapshot))
    })();
    let (location, settings, snapshot) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            let exit = error.exit_code();
            print_error(args.json, exit, &error.to_string(), started);
            return exit;
        }
    };
    // The caller's descriptors are not the workers' (issue 23): marked close-on-exec once.
    spawn::keep_inherited_descriptors_from_workers();
    // Before any worker exists — every worker registers its group with it, so a SIGKILLed
    // handler leaves no worker running — and before any thread exists, so that it is a
    // plain fork rather than a re-execution of this binary.
    let watchdog_options = watchdog::StartOptions {
        events_path: Some(Path::new(&location.layout.dir).join("events.jsonl")),
    };
    match watchdog::start(watchdog_options) {
        Ok((pid, how)) => tracing::info!(pid, ?how, "watchdog started"),
        Err(error) => tracing::warn!(
            %error,
            "cannot start the watchdog; a worker would outlive a SIGKILLed handler"
        ),
    }
    let threads = Console::start(args.json).and_then(|console| {
        let console = Arc::new(console);
        let stream = Arc::new(EventStream::start(&location.layout.dir)?);
        Ok((console, stream))
    });
    let (console, stream) = match threads {
        Ok(threads) => threads,
        Err(error) => {
            watchdog::finish();
            let message = format!("cannot start the output threads: {error}");
            print_error(args.json, ExitCode::AgentFailed, &message, started);
            return ExitCode::AgentFailed;
        }
    };
    let mode = match (args.quiet, std::io::stderr().is_terminal()) {
        (false, _) => ProgressMode::Lines,
        (true, true) => ProgressMode::StatusLine,
        (true, false) => ProgressMode::Quiet,
    };
    let progress = Arc::new(Progress::new(mode, console.clone()));
    let observers: Arc<dyn RunObserver> =
        Arc::new(Observers(vec![progress.clone(), stream.clone()]));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ash-worker")
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            watchdog::finish();
            let message = format!("cannot start the async runtime: {error}");
            print_error(args.json, ExitCode::AgentFailed, &message, started);
            return ExitCode::AgentFailed;
        }
    };
    let echo = (!args.quiet).then_some(console);
    let result = runtime.block_on(async move {
        let (done, result) = oneshot::channel();
        let spawned = Actor::spawn(
            None,
            RunSupervisor,
            SupervisorArgs {
                location: Arc::new(location),
                snapshot: Arc::new(snapshot),
                settings: Arc::new(settings),
                observer: observers,
                console: echo,
                done,
            },
        )
        .await;
        if let Err(error) = spawned {
            return Err(format!("cannot start the run supervisor: {error}"));
        }
        result
            .await
            .map_err(|_| "internal error: the run supervisor stopped without an exit code".into())
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_LIMIT);
    progress.finish();
    stream.finish();
    watchdog::finish();
    match result {
        Ok(result) => {
            if args.json {
                let object = report::run_json(&result, &progress.ledger(), started.elapsed());
                Output::print_json(&object.to_string());
            } else {
                report::run_end(&result.end).print();
            }
            result.exit
        }
        Err(message) => {
            print_error(args.json, ExitCode::AgentFailed, &message, started);
            ExitCode::AgentFailed
        }
    }
}

/// An error before or around the run: `error: …` on stderr, and with `--json` also the one
/// result object on stdout.
fn print_error(json: bool, exit: ExitCode, message: &str, started: Instant) {
    if json {
        print_json_error(exit, message, started);
    }
    Output::error(message).print();
}

/// The `run --json` object of a run that never started: `error` is `error: <message>`.
pub(super) fn print_json_error(exit: ExitCode, message: &str, started: Instant) {
    Output::print_json(&report::run_json_error(exit, message, started.elapsed()).to_string());
}
