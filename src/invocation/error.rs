//! Every way a command's input can be wrong, named for what to fix. All of them mean "nothing
//! was launched, nothing changed": exit 5.

use std::io;

use crate::domain::config::rules::ConfigError;
use crate::domain::exit_code::ExitCode;
use crate::domain::plan::PlanError;
use crate::domain::state::StateError;
use crate::domain::stop_regex::StopPatternError;
use crate::domain::template::TemplateError;
use crate::platform::locate::{LocateError, WorkspaceProblem};
use crate::platform::locks::LockError;
use crate::platform::program::{ProgramProblem, ProgramRole};
use crate::platform::regular_file::ReadFileError;

/// A command's input (plan, config, template, workspace, stored state, lock) is not usable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error(transparent)]
    Locate(#[from] LocateError),
    #[error("{path}: cannot read plan: {source}")]
    PlanUnreadable { path: String, source: ReadFileError },
    /// Said as the first error (what `run` reports); `check` lists `more` too.
    #[error("{}", .error.with_source(.path))]
    Plan {
        path: String,
        error: PlanError,
        more: Vec<PlanError>,
    },
    #[error("{path}: {error}")]
    Config { path: String, error: ConfigError },
    #[error("{path}: cannot read config: {source}")]
    ConfigUnreadable { path: String, source: ReadFileError },
    #[error("--agent-cmd is required when config does not provide agent_cmd")]
    MissingAgentCmd,
    #[error("{origin}: {error}")]
    Template {
        origin: String,
        error: TemplateError,
    },
    /// Refused before anything is written instead of becoming a `launch-failed` attempt.
    #[error("{origin}: {problem}")]
    AgentProgram {
        origin: String,
        problem: ProgramProblem,
    },
    /// The agent program is a provider wrapper whose launcher would not be found or run.
    #[error(
        "{origin}: agent program '{wrapper}' starts its launcher from PATH: {}",
        .problem.describe(ProgramRole::Launcher)
    )]
    WrapperLauncher {
        origin: String,
        wrapper: String,
        problem: ProgramProblem,
    },
    #[error(
        "{plan}:{line}: phase {phase_id} verify check {index}: {}",
        .problem.describe(ProgramRole::VerifyInterpreter)
    )]
    VerifyInterpreter {
        plan: String,
        line: usize,
        phase_id: String,
        index: usize,
        problem: ProgramProblem,
    },
    #[error("{origin}: {error}")]
    StopPattern {
        origin: String,
        error: StopPatternError,
    },
    #[error("{plan}:{line}: phase {phase_id} workspace '{declared}' {}", .problem.describe())]
    Workspace {
        plan: String,
        line: usize,
        phase_id: String,
        declared: String,
        problem: WorkspaceProblem,
    },
    #[error("phase {0} does not exist in plan")]
    PhaseMissing(String),
    #[error("--phase {phase_id}: the plan has no such phase; its phases: {}", .known.join(", "))]
    UnknownPhase {
        phase_id: String,
        known: Vec<String>,
    },
    #[error("--phase {0}: the phase is complete; no attempt would run it")]
    PhaseComplete(String),
    #[error("phase {0} is not in the plan")]
    PhaseNotInPlan(String),
    #[error(
        "{path}: {what}; ai-session-handler writes its generated files only into real directories under the plan workspace (remove it, or replace it with a {expected})"
    )]
    GeneratedPath {
        path: String,
        what: &'static str,
        expected: &'static str,
    },
    #[error("{path}: {error}")]
    State { path: String, error: StateError },
    #[error("{path}: cannot read state: {source}")]
    StateUnreadable { path: String, source: ReadFileError },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(
        "active attempt execution workspace differs from the selected phase: the attempt ran in {recorded}, phase {phase_id} now resolves to {current}; restore the original workspace declaration before retrying"
    )]
    RetryWorkspaceMoved {
        recorded: String,
        phase_id: String,
        current: String,
    },
    #[error("cannot read boot id: {0}")]
    BootIdUnreadable(io::Error),
    #[error("cannot check whether worker pid {pid} is alive: {source}")]
    LivenessUnknown { pid: u32, source: io::Error },
    #[error(
        "attempt {attempt_id} worker pid {pid} is still alive; stop it and inspect partial changes before retrying"
    )]
    WorkerAlive { attempt_id: String, pid: u32 },
}

impl InputError {
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::InvalidInput
    }
}
