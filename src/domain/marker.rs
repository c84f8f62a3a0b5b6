//! Terminal result blocks (SPEC §8; reference §10): incremental per-stream framing that keeps
//! only framing state (never the output), the cross-stream verdict, and the live-display filter
//! that hides complete blocks even when split across reads.

/// Which child stream bytes came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    pub fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// The three result kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultKind {
    Complete,
    Blocked,
    NeedsClarification,
}

impl ResultKind {
    /// The tag name, e.g. `phase-complete`.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Complete => "phase-complete",
            Self::Blocked => "phase-blocked",
            Self::NeedsClarification => "phase-needs-clarification",
        }
    }
}

/// A well-framed result: its kind and its body with surrounding whitespace removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultBlock {
    pub kind: ResultKind,
    pub text: String,
}

/// The verdict for one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamVerdict {
    /// No recognized tag text at all.
    NoResult,
    Result(ResultBlock),
    /// Ambiguous framing (inline, fenced, unclosed, empty, trailing text, malformed tag…).
    Invalid(String),
    /// More than one block, or nesting.
    Multiple(String),
}

/// The verdict over both streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkerVerdict {
    Result(ResultBlock),
    /// `missing-marker`.
    Missing(String),
    /// `invalid-marker`.
    Invalid(String),
    /// `multiple-markers`.
    Multiple(String),
}

/// Incremental framing state for one stream.
#[derive(Debug)]
pub struct StreamFramer {
    stream: OutputStream,
}

impl StreamFramer {
    pub fn new(stream: OutputStream) -> Self {
        Self { stream }
    }

    /// Feeds the next bytes of the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        let _ = (bytes, self.stream);
        todo!()
    }

    /// Ends the stream and returns its verdict.
    pub fn finish(self) -> StreamVerdict {
        todo!()
    }
}

/// Combines the two stream verdicts.
pub fn combine(stdout: StreamVerdict, stderr: StreamVerdict) -> MarkerVerdict {
    let _ = (stdout, stderr);
    todo!()
}

/// Whole-buffer convenience: frames both streams and combines them.
pub fn validate_streams(stdout: &[u8], stderr: &[u8]) -> MarkerVerdict {
    let mut out = StreamFramer::new(OutputStream::Stdout);
    out.feed(stdout);
    let mut err = StreamFramer::new(OutputStream::Stderr);
    err.feed(stderr);
    combine(out.finish(), err.finish())
}

/// Hides complete result blocks from live output, holding back possible partial tags across
/// chunks. One filter per stream.
#[derive(Debug, Default)]
pub struct LiveFilter {}

impl LiveFilter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the visible part of `chunk` to `visible`.
    pub fn filter(&mut self, chunk: &[u8], visible: &mut Vec<u8>) {
        let _ = (chunk, visible);
        todo!()
    }

    /// Ends the stream: flushes a held partial tag or a still-open block, visibly.
    pub fn finish(&mut self, visible: &mut Vec<u8>) {
        let _ = visible;
        todo!()
    }
}
