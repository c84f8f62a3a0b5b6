//! The worker prompt (docs/worker-protocol.md, "The prompt"): plain text with delimited
//! sections, byte for byte an interface. Our own text mentions result tags only mid-line, and
//! every value copied from state follows a label or is an indented block, so no line of it can
//! start with a tag; only the preamble and the phase body are copied unindented, between their
//! START/END delimiters.

pub(crate) mod preview;

use super::plan::Phase;
use super::retry::schedule::RetrySchedule;
use super::state::{ActiveAttempt, LastRun, PlanRecord, State, Stop};
use super::verification::FailedCheck;

/// Everything the prompt shows. Paths are absolute.
#[derive(Clone, Debug)]
pub(crate) struct PromptContext<'a> {
    pub plan_workspace_path: &'a str,
    pub execution_workspace_path: &'a str,
    pub plan_path: &'a str,
    pub state_path: &'a str,
    pub run_id: &'a str,
    pub transcript_path: &'a str,
    pub preamble: &'a str,
    pub phase: &'a Phase,
    /// The state as durably recorded for this attempt (active attempt prepared).
    pub state: &'a State,
    /// Set when this phase already had attempts in this run.
    pub retry: Option<&'a RetryNote>,
    /// Set when the phase's previous attempt reported completion and a check of its `Verify`
    /// section failed.
    pub verification_failure: Option<&'a FailedCheck>,
}

/// What a retried attempt is told about the attempts of its phase before it: "attempt
/// `attempt` of `of`".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RetryNote {
    pub attempt: u32,
    /// The run's `retry.max_attempts`.
    pub of: u32,
    /// Why this attempt runs (`exponential backoff`, …).
    pub reason: String,
    /// The phase's earlier attempts in this run, oldest first.
    pub earlier: Vec<EarlierAttempt>,
}

impl RetryNote {
    /// The note of the attempt `schedule` runs after `earlier` in this run.
    pub(crate) fn following(
        schedule: &RetrySchedule,
        of: u32,
        earlier: Vec<EarlierAttempt>,
    ) -> Self {
        Self {
            attempt: schedule.attempt,
            of,
            reason: schedule.reason.describe().to_owned(),
            earlier,
        }
    }

    /// The note of the attempt a later run makes when it resumes `schedule` from the state:
    /// the stopped attempt the schedule follows (`last_run`) is its one earlier attempt.
    pub(crate) fn resuming(schedule: &RetrySchedule, of: u32, last_run: Option<&LastRun>) -> Self {
        let earlier = last_run.map(EarlierAttempt::from).into_iter().collect();
        Self::following(schedule, of, earlier)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EarlierAttempt {
    pub attempt_id: String,
    pub status: String,
    pub summary: String,
    pub transcript_path: String,
}

impl From<&LastRun> for EarlierAttempt {
    fn from(run: &LastRun) -> Self {
        Self {
            attempt_id: run.run_id.clone(),
            status: run.status.to_string(),
            summary: run.summary.clone(),
            transcript_path: run.transcript_path.clone(),
        }
    }
}

const TITLE: &str = "AI SESSION HANDLER WORKER PROTOCOL";

/// Instructions 1–5; instruction 6 names the phase.
const STARTUP_INSTRUCTIONS: [&str; 5] = [
    "Read the repository instructions first, starting with the AGENTS.md at the root of \
     execution_workspace_path, and follow the instructions it points to.",
    "Inspect the current repository state before editing anything.",
    "GLOBAL PLAN INTENT and SELECTED PHASE BODY below are exact copies from this invocation's \
     accepted immutable plan snapshot; use them for ordinary phase startup instead of \
     rereading the complete source plan.",
    "Read the global intent and the durable handoff context before deciding how to proceed. \
     Inspect an indexed outcome only when its concrete decision, validation evidence, \
     limitation or recovery history affects this phase.",
    "Treat complete transcripts as diagnostic evidence and do not replay them by default. You \
     may inspect source plan bytes to diagnose a mismatch or repository contradiction, and read \
     outcome records or transcripts when a concrete question needs them.",
];

/// Instructions 7–18.
const WORK_INSTRUCTIONS: [&str; 12] = [
    "Do not proceed to later phases, even if this phase finishes early.",
    "Restrict your work to execution_workspace_path and the selected phase; do not work in \
     any other repository.",
    "Follow the selected phase body as written unless the repository contradicts it; when it \
     does, say so in your result.",
    "Run the validation commands the phase names and make them pass before reporting \
     completion.",
    "Do not run git commit, push, checkout, reset, clean, stash, branch creation, or automatic \
     worktree operations.",
    "Change only the files the selected phase requires.",
    "Treat state_path and outcome records as runner-owned and read-only: do not create, edit, \
     replace or delete them, and report the phase outcome only through the terminal marker.",
    "When later phases will rely on a design decision, record it in ordinary repository \
     documentation.",
    "Do not make design-changing guesses: if the phase needs a product, architecture, schema, \
     API or workflow decision that the plan does not make, stop with \
     `<phase-needs-clarification>` and ask a specific question.",
    "Asking for clarification is a first-class stop state, not a failure.",
    "End exactly one output stream with exactly one terminal marker from the grammar below: the \
     opening tag must begin at a line boundary, the result must not be empty, and only \
     whitespace may follow the closing tag on that stream.",
    "Never emit a recognized tag anywhere else, including examples, quoted text, fenced blocks, \
     progress, or diagnostics. Do not emit a result on both stdout and stderr.",
];

const FAILURE_MODES: [&str; 4] = [
    "If the phase needs external action such as credentials, access or an unavailable \
     service, end with `<phase-blocked>` and say exactly what is needed.",
    "If the phase needs a specific user decision, end with `<phase-needs-clarification>` and \
     ask one specific question.",
    "End with `<phase-complete>` only after the implementation is done and its validation \
     passed.",
    "Every terminal result should summarize changed artifacts, validation commands and \
     results, decisions, remaining limitations, and relevant handoff references, concisely but \
     with enough detail for a fresh worker to continue.",
];

/// The only lines of the prompt that start with a result tag.
const MARKER_GRAMMAR: &str = "\
<phase-complete>summary</phase-complete>
<phase-blocked>reason</phase-blocked>
<phase-needs-clarification>specific question for user</phase-needs-clarification>
";

pub(crate) fn render_prompt(context: &PromptContext<'_>) -> String {
    let phase = context.phase;
    let mut prompt = String::with_capacity(16 * 1024 + context.preamble.len() + phase.body.len());
    prompt.push_str(TITLE);
    prompt.push_str("\n\n");

    prompt.push_str("CONTEXT\n");
    let mut fields = Fields { out: &mut prompt };
    for (key, value) in [
        ("plan_workspace_path", context.plan_workspace_path),
        ("execution_workspace_path", context.execution_workspace_path),
        ("plan_path", context.plan_path),
        ("state_path", context.state_path),
        ("run_id", context.run_id),
        ("transcript_path", context.transcript_path),
        ("selected_phase_id", &phase.id),
        ("selected_phase_title", &phase.title),
    ] {
        // The context block is a bullet list of fields.
        fields.value(0, &format!("- {key}"), value);
    }
    prompt.push('\n');

    prompt.push_str("INSTRUCTIONS\n");
    let selection = format!(
        "Implement exactly selected phase {}: {}.",
        phase.id, phase.title
    );
    let instructions = STARTUP_INSTRUCTIONS
        .into_iter()
        .chain([selection.as_str()])
        .chain(WORK_INSTRUCTIONS);
    push_bullets(&mut prompt, instructions);
    prompt.push('\n');

    prompt.push_str("FAILURE MODES\n");
    push_bullets(&mut prompt, FAILURE_MODES);
    prompt.push('\n');

    if !phase.verify.is_empty() {
        push_verification(&mut prompt, phase);
        prompt.push('\n');
    }

    if let Some(retry) = context.retry {
        push_retry(&mut prompt, &phase.id, retry);
        prompt.push('\n');
    }

    if let Some(failure) = context.verification_failure {
        push_verification_failure(&mut prompt, &phase.id, failure);
        prompt.push('\n');
    }

    let sections = [
        ("GLOBAL PLAN INTENT", context.preamble),
        ("PREVIOUS STATE SUMMARY", &state_summary(context.state)),
        ("DURABLE HANDOFF CONTEXT", &handoff(context.state)),
        ("SELECTED PHASE BODY", &phase.body),
        ("TERMINAL MARKER GRAMMAR", MARKER_GRAMMAR),
    ];
    let sections = sections.map(|(label, text)| delimited(label, text));
    prompt.push_str(&sections.join("\n"));
    prompt
}

fn push_retry(out: &mut String, phase_id: &str, retry: &RetryNote) {
    out.push_str("RETRY\n");
    let which = format!(
        "Phase {phase_id} was attempted before in this run; this is attempt {} of {}.",
        retry.attempt, retry.of
    );
    push_bullets(
        out,
        [
            which.as_str(),
            "The earlier attempts below may have left partial changes in \
             execution_workspace_path: inspect them first, then build on them or undo them \
             deliberately. Read an earlier transcript only when its details matter.",
        ],
    );
    let mut fields = Fields { out };
    fields.value(0, "retry_reason", &retry.reason);
    fields.group(0, "earlier_attempts_of_this_phase");
    for earlier in &retry.earlier {
        fields.item(1, &format!("attempt_id: {}", earlier.attempt_id));
        fields.value(2, "status", &earlier.status);
        fields.value(2, "summary", &earlier.summary);
        fields.value(2, "transcript_path", &earlier.transcript_path);
    }
}

fn push_verification(out: &mut String, phase: &Phase) {
    out.push_str("VERIFICATION\n");
    push_bullets(
        out,
        [
            "After you report `<phase-complete>`, the runner runs the checks of the selected \
             phase's Verify section (in SELECTED PHASE BODY below), in order, in \
             execution_workspace_path, and accepts the completion only when every check \
             passes; the first failing check stops the phase as verification-failed.",
            "Run the checks yourself and make them pass before reporting completion.",
        ],
    );
    let mut fields = Fields { out };
    fields.group(0, "checks");
    for check in &phase.verify {
        fields.item(
            1,
            &format!(
                "check {} ({}): {}",
                check.index,
                check.interpreter.name(),
                check.first_line()
            ),
        );
    }
}

/// The check's first line and the tail of its output are values after their labels or
/// indented blocks, so none of their lines starts a line with a result tag.
fn push_verification_failure(out: &mut String, phase_id: &str, failure: &FailedCheck) {
    out.push_str("VERIFICATION FAILURE\n");
    let what = format!(
        "The previous attempt of phase {phase_id} reported completion, but verify check {} {}, \
         so the completion was not accepted.",
        failure.index,
        failure.how()
    );
    push_bullets(
        out,
        [
            what.as_str(),
            "Find the cause in the check's output below, fix it in execution_workspace_path, \
             run the check yourself, and report completion only when every check passes.",
        ],
    );
    let mut fields = Fields { out };
    fields.value(0, "failed_check", &failure.index.to_string());
    fields.value(0, "command_first_line", &failure.command_first_line);
    fields.optional(
        0,
        "exit_code",
        failure.exit_code.map(|code| code.to_string()).as_deref(),
    );
    fields.value(0, "timed_out", if failure.timed_out { "yes" } else { "no" });
    if failure.output_tail.trim().is_empty() {
        fields.value(0, "output_tail", "none");
    } else {
        fields.block(0, "output_tail", &failure.output_tail);
    }
}

fn push_bullets<'a>(out: &mut String, bullets: impl IntoIterator<Item = &'a str>) {
    for bullet in bullets {
        out.push_str(&format!("- {bullet}\n"));
    }
}

/// `<LABEL> START`, the text, a newline unless the text already ends with one, `<LABEL> END`.
fn delimited(label: &str, text: &str) -> String {
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    format!("{label} START\n{text}{newline}{label} END\n")
}

/// Writes `label: value` lines, two spaces of indentation per nesting level.
struct Fields<'a> {
    out: &'a mut String,
}

impl Fields<'_> {
    fn line(&mut self, depth: usize, text: &str) {
        self.out.push_str(&"  ".repeat(depth));
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// `label:` alone, introducing nested fields or a block.
    fn group(&mut self, depth: usize, label: &str) {
        self.line(depth, &format!("{label}:"));
    }

    /// `label: value`; a value spanning lines is written as a block instead, so none of its
    /// lines can pass for a label or start a line with a result tag.
    fn value(&mut self, depth: usize, label: &str, value: &str) {
        if value.contains('\n') {
            self.block(depth, label, value);
        } else {
            self.line(depth, &format!("{label}: {value}"));
        }
    }

    /// `label:` followed by each line of `text`, one level deeper.
    fn block(&mut self, depth: usize, label: &str, text: &str) {
        self.group(depth, label);
        for line in text.lines() {
            self.line(depth + 1, line);
        }
    }

    /// `- text`; continuation lines of a multi-line text go one level deeper.
    fn item(&mut self, depth: usize, text: &str) {
        let mut lines = text.lines();
        self.line(depth, &format!("- {}", lines.next().unwrap_or_default()));
        for line in lines {
            self.line(depth + 1, line);
        }
    }

    fn optional(&mut self, depth: usize, label: &str, value: Option<&str>) {
        self.value(depth, label, value.unwrap_or("none"));
    }

    /// `label: none`, or `label:` and the fields `write` adds one level deeper.
    fn nested<T>(&mut self, label: &str, value: Option<&T>, write: impl FnOnce(&mut Self, &T)) {
        match value {
            None => self.value(0, label, "none"),
            Some(value) => {
                self.group(0, label);
                write(self, value);
            }
        }
    }
}

/// The durable state in brief. The last run's summary is left out: the handoff context shows
/// it.
fn state_summary(state: &State) -> String {
    let mut text = String::new();
    let mut fields = Fields { out: &mut text };
    fields.nested("plan", state.plan.as_ref(), write_plan);
    let completed = state.completed_phase_ids.join(", ");
    fields.value(
        0,
        "completed_phase_ids",
        if completed.is_empty() {
            "none"
        } else {
            &completed
        },
    );
    fields.value(
        0,
        "committed_outcome_count",
        &state.committed_outcomes.len().to_string(),
    );
    fields.nested(
        "current_phase",
        state.current_phase.as_ref(),
        |fields, phase| {
            fields.value(1, "id", &phase.id);
            fields.value(1, "title", &phase.title);
        },
    );
    fields.nested("stop", state.stop.as_ref(), write_stop);
    fields.nested(
        "active_attempt",
        state.active_attempt.as_ref(),
        write_active_attempt,
    );
    fields.nested("last_run", state.last_run.as_ref(), write_last_run);
    text
}

fn write_plan(fields: &mut Fields<'_>, plan: &PlanRecord) {
    fields.value(1, "path", &plan.path);
    fields.value(1, "sha256", &plan.sha256);
    fields.value(1, "accepted_at", &plan.accepted_at.to_string());
}

fn write_stop(fields: &mut Fields<'_>, stop: &Stop) {
    fields.value(1, "reason", stop.reason.as_str());
    fields.value(1, "phase_id", &stop.phase_id);
    fields.optional(1, "message", stop.message.as_deref());
    fields.optional(
        1,
        "clarification_request",
        stop.clarification_request.as_deref(),
    );
}

fn write_active_attempt(fields: &mut Fields<'_>, attempt: &ActiveAttempt) {
    fields.value(1, "id", &attempt.id);
    fields.value(1, "status", attempt.status.as_str());
    fields.value(1, "phase_id", &attempt.phase.id);
    fields.value(1, "snapshot_sha256", &attempt.snapshot.sha256);
    fields.value(1, "execution_workspace", &attempt.execution_workspace);
    fields.value(1, "started_at", &attempt.started_at.to_string());
    fields.value(1, "prompt_path", &attempt.prompt_path);
    fields.value(1, "transcript_path", &attempt.transcript_path);
    fields.value(1, "outcome_path", &attempt.outcome_path);
}

fn write_last_run(fields: &mut Fields<'_>, run: &LastRun) {
    fields.value(1, "run_id", &run.run_id);
    fields.value(1, "phase_id", &run.phase_id);
    fields.value(1, "status", run.status.as_str());
    fields.value(1, "started_at", &run.started_at.to_string());
    fields.value(1, "finished_at", &run.finished_at.to_string());
    fields.value(1, "exit_code", &run.exit_code.to_string());
    fields.value(1, "execution_workspace", &run.execution_workspace);
    fields.value(1, "prompt_path", &run.prompt_path);
    fields.value(1, "transcript_path", &run.transcript_path);
    fields.optional(1, "outcome_path", run.outcome_path.as_deref());
}

/// The latest terminal summary (whatever `last_run` is) and an index of every other committed
/// outcome, each labelled with its status so a failure is never taken for a finished
/// prerequisite.
fn handoff(state: &State) -> String {
    let mut text = String::new();
    let mut fields = Fields { out: &mut text };
    fields.nested(
        "latest_relevant_summary",
        state.last_run.as_ref(),
        |fields, run| {
            fields.value(1, "attempt_id", &run.run_id);
            fields.value(1, "phase_id", &run.phase_id);
            fields.value(1, "status", run.status.as_str());
            fields.optional(1, "outcome_path", run.outcome_path.as_deref());
            fields.block(1, "summary", &run.summary);
        },
    );

    let latest_path = state
        .last_run
        .as_ref()
        .and_then(|run| run.outcome_path.as_deref());
    let mut earlier = state
        .committed_outcomes
        .iter()
        .filter(|outcome| Some(outcome.path.as_str()) != latest_path)
        .peekable();
    if earlier.peek().is_none() {
        fields.value(0, "earlier_committed_outcomes", "none");
    } else {
        fields.group(0, "earlier_committed_outcomes");
        for outcome in earlier {
            fields.item(
                1,
                &format!(
                    "{} | {} | {}",
                    outcome.phase_id, outcome.status, outcome.path
                ),
            );
        }
    }
    text
}

#[cfg(test)]
mod tests;
