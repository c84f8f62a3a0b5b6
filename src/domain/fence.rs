//! Markdown code-fence tracking (rules: docs/plan-format.md, "Fences"), shared by the plan parser
//! (fenced headings are examples) and the result-block framer (a fenced tag is a quotation).
//! The tracker is fed raw bytes incrementally and holds a handful of counters, never the text.

use std::sync::LazyLock;

use memchr::{memchr_iter, memmem, memrchr};

#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
#[repr(u8)]
pub(crate) enum FenceChar {
    Backtick = b'`',
    Tilde = b'~',
}

impl FenceChar {
    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            b'`' => Some(Self::Backtick),
            b'~' => Some(Self::Tilde),
            _ => None,
        }
    }

    /// The word used in user-facing messages (`unclosed backtick code fence`).
    pub(crate) fn name(self) -> &'static str {
        self.into()
    }
}

/// A fence that has been opened and not yet closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenFence {
    pub ch: FenceChar,
    /// Length of the opening run; the closer must be at least this long.
    pub len: usize,
    /// 1-based line number of the opening line.
    pub line: usize,
}

/// What a complete line turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineRole {
    /// Ordinary text outside any fence.
    Text,
    /// The line opened a fence.
    FenceOpen,
    /// The line closed the open fence.
    FenceClose,
    /// Ordinary text inside an open fence.
    Fenced,
}

impl LineRole {
    /// Fence delimiters and everything between them: plan structure and result tags ignore
    /// them.
    pub(crate) fn is_fenced(self) -> bool {
        !matches!(self, Self::Text)
    }
}

/// The current, possibly partial, line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineScan {
    Indent(u8),
    /// Inside the run of fence characters.
    Run {
        ch: FenceChar,
        len: usize,
    },
    /// After a run of at least three, while the line may still be a fence line.
    Rest {
        ch: FenceChar,
        len: usize,
    },
    /// Decided: this line cannot open or close a fence.
    Plain,
}

static BACKTICK_RUN: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"```"));

static TILDE_RUN: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"~~~"));

/// The runs of three fence characters of one kind in the bytes being fed, each stretch
/// searched only once.
struct FenceRuns {
    finder: &'static memmem::Finder<'static>,
    /// The last search: from where, and what it found.
    last: Option<(usize, Option<usize>)>,
}

impl FenceRuns {
    fn new(finder: &'static memmem::Finder<'static>) -> Self {
        Self { finder, last: None }
    }

    fn next_at_or_after(&mut self, bytes: &[u8], from: usize) -> Option<usize> {
        match self.last {
            Some((searched_from, found))
                if searched_from <= from && found.is_none_or(|at| at >= from) =>
            {
                found
            }
            _ => {
                let found = self.finder.find(&bytes[from..]).map(|at| from + at);
                self.last = Some((from, found));
                found
            }
        }
    }
}

/// Where the line holding the fence run at `bytes[run]` starts, if the run follows at most
/// three spaces or tabs after a `\n` (a run with no `\n` before it lies on the line being
/// skipped, which is already decided).
fn fence_line_start(bytes: &[u8], run: usize) -> Option<usize> {
    let indent = bytes[..run]
        .iter()
        .rev()
        .take(4)
        .take_while(|&&byte| matches!(byte, b' ' | b'\t'))
        .count();
    let line_start = run - indent;
    (indent <= 3 && line_start > 0 && bytes[line_start - 1] == b'\n').then_some(line_start)
}

#[derive(Clone, Debug)]
pub(crate) struct FenceTracker {
    open: Option<OpenFence>,
    scan: LineScan,
    /// 1-based number of the line currently being fed.
    line: usize,
}

impl FenceTracker {
    pub(crate) fn new() -> Self {
        Self {
            open: None,
            scan: LineScan::Indent(0),
            line: 1,
        }
    }

    /// The fence open at the start of the current line, if any.
    pub(crate) fn open_fence(&self) -> Option<OpenFence> {
        self.open
    }

    pub(crate) fn at_line_start(&self) -> bool {
        matches!(self.scan, LineScan::Indent(0))
    }

    /// Feeds one complete line (without its `\n`) and reports what it was.
    pub(crate) fn classify_line(&mut self, line: &[u8]) -> LineRole {
        debug_assert!(!line.contains(&b'\n'));
        self.read_while_undecided(line, 0);
        self.end_line()
    }

    /// Feeds arbitrary bytes, which may contain any number of line breaks. A line is read byte
    /// by byte only while it may still be a fence line; from there the tracker jumps to the
    /// next line that may be one (a run of three fence characters after at most three spaces
    /// or tabs), counting the lines in between.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let mut runs = [FenceRuns::new(&BACKTICK_RUN), FenceRuns::new(&TILDE_RUN)];
        let mut at = 0;
        while at < bytes.len() {
            at = if self.scan == LineScan::Plain {
                self.skip_to_possible_fence_line(bytes, at, &mut runs)
            } else {
                self.read_while_undecided(bytes, at)
            };
        }
    }

    /// Reads `bytes[from..]` while the current line may still be a fence line; returns where
    /// it no longer can.
    fn read_while_undecided(&mut self, bytes: &[u8], from: usize) -> usize {
        for (index, &byte) in bytes.iter().enumerate().skip(from) {
            if byte == b'\n' {
                self.end_line();
            } else {
                self.step(byte);
                if self.scan == LineScan::Plain {
                    return index + 1;
                }
            }
        }
        bytes.len()
    }

    /// Skips the rest of the current line, which cannot be a fence line, and all following
    /// lines that cannot be either; returns the start of the next line that may be one, or of
    /// the last (possibly partial) line.
    fn skip_to_possible_fence_line(
        &mut self,
        bytes: &[u8],
        from: usize,
        runs: &mut [FenceRuns; 2],
    ) -> usize {
        let mut search_from = from;
        let next_line = loop {
            let next_run = runs
                .iter_mut()
                .filter_map(|runs| runs.next_at_or_after(bytes, search_from))
                .min();
            let Some(run) = next_run else {
                match memrchr(b'\n', &bytes[from..]) {
                    Some(newline) => break from + newline + 1,
                    None => return bytes.len(),
                }
            };
            if let Some(line_start) = fence_line_start(bytes, run) {
                break line_start;
            }
            search_from = run + 1;
        };
        self.line += memchr_iter(b'\n', &bytes[from..next_line]).count();
        self.scan = LineScan::Indent(0);
        next_line
    }

    /// Ends the input: classifies a final line that had no `\n` and returns the fence still
    /// open, if any.
    pub(crate) fn finish(&mut self) -> Option<OpenFence> {
        if !self.at_line_start() {
            self.end_line();
        }
        self.open
    }

    /// Reads one byte of the current line (not its `\n`).
    fn step(&mut self, byte: u8) {
        self.scan = match self.scan {
            LineScan::Plain => LineScan::Plain,
            LineScan::Indent(n) => match byte {
                b' ' | b'\t' if n < 3 => LineScan::Indent(n + 1),
                _ => match FenceChar::from_byte(byte) {
                    // A run may open a fence, or close the open one made of it.
                    Some(ch) if self.open.is_none_or(|open| open.ch == ch) => {
                        LineScan::Run { ch, len: 1 }
                    }
                    _ => LineScan::Plain,
                },
            },
            LineScan::Run { ch, len } if byte == ch as u8 => LineScan::Run { ch, len: len + 1 },
            LineScan::Run { len, .. } if len < 3 => LineScan::Plain,
            LineScan::Run { ch, len } | LineScan::Rest { ch, len } => {
                let may_stay = match self.open {
                    // A possible opener: a backtick fence's info text has no backtick.
                    None => !(ch == FenceChar::Backtick && byte == b'`'),
                    // A possible closer: only whitespace follows the run.
                    Some(_) => matches!(byte, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c'),
                };
                if may_stay {
                    LineScan::Rest { ch, len }
                } else {
                    LineScan::Plain
                }
            }
        };
    }

    fn end_line(&mut self) -> LineRole {
        let role = match (self.open, self.scan) {
            (None, LineScan::Run { ch, len } | LineScan::Rest { ch, len }) if len >= 3 => {
                self.open = Some(OpenFence {
                    ch,
                    len,
                    line: self.line,
                });
                LineRole::FenceOpen
            }
            (Some(open), LineScan::Run { ch, len } | LineScan::Rest { ch, len })
                if ch == open.ch && len >= open.len =>
            {
                self.open = None;
                LineRole::FenceClose
            }
            (Some(_), _) => LineRole::Fenced,
            (None, _) => LineRole::Text,
        };
        self.scan = LineScan::Indent(0);
        self.line += 1;
        role
    }
}

#[cfg(test)]
impl FenceTracker {
    /// 1-based number of the line currently being fed.
    pub(crate) fn line(&self) -> usize {
        self.line
    }
}

#[cfg(test)]
mod tests;
