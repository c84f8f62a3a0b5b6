//! Reading what an attempt changed with read-only `git` (docs/state-and-recovery.md, "What an
//! attempt changed"). Never a commit, stash, checkout or write of the repository's index: the
//! working tree is snapshotted through a private copy of the index (`GIT_INDEX_FILE`), which
//! adds only unreferenced objects to the object store, and every command runs with
//! `--no-optional-locks` and no hooks.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::domain::changes::{ChangeSummary, Changes, Unrecorded, summarize};

/// The whole snapshot or comparison must finish within this; a slower git leaves the changes
/// unrecorded and the attempt unharmed.
pub(crate) const GIT_TIME_LIMIT: Duration = Duration::from_secs(10);

/// The work tree as it was at one moment: HEAD and a tree object of every file (tracked or
/// not, ignored files left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeSnapshot {
    top_level: PathBuf,
    head: Option<String>,
    tree: String,
}

/// Why a snapshot or comparison was not made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NotRecorded {
    pub(crate) reason: Unrecorded,
    pub(crate) detail: String,
}

impl NotRecorded {
    pub(crate) fn into_changes(self) -> Changes {
        Changes::Unrecorded {
            reason: self.reason,
            detail: self.detail,
        }
    }
}

/// Snapshots the work tree holding `workspace`.
pub(crate) fn snapshot(workspace: &Path) -> Result<TreeSnapshot, NotRecorded> {
    // git finds its repository through a `.git` in the directory or above (or GIT_DIR); with
    // neither there is no work tree, and no git process needs to say so.
    let discoverable = std::env::var_os("GIT_DIR").is_some()
        || workspace
            .ancestors()
            .any(|dir| dir.join(".git").symlink_metadata().is_ok());
    if !discoverable {
        return Err(NotRecorded {
            reason: Unrecorded::NotAGitWorkTree,
            detail: format!("no .git in {} or above", workspace.display()),
        });
    }
    let deadline = Instant::now() + GIT_TIME_LIMIT;
    // git exits 128 outside a work tree; its own words say why (no repository, or one it
    // will not use, such as a repository of another user).
    let inside = git(workspace, ["rev-parse", "--show-toplevel"], None, deadline).map_err(
        |not| match not.reason {
            Unrecorded::GitFailed => NotRecorded {
                reason: Unrecorded::NotAGitWorkTree,
                ..not
            },
            Unrecorded::NotAGitWorkTree | Unrecorded::GitMissing | Unrecorded::TimedOut => not,
        },
    )?;
    let top_level = PathBuf::from(String::from_utf8_lossy(&inside).trim_end_matches('\n'));
    let head = git(
        &top_level,
        ["rev-parse", "--verify", "-q", "HEAD"],
        None,
        deadline,
    )
    .ok()
    .map(|head| String::from_utf8_lossy(&head).trim().to_owned())
    .filter(|head| !head.is_empty());
    let private_dir = tempfile::TempDir::new().map_err(|error| NotRecorded {
        reason: Unrecorded::GitFailed,
        detail: format!("cannot create a private index: {error}"),
    })?;
    let index = private_dir.path().join("index");
    // Starting from a copy of the real index lets `git add` skip files whose stat data is
    // unchanged; without one (a fresh repository) it hashes every file.
    let real_index = git(
        &top_level,
        ["rev-parse", "--git-path", "index"],
        None,
        deadline,
    )?;
    let real_index = top_level.join(String::from_utf8_lossy(&real_index).trim_end_matches('\n'));
    let _ = std::fs::copy(&real_index, &index);
    let private = Some(index.as_path());
    // The runner's own files (state, prompts, transcripts) are not the attempt's changes.
    let pathspec = [
        "add",
        "--all",
        "--",
        ".",
        ":(exclude,glob)**/.ai-session-handler/**",
    ];
    git(&top_level, pathspec, private, deadline)?;
    let tree = git(&top_level, ["write-tree"], private, deadline)?;
    Ok(TreeSnapshot {
        top_level,
        head,
        tree: String::from_utf8_lossy(&tree).trim().to_owned(),
    })
}

/// What changed from `before` to `after`.
pub(crate) fn compare(before: &TreeSnapshot, after: &TreeSnapshot) -> Changes {
    compare_trees(before, after).unwrap_or_else(NotRecorded::into_changes)
}

fn compare_trees(before: &TreeSnapshot, after: &TreeSnapshot) -> Result<Changes, NotRecorded> {
    let deadline = Instant::now() + GIT_TIME_LIMIT;
    let dir = &after.top_level;
    let trees = [before.tree.as_str(), after.tree.as_str()];
    let diff = |format: &'static str| {
        let mut args = vec!["diff", "-z", "-M", "--no-ext-diff", "--no-textconv", format];
        args.extend(trees);
        git(dir, args, None, deadline)
    };
    let name_status = diff("--name-status")?;
    let numstat = diff("--numstat")?;
    let log = match (&before.head, &after.head) {
        (_, None) => Vec::new(),
        (Some(old), Some(new)) if old == new => Vec::new(),
        (old, Some(new)) => {
            let range = match old {
                Some(old) => format!("{old}..{new}"),
                None => new.clone(),
            };
            git(
                dir,
                ["log", "-z", "--format=%H%x00%s", range.as_str()],
                None,
                deadline,
            )?
        }
    };
    let summary: ChangeSummary = summarize(
        before.head.clone(),
        after.head.clone(),
        &name_status,
        &numstat,
        &log,
    )
    .map_err(|error| NotRecorded {
        reason: Unrecorded::GitFailed,
        detail: error.to_string(),
    })?;
    Ok(Changes::Recorded(summary))
}

/// Runs `git <args>` in `dir` until `deadline`, with the private `index` when given; returns
/// its standard output. Its own process group, so a hung git and anything it started are
/// killed together.
fn git<I, S>(
    dir: &Path,
    args: I,
    index: Option<&Path>,
    deadline: Instant,
) -> Result<Vec<u8>, NotRecorded>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new("git");
    command
        .args(["--no-optional-locks", "-c", "core.hooksPath=/dev/null"])
        .args(["-c", "core.fsmonitor=false", "-c", "core.quotepath=off"])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_INDEX_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(index) = index {
        command.env("GIT_INDEX_FILE", index);
    }
    let output = run_bounded(command, deadline).map_err(|error| match error {
        BoundedError::NotFound => NotRecorded {
            reason: Unrecorded::GitMissing,
            detail: "git is not installed (not found on PATH)".to_owned(),
        },
        BoundedError::TimedOut => NotRecorded {
            reason: Unrecorded::TimedOut,
            detail: format!(
                "git took longer than {} s and was stopped",
                GIT_TIME_LIMIT.as_secs()
            ),
        },
        BoundedError::Io(error) => NotRecorded {
            reason: Unrecorded::GitFailed,
            detail: format!("cannot run git: {error}"),
        },
    })?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(NotRecorded {
        reason: Unrecorded::GitFailed,
        detail: stderr.lines().next().unwrap_or("").trim().to_owned(),
    })
}

// TODO(lead): replaced by the process-group runner when it lands.
enum BoundedError {
    NotFound,
    TimedOut,
    Io(std::io::Error),
}

fn run_bounded(
    mut command: Command,
    deadline: Instant,
) -> Result<std::process::Output, BoundedError> {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    let mut child = command.spawn().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            BoundedError::NotFound
        } else {
            BoundedError::Io(error)
        }
    })?;
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    use std::io::Read as _;
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    loop {
        if let Some(status) = child.try_wait().map_err(BoundedError::Io)? {
            return Ok(std::process::Output {
                status,
                stdout: stdout.join().unwrap_or_default(),
                stderr: stderr.join().unwrap_or_default(),
            });
        }
        if Instant::now() >= deadline {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            return Err(BoundedError::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests;
