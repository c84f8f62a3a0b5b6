//! Starting a worker with `posix_spawn`: glibc clones the handler with `CLONE_VM |
//! CLONE_VFORK`, so nothing of the handler's address space is copied and the child's `exec`
//! has nothing to tear down — about a millisecond less per phase than `fork` + `exec` of a
//! multi-threaded handler (docs/benchmarks.md). What the fork path did between fork and exec
//! is asked of `posix_spawn` instead: a new session (`POSIX_SPAWN_SETSID`, glibc 2.26), the
//! working directory (`posix_spawn_file_actions_addchdir_np`, glibc 2.29, looked up at run
//! time), the three pipes on 0, 1 and 2, an empty signal mask and SIGPIPE back to its default
//! (as `std::process` does).
//!
//! What it cannot do is run code of ours in the child, so the watchdog is told before the
//! spawn instead (`watchdog::expect`, docs/architecture.md). Where glibc lacks a piece (no
//! `addchdir_np`, no `SETSID`), [`Spawned::Unsupported`] sends the caller to the fork path,
//! once and for all. Both paths need a pidfd (Linux 5.3) to wait for the worker.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;

use super::process_group;
use super::worker_child::ParentEnds;

/// What the spawn did.
pub(crate) enum Spawned {
    /// The worker runs: its pid, its pidfd and the handler's ends of its pipes.
    Running {
        pid: u32,
        pidfd: OwnedFd,
        ends: ParentEnds,
    },
    /// The program could not be started (`ENOENT`, `EACCES`, …), as `exec` reported it.
    Failed(io::Error),
    /// This system cannot spawn this way (or the program has no `#!` line and needs the
    /// shell fallback only `execvp` has): use the fork path.
    Unsupported,
}

/// Set once a spawn found a missing piece: every later spawn takes the fork path at once.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// A glibc symbol looked up at run time, null when this glibc lacks it.
fn glibc_symbol(name: &std::ffi::CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks a symbol up.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

type AddChdir =
    unsafe extern "C" fn(*mut libc::posix_spawn_file_actions_t, *const libc::c_char) -> libc::c_int;

/// `posix_spawn_file_actions_addchdir_np` (glibc 2.29), when this glibc has it.
fn add_chdir() -> Option<AddChdir> {
    static ADD_CHDIR: OnceLock<Option<AddChdir>> = OnceLock::new();
    *ADD_CHDIR.get_or_init(|| {
        let symbol = glibc_symbol(c"posix_spawn_file_actions_addchdir_np");
        // SAFETY: the symbol, when present, is glibc's function of exactly this signature.
        (!symbol.is_null())
            .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, AddChdir>(symbol) })
    })
}

type AddClosefrom =
    unsafe extern "C" fn(*mut libc::posix_spawn_file_actions_t, libc::c_int) -> libc::c_int;

/// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), when this glibc has it.
fn add_closefrom() -> Option<AddClosefrom> {
    static ADD_CLOSEFROM: OnceLock<Option<AddClosefrom>> = OnceLock::new();
    *ADD_CLOSEFROM.get_or_init(|| {
        let symbol = glibc_symbol(c"posix_spawn_file_actions_addclosefrom_np");
        // SAFETY: the symbol, when present, is glibc's function of exactly this signature.
        (!symbol.is_null())
            .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, AddClosefrom>(symbol) })
    })
}

/// Starts `program` with `args` (`argv[0]` is `program`) in `cwd`, with environment `env`
/// (`KEY=VALUE` entries), as the leader of a new session. The program is looked up on `PATH`
/// when it holds no `/`, relative to `cwd` when it does, as `execvp` in the child would.
pub(crate) fn spawn(program: &str, args: &[String], cwd: &str, env: &[CString]) -> Spawned {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return Spawned::Unsupported;
    }
    let Some(add_chdir) = add_chdir() else {
        return unsupported("posix_spawn_file_actions_addchdir_np is missing");
    };
    let (Ok(program_c), Ok(cwd_c)) = (CString::new(program), CString::new(cwd)) else {
        return Spawned::Failed(io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte in the program or working directory",
        ));
    };
    let mut argv_c = vec![program_c.clone()];
    for arg in args {
        match CString::new(arg.as_str()) {
            Ok(arg) => argv_c.push(arg),
            Err(_) => {
                return Spawned::Failed(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "nul byte in an argument",
                ));
            }
        }
    }
    let pipes = match (Pipe::new(), Pipe::new(), Pipe::new()) {
        (Ok(stdin), Ok(stdout), Ok(stderr)) => [stdin, stdout, stderr],
        (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
            return Spawned::Failed(error);
        }
    };
    let [stdin, stdout, stderr] = pipes;
    // The child's ends: stdin's read end, the output pipes' write ends.
    let child_ends = [
        stdin.read.as_raw_fd(),
        stdout.write.as_raw_fd(),
        stderr.write.as_raw_fd(),
    ];
    let mut argv: Vec<*mut libc::c_char> =
        argv_c.iter().map(|arg| arg.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut libc::c_char> =
        env.iter().map(|entry| entry.as_ptr().cast_mut()).collect();
    envp.push(std::ptr::null_mut());

    let mut actions = match FileActions::new() {
        Ok(actions) => actions,
        Err(error) => return Spawned::Failed(error),
    };
    let mut attributes = match Attributes::new() {
        Ok(attributes) => attributes,
        Err(error) => return Spawned::Failed(error),
    };
    for (target, fd) in child_ends.into_iter().enumerate() {
        // SAFETY: initialised file actions; plain descriptor numbers (all above stderr, so
        // dup2 never maps a descriptor onto itself and leaves it close-on-exec).
        if let Err(error) = check(unsafe {
            libc::posix_spawn_file_actions_adddup2(actions.as_mut(), fd, target as RawFd)
        }) {
            return Spawned::Failed(error);
        }
    }
    // SAFETY: initialised file actions and a NUL-terminated path that outlives the spawn.
    if let Err(error) = check(unsafe { add_chdir(actions.as_mut(), cwd_c.as_ptr()) }) {
        return Spawned::Failed(error);
    }
    // Every descriptor of the handler is close-on-exec already (its own are opened so, the
    // inherited ones marked at the start of `run`); closing the rest in the child as well
    // keeps "exactly three descriptors" true should a library ever open one without it.
    if let Some(add_closefrom) = add_closefrom() {
        // SAFETY: initialised file actions; closing from 3 up in the child only.
        if let Err(error) = check(unsafe { add_closefrom(actions.as_mut(), 3) }) {
            return Spawned::Failed(error);
        }
    }
    if let Err(error) = attributes.configure() {
        return unsupported(&format!("posix_spawn attributes: {error}"));
    }
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid and NUL-terminated for the call's duration: the program
    // and argv/envp arrays (null-terminated) borrow CStrings alive until the end of this
    // function; actions and attributes are initialised.
    let result = unsafe {
        libc::posix_spawnp(
            &mut pid,
            program_c.as_ptr(),
            actions.as_ref(),
            attributes.as_ref(),
            argv.as_ptr(),
            envp.as_ptr(),
        )
    };
    match result {
        0 => {}
        // No `#!` line: `execvp` would run it with /bin/sh, posix_spawnp does not.
        libc::ENOEXEC => return Spawned::Unsupported,
        // An older glibc refusing POSIX_SPAWN_SETSID.
        libc::EINVAL => return unsupported("posix_spawn refused POSIX_SPAWN_SETSID"),
        errno => return Spawned::Failed(io::Error::from_raw_os_error(errno)),
    }
    let pid = pid as u32;
    let Some(pidfd) = process_group::pidfd_open(pid) else {
        // Nothing could wait for this worker without risking a reused pid: stop it. The fork
        // path needs a pidfd as much, so this is a launch failure either way.
        // SAFETY: kill and waitpid on the child we just started, which nothing else reaps.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
            libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
        }
        return Spawned::Failed(io::Error::other(
            "cannot open a pidfd for the worker (Linux 5.3 or later is needed)",
        ));
    };
    Spawned::Running {
        pid,
        pidfd,
        ends: ParentEnds {
            stdin: stdin.write,
            stdout: stdout.read,
            stderr: stderr.read,
        },
    }
}

fn unsupported(reason: &str) -> Spawned {
    if !UNSUPPORTED.swap(true, Ordering::Relaxed) {
        tracing::info!(reason, "workers are started by fork from now on");
    }
    Spawned::Unsupported
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(result))
    }
}

/// One pipe, both ends close-on-exec and above stderr (a handler started with a closed
/// standard stream would otherwise get a pipe end on 0, 1 or 2).
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Self> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Self {
            read: above_stderr(read)?,
            write: above_stderr(write)?,
        })
    }
}

fn above_stderr(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one (≥ 3) or -1.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

/// `posix_spawn_file_actions_t`, destroyed on drop.
struct FileActions(Box<libc::posix_spawn_file_actions_t>);

impl FileActions {
    fn new() -> io::Result<Self> {
        // SAFETY: an all-zero value is a valid place for init to write into.
        let mut actions =
            Box::new(unsafe { std::mem::zeroed::<libc::posix_spawn_file_actions_t>() });
        // SAFETY: init on a valid pointer.
        check(unsafe { libc::posix_spawn_file_actions_init(actions.as_mut()) })?;
        Ok(Self(actions))
    }

    fn as_mut(&mut self) -> *mut libc::posix_spawn_file_actions_t {
        self.0.as_mut()
    }

    fn as_ref(&self) -> *const libc::posix_spawn_file_actions_t {
        self.0.as_ref()
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe {
            libc::posix_spawn_file_actions_destroy(self.0.as_mut());
        }
    }
}

/// `posix_spawnattr_t`, destroyed on drop.
struct Attributes(Box<libc::posix_spawnattr_t>);

impl Attributes {
    fn new() -> io::Result<Self> {
        // SAFETY: an all-zero value is a valid place for init to write into.
        let mut attributes = Box::new(unsafe { std::mem::zeroed::<libc::posix_spawnattr_t>() });
        // SAFETY: init on a valid pointer.
        check(unsafe { libc::posix_spawnattr_init(attributes.as_mut()) })?;
        Ok(Self(attributes))
    }

    /// A new session, an empty signal mask, SIGPIPE at its default (Rust ignores it).
    fn configure(&mut self) -> io::Result<()> {
        // SAFETY: sigset_t values filled by sigemptyset/sigaddset before use; the attribute
        // object is initialised.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            check(libc::posix_spawnattr_setsigmask(self.0.as_mut(), &empty))?;
            let mut defaults: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut defaults);
            libc::sigaddset(&mut defaults, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigdefault(
                self.0.as_mut(),
                &defaults,
            ))?;
            let flags = libc::POSIX_SPAWN_SETSID
                | libc::POSIX_SPAWN_SETSIGMASK as libc::c_short
                | libc::POSIX_SPAWN_SETSIGDEF as libc::c_short;
            check(libc::posix_spawnattr_setflags(self.0.as_mut(), flags))
        }
    }

    fn as_ref(&self) -> *const libc::posix_spawnattr_t {
        self.0.as_ref()
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe {
            libc::posix_spawnattr_destroy(self.0.as_mut());
        }
    }
}

/// `KEY=VALUE` for the environment array.
pub(crate) fn env_entry(key: &OsStr, value: &OsStr) -> Option<CString> {
    let mut entry = Vec::with_capacity(key.len() + 1 + value.len());
    entry.extend_from_slice(key.as_bytes());
    entry.push(b'=');
    entry.extend_from_slice(value.as_bytes());
    CString::new(entry).ok()
}
