//! Launching a worker: its own session and process group (`setsid` in the child before
//! `exec`), all three standard streams piped, the handler's environment inherited, the phase's
//! execution workspace as working directory. Never through a shell.
//!
//! One variable of the environment is never passed on: `NOTIFY_SOCKET`. A handler run by
//! systemd (a service with `Type=notify`) has the service's socket there, and a worker must
//! not speak to systemd in the handler's name; the worker gets the attempt's own notification
//! socket instead, or none ([`spawn_worker_notifying`], docs/worker-protocol.md).
//!
//! Why `setsid` rather than `setpgid`: a session leader has no controlling terminal, so a
//! worker that tries to read `/dev/tty` fails fast (ENXIO) instead of being stopped by SIGTTIN
//! in a background group; and its pgid equals its pid, so the group can be addressed by the
//! pgid saved at launch even after the leader exits.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::fcntl::{FcntlArg, fcntl};
use tokio::process::{Child, Command};

use super::locate::os_message;
use super::notify_socket::NOTIFY_SOCKET;
use super::watchdog;
use crate::domain::launch::{LaunchProblem, ProgramFacts, explain, shebang_interpreter};

/// Pipe capacity requested for the worker's output pipes: fewer, larger reads.
const PIPE_CAPACITY: i32 = 1 << 20;

/// Starts `argv` in `cwd` as the leader of a new session and process group, with
/// `NOTIFY_SOCKET` set to `notify_socket` (the attempt's notification socket,
/// `platform::notify_socket::NotifySocket::env_value`) when given, and removed otherwise: the
/// handler's own never reaches the worker.
pub fn spawn_worker_notifying(
    argv: &[String],
    cwd: &str,
    notify_socket: Option<&str>,
) -> io::Result<Child> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Last-resort backstop only: the group killer is what stops workers.
        .kill_on_drop(true);
    match notify_socket {
        Some(socket) => command.env(NOTIFY_SOCKET, socket),
        None => command.env_remove(NOTIFY_SOCKET),
    };
    let watchdog = watchdog::registration_fd();
    // SAFETY: `setsid` and the watchdog registration (`getpid`, one non-blocking `send` from
    // a stack buffer) are async-signal-safe and touch no memory of the parent; they are all
    // that runs between fork and exec. (std already resets the signal mask and SIGPIPE.)
    // Registering here, before `exec`, leaves no moment in which the worker runs unknown to
    // the watchdog.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid().map_err(io::Error::from)?;
            if let Some(fd) = watchdog {
                watchdog::register_self(fd);
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    // Best effort: the default 64 KiB pipe works, just with more wake-ups.
    if let Some(pipe) = &child.stdout {
        let _ = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
    }
    if let Some(pipe) = &child.stderr {
        let _ = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
    }
    Ok(child)
}

/// How much of a program file is read to find its `#!` line (the kernel reads at most 256).
const SHEBANG_BYTES: u64 = 256;

/// Looks at the program a failed launch tried to run (`error` is the launch's error) and
/// explains the failure: a directory, a script whose interpreter is missing, or the OS error.
/// Blocking file reads: call it off the runtime threads.
pub fn launch_problem(program: &str, cwd: &str, error: &io::Error) -> LaunchProblem {
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
