//! Launching a worker: its own session and process group (`setsid` in the child before
//! `exec`), all three standard streams piped, the handler's environment inherited, the phase's
//! execution workspace as working directory. Never through a shell.
//!
//! Why `setsid` rather than `setpgid`: a session leader has no controlling terminal, so a
//! worker that tries to read `/dev/tty` fails fast (ENXIO) instead of being stopped by SIGTTIN
//! in a background group; and its pgid equals its pid, so the group can be addressed by the
//! pgid saved at launch even after the leader exits.

use std::io;
use std::process::Stdio;

use nix::fcntl::{FcntlArg, fcntl};
use tokio::process::{Child, Command};

/// Pipe capacity requested for the worker's output pipes: fewer, larger reads.
const PIPE_CAPACITY: i32 = 1 << 20;

/// Starts `argv` in `cwd` as the leader of a new session and process group.
pub fn spawn_worker(argv: &[String], cwd: &str) -> io::Result<Child> {
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
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent; it is the
    // only thing run between fork and exec. (std already resets the signal mask and SIGPIPE.)
    unsafe {
        command.pre_exec(|| nix::unistd::setsid().map(drop).map_err(io::Error::from));
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
