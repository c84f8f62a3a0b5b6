//! The compiled set of stop patterns: each pattern validated and routed to the DFA path when a
//! dense DFA can take it, else to the NFA path.

use std::fmt;

use regex::bytes::Regex;
use regex_automata::util::syntax;

use super::PatternKind;
use super::dfa::StreamingDfa;
use super::nfa::StreamingNfa;

/// Heap the DFA table may use, and separately its determinization. Realistic stop patterns
/// need kilobytes; `\w{20}` (Unicode) needs about 4 MB.
const DFA_SIZE_LIMIT: usize = 16 << 20;

/// Heap the NFA path's cached states may use per attempt before they are cleared.
const NFA_CACHE_BUDGET: usize = 2 << 20;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid stop regex '{pattern}': {message}")]
pub struct StopPatternError {
    pub index: usize,
    pub pattern: String,
    pub message: String,
}

/// The compiled set of stop patterns, shared (read-only) by every attempt of an invocation.
pub struct StopPatterns {
    patterns: Vec<String>,
    /// Patterns below this index are stop regexes, the rest rate-limit patterns.
    stop_regex_count: usize,
    pub(super) dfa: Option<StreamingDfa>,
    pub(super) nfa: Option<StreamingNfa>,
}

impl fmt::Debug for StopPatterns {
    // The automata are too large to print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopPatterns")
            .field("patterns", &self.patterns)
            .finish_non_exhaustive()
    }
}

/// How patterns are compiled; tests reach the paths' limits and corners through it.
#[derive(Clone, Copy, Debug)]
pub(super) struct CompileOptions {
    pub(super) refuse_empty_matches: bool,
    pub(super) dfa_size_limit: usize,
    pub(super) nfa_cache_budget: usize,
    pub(super) nfa_only: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            refuse_empty_matches: true,
            dfa_size_limit: DFA_SIZE_LIMIT,
            nfa_cache_budget: NFA_CACHE_BUDGET,
            nfa_only: false,
        }
    }
}

impl StopPatterns {
    /// Compiles the patterns (`regex::bytes` semantics). Refuses a pattern that `regex`
    /// refuses, and one that can match empty text (docs/decisions.md).
    pub fn compile(patterns: &[String]) -> Result<Self, StopPatternError> {
        Self::compile_with(patterns, CompileOptions::default())
    }

    /// Compiles a run's stop regexes, then its rate-limit patterns, as one set; an error's
    /// index counts over both lists in that order.
    pub fn compile_kinds(
        stop_regexes: &[String],
        rate_limit: &[String],
    ) -> Result<Self, StopPatternError> {
        let all: Vec<String> = stop_regexes.iter().chain(rate_limit).cloned().collect();
        let mut compiled = Self::compile(&all)?;
        compiled.stop_regex_count = stop_regexes.len();
        Ok(compiled)
    }

    pub fn kind(&self, index: usize) -> PatternKind {
        if index < self.stop_regex_count {
            PatternKind::StopRegex
        } else {
            PatternKind::RateLimit
        }
    }

    pub(super) fn compile_with(
        patterns: &[String],
        options: CompileOptions,
    ) -> Result<Self, StopPatternError> {
        let mut needs_nfa = Vec::with_capacity(patterns.len());
        for (index, pattern) in patterns.iter().enumerate() {
            let refuse = |message: String| StopPatternError {
                index,
                pattern: pattern.clone(),
                message,
            };
            // `regex` is the reference for what a stop pattern is, including its size limits.
            Regex::new(pattern).map_err(|error| refuse(describe_regex_error(&error)))?;
            let hir = syntax::parse_with(pattern, &syntax::Config::new().utf8(false))
                .map_err(|error| refuse(error.to_string()))?;
            let properties = hir.properties();
            if options.refuse_empty_matches && properties.minimum_len() == Some(0) {
                return Err(refuse(
                    "it matches empty text, so it would stop every attempt".to_owned(),
                ));
            }
            // regex-automata's DFAs cannot evaluate a Unicode word boundary (its look-around
            // spans whole codepoints); no need to try building one.
            needs_nfa.push(options.nfa_only || properties.look_set().contains_word_unicode());
        }

        let (dfa, nfa_indices) = assign_to_dfa(patterns, &needs_nfa, options.dfa_size_limit);
        let nfa = if nfa_indices.is_empty() {
            None
        } else {
            Some(build_nfa(patterns, nfa_indices, options.nfa_cache_budget)?)
        };
        Ok(Self {
            patterns: patterns.to_vec(),
            stop_regex_count: patterns.len(),
            dfa,
            nfa,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns streamed by the NFA path, for diagnostics.
    pub fn nfa_patterns(&self) -> Vec<&str> {
        self.nfa.as_ref().map_or_else(Vec::new, |nfa| {
            nfa.pattern_indices()
                .iter()
                .map(|&index| self.pattern(index))
                .collect()
        })
    }

    pub(super) fn pattern(&self, index: usize) -> &str {
        self.patterns.get(index).map_or("", String::as_str)
    }
}

/// Puts patterns into the DFA in order, each only if the DFA still builds with it; the rest go
/// to the NFA path. One build per pattern: quadratic in the (small) number of patterns, but a
/// pattern that blows the size limit is the one sent to the NFA path.
fn assign_to_dfa(
    patterns: &[String],
    needs_nfa: &[bool],
    size_limit: usize,
) -> (Option<StreamingDfa>, Vec<usize>) {
    let mut dfa: Option<StreamingDfa> = None;
    let mut nfa_indices = Vec::new();
    for (index, &needs_nfa) in needs_nfa.iter().enumerate() {
        if needs_nfa {
            nfa_indices.push(index);
            continue;
        }
        let mut candidates = dfa
            .as_ref()
            .map_or_else(Vec::new, |dfa| dfa.pattern_indices.clone());
        candidates.push(index);
        match StreamingDfa::build(patterns, candidates, size_limit) {
            Some(bigger) => dfa = Some(bigger),
            None => nfa_indices.push(index),
        }
    }
    (dfa, nfa_indices)
}

/// The NFA path for these patterns. The Thompson NFA takes every pattern `regex` takes, so
/// this fails only if that ever stops being true; the error then names the first of them.
fn build_nfa(
    patterns: &[String],
    indices: Vec<usize>,
    cache_budget: usize,
) -> Result<StreamingNfa, StopPatternError> {
    let first = indices.first().copied().unwrap_or_default();
    StreamingNfa::build(patterns, indices, cache_budget).map_err(|message| StopPatternError {
        index: first,
        pattern: patterns.get(first).cloned().unwrap_or_default(),
        message,
    })
}

/// `regex` renders syntax errors as a multi-line caret diagram ending in `error: <what>`; keep
/// that last line so the message stays one line (the caller quotes the pattern itself).
pub(crate) fn describe_regex_error(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(diagram) => {
            let last_line = diagram.lines().last().unwrap_or(diagram);
            last_line
                .strip_prefix("error: ")
                .unwrap_or(last_line)
                .to_owned()
        }
        regex::Error::CompiledTooBig(limit) => {
            format!("compiled regex exceeds the size limit of {limit} bytes")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
impl StopPatterns {
    pub(super) fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests;
