//! The DFA path: one unanchored multi-pattern dense DFA (`MatchKind::All`) whose state is
//! carried across chunks and never restarted, so look-behind is right at every seam. It
//! reports a match one byte late; the end-of-chunk peek is its end-of-input transition, taken
//! without keeping it. In a start state it jumps to the next literal (`literals.rs`).

use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::{primitives::StateID, start, syntax};
use regex_automata::{Anchored, MatchKind};

use super::LowestMatch;
use super::literals::{ChunkCandidates, LiteralStarts};

pub(super) struct StreamingDfa {
    table: dense::DFA<Vec<u32>>,
    pub(super) start: StateID,
    /// Present when every match begins with one of a finite set of literals. The start states
    /// are then tagged as special, which is how the scan notices it may jump ahead.
    skip: Option<SkipAhead>,
    /// DFA pattern id → index into the caller's pattern list.
    pub(super) pattern_indices: Vec<usize>,
}

impl StreamingDfa {
    /// Builds the DFA for `patterns[i]` for every `i` in `pattern_indices`. `None` when the
    /// size limit was hit or a pattern has a Unicode word boundary.
    pub(super) fn build(
        patterns: &[String],
        pattern_indices: Vec<usize>,
        size_limit: usize,
    ) -> Option<Self> {
        let selected: Vec<&str> = pattern_indices
            .iter()
            .filter_map(|&index| patterns.get(index).map(String::as_str))
            .collect();
        // `regex::bytes` semantics: Unicode classes stay on, but a match may cover (and the
        // haystack may contain) invalid UTF-8.
        let syntax = syntax::Config::new().utf8(false);
        let literals = LiteralStarts::new(&selected, &syntax);
        let table = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Unanchored)
                    .match_kind(MatchKind::All)
                    .specialize_start_states(literals.is_some())
                    .dfa_size_limit(Some(size_limit))
                    .determinize_size_limit(Some(size_limit)),
            )
            .syntax(syntax)
            .thompson(thompson::Config::new().utf8(false))
            .build_many(&selected)
            .ok()?;
        // No look-behind byte: the stream starts at the beginning of the text, so `^` and `\A`
        // can match there. (This cannot fail for an unanchored DFA without quit bytes.)
        let start = table
            .start_state(&start::Config::new().anchored(Anchored::No))
            .ok()?;
        let skip = literals.and_then(|literals| SkipAhead::new(&table, literals));
        Some(Self {
            table,
            start,
            skip,
            pattern_indices,
        })
    }

    /// Runs `bytes` through the DFA from `state`, recording every pattern that matches on the
    /// way. Returns the state after the last byte, or `None` once the DFA is dead.
    ///
    /// The hot loop: one table lookup per byte and one range check for the rare special
    /// states; start states jump to the next literal, accelerated states to the next byte
    /// that leaves them.
    pub(super) fn advance(
        &self,
        mut state: StateID,
        bytes: &[u8],
        lowest: &mut LowestMatch,
    ) -> Option<StateID> {
        let table = &self.table;
        let skip = self.skip.as_ref();
        let mut skip = skip.map(|skip| (skip, skip.literals.in_chunk(bytes)));
        let mut at = 0;
        if let Some((skip, candidates)) = &mut skip
            && table.is_start_state(state)
        {
            (at, state) = self.leave_start(state, skip, candidates, at)?;
        }
        while let Some(&byte) = bytes.get(at) {
            state = table.next_state(state, byte);
            at += 1;
            if table.is_special_state(state) {
                if table.is_match_state(state) {
                    self.record_matches(state, lowest);
                    if lowest.0 == self.pattern_indices.first().copied() {
                        // Nothing later in this chunk can beat the DFA's first pattern.
                        return Some(state);
                    }
                } else if table.is_dead_state(state) {
                    return None;
                } else if let Some((skip, candidates)) = &mut skip
                    && table.is_start_state(state)
                {
                    (at, state) = self.leave_start(state, skip, candidates, at)?;
                    continue;
                }
                if table.is_accel_state(state) {
                    at = next_exit(table.accelerator(state), bytes, at);
                }
            }
        }
        Some(state)
    }

    /// Records the matches decided if the text ended after `state`, without moving there.
    pub(super) fn record_matches_at_end(&self, state: StateID, lowest: &mut LowestMatch) {
        self.record_matches(self.table.next_eoi_state(state), lowest);
    }

    /// From start state `state` at `at`, where the byte-by-byte walk resumes and the state
    /// there; `None` if that state is dead. No match is in progress, so no verdict depends on
    /// the bytes before the next literal, where the DFA restarts with the byte before it as
    /// look-behind.
    fn leave_start(
        &self,
        state: StateID,
        skip: &SkipAhead,
        candidates: &mut ChunkCandidates<'_>,
        at: usize,
    ) -> Option<(usize, StateID)> {
        let table = &self.table;
        let resume = candidates.next_match_start(at);
        if resume <= at {
            let at = if table.is_accel_state(state) {
                next_exit(table.accelerator(state), candidates.bytes, at)
            } else {
                at
            };
            return Some((at, state));
        }
        // A jump lands after `at`, so the look-behind byte is in this chunk: the previous
        // chunk's last byte is already accounted for in the carried state.
        let Some(&look_behind) = candidates.bytes.get(resume - 1) else {
            return Some((at, state));
        };
        let restart = skip.restart_after[usize::from(look_behind)];
        if table.is_dead_state(restart) {
            return None;
        }
        Some((resume, restart))
    }

    fn record_matches(&self, state: StateID, lowest: &mut LowestMatch) {
        if !self.table.is_match_state(state) {
            return;
        }
        for nth in 0..self.table.match_len(state) {
            let pattern_id = self.table.match_pattern(state, nth);
            if let Some(&index) = self.pattern_indices.get(pattern_id.as_usize()) {
                lowest.record(index);
            }
        }
    }
}

struct SkipAhead {
    literals: LiteralStarts,
    /// The unanchored start state for each look-behind byte. A table rather than
    /// `start_state` calls: a jump can come every few bytes.
    restart_after: Box<[StateID; 256]>,
}

impl SkipAhead {
    /// `None` if the DFA had no start state for some byte, which cannot happen for an
    /// unanchored DFA without quit bytes; the scan then walks every byte.
    fn new(table: &dense::DFA<Vec<u32>>, literals: LiteralStarts) -> Option<Self> {
        let config = start::Config::new().anchored(Anchored::No);
        let restarts = (0..=u8::MAX)
            .map(|byte| {
                table
                    .start_state(&config.clone().look_behind(Some(byte)))
                    .ok()
            })
            .collect::<Option<Vec<_>>>()?;
        let restart_after = restarts.into_boxed_slice().try_into().ok()?;
        Some(Self {
            literals,
            restart_after,
        })
    }
}

/// The position of the next byte (from `from` on) that leaves an accelerated state; every byte
/// before it loops back to the same state, so skipping them changes nothing.
fn next_exit(needles: &[u8], bytes: &[u8], from: usize) -> usize {
    let Some(rest) = bytes.get(from..) else {
        return bytes.len();
    };
    let found = match *needles {
        [a] => memchr::memchr(a, rest),
        [a, b] => memchr::memchr2(a, b, rest),
        [a, b, c] => memchr::memchr3(a, b, c, rest),
        // regex-automata accelerates only with one to three needles; anything else is scanned
        // byte by byte.
        _ => Some(0),
    };
    found.map_or(bytes.len(), |offset| from + offset)
}

#[cfg(test)]
impl StreamingDfa {
    /// The reference for the literal skips: the same DFA walked one transition per byte, with
    /// no skipping of any kind, peeking at end of input after every chunk like the scanner.
    pub(super) fn byte_by_byte_verdict(&self, chunks: &[Vec<u8>]) -> Option<(usize, usize)> {
        let mut state = self.start;
        for (step, chunk) in chunks.iter().enumerate() {
            let mut lowest = LowestMatch::default();
            for &byte in chunk {
                state = self.table.next_state(state, byte);
                self.record_matches(state, &mut lowest);
            }
            self.record_matches_at_end(state, &mut lowest);
            if let Some(index) = lowest.0 {
                return Some((step, index));
            }
        }
        let mut lowest = LowestMatch::default();
        self.record_matches_at_end(state, &mut lowest);
        lowest.0.map(|index| (chunks.len(), index))
    }

    /// (number of literal searches, longest literal) when the walk jumps between literals.
    pub(super) fn literal_searches(&self) -> Option<(usize, usize)> {
        assert_eq!(
            self.table.is_start_state(self.start),
            self.skip.is_some(),
            "start states are tagged exactly when the scan can jump"
        );
        self.skip
            .as_ref()
            .map(|skip| (skip.literals.searches.len(), skip.literals.longest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(patterns: &[&str]) -> StreamingDfa {
        let owned: Vec<String> = patterns.iter().map(|&p| p.to_owned()).collect();
        StreamingDfa::build(&owned, (0..owned.len()).collect(), 16 << 20).unwrap()
    }

    /// (a match seen in-stream, a match seen by the chunk-end peek) over all chunks; mirrors
    /// a table of trials worked out by hand when the DFA path was designed.
    fn trial(dfa: &StreamingDfa, chunks: &[&str]) -> (bool, bool) {
        let (mut in_stream, mut peek) = (LowestMatch::default(), LowestMatch::default());
        let mut state = dfa.start;
        for chunk in chunks {
            state = dfa
                .advance(state, chunk.as_bytes(), &mut in_stream)
                .unwrap();
            dfa.record_matches_at_end(state, &mut peek);
        }
        (in_stream.0.is_some(), peek.0.is_some())
    }

    #[test]
    fn hand_worked_trial_table() {
        let dfa = dfa(&["rate limit", "(?m)^FATAL: .*$"]);
        let rows: [(&[&str], (bool, bool)); 4] = [
            (&["xx rate li", "mit reached"], (true, false)),
            (&["xx rate li", "mit"], (false, true)),
            (&["ok\nFATAL: bo", "om\nmore"], (true, true)),
            (
                &["rate", " li", "m-it; ratelimit; FATAL: mid-line"],
                (false, false),
            ),
        ];
        for (chunks, expected) in rows {
            assert_eq!(trial(&dfa, chunks), expected, "{chunks:?}");
        }
    }

    #[test]
    fn a_unicode_word_boundary_cannot_be_built() {
        let owned = vec![r"\bstop\b".to_owned()];
        assert!(StreamingDfa::build(&owned, vec![0], 16 << 20).is_none());
    }

    #[test]
    fn accelerated_states_skip_to_the_next_relevant_byte() {
        assert_eq!(next_exit(b"x", b"aaxa", 0), 2);
        assert_eq!(next_exit(b"xy", b"aaay", 1), 3);
        assert_eq!(next_exit(b"xyz", b"aaaa", 0), 4);
        assert_eq!(next_exit(b"x", b"aaaa", 4), 4);
        assert_eq!(next_exit(b"x", b"aaaa", 9), 4);
        assert_eq!(next_exit(b"", b"aaaa", 1), 1);
    }

    fn literal_searches(patterns: &[&str]) -> Option<(usize, usize)> {
        dfa(patterns).literal_searches()
    }

    #[test]
    fn few_literal_prefixed_patterns_get_a_search_each() {
        let benchmarked = [
            r"(?-u:\b)out of memory(?-u:\b)",
            r"(?m)^FATAL: .*$",
            r"error\nfatal",
        ];
        assert_eq!(literal_searches(&benchmarked), Some((3, 13)));
        assert_eq!(literal_searches(&["(?i)stop now"]), Some((1, 4)));
    }

    #[test]
    fn many_patterns_or_slow_searches_share_one_search() {
        assert_eq!(
            literal_searches(&["one", "two", "three", "four", "five!"]),
            Some((1, 5))
        );
        // Two-byte literals are not a fast search on their own.
        assert_eq!(literal_searches(&["stop", "[a-f]x"]), Some((1, 4)));
    }

    #[test]
    fn patterns_without_a_literal_start_walk_every_byte() {
        for without_literals in [r"\w+ failed", "a|b*", "(?m)^$"] {
            assert_eq!(
                literal_searches(&["stop", without_literals]),
                None,
                "{without_literals}"
            );
        }
    }
}
