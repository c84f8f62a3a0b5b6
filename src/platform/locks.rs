//! Advisory directory locks: a non-blocking exclusive `flock` on a directory's own descriptor,
//! close-on-exec (an orphaned worker can never keep a workspace locked), released by the kernel
//! however the handler exits. No lock file is created anywhere.

use std::fs::{File, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockScope {
    PlanWorkspace,
    ExecutionWorkspace,
}

impl LockScope {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::PlanWorkspace => "plan workspace",
            Self::ExecutionWorkspace => "execution workspace",
        }
    }
}

/// A held lock. Dropping it closes the descriptor, which releases the lock.
#[derive(Debug)]
pub(crate) struct DirLock {
    _handle: File,
    pub dir: PathBuf,
    /// `(device, inode)`: aliases of one directory share it.
    pub identity: (u64, u64),
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another process holds it: `holder` is its pid, as `/proc/locks` shows it (`None` when
    /// the lock table cannot be read or the holder is in another pid namespace).
    #[error(
        "{} {} is already owned by another ai-session-handler invocation{}",
        scope.name(),
        dir.display(),
        holder.map(|pid| format!(" (handler pid {pid})")).unwrap_or_default()
    )]
    Contended {
        scope: LockScope,
        dir: PathBuf,
        holder: Option<u32>,
    },
    #[error("could not lock {} {}: {error}", scope.name(), dir.display())]
    Io {
        scope: LockScope,
        dir: PathBuf,
        error: io::Error,
    },
}

pub(crate) fn dir_identity(dir: &Path) -> io::Result<(u64, u64)> {
    let meta = std::fs::metadata(dir)?;
    Ok((meta.dev(), meta.ino()))
}

pub(crate) fn try_lock_dir(dir: &Path, scope: LockScope) -> Result<DirLock, LockError> {
    let io_error = |error| LockError::Io {
        scope,
        dir: dir.to_path_buf(),
        error,
    };
    // O_DIRECTORY|O_NONBLOCK: a path swapped for a FIFO is refused, never waited on.
    let handle = File::options()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NONBLOCK)
        .open(dir)
        .map_err(io_error)?;
    let meta = handle.metadata().map_err(io_error)?;
    match handle.try_lock() {
        Ok(()) => Ok(DirLock {
            _handle: handle,
            dir: dir.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
        }),
        Err(TryLockError::WouldBlock) => Err(LockError::Contended {
            scope,
            dir: dir.to_path_buf(),
            // Read once the lock is known to be held; a holder that just let go reads as none.
            holder: lock_holder(dir)
                .ok()
                .flatten()
                .and_then(|holder| holder.pid),
        }),
        Err(TryLockError::Error(error)) => Err(io_error(error)),
    }
}

/// Who holds the lock on a directory, as far as `/proc/locks` tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LockHolder {
    /// The holder's pid; `None` when it is in another pid namespace.
    pub pid: Option<u32>,
}

/// Whether some process holds the exclusive `flock` that `run` takes on `dir`, read from
/// `/proc/locks` — never by taking the lock, even briefly: `status` and `check` take no locks,
/// and a probe that did could make a `run` starting at that moment fail with contention.
pub(crate) fn lock_holder(dir: &Path) -> io::Result<Option<LockHolder>> {
    let meta = std::fs::metadata(dir)?;
    let (major, minor) = (
        nix::sys::stat::major(meta.dev()),
        nix::sys::stat::minor(meta.dev()),
    );
    let table = std::fs::read_to_string("/proc/locks")?;
    let entries = parse_proc_locks(&table);
    let held = |entry: &&FlockEntry| entry.inode == meta.ino();
    // The device numbers match unless the filesystem reports another device to `stat` than
    // it records for locks (btrfs subvolumes): then the holder must have the directory open.
    let found = entries
        .iter()
        .filter(held)
        .find(|entry| (entry.major, entry.minor) == (major, minor))
        .or_else(|| {
            entries
                .iter()
                .filter(held)
                .find(|entry| entry.pid.is_some_and(|pid| has_open(pid, dir)))
        });
    Ok(found.map(|entry| LockHolder { pid: entry.pid }))
}

/// Whether process `pid` has a descriptor open on `dir` (readable only for our own processes).
fn has_open(pid: u32, dir: &Path) -> bool {
    let Ok(canonical) = std::fs::canonicalize(dir) else {
        return false;
    };
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == canonical))
        })
        .unwrap_or(false)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlockEntry {
    pid: Option<u32>,
    major: u64,
    minor: u64,
    inode: u64,
}

/// The granted exclusive `flock` locks in a `/proc/locks` table, e.g.
/// `1: FLOCK  ADVISORY  WRITE 7938 fe:00:10256385 0 EOF`. Waiters (`->`), shared and POSIX
/// locks are skipped, and so is any line that does not parse.
fn parse_proc_locks(table: &str) -> Vec<FlockEntry> {
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace().skip(1);
            let (kind, _, access, pid, file) = (
                fields.next()?,
                fields.next()?,
                fields.next()?,
                fields.next()?,
                fields.next()?,
            );
            if kind != "FLOCK" || access != "WRITE" {
                return None;
            }
            let mut parts = file.split(':');
            let major = u64::from_str_radix(parts.next()?, 16).ok()?;
            let minor = u64::from_str_radix(parts.next()?, 16).ok()?;
            let inode = parts.next()?.parse().ok()?;
            let pid = pid.parse::<u32>().ok().filter(|&pid| pid > 0);
            Some(FlockEntry {
                pid,
                major,
                minor,
                inode,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_granted_exclusive_flocks_only() {
        let table = "1: FLOCK  ADVISORY  WRITE 7938 fe:00:10256385 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 7940 fe:00:10256385 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 12 08:01:55 0 EOF\n\
                     3: FLOCK  ADVISORY  READ 13 08:01:56 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE -1 103:2a:77 0 EOF\n\
                     garbage\n";
        assert_eq!(
            parse_proc_locks(table),
            [
                FlockEntry {
                    pid: Some(7938),
                    major: 0xfe,
                    minor: 0,
                    inode: 10256385
                },
                FlockEntry {
                    pid: None,
                    major: 0x103,
                    minor: 0x2a,
                    inode: 77
                },
            ]
        );
    }

    #[test]
    fn the_holder_of_a_held_lock_is_found_without_taking_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(lock_holder(dir.path()).unwrap(), None);
        let held = try_lock_dir(dir.path(), LockScope::PlanWorkspace).unwrap();
        assert_eq!(
            lock_holder(dir.path()).unwrap(),
            Some(LockHolder {
                pid: Some(std::process::id())
            })
        );
        drop(held);
        assert_eq!(lock_holder(dir.path()).unwrap(), None);
    }

    #[test]
    fn second_lock_on_same_directory_is_contended() {
        let dir = tempfile::tempdir().unwrap();
        let held = try_lock_dir(dir.path(), LockScope::PlanWorkspace).unwrap();
        let error = try_lock_dir(dir.path(), LockScope::ExecutionWorkspace).unwrap_err();
        assert!(matches!(error, LockError::Contended { .. }));
        assert!(error.to_string().starts_with("execution workspace "));
        assert!(
            error.to_string().ends_with(&format!(
                "already owned by another ai-session-handler invocation (handler pid {})",
                std::process::id()
            )),
            "{error}"
        );
        drop(held);
        try_lock_dir(dir.path(), LockScope::PlanWorkspace).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no lock file"
        );
    }
}
