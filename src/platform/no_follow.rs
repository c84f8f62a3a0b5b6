//! Opening generated files and directories without ever following a symbolic link: a
//! directory by `openat2(RESOLVE_NO_SYMLINKS)` (before Linux 5.6, one `O_NOFOLLOW` component at
//! a time), then the file under that descriptor with `O_NOFOLLOW`; a link met is refused with
//! [`refused_link`]'s words (docs/architecture.md, "Durability").

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{AtFlags, CWD, Mode, OFlags, ResolveFlags};

const DIRECTORY: OFlags = OFlags::DIRECTORY
    .union(OFlags::RDONLY)
    .union(OFlags::CLOEXEC);

/// Opens directory `dir`, refusing a symbolic link anywhere on its path.
pub(crate) fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    match rustix::fs::openat2(
        CWD,
        dir,
        DIRECTORY,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    ) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::NOSYS) => walk(dir),
        Err(error) => Err(refused_link(error.into(), dir)),
    }
}

/// The fallback: one `openat(O_NOFOLLOW | O_DIRECTORY)` per component.
fn walk(dir: &Path) -> io::Result<OwnedFd> {
    let mut current: Option<OwnedFd> = None;
    let mut walked = std::path::PathBuf::new();
    for component in dir.components() {
        walked.push(component);
        let name: &OsStr = match component {
            Component::RootDir => OsStr::new("/"),
            Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => OsStr::new(".."),
            Component::Normal(name) => name,
        };
        let base = current.as_ref().map_or(CWD, AsFd::as_fd);
        let next = open_in(base, name, DIRECTORY | OFlags::NOFOLLOW).map_err(|error| {
            // `O_NOFOLLOW | O_DIRECTORY` on a link says ENOTDIR: name it as the link it is.
            let link = std::fs::symlink_metadata(&walked).is_ok_and(|meta| meta.is_symlink());
            if link {
                refused_link(rustix::io::Errno::LOOP.into(), dir)
            } else {
                refused_link(error, dir)
            }
        })?;
        current = Some(next);
    }
    match current {
        Some(fd) => Ok(fd),
        None => open_in(CWD, OsStr::new("."), DIRECTORY),
    }
}

fn open_in(dir: impl AsFd, name: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
    let mode = Mode::from_raw_mode(0o644);
    Ok(rustix::fs::openat(
        dir,
        name,
        flags | OFlags::CLOEXEC,
        mode,
    )?)
}

/// `ELOOP` (a link met where none may be) as a message naming the path; other errors keep
/// their kind, prefixed with the path.
pub(crate) fn refused_link(error: io::Error, path: &Path) -> io::Error {
    if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return io::Error::other(format!(
            "{}: a symbolic link is on the way; generated files are never written through one (replace the link with a directory)",
            path.display()
        ));
    }
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

pub(crate) fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .ok_or_else(|| io::Error::other(format!("{} has no parent directory", path.display())))?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} has no file name", path.display())))?;
    Ok((parent, name))
}

/// Creates `name` in `dir` for writing (`O_EXCL`: an existing file or link is never touched).
pub(crate) fn create_new_in(dir: &OwnedFd, name: &OsStr) -> io::Result<File> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
    open_in(dir, name, flags).map(File::from)
}

/// Opens `name` in `dir` for appending, creating it if missing, never through a link, and
/// only if it is a regular file: the open cannot block (`O_NONBLOCK`: a FIFO put there would
/// block a plain open until a reader came), and anything else is refused. Readable too, so
/// the appender can look at the last byte.
pub(crate) fn open_append_in(dir: &OwnedFd, name: &OsStr) -> io::Result<File> {
    let flags =
        OFlags::RDWR | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let file = open_in(dir, name, flags).map(File::from)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Renames `from` to `to` in `dir` (a link named `to` is replaced, not followed).
pub(crate) fn rename_in(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::renameat(dir, from, dir, to)?)
}

pub(crate) fn remove_in(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// Creates directory `name` in `dir` (`EEXIST` when something is there).
pub(crate) fn create_dir_in(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755))?)
}

pub(crate) fn open_dir_in(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    open_in(dir, name, DIRECTORY | OFlags::NOFOLLOW)
}

pub(crate) fn sync(dir: &OwnedFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn a_link_anywhere_on_the_path_is_refused_by_both_ways() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir_all(root.join("real/inner")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert!(open_dir(&root.join("real/inner")).is_ok());
        assert!(walk(&root.join("real/inner")).is_ok());
        for dir in [root.join("link"), root.join("link/inner")] {
            for error in [open_dir(&dir).unwrap_err(), walk(&dir).unwrap_err()] {
                assert!(
                    error.to_string().contains("a symbolic link is on the way"),
                    "{error}"
                );
            }
        }
    }

    #[test]
    fn files_are_created_appended_and_renamed_under_the_directory_never_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let outside = root.join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("dir/events.jsonl")).unwrap();
        let dir = open_dir(&root.join("dir")).unwrap();
        let error = open_append_in(&dir, OsStr::new("events.jsonl")).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(nix::libc::ELOOP));
        assert!(create_new_in(&dir, OsStr::new("events.jsonl")).is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        let mut file = create_new_in(&dir, OsStr::new("a.tmp")).unwrap();
        file.write_all(b"new").unwrap();
        rename_in(&dir, OsStr::new("a.tmp"), OsStr::new("events.jsonl")).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(root.join("dir/events.jsonl")).unwrap(),
            "new"
        );
        nix::unistd::mkfifo(&root.join("dir/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Without a reader the open fails at once (ENXIO) instead of blocking; with one it
        // is refused as no regular file.
        assert!(open_append_in(&dir, OsStr::new("fifo")).is_err());
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(root.join("dir/fifo"))
            .unwrap();
        let error = open_append_in(&dir, OsStr::new("fifo")).unwrap_err();
        assert_eq!(error.to_string(), "not a regular file");
        drop(reader);
        create_dir_in(&dir, OsStr::new("sub")).unwrap();
        assert!(open_dir_in(&dir, OsStr::new("sub")).is_ok());
        remove_in(&dir, OsStr::new("events.jsonl")).unwrap();
        sync(&dir).unwrap();
    }
}
