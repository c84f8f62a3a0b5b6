//! The Markdown plan format (docs/plan-format.md): phase headings outside code fences, a
//! byte-exact preamble and phase bodies, one `### Workspace` section and at most one `Verify`
//! section per phase. Lines split on `\n` only; one trailing `\r` is ignored when a line is
//! matched against a heading. [`parse_plan_reporting_all`] says which errors end the parse.

pub(crate) mod answer;

use super::fence::{FenceTracker, LineRole};
use super::status_text::first_chars;
use super::verification::{Interpreter, MAX_SCRIPT_BYTES, VerifyCheck};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// The `N` of `Phase N: Title`.
    pub number: u64,
    /// `phase-N`.
    pub id: String,
    /// The title, verbatim.
    pub title: String,
    /// Every byte from the line after the heading to the line before the next phase heading
    /// (or end of file), CRLF included.
    pub body: String,
    /// 1-based line of the heading.
    pub heading_line: usize,
    /// 1-based last line of the body.
    pub end_line: usize,
    /// The declared workspace path, relative, without surrounding backticks.
    pub workspace: String,
    /// 1-based line of the workspace path.
    pub workspace_line: usize,
    /// The checks of its `Verify` section, in order; empty when it has none.
    pub verify: Vec<VerifyCheck>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedPlan {
    /// Text before the first phase heading, byte-exact (may be empty).
    pub preamble: String,
    pub phases: Vec<Phase>,
}

impl ParsedPlan {
    pub fn phase(&self, id: &str) -> Option<&Phase> {
        self.phases.iter().find(|phase| phase.id == id)
    }
}

/// A heading that reads like a phase heading but is not one (indented, two spaces after the
/// `#`s, `phase` in lower case, a blank title, …). It is ordinary text — part of the phase or
/// preamble before it — which is rarely what its author meant, so callers warn about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NearMissHeading {
    /// 1-based line.
    pub line: usize,
    /// The line as written (without its line break).
    pub(crate) text: String,
}

impl NearMissHeading {
    /// `'##  Phase 2: B' is not a phase heading (write exactly '## Phase N: Title': …)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "'{}' is not a phase heading (write exactly '## Phase N: Title': no indent, one space after the #s, 'Phase' capitalized, a title after the colon)",
            self.text.escape_debug()
        )
    }
}

/// The headings outside code fences whose text reads `Phase N:` in any case or spacing but
/// which are not phase headings. Invalid UTF-8 finds none (parsing reports it).
pub(crate) fn near_miss_headings(bytes: &[u8]) -> Vec<NearMissHeading> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    let mut fences = FenceTracker::new();
    let mut found = Vec::new();
    for line in file_lines(text) {
        if fences.classify_line(line.text.as_bytes()).is_fenced() {
            continue;
        }
        let content = line.content();
        if match_phase_heading(content).is_some() {
            continue;
        }
        if section_heading(content).is_some_and(|(_, text)| reads_like_a_phase(text)) {
            found.push(NearMissHeading {
                line: line.number,
                text: content.to_owned(),
            });
        }
    }
    found
}

/// `Phase`, digits and a colon, in any case and spacing, after an optional closing `#` run.
fn reads_like_a_phase(heading_text: &str) -> bool {
    let text = heading_text.trim_end_matches('#').trim();
    let Some(rest) = text
        .get(..5)
        .filter(|word| word.eq_ignore_ascii_case("phase"))
        .map(|_| text[5..].trim_start())
    else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && rest[digits..].trim_start().starts_with(':')
}

/// A plan error. `line` is 1-based when the error is tied to a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for PlanError {}

/// Every error a parse found: `first` is the one [`parse_plan`] reports, `more` the others in
/// the order they were found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanErrors {
    pub first: PlanError,
    pub more: Vec<PlanError>,
}

impl PlanErrors {
    /// `None` when `errors` is empty.
    fn from_vec(errors: Vec<PlanError>) -> Option<Self> {
        let mut errors = errors.into_iter();
        let first = errors.next()?;
        Some(Self {
            first,
            more: errors.collect(),
        })
    }

    fn one(error: PlanError) -> Self {
        Self {
            first: error,
            more: Vec::new(),
        }
    }
}

impl PlanError {
    /// Renders as `<source>:<line>: <message>` (or `<source>: <message>`).
    pub(crate) fn with_source(&self, source: &str) -> String {
        match self.line {
            Some(line) => format!("{source}:{line}: {}", self.message),
            None => format!("{source}: {}", self.message),
        }
    }

    fn at(line: usize, message: impl Into<String>) -> Self {
        Self {
            line: Some(line),
            message: message.into(),
        }
    }
}

const NO_PHASES: &str = "expected at least one executable phase heading like '## Phase 1: Title'";

/// The only accepted spelling of a workspace section heading.
const WORKSPACE_HEADING: &str = "### Workspace";

/// Parses plan bytes (strict UTF-8), stopping at the first error.
pub fn parse_plan(bytes: &[u8]) -> Result<ParsedPlan, PlanError> {
    parse_plan_reporting_all(bytes).map_err(|errors| errors.first)
}

/// Parses plan bytes (strict UTF-8); an invalid plan reports every error found. An error of
/// the structure (not UTF-8, a phase number out of range, an unclosed fence, no phase) ends the
/// parse; otherwise numbering and each phase's workspace and verify sections are all checked.
pub fn parse_plan_reporting_all(bytes: &[u8]) -> Result<ParsedPlan, PlanErrors> {
    let text = decode(bytes).map_err(PlanErrors::one)?;
    let outline = outline(text)?;
    let Some(first) = outline.headings.first() else {
        // A heading that was meant as a phase is the likeliest reason: name it.
        return Err(PlanErrors::one(match near_miss_headings(bytes).first() {
            Some(miss) => PlanError::at(miss.line, format!("{}; {NO_PHASES}", miss.describe())),
            None => PlanError {
                line: None,
                message: NO_PHASES.to_owned(),
            },
        }));
    };
    let mut errors = numbering_errors(&outline.headings);

    let mut phases = Vec::with_capacity(outline.headings.len());
    for (index, heading) in outline.headings.iter().enumerate() {
        let next = outline.headings.get(index + 1);
        let body = &text[heading.body_start..next.map_or(text.len(), |next| next.start)];
        let (workspace, verify) = match (find_workspace(heading, body), find_verify(heading, body))
        {
            (Ok(workspace), Ok(verify)) => (workspace, verify),
            (workspace, verify) => {
                errors.extend(workspace.err());
                errors.extend(verify.err());
                continue;
            }
        };
        phases.push(Phase {
            number: heading.number,
            id: format!("phase-{}", heading.number),
            title: heading.title.to_owned(),
            body: body.to_owned(),
            heading_line: heading.line,
            end_line: next.map_or(outline.line_count, |next| next.line - 1),
            workspace: workspace.path,
            workspace_line: workspace.line,
            verify,
        });
    }
    match PlanErrors::from_vec(errors) {
        Some(errors) => Err(errors),
        None => Ok(ParsedPlan {
            preamble: text[..first.start].to_owned(),
            phases,
        }),
    }
}

fn decode(bytes: &[u8]) -> Result<&str, PlanError> {
    std::str::from_utf8(bytes).map_err(|error| {
        let offset = error.valid_up_to();
        let line = memchr::memchr_iter(b'\n', &bytes[..offset]).count() + 1;
        PlanError::at(
            line,
            format!("plan is not valid UTF-8 at byte {}", offset + 1),
        )
    })
}

struct Line<'a> {
    /// 1-based line number in the whole plan.
    number: usize,
    /// Byte offset of the line's first byte.
    start: usize,
    /// Byte offset just past the line's `\n` (or the end of the text).
    end: usize,
    /// The line without its `\n` (a `\r` before it is kept).
    text: &'a str,
}

impl<'a> Line<'a> {
    /// The text that heading rules match: the line without one trailing `\r`.
    fn content(&self) -> &'a str {
        self.text.strip_suffix('\r').unwrap_or(self.text)
    }
}

/// The lines of `text`, numbered from `first_number`, with offsets relative to `text`.
fn lines(text: &str, first_number: usize) -> impl Iterator<Item = Line<'_>> {
    let mut start = 0;
    text.split_inclusive('\n')
        .enumerate()
        .map(move |(index, raw)| {
            let line = Line {
                number: first_number + index,
                start,
                end: start + raw.len(),
                text: raw.strip_suffix('\n').unwrap_or(raw),
            };
            start = line.end;
            line
        })
}

/// The lines of a whole plan file. A UTF-8 byte order mark, which some editors write at the
/// start of a file, is not part of the first line's text, so it cannot hide a heading or a
/// fence there; it stays in the bytes that are copied (the preamble).
fn file_lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    lines(text, 1).map(|mut line| {
        if line.start == 0 {
            line.text = line.text.strip_prefix('\u{feff}').unwrap_or(line.text);
        }
        line
    })
}

/// A phase heading found outside any fence.
struct PhaseHeading<'a> {
    /// Its level: the number of `#`.
    level: usize,
    number: u64,
    title: &'a str,
    /// 1-based line of the heading.
    line: usize,
    /// Byte offset of the heading line (where the previous body ends).
    start: usize,
    /// Byte offset of the line after the heading (where this body starts).
    body_start: usize,
}

/// The plan's skeleton: its phase headings in file order and its line count.
struct Outline<'a> {
    headings: Vec<PhaseHeading<'a>>,
    line_count: usize,
}

/// The plan's skeleton, or every error of its structure (a phase number out of range, an
/// unclosed fence).
fn outline(text: &str) -> Result<Outline<'_>, PlanErrors> {
    let mut fences = FenceTracker::new();
    let mut headings = Vec::new();
    let mut errors = Vec::new();
    let mut line_count = 0;
    for line in file_lines(text) {
        line_count = line.number;
        if fences.classify_line(line.text.as_bytes()).is_fenced() {
            continue;
        }
        if let Some((digits, title)) = match_phase_heading(line.content()) {
            let number = match phase_number(digits, line.number) {
                Ok(number) => number,
                Err(error) => {
                    errors.push(error);
                    continue;
                }
            };
            headings.push(PhaseHeading {
                level: line
                    .content()
                    .bytes()
                    .take_while(|&byte| byte == b'#')
                    .count(),
                number,
                title,
                line: line.number,
                start: line.start,
                body_start: line.end,
            });
        }
    }
    if let Some(open) = fences.open_fence() {
        errors.push(PlanError::at(
            open.line,
            format!("unclosed {} code fence", open.ch.name()),
        ));
    }
    match PlanErrors::from_vec(errors) {
        Some(errors) => Err(errors),
        None => Ok(Outline {
            headings,
            line_count,
        }),
    }
}

/// Matches `#`…`######`, one space, `Phase `, digits, `: `, and a title that is not blank;
/// returns the digits and the title.
fn match_phase_heading(line: &str) -> Option<(&str, &str)> {
    let level = line.bytes().take_while(|&byte| byte == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = line[level..].strip_prefix(" Phase ")?;
    let digit_count = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digit_count == 0 {
        return None;
    }
    let title = rest[digit_count..].strip_prefix(": ")?;
    (!title.trim().is_empty()).then(|| (&rest[..digit_count], title))
}

fn phase_number(digits: &str, line: usize) -> Result<u64, PlanError> {
    // Only overflow can fail: `digits` is a non-empty run of ASCII digits.
    digits.parse().map_err(|_| {
        PlanError::at(
            line,
            format!("phase number is too large (the maximum is {})", u64::MAX),
        )
    })
}

/// Each heading whose number is zero, repeats an earlier one or is not above the one before
/// it.
fn numbering_errors(headings: &[PhaseHeading<'_>]) -> Vec<PlanError> {
    let mut errors = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut previous: Option<u64> = None;
    for heading in headings {
        let number = heading.number;
        if number == 0 {
            errors.push(PlanError::at(heading.line, "phase number must be positive"));
        } else if seen.contains(&number) {
            errors.push(PlanError::at(
                heading.line,
                format!("duplicate phase number {number}"),
            ));
        } else if let Some(previous) = previous.filter(|previous| number <= *previous) {
            errors.push(PlanError::at(
                heading.line,
                format!("phase number {number} appears after phase {previous}"),
            ));
        }
        seen.insert(number);
        previous = Some(number);
    }
    errors
}

struct WorkspaceDeclaration {
    path: String,
    line: usize,
}

/// Progress through a phase body's workspace section.
enum WorkspaceScan {
    /// No workspace heading yet.
    NotFound,
    /// Inside the section, after its heading at `heading_line`.
    Open {
        heading_line: usize,
        path: Option<WorkspaceDeclaration>,
    },
    /// The section ended at a later heading (or the end of the body).
    Closed(WorkspaceDeclaration),
}

impl WorkspaceScan {
    /// Ends an open section; a section without a path line is an error.
    fn close(self, phase: u64) -> Result<Self, PlanError> {
        match self {
            Self::Open { heading_line, path } => path.map(Self::Closed).ok_or_else(|| {
                PlanError::at(
                    heading_line,
                    format!("phase {phase} has an empty workspace declaration"),
                )
            }),
            done => Ok(done),
        }
    }
}

/// Finds the one `### Workspace` section of a phase body and its one path line.
fn find_workspace(phase: &PhaseHeading<'_>, body: &str) -> Result<WorkspaceDeclaration, PlanError> {
    let number = phase.number;
    let mut fences = FenceTracker::new();
    let mut scan = WorkspaceScan::NotFound;
    // Lines of the open section after its path line: an error once the section ends, naming
    // all of them (they are usually instructions that lost their own heading).
    let mut surplus: Vec<(usize, &str)> = Vec::new();
    for line in lines(body, phase.line + 1) {
        if fences.classify_line(line.text.as_bytes()).is_fenced() {
            continue;
        }
        let content = line.content();
        if let Some((_, heading_text)) = section_heading(content) {
            // Any heading ends the section's content.
            surplus_error(number, &scan, &surplus)?;
            scan = scan.close(number)?;
            if names_workspace(heading_text) {
                if content.trim_end() != WORKSPACE_HEADING {
                    return Err(PlanError::at(
                        line.number,
                        format!(
                            "phase {number} workspace section must use the exact heading '{WORKSPACE_HEADING}'"
                        ),
                    ));
                }
                if !matches!(scan, WorkspaceScan::NotFound) {
                    return Err(PlanError::at(
                        line.number,
                        format!("phase {number} has duplicate '{WORKSPACE_HEADING}' sections"),
                    ));
                }
                scan = WorkspaceScan::Open {
                    heading_line: line.number,
                    path: None,
                };
            }
            continue;
        }
        if let WorkspaceScan::Open { path, .. } = &mut scan {
            let value = content.trim();
            if value.is_empty() {
                continue;
            }
            if path.is_some() {
                surplus.push((line.number, value));
                continue;
            }
            *path = Some(WorkspaceDeclaration {
                path: workspace_path(value, number, line.number)?,
                line: line.number,
            });
        }
    }
    surplus_error(number, &scan, &surplus)?;
    match scan.close(number)? {
        WorkspaceScan::Closed(declaration) => Ok(declaration),
        _ => Err(PlanError::at(
            phase.line,
            format!("phase {number} is missing required '{WORKSPACE_HEADING}' section"),
        )),
    }
}

/// The error for lines after the workspace path, at the first of them; it quotes every one
/// (the first few, when there are many) and says where they belong.
fn surplus_error(
    phase: u64,
    scan: &WorkspaceScan,
    surplus: &[(usize, &str)],
) -> Result<(), PlanError> {
    const SHOWN: usize = 3;
    const QUOTED_CHARS: usize = 60;
    let (
        Some(&(first_line, _)),
        WorkspaceScan::Open {
            path: Some(path), ..
        },
    ) = (surplus.first(), scan)
    else {
        return Ok(());
    };
    let quote = |(number, text): &(usize, &str)| {
        format!("line {number} '{}'", first_chars(text, QUOTED_CHARS))
    };
    let mut quoted: Vec<String> = surplus.iter().take(SHOWN).map(quote).collect();
    if surplus.len() > SHOWN {
        quoted.push(format!("and {} more", surplus.len() - SHOWN));
    }
    Err(PlanError::at(
        first_line,
        format!(
            "phase {phase} workspace declaration must contain exactly one relative path line; after the path on line {} the section also has {}; move instructions under a heading of their own after it (e.g. '### Goal')",
            path.line,
            quoted.join(", ")
        ),
    ))
}

/// The level and trimmed text of an ATX heading line (up to three spaces, one to six `#`, then
/// a space, a tab or the end of the line); `None` for any other line.
fn section_heading(line: &str) -> Option<(usize, &str)> {
    let indent = line.bytes().take_while(|&byte| byte == b' ').count();
    if indent > 3 {
        return None;
    }
    let marked = &line[indent..];
    let level = marked.bytes().take_while(|&byte| byte == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let text = &marked[level..];
    match text.bytes().next() {
        None | Some(b' ' | b'\t') => Some((level, text.trim())),
        Some(_) => None,
    }
}

/// The only accepted text of a verify section heading (at any level deeper than the phase's).
const VERIFY_TEXT: &str = "Verify";

struct VerifySection<'a> {
    /// The heading as written, for messages.
    heading: &'a str,
    heading_line: usize,
    level: usize,
    checks: Vec<VerifyCheck>,
}

struct VerifyBlock<'a> {
    line: usize,
    /// The opening fence's indentation, removed from its content lines (as CommonMark does).
    indent: usize,
    interpreter: Interpreter,
    lines: Vec<&'a str>,
}

/// Finds a phase's verify section (at most one, at a heading level deeper than the phase
/// heading, spelled exactly `Verify`) and its checks: each fenced block in it is one check,
/// anything else is commentary; it ends at the next heading of its level or shallower. The
/// body itself is only read.
fn find_verify(phase: &PhaseHeading<'_>, body: &str) -> Result<Vec<VerifyCheck>, PlanError> {
    let number = phase.number;
    let mut fences = FenceTracker::new();
    let mut section: Option<VerifySection<'_>> = None;
    let mut block: Option<VerifyBlock<'_>> = None;
    let mut found: Option<(usize, Vec<VerifyCheck>)> = None;
    for line in lines(body, phase.line + 1) {
        let role = fences.classify_line(line.text.as_bytes());
        let content = line.content();
        match role {
            LineRole::Text => {
                let Some((level, text)) = section_heading(content) else {
                    continue;
                };
                if let Some(open) = section.take_if(|open| level <= open.level) {
                    found = Some((open.heading_line, close_verify(number, open)?));
                }
                if !text
                    .trim_end_matches('#')
                    .trim()
                    .eq_ignore_ascii_case(VERIFY_TEXT)
                {
                    continue;
                }
                if text != VERIFY_TEXT {
                    return Err(PlanError::at(
                        line.number,
                        format!(
                            "phase {number} verify section heading must be spelled exactly '{VERIFY_TEXT}' (e.g. '### {VERIFY_TEXT}'), got '{}'",
                            content.trim()
                        ),
                    ));
                }
                if level <= phase.level {
                    return Err(PlanError::at(
                        line.number,
                        format!(
                            "phase {number} verify section '{}' must be at a heading level deeper than its phase heading (e.g. '{} {VERIFY_TEXT}')",
                            content.trim(),
                            "#".repeat(phase.level + 1)
                        ),
                    ));
                }
                let earlier = section.as_ref().map(|open| open.heading_line);
                if let Some(first) = earlier.or(found.as_ref().map(|(line, _)| *line)) {
                    return Err(PlanError::at(
                        line.number,
                        format!(
                            "phase {number} has duplicate '{VERIFY_TEXT}' sections (the first at line {first})"
                        ),
                    ));
                }
                section = Some(VerifySection {
                    heading: content.trim(),
                    heading_line: line.number,
                    level,
                    checks: Vec::new(),
                });
            }
            LineRole::FenceOpen if section.is_some() => {
                let (indent, info) = fence_opener(content);
                let interpreter = Interpreter::from_info(info).map_err(|unknown| {
                    PlanError::at(
                        line.number,
                        format!("phase {number} verify block: {unknown}"),
                    )
                })?;
                block = Some(VerifyBlock {
                    line: line.number,
                    indent,
                    interpreter,
                    lines: Vec::new(),
                });
            }
            LineRole::Fenced => {
                if let Some(open) = block.as_mut() {
                    open.lines.push(content);
                }
            }
            LineRole::FenceClose => {
                if let (Some(done), Some(open)) = (block.take(), section.as_mut()) {
                    let index = open.checks.len() + 1;
                    open.checks.push(verify_check(number, index, done)?);
                }
            }
            LineRole::FenceOpen => {}
        }
    }
    if let Some(open) = section {
        found = Some((open.heading_line, close_verify(number, open)?));
    }
    Ok(found.map(|(_, checks)| checks).unwrap_or_default())
}

/// Ends a verify section: it must hold at least one fenced block.
fn close_verify(number: u64, section: VerifySection<'_>) -> Result<Vec<VerifyCheck>, PlanError> {
    if section.checks.is_empty() {
        return Err(PlanError::at(
            section.heading_line,
            format!(
                "phase {number} '{}' section has no fenced code block; put each check in a fenced block (```sh, then the commands, then ```)",
                section.heading
            ),
        ));
    }
    Ok(section.checks)
}

/// A closed block as a check; an empty or oversized block is an error at its opening line.
fn verify_check(
    number: u64,
    index: usize,
    block: VerifyBlock<'_>,
) -> Result<VerifyCheck, PlanError> {
    let mut script = String::new();
    for line in &block.lines {
        let indent = line
            .bytes()
            .take(block.indent)
            .take_while(|&byte| byte == b' ' || byte == b'\t')
            .count();
        script.push_str(&line[indent..]);
        script.push('\n');
    }
    if script.trim().is_empty() {
        return Err(PlanError::at(
            block.line,
            format!(
                "phase {number} verify block is empty; write the check's commands in it or remove it"
            ),
        ));
    }
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(PlanError::at(
            block.line,
            format!(
                "phase {number} verify block is {} bytes, more than the {MAX_SCRIPT_BYTES} a check may hold; put a longer script in a file and run that from the block",
                script.len()
            ),
        ));
    }
    Ok(VerifyCheck {
        index,
        interpreter: block.interpreter,
        script,
        line: block.line,
    })
}

/// The indentation and info string of a fence-opening line (trimmed; empty when none).
fn fence_opener(line: &str) -> (usize, &str) {
    let indent = line
        .bytes()
        .take_while(|&byte| byte == b' ' || byte == b'\t')
        .count();
    let rest = &line[indent..];
    let run = rest
        .bytes()
        .take_while(|&byte| byte == b'`' || byte == b'~')
        .count();
    (indent, rest[run..].trim())
}

/// Whether heading text, case-folded, starts with `workspace`: such a heading is meant as the
/// workspace section, so it must be spelled exactly.
fn names_workspace(heading_text: &str) -> bool {
    heading_text
        .chars()
        .flat_map(char::to_lowercase)
        .take("workspace".len())
        .eq("workspace".chars())
}

/// The path of a trimmed, non-empty workspace line, without one pair of surrounding backticks.
fn workspace_path(value: &str, phase: u64, line: usize) -> Result<String, PlanError> {
    let path = match value
        .strip_prefix('`')
        .and_then(|rest| rest.strip_suffix('`'))
    {
        Some(quoted) => quoted.trim(),
        None => value,
    };
    if path.is_empty() {
        return Err(PlanError::at(
            line,
            format!("phase {phase} has an empty workspace declaration"),
        ));
    }
    if is_absolute(path) {
        return Err(PlanError::at(
            line,
            format!("phase {phase} workspace path must be relative, got '{path}'"),
        ));
    }
    Ok(path.to_owned())
}

/// POSIX absolute (`/repo`), Windows rooted or UNC (`\repo`, `\\server\share`) and drive
/// (`C:\repo`, `C:/repo`) paths. A plan is shared between machines, so a path that is absolute
/// on either family is rejected.
fn is_absolute(path: &str) -> bool {
    match path.as_bytes() {
        [b'/' | b'\\', ..] => true,
        [drive, b':', b'\\' | b'/', ..] => drive.is_ascii_alphabetic(),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
