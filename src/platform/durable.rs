//! Crash-safe file writes, every one under a directory opened without following a link
//! ([`no_follow`]) and each step a named failpoint (docs/architecture.md, "Durability"):
//! `state.json` replaced atomically ([`replace_atomically`]), outcomes created and fsynced
//! ([`write_new_durably`]), prompts and transcripts created without fsync ([`write_new`]).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::no_follow;

/// Makes the failpoint `name` return an injected I/O error when configured.
macro_rules! failpoint {
    ($name:expr) => {
        fail::fail_point!($name, |_| Err(io::Error::other(format!(
            "injected failure at failpoint {}",
            $name
        ))))
    };
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplaceError {
    /// Nothing changed: the target still holds its previous content.
    #[error("{0}")]
    NotReplaced(io::Error),
    /// The rename happened, so readers see the new content, but the directory fsync failed:
    /// whether it survives a power loss is unknown.
    #[error("replaced, but not durably: {0}")]
    NotDurable(io::Error),
}

/// Replaces `target` with `bytes`: a uniquely named temp file in the same directory, fsynced,
/// renamed over the target, then the directory fsynced, so a reader (or a crash) sees the old
/// document or the new one. `failpoint_label` names the steps' failpoints (`<label>-write`,
/// `-fsync`, `-rename`, `-dir-fsync`).
pub(crate) fn replace_atomically(
    target: &Path,
    bytes: &[u8],
    failpoint_label: &str,
) -> Result<(), ReplaceError> {
    replace(target, bytes, false, failpoint_label)
}

/// Like [`replace_atomically`], for a file a person owns (the plan): the new file keeps the
/// old one's permission bits.
pub(crate) fn replace_keeping_mode(
    target: &Path,
    bytes: &[u8],
    failpoint_label: &str,
) -> Result<(), ReplaceError> {
    replace(target, bytes, true, failpoint_label)
}

fn replace(
    target: &Path,
    bytes: &[u8],
    keep_mode: bool,
    failpoint_label: &str,
) -> Result<(), ReplaceError> {
    let (dir_path, file_name) = no_follow::split(target).map_err(ReplaceError::NotReplaced)?;
    let dir = no_follow::open_dir(dir_path).map_err(ReplaceError::NotReplaced)?;
    let mode = if keep_mode {
        let metadata = std::fs::metadata(target)
            .map_err(|error| ReplaceError::NotReplaced(with_path(error, target)))?;
        Some(metadata.permissions().mode())
    } else {
        None
    };
    let temp_name = OsString::from(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = write_and_rename(&dir, &temp_name, file_name, bytes, mode, failpoint_label);
    if let Err(error) = written {
        // The temp file is ours and unreferenced; leaving it would only confuse a reader.
        let _ = no_follow::remove_in(&dir, &temp_name);
        return Err(ReplaceError::NotReplaced(error));
    }
    sync_dir_labelled(&dir, dir_path, failpoint_label).map_err(ReplaceError::NotDurable)
}

#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn write_and_rename(
    dir: &OwnedFd,
    temp_name: &OsStr,
    target_name: &OsStr,
    bytes: &[u8],
    mode: Option<u32>,
    failpoint_label: &str,
) -> io::Result<()> {
    let mut temp = no_follow::create_new_in(dir, temp_name)?;
    if let Some(mode) = mode {
        temp.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    failpoint!(format!("{failpoint_label}-write").as_str());
    temp.write_all(bytes)?;
    failpoint!(format!("{failpoint_label}-fsync").as_str());
    temp.sync_all()?;
    drop(temp);
    failpoint!(format!("{failpoint_label}-rename").as_str());
    no_follow::rename_in(dir, temp_name, target_name)
}

#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn sync_dir_labelled(dir: &OwnedFd, dir_path: &Path, failpoint_label: &str) -> io::Result<()> {
    failpoint!(format!("{failpoint_label}-dir-fsync").as_str());
    no_follow::sync(dir).map_err(|error| with_path(error, dir_path))
}

/// Creates `path` exclusively: an existing file is reported, never touched.
pub(crate) fn create_new(path: &Path) -> io::Result<File> {
    let (dir_path, name) = no_follow::split(path)?;
    let dir = no_follow::open_dir(dir_path)?;
    create_in(&dir, name, path)
}

fn create_in(dir: &OwnedFd, name: &OsStr, path: &Path) -> io::Result<File> {
    no_follow::create_new_in(dir, name).map_err(|error| {
        if error.kind() == io::ErrorKind::AlreadyExists {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{}: attempt artifact already exists; refusing to overwrite it",
                    path.display()
                ),
            )
        } else {
            with_path(error, path)
        }
    })
}

/// Creates `path` exclusively with `bytes`, without forcing it to disk: for evidence (prompts,
/// transcripts), which the page cache keeps through a crash of the handler itself.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub(crate) fn write_new(path: &Path, bytes: &[u8], failpoint_label: &str) -> io::Result<File> {
    failpoint!(format!("{failpoint_label}-write").as_str());
    let mut file = create_new(path)?;
    file.write_all(bytes).map_err(|e| with_path(e, path))?;
    Ok(file)
}

/// Creates `path` exclusively with `bytes`, then fsyncs the file and its directory.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub(crate) fn write_new_durably(
    path: &Path,
    bytes: &[u8],
    failpoint_label: &str,
) -> io::Result<()> {
    let (dir_path, name) = no_follow::split(path)?;
    let dir = no_follow::open_dir(dir_path)?;
    let mut file = create_in(&dir, name, path)?;
    // The failpoint sits where a full disk strikes: after the file exists.
    if let Err(error) = write_step(&mut file, bytes, failpoint_label) {
        // A partly written record (a full disk) is evidence of nothing and would only be
        // mistaken for one: the file is ours, created a moment ago, so it goes.
        let _ = no_follow::remove_in(&dir, name);
        return Err(with_path(error, path));
    }
    fsync_step(&file, failpoint_label).map_err(|e| with_path(e, path))?;
    failpoint!(format!("{failpoint_label}-dir-fsync").as_str());
    no_follow::sync(&dir).map_err(|error| with_path(error, dir_path))
}

#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn write_step(file: &mut File, bytes: &[u8], failpoint_label: &str) -> io::Result<()> {
    failpoint!(format!("{failpoint_label}-write").as_str());
    file.write_all(bytes)
}

#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn fsync_step(file: &File, failpoint_label: &str) -> io::Result<()> {
    failpoint!(format!("{failpoint_label}-fsync").as_str());
    file.sync_all()
}

/// Creates `dir` and its parents, fsyncing each directory whose entries changed; an existing
/// link on the way is refused.
pub(crate) fn create_dir_all_durably(dir: &Path) -> io::Result<()> {
    let mut missing: Vec<&OsStr> = Vec::new();
    let mut cursor = dir;
    let mut base = loop {
        match no_follow::open_dir(cursor) {
            Ok(fd) => break fd,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let (parent, name) = no_follow::split(cursor)?;
                missing.push(name);
                cursor = parent;
            }
            Err(error) => return Err(error),
        }
    };
    let mut made = cursor.to_path_buf();
    for name in missing.iter().rev() {
        made.push(name);
        match no_follow::create_dir_in(&base, name) {
            Ok(()) => no_follow::sync(&base).map_err(|error| with_path(error, &made))?,
            // Created meanwhile by someone else: fine, if it is a directory (opened below).
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(with_path(error, &made)),
        }
        base = no_follow::open_dir_in(&base, name)
            .map_err(|error| no_follow::refused_link(error, &made))?;
    }
    Ok(())
}

pub(crate) fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// A transcript open for appending (it already holds its header), with no buffering beyond
/// the chunk in hand, so a SIGKILLed handler still leaves everything it had read on disk.
pub(crate) struct TranscriptFile(File);

impl TranscriptFile {
    pub(crate) fn new(file: File) -> Self {
        Self(file)
    }

    /// Appends `bytes` (blocking).
    pub(crate) fn append(&self, bytes: &[u8]) -> io::Result<()> {
        // Lets tests hold a write for a while (`transcript-write=sleep(2000)`) or fail it.
        fail::fail_point!("transcript-write", |_| Err(io::Error::other(
            "injected failure at failpoint transcript-write"
        )));
        (&self.0).write_all(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn replace_creates_and_overwrites_without_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("state.json");
        replace_atomically(&target, b"one", "test").unwrap();
        replace_atomically(&target, b"two", "test").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn create_new_refuses_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        fs::write(&path, b"keep").unwrap();
        let error = create_new(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert!(error.to_string().contains("refusing to overwrite"));
        assert_eq!(fs::read(&path).unwrap(), b"keep");
    }

    #[test]
    fn write_new_durably_refuses_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.json");
        write_new_durably(&path, b"first", "test").unwrap();
        assert!(write_new_durably(&path, b"second", "test").is_err());
        assert_eq!(fs::read(&path).unwrap(), b"first");
    }

    #[test]
    fn create_dir_all_durably_makes_nested_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b/c");
        create_dir_all_durably(&nested).unwrap();
        assert!(nested.is_dir());
        create_dir_all_durably(&nested).unwrap();
    }

    #[test]
    fn nothing_is_written_through_a_linked_directory() {
        let root = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(root.path()).unwrap();
        let outside = root.join("outside");
        fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
        let refused = |error: io::Error| {
            assert!(
                error.to_string().contains("a symbolic link is on the way"),
                "{error}"
            );
        };
        refused(create_dir_all_durably(&root.join("linked/a/b")).unwrap_err());
        refused(create_new(&root.join("linked/p.txt")).unwrap_err());
        refused(write_new_durably(&root.join("linked/o.json"), b"x", "test").unwrap_err());
        match replace_atomically(&root.join("linked/state.json"), b"x", "test") {
            Err(ReplaceError::NotReplaced(error)) => refused(error),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            0,
            "written outside"
        );
    }

    #[test]
    fn a_linked_target_is_replaced_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("elsewhere.json");
        fs::write(&outside, "keep").unwrap();
        let target = root.path().join("state.json");
        std::os::unix::fs::symlink(&outside, &target).unwrap();
        replace_atomically(&target, b"new", "test").unwrap();
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
        assert!(!fs::symlink_metadata(&target).unwrap().is_symlink());
        assert!(create_new(&root.path().join("state.json")).is_err());
    }
}
