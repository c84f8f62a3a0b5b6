//! What an attempt changed in its git work tree (docs/state-and-recovery.md, "What an attempt
//! changed"): the outcome's `changes` record, built from what read-only `git` printed before
//! the launch and after the group was stopped. Parsing git's `-z` output lives here; running
//! git is `platform::git`.

use serde::{Deserialize, Serialize};

/// At most this many files are listed; the rest are counted.
pub(crate) const LISTED_FILES: usize = 100;
/// At most this many commits are listed; the rest are counted.
pub(crate) const LISTED_COMMITS: usize = 20;

/// The outcome's `changes`: what the attempt changed, or why that is not known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "recorded", deny_unknown_fields)]
pub enum Changes {
    #[serde(rename = "yes")]
    Recorded(ChangeSummary),
    #[serde(rename = "no")]
    Unrecorded {
        /// Why: `not-a-git-work-tree`, `git-missing`, `timed-out`, `git-failed`.
        reason: Unrecorded,
        /// The words, e.g. git's own error line.
        detail: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unrecorded {
    NotAGitWorkTree,
    GitMissing,
    TimedOut,
    GitFailed,
}

/// What changed between the work tree before the launch and after the group was stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeSummary {
    /// HEAD before the launch and after the stop (null on a branch with no commit yet).
    pub head_before: Option<String>,
    pub head_after: Option<String>,
    /// The commits made (reachable from the new HEAD, not from the old), newest first.
    pub commits: Vec<Commit>,
    /// Commits made beyond those listed.
    pub commits_not_listed: usize,
    /// The files whose content or name changed, in git's order (by path).
    pub files: Vec<FileChange>,
    /// Files changed beyond those listed.
    pub files_not_listed: usize,
    /// Text lines added and removed over every changed file (binary files count none).
    pub lines_added: u64,
    pub lines_removed: u64,
}

impl Changes {
    /// Whether the attempt changed nothing: `None` when that is not known.
    pub fn changed_nothing(&self) -> Option<bool> {
        match self {
            Self::Recorded(summary) => Some(summary.is_empty()),
            Self::Unrecorded { .. } => None,
        }
    }
}

impl ChangeSummary {
    /// Neither a commit nor a changed file.
    pub fn is_empty(&self) -> bool {
        self.head_before == self.head_after
            && self.commits.is_empty()
            && self.commits_not_listed == 0
            && self.files.is_empty()
            && self.files_not_listed == 0
    }

    /// How many files changed, listed or not.
    pub fn file_count(&self) -> usize {
        self.files.len() + self.files_not_listed
    }

    /// How many commits were made, listed or not.
    pub fn commit_count(&self) -> usize {
        self.commits.len() + self.commits_not_listed
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileChange {
    pub path: String,
    pub change: ChangeKind,
    /// The old path of a renamed file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Lines added and removed; null for a binary file.
    pub lines_added: Option<u64>,
    pub lines_removed: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    Renamed,
}

impl ChangeKind {
    /// The one-letter column of `git status --short`.
    pub fn letter(self) -> char {
        match self {
            Self::Added => 'A',
            Self::Modified => 'M',
            Self::Deleted => 'D',
            Self::Renamed => 'R',
        }
    }
}

/// Git printed something the parsers do not read: the changes are reported as `git-failed`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GitOutputError {
    #[error("git {0} ended inside an entry")]
    Truncated(&'static str),
    #[error("git diff --name-status printed an unknown status {0:?}")]
    UnknownStatus(char),
    #[error("git diff --numstat printed a count that is not a number")]
    BadCount,
}

/// Builds the summary from `git diff -z -M --name-status` and `--numstat` of the two trees and
/// `git log -z --format=%H%x00%s` of the new commits.
pub(crate) fn summarize(
    head_before: Option<String>,
    head_after: Option<String>,
    name_status: &[u8],
    numstat: &[u8],
    log: &[u8],
) -> Result<ChangeSummary, GitOutputError> {
    let mut files = parse_name_status(name_status)?;
    let lines = parse_numstat(numstat)?;
    let (mut lines_added, mut lines_removed) = (0, 0);
    for file in &mut files {
        if let Some(&(added, removed)) = lines
            .iter()
            .find_map(|(path, counts)| (path == &file.path).then_some(counts))
        {
            file.lines_added = added;
            file.lines_removed = removed;
            lines_added += added.unwrap_or(0);
            lines_removed += removed.unwrap_or(0);
        }
    }
    let files_not_listed = files.len().saturating_sub(LISTED_FILES);
    files.truncate(LISTED_FILES);
    let mut commits = parse_log(log)?;
    let commits_not_listed = commits.len().saturating_sub(LISTED_COMMITS);
    commits.truncate(LISTED_COMMITS);
    Ok(ChangeSummary {
        head_before,
        head_after,
        commits,
        commits_not_listed,
        files,
        files_not_listed,
        lines_added,
        lines_removed,
    })
}

/// `STATUS\0path\0` entries, a rename (`R<score>`) or copy with two paths.
fn parse_name_status(bytes: &[u8]) -> Result<Vec<FileChange>, GitOutputError> {
    let mut fields = nul_fields(bytes);
    let mut files = Vec::new();
    while let Some(status) = fields.next() {
        let Some(&code) = status.first() else {
            continue;
        };
        let mut path = || {
            fields
                .next()
                .map(|path| String::from_utf8_lossy(path).into_owned())
                .ok_or(GitOutputError::Truncated("diff --name-status"))
        };
        let (change, from, path) = match code {
            b'A' => (ChangeKind::Added, None, path()?),
            b'M' | b'T' => (ChangeKind::Modified, None, path()?),
            b'D' => (ChangeKind::Deleted, None, path()?),
            b'R' => {
                let from = path()?;
                (ChangeKind::Renamed, Some(from), path()?)
            }
            // Only with copy detection, which is not asked for; a copy is a new file.
            b'C' => {
                let _source = path()?;
                (ChangeKind::Added, None, path()?)
            }
            other => return Err(GitOutputError::UnknownStatus(char::from(other))),
        };
        files.push(FileChange {
            path,
            change,
            from,
            lines_added: None,
            lines_removed: None,
        });
    }
    Ok(files)
}

/// Lines added and removed per (new) path; `None` for a binary file (`-\t-`).
type LineCounts = (Option<u64>, Option<u64>);

/// `added\tremoved\tpath\0`, or `added\tremoved\t\0from\0to\0` for a rename.
fn parse_numstat(bytes: &[u8]) -> Result<Vec<(String, LineCounts)>, GitOutputError> {
    let mut fields = nul_fields(bytes);
    let mut counts = Vec::new();
    while let Some(entry) = fields.next() {
        if entry.is_empty() {
            continue;
        }
        let truncated = GitOutputError::Truncated("diff --numstat");
        let mut columns = entry.splitn(3, |&byte| byte == b'\t');
        let added = parse_count(columns.next().ok_or(truncated.clone())?)?;
        let removed = parse_count(columns.next().ok_or(truncated.clone())?)?;
        let path = match columns.next().ok_or(truncated.clone())? {
            b"" => {
                let _from = fields.next().ok_or(truncated.clone())?;
                fields.next().ok_or(truncated)?
            }
            path => path,
        };
        counts.push((String::from_utf8_lossy(path).into_owned(), (added, removed)));
    }
    Ok(counts)
}

/// The NUL-terminated fields of `-z` output (none for empty output).
fn nul_fields(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    bytes
        .split(|&byte| byte == 0)
        .take(if bytes.is_empty() { 0 } else { usize::MAX })
}

fn parse_count(column: &[u8]) -> Result<Option<u64>, GitOutputError> {
    if column == b"-" {
        return Ok(None);
    }
    std::str::from_utf8(column)
        .ok()
        .and_then(|text| text.parse().ok())
        .map(Some)
        .ok_or(GitOutputError::BadCount)
}

/// `sha\0subject\0` pairs (`git log -z --format=%H%x00%s`: each record ends in NUL).
fn parse_log(bytes: &[u8]) -> Result<Vec<Commit>, GitOutputError> {
    let mut fields = nul_fields(bytes);
    let mut commits = Vec::new();
    while let Some(sha) = fields.next() {
        let subject = fields.next().ok_or(GitOutputError::Truncated("log"))?;
        commits.push(Commit {
            sha: String::from_utf8_lossy(sha).into_owned(),
            subject: String::from_utf8_lossy(subject).into_owned(),
        });
    }
    Ok(commits)
}

#[cfg(test)]
mod tests;
