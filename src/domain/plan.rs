//! The Markdown plan format (SPEC §3; reference §3): numbered phase headings, a byte-exact
//! global preamble and phase bodies, fenced examples that are not structure, and exactly one
//! `### Workspace` section per phase.

/// One executable phase.
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
}

/// A parsed plan: the preamble and the phases in order.
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

/// A plan error. `line` is 1-based when the error is tied to a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    pub line: Option<usize>,
    pub message: String,
}

impl PlanError {
    /// Renders as `<source>:<line>: <message>` (or `<source>: <message>`).
    pub fn with_source(&self, source: &str) -> String {
        match self.line {
            Some(line) => format!("{source}:{line}: {}", self.message),
            None => format!("{source}: {}", self.message),
        }
    }
}

/// Parses plan bytes (strict UTF-8).
pub fn parse_plan(bytes: &[u8]) -> Result<ParsedPlan, PlanError> {
    let _ = bytes;
    todo!()
}
