//! Crash-safe file writes.
//!
//! - [`replace_atomically`]: the `state.json` recipe — write a uniquely named temp file in the
//!   same directory, fsync it, rename it over the target, fsync the directory. A reader (or a
//!   crash) sees the old document or the new one, never a torn one.
//! - [`create_new`]: attempt artifacts are created with `O_EXCL`; an existing file is never
//!   truncated or replaced.
//! - [`write_new_durably`]: an outcome record — exclusive create, write, fsync, directory fsync.
//! - [`write_new`]: a prompt or transcript — exclusive create and write, no fsync.
//!
//! Every step is a named failpoint (`fail` crate, compiled in only with the `failpoints`
//! feature) so tests can prove that a failed write leaves the last durable record in place.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Makes the failpoint `name` return an injected I/O error when configured.
macro_rules! failpoint {
    ($name:expr) => {
        fail::fail_point!($name, |_| Err(io::Error::other(format!(
            "injected failure at failpoint {}",
            $name
        ))))
    };
}

/// Why an atomic replacement failed, and whether readers can already see the new content.
#[derive(Debug)]
pub enum ReplaceError {
    /// Nothing changed: the target still holds its previous content.
    NotReplaced(io::Error),
    /// The rename happened, so readers see the new content, but the directory fsync failed:
    /// whether it survives a power loss is unknown.
    NotDurable(io::Error),
}

impl std::fmt::Display for ReplaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotReplaced(error) => write!(f, "{error}"),
            Self::NotDurable(error) => write!(f, "replaced, but not durably: {error}"),
        }
    }
}

/// Replaces `target` with `bytes` atomically and durably. `failpoint_label` distinguishes the
/// caller's writes in failpoint names (`<label>-write`, `<label>-fsync`, `<label>-rename`,
/// `<label>-dir-fsync`).
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn replace_atomically(
    target: &Path,
    bytes: &[u8],
    failpoint_label: &str,
) -> Result<(), ReplaceError> {
    let dir = parent_dir(target).map_err(ReplaceError::NotReplaced)?;
    let file_name = target.file_name().ok_or_else(|| {
        ReplaceError::NotReplaced(io::Error::other(format!(
            "{} has no file name",
            target.display()
        )))
    })?;
    let temp_path = dir.join(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    if let Err(error) = write_and_rename(&temp_path, target, bytes, failpoint_label) {
        // The temp file is ours and unreferenced; leaving it would only confuse a reader.
        let _ = fs::remove_file(&temp_path);
        return Err(ReplaceError::NotReplaced(error));
    }
    sync_dir_labelled(dir, failpoint_label).map_err(ReplaceError::NotDurable)
}

/// Writes and fsyncs the temp file, then renames it over the target.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn write_and_rename(
    temp_path: &Path,
    target: &Path,
    bytes: &[u8],
    failpoint_label: &str,
) -> io::Result<()> {
    let mut temp = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(temp_path)?;
    failpoint!(format!("{failpoint_label}-write").as_str());
    temp.write_all(bytes)?;
    failpoint!(format!("{failpoint_label}-fsync").as_str());
    temp.sync_all()?;
    drop(temp);
    failpoint!(format!("{failpoint_label}-rename").as_str());
    fs::rename(temp_path, target)
}

#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn sync_dir_labelled(dir: &Path, failpoint_label: &str) -> io::Result<()> {
    failpoint!(format!("{failpoint_label}-dir-fsync").as_str());
    sync_dir(dir)
}

/// Creates `path` exclusively. An existing file is reported, never touched.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(|error| {
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

/// Creates `path` exclusively with `bytes`, without forcing it to disk: for artifacts whose
/// loss in a power failure costs evidence, not correctness (prompts, transcripts). They reach
/// the page cache before the worker starts, so they survive a crash of the handler itself.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn write_new(path: &Path, bytes: &[u8], failpoint_label: &str) -> io::Result<File> {
    failpoint!(format!("{failpoint_label}-write").as_str());
    let mut file = create_new(path)?;
    file.write_all(bytes).map_err(|e| with_path(e, path))?;
    Ok(file)
}

/// Creates `path` exclusively with `bytes`, then fsyncs the file and its directory.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn write_new_durably(path: &Path, bytes: &[u8], failpoint_label: &str) -> io::Result<()> {
    let mut file = create_new(path)?;
    // The failpoint sits where a full disk strikes: after the file exists.
    if let Err(error) = write_step(&mut file, bytes, failpoint_label) {
        // A partly written record (a full disk) is evidence of nothing and would only be
        // mistaken for one: the file is ours, created a moment ago, so it goes.
        let _ = fs::remove_file(path);
        return Err(with_path(error, path));
    }
    fsync_step(&file, failpoint_label).map_err(|e| with_path(e, path))?;
    failpoint!(format!("{failpoint_label}-dir-fsync").as_str());
    sync_dir(parent_dir(path)?)
}

/// The write of [`write_new_durably`], behind its failpoint.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn write_step(file: &mut File, bytes: &[u8], failpoint_label: &str) -> io::Result<()> {
    failpoint!(format!("{failpoint_label}-write").as_str());
    file.write_all(bytes)
}

/// The file fsync of [`write_new_durably`], behind its failpoint.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
fn fsync_step(file: &File, failpoint_label: &str) -> io::Result<()> {
    failpoint!(format!("{failpoint_label}-fsync").as_str());
    file.sync_all()
}

/// Creates `dir` and its parents, then fsyncs each directory whose entry set changed, so the
/// artifact directories survive a power loss together with the files put in them.
pub fn create_dir_all_durably(dir: &Path) -> io::Result<()> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut cursor = Some(dir);
    while let Some(path) = cursor {
        if path.is_dir() {
            break;
        }
        missing.push(path.to_path_buf());
        cursor = path.parent();
    }
    for path in missing.iter().rev() {
        match fs::create_dir(path) {
            Ok(()) => {}
            // Created meanwhile by someone else: fine, if it is a directory.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(error) => return Err(with_path(error, path)),
        }
        sync_dir(parent_dir(path)?)?;
    }
    Ok(())
}

/// Fsyncs a directory so renames and creations inside it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|error| with_path(error, dir))
}

fn parent_dir(path: &Path) -> io::Result<&Path> {
    path.parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .ok_or_else(|| io::Error::other(format!("{} has no parent directory", path.display())))
}

/// Prefixes an OS error with the path it concerns, keeping its kind.
pub fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
