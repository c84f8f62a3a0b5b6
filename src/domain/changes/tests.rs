use super::*;

// Printed by git 2.47 for: added.txt and bin.dat new, gone.txt deleted, keep.txt edited,
// old.txt renamed to "new name.txt", one commit made.
const NAME_STATUS: &[u8] =
    b"A\0added.txt\0A\0bin.dat\0D\0gone.txt\0M\0keep.txt\0R100\0old.txt\0new name.txt\0";
const NUMSTAT: &[u8] = concat!(
    "1\t0\tadded.txt\0",
    "-\t-\tbin.dat\0",
    "0\t1\tgone.txt\0",
    "2\t1\tkeep.txt\0",
    "0\t0\t\0old.txt\0new name.txt\0",
)
.as_bytes();
const LOG: &[u8] = b"34d38f3c7c067926e45f99b999693167a1a79e3d\0second: tweak\0";

fn summary() -> ChangeSummary {
    summarize(
        Some("aaa".to_owned()),
        Some("bbb".to_owned()),
        NAME_STATUS,
        NUMSTAT,
        LOG,
    )
    .unwrap()
}

#[test]
fn every_kind_of_change_with_its_lines() {
    let summary = summary();
    let rows: Vec<_> = summary
        .files
        .iter()
        .map(|file| {
            (
                file.change,
                file.from.as_deref(),
                file.path.as_str(),
                file.lines_added,
                file.lines_removed,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (ChangeKind::Added, None, "added.txt", Some(1), Some(0)),
            (ChangeKind::Added, None, "bin.dat", None, None),
            (ChangeKind::Deleted, None, "gone.txt", Some(0), Some(1)),
            (ChangeKind::Modified, None, "keep.txt", Some(2), Some(1)),
            (
                ChangeKind::Renamed,
                Some("old.txt"),
                "new name.txt",
                Some(0),
                Some(0)
            ),
        ]
    );
    assert_eq!((summary.lines_added, summary.lines_removed), (3, 2));
    assert_eq!(summary.commits.len(), 1);
    assert_eq!(summary.commits[0].subject, "second: tweak");
    assert_eq!(summary.commit_count(), 1);
    assert!(!summary.is_empty());
}

#[test]
fn nothing_changed_is_empty() {
    let same = summarize(Some("a".into()), Some("a".into()), b"", b"", b"").unwrap();
    assert!(same.is_empty());
    assert_eq!(same.file_count(), 0);
    let moved = summarize(Some("a".into()), Some("b".into()), b"", b"", b"").unwrap();
    assert!(!moved.is_empty(), "a reset HEAD is a change");
}

#[test]
fn long_lists_are_capped_and_counted() {
    let mut name_status = Vec::new();
    let mut numstat = Vec::new();
    for index in 0..LISTED_FILES + 7 {
        name_status.extend_from_slice(format!("M\0f{index:04}\0").as_bytes());
        numstat.extend_from_slice(format!("1\t1\tf{index:04}\0").as_bytes());
    }
    let mut log = Vec::new();
    for index in 0..LISTED_COMMITS + 3 {
        log.extend_from_slice(format!("{index:040}\0commit {index}\0").as_bytes());
    }
    let summary = summarize(None, Some("b".into()), &name_status, &numstat, &log).unwrap();
    assert_eq!(summary.files.len(), LISTED_FILES);
    assert_eq!(summary.files_not_listed, 7);
    assert_eq!(summary.file_count(), LISTED_FILES + 7);
    assert_eq!(
        summary.lines_added,
        (LISTED_FILES + 7) as u64,
        "every file's lines count"
    );
    assert_eq!(
        (summary.commits.len(), summary.commits_not_listed),
        (LISTED_COMMITS, 3)
    );
}

#[test]
fn output_git_should_not_print_is_an_error() {
    assert_eq!(
        summarize(None, None, b"X\0a\0", b"", b""),
        Err(GitOutputError::UnknownStatus('X'))
    );
    assert_eq!(
        summarize(None, None, b"R100\0only-one\0", b"", b""),
        Err(GitOutputError::Truncated("diff --name-status"))
    );
    assert_eq!(
        summarize(None, None, b"", b"x\t1\tf\0", b""),
        Err(GitOutputError::BadCount)
    );
    assert_eq!(
        summarize(None, None, b"", b"", b"sha-without-subject"),
        Err(GitOutputError::Truncated("log"))
    );
}

#[test]
fn the_record_round_trips_and_names_its_form() {
    let recorded = Changes::Recorded(summary());
    let json = serde_json::to_value(&recorded).unwrap();
    assert_eq!(json["recorded"], "yes");
    assert_eq!(json["files"][4]["from"], "old.txt");
    assert!(json["files"][0].get("from").is_none());
    assert_eq!(serde_json::from_value::<Changes>(json).unwrap(), recorded);
    let unrecorded = Changes::Unrecorded {
        reason: Unrecorded::NotAGitWorkTree,
        detail: "x".into(),
    };
    let json = serde_json::to_value(&unrecorded).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"recorded": "no", "reason": "not-a-git-work-tree", "detail": "x"})
    );
    let extra = serde_json::json!({"recorded": "no", "reason": "timed-out", "detail": "", "x": 1});
    assert!(serde_json::from_value::<Changes>(extra).is_err());
}
