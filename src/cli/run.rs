//! `run`: validates every input, then hands the invocation to the actor tree
//! ([`crate::actors::run_supervisor`]) and waits for its exit code.

use std::sync::Arc;

use ractor::Actor;
use tokio::sync::oneshot;

use super::EXIT_INVALID;
use super::args::RunArgs;
use crate::actors::run_supervisor::{EXIT_FAILED, RunArgs as SupervisorArgs, RunSupervisor};
use crate::domain::selection::RecoveryFlags;
use crate::invocation::{
    RunOverrides, effective_settings, execution_workspace_of, read_config, read_plan_snapshot,
};
use crate::platform::locate::locate_plan;
use crate::report::Output;

pub fn run(args: &RunArgs) -> i32 {
    let prepared = (|| {
        let location = locate_plan(&args.plan)?;
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
        Ok::<_, String>((location, settings, snapshot))
    })();
    let (location, settings, snapshot) = match prepared {
        Ok(prepared) => prepared,
        Err(message) => {
            Output::error(message).print();
            return EXIT_INVALID;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("ash-worker")
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            Output::error(format!("cannot start the async runtime: {error}")).print();
            return EXIT_FAILED;
        }
    };
    runtime.block_on(async move {
        let (done, exit_code) = oneshot::channel();
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
            Output::error(format!("cannot start the run supervisor: {error}")).print();
            return EXIT_FAILED;
        }
        exit_code.await.unwrap_or_else(|_| {
            Output::error("internal error: the run supervisor stopped without an exit code")
                .print();
            EXIT_FAILED
        })
    })
}
