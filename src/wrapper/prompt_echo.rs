//! Replacing a launcher's echo of the prompt with a one-line note.
//!
//! `codex exec` without `--json` prints `user` and then the whole prompt on stderr. The prompt
//! is the handler's 6–7 KB worker protocol, so the echo repeated it on the console and in every
//! transcript, and a stop regex could match the handler's own instructions ("Do not run git
//! commit, …"). The wrapper knows the exact prompt it sent, so it recognises the echo exactly:
//! the prompt's bytes, starting at a line start. The first echo becomes one note; the line end
//! right after it (the echo's own) goes with it. Nothing else is touched.
//!
//! While a possible echo is being matched its bytes are held back (at most the prompt's
//! length); if the match fails, or the stream goes quiet mid-match, they are passed on as
//! they were.

use std::borrow::Cow;

use memchr::memchr;

#[derive(Debug)]
enum State {
    /// Looking for the echo; `at_line_start` says whether the next byte begins a line.
    Scanning { at_line_start: bool },
    /// The first `matched` bytes of the prompt arrived at a line start and are held back.
    Matching { matched: usize },
    /// The echo was just replaced: a line end right after it belongs to it.
    Replaced,
    /// The echo was replaced, or cannot come: everything passes.
    Done,
}

/// A stream filter that replaces the first line-aligned copy of the prompt with a note.
#[derive(Debug)]
pub struct PromptEcho {
    prompt: Vec<u8>,
    /// Shown instead of the echo, with its line end.
    note: Vec<u8>,
    state: State,
}

impl PromptEcho {
    /// `note` is one line, without its line end.
    pub fn new(prompt: Vec<u8>, note: &str) -> Self {
        let state = if prompt.iter().all(u8::is_ascii_whitespace) {
            State::Done
        } else {
            State::Scanning {
                at_line_start: true,
            }
        };
        Self {
            prompt,
            note: format!("{note}\n").into_bytes(),
            state,
        }
    }

    /// Appends what to show for `chunk` to `out`.
    pub fn filter(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut buffer = Cow::Borrowed(chunk);
        let mut at = 0;
        while at < buffer.len() {
            match self.step(&buffer[at..], out) {
                Next::Consumed(len) => at += len,
                Next::Again(bytes) => {
                    buffer = Cow::Owned(bytes);
                    at = 0;
                }
            }
        }
    }

    /// True while bytes of a possible echo are held back.
    pub fn holds(&self) -> bool {
        matches!(self.state, State::Matching { .. })
    }

    /// Passes held bytes on: a match that stalled is not taken for an echo.
    pub fn release(&mut self, out: &mut Vec<u8>) {
        if let State::Matching { matched } = self.state {
            let again = self.give_up(matched, &[], out);
            self.filter(&again, out);
        }
    }

    /// Filters the start of `input`.
    fn step(&mut self, input: &[u8], out: &mut Vec<u8>) -> Next {
        match self.state {
            State::Done => {
                out.extend_from_slice(input);
                Next::Consumed(input.len())
            }
            State::Replaced => {
                self.state = State::Done;
                let own_line_end = [b"\r\n".as_slice(), b"\n"]
                    .into_iter()
                    .find(|end| input.starts_with(end));
                Next::Consumed(own_line_end.map_or(0, <[u8]>::len))
            }
            State::Scanning {
                at_line_start: false,
            } => {
                let len = memchr(b'\n', input).map_or(input.len(), |newline| newline + 1);
                out.extend_from_slice(&input[..len]);
                self.state = State::Scanning {
                    at_line_start: input[..len].ends_with(b"\n"),
                };
                Next::Consumed(len)
            }
            State::Scanning {
                at_line_start: true,
            } => self.match_from(0, input, out),
            State::Matching { matched } => self.match_from(matched, input, out),
        }
    }

    /// Continues a match of the prompt after its first `matched` bytes.
    fn match_from(&mut self, matched: usize, input: &[u8], out: &mut Vec<u8>) -> Next {
        let expected = &self.prompt[matched..];
        let common = expected
            .iter()
            .zip(input)
            .take_while(|(want, got)| want == got)
            .count();
        if common == expected.len() {
            out.extend_from_slice(&self.note);
            self.state = State::Replaced;
            Next::Consumed(common)
        } else if common == input.len() {
            self.state = State::Matching {
                matched: matched + common,
            };
            Next::Consumed(common)
        } else {
            Next::Again(self.give_up(matched, input, out))
        }
    }

    /// The held `matched` bytes and `input` are not an echo starting where the match began:
    /// shows their first byte and returns the rest, to be filtered again from there (another
    /// echo could start at a later line start among them).
    fn give_up(&mut self, matched: usize, input: &[u8], out: &mut Vec<u8>) -> Vec<u8> {
        let mut again = self.prompt[..matched].to_vec();
        again.extend_from_slice(input);
        let Some((&first, rest)) = again.split_first() else {
            self.state = State::Scanning {
                at_line_start: true,
            };
            return Vec::new();
        };
        out.push(first);
        self.state = State::Scanning {
            at_line_start: first == b'\n',
        };
        rest.to_vec()
    }
}

/// What a filtering step did with its input.
enum Next {
    /// Took this many bytes of it.
    Consumed(usize),
    /// Took all of it; these bytes are to be filtered again instead.
    Again(Vec<u8>),
}

#[cfg(test)]
mod tests;
