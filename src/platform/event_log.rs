//! The event stream file (`events.jsonl`, docs/cli.md): one JSON line per run event, appended
//! whole and flushed (not fsynced) by a thread of its own, rotated to `events.jsonl.1` at its
//! cap; and [`Follower`], which reads it for `watch`. A line may be deferred
//! ([`EventLog::append_at`]): the stream's throttle still writes the last update of a burst.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::no_follow;

enum Job {
    Line(String),
    Deferred(DeferredLine),
    /// Everything before it is written: reply.
    Drained(mpsc::Sender<()>),
}

/// A line held back until `due`, unless another line comes first (then it goes just before
/// that one) or another deferred line replaces it. Its text may carry a time, so it has a
/// form for each way it can be written.
pub(crate) struct DeferredLine {
    pub on_time: String,
    /// Written before another line that comes first (or when the stream ends).
    pub early: String,
    pub due: Instant,
}

/// The appending thread; dropping this lets it end after the queued lines.
pub(crate) struct EventLog {
    jobs: Sender<Job>,
}

impl EventLog {
    /// Starts the thread for `path` (opened on the first line) with a size cap in bytes.
    pub(crate) fn start(path: PathBuf, cap: u64) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("ash-events".into())
            .spawn(move || append_lines(&path, cap, queue))?;
        Ok(Self { jobs })
    }

    /// Queues one line (without its newline).
    pub(crate) fn append(&self, line: String) {
        let _ = self.jobs.send(Job::Line(line));
    }

    pub(crate) fn append_at(&self, line: DeferredLine) {
        let _ = self.jobs.send(Job::Deferred(line));
    }

    /// Waits, at most `limit`, until every queued line is written.
    pub(crate) fn drain(&self, limit: Duration) {
        let (done, drained) = mpsc::channel();
        if self.jobs.send(Job::Drained(done)).is_ok() {
            let _ = drained.recv_timeout(limit);
        }
    }
}

fn append_lines(path: &Path, cap: u64, queue: Receiver<Job>) {
    let mut file: Option<(File, u64)> = None;
    let mut failed = false;
    let mut write = |line: &str| {
        if failed {
            return;
        }
        if let Err(error) = append_line(path, cap, &mut file, line) {
            // The file is an aid, not the record: say so once and stop trying.
            tracing::warn!(path = %path.display(), %error, "file not appended to");
            failed = true;
        }
    };
    let mut deferred: Option<DeferredLine> = None;
    loop {
        let job = match &deferred {
            Some(held) => {
                match queue.recv_timeout(held.due.saturating_duration_since(Instant::now())) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout) => {
                        if let Some(held) = deferred.take() {
                            write(&held.on_time);
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
        };
        // A line still held goes before whatever comes next, unless a newer one replaces it.
        if !matches!(job, Job::Deferred(_))
            && let Some(held) = deferred.take()
        {
            write(&held.early);
        }
        match job {
            Job::Deferred(line) => deferred = Some(line),
            Job::Line(line) => write(&line),
            Job::Drained(done) => {
                let _ = done.send(());
            }
        }
    }
    // The run is over: a line still waiting is the last word on its subject.
    if let Some(held) = deferred {
        write(&held.early);
    }
}

fn append_line(
    path: &Path,
    cap: u64,
    file: &mut Option<(File, u64)>,
    line: &str,
) -> io::Result<()> {
    let needed = line.len() as u64 + 1;
    if let Some((_, written)) = file
        && *written > 0
        && *written + needed > cap
    {
        *file = None;
        rotate(path)?;
    }
    if file.is_none() {
        // Never through a link: a repository could ship `events.jsonl` as one.
        let mut opened = open_append(path)?;
        let mut length = opened.metadata()?.len();
        if length > 0 && length + needed > cap {
            drop(opened);
            rotate(path)?;
            (opened, length) = (open_append(path)?, 0);
        } else if !ends_a_line(&opened) {
            // A torn last line (a writer killed mid-line) is ended first: a record glued to
            // it would be lost with it. Every append is a whole line in one write, so a torn
            // line can only predate this opening.
            opened.write_all(b"\n")?;
            length += 1;
        }
        *file = Some((opened, length));
    }
    if let Some((handle, written)) = file {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        handle.write_all(&bytes)?;
        *written += needed;
    }
    Ok(())
}

/// Why appending to `path` would be refused — it is a symbolic link, or no regular file — or
/// `None` (it is one, or missing: then it is created on the first line).
pub(crate) fn refusal(path: &Path) -> Option<&'static str> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        Some("is a symbolic link, never written through")
    } else if !meta.is_file() {
        Some("is not a regular file")
    } else {
        None
    }
}

/// Whether `file` is empty or ends with a newline (unreadable: taken as ended).
pub(crate) fn ends_a_line(file: &File) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(length) = file.metadata().map(|meta| meta.len()) else {
        return true;
    };
    let mut last = [0u8; 1];
    length == 0
        || file
            .read_at(&mut last, length - 1)
            .map_or(true, |_| last[0] == b'\n')
}

fn open_append(path: &Path) -> io::Result<File> {
    let (dir, name) = no_follow::split(path)?;
    let dir = no_follow::open_dir(dir)?;
    no_follow::open_append_in(&dir, name).map_err(|error| no_follow::refused_link(error, path))
}

fn rotate(path: &Path) -> io::Result<()> {
    let (dir, name) = no_follow::split(path)?;
    let dir = no_follow::open_dir(dir)?;
    no_follow::rename_in(&dir, name, rotated(Path::new(name)).as_os_str())
}

/// `events.jsonl.1` beside `events.jsonl`.
pub(crate) fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// The largest event stream `watch` reads: the runner rotates at 8 MiB (one line more at
/// most), so anything much larger is not a stream it wrote.
pub(crate) const MAX_STREAM_BYTES: u64 = 64 << 20;
/// The longest line kept: longer ones (no runner line is; the summaries are excerpts) are
/// skipped up to the next newline, so memory does not grow with a line.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;
const READ_CHUNK: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub(crate) enum FollowError {
    #[error("{0}")]
    Io(io::Error),
    #[error("is a symbolic link; the event stream is read only from a regular file")]
    Link,
    #[error("not a regular file ({kind})")]
    NotRegular { kind: &'static str },
    #[error(
        "{size} bytes is over the {MAX_STREAM_BYTES}-byte limit (the runner rotates the stream at 8 MiB; this file is not its)"
    )]
    TooLarge { size: u64 },
}

/// One file of the stream being read: where, and which file (a rotation renames it, a
/// deletion unlinks it, and the descriptor still reads it).
struct Source {
    file: File,
    inode: (u64, u64),
    position: u64,
    /// The last bytes read, ending at `position`: if the file no longer holds them there, it
    /// was truncated in place and written again (a copy-truncate that regrew between looks).
    seen: Vec<u8>,
}

/// How many of the last bytes read identify the place in the file.
const SEEN_BYTES: usize = 64;

impl Source {
    /// Whether the file was truncated in place since the last read: shorter than what was
    /// read, or no longer holding the last bytes read where they were.
    fn truncated(&self) -> io::Result<bool> {
        use std::os::unix::fs::FileExt;
        if self.file.metadata()?.len() < self.position {
            return Ok(true);
        }
        if self.seen.is_empty() {
            return Ok(false);
        }
        let mut now = vec![0u8; self.seen.len()];
        let from = self.position - self.seen.len() as u64;
        match self.file.read_exact_at(&mut now, from) {
            Ok(()) => Ok(now != self.seen),
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Ok(true),
            Err(error) => Err(error),
        }
    }

    fn note_read(&mut self, bytes: &[u8]) {
        let keep = bytes.len().min(SEEN_BYTES);
        let drop = (self.seen.len() + keep).saturating_sub(SEEN_BYTES);
        self.seen.drain(..drop.min(self.seen.len()));
        self.seen.extend_from_slice(&bytes[bytes.len() - keep..]);
    }
}

/// Reads the lines appended to an event stream with bounded memory, following it by inode
/// across rotations (twice between two looks: the middle file is `events.jsonl.1`),
/// truncation in place (read again from the start) and deletion (read on). Special files,
/// links and oversized files are refused, a line over [`MAX_LINE_BYTES`] is skipped, and a
/// partial line at the end of a file left behind is dropped, never glued to the next one.
pub(crate) struct Follower {
    path: PathBuf,
    source: Option<Source>,
    partial: Vec<u8>,
    /// Inside a line too long to keep: everything up to the next newline is dropped.
    skipping: bool,
}

impl Follower {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            source: None,
            partial: Vec::new(),
            skipping: false,
        }
    }

    /// Everything the stream holds now — the rotated file's lines, then the current file's —
    /// handed to `line` one at a time, oldest first; afterwards [`Follower::read_new_lines`]
    /// goes on from the end.
    pub(crate) fn catch_up(&mut self, mut line: impl FnMut(String)) -> Result<(), FollowError> {
        let rotated_path = rotated(&self.path);
        if let Some(rotated_inode) = inode_of(&rotated_path)?
            && Some(rotated_inode) != inode_of(&self.path)?
        {
            let mut rotated_source = open_stream(&rotated_path)?;
            self.drain(&mut rotated_source, &mut line)?;
            self.resync();
        }
        self.read_on(&mut line)
    }

    /// Whole lines appended since the last call (possibly none), oldest first.
    pub(crate) fn read_new_lines(&mut self) -> Result<Vec<String>, FollowError> {
        let mut lines = Vec::new();
        self.read_on(&mut |line| lines.push(line))?;
        Ok(lines)
    }

    fn read_on(&mut self, push: &mut impl FnMut(String)) -> Result<(), FollowError> {
        let now = inode_of(&self.path)?;
        let Some(mut source) = self.source.take() else {
            if now.is_some() {
                let mut source = open_stream(&self.path)?;
                self.drain(&mut source, push)?;
                self.source = Some(source);
            }
            return Ok(());
        };
        match now {
            // Deleted (its writer may still append to it), or between a rotation's rename
            // and the new file's creation: read on.
            None => {
                self.drain(&mut source, push)?;
                self.source = Some(source);
            }
            Some(inode) if inode == source.inode => {
                if source.truncated().map_err(FollowError::Io)? {
                    // Truncated in place: what is there now is new.
                    source.position = 0;
                    source.seen.clear();
                    self.resync();
                }
                self.drain(&mut source, push)?;
                self.source = Some(source);
            }
            Some(new_inode) => {
                // Rotated (or replaced): finish the old file, then any file that came and
                // went between two looks (now `events.jsonl.1`), then the new one.
                self.drain(&mut source, push)?;
                self.resync();
                let rotated_path = rotated(&self.path);
                if let Some(middle) = inode_of(&rotated_path)?
                    && middle != source.inode
                    && middle != new_inode
                {
                    let mut middle_source = open_stream(&rotated_path)?;
                    self.drain(&mut middle_source, push)?;
                    self.resync();
                }
                let mut fresh = open_stream(&self.path)?;
                self.drain(&mut fresh, push)?;
                self.source = Some(fresh);
            }
        }
        Ok(())
    }

    /// Forgets a partial line: a file left behind ended in a torn line (its writer died
    /// mid-write, or it was truncated), and what is read next starts a line of its own.
    fn resync(&mut self) {
        self.partial.clear();
        self.skipping = false;
    }

    /// Reads `source` to its end, handing every complete line to `line`.
    fn drain(
        &mut self,
        source: &mut Source,
        line: &mut impl FnMut(String),
    ) -> Result<(), FollowError> {
        use std::io::{Read, Seek, SeekFrom};
        source
            .file
            .seek(SeekFrom::Start(source.position))
            .map_err(FollowError::Io)?;
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let read = match source.file.read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(read) => read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(FollowError::Io(error)),
            };
            source.position += read as u64;
            source.note_read(&chunk[..read]);
            self.split(&chunk[..read], line);
        }
    }

    fn split(&mut self, mut bytes: &[u8], line: &mut impl FnMut(String)) {
        while let Some(end) = memchr::memchr(b'\n', bytes) {
            if self.skipping || self.partial.len() + end > MAX_LINE_BYTES {
                self.skipping = false;
            } else {
                self.partial.extend_from_slice(&bytes[..end]);
                line(String::from_utf8_lossy(&self.partial).into_owned());
            }
            self.partial.clear();
            bytes = &bytes[end + 1..];
        }
        if self.skipping {
            return;
        }
        if self.partial.len() + bytes.len() > MAX_LINE_BYTES {
            self.partial.clear();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }
}

/// The (device, inode) of the file at `path` itself, never through a link; `None` when there
/// is none.
fn inode_of(path: &Path) -> Result<Option<(u64, u64)>, FollowError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(FollowError::Io(error)),
    }
}

/// Opens a stream file without blocking (a FIFO would block a plain `open` for ever), never
/// through a link, and refuses anything but a regular file of a plausible size.
fn open_stream(path: &Path) -> Result<Source, FollowError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|error| {
            if error.raw_os_error() == Some(nix::libc::ELOOP) {
                FollowError::Link
            } else {
                FollowError::Io(error)
            }
        })?;
    let meta = file.metadata().map_err(FollowError::Io)?;
    if !meta.is_file() {
        let kind = if meta.file_type().is_fifo() {
            "a FIFO"
        } else if meta.file_type().is_socket() {
            "a socket"
        } else if meta.file_type().is_char_device() || meta.file_type().is_block_device() {
            "a device"
        } else {
            "a directory"
        };
        return Err(FollowError::NotRegular { kind });
    }
    if meta.len() > MAX_STREAM_BYTES {
        return Err(FollowError::TooLarge { size: meta.len() });
    }
    Ok(Source {
        file,
        inode: (meta.dev(), meta.ino()),
        position: 0,
        seen: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
