//! Advisory directory locks: a non-blocking exclusive `flock` on a directory's own descriptor.
//! No lock file is created anywhere; the descriptor is close-on-exec (std opens everything
//! with `O_CLOEXEC`), so a worker never inherits it and an orphaned worker can never keep a
//! workspace locked. The kernel releases the lock when the handler exits, however it exits.

use std::fs::{File, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Which workspace a lock protects; used in contention messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockScope {
    PlanWorkspace,
    ExecutionWorkspace,
}

impl LockScope {
    pub fn name(self) -> &'static str {
        match self {
            Self::PlanWorkspace => "plan workspace",
            Self::ExecutionWorkspace => "execution workspace",
        }
    }
}

/// A held lock. Dropping it closes the descriptor, which releases the lock.
#[derive(Debug)]
pub struct DirLock {
    _handle: File,
    pub dir: PathBuf,
    /// `(device, inode)`: aliases of one directory share it.
    pub identity: (u64, u64),
}

/// Why a lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it.
    Contended { scope: LockScope, dir: PathBuf },
    /// The directory could not be opened or locked.
    Io {
        scope: LockScope,
        dir: PathBuf,
        error: io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Contended { scope, dir } => write!(
                f,
                "{} {} is already owned by another ai-session-handler invocation",
                scope.name(),
                dir.display()
            ),
            Self::Io { scope, dir, error } => {
                write!(
                    f,
                    "could not lock {} {}: {error}",
                    scope.name(),
                    dir.display()
                )
            }
        }
    }
}

impl std::error::Error for LockError {}

/// The `(device, inode)` identity of a directory.
pub fn dir_identity(dir: &Path) -> io::Result<(u64, u64)> {
    let meta = std::fs::metadata(dir)?;
    Ok((meta.dev(), meta.ino()))
}

/// Takes the lock on `dir` without waiting.
pub fn try_lock_dir(dir: &Path, scope: LockScope) -> Result<DirLock, LockError> {
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
        }),
        Err(TryLockError::Error(error)) => Err(io_error(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_same_directory_is_contended() {
        let dir = tempfile::tempdir().unwrap();
        let held = try_lock_dir(dir.path(), LockScope::PlanWorkspace).unwrap();
        let error = try_lock_dir(dir.path(), LockScope::ExecutionWorkspace).unwrap_err();
        assert!(matches!(error, LockError::Contended { .. }));
        assert!(error.to_string().starts_with("execution workspace "));
        assert!(
            error
                .to_string()
                .ends_with("already owned by another ai-session-handler invocation")
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
