//! What a launch needs besides the spawn itself ([`super::process_group`] starts every
//! group): keeping the descriptors the handler inherited from its children, and explaining
//! a launch that failed.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::libc;

use super::locate::os_message;
use crate::domain::launch::{LaunchProblem, ProgramFacts, explain, shebang_interpreter};

/// Marks every descriptor the handler inherited above stderr close-on-exec, once at the start
/// of `run`: the caller's open descriptors (a job server's pipes, a test harness's files) are
/// not a child's, and SPEC's worker protocol passes only the three standard streams. The
/// handler's own descriptors are close-on-exec already, and each child marks everything
/// above stderr again before its `exec` where the kernel can (Linux 5.11).
pub(crate) fn keep_inherited_descriptors_from_workers() {
    let open: Vec<i32> = fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .filter(|fd| *fd > 2)
                .collect()
        })
        .unwrap_or_default();
    // SAFETY: F_GETFD/F_SETFD on descriptor numbers change only their close-on-exec flag; a
    // closed one (the listing's own) fails with EBADF.
    unsafe {
        for fd in open {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// How much of a program file is read to find its `#!` line (the kernel reads at most 256).
const SHEBANG_BYTES: u64 = 256;

/// Looks at the program a failed launch tried to run (`error` is the launch's error) and
/// explains the failure: a directory, a script whose interpreter is missing, or the OS error.
/// Blocking file reads: call it off the runtime threads.
pub(crate) fn launch_problem(program: &str, cwd: &str, error: &io::Error) -> LaunchProblem {
    let resolved = resolve_program(program, Path::new(cwd));
    let metadata = resolved.as_deref().and_then(|path| fs::metadata(path).ok());
    let head = match (&resolved, &metadata) {
        (Some(path), Some(metadata)) if metadata.is_file() => read_head(path),
        _ => None,
    };
    let interpreter_exists = head
        .as_deref()
        .and_then(shebang_interpreter)
        .map(|interpreter| Path::new(cwd).join(interpreter).exists());
    explain(&ProgramFacts {
        program: program.to_owned(),
        os_message: os_message(error),
        not_found: error.kind() == io::ErrorKind::NotFound,
        is_directory: metadata.is_some_and(|metadata| metadata.is_dir()),
        head,
        interpreter_exists,
    })
}

/// The file `program` names, as `execvp` would look for it: relative to the worker's working
/// directory when it holds a `/`, else the first existing entry on `PATH`.
fn resolve_program(program: &str, cwd: &Path) -> Option<PathBuf> {
    if program.is_empty() {
        return None;
    }
    if program.contains('/') {
        return Some(cwd.join(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path)
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| candidate.exists())
}

/// The first bytes of a regular file, opened without blocking (it could have become a FIFO).
fn read_head(path: &Path) -> Option<Vec<u8>> {
    let file = File::options()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut head = Vec::new();
    file.take(SHEBANG_BYTES).read_to_end(&mut head).ok()?;
    Some(head)
}
