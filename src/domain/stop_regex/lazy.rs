//! The NFA path's automaton: sets of Thompson-NFA threads determinized lazily into a bounded
//! cache, with the assertions holding at each position (computed by `regex-automata`'s own
//! `LookMatcher`, which a Unicode `\b` needs) as an extra input. A full cache is cleared and
//! refilled from the current state, so an exponential pattern costs time, not memory.

use std::collections::HashMap;
use std::mem;

use regex_automata::nfa::thompson::{NFA, State};
use regex_automata::util::look::{Look, LookSet};
use regex_automata::util::primitives::StateID;

/// The compiled NFA and what the lazy states need to know about it; shared by every scanner.
pub(super) struct NfaProgram {
    pub(super) nfa: NFA,
    /// NFA pattern id → index into the caller's pattern list.
    pub(super) pattern_indices: Vec<usize>,
    /// Heap the cached states of one scanner may use before they are cleared.
    pub(super) cache_budget: usize,
}

/// A state of the lazy automaton, valid until the cache is next cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LazyId(u32);

impl LazyId {
    /// No match in progress (no threads). Always the first state, also after a clear.
    pub(super) const IDLE: LazyId = LazyId(0);

    fn index(self) -> usize {
        self.0 as usize
    }
}

/// One state's transitions under one set of holding assertions.
#[derive(Clone, Copy, Debug)]
pub(super) struct Row {
    /// The assertions that hold at the position, among those the state can reach.
    looks: LookSet,
    /// Where its transitions start in `LazyStates::transitions`.
    base: usize,
    /// The lowest caller index among the patterns whose match ends at the position.
    pub(super) lowest_match: Option<usize>,
}

/// A transition not computed yet.
const UNKNOWN: u32 = u32::MAX;

/// In `LazyStates::plain_rows`: the state has no plain row (yet).
const NOT_PLAIN: u32 = u32::MAX;

/// The cached states of one scanner.
pub(super) struct LazyStates {
    states: Vec<LazyState>,
    /// Per state, the base of its only row if it is "plain": it reaches no assertion and ends
    /// no match, so the hot path walks it like a DFA, two lookups per byte.
    plain_rows: Vec<u32>,
    by_threads: HashMap<Box<[StateID]>, LazyId>,
    /// The rows' transitions, one entry per byte class, `UNKNOWN` until computed.
    transitions: Vec<u32>,
    /// Entries per row: the number of byte classes (and one unused end-of-input class).
    stride: usize,
    /// Heap the states, rows and index use, as counted against the budget.
    memory: usize,
    /// A state the caller holds on to across clears (the real position during a peek), renumbered
    /// when the cache is cleared.
    pub(super) pinned: Option<LazyId>,
    /// For tests.
    clears: usize,
    scratch: Scratch,
}

struct LazyState {
    /// The NFA states reached by the previous byte, before following epsilon transitions;
    /// sorted, so that equal sets are equal states.
    threads: Box<[StateID]>,
    /// The assertions the epsilon closure can reach from here: only these decide the row.
    reachable_looks: LookSet,
    /// Usually one (no assertion reachable) or two (one assertion, holding or not).
    rows: Vec<Row>,
}

impl LazyStates {
    pub(super) fn new(program: &NfaProgram) -> Self {
        let mut states = Self {
            states: Vec::new(),
            plain_rows: Vec::new(),
            by_threads: HashMap::new(),
            transitions: Vec::new(),
            stride: program.nfa.byte_classes().alphabet_len(),
            memory: 0,
            pinned: None,
            clears: 0,
            scratch: Scratch::new(program.nfa.states().len()),
        };
        states.intern(program, &[]);
        states
    }

    /// The state after `byte` from `state` if `state` is plain and that transition is known:
    /// the hot path. `None` sends the caller to `row` and `next`.
    #[inline]
    pub(super) fn next_if_plain(
        &self,
        program: &NfaProgram,
        state: LazyId,
        byte: u8,
    ) -> Option<LazyId> {
        let base = self.plain_rows[state.index()];
        if base == NOT_PLAIN {
            return None;
        }
        let slot = base as usize + usize::from(program.nfa.byte_classes().get(byte));
        match self.transitions[slot] {
            UNKNOWN => None,
            next => Some(LazyId(next)),
        }
    }

    /// The row of `state` for the assertions that hold at `at` in `haystack`; `haystack` must
    /// hold the text's bytes for up to four bytes on either side of `at`, and end where the
    /// text ends if it ends within that reach. May clear the cache, renumbering `state`.
    #[inline]
    pub(super) fn row(
        &mut self,
        program: &NfaProgram,
        state: &mut LazyId,
        haystack: &[u8],
        at: usize,
    ) -> Row {
        let entry = &self.states[state.index()];
        let looks = holding(program, entry.reachable_looks, haystack, at);
        match entry.rows.iter().find(|row| row.looks == looks) {
            Some(&row) => row,
            None => self.add_row(program, state, looks),
        }
    }

    /// The state after `byte` from `state` under `row` (which `row` returned for `state`). May
    /// clear the cache; the returned state is valid either way.
    #[inline]
    pub(super) fn next(
        &mut self,
        program: &NfaProgram,
        state: LazyId,
        row: Row,
        byte: u8,
    ) -> LazyId {
        let slot = row.base + usize::from(program.nfa.byte_classes().get(byte));
        match self.transitions[slot] {
            UNKNOWN => self.compute_next(program, state, row, byte, slot),
            next => LazyId(next),
        }
    }

    #[cold]
    #[inline(never)]
    fn add_row(&mut self, program: &NfaProgram, state: &mut LazyId, looks: LookSet) -> Row {
        if self.memory > program.cache_budget {
            *state = self.clear_keeping(program, *state);
        }
        let Self {
            states, scratch, ..
        } = self;
        let entry = &mut states[state.index()];
        let (_, lowest_match) = scratch.close(program, &entry.threads, looks);
        let row = Row {
            looks,
            base: self.transitions.len(),
            lowest_match,
        };
        entry.rows.push(row);
        if entry.reachable_looks.is_empty() && lowest_match.is_none() {
            // Bases stay far below `NOT_PLAIN`: the budget clears the cache long before.
            self.plain_rows[state.index()] = u32::try_from(row.base).unwrap_or(NOT_PLAIN);
        }
        self.transitions.resize(row.base + self.stride, UNKNOWN);
        self.memory += self.stride * mem::size_of::<u32>() + mem::size_of::<Row>();
        row
    }

    #[cold]
    #[inline(never)]
    fn compute_next(
        &mut self,
        program: &NfaProgram,
        state: LazyId,
        row: Row,
        byte: u8,
        slot: usize,
    ) -> LazyId {
        self.scratch
            .close(program, &self.states[state.index()].threads, row.looks);
        let threads = self.scratch.step(program, byte);
        let next = self.intern(program, &threads);
        self.scratch.next = threads;
        if self.memory > program.cache_budget || self.states.len() >= UNKNOWN as usize {
            // `row` belongs to the old cache: the transition is simply not remembered.
            return self.clear_keeping(program, next);
        }
        self.transitions[slot] = next.0;
        next
    }

    fn intern(&mut self, program: &NfaProgram, threads: &[StateID]) -> LazyId {
        if let Some(&id) = self.by_threads.get(threads) {
            return id;
        }
        // Below `UNKNOWN` (checked by the caller before the next state is added).
        let id = LazyId(self.states.len() as u32);
        // Passing every assertion, the closure meets all it can reach.
        let (reachable_looks, _) = self.scratch.close(program, threads, LookSet::full());
        self.states.push(LazyState {
            threads: threads.into(),
            reachable_looks,
            rows: Vec::new(),
        });
        self.plain_rows.push(NOT_PLAIN);
        self.by_threads.insert(threads.into(), id);
        // The threads are stored twice (state and index), plus the index entry and the state.
        self.memory += 2 * mem::size_of_val(threads)
            + mem::size_of::<(Box<[StateID]>, LazyId)>()
            + mem::size_of::<LazyState>()
            + mem::size_of::<u32>();
        id
    }

    /// Forgets every state but `IDLE`, the pinned one and `keep`, whose new id it returns.
    fn clear_keeping(&mut self, program: &NfaProgram, keep: LazyId) -> LazyId {
        let pinned = self
            .pinned
            .map(|pinned| self.states[pinned.index()].threads.clone());
        let keep = mem::take(&mut self.states[keep.index()].threads);
        self.states.clear();
        self.plain_rows.clear();
        self.by_threads.clear();
        self.transitions.clear();
        self.memory = 0;
        self.clears += 1;
        self.intern(program, &[]);
        self.pinned = pinned.map(|threads| self.intern(program, &threads));
        self.intern(program, &keep)
    }
}

/// The assertions among `reachable` that hold at `at` in `haystack`.
#[inline]
fn holding(program: &NfaProgram, reachable: LookSet, haystack: &[u8], at: usize) -> LookSet {
    let mut holds = LookSet::empty();
    if reachable.is_empty() {
        return holds;
    }
    // Between ASCII bytes (or the text's ends) a codepoint is a byte, so a Unicode word
    // assertion is its ASCII twin, which needs no UTF-8 decoding or Unicode table search.
    let ascii_around = at
        .checked_sub(1)
        .is_none_or(|before| haystack[before].is_ascii())
        && haystack.get(at).is_none_or(u8::is_ascii);
    for look in reachable.iter() {
        let evaluated = if ascii_around { ascii_twin(look) } else { look };
        if program.nfa.look_matcher().matches(evaluated, haystack, at) {
            holds.set_insert(look);
        }
    }
    holds
}

/// The ASCII form of a Unicode word assertion; any other assertion unchanged.
fn ascii_twin(look: Look) -> Look {
    match look {
        Look::WordUnicode => Look::WordAscii,
        Look::WordUnicodeNegate => Look::WordAsciiNegate,
        Look::WordStartUnicode => Look::WordStartAscii,
        Look::WordEndUnicode => Look::WordEndAscii,
        Look::WordStartHalfUnicode => Look::WordStartHalfAscii,
        Look::WordEndHalfUnicode => Look::WordEndHalfAscii,
        other => other,
    }
}

/// Working memory for walking the NFA's epsilon transitions, reused for every computation.
struct Scratch {
    /// Visited in the current walk iff equal to `generation`; one entry per NFA state.
    marks: Vec<u32>,
    generation: u32,
    stack: Vec<StateID>,
    /// The byte-consuming NFA states of the last closure.
    closure: Vec<StateID>,
    /// The threads after a byte; kept only to reuse its allocation.
    next: Vec<StateID>,
}

impl Scratch {
    fn new(nfa_states: usize) -> Self {
        Self {
            marks: vec![0; nfa_states],
            generation: 0,
            stack: Vec::new(),
            closure: Vec::new(),
            next: Vec::new(),
        }
    }

    /// The next state of the walk not visited yet.
    fn pop_unvisited(&mut self) -> Option<StateID> {
        while let Some(id) = self.stack.pop() {
            let mark = &mut self.marks[id.as_usize()];
            if *mark != self.generation {
                *mark = self.generation;
                return Some(id);
            }
        }
        None
    }

    /// Follows the epsilon transitions from `threads` and the pattern starts, passing a
    /// look-around only if it is in `holds`. Leaves the byte-consuming states in `closure` and
    /// returns the assertions met and the lowest caller index among the patterns whose match
    /// state it reached.
    fn close(
        &mut self,
        program: &NfaProgram,
        threads: &[StateID],
        holds: LookSet,
    ) -> (LookSet, Option<usize>) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.marks.fill(0);
            self.generation = 1;
        }
        self.stack.clear();
        // The pattern starts join at every position: the search is unanchored. A pattern that
        // begins with `\A` dies at once anywhere but at the start of the text.
        self.stack.push(program.nfa.start_anchored());
        self.stack.extend_from_slice(threads);
        self.closure.clear();
        let mut looks = LookSet::empty();
        let mut lowest: Option<usize> = None;
        while let Some(id) = self.pop_unvisited() {
            match program.nfa.state(id) {
                State::ByteRange { .. } | State::Sparse(_) | State::Dense(_) => {
                    self.closure.push(id);
                }
                State::Look { look, next } => {
                    looks.set_insert(*look);
                    if holds.contains(*look) {
                        self.stack.push(*next);
                    }
                }
                State::Union { alternates } => self.stack.extend_from_slice(alternates),
                State::BinaryUnion { alt1, alt2 } => self.stack.extend([*alt1, *alt2]),
                State::Capture { next, .. } => self.stack.push(*next),
                State::Fail => {}
                State::Match { pattern_id } => {
                    if let Some(&index) = program.pattern_indices.get(pattern_id.as_usize()) {
                        lowest = Some(lowest.map_or(index, |lowest| lowest.min(index)));
                    }
                }
            }
        }
        (looks, lowest)
    }

    /// The threads after `byte` from the last closure: sorted, without duplicates.
    fn step(&mut self, program: &NfaProgram, byte: u8) -> Vec<StateID> {
        let mut next = mem::take(&mut self.next);
        next.clear();
        for &id in &self.closure {
            let target = match program.nfa.state(id) {
                State::ByteRange { trans } => trans.matches_byte(byte).then_some(trans.next),
                State::Sparse(sparse) => sparse.matches_byte(byte),
                State::Dense(dense) => dense.matches_byte(byte),
                _ => None,
            };
            next.extend(target);
        }
        next.sort_unstable();
        next.dedup();
        next
    }
}

#[cfg(test)]
impl LazyStates {
    pub(super) fn clears(&self) -> usize {
        self.clears
    }

    pub(super) fn memory(&self) -> usize {
        self.memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::nfa::thompson::NFA;
    use regex_automata::util::look::LookMatcher;

    #[test]
    fn unicode_word_assertions_equal_their_ascii_twins_between_ascii_bytes() {
        let matcher = LookMatcher::new();
        let unicode = [
            Look::WordUnicode,
            Look::WordUnicodeNegate,
            Look::WordStartUnicode,
            Look::WordEndUnicode,
            Look::WordStartHalfUnicode,
            Look::WordEndHalfUnicode,
        ];
        let ascii: Vec<u8> = (0..=0x7f).collect();
        for &before in &ascii {
            for &after in &ascii {
                let haystack = [before, after];
                for at in 0..=2 {
                    for look in unicode {
                        assert_eq!(
                            matcher.matches(look, &haystack, at),
                            matcher.matches(ascii_twin(look), &haystack, at),
                            "{look:?} at {at} in {haystack:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_twin_is_not_used_next_to_a_multibyte_codepoint() {
        let program = NfaProgram {
            nfa: NFA::new(r"\bx").unwrap(),
            pattern_indices: vec![0],
            cache_budget: 1 << 20,
        };
        let reachable = LookSet::singleton(Look::WordUnicode);
        // `é` is a word character: no boundary before `x`, though ASCII rules would see one.
        let text = "éx".as_bytes();
        assert!(holding(&program, reachable, text, 2).is_empty());
        assert!(!holding(&program, reachable, b" x", 1).is_empty());
    }
}
