//! The NFA path: streams the patterns the DFA path cannot take through `lazy.rs`. A position
//! is processed once the [`LOOK_REACH`] bytes after it have arrived, so a seven-byte tail
//! (look-behind and pending positions) crosses each seam; the end-of-chunk peek processes the
//! pending positions as if the text ended there, then forgets that walk.

use std::ops::ControlFlow;

use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::syntax;

use super::LowestMatch;
use super::lazy::{LazyId, LazyStates, NfaProgram};
use super::literals::{ChunkCandidates, LiteralStarts};

/// How far any assertion looks from its position, in bytes, either way (a Unicode `\b`
/// decodes one codepoint back and one forward).
const LOOK_REACH: usize = 4;

/// The most bytes a tail holds: the look-behind of the next position, and the pending ones.
const TAIL_CAPACITY: usize = 2 * LOOK_REACH - 1;

/// The compiled NFA path, shared by every scanner of an invocation.
pub(super) struct StreamingNfa {
    program: NfaProgram,
    literals: Option<LiteralStarts>,
    /// Every pattern begins with `\A`, so nothing can begin after the first byte.
    always_anchored: bool,
}

impl StreamingNfa {
    /// Compiles `patterns[i]` for every `i` in `pattern_indices` into one NFA; each scanner
    /// may cache `cache_budget` bytes of its states. The error is regex-automata's message.
    pub(super) fn build(
        patterns: &[String],
        pattern_indices: Vec<usize>,
        cache_budget: usize,
    ) -> Result<Self, String> {
        let selected: Vec<&str> = pattern_indices
            .iter()
            .filter_map(|&index| patterns.get(index).map(String::as_str))
            .collect();
        // No size limit: `regex` has already built each pattern within its own.
        let syntax = syntax::Config::new().utf8(false);
        let nfa = thompson::Compiler::new()
            .syntax(syntax)
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(WhichCaptures::None),
            )
            .build_many(&selected)
            .map_err(|error| error.to_string())?;
        // `LookMatcher` panics on a Unicode `\b` if the word tables were compiled out; they are
        // in (regex-automata's default features), and this keeps it a refusal if that changes.
        let tables = nfa.look_set_any().available();
        tables.map_err(|error| error.to_string())?;
        Ok(Self {
            literals: LiteralStarts::new(&selected, &syntax),
            always_anchored: nfa.is_always_start_anchored(),
            program: NfaProgram {
                nfa,
                pattern_indices,
                cache_budget,
            },
        })
    }

    pub(super) fn pattern_indices(&self) -> &[usize] {
        &self.program.pattern_indices
    }

    fn first_index(&self) -> Option<usize> {
        self.program.pattern_indices.first().copied()
    }
}

/// One attempt's walk through the NFA path.
pub(super) struct NfaStream {
    states: LazyStates,
    /// The state at `position`.
    current: LazyId,
    /// The text's offset of the next position to process.
    position: u64,
    tail: Tail,
    /// No pattern can match any more.
    dead: bool,
}

impl NfaStream {
    pub(super) fn new(nfa: &StreamingNfa) -> Self {
        Self {
            states: LazyStates::new(&nfa.program),
            current: LazyId::IDLE,
            position: 0,
            tail: Tail::default(),
            dead: false,
        }
    }

    /// Processes the chunk, then peeks at the end of the text so far; records every pattern
    /// that matches on the way.
    pub(super) fn feed(&mut self, nfa: &StreamingNfa, chunk: &[u8], lowest: &mut LowestMatch) {
        if self.dead || lowest.settles(nfa.first_index()) {
            return;
        }
        if self.process_settled(nfa, chunk, lowest).is_break() {
            return;
        }
        if nfa.always_anchored && self.current == LazyId::IDLE && self.position > 0 {
            self.dead = true;
            return;
        }
        self.peek_at_end(nfa, lowest);
    }

    /// Decides the end of the input: the same peek, now final.
    pub(super) fn finish(&mut self, nfa: &StreamingNfa, lowest: &mut LowestMatch) {
        if !self.dead {
            self.peek_at_end(nfa, lowest);
        }
    }

    /// Processes every position whose four bytes of look-ahead have arrived with this chunk,
    /// and keeps the new tail.
    fn process_settled(
        &mut self,
        nfa: &StreamingNfa,
        chunk: &[u8],
        lowest: &mut LowestMatch,
    ) -> ControlFlow<()> {
        // Near the seam, the look-behind of a position reaches into the tail: a small window
        // of the tail and the chunk's first bytes holds everything those positions look at.
        let tail = self.tail;
        let head = &chunk[..chunk.len().min(TAIL_CAPACITY)];
        let mut buffer = [0; 2 * TAIL_CAPACITY];
        let window_len = tail.len + head.len();
        buffer[..tail.len].copy_from_slice(tail.bytes());
        buffer[tail.len..window_len].copy_from_slice(head);
        let window = &buffer[..window_len];
        let seam_end = settled_end(window.len()).min(tail.len + LOOK_REACH);
        self.walk(nfa, window, tail.behind, seam_end, None, lowest)?;

        // From the fifth byte of the chunk on, the chunk itself holds the look-behind.
        let bulk_end = settled_end(chunk.len());
        if bulk_end > LOOK_REACH {
            let mut candidates = nfa
                .literals
                .as_ref()
                .map(|literals| literals.in_chunk(chunk));
            self.walk(
                nfa,
                chunk,
                LOOK_REACH,
                bulk_end,
                candidates.as_mut(),
                lowest,
            )?;
        }

        let pending = (tail.pending() + chunk.len()).min(LOOK_REACH - 1);
        let behind = usize::try_from(self.position).map_or(LOOK_REACH, |p| p.min(LOOK_REACH));
        self.tail = tail.followed_by(chunk, behind, pending);
        ControlFlow::Continue(())
    }

    /// Processes positions `from..to` of `haystack`, which holds the text's bytes for four
    /// bytes around each of them. Breaks once nothing later in the chunk could lower the
    /// verdict.
    fn walk(
        &mut self,
        nfa: &StreamingNfa,
        haystack: &[u8],
        from: usize,
        to: usize,
        mut candidates: Option<&mut ChunkCandidates<'_>>,
        lowest: &mut LowestMatch,
    ) -> ControlFlow<()> {
        if from >= to {
            return ControlFlow::Continue(());
        }
        let program = &nfa.program;
        let mut current = self.current;
        let mut at = from;
        while at < to {
            if current == LazyId::IDLE
                && let Some(candidates) = candidates.as_deref_mut()
            {
                // No match in progress, and every match begins with a literal: nothing before
                // the next candidate can start one.
                at = candidates.next_match_start(at).max(at);
                if at >= to {
                    break;
                }
            }
            let Some(&byte) = haystack.get(at) else {
                break;
            };
            if let Some(next) = self.states.next_if_plain(program, current, byte) {
                current = next;
                at += 1;
                continue;
            }
            let row = self.states.row(program, &mut current, haystack, at);
            if let Some(index) = row.lowest_match {
                lowest.record(index);
                if lowest.settles(nfa.first_index()) {
                    self.current = current;
                    return ControlFlow::Break(());
                }
            }
            current = self.states.next(program, current, row, byte);
            at += 1;
        }
        self.current = current;
        self.position += (to - from) as u64;
        ControlFlow::Continue(())
    }

    /// Processes the pending positions and the end as if the text ended now, recording what
    /// matches, and returns to where it was.
    fn peek_at_end(&mut self, nfa: &StreamingNfa, lowest: &mut LowestMatch) {
        let program = &nfa.program;
        let tail = self.tail;
        let text = tail.bytes();
        self.states.pinned = Some(self.current);
        let mut current = self.current;
        for at in tail.behind..=text.len() {
            let row = self.states.row(program, &mut current, text, at);
            if let Some(index) = row.lowest_match {
                lowest.record(index);
            }
            if let Some(&byte) = text.get(at) {
                current = self.states.next(program, current, row, byte);
            }
        }
        if let Some(pinned) = self.states.pinned.take() {
            self.current = pinned;
        }
    }
}

/// The end (exclusive) of the positions of a haystack of `len` bytes whose look-ahead lies
/// wholly inside it.
fn settled_end(len: usize) -> usize {
    (len + 1).saturating_sub(LOOK_REACH)
}

/// The last bytes of the text so far: up to four of look-behind of the next position to
/// process, then the pending ones (fewer than four), whose look-ahead has not all arrived.
#[derive(Clone, Copy, Default)]
struct Tail {
    buffer: [u8; TAIL_CAPACITY],
    len: usize,
    /// How many of the bytes are look-behind; fewer than four only near the text's start.
    behind: usize,
}

impl Tail {
    fn bytes(&self) -> &[u8] {
        &self.buffer[..self.len]
    }

    fn pending(&self) -> usize {
        self.len - self.behind
    }

    /// The tail of this tail followed by `chunk`: its last `behind + pending` bytes.
    fn followed_by(&self, chunk: &[u8], behind: usize, pending: usize) -> Self {
        let len = behind + pending;
        let from_chunk = len.min(chunk.len());
        let from_self = len - from_chunk;
        let mut buffer = [0; TAIL_CAPACITY];
        buffer[..from_self].copy_from_slice(&self.bytes()[self.len - from_self..]);
        buffer[from_self..len].copy_from_slice(&chunk[chunk.len() - from_chunk..]);
        Self {
            buffer,
            len,
            behind,
        }
    }
}

#[cfg(test)]
impl StreamingNfa {
    pub(super) fn has_literal_searches(&self) -> bool {
        self.literals.is_some()
    }
}

#[cfg(test)]
impl NfaStream {
    pub(super) fn is_dead(&self) -> bool {
        self.dead
    }

    pub(super) fn cache_clears(&self) -> usize {
        self.states.clears()
    }

    pub(super) fn cache_memory(&self) -> usize {
        self.states.memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nfa(patterns: &[&str]) -> StreamingNfa {
        let owned: Vec<String> = patterns.iter().map(|&p| p.to_owned()).collect();
        StreamingNfa::build(&owned, (0..owned.len()).collect(), 2 << 20).unwrap()
    }

    /// Feeds the chunks; the lowest index recorded after each.
    fn verdicts(nfa: &StreamingNfa, chunks: &[&[u8]]) -> Vec<Option<usize>> {
        let mut stream = NfaStream::new(nfa);
        chunks
            .iter()
            .map(|chunk| {
                let mut lowest = LowestMatch::default();
                stream.feed(nfa, chunk, &mut lowest);
                lowest.0
            })
            .collect()
    }

    #[test]
    fn the_tail_keeps_four_bytes_of_look_behind_and_at_most_three_pending() {
        let nfa = nfa(&["never"]);
        let mut stream = NfaStream::new(&nfa);
        let mut lowest = LowestMatch::default();
        stream.feed(&nfa, b"ab", &mut lowest);
        assert_eq!((stream.position, stream.tail.bytes()), (0, &b"ab"[..]));
        stream.feed(&nfa, b"cd", &mut lowest);
        assert_eq!((stream.position, stream.tail.bytes()), (1, &b"abcd"[..]));
        stream.feed(&nfa, b"efghijkl", &mut lowest);
        assert_eq!(stream.position, 9);
        assert_eq!(
            (stream.tail.behind, stream.tail.bytes()),
            (4, &b"fghijkl"[..])
        );
        stream.feed(&nfa, b"m", &mut lowest);
        assert_eq!(stream.position, 10);
        assert_eq!(stream.tail.bytes(), b"ghijklm");
        stream.feed(&nfa, b"", &mut lowest);
        assert_eq!(stream.position, 10);
        assert_eq!(stream.tail.bytes(), b"ghijklm");
        assert_eq!(lowest.0, None);
    }

    #[test]
    fn a_match_within_the_pending_bytes_is_seen_by_the_peek_only() {
        // "ab" is wholly pending (its look-ahead has not arrived): only the peek sees it, and
        // the next chunk decides it again with the byte that really follows.
        let nfa = nfa(&[r"\bab\b"]);
        assert_eq!(verdicts(&nfa, &[b"ab"]), [Some(0)]);
        assert_eq!(verdicts(&nfa, &[b"x ab", b"c"]), [Some(0), None]);
        assert_eq!(
            verdicts(&nfa, &[b"x a", b"bc", b" ab"]),
            [None, None, Some(0)]
        );
    }

    #[test]
    fn a_codepoint_split_three_ways_is_decoded_across_both_seams() {
        // 日 is three bytes, a word character: `x\b` must not hold before it.
        let nfa = nfa(&[r"x\b"]);
        let day = "日".as_bytes();
        assert_eq!(
            verdicts(&nfa, &[b"x", &day[..1], &day[1..2], &day[2..]]),
            [Some(0), Some(0), Some(0), None],
            "while 日 is unfinished, the text so far ends in bytes that are no word character"
        );
    }
}
