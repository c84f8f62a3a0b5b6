//! The handler's live console: agent output echoed to the handler's own stdout and stderr, and
//! on a terminal one transient line (a sign of life while the agent is silent) that the next
//! output erases.
//!
//! Writing to a terminal, pipe or file can block for as long as the reader or the disk
//! pleases, so the writes happen on a [`WriteThread`] of their own, never on a runtime worker.
//! The null device cannot block (nothing is written anywhere), so a stream going there is
//! written inline without the thread hop.
//!
//! The transient line is written by the same thread as the output, so the two never
//! interleave: it is drawn only where the terminal's cursor is at the start of a line (never
//! over a line the agent has not finished), cut to the terminal's width so it never wraps,
//! and erased (`\r`, erase line) before anything else is written to the terminal. A *note*
//! (the agent's status changing) is a whole line for a person at the terminal: it starts on
//! a line of its own, after the agent's unfinished line if there is one, and is not written
//! when stderr is not a terminal.

use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::Arc;

use nix::sys::stat::{SFlag, fstat, makedev};
use tokio::sync::oneshot;

use super::write_thread::{Sink, WriteThread};
use crate::domain::output_stream::OutputStream;

/// Carriage return, then erase the whole line: the cursor ends at its start.
const ERASE_LINE: &[u8] = b"\r\x1b[2K";

/// What one console job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// Output for the handler's stdout or stderr.
    Write(OutputStream),
    /// Draw the transient line (the job's bytes, one line of text without a line break).
    ShowTransient,
    /// Erase the transient line if it is shown.
    ClearTransient,
    /// A whole line on a terminal's stderr (the job's bytes, ending with a line break).
    Note,
}

/// The handler's stdout and stderr, each written and flushed as a whole buffer, and the
/// terminal state the transient line needs.
struct HandlerStreams {
    stdout_terminal: bool,
    stderr_terminal: bool,
    /// The transient line is on the screen (on stderr).
    transient_shown: bool,
    /// The terminal's cursor is at the start of a line: the last byte written to it was a
    /// line break (or nothing was written yet).
    at_line_start: bool,
}

impl HandlerStreams {
    fn is_terminal(&self, stream: OutputStream) -> bool {
        match stream {
            OutputStream::Stdout => self.stdout_terminal,
            OutputStream::Stderr => self.stderr_terminal,
        }
    }

    fn erase_transient(&mut self) -> io::Result<()> {
        if self.transient_shown {
            self.transient_shown = false;
            write_to(OutputStream::Stderr, ERASE_LINE)?;
        }
        Ok(())
    }
}

impl Sink<Job> for HandlerStreams {
    fn write(&mut self, job: Job, bytes: &[u8]) -> io::Result<()> {
        match job {
            Job::Write(stream) => {
                if self.is_terminal(stream) {
                    self.erase_transient()?;
                    if let Some(last) = bytes.last() {
                        self.at_line_start = *last == b'\n';
                    }
                }
                write_to(stream, bytes)
            }
            Job::ShowTransient => {
                if !self.stderr_terminal || !self.at_line_start {
                    return Ok(());
                }
                let width = console::Term::stderr()
                    .size_checked()
                    .map_or(80, |(_, columns)| usize::from(columns));
                let text = String::from_utf8_lossy(bytes);
                // One column spare: a line that fills the width would leave the cursor in the
                // next line on some terminals, and the erase would miss it.
                let line = console::truncate_str(&text, width.saturating_sub(1), "…");
                let mut drawn = ERASE_LINE.to_vec();
                drawn.extend_from_slice(line.as_bytes());
                self.transient_shown = true;
                write_to(OutputStream::Stderr, &drawn)
            }
            Job::ClearTransient => self.erase_transient(),
            Job::Note => {
                if !self.stderr_terminal {
                    return Ok(());
                }
                self.erase_transient()?;
                if !self.at_line_start {
                    write_to(OutputStream::Stderr, b"\n")?;
                }
                self.at_line_start = bytes.last() == Some(&b'\n');
                write_to(OutputStream::Stderr, bytes)
            }
        }
    }
}

/// The console thread; dropping this lets the thread end.
pub(crate) struct Console {
    thread: WriteThread<Job>,
    stdout_inline: bool,
    stderr_inline: bool,
    /// The agent's stdout goes to the handler's stderr (`run --json` keeps stdout for its
    /// result object).
    stdout_to_stderr: bool,
}

impl Console {
    pub(crate) fn start(stdout_to_stderr: bool) -> io::Result<Self> {
        let streams = HandlerStreams {
            stdout_terminal: io::stdout().is_terminal(),
            stderr_terminal: io::stderr().is_terminal(),
            transient_shown: false,
            at_line_start: true,
        };
        Ok(Self {
            thread: WriteThread::start("ash-console", streams)?,
            stdout_inline: is_null_device(&io::stdout()),
            stderr_inline: is_null_device(&io::stderr()),
            stdout_to_stderr,
        })
    }

    /// Queues `bytes` for `stream`; the receiver yields the result once they are written.
    pub(crate) fn submit(
        &self,
        stream: OutputStream,
        bytes: Arc<Vec<u8>>,
    ) -> oneshot::Receiver<io::Result<()>> {
        let stream = match stream {
            OutputStream::Stdout if self.stdout_to_stderr => OutputStream::Stderr,
            other => other,
        };
        let inline = match stream {
            OutputStream::Stdout => self.stdout_inline,
            OutputStream::Stderr => self.stderr_inline,
        };
        if inline {
            let (done, written) = oneshot::channel();
            let _ = done.send(write_to(stream, &bytes));
            return written;
        }
        self.thread.submit(Job::Write(stream), bytes)
    }

    /// Draws `line` as the transient line on stderr, replacing the one shown, when stderr is
    /// a terminal whose cursor is at the start of a line; the next output erases it.
    pub(crate) fn show_transient(&self, line: String) -> oneshot::Receiver<io::Result<()>> {
        self.thread
            .submit(Job::ShowTransient, Arc::new(line.into_bytes()))
    }

    /// Writes `line` (with its line break) on stderr when it is a terminal, on a line of its
    /// own; nothing otherwise.
    pub(crate) fn note(&self, line: String) -> oneshot::Receiver<io::Result<()>> {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        self.thread.submit(Job::Note, Arc::new(bytes))
    }

    /// Erases the transient line, if one is shown.
    pub(crate) fn clear_transient(&self) -> oneshot::Receiver<io::Result<()>> {
        self.thread
            .submit(Job::ClearTransient, Arc::new(Vec::new()))
    }
}

fn write_to(stream: OutputStream, bytes: &[u8]) -> io::Result<()> {
    match stream {
        OutputStream::Stdout => write_flush(&mut io::stdout().lock(), bytes),
        OutputStream::Stderr => write_flush(&mut io::stderr().lock(), bytes),
    }
}

fn write_flush(sink: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    sink.write_all(bytes)?;
    sink.flush()
}

/// True for the null device (character device 1:3), whose writes go nowhere and never wait.
fn is_null_device(stream: &impl AsFd) -> bool {
    match fstat(stream.as_fd()) {
        Ok(stat) => {
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            kind == SFlag::S_IFCHR && stat.st_rdev == makedev(1, 3)
        }
        Err(_) => false,
    }
}
