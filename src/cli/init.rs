//! `init`: makes the current directory a plan workspace (config and plans directory) and says
//! what it created.

use crate::domain::exit_code::ExitCode;
use crate::invocation::init::init_current_dir;
use crate::report::Output;

pub(super) fn run() -> ExitCode {
    match init_current_dir() {
        Ok(created) => {
            let mut output = Output::default();
            output
                .stdout
                .push(format!("created {}", created.config_path.display()));
            output
                .stdout
                .push(format!("created {}", created.plans_dir.display()));
            if let Some(problem) = &created.agent_problem {
                // The example is a starting point: say plainly that it does not run here.
                output.stdout.push(format!(
                    "note: the example agent_cmd \"codex exec\" will not run here: {problem}; edit agent_cmd in {} (or pass --agent-cmd to run and check) before the first run",
                    created.config_path.display()
                ));
            }
            output.print();
            ExitCode::Success
        }
        Err(error) => {
            Output::error(error.to_string()).print();
            ExitCode::InvalidInput
        }
    }
}
