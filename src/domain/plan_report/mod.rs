//! The morning report of a plan (`ai-session-handler report`, docs/cli.md "report"): every
//! phase's standing and attempts, what each attempt's agent said, changed, verified, spent and
//! waited for, the totals and the next step. One model, rendered as text, Markdown, HTML or
//! JSON (`docs/report.schema.json`) by `cli::report`.

use serde::Serialize;

use super::changes::Changes;
use super::state::AttemptStatus;
use super::token_usage::summary::UsageSummary;

/// The whole report. Its JSON is `report --format json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanReport {
    /// The report format's version: 1.
    pub schema_version: u32,
    pub plan: String,
    pub plan_workspace: String,
    pub state_path: String,
    /// When the report was made (RFC 3339, UTC).
    pub generated_at: String,
    /// The invocation (`run_id` of events.jsonl) the report is limited to, if any.
    pub run_id: Option<String>,
    /// A run holds the plan workspace right now.
    pub run_in_progress: bool,
    pub phases: Vec<PhaseReport>,
    pub totals: Totals,
    /// The command that continues the plan, when one does.
    pub next: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseReport {
    pub id: String,
    pub title: String,
    pub standing: Standing,
    /// The stop's question (`needs-clarification`) or reason (any other stop).
    pub stop: Option<StopReport>,
    pub attempts: Vec<AttemptReport>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    Done,
    Pending,
    Running,
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StopReport {
    pub status: AttemptStatus,
    /// The question, the blocker's reason or the runner's diagnostic (agent text, untrusted).
    pub text: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AttemptReport {
    pub attempt_id: String,
    /// The invocation that ran it (null when events.jsonl no longer has it).
    pub run_id: Option<String>,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub duration_ms: Option<u64>,
    /// Null while the attempt runs or when it was left unresolved.
    pub status: Option<AttemptStatus>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The agent's own result body, or the runner's diagnostic (agent text, untrusted).
    pub summary: Option<String>,
    pub checks: Vec<CheckReport>,
    pub usage: UsageSummary,
    /// What it changed in its git work tree; null when not recorded (older runs, turned off).
    pub changes: Option<Changes>,
    /// It reported `phase-complete` but changed no file and made no commit.
    pub completed_without_changes: bool,
    /// Waits before it started: retry delays and rate-limit waits.
    pub waits: Vec<WaitReport>,
    /// How often the agent moved its idle deadline (`EXTEND_TIMEOUT_USEC`).
    pub idle_extensions: u32,
    pub transcript_path: String,
    pub outcome_path: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub index: u32,
    pub command_first_line: String,
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaitReport {
    /// The wait was a rate limit's (else a retry's delay).
    pub rate_limited: bool,
    pub from: String,
    pub until: String,
    pub seconds: u64,
    /// Why: the status of the attempt before it, or the reset phrase.
    pub reason: String,
}

/// Sums over the attempts in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Totals {
    pub phases: usize,
    pub phases_done: usize,
    pub attempts: usize,
    /// Time the agents ran (their attempts' durations).
    pub agent_ms: u64,
    /// Time spent waiting between attempts.
    pub waiting_ms: u64,
    /// Tokens and cost: a sum of what the agents reported, so an estimate (`completeness`).
    pub usage: UsageSummary,
    pub checks_passed: usize,
    pub checks_failed: usize,
    pub completed_without_changes: usize,
}

impl Totals {
    pub fn of(phases: &[PhaseReport]) -> Self {
        let attempts = || phases.iter().flat_map(|phase| &phase.attempts);
        let checks = || attempts().flat_map(|attempt| &attempt.checks);
        Self {
            phases: phases.len(),
            phases_done: phases
                .iter()
                .filter(|phase| phase.standing == Standing::Done)
                .count(),
            attempts: attempts().count(),
            agent_ms: attempts().filter_map(|attempt| attempt.duration_ms).sum(),
            waiting_ms: attempts()
                .flat_map(|attempt| &attempt.waits)
                .map(|wait| wait.seconds * 1000)
                .sum(),
            usage: UsageSummary::sum(attempts().map(|attempt| &attempt.usage)),
            checks_passed: checks().filter(|check| check.passed).count(),
            checks_failed: checks().filter(|check| !check.passed).count(),
            completed_without_changes: attempts()
                .filter(|attempt| attempt.completed_without_changes)
                .count(),
        }
    }
}

pub mod assemble;
pub mod history;
