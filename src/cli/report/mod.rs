//! `ai-session-handler report`: what an unattended run did, in one place (docs/cli.md,
//! "report"). Gathering reads state, outcomes and events (`gather`); each format renders the
//! one model, `domain::plan_report::PlanReport`, and escapes agent text for itself.

mod gather;
mod html;
mod markdown;
mod text;

use crate::cli::args::ReportArgs;
use crate::domain::exit_code::ExitCode;
use crate::invocation::locate_for_report;
use crate::platform::durable::replace_atomically;
use crate::report::Output;

use crate::domain::changes::ChangeSummary;
use crate::domain::plan_report::{PhaseReport, PlanReport, Standing, WaitReport};
use crate::domain::state::AttemptStatus;
use crate::domain::token_usage::format_usd;
use crate::domain::token_usage::summary::{Completeness, UsageSummary};

/// `--format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For a terminal.
    #[default]
    Text,
    /// For a pull request or an issue (with a mermaid timeline).
    Markdown,
    /// One self-contained page: no script, no network request.
    Html,
    /// The report as data (docs/report.schema.json).
    Json,
}

/// `report`: prints the report (or writes it to `--output`).
pub(super) fn run(args: &ReportArgs) -> ExitCode {
    let report = match locate_for_report(args.plan.path())
        .and_then(|location| gather::gather(&location, args.run_id.as_deref()))
    {
        Ok(report) => report,
        Err(error) => {
            Output::error(error.to_string()).print();
            return error.exit_code();
        }
    };
    let rendered = render(&report, args.format);
    match &args.output {
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(rendered.as_bytes());
            let _ = out.flush();
            ExitCode::Success
        }
        Some(path) => match replace_atomically(
            &std::path::Path::new(".").join(path),
            rendered.as_bytes(),
            "report",
        ) {
            Ok(()) => ExitCode::Success,
            Err(error) => {
                Output::error(format!("--output {}: {error}", path.display())).print();
                ExitCode::InvalidInput
            }
        },
    }
}

/// The report in `format`.
pub(crate) fn render(report: &PlanReport, format: Format) -> String {
    match format {
        Format::Text => text::render(report),
        Format::Markdown => markdown::render(report),
        Format::Html => html::render(report),
        Format::Json => {
            let mut json = serde_json::to_string_pretty(report).expect("a report serializes");
            json.push('\n');
            crate::domain::display::printable_json(&json).into_owned()
        }
    }
}

/// Agent text longer than this is cut in the text, Markdown and HTML reports (the outcome keeps
/// it whole, and so does the JSON report).
const SHOWN_TEXT_BYTES: usize = 4096;

/// `text`, cut at `SHOWN_TEXT_BYTES` on a character boundary with a note of what was left out.
fn excerpt(text: &str) -> String {
    if text.len() <= SHOWN_TEXT_BYTES {
        return text.to_owned();
    }
    let mut end = SHOWN_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[… {} more bytes; the whole text is in the outcome]",
        &text[..end],
        text.len() - end
    )
}

/// `text` without control characters other than line breaks and tabs (each shown as `�`), so
/// no format can be disturbed by an escape sequence, a NUL or a bidirectional override.
fn without_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if matches!(c, '\n' | '\t') || !crate::domain::status_text::is_unprintable(c) {
                c
            } else {
                '\u{fffd}'
            }
        })
        .collect()
}

/// What every attempt of `phase` used.
fn phase_usage(phase: &PhaseReport) -> UsageSummary {
    UsageSummary::sum(phase.attempts.iter().map(|attempt| &attempt.usage))
}

/// `12,345 in / 2,000 out tokens, $0.12` with `≥` when partial, `usage unknown` when unknown.
fn usage_line(usage: &UsageSummary) -> String {
    let bound = match usage.completeness {
        Completeness::Unknown => return "usage unknown".to_owned(),
        Completeness::Partial => "≥ ",
        Completeness::Reported => "",
    };
    let count = |value: Option<u64>| value.map_or_else(|| "?".to_owned(), thousands);
    let mut line = format!(
        "{bound}{} in / {} out tokens",
        count(usage.counts.input_tokens),
        count(usage.counts.output_tokens)
    );
    if let Some(cost) = usage.counts.cost_usd {
        line.push_str(&format!(", {bound}{}", format_usd(cost)));
    }
    line
}

fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `3 files (+120 −4), 1 commit` or `nothing`.
fn changes_line(summary: &ChangeSummary) -> String {
    if summary.is_empty() {
        return "nothing".to_owned();
    }
    let mut line = format!(
        "{} file{} (+{} −{})",
        summary.file_count(),
        if summary.file_count() == 1 { "" } else { "s" },
        summary.lines_added,
        summary.lines_removed
    );
    match summary.commit_count() {
        0 => {}
        1 => line.push_str(", 1 commit"),
        commits => line.push_str(&format!(", {commits} commits")),
    }
    line
}

/// One line per changed file (`M src/a.rs`, `R old → new`), then `… and N more` for those the
/// summary does not list; every path through `escape`.
fn file_lines(summary: &ChangeSummary, escape: fn(&str) -> String) -> Vec<String> {
    let mut lines: Vec<String> = summary
        .files
        .iter()
        .map(|file| {
            let from = file
                .from
                .as_deref()
                .map(|from| format!("{} → ", escape(from)))
                .unwrap_or_default();
            format!("{} {from}{}", file.change.letter(), escape(&file.path))
        })
        .collect();
    if summary.files_not_listed > 0 {
        lines.push(format!("… and {} more", summary.files_not_listed));
    }
    lines
}

/// `done`, `pending`, `running`, or `stopped: blocked`.
fn standing_words(phase: &PhaseReport) -> String {
    let standing = match phase.standing {
        Standing::Done => "done",
        Standing::Pending => "pending",
        Standing::Running => "running",
        Standing::Stopped => match &phase.stop {
            Some(stop) => return format!("stopped: {}", stop.status),
            None => "stopped",
        },
    };
    standing.to_owned()
}

/// How an attempt's status reads; `None` is an attempt without a recorded outcome.
fn status_name(status: Option<AttemptStatus>, unknown: &'static str) -> &'static str {
    status.map_or(unknown, AttemptStatus::as_str)
}

/// What a wait before an attempt waited for.
fn wait_kind(wait: &WaitReport) -> &'static str {
    if wait.rate_limited {
        "rate-limited"
    } else {
        "retry delay"
    }
}

/// How an attempt's status is shown: its colour and mermaid tag; its name is its HTML class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "kebab-case")]
enum Tone {
    Complete,
    /// It waits for a person's answer or decision.
    Person,
    Failed,
    Running,
}

impl Tone {
    fn of(status: Option<AttemptStatus>) -> Self {
        let Some(status) = status else {
            return Self::Running;
        };
        if status == AttemptStatus::PhaseComplete {
            Self::Complete
        } else if status.is_answerable() {
            Self::Person
        } else {
            Self::Failed
        }
    }

    fn class(self) -> &'static str {
        self.into()
    }

    fn legend(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Person => "waits for an answer",
            Self::Failed => "failed or stopped",
            Self::Running => "running",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Self::Complete => "#2da44e",
            Self::Person => "#d4a72c",
            Self::Failed => "#cf222e",
            Self::Running => "#0969da",
        }
    }
}

#[cfg(test)]
mod tests;
