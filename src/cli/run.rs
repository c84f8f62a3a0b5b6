//! `run`: validates every input, hands the invocation to the actor tree
//! ([`crate::actors::run_supervisor`]), then prints how it ended and returns its exit code.

use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
use tokio::sync::oneshot;

use super::args::RunArgs;
use crate::actors::run_supervisor::{RunArgs as SupervisorArgs, RunResult, RunSupervisor};
use crate::domain::exit_code::ExitCode;
use crate::domain::selection::RecoveryFlags;
use crate::invocation::{
    InputError, RunOverrides, effective_settings, execution_workspace_of, locate, read_config,
    read_plan_snapshot,
};

use crate::platform::watchdog;
use crate::report::{self, Output};

/// How long the runtime may take to wind down after the result is in: only abandoned tasks
/// (a prompt write to a worker that never read it) can still be running then.
const RUNTIME_SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

pub fn run(args: &RunArgs) -> ExitCode {
    let prepared = (|| {
        let location = locate(&args.plan)?;
        let config = read_config(&location)?;
        let overrides = RunOverrides {
            agent_cmd: args.agent_cmd.clone(),
            max_phases: args.max_phases,
            timeout_seconds: args.timeout,
            idle_timeout_seconds: args.idle_timeout,
            stop_on_regex: args.stop_on_regex.clone(),
            quiet: args.quiet,
            flags: RecoveryFlags {
                retry_stopped: args.retry_stopped,
                accept_plan_change: args.accept_plan_change,
            },
        };
        let settings = effective_settings(&location, &config, &overrides)?;
        let snapshot = read_plan_snapshot(&location)?;
        // Every phase's workspace, not only the next one: `check` and `run` must agree on
        // what is valid before anything is locked or written.
        for phase in &snapshot.plan.phases {
            execution_workspace_of(&location, phase)?;
        }
        Ok::<_, InputError>((location, settings, snapshot))
    })();
    let (location, settings, snapshot) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            Output::error(error.to_string()).print();
            return error.exit_code();
        }
    };
    // Before any worker exists: every worker registers its group with it, so a SIGKILLed
    // handler leaves no worker running.
    match watchdog::start() {
        Ok(pid) => tracing::info!(pid, "watchdog started"),
        Err(error) => tracing::warn!(
            %error,
            "cannot start the watchdog; a worker would outlive a SIGKILLed handler"
        ),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ash-worker")
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            watchdog::finish();
            Output::error(format!("cannot start the async runtime: {error}")).print();
            return ExitCode::AgentFailed;
        }
    };
    let result = runtime.block_on(async move {
        let (done, result) = oneshot::channel();
        let spawned = Actor::spawn(
            None,
            RunSupervisor,
            SupervisorArgs {
                location: Arc::new(location),
                snapshot: Arc::new(snapshot),
                settings: Arc::new(settings),
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
    watchdog::finish();
    match result {
        Ok(RunResult { end, exit }) => {
            report::run_end(&end).print();
            exit
        }
        Err(message) => {
            Output::error(message).print();
            ExitCode::AgentFailed
        }
    }
}
