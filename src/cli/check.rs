//! `check`: validates everything `run` validates before touching state and prints the phase
//! table; changes nothing (docs/cli.md, "`check`"). A stopped phase or an unresolved attempt
//! is a note on what `run` will require (exit 0); a changed or moved plan is a refusal `run`
//! would make (exit 5).

use crate::domain::budget::{BudgetStanding, Spent};
use serde::Serialize;

use super::args::CheckArgs;
use super::status::PlanStanding;
use crate::domain::exit_code::ExitCode;
use crate::domain::selection::{Admission, FirstSelection, RecoveryFlags, Refusal, admit};
use crate::domain::state::State;
use crate::domain::tally::PhaseStanding;
use crate::domain::timestamp::Timestamp;
use crate::invocation::probe::run_in_progress;
use crate::invocation::{
    InputError, PlanSnapshot, RunOverrides, abandoned_retry_allowed, agent_program_problems,
    effective_settings, execution_workspace_of, hook_program_problems, locate, read_config,
    read_plan_snapshot, read_state, verify_interpreter_problems,
};
use crate::platform::locate::PlanLocation;
use crate::report::{Output, prefixed};

/// The most plan errors `check` lists; a plan with more says how many it left out.
const PLAN_ERRORS_SHOWN: usize = 20;

/// The `check --json` document (every field: docs/cli.md, "`check`").
#[derive(Debug, Default, Serialize)]
pub(super) struct CheckReport {
    pub ok: bool,
    pub plan_path: Option<String>,
    pub plan_workspace: Option<String>,
    pub state_path: Option<String>,
    pub agent_cmd: Option<String>,
    pub retry: Option<String>,
    pub rate_limit: Option<String>,
    pub budget: Option<String>,
    /// What the plan's recorded attempts spent against the caps (null without caps), as
    /// `status --json`'s `budget`.
    pub budget_spent: Option<BudgetStanding>,
    /// The text's `budget spent:` line.
    #[serde(skip)]
    pub budget_spent_text: Option<String>,
    pub fallback_agent_cmds: Vec<String>,
    pub hooks: Vec<String>,
    pub phases: Vec<PhaseRow>,
    /// As `status --json` says `plan.status`, but never `unreadable`.
    pub plan_status: Option<PlanStanding>,
    /// For the text's `plan changed since accepted: …` line.
    #[serde(skip)]
    pub accepted_sha256: Option<String>,
    #[serde(skip)]
    pub current_sha256: Option<String>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct PhaseRow {
    pub id: String,
    pub title: String,
    pub workspace: String,
    pub execution_workspace: Option<String>,
    pub status: &'static str,
    pub checks: Vec<CheckRow>,
}

/// One check of a phase's `Verify` section; `line` is its opening fence's.
#[derive(Debug, Serialize)]
pub(super) struct CheckRow {
    pub index: usize,
    pub interpreter: &'static str,
    pub line: usize,
    pub command_first_line: String,
}

pub(super) fn run(args: &CheckArgs) -> ExitCode {
    if args.prompt {
        return super::prompt_preview::run(args);
    }
    let report = build(args);
    if args.json {
        let text = serde_json::to_string_pretty(&report).expect("the check report serializes");
        Output::json(&text).print();
    } else {
        Output::stdout(render_text(&report)).print();
    }
    let mut problems = prefixed("warning", &report.warnings);
    problems.extend(prefixed("error", &report.errors));
    Output::stderr(problems).print();
    if report.ok {
        ExitCode::Success
    } else {
        ExitCode::InvalidInput
    }
}

fn build(args: &CheckArgs) -> CheckReport {
    let mut report = CheckReport::default();
    let location = match locate(args.plan.path()) {
        Ok(location) => location,
        Err(error) => {
            report.errors.push(error.to_string());
            return report;
        }
    };
    report.plan_path = Some(location.plan_path.clone());
    report.plan_workspace = Some(location.workspace.clone());
    report.state_path = Some(location.layout.state_path());
    let mut run_settings = None;
    match read_config(&location) {
        Ok(config) => {
            let overrides = RunOverrides {
                agent_cmd: args.agent_cmd.clone(),
                retries: args.retries,
                wait: args.wait,
                hooks: args.hooks.clone(),
                max_tokens: args.max_tokens,
                max_cost_usd: args.max_cost,
                ..RunOverrides::default()
            };
            match effective_settings(&location, &config, &overrides) {
                Ok(settings) => {
                    report.agent_cmd = Some(settings.template().raw().to_owned());
                    report.retry = Some(settings.retry.describe());
                    report.rate_limit = Some(settings.rate_limit.describe());
                    report.budget = Some(settings.budget.describe());
                    report.fallback_agent_cmds = settings.templates[1..]
                        .iter()
                        .map(|template| template.raw().to_owned())
                        .collect();
                    report.hooks = settings
                        .hooks
                        .iter()
                        .map(|hook| format!("{}: {}", hook.origin, hook.describe()))
                        .collect();
                    // Not errors: a hook that cannot run fails with a warning and changes
                    // nothing, so `run` does not refuse for it either.
                    report
                        .notes
                        .extend(hook_program_problems(&location, &settings.hooks));
                    run_settings = Some(settings);
                }
                Err(error) => {
                    // Show the template that was rejected, not nothing.
                    report.agent_cmd = args
                        .agent_cmd
                        .clone()
                        .filter(|raw| !raw.is_empty())
                        .or(config.agent_cmd.clone());
                    report.errors.push(error.to_string());
                }
            }
        }
        Err(error) => report.errors.push(error.to_string()),
    }
    let running = run_in_progress(&location);
    let state = match read_state(&location.layout) {
        Ok(state) => Some(state),
        Err(error) => {
            report.errors.push(error.to_string());
            None
        }
    };
    if let Some(settings) = &run_settings {
        let spent = state.as_ref().map(Spent::of_state).unwrap_or_default();
        report.budget_spent = BudgetStanding::of(&settings.budget, spent);
        report.budget_spent_text = settings.budget.spent_of(spent);
        if let Some(reached) = settings.budget.reached(spent) {
            report.notes.push(format!(
                "the plan's recorded attempts have reached {}: run launches nothing until it is raised above what they spent",
                reached.cap_name()
            ));
        }
    }
    let snapshot = match read_plan_snapshot(&location) {
        Ok(snapshot) => snapshot,
        Err(InputError::Plan { path, error, more }) => {
            // Every error found, not only the one `run` reports, so one edit fixes them all.
            let shown = more.len().min(PLAN_ERRORS_SHOWN - 1);
            report.errors.push(error.with_source(&path));
            for error in &more[..shown] {
                report.errors.push(error.with_source(&path));
            }
            if more.len() > shown {
                report.errors.push(format!(
                    "{path}: {} more plan errors not shown (check shows the first {PLAN_ERRORS_SHOWN})",
                    more.len() - shown
                ));
            }
            report.ok = false;
            return report;
        }
        Err(error) => {
            report.errors.push(error.to_string());
            return report;
        }
    };
    report.warnings = snapshot.warnings.clone();
    let empty = State::default();
    let state_ref = state.as_ref().unwrap_or(&empty);
    for phase in &snapshot.plan.phases {
        let execution_workspace = match execution_workspace_of(&location, phase) {
            Ok(path) => Some(path),
            Err(error) => {
                report.errors.push(error.to_string());
                None
            }
        };
        report.phases.push(PhaseRow {
            id: phase.id.clone(),
            title: phase.title.clone(),
            workspace: phase.workspace.clone(),
            execution_workspace,
            status: super::status::standing_word(
                PhaseStanding::of(state_ref, &phase.id),
                running.is_some(),
            ),
            checks: phase
                .verify
                .iter()
                .map(|check| CheckRow {
                    index: check.index,
                    interpreter: check.interpreter.name(),
                    line: check.line,
                    command_first_line: check.first_line(),
                })
                .collect(),
        });
    }
    let agent_problems = run_settings
        .iter()
        .flat_map(|settings| agent_program_problems(&location, &snapshot, settings));
    let problems = agent_problems.chain(verify_interpreter_problems(&location, &snapshot));
    report
        .errors
        .extend(problems.map(|problem| problem.to_string()));
    if let Some(state) = &state {
        report.accepted_sha256 = state.plan.as_ref().map(|plan| plan.sha256.clone());
        report.current_sha256 = Some(snapshot.sha256.clone());
        let standing = PlanStanding::of(state.plan.as_ref(), &snapshot);
        if let Some(plan) = &state.plan {
            match standing {
                PlanStanding::Moved => report.errors.push(format!(
                    "{}: plan path mismatch; state belongs to {}. A renamed or relocated plan requires an explicit history decision",
                    snapshot.path, plan.path
                )),
                PlanStanding::Changed => report.errors.push(format!(
                    "plan hash mismatch: {} (expected {}, actual {}); run with --accept-plan-change to accept the edit",
                    snapshot.path, plan.sha256, snapshot.sha256
                )),
                PlanStanding::NotAccepted | PlanStanding::Unchanged | PlanStanding::Unreadable => {}
            }
        }
        report.plan_status = Some(standing);
        if let Some(running) = running {
            // The active attempt is that run's own: nothing is abandoned, and advice to stop
            // its worker would be wrong.
            report.notes.push(format!(
                "a run is in progress: {}; run refuses until it ends",
                running.describe()
            ));
            if let Some(attempt) = &state.active_attempt {
                let worker = match &attempt.process {
                    Some(process) => format!(" (worker pid {})", process.pid),
                    None => String::new(),
                };
                report.notes.push(format!(
                    "phase {} attempt {} is {}{worker}",
                    attempt.phase.id,
                    attempt.id,
                    attempt.status.as_str()
                ));
            }
        } else if let Some(problem) = recovery_problem(&location, &snapshot, state) {
            report.errors.push(problem);
        } else if let Some(attempt) = &state.active_attempt {
            report.notes.push(format!(
                "phase {} has an abandoned {} attempt {}; run requires --retry-stopped",
                attempt.phase.id,
                attempt.status.as_str(),
                attempt.id
            ));
        } else if let Some(stop) = &state.stop {
            let resumable = state.retry_schedule.as_ref().map(|schedule| {
                match &run_settings {
                    Some(settings) => schedule.fits(
                        &settings.retry,
                        &settings.rate_limit,
                        settings.templates.len(),
                    ),
                    None => Ok(()),
                }
                .map(|()| schedule)
            });
            let stopped = format!("phase {} is stopped: {}", stop.phase_id, stop.reason);
            report.notes.push(match resumable {
                Some(Ok(schedule)) => format!(
                    "{stopped}; a retry is scheduled (attempt {}, not before {}, {}) and run resumes it",
                    schedule.attempt,
                    schedule.not_before,
                    schedule.reason.describe()
                ),
                Some(Err(why)) => format!(
                    "{stopped}; its scheduled retry does not fit the retry policy ({why}); run requires --retry-stopped"
                ),
                None => format!("{stopped}; run requires --retry-stopped"),
            });
        }
    }
    report.ok = report.errors.is_empty();
    report
}

/// Why `run --retry-stopped --accept-plan-change`, the way forward `check` points to, would be
/// refused, if it would (path and hash mismatches are reported already).
fn recovery_problem(
    location: &PlanLocation,
    snapshot: &PlanSnapshot,
    state: &State,
) -> Option<String> {
    let flags = RecoveryFlags {
        retry_stopped: true,
        accept_plan_change: true,
    };
    let now = Timestamp::from_datetime(chrono::Utc::now());
    match admit(state, &snapshot.facts(), flags, false, now) {
        Ok(Admission {
            first: FirstSelection::RetryAbandoned(attempt),
            ..
        }) => abandoned_retry_allowed(location, snapshot, &attempt)
            .err()
            .map(|error| error.to_string()),
        Ok(_) | Err(Refusal::PlanPathMismatch { .. }) => None,
        Err(refusal) => Some(refusal.to_string()),
    }
}

fn render_text(report: &CheckReport) -> Vec<String> {
    if report.plan_path.is_none() {
        return Vec::new();
    }
    let labelled = |pairs: &[(&str, &Option<String>)]| -> Vec<String> {
        pairs
            .iter()
            .filter_map(|(label, value)| Some(format!("{label}: {}", value.as_ref()?)))
            .collect()
    };
    let mut lines = labelled(&[
        ("plan path", &report.plan_path),
        ("plan workspace path", &report.plan_workspace),
        ("state path", &report.state_path),
        ("agent_cmd", &report.agent_cmd),
    ]);
    for (index, fallback) in report.fallback_agent_cmds.iter().enumerate() {
        lines.push(format!("fallback agent_cmd {}: {fallback}", index + 1));
    }
    lines.extend(labelled(&[
        ("retry", &report.retry),
        ("rate_limit", &report.rate_limit),
        ("budget", &report.budget),
        ("budget spent", &report.budget_spent_text),
    ]));
    lines.extend(report.hooks.iter().map(|hook| format!("hook {hook}")));
    if !report.phases.is_empty() {
        let id_width = report
            .phases
            .iter()
            .map(|row| row.id.len())
            .fold(2, usize::max);
        let workspace = |row: &PhaseRow| -> String {
            row.execution_workspace
                .clone()
                .unwrap_or_else(|| row.workspace.clone())
        };
        // Wide enough for the longest path, so a long one never runs into the title.
        let workspace_width = report
            .phases
            .iter()
            .map(|row| workspace(row).chars().count())
            .fold("workspace".len(), usize::max);
        lines.push(format!(
            "{:<id_width$}  {:<10}  {:<workspace_width$}  title",
            "id", "status", "workspace"
        ));
        for row in &report.phases {
            lines.push(format!(
                "{:<id_width$}  {:<10}  {:<workspace_width$}  {}",
                row.id,
                row.status,
                workspace(row),
                row.title
            ));
        }
        for row in &report.phases {
            for check in &row.checks {
                lines.push(format!(
                    "verify {} check {} ({}, line {}): {}",
                    row.id, check.index, check.interpreter, check.line, check.command_first_line
                ));
            }
        }
    }
    if let Some(standing) = report.plan_status {
        lines.push(standing.line(
            report.accepted_sha256.as_deref(),
            report.current_sha256.as_deref(),
        ));
    }
    lines.extend(prefixed("note", &report.notes));
    if report.ok {
        lines.push("check: ok".to_owned());
    }
    lines
}
