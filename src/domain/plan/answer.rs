//! A person's answer to a stopped phase, written into the plan (docs/cli.md, "answer"): a new
//! section at the end of the stopped phase's body (or of the preamble), one heading level below
//! the phase heading, holding the stop's question quoted and the answer with its UTC time.
//!
//! Every other byte of the plan stays as it was; the section uses the plan's line ending. The
//! result must parse to the same phases with the same workspaces and Verify checks, or nothing
//! is written.

use super::{ParsedPlan, PlanError, parse_plan};

/// Where the answer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnswerPlace<'a> {
    /// At the end of this phase's body.
    Phase(&'a str),
    /// At the end of the preamble, before the first phase heading.
    Preamble,
}

/// The stops a person answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnsweredStop {
    NeedsClarification,
    Blocked,
}

/// What the section says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer<'a> {
    /// The stop it answers.
    pub(crate) stop: AnsweredStop,
    /// The stopped phase.
    pub(crate) phase_id: &'a str,
    /// The question or the blocker's reason, as the state records it (agent-written).
    pub(crate) question: &'a str,
    /// The person's answer.
    pub(crate) text: &'a str,
    /// When it was answered, RFC 3339 UTC.
    pub(crate) answered_at: &'a str,
}

/// Why the answer was not written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AnswerRefusal {
    /// The answer is empty or only whitespace.
    #[error("the answer is empty")]
    Empty,
    /// The plan as it is does not parse.
    #[error("the plan does not parse: {0}")]
    PlanInvalid(PlanError),
    /// The phase is not in the plan any more.
    #[error("the plan has no phase {0} any more")]
    NoSuchPhase(String),
    /// With the answer, the plan would not parse.
    #[error("with the answer the plan would not parse ({0}); nothing was written")]
    WouldNotParse(PlanError),
    /// With the answer, the plan would have other phases, workspaces or Verify checks.
    #[error(
        "the answer would change the plan's structure: {0}; nothing was written (an answer may \
         not hold a phase heading, a `### Workspace` or Verify section, or an unclosed code fence)"
    )]
    WouldChange(String),
}

/// The plan with the answer's section inserted, and the section as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answered {
    pub(crate) plan: Vec<u8>,
    pub(crate) section: String,
}

/// Inserts `answer` at `place` in `plan`, checking that the result keeps the plan's structure.
pub(crate) fn insert_answer(
    plan: &[u8],
    place: AnswerPlace<'_>,
    answer: &Answer<'_>,
) -> Result<Answered, AnswerRefusal> {
    if answer.text.trim().is_empty() {
        return Err(AnswerRefusal::Empty);
    }
    let parsed = parse_plan(plan).map_err(AnswerRefusal::PlanInvalid)?;
    let text = std::str::from_utf8(plan).expect("a parsed plan is UTF-8");
    let starts = line_starts(text);
    let (offset, level) = match place {
        AnswerPlace::Phase(id) => {
            let phase = parsed
                .phase(id)
                .ok_or_else(|| AnswerRefusal::NoSuchPhase(id.to_owned()))?;
            let heading = line_at(text, &starts, phase.heading_line);
            let end = starts.get(phase.end_line).copied().unwrap_or(text.len());
            (end, heading_level(heading) + 1)
        }
        AnswerPlace::Preamble => {
            let first = &parsed.phases[0];
            let heading = line_at(text, &starts, first.heading_line);
            (starts[first.heading_line - 1], heading_level(heading) + 1)
        }
    };
    let eol = line_ending(text);
    let before = &text[..offset];
    let at_end = offset == text.len();
    let mut section = String::new();
    if !before.is_empty() && !before.ends_with('\n') {
        section.push_str(eol);
    }
    if !before.is_empty() && !before.ends_with(&format!("{eol}{eol}")) {
        section.push_str(eol);
    }
    section.push_str(&render_section(answer, level.min(6), eol));
    if at_end && !text.is_empty() && !text.ends_with('\n') {
        // The plan ended without a line break; so does the plan with the answer.
        section.truncate(section.len() - eol.len());
    } else if !at_end {
        section.push_str(eol);
    }
    let mut answered = Vec::with_capacity(plan.len() + section.len());
    answered.extend_from_slice(before.as_bytes());
    answered.extend_from_slice(section.as_bytes());
    answered.extend_from_slice(&text.as_bytes()[offset..]);
    let reparsed = parse_plan(&answered).map_err(AnswerRefusal::WouldNotParse)?;
    same_structure(&parsed, &reparsed).map_err(AnswerRefusal::WouldChange)?;
    Ok(Answered {
        plan: answered,
        section,
    })
}

/// The section itself, each line ended by `eol`.
fn render_section(answer: &Answer<'_>, level: usize, eol: &str) -> String {
    let hashes = "#".repeat(level);
    let asked = match answer.stop {
        AnsweredStop::NeedsClarification => "asked",
        AnsweredStop::Blocked => "reported it was blocked",
    };
    let mut lines = vec![
        format!("{hashes} Answer ({})", answer.answered_at),
        String::new(),
        format!("The agent of {} {asked}:", answer.phase_id),
        String::new(),
    ];
    // Quoted, the agent's text can hold no heading, fence or section of the plan's structure.
    lines.extend(quoted(answer.question));
    lines.push(String::new());
    lines.push("The answer:".to_owned());
    lines.push(String::new());
    lines.extend(
        answer
            .text
            .trim_end()
            .lines()
            .map(|line| line.strip_suffix('\r').unwrap_or(line).to_owned()),
    );
    let mut section = lines.join(eol);
    section.push_str(eol);
    section
}

/// Markdown block-quote lines of `text` (a blank line stays part of the quote).
fn quoted(text: &str) -> Vec<String> {
    let text = text.trim();
    if text.is_empty() {
        return vec![">".to_owned()];
    }
    text.lines()
        .map(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line).trim_end();
            if line.is_empty() {
                ">".to_owned()
            } else {
                format!("> {line}")
            }
        })
        .collect()
}

/// The same phases, in order, with the same titles, workspaces and Verify checks.
fn same_structure(before: &ParsedPlan, after: &ParsedPlan) -> Result<(), String> {
    let ids = |plan: &ParsedPlan| {
        plan.phases
            .iter()
            .map(|phase| phase.id.clone())
            .collect::<Vec<_>>()
    };
    if ids(before) != ids(after) {
        return Err(format!(
            "its phases would be {} instead of {}",
            ids(after).join(", "),
            ids(before).join(", ")
        ));
    }
    for (old, new) in before.phases.iter().zip(&after.phases) {
        if old.title != new.title {
            return Err(format!("{} would have another title", old.id));
        }
        if old.workspace != new.workspace {
            return Err(format!("{} would have another workspace", old.id));
        }
        if old.verify != new.verify {
            return Err(format!("{} would have other Verify checks", old.id));
        }
    }
    Ok(())
}

/// Byte offsets of each line's start (index 0 is line 1).
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            memchr::memchr_iter(b'\n', text.as_bytes())
                .map(|index| index + 1)
                .filter(|&start| start < text.len()),
        )
        .collect()
}

fn line_at<'a>(text: &'a str, starts: &[usize], number: usize) -> &'a str {
    let start = starts[number - 1];
    let end = starts.get(number).copied().unwrap_or(text.len());
    &text[start..end]
}

fn heading_level(line: &str) -> usize {
    line.bytes().take_while(|&byte| byte == b'#').count()
}

/// The plan's line ending: that of its first line, `\n` for a one-line plan.
fn line_ending(text: &str) -> &'static str {
    match text.find('\n') {
        Some(index) if text[..index].ends_with('\r') => "\r\n",
        _ => "\n",
    }
}

#[cfg(test)]
mod tests;
