//! Finding a program the way `execvp` will at launch — a word with a `/` is a path relative to
//! the child's working directory, a bare name is searched in the handler's `PATH` — before
//! anything is written ([`resolve`]), and explaining a launch that failed anyway
//! ([`launch_problem`]: a bad `#!` interpreter, a directory).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::unistd::{AccessFlags, access};

use super::locate::os_message;
use crate::domain::launch::{LaunchProblem, ProgramFacts, explain, shebang_interpreter};

/// The search list `execvp` uses when `PATH` is unset (glibc's `confstr(_CS_PATH)`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Why `exec` would not find the program. The message names the program and where it was
/// looked for; [`ProgramProblem::describe`] words it for the program's role.
#[derive(Debug)]
pub(crate) enum ProgramProblem {
    PathMissing {
        program: String,
        looked_at: PathBuf,
    },
    NotInPath {
        program: String,
        searched: Vec<PathBuf>,
    },
    EmptyPath {
        program: String,
    },
    NotExecutable {
        program: String,
        path: PathBuf,
    },
    Directory {
        program: String,
        path: PathBuf,
    },
    Unreadable {
        program: String,
        path: PathBuf,
        source: io::Error,
    },
}

/// What a program is for, and so where a relative path to it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProgramRole {
    /// The agent command, started in the phase's execution workspace.
    Agent,
    /// A hook command, started in the plan workspace.
    Hook,
    /// The interpreter of a verification check, started in the phase's execution workspace.
    VerifyInterpreter,
    /// The launcher a provider wrapper starts, looked up on the `PATH` it inherits.
    Launcher,
}

impl ProgramRole {
    fn noun(self) -> &'static str {
        match self {
            Self::Agent => "agent program",
            Self::Hook => "hook program",
            Self::VerifyInterpreter => "verify interpreter",
            Self::Launcher => "launcher",
        }
    }

    fn relative_to(self) -> &'static str {
        match self {
            Self::Agent | Self::VerifyInterpreter | Self::Launcher => {
                "the phase's execution workspace"
            }
            Self::Hook => "the plan workspace",
        }
    }

    /// What to do about a program that is not on `PATH`; empty when the role has no advice.
    fn install_hint(self) -> &'static str {
        match self {
            Self::Launcher => {
                "; install it (docs/providers.md, \"Installing the CLIs and the launchers\") or add its directory to PATH"
            }
            Self::Agent | Self::Hook | Self::VerifyInterpreter => "",
        }
    }
}

impl ProgramProblem {
    /// The message for a program of `role`.
    pub(crate) fn describe(&self, role: ProgramRole) -> String {
        let noun = role.noun();
        match self {
            Self::PathMissing { program, looked_at } => {
                let note = if program.starts_with('/') {
                    String::new()
                } else {
                    format!(
                        " (a relative program path is resolved against {})",
                        role.relative_to()
                    )
                };
                format!(
                    "{noun} '{program}' not found: no file at {}{note}",
                    looked_at.display()
                )
            }
            Self::NotInPath { program, searched } => {
                let searched: Vec<_> = searched
                    .iter()
                    .map(|dir| dir.display().to_string())
                    .collect();
                format!(
                    "{noun} '{program}' not found in PATH (searched {}){}",
                    searched.join(", "),
                    role.install_hint()
                )
            }
            Self::EmptyPath { program } => format!(
                "{noun} '{program}' is not in PATH: PATH is empty{}",
                role.install_hint()
            ),
            Self::NotExecutable { program, path } => format!(
                "{noun} '{program}' at {} is not executable; make it executable (chmod +x) or name another program",
                path.display()
            ),
            Self::Directory { program, path } => format!(
                "{noun} '{program}' at {} is a directory, not a program",
                path.display()
            ),
            Self::Unreadable {
                program,
                path,
                source,
            } => format!(
                "cannot check {noun} '{program}' at {}: {}",
                path.display(),
                os_message(source)
            ),
        }
    }
}

impl std::fmt::Display for ProgramProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe(ProgramRole::Agent))
    }
}

/// Whether resolving `program` depends on the worker's working directory: a relative path,
/// or a bare name while `PATH` holds a relative (or empty, meaning current) directory.
pub(crate) fn depends_on_cwd(program: &str) -> bool {
    depends_on_cwd_with(program, std::env::var_os("PATH").as_deref())
}

/// Resolves `program` as `exec` would for a worker started in `cwd`, with the handler's
/// `PATH`; returns the file that would run.
pub(crate) fn resolve(program: &str, cwd: &Path) -> Result<PathBuf, ProgramProblem> {
    resolve_with(program, cwd, std::env::var_os("PATH").as_deref())
}

fn depends_on_cwd_with(program: &str, path_var: Option<&OsStr>) -> bool {
    if program.contains('/') {
        return !program.starts_with('/');
    }
    search_dirs(path_var)
        .iter()
        .any(|dir| !dir.as_os_str().as_bytes().starts_with(b"/"))
}

/// `PATH` split as `execvp` splits it: an empty entry means the current directory.
fn search_dirs(path_var: Option<&OsStr>) -> Vec<PathBuf> {
    let var = path_var.unwrap_or(OsStr::new(DEFAULT_PATH));
    if var.is_empty() {
        return Vec::new();
    }
    var.as_bytes()
        .split(|byte| *byte == b':')
        .map(|entry| {
            if entry.is_empty() {
                PathBuf::from(".")
            } else {
                PathBuf::from(OsStr::from_bytes(entry))
            }
        })
        .collect()
}

fn resolve_with(
    program: &str,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, ProgramProblem> {
    if program.contains('/') {
        let path = under(cwd, Path::new(program));
        let program = program.to_owned();
        return match probe(&path) {
            Ok(Probe::Runnable) => Ok(path),
            Ok(Probe::Missing) => Err(ProgramProblem::PathMissing {
                program,
                looked_at: path,
            }),
            Ok(Probe::NotExecutable) => Err(ProgramProblem::NotExecutable { program, path }),
            Ok(Probe::Directory) => Err(ProgramProblem::Directory { program, path }),
            Err(source) => Err(ProgramProblem::Unreadable {
                program,
                path,
                source,
            }),
        };
    }
    let dirs = search_dirs(path_var);
    // Like execvp: the first executable file wins; a file found without permission is
    // remembered, and reported only when nothing later in PATH runs either.
    let mut not_executable = None;
    for dir in &dirs {
        let path = under(under(cwd, dir), Path::new(program));
        if let Ok(Probe::Runnable) = probe(&path) {
            return Ok(path);
        }
        if not_executable.is_none()
            && let Ok(Probe::NotExecutable) = probe(&path)
        {
            not_executable = Some(path);
        }
    }
    let program = program.to_owned();
    if dirs.is_empty() {
        return Err(ProgramProblem::EmptyPath { program });
    }
    Err(match not_executable {
        Some(path) => ProgramProblem::NotExecutable { program, path },
        None => ProgramProblem::NotInPath {
            program,
            searched: dirs,
        },
    })
}

/// How much of a program file is read to find its `#!` line (the kernel reads at most 256).
const SHEBANG_BYTES: u64 = 256;

/// Looks at the program a failed launch tried to run (`error` is the launch's error) and
/// explains the failure: a directory, a script whose interpreter is missing, or the OS error.
/// Blocking file reads: call it off the runtime threads.
pub(crate) fn launch_problem(program: &str, cwd: &str, error: &io::Error) -> LaunchProblem {
    let cwd = Path::new(cwd);
    // The file `execvp` tried: the path, or the first existing entry on `PATH`.
    let resolved = if program.is_empty() {
        None
    } else if program.contains('/') {
        Some(under(cwd, Path::new(program)))
    } else {
        search_dirs(std::env::var_os("PATH").as_deref())
            .into_iter()
            .map(|dir| under(under(cwd, &dir), Path::new(program)))
            .find(|candidate| candidate.exists())
    };
    let metadata = resolved
        .as_deref()
        .and_then(|path| std::fs::metadata(path).ok());
    let head = match (&resolved, &metadata) {
        (Some(path), Some(metadata)) if metadata.is_file() => read_head(path),
        _ => None,
    };
    let interpreter_exists = head
        .as_deref()
        .and_then(shebang_interpreter)
        .map(|interpreter| cwd.join(interpreter).exists());
    explain(&ProgramFacts {
        program: program.to_owned(),
        os_message: os_message(error),
        not_found: error.kind() == io::ErrorKind::NotFound,
        is_directory: metadata.is_some_and(|metadata| metadata.is_dir()),
        head,
        interpreter_exists,
    })
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

/// `base` joined with `path` (which wins when absolute), without its `.` components, so
/// messages show `/ws/bin/agent` rather than `/ws/./bin/agent`.
fn under(base: impl AsRef<Path>, path: &Path) -> PathBuf {
    let mut joined = base.as_ref().to_path_buf();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            other => joined.push(other),
        }
    }
    joined
}

enum Probe {
    Runnable,
    Missing,
    NotExecutable,
    Directory,
}

fn probe(path: &Path) -> io::Result<Probe> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Probe::Missing);
        }
        Err(error) => return Err(error),
    };
    if metadata.is_dir() {
        return Ok(Probe::Directory);
    }
    // access(2) asks the kernel, so ACLs, a read-only `noexec` mount and root's rules count.
    Ok(match access(path, AccessFlags::X_OK) {
        Ok(()) => Probe::Runnable,
        Err(_) => Probe::NotExecutable,
    })
}

#[cfg(test)]
mod tests;
