//! Launching a worker: its own session and process group, all three standard streams piped
//! and no other descriptor (everything above stderr is close-on-exec, the caller's inherited
//! ones included), the handler's environment inherited plus the attempt id in
//! `AI_SESSION_HANDLER_ATTEMPT_ID`, the phase's execution workspace as working directory, the
//! watchdog told before the worker can run. Never through a shell.
//!
//! Two ways, one result ([`WorkerChild`]): `posix_spawn` ([`super::session_spawn`]: nothing
//! of the handler is copied, about a millisecond less per phase), and `fork` + `exec` with
//! `setsid` and the watchdog registration between them — where this system's glibc or kernel
//! lacks what the first needs, and for a program without a `#!` line, which only `execvp`
//! runs (with `/bin/sh`).
//!
//! One variable of the environment is never passed on: `NOTIFY_SOCKET`. A handler run by
//! systemd (a service with `Type=notify`) has the service's socket there, and a worker must
//! not speak to systemd in the handler's name; the worker gets the attempt's own notification
//! socket instead, or none ([`spawn_worker`], docs/worker-protocol.md).
//!
//! Why `setsid` rather than `setpgid`: a session leader has no controlling terminal, so a
//! worker that tries to read `/dev/tty` fails fast (ENXIO) instead of being stopped by SIGTTIN
//! in a background group; and its pgid equals its pid, so the group can be addressed by the
//! pgid saved at launch even after the leader exits.

use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

use super::locate::os_message;
use super::notify_socket::NOTIFY_SOCKET;
use super::process_group;
use super::session_spawn::{self, Spawned, env_entry};
use super::watchdog;
use super::worker_child::{ParentEnds, WorkerChild};
use crate::domain::launch::{LaunchProblem, ProgramFacts, explain, shebang_interpreter};
use crate::domain::watchdog::ATTEMPT_ENV;

/// Pipe capacity requested for the worker's output pipes: fewer, larger reads.
const PIPE_CAPACITY: i32 = 1 << 20;

/// Starts `argv` in `cwd` as the leader of a new session and process group, for attempt
/// `attempt_id` (its processes carry it in [`ATTEMPT_ENV`], so the watchdog and `status`
/// find those that leave the group), with `NOTIFY_SOCKET` set to `notify_socket` (the
/// attempt's notification socket, `platform::notify_socket::NotifySocket::env_value`) when
/// given, and removed otherwise: the handler's own never reaches the worker. Call inside the
/// runtime (the pipes are registered with its reactor), off its worker threads (it waits for
/// `exec`).
pub(crate) fn spawn_worker(
    argv: &[String],
    cwd: &str,
    attempt_id: &str,
    notify_socket: Option<&str>,
) -> io::Result<WorkerChild> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    // From here until `watching`, a handler that dies leaves the watchdog the attempt's
    // token to find the worker by.
    watchdog::expect(attempt_id);
    let env = worker_environment(attempt_id, notify_socket);
    let started = match session_spawn::spawn(program, args, cwd, &env) {
        Spawned::Running { pid, pidfd, ends } => Ok((pid, pidfd, ends)),
        Spawned::Failed(error) => Err(error),
        Spawned::Unsupported => fork_worker(program, args, cwd, attempt_id, notify_socket),
    };
    let (pid, pidfd, ends) = match started {
        Ok(started) => started,
        Err(error) => {
            watchdog::unexpect(attempt_id);
            return Err(error);
        }
    };
    // A handler killed here leaves a worker the watchdog knows by its token only (the
    // hostile tests stop the handler at this point).
    fail::fail_point!("worker-spawned");
    watchdog::watching(pid, attempt_id);
    // Best effort: the default 64 KiB pipe works, just with more wake-ups.
    for pipe in [&ends.stdout, &ends.stderr] {
        let _ = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
    }
    WorkerChild::new(pid, pidfd, ends).inspect_err(|_| {
        // Nothing could supervise it: stop it before reporting the failure.
        let _ = process_group::signal_group(pid, process_group::StopSignal::Kill);
    })
}

/// The worker's environment: the handler's, without its `NOTIFY_SOCKET`, plus the attempt id
/// and the attempt's own notification socket.
fn worker_environment(attempt_id: &str, notify_socket: Option<&str>) -> Vec<CString> {
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(key, _)| key != ATTEMPT_ENV && key != NOTIFY_SOCKET)
        .filter_map(|(key, value)| env_entry(&key, &value))
        .collect();
    env.extend(env_entry(OsStr::new(ATTEMPT_ENV), OsStr::new(attempt_id)));
    if let Some(socket) = notify_socket {
        env.extend(env_entry(OsStr::new(NOTIFY_SOCKET), OsStr::new(socket)));
    }
    env
}

/// The fork path: `setsid`, the watchdog registration and `close_range` between `fork` and
/// `exec`, through `std::process` (whose `execvp` runs a script without `#!` with /bin/sh).
fn fork_worker(
    program: &str,
    args: &[String],
    cwd: &str,
    attempt_id: &str,
    notify_socket: Option<&str>,
) -> io::Result<(u32, OwnedFd, ParentEnds)> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env(ATTEMPT_ENV, attempt_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match notify_socket {
        Some(socket) => command.env(NOTIFY_SOCKET, socket),
        None => command.env_remove(NOTIFY_SOCKET),
    };
    // A duplicate of the watchdog socket, held until the spawn is over.
    let registration = watchdog::registration();
    let registration_fd = registration.as_ref().map(watchdog::Registration::raw);
    let attempt = attempt_id.to_owned();
    // SAFETY: `setsid`, the watchdog registration (`getpid`, one non-blocking `send` from a
    // stack buffer, reading the attempt id allocated before the fork) and `close_range` are
    // async-signal-safe and touch no memory of the parent; they are all that runs between
    // fork and exec. (std already resets the signal mask and SIGPIPE.)
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid().map_err(io::Error::from)?;
            if let Some(fd) = registration_fd {
                watchdog::register_self(fd, &attempt);
            }
            close_on_exec_from(3);
            Ok(())
        });
    }
    let spawned = command.spawn();
    drop(registration);
    let mut child = spawned?;
    let pid = child.id();
    let ends = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
        (Some(stdin), Some(stdout), Some(stderr)) => ParentEnds {
            stdin: stdin.into(),
            stdout: stdout.into(),
            stderr: stderr.into(),
        },
        _ => unreachable!("all three streams are piped"),
    };
    let Some(pidfd) = process_group::pidfd_open(pid) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other(
            "cannot open a pidfd for the worker (Linux 5.3 or later is needed)",
        ));
    };
    // The pidfd reaps it from now on; a std `Child` does nothing when dropped.
    drop(child);
    Ok((pid, pidfd, ends))
}

/// Marks every descriptor from `first` up close-on-exec (`close_range` with
/// `CLOSE_RANGE_CLOEXEC`, Linux 5.11): a worker gets its three standard streams and nothing
/// else — not the descriptors its caller left open without close-on-exec. Async-signal-safe;
/// on an older kernel it does nothing, and [`keep_inherited_descriptors_from_workers`] has
/// already marked the inherited ones.
pub(crate) fn close_on_exec_from(first: i32) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range(first, ~0, CLOSE_RANGE_CLOEXEC) takes plain integers.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
    }
}

/// Marks every descriptor the handler inherited above stderr close-on-exec, once at the start
/// of `run`: the caller's open descriptors (a job server's pipes, a test harness's files) are
/// not the worker's, and SPEC's worker protocol passes only the three standard streams. The
/// handler's own descriptors are close-on-exec already.
pub(crate) fn keep_inherited_descriptors_from_workers() {
    close_on_exec_from(3);
    // Before Linux 5.11 close_range knows no CLOSE_RANGE_CLOEXEC: mark what is open.
    let open: Vec<i32> = fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .filter(|fd| *fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        // SAFETY: F_GETFD/F_SETFD on a descriptor number; a closed one fails with EBADF.
        unsafe {
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
