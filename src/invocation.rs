//! What a command works from: the plan snapshot, config, command template and stop patterns,
//! each read and validated once, before any lock is taken or state is touched. `run`, `check`
//! and `status` share these loaders so they can never disagree about what is valid.

use std::sync::Arc;

use crate::domain::config::{Config, parse_config};
use crate::domain::identity::{Liveness, liveness};
use crate::domain::plan::{ParsedPlan, Phase, near_miss_headings, parse_plan};
use crate::domain::plan_key::sha256_hex;
use crate::domain::selection::{PlanFacts, RecoveryFlags};
use crate::domain::state::ActiveAttempt;
use crate::domain::stop_regex::StopPatterns;
use crate::domain::template::CommandTemplate;
use crate::platform::locate::{PlanLocation, os_message, resolve_execution_workspace};
use crate::platform::proc;

/// One read of the plan bytes, hashed and parsed: the immutable snapshot every phase of an
/// invocation runs from.
#[derive(Clone, Debug)]
pub struct PlanSnapshot {
    /// Canonical absolute plan path.
    pub path: String,
    /// SHA-256 of the bytes read.
    pub sha256: String,
    pub plan: ParsedPlan,
}

impl PlanSnapshot {
    pub fn facts(&self) -> PlanFacts<'_> {
        PlanFacts {
            path: &self.path,
            sha256: &self.sha256,
            phase_ids: self
                .plan
                .phases
                .iter()
                .map(|phase| phase.id.as_str())
                .collect(),
        }
    }
}

/// Reads and parses the plan once.
pub fn read_plan_snapshot(location: &PlanLocation) -> Result<PlanSnapshot, String> {
    let bytes = std::fs::read(&location.plan_path).map_err(|error| {
        format!(
            "{}: cannot read plan: {}",
            location.plan_path,
            os_message(&error)
        )
    })?;
    let plan = parse_plan(&bytes).map_err(|error| error.with_source(&location.plan_path))?;
    for miss in near_miss_headings(&bytes) {
        tracing::warn!(
            "{}:{}: '{}' is not a phase heading (write exactly '## Phase N: Title': no indent, one space after the #s); its text belongs to what comes before it",
            location.plan_path,
            miss.line,
            miss.text.escape_debug()
        );
    }
    Ok(PlanSnapshot {
        path: location.plan_path.clone(),
        sha256: sha256_hex(&bytes),
        plan,
    })
}

/// Hashes the plan file as it is now (the checkpoint before each later launch).
pub fn current_plan_hash(location: &PlanLocation) -> Result<String, String> {
    std::fs::read(&location.plan_path)
        .map(|bytes| sha256_hex(&bytes))
        .map_err(|error| {
            format!(
                "{}: cannot read plan: {}",
                location.plan_path,
                os_message(&error)
            )
        })
}

/// Reads the plan workspace's config; a missing file means defaults.
pub fn read_config(location: &PlanLocation) -> Result<Config, String> {
    match std::fs::read(&location.config_path) {
        Ok(bytes) => {
            parse_config(&bytes).map_err(|error| format!("{}: {error}", location.config_path))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
        Err(error) => Err(format!(
            "{}: cannot read config: {}",
            location.config_path,
            os_message(&error)
        )),
    }
}

/// Checks a phase's execution workspace; the error names the plan line to fix.
pub fn execution_workspace_of(location: &PlanLocation, phase: &Phase) -> Result<String, String> {
    resolve_execution_workspace(&location.workspace, &phase.workspace).map_err(|problem| {
        format!(
            "{}:{}: phase {} workspace '{}' {}",
            location.plan_path,
            phase.workspace_line,
            phase.id,
            phase.workspace,
            problem.describe()
        )
    })
}

/// Whether `--retry-stopped` may resolve `attempt` and rerun its phase: the recorded
/// workspace must still be the phase's, and the recorded worker must not be positively alive
/// (same pid, boot and start time, not a zombie). A prepared attempt without identity is the
/// operator's call: the runner neither guesses nor signals. `run` refuses on an error; `check`
/// reports it, so the two never disagree.
pub fn abandoned_retry_allowed(
    location: &PlanLocation,
    snapshot: &PlanSnapshot,
    attempt: &ActiveAttempt,
) -> Result<(), String> {
    if let Some(phase) = snapshot.plan.phase(&attempt.phase.id) {
        let current = execution_workspace_of(location, phase)?;
        if current != attempt.execution_workspace {
            return Err(format!(
                "active attempt execution workspace differs from the selected phase: the attempt ran in {}, phase {} now resolves to {}; restore the original workspace declaration before retrying",
                attempt.execution_workspace, phase.id, current
            ));
        }
    }
    let Some(identity) = &attempt.process else {
        return Ok(());
    };
    let boot_id = proc::boot_id().map_err(|error| format!("cannot read boot id: {error}"))?;
    let observed = proc::stat(identity.pid).map_err(|error| {
        format!(
            "cannot check whether worker pid {} is alive: {error}",
            identity.pid
        )
    })?;
    match liveness(identity, &boot_id, observed.as_ref()) {
        Liveness::Alive => Err(format!(
            "attempt {} worker pid {} is still alive; stop it and inspect partial changes before retrying",
            attempt.id, identity.pid
        )),
        Liveness::Gone => {
            tracing::info!(pid = identity.pid, "recorded worker is gone; retry allowed");
            Ok(())
        }
    }
}

/// The command-line values of `run` that override or extend the config.
#[derive(Clone, Debug, Default)]
pub struct RunOverrides {
    pub agent_cmd: Option<String>,
    pub max_phases: Option<u64>,
    pub timeout_seconds: Option<f64>,
    pub idle_timeout_seconds: Option<f64>,
    pub stop_on_regex: Vec<String>,
    pub quiet: bool,
    pub flags: RecoveryFlags,
}

/// Effective settings of a `run`, after CLI values override the config.
#[derive(Clone, Debug)]
pub struct RunSettings {
    pub template: CommandTemplate,
    pub max_phases: Option<u64>,
    pub timeout_seconds: Option<f64>,
    pub idle_timeout_seconds: Option<f64>,
    pub stop_patterns: Arc<StopPatterns>,
    pub quiet: bool,
    pub flags: RecoveryFlags,
}

/// Merges CLI values over the config and validates the template and stop patterns.
pub fn effective_settings(
    location: &PlanLocation,
    config: &Config,
    overrides: &RunOverrides,
) -> Result<RunSettings, String> {
    // An empty `--agent-cmd ""` falls back to the config, as the original's did; any other
    // value, even all blanks, is the command the caller asked for.
    let cli_template = overrides.agent_cmd.as_deref().filter(|raw| !raw.is_empty());
    let raw_template = cli_template
        .or(config.agent_cmd.as_deref())
        .ok_or("--agent-cmd is required when config does not provide agent_cmd")?;
    let template = CommandTemplate::parse(raw_template).map_err(|error| {
        let source = if cli_template.is_some() {
            "--agent-cmd".to_owned()
        } else {
            format!("{}: agent_cmd", location.config_path)
        };
        format!("{source}: {error}")
    })?;
    let mut patterns = config.stop_on_regex.clone();
    let config_count = patterns.len();
    patterns.extend(overrides.stop_on_regex.iter().cloned());
    let stop_patterns = StopPatterns::compile(&patterns).map_err(|error| {
        let source = if error.index < config_count {
            format!("{}: stop_on_regex[{}]", location.config_path, error.index)
        } else {
            "--stop-on-regex".to_owned()
        };
        format!(
            "{source}: invalid stop regex '{}': {}",
            error.pattern, error.message
        )
    })?;
    for pattern in stop_patterns.nfa_patterns() {
        tracing::debug!(pattern, "stop regex streams through the NFA path");
    }
    Ok(RunSettings {
        template,
        max_phases: overrides.max_phases.or(config.max_phases),
        timeout_seconds: overrides.timeout_seconds.or(config.timeout_seconds),
        idle_timeout_seconds: overrides
            .idle_timeout_seconds
            .or(config.idle_timeout_seconds),
        stop_patterns: Arc::new(stop_patterns),
        quiet: overrides.quiet,
        flags: overrides.flags,
    })
}
