//! What a command works from (plan snapshot, config, settings, state), each read and validated
//! once before any lock is taken or state is touched; `run`, `check` and `status` share these
//! loaders so they never disagree about what is valid.

mod error;
pub(crate) mod history;
pub(crate) mod init;
pub(crate) mod probe;

use std::path::Path;
use std::sync::Arc;

pub(crate) use error::InputError;

use crate::domain::budget::BudgetCaps;
use crate::domain::config::{Config, parse_config};
use crate::domain::hooks::Hook;
use crate::domain::identity::is_alive;
use crate::domain::outcome::{OutcomeError, OutcomeRecord};
use crate::domain::plan::{ParsedPlan, Phase, near_miss_headings, parse_plan_reporting_all};
use crate::domain::plan_key::sha256_hex;
use crate::domain::rate_limit::RateLimitPolicy;
use crate::domain::retry::RetryPolicy;
use crate::domain::selection::{PlanFacts, RecoveryFlags};
use crate::domain::state::{ActiveAttempt, AttemptStatus, LastRun, State, StateLayout};
use crate::domain::stop_regex::StopPatterns;
use crate::domain::template::CommandTemplate;
use crate::domain::verification::FailedCheck;
use crate::platform::locate::{
    PlanLocation, locate_plan, locate_plan_even_if_gone, resolve_execution_workspace,
};
use crate::platform::regular_file::{ReadFileError, read_regular_file};
use crate::platform::{proc, program};

// The largest inputs a command reads: far beyond any real file of their kind, and small enough
// that a runaway file (a sparse plan claiming gigabytes, a device behind a symlink) is refused
// by its size before a byte is read.
const MAX_PLAN_BYTES: u64 = 16 * 1024 * 1024;
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// Four times what the runner writes ([`crate::domain::state::MAX_STATE_BYTES`]): a state an
/// older version wrote can hold an agent's 16 MiB result twice, JSON-escaped at up to six bytes
/// per byte; it stays readable, and is cut down on its next write.
const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;
/// An outcome's summary is a result body (at most 16 MiB) or a diagnostic.
const MAX_OUTCOME_BYTES: u64 = 32 * 1024 * 1024;

pub(crate) fn locate(plan_arg: &Path) -> Result<PlanLocation, InputError> {
    Ok(locate_plan(plan_arg)?)
}

/// Like [`locate`], but a plan file that is gone is still located where it was when state is
/// recorded for it, so that `status` can report that state (and then the error).
pub(crate) fn locate_for_report(plan_arg: &Path) -> Result<PlanLocation, InputError> {
    match locate_plan(plan_arg) {
        Ok(location) => Ok(location),
        Err(error) => match locate_plan_even_if_gone(plan_arg) {
            Ok(location) if is_file(&location.layout.state_path()) => Ok(location),
            _ => Err(error.into()),
        },
    }
}

pub(crate) fn is_file(path: &str) -> bool {
    Path::new(path).is_file()
}

/// One read of the plan bytes, hashed and parsed: the immutable snapshot every phase of an
/// invocation runs from. `path` is canonical; `warnings` are `warning:` lines that do not make
/// the plan invalid (a heading that is almost a phase heading).
#[derive(Clone, Debug)]
pub(crate) struct PlanSnapshot {
    pub path: String,
    pub sha256: String,
    pub plan: ParsedPlan,
    pub warnings: Vec<String>,
}

impl PlanSnapshot {
    pub(crate) fn facts(&self) -> PlanFacts<'_> {
        PlanFacts {
            path: &self.path,
            sha256: &self.sha256,
            phase_ids: self.phase_ids(),
        }
    }

    pub(crate) fn phase_ids(&self) -> Vec<&str> {
        self.plan
            .phases
            .iter()
            .map(|phase| phase.id.as_str())
            .collect()
    }
}

pub(crate) fn read_plan_snapshot(location: &PlanLocation) -> Result<PlanSnapshot, InputError> {
    let bytes = read_plan_bytes(location)?;
    let plan = parse_plan_reporting_all(&bytes).map_err(|errors| InputError::Plan {
        path: location.plan_path.clone(),
        error: errors.first,
        more: errors.more,
    })?;
    // Not an error (such a heading is ordinary text), but rarely what its author meant: the
    // commands that act on the plan show these as `warning:` lines.
    let warnings = near_miss_headings(&bytes)
        .iter()
        .map(|miss| {
            format!(
                "{}:{}: {}; its text belongs to what comes before it",
                location.plan_path,
                miss.line,
                miss.describe()
            )
        })
        .collect();
    Ok(PlanSnapshot {
        path: location.plan_path.clone(),
        sha256: sha256_hex(&bytes),
        plan,
        warnings,
    })
}

fn read_plan_bytes(location: &PlanLocation) -> Result<Vec<u8>, InputError> {
    let path = Path::new(&location.plan_path);
    read_regular_file(path, MAX_PLAN_BYTES).map_err(|source| InputError::PlanUnreadable {
        path: location.plan_path.clone(),
        source,
    })
}

/// Hashes the plan file as it is now (the checkpoint before each later launch).
pub(crate) fn current_plan_hash(location: &PlanLocation) -> Result<String, InputError> {
    read_plan_bytes(location).map(|bytes| sha256_hex(&bytes))
}

/// A missing config file means defaults.
pub(crate) fn read_config(location: &PlanLocation) -> Result<Config, InputError> {
    match read_regular_file(Path::new(&location.config_path), MAX_CONFIG_BYTES) {
        Ok(bytes) => parse_config(&bytes).map_err(|error| InputError::Config {
            path: location.config_path.clone(),
            error,
        }),
        Err(error) if error.is_not_found() => Ok(Config::default()),
        Err(source) => Err(InputError::ConfigUnreadable {
            path: location.config_path.clone(),
            source,
        }),
    }
}

/// Refuses a generated directory that is a symbolic link or not a directory, and a generated
/// file that is a link, before anything is written: a cloned repository could ship such links.
/// Missing ones are fine (the run creates them); the writes never follow a link either.
pub(crate) fn generated_paths_are_real(location: &PlanLocation) -> Result<(), InputError> {
    let layout = &location.layout;
    let root = format!("{}/.ai-session-handler", location.workspace);
    let dirs = [
        root.clone(),
        format!("{root}/plans"),
        layout.dir.clone(),
        layout.prompts_dir(),
        layout.transcripts_dir(),
        layout.outcomes_dir(),
    ];
    let files = [
        layout.state_path(),
        format!("{}/events.jsonl", layout.dir),
        format!("{}/events.jsonl.1", layout.dir),
    ];
    let kinds = dirs
        .into_iter()
        .map(|path| (path, true))
        .chain(files.into_iter().map(|path| (path, false)));
    for (path, directory) in kinds {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let expected = if directory {
            "directory"
        } else {
            "regular file"
        };
        let what = if meta.file_type().is_symlink() {
            "is a symbolic link"
        } else if directory && !meta.is_dir() {
            "is not a directory"
        } else {
            // A file that is there but is no regular file (a FIFO) is the reader's to refuse,
            // with its own words.
            continue;
        };
        return Err(InputError::GeneratedPath {
            path,
            what,
            expected,
        });
    }
    Ok(())
}

/// Reads `state.json` strictly (a missing file is the empty state).
pub(crate) fn read_state(layout: &StateLayout) -> Result<State, InputError> {
    let path = layout.state_path();
    match read_regular_file(Path::new(&path), MAX_STATE_BYTES) {
        Ok(bytes) => {
            State::from_json(&bytes, layout).map_err(|error| InputError::State { path, error })
        }
        Err(error) if error.is_not_found() => Ok(State::default()),
        Err(source) => Err(InputError::StateUnreadable { path, source }),
    }
}

/// The failed check of `last_run`, when it is `verification-failed`, from its outcome record,
/// for the prompt of the phase's next attempt. `None` otherwise, and when the record cannot be
/// read (logged: the prompt then goes without the section).
pub(crate) fn verification_failure_of(last_run: &LastRun) -> Option<FailedCheck> {
    if last_run.status != AttemptStatus::VerificationFailed {
        return None;
    }
    let path = last_run.outcome_path.as_deref()?;
    match read_outcome(path) {
        Ok(record) => record.verification_failure,
        Err(error) => {
            tracing::warn!(path, %error, "cannot read the failed check of the last attempt");
            None
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadOutcomeError {
    #[error(transparent)]
    Unreadable(#[from] ReadFileError),
    #[error(transparent)]
    Invalid(#[from] OutcomeError),
}

pub(crate) fn read_outcome(path: &str) -> Result<OutcomeRecord, ReadOutcomeError> {
    let bytes = read_regular_file(Path::new(path), MAX_OUTCOME_BYTES)?;
    Ok(OutcomeRecord::from_json(&bytes, path)?)
}

/// The phase's execution workspace; the error names the plan line to fix.
pub(crate) fn execution_workspace_of(
    location: &PlanLocation,
    phase: &Phase,
) -> Result<String, InputError> {
    resolve_execution_workspace(&location.workspace, &phase.workspace).map_err(|problem| {
        InputError::Workspace {
            plan: location.plan_path.clone(),
            line: phase.workspace_line,
            phase_id: phase.id.clone(),
            declared: phase.workspace.clone(),
            problem,
        }
    })
}

/// Whether `--retry-stopped` may resolve `attempt` and rerun its phase: the recorded
/// workspace must still be the phase's, and the recorded worker must not be positively alive.
/// A prepared attempt without identity is the operator's call: the runner neither guesses
/// nor signals.
pub(crate) fn abandoned_retry_allowed(
    location: &PlanLocation,
    snapshot: &PlanSnapshot,
    attempt: &ActiveAttempt,
) -> Result<(), InputError> {
    if let Some(phase) = snapshot.plan.phase(&attempt.phase.id) {
        let current = execution_workspace_of(location, phase)?;
        if current != attempt.execution_workspace {
            return Err(InputError::RetryWorkspaceMoved {
                recorded: attempt.execution_workspace.clone(),
                phase_id: phase.id.clone(),
                current,
            });
        }
    }
    let Some(identity) = &attempt.process else {
        return Ok(());
    };
    let boot_id = proc::boot_id().map_err(InputError::BootIdUnreadable)?;
    let observed = proc::stat(identity.pid).map_err(|source| InputError::LivenessUnknown {
        pid: identity.pid,
        source,
    })?;
    if is_alive(identity, &boot_id, observed.as_ref()) {
        return Err(InputError::WorkerAlive {
            attempt_id: attempt.id.clone(),
            pid: identity.pid,
        });
    }
    tracing::info!(pid = identity.pid, "recorded worker is gone; retry allowed");
    Ok(())
}

/// Why each agent program (of the primary template and of every fallback) would not be found
/// or run by `exec` in a phase's execution workspace — or, when it is one of the provider
/// wrappers, why the launcher the wrapper starts would not be (looked up the way the wrapper
/// will, on the `PATH` it inherits, and never run: a launcher may have side effects). `run`
/// refuses on the first, `check` lists them all. A program word holding a placeholder is left
/// to the launch; phases whose workspace does not resolve are skipped (that is its own error).
pub(crate) fn agent_program_problems(
    location: &PlanLocation,
    snapshot: &PlanSnapshot,
    settings: &RunSettings,
) -> Vec<InputError> {
    let mut workspaces: Vec<String> = Vec::new();
    for phase in &snapshot.plan.phases {
        if let Ok(workspace) = execution_workspace_of(location, phase)
            && !workspaces.contains(&workspace)
        {
            workspaces.push(workspace);
        }
    }
    let mut problems = Vec::new();
    for (template, origin) in settings.templates.iter().zip(&settings.template_origins) {
        let Some(program) = template.literal_program() else {
            continue;
        };
        let resolved = match resolve_everywhere(location, &workspaces, program) {
            Ok(resolved) => resolved,
            Err(problem) => {
                problems.push(InputError::AgentProgram {
                    origin: origin.clone(),
                    problem,
                });
                continue;
            }
        };
        let Some(launcher) = wrapper_launcher(&resolved) else {
            continue;
        };
        if let Err(problem) = resolve_everywhere(location, &workspaces, launcher) {
            problems.push(InputError::WrapperLauncher {
                origin: origin.clone(),
                wrapper: program.to_owned(),
                problem,
            });
        }
    }
    problems
}

/// Resolves `program` for a worker started in the plan workspace — or, when the lookup starts
/// from the working directory, in every one of `workspaces` (the first refusal wins): the
/// answer is the same everywhere otherwise. Returns the file found in the first place asked.
fn resolve_everywhere(
    location: &PlanLocation,
    workspaces: &[String],
    program: &str,
) -> Result<std::path::PathBuf, program::ProgramProblem> {
    let places: Vec<&str> = if program::depends_on_cwd(program) {
        workspaces.iter().map(String::as_str).collect()
    } else {
        vec![location.workspace.as_str()]
    };
    let mut found = None;
    for cwd in places {
        let path = program::resolve(program, Path::new(cwd))?;
        found.get_or_insert(path);
    }
    // No workspace resolved at all: the workspace errors say what is wrong.
    Ok(found.unwrap_or_default())
}

/// The launcher started by the wrapper at `path`, when it is one, also through a symlink.
fn wrapper_launcher(path: &Path) -> Option<&'static str> {
    let launcher_named = |path: &Path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .and_then(crate::wrapper::launcher_of)
    };
    launcher_named(path).or_else(|| launcher_named(&std::fs::canonicalize(path).ok()?))
}

/// The command-line values of `run` that override or extend the config.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunOverrides {
    pub agent_cmd: Option<String>,
    pub max_phases: Option<u64>,
    pub timeout_seconds: Option<f64>,
    pub idle_timeout_seconds: Option<f64>,
    pub stop_on_regex: Vec<String>,
    pub flags: RecoveryFlags,
    pub retries: Option<u32>,
    pub wait: bool,
    pub hooks: Vec<Hook>,
    pub no_verify: bool,
    pub no_record_changes: bool,
    pub verify_timeout_seconds: Option<f64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

/// The settings of a `run`: CLI values over the config.
#[derive(Clone, Debug)]
pub(crate) struct RunSettings {
    /// The primary agent template (`--agent-cmd` or `agent_cmd`), then the rate-limit
    /// fallbacks in order; never empty.
    pub templates: Vec<CommandTemplate>,
    /// Where each template came from, for messages: `--agent-cmd`, `<config>: agent_cmd`,
    /// `<config>: rate_limit.fallback_agent_cmds[i]`.
    pub template_origins: Vec<String>,
    pub max_phases: Option<u64>,
    pub timeout_seconds: Option<f64>,
    pub idle_timeout_seconds: Option<f64>,
    /// The stop regexes, then the rate-limit patterns, scanned as one set; a match says which
    /// kind it is (a stop regex wins a tie, having the lower index).
    pub stop_patterns: Arc<StopPatterns>,
    pub retry: RetryPolicy,
    pub rate_limit: RateLimitPolicy,
    pub budget: BudgetCaps,
    pub flags: RecoveryFlags,
    pub hooks: Vec<Hook>,
    /// Why the configured hooks do not run ([`crate::domain::hooks::hooks_off`]); then
    /// `hooks` is empty.
    pub hooks_off: Option<String>,
    pub verify: bool,
    pub verify_timeout_seconds: Option<f64>,
    /// Whether each attempt's outcome records what it changed in its git work tree
    /// (`record_changes`, off with `--no-record-changes`).
    pub record_changes: bool,
}

impl RunSettings {
    pub(crate) fn template(&self) -> &CommandTemplate {
        &self.templates[0]
    }
}

/// Merges CLI values over the config and validates the templates and stop patterns.
pub(crate) fn effective_settings(
    location: &PlanLocation,
    config: &Config,
    overrides: &RunOverrides,
) -> Result<RunSettings, InputError> {
    // An empty `--agent-cmd ""` falls back to the config, as the original's did; any other
    // value, even all blanks, is the command the caller asked for.
    let cli_template = overrides.agent_cmd.as_deref().filter(|raw| !raw.is_empty());
    let raw_template = cli_template
        .or(config.agent_cmd.as_deref())
        .ok_or(InputError::MissingAgentCmd)?;
    let origin = if cli_template.is_some() {
        "--agent-cmd".to_owned()
    } else {
        format!("{}: agent_cmd", location.config_path)
    };
    let template = CommandTemplate::parse(raw_template).map_err(|error| InputError::Template {
        origin: origin.clone(),
        error,
    })?;
    let fallbacks = config
        .rate_limit
        .fallback_templates()
        .map_err(|error| InputError::Config {
            path: location.config_path.clone(),
            error,
        })?;
    let mut stop_regexes = config.stop_on_regex.clone();
    let config_count = stop_regexes.len();
    stop_regexes.extend(overrides.stop_on_regex.iter().cloned());
    let stop_pattern_count = stop_regexes.len();
    let stop_patterns = StopPatterns::compile_kinds(&stop_regexes, &config.rate_limit.patterns)
        .map_err(|error| {
            let origin = if error.index < config_count {
                format!("{}: stop_on_regex[{}]", location.config_path, error.index)
            } else if error.index < stop_pattern_count {
                "--stop-on-regex".to_owned()
            } else {
                format!(
                    "{}: rate_limit.patterns[{}]",
                    location.config_path,
                    error.index - stop_pattern_count
                )
            };
            InputError::StopPattern { origin, error }
        })?;
    let retry = match overrides.retries {
        Some(retries) => config.retry.clone().with_retries(retries),
        None => config.retry.clone(),
    };
    let rate_limit = if overrides.wait {
        config.rate_limit.clone().with_waits()
    } else {
        config.rate_limit.clone()
    };
    for pattern in stop_patterns.nfa_patterns() {
        tracing::debug!(pattern, "stop regex streams through the NFA path");
    }
    let template_origins = std::iter::once(origin)
        .chain((0..fallbacks.len()).map(|index| {
            format!(
                "{}: rate_limit.fallback_agent_cmds[{index}]",
                location.config_path
            )
        }))
        .collect();
    Ok(RunSettings {
        templates: std::iter::once(template).chain(fallbacks).collect(),
        template_origins,
        retry,
        rate_limit,
        max_phases: overrides.max_phases.or(config.max_phases),
        timeout_seconds: overrides.timeout_seconds.or(config.timeout_seconds),
        idle_timeout_seconds: overrides
            .idle_timeout_seconds
            .or(config.idle_timeout_seconds),
        stop_patterns: Arc::new(stop_patterns),
        budget: BudgetCaps::effective(overrides.max_tokens, overrides.max_cost_usd, &config.budget),
        flags: overrides.flags,
        hooks: config
            .hooks
            .iter()
            .chain(&overrides.hooks)
            .cloned()
            .collect(),
        hooks_off: None,
        verify: !overrides.no_verify,
        verify_timeout_seconds: overrides
            .verify_timeout_seconds
            .or(config.verify_timeout_seconds),
        record_changes: config.record_changes && !overrides.no_record_changes,
    })
}

/// Why each verify interpreter the plan's checks name would not be found or run by `exec` in
/// its phase's execution workspace, each program once (at its first check).
pub(crate) fn verify_interpreter_problems(
    location: &PlanLocation,
    snapshot: &PlanSnapshot,
) -> Vec<InputError> {
    let mut seen: Vec<(&str, String)> = Vec::new();
    let mut problems = Vec::new();
    for phase in &snapshot.plan.phases {
        let Ok(workspace) = execution_workspace_of(location, phase) else {
            continue;
        };
        for check in &phase.verify {
            let program = check.interpreter.program();
            let key = (program, workspace.clone());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            if let Err(problem) = program::resolve(program, Path::new(&workspace)) {
                problems.push(InputError::VerifyInterpreter {
                    plan: location.plan_path.clone(),
                    line: check.line,
                    phase_id: phase.id.clone(),
                    index: check.index,
                    problem,
                });
            }
        }
    }
    problems
}

/// Why each hook program would not be found or run by `exec` from the plan workspace. Not
/// input errors: a hook never changes a run, so `run` goes on and the hook fails with a
/// warning when it fires; `check` shows these.
pub(crate) fn hook_program_problems(location: &PlanLocation, hooks: &[Hook]) -> Vec<String> {
    hooks
        .iter()
        .filter_map(|hook| {
            let program = hook.command.literal_program()?;
            program::resolve(program, Path::new(&location.workspace))
                .err()
                .map(|problem| {
                    format!(
                        "{}: {}; the hook would fail",
                        hook.origin,
                        problem.describe(program::ProgramRole::Hook)
                    )
                })
        })
        .collect()
}
