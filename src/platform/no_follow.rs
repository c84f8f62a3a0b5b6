//! Opening generated files and directories without ever following a symbolic link (issue 23):
//! a repository can ship `.ai-session-handler` or `events.jsonl` as a link, and an agent can
//! replace a generated directory with one mid-run; a write through it would land outside the
//! plan workspace.
//!
//! A directory is opened with `openat2(RESOLVE_NO_SYMLINKS)` (Linux 5.6), or, before that, one
//! component at a time with `O_NOFOLLOW | O_DIRECTORY`; a file is then created, opened or
//! renamed *under that directory's descriptor* with `O_NOFOLLOW`, so no link on the path, at
//! any moment, is followed. The paths given are the runner's canonical ones (the plan
//! workspace is canonicalized when it is located), so a link anywhere on them is a refusal:
//! `ELOOP`, worded by [`refused_link`].

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use nix::libc;

/// Opens directory `dir`, refusing a symbolic link anywhere on its path.
pub(crate) fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let c_path = c_string(dir.as_os_str())?;
    match openat2_no_symlinks(&c_path) {
        Ok(fd) => Ok(fd),
        Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => walk(dir),
        Err(error) => Err(refused_link(error, dir)),
    }
}

/// `openat2(AT_FDCWD, path, O_DIRECTORY, RESOLVE_NO_SYMLINKS)`.
fn openat2_no_symlinks(path: &CString) -> io::Result<OwnedFd> {
    /// `struct open_how` (linux/openat2.h).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    let how = OpenHow {
        flags: (libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: openat2(AT_FDCWD, path, &how, sizeof how) reads a NUL-terminated path and a
    // struct of the size given, and returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The fallback: one `openat(O_NOFOLLOW | O_DIRECTORY)` per component.
fn walk(dir: &Path) -> io::Result<OwnedFd> {
    let mut current: Option<OwnedFd> = None;
    let mut walked = std::path::PathBuf::new();
    for component in dir.components() {
        walked.push(component);
        let name: &OsStr = match component {
            Component::RootDir => OsStr::new("/"),
            Component::CurDir => continue,
            Component::ParentDir => OsStr::new(".."),
            Component::Normal(name) => name,
            Component::Prefix(_) => continue,
        };
        let base = current.as_ref().map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
        let next = openat(
            base,
            name,
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|error| {
            // `O_NOFOLLOW | O_DIRECTORY` on a link says ENOTDIR: name it as the link it is.
            let link = std::fs::symlink_metadata(&walked).is_ok_and(|meta| meta.is_symlink());
            if link {
                refused_link(io::Error::from_raw_os_error(libc::ELOOP), dir)
            } else {
                refused_link(error, dir)
            }
        })?;
        current = Some(next);
    }
    match current {
        Some(fd) => Ok(fd),
        None => openat(libc::AT_FDCWD, OsStr::new("."), libc::O_DIRECTORY, 0),
    }
}

fn openat(dir: RawFd, name: &OsStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let c_name = c_string(name)?;
    // SAFETY: openat reads a NUL-terminated name and returns a new descriptor or -1.
    let fd = unsafe {
        libc::openat(
            dir,
            c_name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a path with a NUL byte cannot be opened",
        )
    })
}

/// `ELOOP` (a link met where none may be) as a message naming the path; other errors keep
/// their kind, prefixed with the path.
pub(crate) fn refused_link(error: io::Error, path: &Path) -> io::Error {
    if error.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::other(format!(
            "{}: a symbolic link is on the way; generated files are never written through one (replace the link with a directory)",
            path.display()
        ));
    }
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// The directory and the last component of `path`.
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

/// Creates `name` in `dir` exclusively (`O_EXCL`: an existing file — or link — is never
/// touched), for writing.
pub(crate) fn create_new_in(dir: &OwnedFd, name: &OsStr) -> io::Result<File> {
    openat(
        dir.as_raw_fd(),
        name,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        0o644,
    )
    .map(File::from)
}

/// Opens `name` in `dir` for appending, creating it if missing, never through a link, and
/// only if it is a regular file: the open cannot block (`O_NONBLOCK`: a FIFO put there would
/// block a plain open until a reader came), and anything else is refused.
pub(crate) fn open_append_in(dir: &OwnedFd, name: &OsStr) -> io::Result<File> {
    let file = openat(
        dir.as_raw_fd(),
        name,
        libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        0o644,
    )
    .map(File::from)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Renames `from` to `to`, both in `dir` (replacing `to`; a link named `to` is replaced, not
/// followed).
pub(crate) fn rename_in(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (from, to) = (c_string(from)?, c_string(to)?);
    // SAFETY: renameat reads two NUL-terminated names relative to a descriptor we own.
    let result =
        unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes file `name` from `dir`.
pub(crate) fn remove_in(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    let name = c_string(name)?;
    // SAFETY: unlinkat reads a NUL-terminated name relative to a descriptor we own.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Creates directory `name` in `dir` (`EEXIST` when something is there).
pub(crate) fn create_dir_in(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    let name = c_string(name)?;
    // SAFETY: mkdirat reads a NUL-terminated name relative to a descriptor we own.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens directory `name` in `dir`, refusing a link.
pub(crate) fn open_dir_in(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    openat(
        dir.as_raw_fd(),
        name,
        libc::O_DIRECTORY | libc::O_RDONLY | libc::O_NOFOLLOW,
        0,
    )
}

/// Flushes a directory's entries to disk.
pub(crate) fn sync(dir: &OwnedFd) -> io::Result<()> {
    // SAFETY: fsync of a descriptor we own.
    if unsafe { libc::fsync(dir.as_raw_fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
        assert_eq!(error.raw_os_error(), Some(libc::ELOOP));
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
            .custom_flags(libc::O_NONBLOCK)
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
