//! Reading what an attempt changed with read-only `git` (docs/state-and-recovery.md, "What an
//! attempt changed"). Never a commit, stash, checkout or write of the repository's index: the
//! working tree is snapshotted through a private copy of the index (`GIT_INDEX_FILE`), which
//! adds only unreferenced objects to the object store, and every command runs with
//! `--no-optional-locks` and no hooks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::helper_process::{EscapeeSweep, HelperCommand, StopSwitch, run_helper};
use super::proc::ChildSnapshot;
use crate::domain::changes::{ChangeSummary, Changes, Unrecorded, summarize};
use crate::domain::output_stream::OutputStream;

/// The whole snapshot or comparison must finish within this; a slower git leaves the changes
/// unrecorded and the attempt unharmed.
pub(crate) const GIT_TIME_LIMIT: Duration = Duration::from_secs(10);

/// The work tree as it was at one moment: HEAD and a tree object of every file (tracked or
/// not, ignored files left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeSnapshot {
    top_level: PathBuf,
    /// The repository's own index, copied to start each snapshot from its stat data.
    index: PathBuf,
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
    let args = ["rev-parse", "--show-toplevel", "--git-path", "index"];
    let inside = git(workspace, args, None, deadline).map_err(|not| match not.reason {
        Unrecorded::GitFailed => NotRecorded {
            reason: Unrecorded::NotAGitWorkTree,
            ..not
        },
        Unrecorded::NotAGitWorkTree | Unrecorded::GitMissing | Unrecorded::TimedOut => not,
    })?;
    let inside = String::from_utf8_lossy(&inside);
    let mut lines = inside.lines();
    let top_level = PathBuf::from(lines.next().unwrap_or_default());
    // Relative to the directory git ran in.
    let index = workspace.join(lines.next().unwrap_or_default());
    snapshot_tree(top_level, index, deadline)
}

/// Snapshots the same work tree as `before`, again.
pub(crate) fn snapshot_again(before: &TreeSnapshot) -> Result<TreeSnapshot, NotRecorded> {
    let deadline = Instant::now() + GIT_TIME_LIMIT;
    snapshot_tree(before.top_level.clone(), before.index.clone(), deadline)
}

fn snapshot_tree(
    top_level: PathBuf,
    index: PathBuf,
    deadline: Instant,
) -> Result<TreeSnapshot, NotRecorded> {
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
    let private_index = private_dir.path().join("index");
    // Starting from a copy of the real index lets `git add` skip files whose stat data is
    // unchanged; without one (a fresh repository) it hashes every file.
    let _ = std::fs::copy(&index, &private_index);
    let private = Some(private_index.as_path());
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
        index,
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
/// its standard output. It runs as hooks and Verify checks do ([`run_helper`]): its own group,
/// registered with the watchdog, so a hung git and anything it started are stopped together.
fn git<'a>(
    dir: &Path,
    args: impl IntoIterator<Item = &'a str>,
    index: Option<&Path>,
    deadline: Instant,
) -> Result<Vec<u8>, NotRecorded> {
    let fixed = ["--no-optional-locks", "-c", "core.hooksPath=/dev/null"];
    let settings = ["-c", "core.fsmonitor=false", "-c", "core.quotepath=off"];
    let argv: Vec<String> = std::iter::once("git")
        .chain(fixed)
        .chain(settings)
        .chain(args)
        .map(str::to_owned)
        .collect();
    let mut env_set = vec![("GIT_TERMINAL_PROMPT".to_owned(), "0".to_owned())];
    if let Some(index) = index {
        env_set.push(("GIT_INDEX_FILE".to_owned(), index.display().to_string()));
    }
    let cannot_run = |error: std::io::Error| NotRecorded {
        reason: Unrecorded::GitFailed,
        detail: format!("cannot run git: {error}"),
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let command = HelperCommand {
        argv: &argv,
        cwd: dir,
        env_set: &env_set,
        stdin: None,
        time_limit: Some(deadline.saturating_duration_since(Instant::now())),
        // The handler's children now (hooks, a shell's jobs) are not git's: never touched.
        escapees: EscapeeSweep::Now(&ChildSnapshot::take()),
    };
    let mut sink = |stream: OutputStream, bytes: &[u8]| match stream {
        OutputStream::Stdout => stdout.extend_from_slice(bytes),
        OutputStream::Stderr => stderr.extend_from_slice(bytes),
    };
    let run = match run_helper(command, &mut sink, &StopSwitch::new().map_err(cannot_run)?) {
        Ok(run) => run,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(NotRecorded {
                reason: Unrecorded::GitMissing,
                detail: "git is not installed (not found on PATH)".to_owned(),
            });
        }
        Err(error) => return Err(cannot_run(error)),
    };
    if run.timed_out {
        return Err(NotRecorded {
            reason: Unrecorded::TimedOut,
            detail: format!(
                "git took longer than {} s and was stopped",
                GIT_TIME_LIMIT.as_secs()
            ),
        });
    }
    if run.succeeded() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&stderr);
    Err(NotRecorded {
        reason: Unrecorded::GitFailed,
        detail: stderr.lines().next().unwrap_or("").trim().to_owned(),
    })
}

#[cfg(test)]
mod tests;
