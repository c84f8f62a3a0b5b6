//! The event stream file (`events.jsonl` in the plan's state directory): one JSON line per run
//! event, appended by a thread of its own so that no actor ever waits on the disk. Each line is
//! written whole and flushed (not fsynced: the stream is for watching, the state is the
//! record). The file is capped: when a line would take it past the cap it is renamed to
//! `events.jsonl.1` (replacing the previous one) and a new file starts, so a long or chatty
//! run keeps at most two files.
//!
//! A line can also be queued for later ([`EventLog::append_at`]): it is written when its time
//! comes, or at once before any other line, and a later deferred line replaces it. That is how
//! a throttled stream still gets the last update of a burst without waiting for the next one.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::no_follow;

enum Job {
    Line(String),
    /// A line to write at this time unless another line comes first (then it goes before
    /// that one) or another deferred line replaces it.
    Deferred(String, Instant),
    /// Everything before it is written: reply.
    Drained(mpsc::Sender<()>),
}

/// The appending thread; dropping this lets it end after the queued lines.
pub struct EventLog {
    jobs: Sender<Job>,
}

impl EventLog {
    /// Starts the thread for `path` (opened on the first line) with a size cap in bytes.
    pub fn start(path: PathBuf, cap: u64) -> io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("ash-events".into())
            .spawn(move || append_lines(&path, cap, queue))?;
        Ok(Self { jobs })
    }

    /// Queues one line (without its newline).
    pub fn append(&self, line: String) {
        let _ = self.jobs.send(Job::Line(line));
    }

    /// Queues one line to be written at `due`, or earlier, just before the next line queued
    /// with [`EventLog::append`]; a later call replaces it if it is still waiting.
    pub fn append_at(&self, line: String, due: Instant) {
        let _ = self.jobs.send(Job::Deferred(line, due));
    }

    /// Waits, at most `limit`, until every queued line is written.
    pub fn drain(&self, limit: Duration) {
        let (done, drained) = mpsc::channel();
        if self.jobs.send(Job::Drained(done)).is_ok() {
            let _ = drained.recv_timeout(limit);
        }
    }
}

fn append_lines(path: &Path, cap: u64, queue: Receiver<Job>) {
    let mut writer = LineWriter {
        path,
        cap,
        file: None,
        failed: false,
    };
    let mut deferred: Option<(String, Instant)> = None;
    loop {
        let job = match &deferred {
            Some((_, due)) => {
                match queue.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            None => match queue.recv() {
                Ok(job) => Some(job),
                Err(_) => break,
            },
        };
        match job {
            None => {
                if let Some((line, _)) = deferred.take() {
                    writer.write(&line);
                }
            }
            Some(Job::Deferred(line, due)) => deferred = Some((line, due)),
            Some(Job::Line(line)) => {
                if let Some((earlier, _)) = deferred.take() {
                    writer.write(&earlier);
                }
                writer.write(&line);
            }
            Some(Job::Drained(done)) => {
                if let Some((earlier, _)) = deferred.take() {
                    writer.write(&earlier);
                }
                let _ = done.send(());
            }
        }
    }
    // The run is over: a line still waiting is the last word on its subject.
    if let Some((line, _)) = deferred {
        writer.write(&line);
    }
}

struct LineWriter<'a> {
    path: &'a Path,
    cap: u64,
    file: Option<(File, u64)>,
    failed: bool,
}

impl LineWriter<'_> {
    fn write(&mut self, line: &str) {
        if self.failed {
            return;
        }
        if let Err(error) = append_line(self.path, self.cap, &mut self.file, line) {
            // The stream is an aid, not the record: say so once and stop trying.
            tracing::warn!(path = %self.path.display(), %error, "event stream not written");
            self.failed = true;
        }
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
        // Never through a link: a repository could ship `events.jsonl` as one (issue 23).
        let opened = open_append(path)?;
        let length = opened.metadata()?.len();
        if length > 0 && length + needed > cap {
            drop(opened);
            rotate(path)?;
            *file = Some((open_append(path)?, 0));
        } else {
            *file = Some((opened, length));
        }
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

/// Opens the stream for appending, creating it, under its directory opened without
/// following a link, and never through a link itself.
fn open_append(path: &Path) -> io::Result<File> {
    let (dir, name) = no_follow::split(path)?;
    let dir = no_follow::open_dir(dir)?;
    no_follow::open_append_in(&dir, name).map_err(|error| no_follow::refused_link(error, path))
}

/// Renames the stream to `events.jsonl.1` (replacing the previous one).
fn rotate(path: &Path) -> io::Result<()> {
    let (dir, name) = no_follow::split(path)?;
    let dir = no_follow::open_dir(dir)?;
    let mut rotated_name = name.to_owned();
    rotated_name.push(".1");
    no_follow::rename_in(&dir, name, &rotated_name)
}

/// `events.jsonl.1` beside `events.jsonl`.
pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// Reads the lines appended to an event stream, following it across rotations: the file may
/// not exist yet, grow, or be renamed away and started anew.
pub struct Follower {
    path: PathBuf,
    file: Option<(File, u64)>,
    /// Bytes of a line not terminated yet.
    partial: Vec<u8>,
}

impl Follower {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            partial: Vec::new(),
        }
    }

    /// Whole lines appended since the last call (possibly none), oldest first.
    pub fn read_new_lines(&mut self) -> io::Result<Vec<String>> {
        use std::io::{Read, Seek, SeekFrom};
        use std::os::unix::fs::MetadataExt;
        let current = match std::fs::metadata(&self.path) {
            Ok(meta) => Some(meta.ino()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(error),
        };
        let rotated = match (&self.file, current) {
            (Some((_, inode)), Some(now)) => *inode != now,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let mut bytes = Vec::new();
        if rotated {
            // Finish the old file first (it is `events.jsonl.1` now), then start the new one.
            if let Some((mut file, _)) = self.file.take() {
                file.read_to_end(&mut bytes)?;
            }
        }
        if self.file.is_none()
            && let Some(inode) = current
        {
            match File::open(&self.path) {
                Ok(mut file) => {
                    file.seek(SeekFrom::Start(0))?;
                    self.file = Some((file, inode));
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        if let Some((file, _)) = self.file.as_mut() {
            file.read_to_end(&mut bytes)?;
        }
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|&byte| byte == b'\n') else {
            return Ok(Vec::new());
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        Ok(String::from_utf8_lossy(&complete)
            .lines()
            .map(str::to_owned)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    #[test]
    fn lines_are_appended_and_the_file_rotates_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let log = EventLog::start(path.clone(), 30).unwrap();
        for line in ["first line", "second line", "third line"] {
            log.append(line.to_owned());
        }
        log.drain(Duration::from_secs(10));
        assert_eq!(
            std::fs::read_to_string(rotated(&path)).unwrap(),
            "first line\nsecond line\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "third line\n");
    }

    #[test]
    fn a_follower_sees_appended_lines_across_a_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut follower = Follower::new(path.clone());
        assert!(follower.read_new_lines().unwrap().is_empty(), "no file yet");
        std::fs::write(&path, "one\ntw").unwrap();
        assert_eq!(follower.read_new_lines().unwrap(), ["one"]);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"o\n").unwrap();
        std::fs::rename(&path, rotated(&path)).unwrap();
        std::fs::write(&path, "three\n").unwrap();
        assert_eq!(follower.read_new_lines().unwrap(), ["two", "three"]);
        assert!(follower.read_new_lines().unwrap().is_empty());
    }

    #[test]
    fn an_existing_stream_is_continued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, "earlier run\n").unwrap();
        let log = EventLog::start(path.clone(), 1024).unwrap();
        log.append("this run".to_owned());
        log.drain(Duration::from_secs(10));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "earlier run\nthis run\n"
        );
    }

    #[test]
    fn a_deferred_line_is_replaced_by_a_later_one_and_written_before_the_next_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let log = EventLog::start(path.clone(), 1024).unwrap();
        let later = Instant::now() + Duration::from_secs(3600);
        log.append_at("progress 1".to_owned(), later);
        log.append_at("progress 2".to_owned(), later);
        log.append("finished".to_owned());
        log.drain(Duration::from_secs(10));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "progress 2\nfinished\n"
        );
    }

    #[test]
    fn a_deferred_line_is_written_when_its_time_comes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let log = EventLog::start(path.clone(), 1024).unwrap();
        log.append("first".to_owned());
        log.append_at("last of a burst".to_owned(), Instant::now());
        // No other line follows: the deferred one still arrives, without a drain.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&path).unwrap_or_default() != "first\nlast of a burst\n" {
            assert!(Instant::now() < deadline, "the deferred line never came");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(log);
    }
}
