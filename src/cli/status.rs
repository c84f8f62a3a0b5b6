//! `status`: a read-only report of one plan's durable state (docs/cli.md, "`status`"). It takes
//! no lock and writes nothing. The active attempt's latest status is never in `state.json`, so
//! it is read from the end of the plan's event stream.

use serde::Serialize;

use super::args::StatusArgs;
use super::event_stream::STREAM_CAP_BYTES;
use crate::domain::budget::{BudgetStanding, Spent};
use crate::domain::config::Config;
use crate::domain::events::{StreamedActivity, latest_activity};
use crate::domain::exit_code::ExitCode;
use crate::domain::recovery::NextStep;
use crate::domain::retry::next_step::RetryReason;
use crate::domain::selection::next_pending;
use crate::domain::state::{AttemptStatus, PhaseRef, PlanRecord, State, Stop};
use crate::domain::tally::{AttemptFigures, PhaseStanding, RunTotals, Tally, tally};
use crate::domain::token_usage::summary::UsageSummary;
use crate::domain::verification::{VerificationReport, VerificationResult};
use crate::invocation::probe::{
    RunInProgress, attempt_processes, recorded_worker_alive, run_in_progress,
};
use crate::invocation::{
    InputError, PlanSnapshot, current_plan_hash, execution_workspace_of, is_file,
    locate_for_report, read_config, read_outcome, read_plan_snapshot, read_state,
};
use crate::platform::event_log;
use crate::platform::locate::PlanLocation;
use crate::platform::regular_file;
use crate::report::Output;
use crate::units;

/// The status report; `--json` prints it as is (every field: docs/cli.md, "`status --json`").
#[derive(Debug, Serialize)]
pub(super) struct StatusReport {
    pub plan_path: String,
    pub plan_workspace: String,
    pub state_path: String,
    pub state_exists: bool,
    pub run_in_progress: bool,
    pub handler_pid: Option<u32>,
    pub execution_workspace: Option<String>,
    pub execution_workspace_error: Option<String>,
    pub completed_phase_ids: Vec<String>,
    pub current_phase: Option<PhaseRef>,
    pub next_phase: Option<PhaseRef>,
    pub all_complete: bool,
    pub stop: Option<Stop>,
    pub active_attempt: Option<ActiveAttemptReport>,
    pub last_run: Option<LastRunReport>,
    pub latest_transcript: Option<String>,
    pub latest_committed_outcome: Option<String>,
    pub retry_schedule: Option<RetryScheduleReport>,
    pub plan: PlanCheck,
    /// One row per phase: the plan's, then any the state records that the plan lacks.
    pub phases: Vec<PhaseRow>,
    pub totals: RunTotals,
    /// What the plan's recorded attempts spent against the caps its latest run had (null
    /// when it had none).
    pub budget: Option<BudgetStanding>,
    /// The text's `budget:` line.
    #[serde(skip)]
    pub budget_text: Option<String>,
    /// The step that continues the plan, as `run --json`'s `next` (null when every phase is
    /// complete or the plan cannot be read).
    pub next: Option<NextStep>,
}

#[derive(Debug, Serialize)]
pub(super) struct PhaseRow {
    pub id: String,
    pub title: Option<String>,
    pub status: &'static str,
    pub stop_reason: Option<AttemptStatus>,
    pub attempts: u32,
    pub last_attempt: Option<AttemptFigures>,
    pub verification: VerificationReport,
    pub usage: UsageSummary,
}

#[derive(Debug, Serialize)]
pub(super) struct RetryScheduleReport {
    pub phase_id: String,
    pub after: AttemptStatus,
    pub attempt: u32,
    pub of: Option<u32>,
    pub not_before: String,
    pub reason: RetryReason,
    pub reason_text: String,
    pub template_index: usize,
    pub does_not_fit: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct ActiveAttemptReport {
    pub id: String,
    pub status: &'static str,
    pub phase_id: String,
    pub phase_title: String,
    pub started_at: String,
    pub pid: Option<u32>,
    pub process_group_id: Option<u32>,
    pub worker_alive: Option<bool>,
    pub live_processes: Option<Vec<u32>>,
    pub execution_workspace: String,
    pub prompt_path: String,
    pub transcript_path: String,
    pub transcript_exists: bool,
    pub outcome_path: String,
    pub outcome_committed: bool,
    pub activity: Option<ActivityReport>,
}

#[derive(Debug, Serialize)]
pub(super) struct ActivityReport {
    pub text: String,
    pub since: String,
}

#[derive(Debug, Serialize)]
pub(super) struct LastRunReport {
    pub run_id: String,
    pub phase_id: String,
    pub status: AttemptStatus,
    pub started_at: String,
    pub finished_at: String,
    pub exit_code: i32,
    pub transcript_path: String,
    pub transcript_exists: bool,
    pub outcome_path: Option<String>,
    pub summary: String,
    pub watchdog_losses: Option<u64>,
    pub live_processes: Option<Vec<u32>>,
}

/// Whether the plan bytes still match the accepted snapshot.
#[derive(Debug, Serialize)]
pub(super) struct PlanCheck {
    pub status: PlanStanding,
    pub accepted_sha256: Option<String>,
    pub current_sha256: Option<String>,
    pub error: Option<String>,
}

pub(super) fn run(args: &StatusArgs) -> ExitCode {
    // A deleted plan file whose state exists still has that state reported (then the
    // error); without recorded state there is nothing to report.
    let location = match locate_for_report(args.plan.path()) {
        Ok(location) => location,
        Err(error) => return fail(args.json, error),
    };
    let running = run_in_progress(&location);
    let state = match read_state(&location.layout) {
        Ok(state) => state,
        Err(error) => return fail(args.json, error),
    };
    // Only for what a scheduled retry needs; status reports config errors nowhere else.
    let config = read_config(&location).ok();
    let snapshot = read_plan_snapshot(&location);
    if let Ok(snapshot) = &snapshot {
        crate::report::plan_warnings(snapshot).print();
    }
    let report = build_report(
        &location,
        &state,
        snapshot.as_ref(),
        config.as_ref(),
        running,
    );
    if args.json {
        let text = serde_json::to_string_pretty(&report).expect("the status report serializes");
        Output::json(&text).print();
    } else {
        Output::stdout(render_text(&report)).print();
    }
    match snapshot {
        Err(error) => {
            Output::error(error.to_string()).print();
            error.exit_code()
        }
        Ok(_) => ExitCode::Success,
    }
}

fn fail(json: bool, error: InputError) -> ExitCode {
    let message = error.to_string();
    if json {
        Output::json(&serde_json::json!({ "error": message }).to_string()).print();
    }
    Output::error(message).print();
    error.exit_code()
}

pub(super) fn build_report(
    location: &PlanLocation,
    state: &State,
    snapshot: Result<&PlanSnapshot, &InputError>,
    config: Option<&Config>,
    running: Option<RunInProgress>,
) -> StatusReport {
    let plan_phases: Option<Vec<(&str, &str)>> = snapshot.ok().map(|snapshot| {
        snapshot
            .plan
            .phases
            .iter()
            .map(|phase| (phase.id.as_str(), phase.title.as_str()))
            .collect()
    });
    let Tally { phases, totals } = tally(state, plan_phases.as_deref());
    let phases = phases
        .into_iter()
        .map(|row| PhaseRow {
            verification: phase_verification(state, snapshot, &row.id),
            status: standing_word(row.standing, running.is_some()),
            stop_reason: match row.standing {
                PhaseStanding::Stopped(reason) => Some(reason),
                _ => None,
            },
            id: row.id,
            title: row.title,
            attempts: row.attempts,
            last_attempt: row.last,
            usage: row.usage,
        })
        .collect();
    let next_phase = snapshot.ok().and_then(|snapshot| {
        next_pending(state, &snapshot.phase_ids())
            .and_then(|id| snapshot.plan.phase(id))
            .map(|phase| PhaseRef {
                id: phase.id.clone(),
                title: phase.title.clone(),
            })
    });
    // `Ok(None)`: there is no phase to resolve.
    let resolve = |phase_id: &str| -> Result<Option<String>, InputError> {
        match snapshot
            .ok()
            .and_then(|snapshot| snapshot.plan.phase(phase_id))
        {
            Some(phase) => execution_workspace_of(location, phase).map(Some),
            None => Ok(None),
        }
    };
    let selected = if let Some(attempt) = &state.active_attempt {
        Ok(Some(attempt.execution_workspace.clone()))
    } else if let Some(stop) = &state.stop {
        match state
            .last_run
            .as_ref()
            .filter(|last_run| last_run.phase_id == stop.phase_id)
        {
            Some(last_run) => Ok(Some(last_run.execution_workspace.clone())),
            None => resolve(&stop.phase_id),
        }
    } else {
        match &next_phase {
            Some(phase) => resolve(&phase.id),
            None => Ok(None),
        }
    };
    let active_attempt = state
        .active_attempt
        .as_ref()
        .map(|attempt| ActiveAttemptReport {
            id: attempt.id.clone(),
            status: attempt.status.as_str(),
            phase_id: attempt.phase.id.clone(),
            phase_title: attempt.phase.title.clone(),
            started_at: attempt.started_at.to_string(),
            pid: attempt.process.as_ref().map(|process| process.pid),
            process_group_id: attempt
                .process
                .as_ref()
                .map(|process| process.process_group_id),
            worker_alive: recorded_worker_alive(attempt),
            // What may still run of a recorded attempt, not of the one a live run runs.
            live_processes: match running {
                Some(_) => None,
                None => attempt_processes(&attempt.id, &attempt.started_at.to_string()),
            },
            execution_workspace: attempt.execution_workspace.clone(),
            prompt_path: attempt.prompt_path.clone(),
            transcript_path: attempt.transcript_path.clone(),
            transcript_exists: is_file(&attempt.transcript_path),
            outcome_path: attempt.outcome_path.clone(),
            outcome_committed: false,
            activity: streamed_activity(location, &attempt.id),
        });
    let last_run = state.last_run.as_ref().map(|last_run| LastRunReport {
        run_id: last_run.run_id.clone(),
        phase_id: last_run.phase_id.clone(),
        status: last_run.status,
        started_at: last_run.started_at.to_string(),
        finished_at: last_run.finished_at.to_string(),
        exit_code: last_run.exit_code,
        transcript_path: last_run.transcript_path.clone(),
        transcript_exists: is_file(&last_run.transcript_path),
        outcome_path: last_run.outcome_path.clone(),
        summary: last_run.summary.clone(),
        watchdog_losses: state
            .committed_outcomes
            .iter()
            .rev()
            .find(|entry| entry.attempt_id == last_run.run_id)
            .and_then(|entry| entry.watchdog_losses),
        live_processes: attempt_processes(&last_run.run_id, &last_run.started_at.to_string()),
    });
    let retry_schedule = state.retry_schedule.as_ref().map(|schedule| {
        RetryScheduleReport {
            phase_id: schedule.phase_id.clone(),
            after: schedule.after,
            attempt: schedule.attempt,
            // Written before the schedule recorded its n: the config's.
            of: schedule
                .max_attempts
                .or(config.map(|config| config.retry.max_attempts)),
            not_before: schedule.not_before.to_string(),
            reason: schedule.reason,
            reason_text: schedule.reason.describe().to_owned(),
            template_index: schedule.template_index,
            // The same verdict as `check`'s (a removed fallback agent, fewer attempts or
            // waits: no run resumes it).
            does_not_fit: config.and_then(|config| {
                let templates = 1 + config.rate_limit.fallback_agent_cmds.len();
                schedule
                    .fits_some_run(&config.retry, &config.rate_limit, templates)
                    .err()
                    .map(|why| why.to_string())
            }),
        }
    });
    let plan = plan_check(location, state, snapshot);
    let caps = super::next::latest_caps(location, state, config.map(|config| &config.budget));
    let spent = Spent::of_state(state);
    let next = snapshot.ok().and_then(|_| {
        super::next::from_state(
            location,
            &super::next::Facts {
                state,
                running,
                retry_due: retry_schedule
                    .as_ref()
                    .filter(|schedule| schedule.does_not_fit.is_none())
                    .map(|schedule| schedule.not_before.clone()),
                plan_changed: plan.status == PlanStanding::Changed,
                pending: next_phase.is_some(),
                budget_reached: caps.reached(spent),
            },
        )
    });
    StatusReport {
        plan_path: location.plan_path.clone(),
        plan_workspace: location.workspace.clone(),
        state_path: location.layout.state_path(),
        state_exists: is_file(&location.layout.state_path()),
        run_in_progress: running.is_some(),
        handler_pid: running.and_then(|running| running.handler_pid),
        execution_workspace: selected.as_ref().ok().cloned().flatten(),
        execution_workspace_error: selected.err().map(|error| error.to_string()),
        completed_phase_ids: state.completed_phase_ids.clone(),
        current_phase: state.current_phase.clone(),
        all_complete: snapshot.is_ok() && next_phase.is_none(),
        next_phase,
        stop: state.stop.clone(),
        active_attempt,
        latest_transcript: state
            .active_attempt
            .as_ref()
            .map(|attempt| attempt.transcript_path.clone())
            .or_else(|| {
                state
                    .last_run
                    .as_ref()
                    .map(|run| run.transcript_path.clone())
            }),
        latest_committed_outcome: state
            .last_run
            .as_ref()
            .and_then(|last_run| last_run.outcome_path.clone()),
        last_run,
        retry_schedule,
        plan,
        phases,
        totals,
        budget: BudgetStanding::of(&caps, spent),
        budget_text: caps
            .spent_of(spent)
            .map(|spent| format!("{spent}, every recorded attempt of the plan counted")),
        next,
    }
}

/// What `phase_id`'s latest committed attempt says about its Verify checks: its outcome record
/// is read only when the plan gives the phase checks (or cannot say).
fn phase_verification(
    state: &State,
    snapshot: Result<&PlanSnapshot, &InputError>,
    phase_id: &str,
) -> VerificationReport {
    let configured = snapshot
        .ok()
        .and_then(|snapshot| snapshot.plan.phase(phase_id))
        .map(|phase| phase.verify.len());
    let latest = state
        .committed_outcomes
        .iter()
        .rev()
        .find(|outcome| outcome.phase_id == phase_id);
    match latest {
        Some(_) if configured == Some(0) => VerificationReport::of(configured, None),
        Some(latest) => match read_outcome(&latest.path) {
            Ok(record) => VerificationReport::of(configured, record.verification()),
            Err(error) => {
                tracing::warn!(path = %latest.path, %error, "cannot read the outcome's verification");
                VerificationReport::unknown(configured)
            }
        },
        None => VerificationReport::of(configured, None),
    }
}

/// The attempt's latest status in the plan's event stream: the current file, then the
/// rotated one if the attempt is not in the current one. Unreadable streams say nothing.
fn streamed_activity(location: &PlanLocation, attempt_id: &str) -> Option<ActivityReport> {
    let current = std::path::PathBuf::from(&location.layout.dir).join("events.jsonl");
    for path in [event_log::rotated(&current), current].into_iter().rev() {
        // A line is at most the cap; the file a little over it at most.
        let Ok((bytes, _)) = regular_file::read_end(&path, STREAM_CAP_BYTES * 2) else {
            continue;
        };
        match latest_activity(&String::from_utf8_lossy(&bytes), attempt_id) {
            StreamedActivity::Status { text, since } => {
                return Some(ActivityReport { text, since });
            }
            StreamedActivity::NoStatus => return None,
            StreamedActivity::NotFound => {}
        }
    }
    None
}

/// A phase's standing in the words `status` and `check` share: an active attempt is the run's
/// own (`prepared`, `running`) while a handler holds the plan workspace, else `abandoned` —
/// no worker of a run of ours runs for it.
pub(super) fn standing_word(standing: PhaseStanding, run_in_progress: bool) -> &'static str {
    match standing {
        PhaseStanding::Active(_) if !run_in_progress => "abandoned",
        standing => standing.as_str(),
    }
}

fn plan_check(
    location: &PlanLocation,
    state: &State,
    snapshot: Result<&PlanSnapshot, &InputError>,
) -> PlanCheck {
    let accepted = state.plan.as_ref();
    let accepted_sha256 = accepted.map(|plan| plan.sha256.clone());
    match snapshot {
        // The bytes may still be readable (an edit that no longer parses): their hash shows
        // whether they changed since acceptance.
        Err(error) => PlanCheck {
            status: PlanStanding::Unreadable,
            accepted_sha256,
            current_sha256: current_plan_hash(location).ok(),
            error: Some(error.to_string()),
        },
        Ok(snapshot) => PlanCheck {
            status: PlanStanding::of(accepted, snapshot),
            accepted_sha256,
            current_sha256: Some(snapshot.sha256.clone()),
            error: None,
        },
    }
}

fn render_text(report: &StatusReport) -> Vec<String> {
    let mut lines = vec![
        format!("plan path: {}", report.plan_path),
        format!("plan workspace path: {}", report.plan_workspace),
        format!("state path: {}", report.state_path),
    ];
    if !report.state_exists {
        lines.push("state file: not created yet".to_owned());
    }
    if report.run_in_progress {
        let running = RunInProgress {
            handler_pid: report.handler_pid,
        };
        lines.push(format!("run in progress: {}", running.describe()));
    }
    if let Some(attempt) = &report.active_attempt {
        // While a handler holds the plan workspace the attempt is its own, running one;
        // otherwise no run of ours owns it any more.
        let label = if report.run_in_progress {
            "active"
        } else {
            "abandoned"
        };
        lines.push(format!(
            "{label}: {} ({}, attempt {})",
            attempt.phase_id, attempt.status, attempt.id
        ));
        lines.push(format!("attempt started: {}", attempt.started_at));
        lines.push(match (attempt.pid, attempt.process_group_id) {
            (Some(pid), Some(pgid)) => format!("worker process id: {pid} (process group {pgid})"),
            _ => "worker process identity: unknown".to_owned(),
        });
        match attempt.worker_alive {
            Some(true) => lines.push("worker process: still running".to_owned()),
            Some(false) => lines.push("worker process: not running".to_owned()),
            None => {}
        }
        if let Some(pids) = attempt
            .live_processes
            .as_ref()
            .filter(|pids| !pids.is_empty())
        {
            lines.push(still_running_line("attempt", pids));
        }
        if let Some(activity) = &attempt.activity {
            lines.push(format!(
                "activity: {} (since {})",
                activity.text,
                clock_of(&activity.since)
            ));
        }
        lines.push(format!("attempt prompt: {}", attempt.prompt_path));
        lines.push(format!("attempt transcript: {}", attempt.transcript_path));
        if !attempt.transcript_exists {
            lines.push(format!(
                "attempt transcript missing: {}",
                attempt.transcript_path
            ));
        }
        lines.push(format!(
            "attempt outcome (uncommitted): {}",
            attempt.outcome_path
        ));
    } else if let Some(stop) = &report.stop {
        lines.push(format!("stopped: {} ({})", stop.phase_id, stop.reason));
        lines.extend(crate::report::stop_lines(stop));
        if let Some(retry) = &report.retry_schedule {
            let of = retry.of.map(|of| format!(" of {of}")).unwrap_or_default();
            let then = match &retry.does_not_fit {
                None => "a run with the same retry policy resumes it".to_owned(),
                Some(why) => format!(
                    "it does not fit the config's retry policy ({why}); run requires --retry-stopped"
                ),
            };
            lines.push(format!(
                "retry scheduled: {} attempt {}{of} not before {} ({}); {then}",
                retry.phase_id, retry.attempt, retry.not_before, retry.reason_text
            ));
        }
    } else if report.all_complete {
        lines.push("all complete".to_owned());
    } else if let Some(phase) = &report.next_phase {
        lines.push(format!("next phase: {} {}", phase.id, phase.title));
    } else {
        lines.push("next phase: unavailable".to_owned());
    }
    lines.push(format!(
        "completed phases: {}",
        if report.completed_phase_ids.is_empty() {
            "none".to_owned()
        } else {
            report.completed_phase_ids.join(", ")
        }
    ));
    lines.push(match &report.current_phase {
        Some(phase) => format!("current phase: {} {}", phase.id, phase.title),
        None => "current phase: none".to_owned(),
    });
    lines.push(
        match (
            &report.execution_workspace,
            &report.execution_workspace_error,
        ) {
            (Some(path), _) => format!("execution workspace path: {path}"),
            (None, Some(error)) => format!("execution workspace path unavailable: {error}"),
            (None, None) => "execution workspace path: none".to_owned(),
        },
    );
    match &report.latest_transcript {
        Some(path) => {
            lines.push(format!("latest transcript: {path}"));
            if !is_file(path) {
                lines.push(format!("latest transcript missing: {path}"));
            }
        }
        None => lines.push("latest transcript: none".to_owned()),
    }
    lines.push(format!(
        "latest committed outcome: {}",
        report.latest_committed_outcome.as_deref().unwrap_or("none")
    ));
    if let Some(last_run) = &report.last_run {
        lines.push(format!(
            "last run: {} ({})",
            last_run.run_id, last_run.status
        ));
        if let Some(losses) = last_run.watchdog_losses {
            lines.push(format!(
                "last run watchdog: lost {losses} time(s) during the attempt (its transcript trailer says how, and whether a new one took over)"
            ));
        }
        if let Some(pids) = last_run
            .live_processes
            .as_ref()
            .filter(|pids| !pids.is_empty())
        {
            lines.push(still_running_line("last run", pids));
        }
    }
    lines.push(report.plan.status.line(
        report.plan.accepted_sha256.as_deref(),
        report.plan.current_sha256.as_deref(),
    ));
    if let (PlanStanding::Unreadable, Some(expected), Some(actual)) = (
        report.plan.status,
        &report.plan.accepted_sha256,
        &report.plan.current_sha256,
    ) && expected != actual
    {
        lines.push(PlanStanding::Changed.line(Some(expected), Some(actual)));
    }
    lines.extend(phase_table(
        &report.phases,
        report.plan.status == PlanStanding::Unreadable,
    ));
    lines.extend(verification_lines(&report.phases));
    lines.extend(
        report
            .phases
            .iter()
            .filter(|row| {
                row.last_attempt
                    .as_ref()
                    .is_some_and(|last| last.completed_without_changes)
            })
            .map(|row| {
                format!(
                    "warning: {} reported phase-complete but changed nothing",
                    row.id
                )
            }),
    );
    lines.push(totals_line(&report.totals));
    if report.totals.attempts > 0 {
        lines.push(format!("usage: {}", report.totals.usage.describe()));
    }
    if let Some(budget) = &report.budget_text {
        lines.push(format!("budget: {budget}"));
    }
    if let Some(next) = &report.next {
        lines.push(next.line());
    }
    lines
}

/// `attempt processes still running: 2 (pids 40, 41) carry its id …`.
fn still_running_line(whose: &str, pids: &[u32]) -> String {
    format!(
        "{whose} processes still running: {} (pids {}) carry its attempt id; stop them before retrying",
        pids.len(),
        units::pids(pids)
    )
}

/// `12:03:04` (UTC, as every time `status` prints) of an RFC 3339 time, or the text itself.
fn clock_of(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339).map_or_else(
        |_| rfc3339.to_owned(),
        |at| {
            at.with_timezone(&chrono::Utc)
                .format("%H:%M:%S")
                .to_string()
        },
    )
}

/// How the plan file stands against the snapshot the state accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum PlanStanding {
    NotAccepted,
    Moved,
    Changed,
    Unchanged,
    /// The plan cannot be read or parsed.
    Unreadable,
}

impl PlanStanding {
    pub(super) fn of(accepted: Option<&PlanRecord>, snapshot: &PlanSnapshot) -> Self {
        match accepted {
            None => Self::NotAccepted,
            Some(plan) if plan.path != snapshot.path => Self::Moved,
            Some(plan) if plan.sha256 != snapshot.sha256 => Self::Changed,
            Some(_) => Self::Unchanged,
        }
    }

    /// The `plan:` line, worded the same in `status` and `check`.
    pub(super) fn line(self, accepted: Option<&str>, current: Option<&str>) -> String {
        match self {
            Self::Unchanged => "plan: matches the accepted snapshot".to_owned(),
            Self::NotAccepted => "plan: not accepted yet (no run recorded)".to_owned(),
            Self::Changed => format!(
                "plan changed since accepted: expected {}, actual {}",
                accepted.unwrap_or("none"),
                current.unwrap_or("none")
            ),
            Self::Moved => {
                "plan path differs from the accepted plan path (moved or renamed plan)".to_owned()
            }
            Self::Unreadable => {
                "plan: cannot be read (see the error below); the phases are the ones the state records"
                    .to_owned()
            }
        }
    }
}

/// The phase table: the duration and output columns are the latest committed attempt's; the
/// tokens and cost columns too, followed by all attempts' sum when the phase had several
/// (`1200 (all 3600)`), `≥` for a lower bound and `?` for unknown. When the plan cannot be read
/// the titles are unknown, not missing from the plan.
fn phase_table(rows: &[PhaseRow], plan_unreadable: bool) -> Vec<String> {
    const NONE: &str = "–";
    let untitled = if plan_unreadable {
        NONE
    } else {
        "(not in the plan)"
    };
    // The latest attempt's cell, then every attempt's when there were several.
    let usage_cell = |row: &PhaseRow, text: fn(&UsageSummary) -> String| match &row.last_attempt {
        None => NONE.to_owned(),
        Some(last) if row.attempts > 1 => {
            format!("{} (all {})", text(&last.usage), text(&row.usage))
        }
        Some(last) => text(&last.usage),
    };
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|row| {
            let last = row.last_attempt.as_ref();
            [
                row.id.clone(),
                match &row.stop_reason {
                    Some(reason) => format!("{} ({reason})", row.status),
                    None => row.status.to_owned(),
                },
                row.attempts.to_string(),
                last.and_then(|last| last.duration_ms)
                    .map_or_else(|| NONE.to_owned(), units::duration),
                last.and_then(|last| last.output_bytes)
                    .map_or_else(|| NONE.to_owned(), units::bytes),
                usage_cell(row, UsageSummary::tokens_text),
                usage_cell(row, UsageSummary::cost_text),
                row.title.clone().unwrap_or_else(|| untitled.to_owned()),
            ]
        })
        .collect();
    let header = [
        "phase", "status", "attempts", "duration", "output", "tokens", "cost", "title",
    ]
    .map(str::to_owned);
    let mut widths = [0usize; 7];
    for row in std::iter::once(&header).chain(&cells) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    std::iter::once(&header)
        .chain(&cells)
        .map(|row| {
            let mut line = String::new();
            for (width, cell) in widths.iter().zip(row) {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
            }
            line.push_str(&row[7]);
            line
        })
        .collect()
}

/// `verify phase-2: failed: verify check 1 (cargo test) exited with code 101` for every phase,
/// unless no phase has checks or recorded a verification.
fn verification_lines(rows: &[PhaseRow]) -> Vec<String> {
    let any = rows.iter().any(|row| {
        row.verification.configured.is_some_and(|count| count > 0)
            || !row.verification.checks.is_empty()
            || row.verification.result == VerificationResult::Skipped
    });
    if !any {
        return Vec::new();
    }
    rows.iter()
        .map(|row| format!("verify {}: {}", row.id, row.verification.describe()))
        .collect()
}

/// `totals: 1/3 phases done · 3 attempts · 3m13s · 1.2 MiB output · tokens 5403 · cost $0.05`.
fn totals_line(totals: &RunTotals) -> String {
    let phases = match totals.phases_total {
        Some(total) => format!("{}/{total} phases done", totals.phases_done),
        None => format!("{} phases done", totals.phases_done),
    };
    let mut line = format!(
        "totals: {phases} · {} · {} · {} output",
        units::count(totals.attempts as usize, "attempt"),
        units::duration(totals.duration_ms),
        units::bytes(totals.output_bytes)
    );
    if totals.attempts_without_figures > 0 {
        line.push_str(&format!(
            " ({} recorded without duration and size)",
            units::count(totals.attempts_without_figures as usize, "attempt")
        ));
    }
    if totals.attempts > 0 {
        line.push_str(&format!(
            " · tokens {} · cost {}",
            totals.usage.tokens_text(),
            totals.usage.cost_text()
        ));
    }
    line
}
