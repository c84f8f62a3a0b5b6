//! Stop regexes (SPEC §10): "does any match exist in everything received so far", over the
//! combined stdout+stderr in arrival order, answered without retaining the history. All
//! patterns are compiled into one dense DFA whose single state is carried across chunks; a
//! pattern the DFA cannot build falls back to a history-retaining search for that pattern only.
//!
//! How the streaming answer stays exact (engineering notes §5):
//! - The DFA is unanchored with `MatchKind::All`, so every position where any pattern's match
//!   ends shows up as a match state, and later matches are still found after earlier ones.
//! - Its state is carried from chunk to chunk and never restarted, so look-behind context
//!   (`^`, `(?m)^`, `(?-u:\b)`) is right at every seam, including seams between a stdout chunk
//!   and a stderr chunk: the caller feeds both streams, in arrival order, into one scanner.
//! - The DFA reports a match one byte late. At the end of every chunk the scanner therefore
//!   peeks at the end-of-input transition without keeping it: "received so far" treats the
//!   current end as the end of the text. This is also how the original behaved (it re-ran
//!   `re.search` over the whole history after every batch), so `done$` fires when a chunk ends
//!   in `done`, even if more output would follow. `(?m)^FATAL: .*$` is the robust form.
//! - The verdict is decided per chunk, like the original's per-batch check: when the first
//!   match appears, the rest of that chunk is still scanned and the lowest pattern index with
//!   any match so far is reported. After that the scanner is latched and ignores input.
//! - Speed (SPEC §16): when every pattern's matches begin with one of a few literals, SIMD
//!   literal searches (`memmem`, Teddy) jump over output in which no match can begin, the way
//!   `regex-automata`'s own forward search uses its prefilters. They are consulted only while
//!   the DFA sits in a start state (no match in progress). The walk resumes at the next literal
//!   in the start state for the byte before it, which is the state a byte-by-byte walk would
//!   be in as far as any match is concerned. A literal may run on into the next chunk, so the
//!   last few bytes of every chunk are always walked.
//!
//! Patterns are Rust `regex` syntax matched on bytes (`regex::bytes` semantics), so output that
//! is not UTF-8 is searched, never rejected.

use std::fmt;
use std::sync::Arc;

use regex::bytes::Regex;
use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::{prefilter::Prefilter, primitives::StateID, start, syntax};
use regex_automata::{Anchored, MatchKind, Span};

/// Heap the DFA table may use, and separately the heap determinization may use while building
/// it. Realistic stop patterns need kilobytes; `\w{20}` (Unicode) needs about 4 MB. A pattern
/// that would exceed this goes to the fallback rather than costing memory per invocation.
const DFA_SIZE_LIMIT: usize = 16 << 20;

/// A pattern that does not compile; reported naming its index and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopPatternError {
    pub index: usize,
    pub pattern: String,
    pub message: String,
}

impl fmt::Display for StopPatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid stop regex '{}': {}", self.pattern, self.message)
    }
}

impl std::error::Error for StopPatternError {}

/// The compiled set of stop patterns, shared (read-only) by every attempt of an invocation.
#[derive(Debug)]
pub struct StopPatterns {
    patterns: Vec<String>,
    /// `None` when no pattern could (or needed to) go into the DFA.
    streaming: Option<StreamingDfa>,
    /// In pattern order.
    fallbacks: Vec<FallbackPattern>,
}

impl StopPatterns {
    /// Compiles the patterns (Rust `regex` syntax), enforcing size limits now rather than
    /// mid-run.
    pub fn compile(patterns: &[String]) -> Result<Self, StopPatternError> {
        Self::compile_within(patterns, DFA_SIZE_LIMIT)
    }

    fn compile_within(patterns: &[String], size_limit: usize) -> Result<Self, StopPatternError> {
        let regexes = patterns
            .iter()
            .enumerate()
            .map(|(index, pattern)| {
                Regex::new(pattern).map_err(|error| StopPatternError {
                    index,
                    pattern: pattern.clone(),
                    message: describe_regex_error(&error),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;

        let (streaming, fallbacks) = assign_to_dfa_or_fallback(patterns, regexes, size_limit);
        Ok(Self {
            patterns: patterns.to_vec(),
            streaming,
            fallbacks,
        })
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
        self.fallbacks
            .iter()
            .map(|fallback| self.pattern(fallback.index))
            .collect()
    }

    /// One warning per fallback pattern, naming it, why the DFA refused it, and what to write
    /// instead.
    pub fn fallback_warnings(&self) -> Vec<String> {
        self.fallbacks
            .iter()
            .map(|fallback| {
                let advice = if fallback.refusal.too_large {
                    "simplify it to keep memory bounded"
                } else {
                    r"use (?-u:\b) for ASCII word boundaries"
                };
                format!(
                    "stop regex '{}' cannot be matched by the streaming DFA ({}); it falls back \
                     to retaining output in memory; {advice}",
                    self.pattern(fallback.index),
                    fallback.refusal.reason
                )
            })
            .collect()
    }

    fn pattern(&self, index: usize) -> &str {
        self.patterns.get(index).map_or("", String::as_str)
    }

    fn stop_match(&self, index: usize) -> StopMatch {
        StopMatch {
            index,
            pattern: self.pattern(index).to_owned(),
        }
    }
}

/// Which pattern matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopMatch {
    pub index: usize,
    pub pattern: String,
}

/// Per-attempt scanning state.
pub struct StopScanner {
    patterns: Arc<StopPatterns>,
    /// The DFA's position in the combined output; `None` once the DFA can no longer match
    /// (no DFA, or it reached its dead state).
    dfa_state: Option<StateID>,
    /// Everything received so far, kept only while fallback patterns exist.
    history: Vec<u8>,
    /// Whether the fallback patterns have searched the history yet; every feed searches it,
    /// so only a `finish` without any feed has to.
    history_searched: bool,
    /// Set once a match was reported or the input ended; the scanner then ignores input.
    spent: bool,
}

impl fmt::Debug for StopScanner {
    // The derived form would print the whole retained history.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopScanner")
            .field("patterns", &self.patterns.patterns)
            .field("dfa_state", &self.dfa_state)
            .field("history_len", &self.history.len())
            .field("spent", &self.spent)
            .finish_non_exhaustive()
    }
}

impl StopScanner {
    pub fn new(patterns: Arc<StopPatterns>) -> Self {
        let dfa_state = patterns.streaming.as_ref().map(|dfa| dfa.start);
        Self {
            patterns,
            dfa_state,
            history: Vec::new(),
            history_searched: false,
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
        if let (Some(dfa), Some(state)) = (&self.patterns.streaming, self.dfa_state) {
            self.dfa_state = dfa.advance(state, bytes, &mut lowest);
            if let Some(state) = self.dfa_state {
                dfa.record_matches(dfa.table.next_eoi_state(state), &mut lowest);
            }
        }
        if !self.patterns.fallbacks.is_empty() {
            self.history.extend_from_slice(bytes);
            self.search_history(&mut lowest);
        }
        self.report(lowest)
    }

    /// Ends the input (real end-of-input transition) and reports a match decided only now.
    ///
    /// Every chunk already peeked at end of input, so this decides something new only when no
    /// chunk arrived at all (a pattern such as `^$` matches empty output). The scanner is
    /// spent afterwards.
    pub fn finish(&mut self) -> Option<StopMatch> {
        if self.spent {
            return None;
        }
        let mut lowest = LowestMatch::default();
        if let (Some(dfa), Some(state)) = (&self.patterns.streaming, self.dfa_state.take()) {
            dfa.record_matches(dfa.table.next_eoi_state(state), &mut lowest);
        }
        if !self.history_searched {
            self.search_history(&mut lowest);
        }
        let found = self.report(lowest);
        self.spent = true;
        self.history = Vec::new();
        found
    }

    /// Re-searches the whole retained history with each fallback pattern. This is quadratic
    /// in the output size (every chunk re-reads everything before it), the price the original
    /// paid for every pattern; a general regex gives no bound on how far back a match can
    /// start, so no suffix of the history can be dropped safely.
    fn search_history(&mut self, lowest: &mut LowestMatch) {
        for fallback in &self.patterns.fallbacks {
            if lowest.is_below(fallback.index) {
                break;
            }
            if fallback.regex.is_match(&self.history) {
                lowest.record(fallback.index);
            }
        }
        self.history_searched = true;
    }

    fn report(&mut self, lowest: LowestMatch) -> Option<StopMatch> {
        let index = lowest.0?;
        self.spent = true;
        self.history = Vec::new();
        Some(self.patterns.stop_match(index))
    }
}

/// The lowest pattern index seen matching while deciding one chunk.
#[derive(Default)]
struct LowestMatch(Option<usize>);

impl LowestMatch {
    fn record(&mut self, index: usize) {
        self.0 = Some(self.0.map_or(index, |lowest| lowest.min(index)));
    }

    /// Whether a pattern with this index (or a later one) can no longer lower the result.
    fn is_below(&self, index: usize) -> bool {
        self.0.is_some_and(|lowest| lowest < index)
    }
}

/// A pattern searched over the retained history because the DFA could not take it.
#[derive(Debug)]
struct FallbackPattern {
    index: usize,
    regex: Regex,
    refusal: DfaRefusal,
}

/// Why the DFA could not take a pattern.
#[derive(Debug)]
struct DfaRefusal {
    /// The builder's reason, one line.
    reason: String,
    /// A size limit was hit (rather than an unsupported feature such as a Unicode `\b`).
    too_large: bool,
}

/// Puts patterns into the DFA in order, each only if the DFA still builds with it; the rest
/// fall back. That is one build per pattern, each including the ones admitted before it:
/// quadratic in the (small) number of patterns, but a pattern that blows the size limit is
/// built only once, and its failure is attributed to it rather than to the whole set.
fn assign_to_dfa_or_fallback(
    patterns: &[String],
    regexes: Vec<Regex>,
    size_limit: usize,
) -> (Option<StreamingDfa>, Vec<FallbackPattern>) {
    let mut streaming: Option<StreamingDfa> = None;
    let mut fallbacks = Vec::new();
    for (index, regex) in regexes.into_iter().enumerate() {
        let mut candidates = streaming
            .as_ref()
            .map_or_else(Vec::new, |dfa| dfa.pattern_indices.clone());
        candidates.push(index);
        match StreamingDfa::build(patterns, candidates, size_limit) {
            Ok(dfa) => streaming = Some(dfa),
            Err(refusal) => fallbacks.push(FallbackPattern {
                index,
                regex,
                refusal,
            }),
        }
    }
    (streaming, fallbacks)
}

/// At most this many patterns get a literal search each (typically `memmem`, tens of GiB/s);
/// more share one multi-literal search (Teddy). On agent output, words such as "error" and
/// "FATAL" are false positives for Teddy's fingerprints, which cut it to about 2 GiB/s for the
/// three benchmark patterns, while three separate searches run at over 6 GiB/s together.
const MAX_SEPARATE_LITERAL_SEARCHES: usize = 4;

/// One unanchored multi-pattern dense DFA, the state it starts in, and how to skip output in
/// which no match can begin.
struct StreamingDfa {
    table: dense::DFA<Vec<u32>>,
    start: StateID,
    /// Present when every match begins with one of a finite set of literals. The DFA's start
    /// states are then "specialized" (tagged as special), which is how the scan notices that
    /// no match is in progress and it may jump ahead.
    skip: Option<SkipAhead>,
    /// DFA pattern id → index into the caller's pattern list.
    pattern_indices: Vec<usize>,
}

impl fmt::Debug for StreamingDfa {
    // The derived form would print the whole transition table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamingDfa")
            .field("pattern_indices", &self.pattern_indices)
            .field("memory_usage", &self.table.memory_usage())
            .field(
                "literal_searches",
                &self.skip.as_ref().map(|skip| skip.literals.searches.len()),
            )
            .finish_non_exhaustive()
    }
}

impl StreamingDfa {
    fn build(
        patterns: &[String],
        pattern_indices: Vec<usize>,
        size_limit: usize,
    ) -> Result<Self, DfaRefusal> {
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
            .map_err(|error| DfaRefusal {
                reason: describe_build_error(&error),
                too_large: error.is_size_limit_exceeded(),
            })?;
        // No look-behind byte: the stream starts at the beginning of the text, so `^` and `\A`
        // can match there. (This cannot fail for an unanchored DFA without quit bytes.)
        let start = table
            .start_state(&start::Config::new().anchored(Anchored::No))
            .map_err(|error| DfaRefusal {
                reason: error.to_string(),
                too_large: false,
            })?;
        let skip = literals.and_then(|literals| SkipAhead::new(&table, literals));
        Ok(Self {
            table,
            start,
            skip,
            pattern_indices,
        })
    }

    /// Runs `bytes` through the DFA from `state`, recording every pattern that matches on the
    /// way. Returns the state after the last byte, or `None` once the DFA is dead (no pattern
    /// can match any more, e.g. every pattern starts with `\A` and the text went elsewhere).
    ///
    /// This is the hot loop: one table lookup per byte and a single range check for the rare
    /// "special" states. In a start state the literal searches jump to the next place where a
    /// match can begin; other states that loop on most bytes (and start states, without
    /// literal searches) let it jump straight to the next byte that leaves them.
    fn advance(
        &self,
        mut state: StateID,
        bytes: &[u8],
        lowest: &mut LowestMatch,
    ) -> Option<StateID> {
        let table = &self.table;
        let mut skip = self.skip.as_ref().map(|skip| skip.in_chunk(bytes));
        let mut at = 0;
        if let Some(skip) = &mut skip
            && table.is_start_state(state)
        {
            (at, state) = self.leave_start(state, skip, at)?;
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
                } else if let Some(skip) = &mut skip
                    && table.is_start_state(state)
                {
                    (at, state) = self.leave_start(state, skip, at)?;
                    continue;
                }
                if table.is_accel_state(state) {
                    at = next_exit(table.accelerator(state), bytes, at);
                }
            }
        }
        Some(state)
    }

    /// From start state `state` at `at`, the position from which the byte-by-byte walk must
    /// resume and the state there; `None` if that state is dead.
    ///
    /// A start state means no match is in progress: every match still to be found begins at
    /// `at` or later, hence with one of the searched literals. So no verdict depends on the
    /// bytes before the next place `p` where a match can begin, and at `p` the DFA may as well
    /// start afresh with the byte before `p` as look-behind (for `^`, `(?m)^`, `(?-u:\b)`).
    fn leave_start(
        &self,
        state: StateID,
        chunk: &mut ChunkSkip<'_>,
        at: usize,
    ) -> Option<(usize, StateID)> {
        let table = &self.table;
        let resume = chunk.next_match_start(at);
        if resume <= at {
            let at = if table.is_accel_state(state) {
                next_exit(table.accelerator(state), chunk.bytes, at)
            } else {
                at
            };
            return Some((at, state));
        }
        // A jump lands after `at`, so the look-behind byte is in this chunk: the previous
        // chunk's last byte is already accounted for in the carried state.
        let Some(&look_behind) = chunk.bytes.get(resume - 1) else {
            return Some((at, state));
        };
        let restart = chunk.skip.restart_after[usize::from(look_behind)];
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

/// What the scan needs to jump over output in which no match can begin.
struct SkipAhead {
    literals: LiteralStarts,
    /// The unanchored start state for each look-behind byte, where the walk resumes after a
    /// jump. A table rather than `start_state` calls: a jump can come every few bytes.
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

    fn in_chunk<'a>(&'a self, bytes: &'a [u8]) -> ChunkSkip<'a> {
        let searches = self.literals.searches.len();
        ChunkSkip {
            skip: self,
            bytes,
            next: vec![NextLiteral::Unsearched; searches],
            straddle_from: bytes
                .len()
                .saturating_sub(self.literals.longest.saturating_sub(1)),
        }
    }
}

/// Where matches can begin: searches for literals such that every match of every pattern
/// begins with one of them.
struct LiteralStarts {
    /// One search per pattern when there are few patterns and each has a fast search, else one
    /// search for all of them.
    searches: Vec<Prefilter>,
    /// The longest literal any search looks for.
    longest: usize,
}

impl LiteralStarts {
    /// `None` when some pattern can begin with too many different texts (`\w+ failed`) or
    /// match the empty string, so no literal search can tell where matches begin.
    ///
    /// The literals come from the same syntax the DFA is built with, so they are exact about
    /// Unicode classes, case-insensitivity and bytes that are not UTF-8. They are optimized as
    /// for leftmost-first search although the DFA reports all matches: the scan only asks
    /// where a match can begin, and that optimization only shortens literals or drops one that
    /// begins with another kept literal, so every position where a match begins is still
    /// found. Unoptimized, `(?i)` or a class such as `[0-9]{3}` multiplies the literals beyond
    /// what the SIMD searches take.
    fn new(patterns: &[&str], syntax: &syntax::Config) -> Option<Self> {
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
}

/// Skipping through one chunk. Each literal search remembers what it found, so that with
/// several searches, each still reads every byte of the chunk at most once.
struct ChunkSkip<'a> {
    skip: &'a SkipAhead,
    bytes: &'a [u8],
    /// Per literal search.
    next: Vec<NextLiteral>,
    /// A literal that starts here or later may run on into the next chunk, where these
    /// searches cannot see it (at most the longest literal's length minus one from the end).
    straddle_from: usize,
}

/// What one search knows about the rest of the chunk after its last search.
#[derive(Clone, Copy)]
enum NextLiteral {
    Unsearched,
    At(usize),
    NoneInChunk,
}

impl ChunkSkip<'_> {
    /// The first position from `at` on where a match can begin, as far as this chunk shows:
    /// the nearest literal found, but never beyond `straddle_from` (from there on the DFA
    /// walks byte by byte, so a literal split across the seam is not skipped). Positions
    /// passed in never decrease within a chunk.
    fn next_match_start(&mut self, at: usize) -> usize {
        if at >= self.straddle_from {
            return at;
        }
        let mut nearest = self.straddle_from;
        let searches = &self.skip.literals.searches;
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

/// The builder error with its causes, on one line.
fn describe_build_error(error: &dense::BuildError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn compile(patterns: &[&str]) -> Arc<StopPatterns> {
        let owned: Vec<String> = patterns.iter().map(|&p| p.to_owned()).collect();
        Arc::new(StopPatterns::compile(&owned).unwrap())
    }

    /// Feeds the chunks and finishes; returns the 0-based step that reported (`chunks.len()`
    /// for `finish`) and the matched index. Also checks the scanner reports at most once.
    fn first_match(patterns: &Arc<StopPatterns>, chunks: &[&[u8]]) -> Option<(usize, usize)> {
        let mut scanner = StopScanner::new(Arc::clone(patterns));
        let mut reported = Vec::new();
        for (step, chunk) in chunks.iter().enumerate() {
            if let Some(found) = scanner.feed(chunk) {
                reported.push((step, found));
            }
        }
        if let Some(found) = scanner.finish() {
            reported.push((chunks.len(), found));
        }
        assert!(reported.len() <= 1, "reported more than once: {reported:?}");
        reported.into_iter().next().map(|(step, found)| {
            assert_eq!(found.pattern, patterns.patterns()[found.index]);
            (step, found.index)
        })
    }

    /// (a match seen in-stream, a match seen by the chunk-end peek) over all chunks, using the
    /// DFA directly; mirrors the trial table in engineering notes §5.4.
    fn trial(patterns: &Arc<StopPatterns>, chunks: &[&str]) -> (bool, bool) {
        let dfa = patterns.streaming.as_ref().unwrap();
        let (mut in_stream, mut peek) = (LowestMatch::default(), LowestMatch::default());
        let mut state = dfa.start;
        for chunk in chunks {
            state = dfa
                .advance(state, chunk.as_bytes(), &mut in_stream)
                .unwrap();
            dfa.record_matches(dfa.table.next_eoi_state(state), &mut peek);
        }
        (in_stream.0.is_some(), peek.0.is_some())
    }

    #[test]
    fn trial_table_from_the_engineering_notes() {
        let patterns = compile(&["rate limit", "(?m)^FATAL: .*$"]);
        assert!(patterns.fallback_patterns().is_empty());
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
            assert_eq!(trial(&patterns, chunks), expected, "{chunks:?}");
        }
    }

    #[test]
    fn matches_are_reported_at_the_chunk_that_completes_them() {
        let patterns = compile(&["rate limit", "(?m)^FATAL: .*$"]);
        assert_eq!(
            first_match(&patterns, &[b"xx rate li", b"mit reached", b"more"]),
            Some((1, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"xx rate li", b"mit"]),
            Some((1, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"ok\nFATAL: bo", b"om\nmore"]),
            Some((0, 1)),
            "the peek treats the current end as end of text"
        );
        assert_eq!(
            first_match(
                &patterns,
                &[b"rate", b" li", b"m-it; ratelimit; FATAL: mid-line"]
            ),
            None
        );
    }

    #[test]
    fn an_end_anchored_pattern_matches_trailing_output_without_newline() {
        // Reference §11.4 / §15.2 item 36.
        let patterns = compile(&["final stop text$"]);
        assert_eq!(
            first_match(&patterns, &[b"ordinary output\n", b"final stop text"]),
            Some((1, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"ordinary output\nfinal stop text"]),
            Some((0, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"final stop text", b"\nmore"]),
            Some((0, 0)),
            "`$` means the end of what has arrived so far"
        );
        assert_eq!(first_match(&patterns, &[b"final stop text\nmore"]), None);
    }

    #[test]
    fn finish_decides_patterns_that_match_empty_output() {
        let patterns = compile(&["^$"]);
        assert_eq!(first_match(&patterns, &[]), Some((0, 0)));
        assert_eq!(first_match(&patterns, &[b"x"]), None);
        let fallback = compile(&[r"\A\B\z"]);
        assert_eq!(fallback.fallback_patterns(), [r"\A\B\z"]);
        assert_eq!(first_match(&fallback, &[]), Some((0, 0)));
    }

    #[test]
    fn an_empty_pattern_matches_immediately() {
        let patterns = compile(&[""]);
        assert_eq!(first_match(&patterns, &[b""]), Some((0, 0)));
        assert_eq!(first_match(&patterns, &[b"abc"]), Some((0, 0)));
    }

    #[test]
    fn chunks_of_both_streams_form_one_text() {
        let patterns = compile(&["rate limit"]);
        let stdout_chunk: &[u8] = b"429: rate ";
        let stderr_chunk: &[u8] = b"limit";
        assert_eq!(
            first_match(&patterns, &[stdout_chunk, stderr_chunk]),
            Some((1, 0))
        );
    }

    #[test]
    fn line_anchors_hold_across_chunk_seams() {
        let patterns = compile(&["(?m)^FATAL"]);
        assert_eq!(first_match(&patterns, &[b"x", b"FATAL"]), None);
        assert_eq!(first_match(&patterns, &[b"x\n", b"FATAL"]), Some((1, 0)));
        assert_eq!(first_match(&patterns, &[b"FAT", b"AL"]), Some((1, 0)));
        let ascii_word = compile(&[r"(?-u:\b)stop(?-u:\b)"]);
        assert_eq!(first_match(&ascii_word, &[b"non", b"stop"]), None);
        assert_eq!(
            first_match(&ascii_word, &[b"non ", b"stop", b"s"]),
            Some((1, 0))
        );
    }

    #[test]
    fn the_lowest_index_matching_in_the_deciding_chunk_wins() {
        let patterns = compile(&["b", "a"]);
        assert_eq!(first_match(&patterns, &[b"ab"]), Some((0, 0)));
        assert_eq!(first_match(&patterns, &[b"a", b"b"]), Some((0, 1)));
        let three = compile(&["zzz", "y", "x"]);
        assert_eq!(first_match(&three, &[b"..x..y.."]), Some((0, 1)));
    }

    #[test]
    fn the_scanner_latches_after_the_first_match() {
        let patterns = compile(&["one", "two"]);
        let mut scanner = StopScanner::new(Arc::clone(&patterns));
        assert_eq!(scanner.feed(b"nothing"), None);
        assert_eq!(
            scanner.feed(b"two"),
            Some(StopMatch {
                index: 1,
                pattern: "two".to_owned()
            })
        );
        assert_eq!(scanner.feed(b"one"), None);
        assert_eq!(scanner.finish(), None);
    }

    #[test]
    fn input_after_finish_is_ignored() {
        let patterns = compile(&["x"]);
        let mut scanner = StopScanner::new(patterns);
        assert_eq!(scanner.finish(), None);
        assert_eq!(scanner.feed(b"x"), None);
    }

    #[test]
    fn no_patterns_never_match_and_keep_nothing() {
        let patterns = compile(&[]);
        assert!(patterns.is_empty());
        assert!(patterns.streaming.is_none());
        assert!(patterns.fallback_patterns().is_empty());
        let mut scanner = StopScanner::new(patterns);
        assert_eq!(scanner.feed(b"anything at all"), None);
        assert!(scanner.history.is_empty());
        assert_eq!(scanner.finish(), None);
    }

    #[test]
    fn dfa_only_patterns_keep_no_history() {
        let mut scanner = StopScanner::new(compile(&["never"]));
        assert_eq!(scanner.feed(&[b'x'; 4096]), None);
        assert!(scanner.history.is_empty());
    }

    #[test]
    fn a_dead_dfa_stops_scanning() {
        let patterns = compile(&[r"\Afoo"]);
        let mut scanner = StopScanner::new(Arc::clone(&patterns));
        assert_eq!(scanner.feed(b"xf"), None);
        assert_eq!(scanner.dfa_state, None, "no match is possible any more");
        assert_eq!(scanner.feed(b"foo"), None);
        assert_eq!(scanner.finish(), None);
        assert_eq!(first_match(&patterns, &[b"fo", b"o!"]), Some((1, 0)));
    }

    #[test]
    fn a_unicode_word_boundary_falls_back_and_still_matches() {
        let patterns = compile(&["rate limit", r"\bstop\b"]);
        assert_eq!(patterns.fallback_patterns(), [r"\bstop\b"]);
        let warnings = patterns.fallback_warnings();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with(
                r"stop regex '\bstop\b' cannot be matched by the streaming DFA (unsupported regex feature for DFAs: cannot build DFAs for regexes with Unicode word boundaries"
            ),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].ends_with(
                r"); it falls back to retaining output in memory; use (?-u:\b) for ASCII word boundaries"
            ),
            "{}",
            warnings[0]
        );
        assert_eq!(
            first_match(&patterns, &[b"please st", b"op now"]),
            Some((1, 1))
        );
        assert_eq!(first_match(&patterns, &[b"nonstop", b"ping"]), None);
        assert_eq!(
            first_match(&patterns, &["éstop".as_bytes()]),
            None,
            "é is a Unicode word character"
        );
        assert_eq!(
            first_match(&patterns, &[b"stop", b" rate limit"]),
            Some((0, 1))
        );
        let mut scanner = StopScanner::new(patterns);
        assert_eq!(
            scanner.feed(b"rate limit and stop"),
            Some(StopMatch {
                index: 0,
                pattern: "rate limit".to_owned()
            })
        );
        assert!(
            scanner.history.is_empty(),
            "history is released once decided"
        );
    }

    #[test]
    fn a_fallback_pattern_with_a_lower_index_wins_the_chunk() {
        let patterns = compile(&[r"\bz\b", "a"]);
        assert_eq!(first_match(&patterns, &[b"a z"]), Some((0, 0)));
        assert_eq!(first_match(&patterns, &[b"a", b" z"]), Some((0, 1)));
    }

    #[test]
    fn an_ascii_word_boundary_uses_the_dfa() {
        let patterns = compile(&[r"(?-u:\b)stop(?-u:\b)"]);
        assert!(patterns.fallback_patterns().is_empty());
        assert!(patterns.fallback_warnings().is_empty());
        assert_eq!(first_match(&patterns, &[b"please stop now"]), Some((0, 0)));
        assert_eq!(first_match(&patterns, &[b"nonstop"]), None);
    }

    #[test]
    fn an_exponential_pattern_builds_or_falls_back_and_still_matches() {
        let exponential = "(a|b)*a(a|b){20}";
        let patterns = compile(&["rate limit", exponential]);
        let fallbacks = patterns.fallback_patterns();
        assert!(
            fallbacks.is_empty() || fallbacks == [exponential],
            "{fallbacks:?}"
        );
        for warning in patterns.fallback_warnings() {
            assert!(
                warning.ends_with("; simplify it to keep memory bounded"),
                "{warning}"
            );
        }
        let hit = format!("xx{}", "a".repeat(21));
        assert_eq!(first_match(&patterns, &[hit.as_bytes()]), Some((0, 1)));
        assert_eq!(first_match(&patterns, &[b"xxa", &[b'b'; 19]]), None);
        assert_eq!(first_match(&patterns, &[b"rate limit"]), Some((0, 0)));
    }

    #[test]
    fn patterns_that_only_fail_together_fall_back_one_by_one() {
        // Each builds alone within 1 MiB (about 600 KiB each); together they do not, so the later one falls back.
        let owned = ["(a|b)*a(a|b){12}", "x", "(c|d)*c(c|d){12}", "y"].map(str::to_owned);
        let patterns = Arc::new(StopPatterns::compile_within(&owned, 1 << 20).unwrap());
        assert_eq!(patterns.fallback_patterns(), ["(c|d)*c(c|d){12}"]);
        assert_eq!(
            patterns.streaming.as_ref().unwrap().pattern_indices,
            [0, 1, 3]
        );
        assert!(
            patterns.fallback_warnings()[0].contains("exceeded size limit"),
            "{:?}",
            patterns.fallback_warnings()
        );
        let c_hit = format!("c{}", "d".repeat(12));
        assert_eq!(first_match(&patterns, &[c_hit.as_bytes()]), Some((0, 2)));
        assert_eq!(first_match(&patterns, &[b"..y..x"]), Some((0, 1)));
        assert_eq!(first_match(&patterns, &[b"..y"]), Some((0, 3)));
        let a_hit = format!("a{}", "b".repeat(12));
        assert_eq!(
            first_match(&patterns, &[c_hit.as_bytes(), a_hit.as_bytes()]),
            Some((0, 2))
        );
    }

    #[test]
    fn an_invalid_pattern_is_named_with_its_index() {
        let owned = vec!["fine".to_owned(), "[".to_owned(), "(".to_owned()];
        let error = StopPatterns::compile(&owned).unwrap_err();
        assert_eq!(
            error,
            StopPatternError {
                index: 1,
                pattern: "[".to_owned(),
                message: "unclosed character class".to_owned(),
            }
        );
        assert_eq!(
            error.to_string(),
            "invalid stop regex '[': unclosed character class"
        );
        let multi_line = StopPatterns::compile(&["a\n(".to_owned()]).unwrap_err();
        assert_eq!(multi_line.message, "unclosed group");
    }

    #[test]
    fn output_that_is_not_utf8_is_searched() {
        let patterns = compile(&["stop", r"(?-u:\xFF)end"]);
        assert_eq!(
            first_match(&patterns, &[b"\xff\xfe st", b"op \xc3"]),
            Some((1, 0))
        );
        assert_eq!(first_match(&patterns, &[b"\xc3", b"\xffend"]), Some((1, 1)));
        let unicode_dot = compile(&["a.b"]);
        assert_eq!(
            first_match(&unicode_dot, &[b"a\xffb"]),
            None,
            "`.` is one codepoint"
        );
        assert_eq!(first_match(&unicode_dot, &["a☃b".as_bytes()]), Some((0, 0)));
        assert_eq!(
            first_match(
                &unicode_dot,
                &[&"a☃b".as_bytes()[..2], &"a☃b".as_bytes()[2..]]
            ),
            Some((1, 0)),
            "a codepoint split across chunks"
        );
    }

    #[test]
    fn accelerated_states_skip_to_the_next_relevant_byte() {
        assert_eq!(next_exit(b"x", b"aaxa", 0), 2);
        assert_eq!(next_exit(b"xy", b"aaay", 1), 3);
        assert_eq!(next_exit(b"xyz", b"aaaa", 0), 4);
        assert_eq!(next_exit(b"x", b"aaaa", 4), 4);
        assert_eq!(next_exit(b"x", b"aaaa", 9), 4);
        assert_eq!(next_exit(b"", b"aaaa", 1), 1);
        let patterns = compile(&["needle"]);
        let mut haystack = vec![b'.'; 100_000];
        haystack.extend_from_slice(b"needle");
        assert_eq!(first_match(&patterns, &[&haystack]), Some((0, 0)));
    }

    /// (number of literal searches, longest literal) of the DFA's literal starts.
    fn literal_searches(patterns: &[&str]) -> Option<(usize, usize)> {
        let compiled = compile(patterns);
        let dfa = compiled.streaming.as_ref().unwrap();
        assert_eq!(
            dfa.table.is_start_state(dfa.start),
            dfa.skip.is_some(),
            "start states are tagged exactly when the scan can jump"
        );
        dfa.skip
            .as_ref()
            .map(|skip| (skip.literals.searches.len(), skip.literals.longest))
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

    #[test]
    fn a_literal_split_across_chunks_is_not_skipped() {
        let patterns = compile(&["out of memory", "FATAL: "]);
        let long_prefix = format!("{} out of me", ".".repeat(200));
        assert_eq!(
            first_match(&patterns, &[long_prefix.as_bytes(), b"mory"]),
            Some((1, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"..............o", b"ut of memor", b"y"]),
            Some((2, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"................FATAL:", b" x"]),
            Some((1, 1))
        );
        assert_eq!(
            first_match(&patterns, &[b"................FATAL:", b"x "]),
            None
        );
    }

    #[test]
    fn a_short_literal_does_not_hide_a_long_one_running_into_the_next_chunk() {
        // The prefilter finds `f` near the chunk end; `out of me…` began before it and only
        // completes in the next chunk, so the walk must not jump past its start.
        let patterns = compile(&["out of memory", r"f\w"]);
        let chunk = format!("{} out of me", ".".repeat(200));
        assert_eq!(
            first_match(&patterns, &[chunk.as_bytes(), b"mory"]),
            Some((1, 0))
        );
    }

    #[test]
    fn a_skip_resumes_with_the_right_look_behind() {
        let word = compile(&[r"(?-u:\b)stop(?-u:\b)"]);
        assert_eq!(first_match(&word, &[b"nonstop, stops; xstop"]), None);
        assert_eq!(
            first_match(&word, &[b"nonstop, stops; stop."]),
            Some((0, 0))
        );
        assert_eq!(first_match(&word, &[b"nonstop", b"stop"]), None);
        let line = compile(&["(?m)^FATAL: "]);
        assert_eq!(first_match(&line, &[b"xFATAL: a FATAL: "]), None);
        assert_eq!(first_match(&line, &[b"xFATAL: a\nFATAL: "]), Some((0, 0)));
        assert_eq!(
            first_match(&line, &[b"xFATAL: a\n", b"FATAL: "]),
            Some((1, 0))
        );
        let text_start = compile(&[r"\AFATAL: "]);
        assert_eq!(first_match(&text_start, &[b"FATAL: "]), Some((0, 0)));
        let mut scanner = StopScanner::new(text_start);
        assert_eq!(scanner.feed(b"xx FATAL: "), None);
        assert_eq!(scanner.dfa_state, None, "no match is possible any more");
    }

    #[test]
    fn false_candidates_and_unfinished_matches_are_not_lost() {
        // `error\nfatal` and `(?m)^FATAL: .*$` share no literal with most of the text, but
        // "error" and "FATAL" alone are frequent; only the full literal is a candidate.
        let patterns = compile(&[r"error\nfatal", r"(?m)^FATAL: .*$"]);
        let text = b"error[E0308]: x\nFATAL warning\nerror\nfat".repeat(100);
        assert_eq!(first_match(&patterns, &[&text]), None);
        assert_eq!(first_match(&patterns, &[&text, b"al"]), Some((1, 0)));
        assert_eq!(
            first_match(&patterns, &[&text, b"al\nFATAL: x"]),
            Some((1, 0))
        );
        assert_eq!(
            first_match(&patterns, &[b"\nFATAL: abc", &text]),
            Some((0, 1)),
            "a match in progress is decided at the chunk end"
        );
    }

    /// Patterns from a small grammar over `abc`, newlines and the anchors, including a Unicode
    /// `\b` so some sets exercise the fallback.
    fn pattern() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("c".to_owned()),
            Just(r"\n".to_owned()),
            Just(".".to_owned()),
            Just("[ab]".to_owned()),
            Just("[^a]".to_owned()),
            Just("^".to_owned()),
            Just("$".to_owned()),
            Just("(?m:^)".to_owned()),
            Just("(?m:$)".to_owned()),
            Just(r"(?-u:\b)".to_owned()),
            Just(r"\B".to_owned()),
            Just(r"\b".to_owned()),
            Just(r"\A".to_owned()),
            Just(r"\z".to_owned()),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}{b}")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(?:{a}|{b})")),
                inner.clone().prop_map(|a| format!("(?:{a})*")),
                inner.clone().prop_map(|a| format!("(?:{a})+")),
                inner.clone().prop_map(|a| format!("(?:{a})?")),
                inner.prop_map(|a| format!("(?:{a}){{1,3}}")),
            ]
        })
    }

    fn chunks() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let byte = prop_oneof![
            Just(b'a'),
            Just(b'b'),
            Just(b'c'),
            Just(b'\n'),
            Just(b' '),
            Just(0xff),
            Just(0xc3),
            Just(0xa9),
        ];
        proptest::collection::vec(proptest::collection::vec(byte, 0..6), 0..5)
    }

    /// Literal texts for patterns to begin with and haystacks to be made of, each with a piece
    /// of itself, so that a short literal often lies inside a longer one (and is found while
    /// the longer one is still running into the next chunk). A text never starts with a
    /// space: a lone space is too common to be worth a literal search.
    fn literal_texts() -> impl Strategy<Value = Vec<String>> {
        use proptest::sample::Index;
        let text = ("[abc\n][abc\n ]{0,6}", any::<Index>(), any::<Index>());
        proptest::collection::vec(text, 1..4).prop_map(|texts| {
            let mut all = Vec::new();
            for (text, from, len) in texts {
                let from = from.index(text.len());
                let to = from + 1 + len.index(text.len() - from);
                let piece = text[from..to].trim_start_matches(' ');
                if !piece.is_empty() {
                    all.push(piece.to_owned());
                }
                all.push(text);
            }
            all
        })
    }

    /// A pattern that begins (after optional look-behind assertions) with one or two of the
    /// `texts`, possibly case-folded, followed by a tail with look-ahead assertions or one that
    /// never matches.
    fn literal_prefixed_pattern(texts: Vec<String>) -> impl Strategy<Value = String> {
        let text = proptest::sample::select(texts);
        let literal = (text, any::<bool>()).prop_map(|(text, fold_case)| {
            let flags = if fold_case { "i" } else { "" };
            format!("(?{flags}:{})", regex::escape(&text))
        });
        let literals = proptest::collection::vec(literal, 1..3)
            .prop_map(|alternatives| format!("(?:{})", alternatives.join("|")));
        let assertion = prop_oneof![
            Just(""),
            Just("^"),
            Just("(?m:^)"),
            Just(r"(?-u:\b)"),
            Just(r"(?-u:\B)"),
            Just(r"\A"),
            Just(r"(?m:^)(?-u:\b)"),
        ];
        let rest = prop_oneof![
            // Never matches these haystacks, and too large a class for the literal to go on:
            // a candidate that never becomes a match.
            4 => Just("[0-9D-Z]"),
            1 => Just(""),
            1 => Just("$"),
            1 => Just("(?m:$)"),
            1 => Just(r"(?-u:\b)"),
            1 => Just(r"\z"),
            1 => Just(r"b*\n(?m:^)c"),
            1 => Just(r"[^\n]*(?m:$)"),
            1 => Just(r"(?:a|b)+(?-u:\b)"),
            1 => Just(r"(?-u:\B)c?$"),
        ];
        (assertion, literals, rest)
            .prop_map(|(assertion, literals, rest)| format!("{assertion}{literals}{rest}"))
    }

    /// A haystack of the `texts`, whole or cut short, and noise over the same alphabet, cut
    /// into chunks at random places (so literals straddle chunk seams).
    fn chunked_haystack(texts: Vec<String>) -> impl Strategy<Value = Vec<Vec<u8>>> {
        let text = (
            proptest::sample::select(texts),
            any::<proptest::sample::Index>(),
        )
            .prop_map(|(text, cut)| {
                let keep = if cut.index(3) == 0 {
                    cut.index(text.len() + 1)
                } else {
                    text.len()
                };
                text.as_bytes()[..keep].to_vec()
            });
        let noise = proptest::collection::vec(
            prop_oneof![
                Just(b'a'),
                Just(b'b'),
                Just(b'c'),
                Just(b'\n'),
                Just(b' '),
                Just(b'x'),
                Just(b'B'),
            ],
            1..8,
        );
        let piece = prop_oneof![
            3 => text,
            2 => noise,
            1 => proptest::collection::vec(Just(b'x'), 1..40),
        ];
        let haystack = proptest::collection::vec(piece, 0..30).prop_map(|pieces| pieces.concat());
        (
            haystack,
            proptest::collection::vec(any::<proptest::sample::Index>(), 0..10),
        )
            .prop_map(|(haystack, cuts)| {
                let mut cuts: Vec<usize> = cuts
                    .iter()
                    .map(|cut| cut.index(haystack.len() + 1))
                    .collect();
                cuts.sort_unstable();
                let mut chunks = Vec::new();
                let mut from = 0;
                for cut in cuts.into_iter().chain([haystack.len()]) {
                    chunks.push(haystack[from..cut].to_vec());
                    from = cut;
                }
                chunks
            })
    }

    /// Literal-prefixed patterns (1 to 6, so that both one search per pattern and one shared
    /// search occur) and a chunked haystack full of their literals and near misses.
    fn literal_patterns_and_chunks() -> impl Strategy<Value = (Vec<String>, Vec<Vec<u8>>)> {
        literal_texts().prop_flat_map(|texts| {
            (
                proptest::collection::vec(literal_prefixed_pattern(texts.clone()), 1..7),
                chunked_haystack(texts),
            )
        })
    }

    /// Two patterns whose literals overlap, and output in which the longer one is cut by the
    /// seam between two chunks while the shorter one, which never becomes a match, lies wholly
    /// in the first chunk after the longer one's start.
    fn literal_cut_by_a_seam() -> impl Strategy<Value = (Vec<String>, Vec<Vec<u8>>)> {
        use proptest::sample::Index;
        (
            "[abc\n][abc\n ]{1,8}",
            any::<Index>(),
            any::<Index>(),
            any::<Index>(),
            "[abc\n x]{0,40}",
            "[abc\n x]{0,10}",
        )
            .prop_map(|(long, from, len, cut, before, after)| {
                let from = from.index(long.len());
                let to = from + 1 + len.index(long.len() - from);
                let short = &long[from..to];
                let patterns = vec![
                    regex::escape(&long),
                    format!("{}[0-9D-Z]", regex::escape(short)),
                ];
                let cut = 1 + cut.index(long.len() - 1);
                let chunks = vec![
                    format!("{before}{}", &long[..cut]).into_bytes(),
                    format!("{}{after}", &long[cut..]).into_bytes(),
                ];
                (patterns, chunks)
            })
    }

    /// The reference for the literal skips: the same DFA walked one transition per byte, with no
    /// skipping of any kind, peeking at end of input after every chunk like `feed`.
    fn byte_by_byte_verdict(dfa: &StreamingDfa, chunks: &[Vec<u8>]) -> Option<(usize, usize)> {
        let mut state = dfa.start;
        for (step, chunk) in chunks.iter().enumerate() {
            let mut lowest = LowestMatch::default();
            for &byte in chunk {
                state = dfa.table.next_state(state, byte);
                dfa.record_matches(state, &mut lowest);
            }
            dfa.record_matches(dfa.table.next_eoi_state(state), &mut lowest);
            if let Some(index) = lowest.0 {
                return Some((step, index));
            }
        }
        let mut lowest = LowestMatch::default();
        dfa.record_matches(dfa.table.next_eoi_state(state), &mut lowest);
        lowest.0.map(|index| (chunks.len(), index))
    }

    /// What the original computed: after each chunk, the lowest-index pattern that matches
    /// anywhere in everything received so far.
    fn whole_history_verdict(patterns: &[String], chunks: &[Vec<u8>]) -> Option<(usize, usize)> {
        let regexes: Vec<Regex> = patterns.iter().map(|p| Regex::new(p).unwrap()).collect();
        let lowest_in = |history: &[u8]| regexes.iter().position(|re| re.is_match(history));
        let mut history = Vec::new();
        for (step, chunk) in chunks.iter().enumerate() {
            history.extend_from_slice(chunk);
            if let Some(index) = lowest_in(&history) {
                return Some((step, index));
            }
        }
        if chunks.is_empty() {
            return lowest_in(&history).map(|index| (0, index));
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn streaming_equals_searching_the_whole_history(
            patterns in proptest::collection::vec(pattern(), 1..4),
            chunks in chunks(),
        ) {
            let compiled = Arc::new(StopPatterns::compile(&patterns).unwrap());
            let slices: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(
                first_match(&compiled, &slices),
                whole_history_verdict(&patterns, &chunks),
                "fallbacks: {:?}", compiled.fallback_patterns()
            );
        }

        #[test]
        fn literal_skips_never_change_the_verdict(
            (patterns, chunks) in literal_patterns_and_chunks(),
        ) {
            let compiled = Arc::new(StopPatterns::compile(&patterns).unwrap());
            let dfa = compiled.streaming.as_ref().unwrap();
            prop_assert!(compiled.fallback_patterns().is_empty());
            prop_assert!(dfa.skip.is_some());
            let slices: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            let verdict = first_match(&compiled, &slices);
            prop_assert_eq!(verdict, byte_by_byte_verdict(dfa, &chunks));
            prop_assert_eq!(verdict, whole_history_verdict(&patterns, &chunks));
        }

        #[test]
        fn a_literal_cut_by_a_seam_is_never_skipped(
            (patterns, chunks) in literal_cut_by_a_seam(),
        ) {
            let compiled = Arc::new(StopPatterns::compile(&patterns).unwrap());
            let dfa = compiled.streaming.as_ref().unwrap();
            let slices: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
            let verdict = first_match(&compiled, &slices);
            prop_assert_eq!(verdict, byte_by_byte_verdict(dfa, &chunks));
            prop_assert_eq!(verdict, whole_history_verdict(&patterns, &chunks));
        }

        #[test]
        fn compile_and_scan_never_panic(
            patterns in proptest::collection::vec("[abc.*+?|()\\[\\]{}^$\\\\0-2AzBbu:-]{0,10}", 0..3),
            chunks in chunks(),
        ) {
            if let Ok(compiled) = StopPatterns::compile(&patterns) {
                let slices: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
                first_match(&Arc::new(compiled), &slices);
            }
        }
    }
}
