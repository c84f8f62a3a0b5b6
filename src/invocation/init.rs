//! `init`'s work: create `.ai-session-handler/config.json` (the example config), the shared
//! `.ai-session-handler/plans/` directory (generated state) and `.ai-session-handler/.gitignore`
//! (which keeps that state out of git) in the current directory. Every refusal is checked
//! before anything is created; an existing config or `.gitignore` is never overwritten. Where
//! the example's agent program is missing, it also finds the provider wrappers that are
//! installed, for `init` to suggest.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::domain::config::{EXAMPLE_AGENT_PROGRAM, EXAMPLE_CONFIG};
use crate::platform::durable;
use crate::platform::locate::{HANDLER_DIR, os_message};
use crate::platform::program::{self, ProgramProblem};
use crate::wrapper::WRAPPERS;

/// `.ai-session-handler/.gitignore`: the generated state stays out of `git status`, the config
/// stays tracked.
const GITIGNORE: &str = "\
# Written by `ai-session-handler init`. config.json belongs in version control; plans/ is
# generated state (state.json, events.jsonl, hooks.log, prompts, transcripts, outcomes).
/plans/
";

/// What `init` created.
pub(crate) struct Initialized {
    pub config_path: PathBuf,
    pub plans_dir: PathBuf,
    pub gitignore_path: PathBuf,
    /// The `.gitignore` was there already and was kept as it is.
    pub gitignore_kept: bool,
    /// Why the example config's agent command would not start here (no `codex` in `PATH`),
    /// so `init` can say the config must be edited before `check` and `run` accept it.
    pub agent_problem: Option<ProgramProblem>,
    /// The provider wrappers that would start here, as `agent_cmd` would name them (their name
    /// when found in `PATH`, else their path beside this binary); looked for only when the
    /// example's agent is missing.
    pub wrappers: Vec<String>,
}

/// Why `init` created nothing (or not everything).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InitError {
    #[error("cannot read the current directory: {}", os_message(.0))]
    NoCurrentDir(io::Error),
    #[error("{}: config already exists; edit it or remove it first", .0.display())]
    ConfigExists(PathBuf),
    #[error("{}: exists but is not a directory; move it aside first", .0.display())]
    NotADirectory(PathBuf),
    #[error("{0}")]
    CreateDirs(io::Error),
    #[error("{0}")]
    CreateConfig(io::Error),
    #[error("{}: {source}", .path.display())]
    WriteConfig { path: PathBuf, source: io::Error },
    #[error("{}: {source}", .path.display())]
    WriteGitignore { path: PathBuf, source: io::Error },
}

/// Initializes the current directory as a plan workspace.
pub(crate) fn init_current_dir() -> Result<Initialized, InitError> {
    let cwd = std::env::current_dir().map_err(InitError::NoCurrentDir)?;
    let handler_dir = cwd.join(HANDLER_DIR);
    let config_path = handler_dir.join("config.json");
    let plans_dir = handler_dir.join("plans");
    // `symlink_metadata` also sees a dangling symlink where the config would go.
    if config_path.symlink_metadata().is_ok() {
        return Err(InitError::ConfigExists(config_path));
    }
    for dir in [&handler_dir, &plans_dir] {
        if dir.exists() && !dir.is_dir() {
            return Err(InitError::NotADirectory(dir.clone()));
        }
    }
    durable::create_dir_all_durably(&plans_dir).map_err(InitError::CreateDirs)?;
    write_config(&config_path)?;
    let gitignore_path = handler_dir.join(".gitignore");
    let gitignore_kept = !write_gitignore(&gitignore_path)?;
    let agent_problem = program::resolve(EXAMPLE_AGENT_PROGRAM, &cwd).err();
    let wrappers = if agent_problem.is_some() {
        installed_wrappers(&cwd)
    } else {
        Vec::new()
    };
    Ok(Initialized {
        config_path,
        plans_dir,
        gitignore_path,
        gitignore_kept,
        agent_problem,
        wrappers,
    })
}

/// Writes the `.gitignore`; `false` when one exists (in any form: a link too), which is kept.
fn write_gitignore(path: &Path) -> Result<bool, InitError> {
    let write_error = |source| InitError::WriteGitignore {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match durable::create_new(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
        Err(error) => return Err(write_error(error)),
    };
    file.write_all(GITIGNORE.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_error)?;
    Ok(true)
}

/// The provider wrappers that would start here: by name when `PATH` finds them, else by path
/// when they sit beside this binary (a build tree, or an install directory not in `PATH`).
fn installed_wrappers(cwd: &Path) -> Vec<String> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    WRAPPERS
        .iter()
        .filter_map(|(name, _)| {
            if program::resolve(name, cwd).is_ok() {
                return Some((*name).to_owned());
            }
            let path = beside.as_ref()?.join(name);
            let path = path.to_str()?;
            program::resolve(path, cwd).ok().map(|_| path.to_owned())
        })
        .collect()
}

fn write_config(path: &Path) -> Result<(), InitError> {
    let mut file = durable::create_new(path).map_err(|error| {
        if error.kind() == io::ErrorKind::AlreadyExists {
            InitError::ConfigExists(path.to_path_buf())
        } else {
            InitError::CreateConfig(error)
        }
    })?;
    file.write_all(EXAMPLE_CONFIG.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| InitError::WriteConfig {
            path: path.to_path_buf(),
            source,
        })
}
