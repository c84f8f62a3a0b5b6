//! `init`'s work: create `.ai-session-handler/config.json` (the example config) and the shared
//! `.ai-session-handler/plans/` directory in the current directory. Every refusal is checked
//! before anything is created, and an existing config is never overwritten.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::domain::config::{EXAMPLE_AGENT_PROGRAM, EXAMPLE_CONFIG};
use crate::platform::durable;
use crate::platform::locate::{HANDLER_DIR, os_message};
use crate::platform::program::{self, ProgramProblem};

/// What `init` created.
pub(crate) struct Initialized {
    pub config_path: PathBuf,
    pub plans_dir: PathBuf,
    /// Why the example config's agent command would not start here (no `codex` in `PATH`),
    /// so `init` can say the config must be edited before `check` and `run` accept it.
    pub agent_problem: Option<ProgramProblem>,
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
    let agent_problem = program::resolve(EXAMPLE_AGENT_PROGRAM, &cwd).err();
    Ok(Initialized {
        config_path,
        plans_dir,
        agent_problem,
    })
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
