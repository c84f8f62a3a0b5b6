//! Stop regexes (SPEC §10): "does any match exist in everything received so far", over the
//! combined stdout+stderr in arrival order, answered without retaining the history. All
//! patterns are compiled into one dense DFA whose single state is carried across chunks; a
//! pattern the DFA cannot build falls back to a history-retaining search for that pattern only.

use std::sync::Arc;

/// A pattern that does not compile; reported naming its index and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopPatternError {
    pub index: usize,
    pub pattern: String,
    pub message: String,
}

/// The compiled set of stop patterns, shared (read-only) by every attempt of an invocation.
#[derive(Debug)]
pub struct StopPatterns {
    patterns: Vec<String>,
}

impl StopPatterns {
    /// Compiles the patterns (Rust `regex` syntax), enforcing size limits now rather than
    /// mid-run.
    pub fn compile(patterns: &[String]) -> Result<Self, StopPatternError> {
        let _ = patterns;
        todo!()
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Patterns that could not go into the DFA and use the history-retaining fallback; the
    /// caller warns about each.
    pub fn fallback_patterns(&self) -> Vec<&str> {
        todo!()
    }
}

/// Which pattern matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopMatch {
    pub index: usize,
    pub pattern: String,
}

/// Per-attempt scanning state.
#[derive(Debug)]
pub struct StopScanner {
    patterns: Arc<StopPatterns>,
}

impl StopScanner {
    pub fn new(patterns: Arc<StopPatterns>) -> Self {
        Self { patterns }
    }

    /// Feeds the next chunk (from either stream, in arrival order). Returns the first match
    /// found, including one that ends exactly at the end of this chunk.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<StopMatch> {
        let _ = (bytes, &self.patterns);
        todo!()
    }

    /// Ends the input (real end-of-input transition) and reports a match decided only now.
    pub fn finish(&mut self) -> Option<StopMatch> {
        todo!()
    }
}
