//! Where matches can begin: SIMD literal searches that let either scanning path jump over
//! output while it has no match in progress. A search runs only over the chunk at hand and
//! never jumps past its last few bytes, where a literal may begin that runs on into the next.

use regex_automata::util::{prefilter::Prefilter, syntax};
use regex_automata::{MatchKind, Span};

/// At most this many patterns get a literal search each (typically `memmem`, tens of GiB/s);
/// more share one multi-literal search (Teddy). On agent output, words such as "error" and
/// "FATAL" are false positives for Teddy's fingerprints, which cut it to about 2 GiB/s for the
/// three benchmark patterns, while three separate searches run at over 6 GiB/s together.
const MAX_SEPARATE_LITERAL_SEARCHES: usize = 4;

/// Searches for literals such that every match of every pattern begins with one of them.
pub(super) struct LiteralStarts {
    /// One per pattern when there are few and each has a fast search, else one for all.
    pub(super) searches: Vec<Prefilter>,
    /// The longest literal any search looks for.
    pub(super) longest: usize,
}

impl LiteralStarts {
    /// `None` when some pattern can begin with too many different texts (`\w+ failed`) or
    /// match the empty string.
    ///
    /// Look-around assertions count as empty, so `\bstop` begins with `stop`. The literals are
    /// optimized as for leftmost-first search although the scan wants every match: that only
    /// shortens literals or drops one that begins with another kept literal, so every position
    /// where a match begins is still found, and unoptimized, `(?i)` or `[0-9]{3}` would multiply
    /// the literals beyond what the SIMD searches take.
    pub(super) fn new(patterns: &[&str], syntax: &syntax::Config) -> Option<Self> {
        let hirs = syntax::parse_many_with(patterns, syntax).ok()?;
        let separate = if hirs.len() <= MAX_SEPARATE_LITERAL_SEARCHES {
            hirs.iter()
                .map(|hir| {
                    Prefilter::from_hir_prefix(MatchKind::LeftmostFirst, hir)
                        .filter(Prefilter::is_fast)
                })
                .collect::<Option<Vec<_>>>()
        } else {
            None
        };
        let searches = match separate {
            Some(searches) => searches,
            None => vec![Prefilter::from_hirs_prefix(
                MatchKind::LeftmostFirst,
                &hirs,
            )?],
        };
        let longest = searches.iter().map(Prefilter::max_needle_len).max()?;
        Some(Self { searches, longest })
    }

    pub(super) fn in_chunk<'a>(&'a self, bytes: &'a [u8]) -> ChunkCandidates<'a> {
        ChunkCandidates {
            literals: self,
            bytes,
            next: vec![NextLiteral::Unsearched; self.searches.len()],
            straddle_from: bytes.len().saturating_sub(self.longest.saturating_sub(1)),
        }
    }
}

/// Candidates in one chunk. Each search remembers what it found, so that each still reads every
/// byte of the chunk at most once.
pub(super) struct ChunkCandidates<'a> {
    literals: &'a LiteralStarts,
    pub(super) bytes: &'a [u8],
    /// Per literal search.
    next: Vec<NextLiteral>,
    /// A literal that starts here or later may run on into the next chunk.
    straddle_from: usize,
}

#[derive(Clone, Copy)]
enum NextLiteral {
    Unsearched,
    At(usize),
    NoneInChunk,
}

impl ChunkCandidates<'_> {
    /// The first position from `at` on where a match can begin: the nearest literal, but never
    /// beyond `straddle_from`. Positions passed in never decrease within a chunk.
    pub(super) fn next_match_start(&mut self, at: usize) -> usize {
        if at >= self.straddle_from {
            return at;
        }
        let mut nearest = self.straddle_from;
        let searches = &self.literals.searches;
        for (search, next) in searches.iter().zip(self.next.iter_mut()) {
            let found = match *next {
                NextLiteral::At(position) if position >= at => Some(position),
                NextLiteral::NoneInChunk => None,
                NextLiteral::Unsearched | NextLiteral::At(_) => {
                    let found = search
                        .find(self.bytes, Span::from(at..self.bytes.len()))
                        .map(|span| span.start);
                    *next = found.map_or(NextLiteral::NoneInChunk, NextLiteral::At);
                    found
                }
            };
            if let Some(position) = found {
                nearest = nearest.min(position);
            }
        }
        nearest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literals(patterns: &[&str]) -> Option<LiteralStarts> {
        LiteralStarts::new(patterns, &syntax::Config::new().utf8(false))
    }

    #[test]
    fn look_around_counts_as_empty_so_word_patterns_have_literals() {
        let starts = literals(&[r"\bout of memory\b", r"(?m)^FATAL: "]).unwrap();
        assert_eq!(starts.searches.len(), 2);
        assert_eq!(starts.longest, 13);
    }

    #[test]
    fn a_pattern_without_a_literal_start_disables_the_searches() {
        assert!(literals(&["stop", r"\w+ failed"]).is_none());
        assert!(literals(&["stop", "a|b*"]).is_none());
    }

    #[test]
    fn candidates_stop_short_of_a_literal_that_may_straddle_the_seam() {
        let starts = literals(&["needle"]).unwrap();
        let chunk = b"....needle......need";
        let mut candidates = starts.in_chunk(chunk);
        assert_eq!(candidates.next_match_start(0), 4);
        assert_eq!(candidates.next_match_start(4), 4);
        // No more whole literal: the walk must resume where a literal could still begin.
        assert_eq!(candidates.next_match_start(5), chunk.len() - 5);
        assert_eq!(
            candidates.next_match_start(chunk.len() - 2),
            chunk.len() - 2
        );
    }
}
