//! Stop regexes: "does any pattern match anything received so far", over stdout and stderr
//! combined in arrival order, in linear time and bounded memory and without keeping the output.
//! Patterns go to the DFA path (`dfa.rs`) or, when no DFA can take them, the NFA path
//! (`nfa.rs`, `lazy.rs`); semantics and design: docs/decisions.md, "Stop regexes".

mod dfa;
mod lazy;
mod literals;
mod nfa;
mod set;

use std::sync::Arc;

use regex_automata::util::primitives::StateID;

pub(crate) use set::describe_regex_error;
pub use set::{StopPatternError, StopPatterns};

use nfa::NfaStream;

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
    /// `None` once the DFA can no longer match (no DFA, or its dead state).
    dfa_state: Option<StateID>,
    nfa_stream: Option<NfaStream>,
    /// Set once a match was reported or the input ended; the scanner then ignores input.
    spent: bool,
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

    /// Ends the input and reports a match decided only now. Every chunk already peeked at the
    /// end of input, so this can only decide something when no chunk arrived at all.
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
