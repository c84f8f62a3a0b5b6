//! `check`: validates everything `run` validates before touching state — plan, config,
//! command template, stop regexes, every phase's execution workspace, the stored state and
//! the plan-change situation — and prints the phase table. Changes nothing; exits 0 or 5.
//! `--agent-cmd`, `--retries N` and `--wait` mean what they mean for `run`: the effective
//! policy and the verdict on a scheduled retry follow them.
//!
//! A stopped phase or an unresolved attempt is not invalid input: it shows in the table and
//! as a note on what `run` will require, and `check` still exits 0. A changed or moved plan is
//! a refusal `run` would make, so `check` exits 5 for it.

use serde::Serialize;

use super::args::CheckArgs;
use crate::domain::exit_code::ExitCode;
use crate::domain::selection::{Admission, FirstSelection, RecoveryFlags, Refusal, admit};
use crate::domain::state::State;
use crate::domain::tally::PhaseStanding;
use crate::domain::timestamp::Timestamp;
use crate::invocation::probe::run_in_progress;
use crate::invocation::{
    PlanSnapshot, RunOverrides, abandoned_retry_allowed, agent_program_problems,
    effective_settings, execution_workspace_of, locate, read_config, read_plan_snapshot,
    read_state,
};
use crate::platform::locate::PlanLocation;
use crate::report::Output;

/// The `check --json` document (schema: docs/cli.md).
#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    pub ok: bool,
    pub plan_path: Option<String>,
    pub plan_workspace: Option<String>,
    pub state_path: Option<String>,
    pub agent_cmd: Option<String>,
    /// The effective retry policy in words (`retry: off (1 attempt)`, …).
    pub retry: Option<String>,
    /// The effective rate-limit policy in words.
    pub rate_limit: Option<String>,
    /// The budget caps in words (`budget: no caps`, …).
    pub budget: Option<String>,
    /// The fallback agent templates, in order.
    pub fallback_agent_cmds: Vec<String>,
    pub phases: Vec<PhaseRow>,
    /// `unchanged`, `changed`, `moved` or `not-accepted`.
    pub plan_status: Option<&'static str>,
    /// What a plain `run` would require first (`--retry-stopped`), if anything.
    pub notes: Vec<String>,
    pub errors: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct PhaseRow {
    pub id: String,
    pub title: String,
    pub workspace: String,
    pub execution_workspace: Option<String>,
    /// `done`, `pending`, `stopped`, `unresolved`, or `running` (a run in progress).
    pub status: &'static str,
}

pub fn run(args: &CheckArgs) -> ExitCode {
    if args.prompt {
        return super::prompt_preview::run(args);
    }
    let report = build(args);
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => Output::print_json(&text),
            Err(error) => Output::error(format!("cannot render check report: {error}")).print(),
        }
    } else {
        render_text(&report).print();
    }
    let errors = Output {
        stdout: Vec::new(),
        stderr: report
            .errors
            .iter()
            .map(|error| format!("error: {error}"))
            .collect(),
    };
    errors.print();
    if report.ok {
        ExitCode::Success
    } else {
        ExitCode::InvalidInput
    }
}

fn build(args: &CheckArgs) -> CheckReport {
    let mut report = CheckReport::default();
    let location = match locate(&args.plan) {
        Ok(location) => location,
        Err(error) => {
            report.errors.push(error.to_string());
            return report;
        }
    };
    report.plan_path = Some(location.plan_path.clone());
    report.plan_workspace = Some(location.workspace.clone());
    report.state_path = Some(location.layout.state_path());
    let mut policy = None;
    let mut run_settings = None;
    match read_config(&location) {
        Ok(config) => {
            let overrides = RunOverrides {
                agent_cmd: args.agent_cmd.clone(),
                flags: RecoveryFlags::default(),
                retries: args.retries,
                wait: args.wait,
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
                    policy = Some((
                        settings.retry.clone(),
                        settings.rate_limit.clone(),
                        settings.templates.len(),
                    ));
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
    let snapshot = match read_plan_snapshot(&location) {
        Ok(snapshot) => snapshot,
        Err(error) => {
            report.errors.push(error.to_string());
            report.ok = false;
            return report;
        }
    };
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
            status: phase_status(state_ref, &phase.id, running.is_some()),
        });
    }
    if let Some(settings) = &run_settings {
        for problem in agent_program_problems(&location, &snapshot, settings) {
            report.errors.push(problem.to_string());
        }
    }
    if let Some(state) = &state {
        report.plan_status = Some(match &state.plan {
            None => "not-accepted",
            Some(plan) if plan.path != snapshot.path => {
                report.errors.push(format!(
                    "{}: plan path mismatch; state belongs to {}. A renamed or relocated plan requires an explicit history decision",
                    snapshot.path, plan.path
                ));
                "moved"
            }
            Some(plan) if plan.sha256 != snapshot.sha256 => {
                report.errors.push(format!(
                    "plan hash mismatch: {} (expected {}, actual {}); run with --accept-plan-change to accept the edit",
                    snapshot.path, plan.sha256, snapshot.sha256
                ));
                "changed"
            }
            Some(_) => "unchanged",
        });
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
                match &policy {
                    Some((retry, rate_limit, templates)) => {
                        schedule.fits(retry, rate_limit, *templates)
                    }
                    None => Ok(()),
                }
                .map(|()| schedule)
            });
            match resumable {
                Some(Ok(schedule)) => report.notes.push(format!(
                    "phase {} is stopped: {}; a retry is scheduled (attempt {}, not before {}, {}) and run resumes it",
                    stop.phase_id,
                    stop.reason,
                    schedule.attempt,
                    schedule.not_before,
                    schedule.reason.describe()
                )),
                Some(Err(why)) => report.notes.push(format!(
                    "phase {} is stopped: {}; its scheduled retry does not fit the retry policy ({why}); run requires --retry-stopped",
                    stop.phase_id, stop.reason
                )),
                None => report.notes.push(format!(
                    "phase {} is stopped: {}; run requires --retry-stopped",
                    stop.phase_id, stop.reason
                )),
            }
        }
    }
    report.ok = report.errors.is_empty();
    report
}

/// Why the way forward `check` would point to — `run --retry-stopped`, with
/// `--accept-plan-change` when the plan changed — would be refused, if it would: the phase to
/// retry is gone from the plan, completed phases are gone, the abandoned attempt's workspace
/// moved, or its worker is still alive. (Path and hash mismatches are reported already.)
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

/// `check`'s word for a phase's standing: an active attempt is "running" while a handler holds
/// the plan-workspace lock, else "unresolved": one `run` must resolve first.
fn phase_status(state: &State, phase_id: &str, run_in_progress: bool) -> &'static str {
    match PhaseStanding::of(state, phase_id) {
        PhaseStanding::Active(_) if run_in_progress => "running",
        PhaseStanding::Active(_) => "unresolved",
        standing => standing.as_str(),
    }
}

fn render_text(report: &CheckReport) -> Output {
    let mut output = Output::default();
    let Some(plan_path) = &report.plan_path else {
        return output;
    };
    output.stdout.push(format!("plan path: {plan_path}"));
    if let Some(workspace) = &report.plan_workspace {
        output
            .stdout
            .push(format!("plan workspace path: {workspace}"));
    }
    if let Some(state_path) = &report.state_path {
        output.stdout.push(format!("state path: {state_path}"));
    }
    if let Some(agent_cmd) = &report.agent_cmd {
        output.stdout.push(format!("agent_cmd: {agent_cmd}"));
    }
    for (index, fallback) in report.fallback_agent_cmds.iter().enumerate() {
        output
            .stdout
            .push(format!("fallback agent_cmd {}: {fallback}", index + 1));
    }
    for policy in [&report.retry, &report.rate_limit, &report.budget]
        .into_iter()
        .flatten()
    {
        output.stdout.push(policy.clone());
    }
    if !report.phases.is_empty() {
        let id_width = report
            .phases
            .iter()
            .map(|row| row.id.len())
            .max()
            .unwrap_or(2)
            .max(2);
        output.stdout.push(format!(
            "{:<id_width$}  {:<10}  {:<30}  title",
            "id", "status", "workspace"
        ));
        for row in &report.phases {
            output.stdout.push(format!(
                "{:<id_width$}  {:<10}  {:<30}  {}",
                row.id,
                row.status,
                row.execution_workspace.as_deref().unwrap_or(&row.workspace),
                row.title
            ));
        }
    }
    if let Some(status) = report.plan_status {
        output.stdout.push(format!("plan: {status}"));
    }
    for note in &report.notes {
        output.stdout.push(format!("note: {note}"));
    }
    if report.ok {
        output.stdout.push("check: ok".to_owned());
    }
    output
}
