//! Replacing a launcher's echo of the prompt (its exact bytes at a line start, the first time)
//! with a one-line note: the worker protocol repeated in every transcript, where a stop regex
//! could match the handler's own instructions. A possible echo is held back until it matches
//! or fails, or the stream goes quiet.

use memchr::memchr;

#[derive(Debug)]
enum State {
    Searching,
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
    /// Held back while searching: a prefix of the prompt that began at a line start.
    held: Vec<u8>,
    /// Whether the first held byte, or else the next one, begins a line.
    at_line_start: bool,
}

impl PromptEcho {
    pub fn new(prompt: Vec<u8>, note: &str) -> Self {
        let state = if prompt.iter().all(u8::is_ascii_whitespace) {
            State::Done
        } else {
            State::Searching
        };
        Self {
            prompt,
            note: format!("{note}\n").into_bytes(),
            state,
            held: Vec::new(),
            at_line_start: true,
        }
    }

    pub fn filter(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        match self.state {
            State::Searching => {
                let mut bytes = std::mem::take(&mut self.held);
                bytes.extend_from_slice(chunk);
                self.search(&bytes, out);
            }
            State::Replaced if chunk.is_empty() => {}
            State::Replaced => {
                self.state = State::Done;
                let own_line_end = [b"\r\n".as_slice(), b"\n"]
                    .into_iter()
                    .find(|end| chunk.starts_with(end));
                out.extend_from_slice(&chunk[own_line_end.map_or(0, <[u8]>::len)..]);
            }
            State::Done => out.extend_from_slice(chunk),
        }
    }

    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// Passes held bytes on: a match that stalled is not taken for an echo, though one may
    /// start at a later line start among them.
    pub fn release(&mut self, out: &mut Vec<u8>) {
        let held = std::mem::take(&mut self.held);
        if let Some((&first, rest)) = held.split_first() {
            out.push(first);
            self.at_line_start = first == b'\n';
            self.search(rest, out);
        }
    }

    /// Shows `bytes` up to the echo, which becomes the note, or up to a possible echo at their
    /// end, which is held back.
    fn search(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        while !bytes.is_empty() {
            if !self.at_line_start {
                let len = memchr(b'\n', bytes).map_or(bytes.len(), |newline| newline + 1);
                out.extend_from_slice(&bytes[..len]);
                self.at_line_start = bytes[..len].ends_with(b"\n");
                bytes = &bytes[len..];
                continue;
            }
            let common = self
                .prompt
                .iter()
                .zip(bytes)
                .take_while(|(want, got)| want == got)
                .count();
            if common == self.prompt.len() {
                out.extend_from_slice(&self.note);
                self.state = State::Replaced;
                return self.filter(&bytes[common..], out);
            }
            if common == bytes.len() {
                self.held = bytes.to_vec();
                return;
            }
            // No echo starts here; one may start at a later line start.
            out.push(bytes[0]);
            self.at_line_start = bytes[0] == b'\n';
            bytes = &bytes[1..];
        }
    }
}

#[cfg(test)]
mod tests;
