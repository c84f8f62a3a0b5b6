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
    InputError, PlanSnapshot, RunOverrides, abandoned_retry_allowed, agent_program_problems,
    effective_settings, execution_workspace_of, hook_program_problems, locate, read_config,
    read_plan_snapshot, read_state, verify_interpreter_problems,
};
use crate::platform::locate::PlanLocation;
use crate::report::Output;

/// The most plan errors `check` lists; a plan with more says how many it left out.
const PLAN_ERRORS_SHOWN: usize = 20;

/// The `check --json` document (schema: docs/cli.md).
#[derive(Debug, Default, Serialize)]
pub(super) struct CheckReport {
    pub ok: bool,
    pub plan_path: Option<String>,
    pub plan_workspace: Option<String>,
    pub state_path: Option<String>,
    pub agent_cmd: Option<String>,
    /// The effective retry policy in words (`off (1 attempt)`, …); the text labels it
    /// `retry:`.
    pub retry: Option<String>,
    /// The effective rate-limit policy in words; the text labels it `rate_limit:`.
    pub rate_limit: Option<String>,
    /// The budget caps in words (`budget: no caps`, …).
    pub budget: Option<String>,
    /// The fallback agent templates, in order.
    pub fallback_agent_cmds: Vec<String>,
    /// The hooks a run would have (config `hooks`, then `--hook`), one line each:
    /// `hooks[0]: run-finished, phase-stopped: notify-send … (timeout 30 s)`.
    pub hooks: Vec<String>,
    pub phases: Vec<PhaseRow>,
    /// `unchanged`, `changed`, `moved` or `not-accepted` (the `status --json` `plan.status`
    /// values; the text says them as `status` does).
    pub plan_status: Option<&'static str>,
    /// The accepted plan's hash and the current one, for the text's `plan changed since
    /// accepted: …` line.
    #[serde(skip)]
    pub accepted_sha256: Option<String>,
    #[serde(skip)]
    pub current_sha256: Option<String>,
    /// What a plain `run` would require first (`--retry-stopped`), if anything.
    pub notes: Vec<String>,
    /// What the plan probably does not mean (a heading that is almost a phase heading),
    /// naming the file and line; not errors.
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct PhaseRow {
    pub id: String,
    pub title: String,
    pub workspace: String,
    pub execution_workspace: Option<String>,
    /// `done`, `pending`, `stopped`, `abandoned`, or `prepared` / `running` (the attempt of
    /// a run in progress).
    pub status: &'static str,
    /// The checks of its `Verify` section, in order (issue 20).
    pub checks: Vec<CheckRow>,
}

/// One check of a phase's `Verify` section.
#[derive(Debug, Serialize)]
pub(super) struct CheckRow {
    pub index: usize,
    pub interpreter: &'static str,
    /// The plan line of the block's opening fence.
    pub line: usize,
    pub command_first_line: String,
}

pub(super) fn run(args: &CheckArgs) -> ExitCode {
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
    let problems = Output {
        stdout: Vec::new(),
        stderr: report
            .warnings
            .iter()
            .map(|warning| format!("warning: {warning}"))
            .chain(report.errors.iter().map(|error| format!("error: {error}")))
            .collect(),
    };
    problems.print();
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
    let mut policy = None;
    let mut run_settings = None;
    match read_config(&location) {
        Ok(config) => {
            let overrides = RunOverrides {
                agent_cmd: args.agent_cmd.clone(),
                flags: RecoveryFlags::default(),
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
            report.ok = false;
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
            status: phase_status(state_ref, &phase.id, running.is_some()),
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
    if let Some(settings) = &run_settings {
        for problem in agent_program_problems(&location, &snapshot, settings) {
            report.errors.push(problem.to_string());
        }
    }
    for problem in verify_interpreter_problems(&location, &snapshot) {
        report.errors.push(problem.to_string());
    }
    if let Some(state) = &state {
        report.accepted_sha256 = state.plan.as_ref().map(|plan| plan.sha256.clone());
        report.current_sha256 = Some(snapshot.sha256.clone());
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

/// `check`'s word for a phase's standing, the one `status` uses: an active attempt is
/// `prepared` or `running` while a handler holds the plan-workspace lock, else `abandoned`
/// (`run --retry-stopped` must resolve it first).
fn phase_status(state: &State, phase_id: &str, run_in_progress: bool) -> &'static str {
    super::status::standing_word(PhaseStanding::of(state, phase_id), run_in_progress)
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
    if let Some(retry) = &report.retry {
        output.stdout.push(format!("retry: {retry}"));
    }
    if let Some(rate_limit) = &report.rate_limit {
        output.stdout.push(format!("rate_limit: {rate_limit}"));
    }
    if let Some(budget) = &report.budget {
        output.stdout.push(format!("budget: {budget}"));
    }
    for hook in &report.hooks {
        output.stdout.push(format!("hook {hook}"));
    }
    if !report.phases.is_empty() {
        let id_width = report
            .phases
            .iter()
            .map(|row| row.id.len())
            .max()
            .unwrap_or(2)
            .max(2);
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
            .max()
            .unwrap_or(0)
            .max("workspace".len());
        output.stdout.push(format!(
            "{:<id_width$}  {:<10}  {:<workspace_width$}  title",
            "id", "status", "workspace"
        ));
        for row in &report.phases {
            output.stdout.push(format!(
                "{:<id_width$}  {:<10}  {:<workspace_width$}  {}",
                row.id,
                row.status,
                workspace(row),
                row.title
            ));
        }
        for row in &report.phases {
            for check in &row.checks {
                output.stdout.push(format!(
                    "verify {} check {} ({}, line {}): {}",
                    row.id, check.index, check.interpreter, check.line, check.command_first_line
                ));
            }
        }
    }
    if let Some(status) = report.plan_status {
        output.stdout.push(super::status::plan_line(
            status,
            report.accepted_sha256.as_deref(),
            report.current_sha256.as_deref(),
        ));
    }
    for note in &report.notes {
        output.stdout.push(format!("note: {note}"));
    }
    if report.ok {
        output.stdout.push("check: ok".to_owned());
    }
    output
}
