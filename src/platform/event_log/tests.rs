//! Tests of the event stream: appending, rotation, following across rotations and truncation, refused files, and the deferred progress line.

use super::*;
use std::fs::OpenOptions;

#[test]
fn lines_are_appended_and_the_file_rotates_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::start(path.clone(), 30).unwrap();
    for line in ["first line", "second line", "third line"] {
        log.append(line.to_owned());
    }
    log.drain(Duration::from_secs(10));
    assert_eq!(
        std::fs::read_to_string(rotated(&path)).unwrap(),
        "first line\nsecond line\n"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "third line\n");
}

#[test]
fn a_follower_sees_appended_lines_across_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut follower = Follower::new(path.clone());
    assert!(follower.read_new_lines().unwrap().is_empty(), "no file yet");
    std::fs::write(&path, "one\ntw").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["one"]);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"o\n").unwrap();
    std::fs::rename(&path, rotated(&path)).unwrap();
    std::fs::write(&path, "three\n").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["two", "three"]);
    assert!(follower.read_new_lines().unwrap().is_empty());
}

fn caught_up(follower: &mut Follower) -> Vec<String> {
    let mut lines = Vec::new();
    follower.catch_up(|line| lines.push(line)).unwrap();
    lines
}

#[test]
fn catching_up_reads_the_rotated_file_first_then_follows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    std::fs::write(rotated(&path), "one\ntwo\n").unwrap();
    std::fs::write(&path, "three\n").unwrap();
    let mut follower = Follower::new(path.clone());
    assert_eq!(caught_up(&mut follower), ["one", "two", "three"]);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"four\n").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["four"]);
}

#[test]
fn two_rotations_between_looks_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, "a1\n").unwrap();
    let mut follower = Follower::new(path.clone());
    assert_eq!(caught_up(&mut follower), ["a1"]);
    let mut first = OpenOptions::new().append(true).open(&path).unwrap();
    first.write_all(b"a2\n").unwrap();
    std::fs::rename(&path, rotated(&path)).unwrap();
    std::fs::write(&path, "b1\nb2\n").unwrap();
    std::fs::rename(&path, rotated(&path)).unwrap();
    std::fs::write(&path, "c1\n").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["a2", "b1", "b2", "c1"]);
}

#[test]
fn a_copy_truncate_is_read_again_from_the_start_and_no_line_is_glued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, "one\ntorn").unwrap();
    let mut follower = Follower::new(path.clone());
    assert_eq!(caught_up(&mut follower), ["one"]);
    // Truncated in place, then a fresh record: no "tornfresh".
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(0).unwrap();
    drop(file);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"fresh\n").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["fresh"]);
    // Truncated and written past the old length again before the next look.
    let truncating = OpenOptions::new().write(true).open(&path).unwrap();
    truncating.set_len(0).unwrap();
    drop(truncating);
    let mut again = OpenOptions::new().append(true).open(&path).unwrap();
    again.write_all(b"first after\nsecond after\n").unwrap();
    assert_eq!(
        follower.read_new_lines().unwrap(),
        ["first after", "second after"]
    );
    // A torn line at the end of a rotated file is not glued to the new file's first.
    file.write_all(b"cut").unwrap();
    std::fs::rename(&path, rotated(&path)).unwrap();
    std::fs::write(&path, "next\n").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["next"]);
}

#[test]
fn a_deleted_file_is_read_on_while_its_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, "one\n").unwrap();
    let mut writer = OpenOptions::new().append(true).open(&path).unwrap();
    let mut follower = Follower::new(path.clone());
    assert_eq!(caught_up(&mut follower), ["one"]);
    std::fs::remove_file(&path).unwrap();
    writer.write_all(b"run-finished\n").unwrap();
    assert_eq!(follower.read_new_lines().unwrap(), ["run-finished"]);
}

#[test]
fn a_line_too_long_to_keep_is_skipped_to_the_next_newline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut text = "x".repeat(MAX_LINE_BYTES + 10);
    text.push_str("\nafter\n");
    std::fs::write(&path, text).unwrap();
    let mut follower = Follower::new(path.clone());
    assert_eq!(caught_up(&mut follower), ["after"]);
}

#[test]
fn special_files_links_and_giant_files_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut follower = Follower::new(path.clone());
    let error = follower.catch_up(|_| {}).unwrap_err();
    assert_eq!(error.to_string(), "not a regular file (a FIFO)");
    std::fs::remove_file(&path).unwrap();
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(MAX_STREAM_BYTES + 1).unwrap();
    let error = Follower::new(path.clone()).catch_up(|_| {}).unwrap_err();
    assert!(
        error.to_string().starts_with("67108865 bytes is over"),
        "{error}"
    );
    std::fs::remove_file(&path).unwrap();
    std::fs::write(dir.path().join("elsewhere"), "x\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
    let error = Follower::new(path.clone()).catch_up(|_| {}).unwrap_err();
    assert!(
        error.to_string().starts_with("is a symbolic link"),
        "{error}"
    );
}

#[test]
fn an_existing_stream_is_continued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, "earlier run\n").unwrap();
    let log = EventLog::start(path.clone(), 1024).unwrap();
    log.append("this run".to_owned());
    log.drain(Duration::from_secs(10));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "earlier run\nthis run\n"
    );
}

fn deferred(text: &str, due: Instant) -> DeferredLine {
    DeferredLine {
        on_time: format!("{text} (on time)"),
        early: format!("{text} (early)"),
        due,
    }
}

#[test]
fn a_deferred_line_is_replaced_by_a_later_one_and_written_before_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::start(path.clone(), 1024).unwrap();
    let later = Instant::now() + Duration::from_secs(3600);
    log.append_at(deferred("progress 1", later));
    log.append_at(deferred("progress 2", later));
    log.append("finished".to_owned());
    log.drain(Duration::from_secs(10));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "progress 2 (early)\nfinished\n"
    );
}

#[test]
fn a_deferred_line_is_written_when_its_time_comes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::start(path.clone(), 1024).unwrap();
    log.append("first".to_owned());
    log.append_at(deferred("last of a burst", Instant::now()));
    // No other line follows: the deferred one still arrives, in its on-time form, without
    // a drain.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&path).unwrap_or_default() != "first\nlast of a burst (on time)\n"
    {
        assert!(Instant::now() < deadline, "the deferred line never came");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(log);
}

#[test]
fn lines_are_written_without_a_drain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::start(path.clone(), 1024).unwrap();
    for line in ["first", "second"] {
        log.append(line.to_owned());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&path).unwrap_or_default() != "first\nsecond\n" {
        assert!(Instant::now() < deadline, "the lines were never written");
        std::thread::sleep(Duration::from_millis(10));
    }
}
