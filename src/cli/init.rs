//! `init`: makes the current directory a plan workspace (config, plans directory, `.gitignore`)
//! and says what it created, what `plans/` is for, and — where the example agent is missing —
//! what would run instead.

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
            output.stdout.push(format!(
                "created {}/ (generated state of this workspace's plans: state, prompts, transcripts, outcomes, events; plan files go elsewhere, e.g. docs/plans/)",
                created.plans_dir.display()
            ));
            output.stdout.push(if created.gitignore_kept {
                format!(
                    "kept {} (it exists; it should ignore plans/)",
                    created.gitignore_path.display()
                )
            } else {
                format!(
                    "created {} (keeps plans/ out of git; commit config.json)",
                    created.gitignore_path.display()
                )
            });
            if let Some(problem) = &created.agent_problem {
                // The example is a starting point: say plainly that it does not run here, and
                // what would.
                output.stdout.push(format!(
                    "note: the example agent_cmd \"codex exec\" will not run here: {problem}; edit agent_cmd in {} (or pass --agent-cmd to run and check) before the first run",
                    created.config_path.display()
                ));
                output.stdout.push(if created.wrappers.is_empty() {
                    "note: no provider wrapper is installed (cargo install --path . installs ai-session-handler-claude-high, -claude-medium and -codex-high; docs/providers.md)".to_owned()
                } else {
                    format!(
                        "note: installed provider wrappers, each a complete agent_cmd: {} (each runs a launcher you install: docs/providers.md)",
                        created.wrappers.join(", ")
                    )
                });
                output.stdout.push(
                    "note: or a script agent: any program that reads the prompt on stdin and ends its output with one result block (examples/demo-agent.sh; docs/worker-protocol.md)".to_owned(),
                );
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
