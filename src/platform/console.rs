//! The handler's live console: agent output echoed to the handler's stdout and stderr on a
//! [`WriteThread`] of its own (a terminal or pipe may block for ever; the null device, which
//! cannot, is written inline), and on a terminal one transient line — a sign of life while the
//! agent is silent — drawn only at the start of a line, cut to the width, erased before
//! anything else is written, and notes (whole lines, only on a terminal).

use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};

use nix::sys::stat::{SFlag, fstat, makedev};
use tokio::sync::oneshot;

use crate::domain::output_stream::OutputStream;

/// Carriage return, then erase the whole line: the cursor ends at its start.
pub(crate) const ERASE_LINE: &[u8] = b"\r\x1b[2K";

/// Columns a line redrawn in place leaves free at the right. A line that reached the last
/// column would leave the cursor where the terminal's two-column `^C` echo wraps to a new
/// row, and the erase that follows would clear that row and leave the line on screen.
const SPARE_COLUMNS: usize = 3;

/// `text` drawn over the current line of stderr's terminal, cut (with `…`) to leave
/// [`SPARE_COLUMNS`] free: the bytes to write. The width is asked each time, so a resized
/// terminal is followed.
pub(crate) fn redrawn_line(text: &str) -> Vec<u8> {
    let width = console::Term::stderr()
        .size_checked()
        .map_or(80, |(_, columns)| usize::from(columns));
    let line = console::truncate_str(text, width.saturating_sub(SPARE_COLUMNS), "…");
    let mut drawn = ERASE_LINE.to_vec();
    drawn.extend_from_slice(line.as_bytes());
    drawn
}

/// Writes `bytes` to stderr and flushes; blocks while the terminal does not take output.
pub(crate) fn write_stderr(bytes: &[u8]) -> io::Result<()> {
    write_to(OutputStream::Stderr, bytes)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    Write(OutputStream),
    /// The job's bytes: one line of text without a line break.
    ShowTransient,
    ClearTransient,
    /// A whole line on a terminal's stderr (the job's bytes, ending with a line break).
    Note,
}

/// The handler's stdout and stderr, and the terminal state the transient line needs.
struct HandlerStreams {
    stdout_terminal: bool,
    stderr_terminal: bool,
    transient_shown: bool,
    /// The last byte written to the terminal was a line break (or nothing was written yet).
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
                let drawn = redrawn_line(&String::from_utf8_lossy(bytes));
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
        let mut streams = HandlerStreams {
            stdout_terminal: io::stdout().is_terminal(),
            stderr_terminal: io::stderr().is_terminal(),
            transient_shown: false,
            at_line_start: true,
        };
        Ok(Self {
            thread: WriteThread::start("ash-console", move |job, bytes| streams.write(job, bytes))?,
            stdout_inline: is_null_device(&io::stdout()),
            stderr_inline: is_null_device(&io::stderr()),
            stdout_to_stderr,
        })
    }

    /// The receiver yields the result once the bytes are written.
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

    pub(crate) fn show_transient(&self, line: String) -> oneshot::Receiver<io::Result<()>> {
        self.thread
            .submit(Job::ShowTransient, Arc::new(line.into_bytes()))
    }

    /// Writes `line` on stderr, on a line of its own, when it is a terminal.
    pub(crate) fn note(&self, line: String) -> oneshot::Receiver<io::Result<()>> {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        self.thread.submit(Job::Note, Arc::new(bytes))
    }

    pub(crate) fn clear_transient(&self) -> oneshot::Receiver<io::Result<()>> {
        self.thread
            .submit(Job::ClearTransient, Arc::new(Vec::new()))
    }
}

/// A thread of its own for writes that can block for good, so no runtime worker stalls on
/// them. The queue is unbounded: the callers bound it (an attempt's output awaits each chunk's
/// result). Writes keep their order, and the thread drops its reference to a buffer before
/// reporting, so the caller can reuse it. Dropping this lets the thread end; it is not joined.
struct WriteThread<T> {
    jobs: Sender<Queued<T>>,
}

/// A write's target, its bytes, and where its result goes.
type Queued<T> = (T, Arc<Vec<u8>>, oneshot::Sender<io::Result<()>>);

impl<T: Send + 'static> WriteThread<T> {
    fn start(
        name: &str,
        mut write: impl FnMut(T, &[u8]) -> io::Result<()> + Send + 'static,
    ) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Queued<T>>();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                for (target, bytes, done) in queue {
                    let result = write(target, &bytes);
                    drop(bytes);
                    let _ = done.send(result);
                }
            })?;
        Ok(Self { jobs })
    }

    /// The receiver yields the result once the bytes are written.
    fn submit(&self, target: T, bytes: Arc<Vec<u8>>) -> oneshot::Receiver<io::Result<()>> {
        let (done, written) = oneshot::channel();
        if let Err(mpsc::SendError((_, _, done))) = self.jobs.send((target, bytes, done)) {
            let _ = done.send(Err(io::Error::other("write thread stopped")));
        }
        written
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn writes_in_order_and_hands_the_buffer_back() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let thread = WriteThread::start("test-writer", move |target: u8, bytes: &[u8]| {
            if target == 0 {
                return Err(io::Error::other("refused"));
            }
            recorded.lock().unwrap().push((target, bytes.to_vec()));
            Ok(())
        })
        .unwrap();
        let bytes = Arc::new(b"first".to_vec());
        thread.submit(1, bytes.clone()).await.unwrap().unwrap();
        assert_eq!(
            Arc::strong_count(&bytes),
            1,
            "the thread let go of the buffer"
        );
        thread
            .submit(2, Arc::new(b"second".to_vec()))
            .await
            .unwrap()
            .unwrap();
        let error = thread.submit(0, Arc::new(Vec::new())).await.unwrap();
        assert_eq!(error.unwrap_err().to_string(), "refused");
        assert_eq!(
            *seen.lock().unwrap(),
            [(1, b"first".to_vec()), (2, b"second".to_vec())]
        );
    }
}
