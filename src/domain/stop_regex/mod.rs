//! Stop regexes (docs/decisions.md, "Stop regexes"): "does any match exist in everything received so far", over the
//! combined stdout+stderr in arrival order, answered in linear time and bounded memory for
//! every pattern `regex` accepts, without retaining the history.
//!
//! Each pattern is streamed by one of two paths, which answer the same question:
//! - the DFA path (`dfa.rs`): one dense DFA over all the patterns it can take, its single
//!   state carried across chunks — the fast path, one table lookup per byte;
//! - the NFA path (`nfa.rs`, `lazy.rs`): the rest — a Unicode word boundary (`\b`, `\B`, `\<`,
//!   `\b{end}` … without `(?-u)`), or a pattern whose DFA would exceed its size limit — as a
//!   lazily determinized NFA simulation with a few bytes of look-around context carried
//!   across chunk seams and a bounded cache.
//!
//! `set.rs` validates the patterns and routes them; `literals.rs` is the literal search both
//! paths use to jump over output in which no match can begin.
//!
//! The semantics both paths keep (docs/decisions.md, "Stop regexes"):
//! - Chunks of both streams form one text, in arrival order: the caller feeds both streams
//!   into one scanner, so look-behind (`^`, `(?m)^`, `\b`) is right at every seam, including
//!   seams between a stdout chunk and a stderr chunk.
//! - At the end of every chunk the scanner peeks at the end of input without keeping it:
//!   "received so far" treats the current end as the end of the text. This is also how the
//!   original behaved (it re-ran `re.search` over the whole history after every batch), so
//!   `done$` fires when a chunk ends in `done`, even if more output would follow, and `\bstop\b`
//!   fires when a chunk ends in `stop`. `(?m)^FATAL: .*$` is the robust form.
//! - The verdict is decided per chunk, like the original's per-batch check: when the first
//!   match appears, the rest of that chunk is still scanned and the lowest pattern index with
//!   any match so far is reported. After that the scanner is latched and ignores input.
//!
//! Patterns are Rust `regex` syntax matched on bytes (`regex::bytes` semantics), so output that
//! is not UTF-8 is searched, never rejected.

mod dfa;
mod lazy;
mod literals;
mod nfa;
mod set;

use std::fmt;
use std::sync::Arc;

use regex_automata::util::primitives::StateID;

pub(crate) use set::describe_regex_error;
pub use set::{StopPatternError, StopPatterns};

use nfa::NfaStream;

/// Which pattern matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopMatch {
    pub index: usize,
    pub pattern: String,
    pub kind: PatternKind,
}

/// What a matching pattern means for the attempt: the two kinds are scanned as one set, and
/// a stop regex wins a tie in the same chunk (it has the lower index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternKind {
    /// `--stop-on-regex` or `stop_on_regex`: the attempt is stopped as `stop-regex`.
    StopRegex,
    /// `rate_limit.patterns`: the provider refused for now (`rate-limited`).
    RateLimit,
}

/// Per-attempt scanning state: a DFA state and the NFA path's stream, never the output.
pub struct StopScanner {
    patterns: Arc<StopPatterns>,
    /// The DFA's position in the combined output; `None` once the DFA can no longer match
    /// (no DFA, or it reached its dead state).
    dfa_state: Option<StateID>,
    /// `None` when no pattern takes the NFA path.
    nfa_stream: Option<NfaStream>,
    /// Set once a match was reported or the input ended; the scanner then ignores input.
    spent: bool,
}

impl fmt::Debug for StopScanner {
    // The derived form would print the NFA path's whole cache.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopScanner")
            .field("patterns", &self.patterns.patterns())
            .field("dfa_state", &self.dfa_state)
            .field("nfa_stream", &self.nfa_stream)
            .field("spent", &self.spent)
            .finish()
    }
}

impl StopScanner {
    pub fn new(patterns: Arc<StopPatterns>) -> Self {
        let dfa_state = patterns.dfa.as_ref().map(|dfa| dfa.start);
        let nfa_stream = patterns.nfa.as_ref().map(NfaStream::new);
        Self {
            patterns,
            dfa_state,
            nfa_stream,
            spent: false,
        }
    }

    /// Feeds the next chunk (from either stream, in arrival order). Returns the first match
    /// found, including one that ends exactly at the end of this chunk.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<StopMatch> {
        if self.spent {
            return None;
        }
        let mut lowest = LowestMatch::default();
        if let (Some(dfa), Some(state)) = (&self.patterns.dfa, self.dfa_state) {
            self.dfa_state = dfa.advance(state, bytes, &mut lowest);
            if let Some(state) = self.dfa_state {
                dfa.record_matches_at_end(state, &mut lowest);
            }
        }
        if let (Some(nfa), Some(stream)) = (&self.patterns.nfa, &mut self.nfa_stream) {
            stream.feed(nfa, bytes, &mut lowest);
        }
        self.report(lowest)
    }

    /// Ends the input (real end-of-input transition) and reports a match decided only now.
    ///
    /// Every chunk already peeked at end of input, so this decides something new only when no
    /// chunk arrived at all (which no accepted pattern matches: each needs at least one byte).
    /// The scanner is spent afterwards.
    pub fn finish(&mut self) -> Option<StopMatch> {
        if self.spent {
            return None;
        }
        let mut lowest = LowestMatch::default();
        if let (Some(dfa), Some(state)) = (&self.patterns.dfa, self.dfa_state.take()) {
            dfa.record_matches_at_end(state, &mut lowest);
        }
        if let (Some(nfa), Some(stream)) = (&self.patterns.nfa, &mut self.nfa_stream) {
            stream.finish(nfa, &mut lowest);
        }
        let found = self.report(lowest);
        self.spent = true;
        self.nfa_stream = None;
        found
    }

    fn report(&mut self, lowest: LowestMatch) -> Option<StopMatch> {
        let index = lowest.0?;
        self.spent = true;
        self.nfa_stream = None;
        Some(StopMatch {
            index,
            pattern: self.patterns.pattern(index).to_owned(),
            kind: self.patterns.kind(index),
        })
    }
}

/// The lowest pattern index seen matching while deciding one chunk.
#[derive(Default)]
struct LowestMatch(Option<usize>);

impl LowestMatch {
    fn record(&mut self, index: usize) {
        self.0 = Some(self.0.map_or(index, |lowest| lowest.min(index)));
    }

    /// Whether a path whose lowest pattern index is `first` can no longer lower the result.
    fn settles(&self, first: Option<usize>) -> bool {
        match (self.0, first) {
            (Some(lowest), Some(first)) => lowest <= first,
            (_, None) => true,
            (None, Some(_)) => false,
        }
    }
}

#[cfg(test)]
mod tests;
