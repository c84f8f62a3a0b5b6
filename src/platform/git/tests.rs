use std::fs;
use std::process::Command;

use super::*;
use crate::domain::changes::ChangeKind;

fn sh(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    sh(
        dir.path(),
        "git init -q && printf 'a\\nb\\nc\\n' > keep.txt && seq 1 20 > old.txt && echo x > gone.txt \
         && echo '*.log' > .gitignore && git add -A && git commit -qm init",
    );
    dir
}

fn recorded(changes: Changes) -> ChangeSummary {
    match changes {
        Changes::Recorded(summary) => summary,
        Changes::Unrecorded { reason, detail } => panic!("{reason:?}: {detail}"),
    }
}

#[test]
fn commits_renames_binary_files_and_a_dirty_tree_before_the_launch() {
    let dir = repository();
    // Dirty before the launch: the attempt did not make this change.
    sh(
        dir.path(),
        "echo dirty >> keep.txt && echo untracked > before.txt",
    );
    let index_before = fs::read(dir.path().join(".git/index")).unwrap();
    let before = snapshot(dir.path()).unwrap();
    sh(
        dir.path(),
        "mkdir -p .ai-session-handler/plans/k && echo s > .ai-session-handler/plans/k/state.json",
    );
    sh(
        dir.path(),
        "git mv old.txt renamed.txt && rm gone.txt && printf '\\000\\001bin' > blob.bin \
         && echo new > added.txt && echo noise > ignored.log && echo more >> keep.txt \
         && git add renamed.txt && git commit -qm 'the agent commits'",
    );
    let index_after_agent = fs::read(dir.path().join(".git/index")).unwrap();
    let after = snapshot(dir.path()).unwrap();
    assert_eq!(
        fs::read(dir.path().join(".git/index")).unwrap(),
        index_after_agent,
        "the repository's index is never written"
    );
    assert_ne!(index_before, index_after_agent);
    let summary = recorded(compare(&before, &after));
    let files: Vec<_> = summary
        .files
        .iter()
        .map(|file| (file.change, file.from.as_deref(), file.path.as_str()))
        .collect();
    assert_eq!(
        files,
        [
            (ChangeKind::Added, None, "added.txt"),
            (ChangeKind::Added, None, "blob.bin"),
            (ChangeKind::Deleted, None, "gone.txt"),
            (ChangeKind::Modified, None, "keep.txt"),
            (ChangeKind::Renamed, Some("old.txt"), "renamed.txt"),
        ]
    );
    let blob = &summary.files[1];
    assert_eq!(
        (blob.lines_added, blob.lines_removed),
        (None, None),
        "binary"
    );
    assert_eq!(
        summary.files[3].lines_added,
        Some(1),
        "only the attempt's line counts"
    );
    assert_eq!(summary.commits.len(), 1);
    assert_eq!(summary.commits[0].subject, "the agent commits");
    assert_ne!(summary.head_before, summary.head_after);
    assert_eq!((summary.lines_added, summary.lines_removed), (2, 1));
    // git status still shows what it showed: nothing was staged or committed for us.
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let status = String::from_utf8(status.stdout).unwrap();
    assert!(status.contains("?? added.txt"), "{status}");
    assert!(status.contains(" D gone.txt"), "{status}");
}

#[test]
fn nothing_changed_is_recorded_as_empty() {
    let dir = repository();
    let before = snapshot(dir.path()).unwrap();
    let after = snapshot(dir.path()).unwrap();
    assert!(recorded(compare(&before, &after)).is_empty());
}

#[test]
fn a_workspace_below_the_top_level_sees_the_whole_work_tree() {
    let dir = repository();
    sh(dir.path(), "mkdir -p sub/ws");
    let workspace = dir.path().join("sub/ws");
    let before = snapshot(&workspace).unwrap();
    sh(
        dir.path(),
        "echo y > elsewhere.txt && echo z > sub/ws/here.txt",
    );
    let summary = recorded(compare(&before, &snapshot(&workspace).unwrap()));
    let paths: Vec<_> = summary
        .files
        .iter()
        .map(|file| file.path.as_str())
        .collect();
    assert_eq!(paths, ["elsewhere.txt", "sub/ws/here.txt"]);
}

#[test]
fn outside_a_work_tree_it_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let error = snapshot(dir.path()).unwrap_err();
    assert_eq!(error.reason, Unrecorded::NotAGitWorkTree, "{error:?}");
    assert!(!error.detail.is_empty());
}

#[test]
fn a_fresh_repository_without_commits() {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), "git init -q");
    let before = snapshot(dir.path()).unwrap();
    sh(
        dir.path(),
        "echo a > a.txt && git add a.txt && git commit -qm first",
    );
    let summary = recorded(compare(&before, &snapshot(dir.path()).unwrap()));
    assert_eq!(summary.head_before, None);
    assert!(summary.head_after.is_some());
    assert_eq!(summary.commits.len(), 1);
    assert_eq!(summary.files.len(), 1);
}
