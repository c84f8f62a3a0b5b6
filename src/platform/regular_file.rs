//! Reading the inputs a command trusts (plan, config, state) and opening the log file, safe
//! against special files: a FIFO would block a plain `open` for ever, `/dev/zero` reads without
//! end, a sparse file claims gigabytes. So type and size are checked before the open and again
//! on the descriptor, the open never blocks (`O_NONBLOCK`), and a read stops past its cap.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::libc;

use super::locate::os_message;

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadFileError {
    #[error("{}", os_message(.0))]
    Io(io::Error),
    #[error("not a regular file ({kind})")]
    NotRegular { kind: &'static str },
    #[error("{size} bytes is over the {limit}-byte limit")]
    TooLarge { size: u64, limit: u64 },
}

impl ReadFileError {
    /// The file does not exist (a missing config or state means defaults).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Self::Io(error) if error.kind() == io::ErrorKind::NotFound)
    }
}

/// Reads the whole of the regular file `path`, refusing special files and files over `limit`
/// bytes without blocking and without reading more than `limit + 1` bytes.
pub(crate) fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, ReadFileError> {
    check_regular(&std::fs::metadata(path).map_err(ReadFileError::Io)?, limit)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(ReadFileError::Io)?;
    // The path may have become something else since the `stat`.
    check_regular(&file.metadata().map_err(ReadFileError::Io)?, limit)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadFileError::Io)?;
    let size = bytes.len() as u64;
    if size > limit {
        // It grew while being read (or its size was not what `stat` said, as in `/proc`).
        return Err(ReadFileError::TooLarge { size, limit });
    }
    Ok(bytes)
}

/// Reads at most the last `limit` bytes of a regular file (a failure report shows the last
/// lines of a transcript that may be gigabytes long); `true` when that is the whole file.
/// The open never blocks (a transcript replaced by a FIFO is refused, not waited on).
pub(crate) fn read_end(path: &Path, limit: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let length = metadata.len();
    let offset = length.saturating_sub(limit);
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::with_capacity((length - offset) as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok((bytes, offset == 0))
}

/// Opens `path` for appending, creating it if needed: a regular file, or the null device.
/// Anything else — a FIFO, a terminal — could block every write the handler logs.
pub(crate) fn open_for_append(path: &Path) -> Result<File, ReadFileError> {
    let acceptable = |metadata: &Metadata| {
        if metadata.is_file() || is_null_device(metadata) {
            Ok(())
        } else {
            Err(ReadFileError::NotRegular {
                kind: kind_of(metadata),
            })
        }
    };
    match std::fs::metadata(path) {
        Ok(metadata) => acceptable(&metadata)?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(ReadFileError::Io(error)),
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(ReadFileError::Io)?;
    acceptable(&file.metadata().map_err(ReadFileError::Io)?)?;
    Ok(file)
}

fn check_regular(metadata: &Metadata, limit: u64) -> Result<(), ReadFileError> {
    if !metadata.is_file() {
        return Err(ReadFileError::NotRegular {
            kind: kind_of(metadata),
        });
    }
    if metadata.len() > limit {
        return Err(ReadFileError::TooLarge {
            size: metadata.len(),
            limit,
        });
    }
    Ok(())
}

/// The null device (character device 1:3): writes go nowhere and never wait.
fn is_null_device(metadata: &Metadata) -> bool {
    metadata.file_type().is_char_device() && metadata.rdev() == nix::sys::stat::makedev(1, 3)
}

fn kind_of(metadata: &Metadata) -> &'static str {
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.md");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular_file(&path, 10).unwrap(), b"0123456789");
        let error = read_regular_file(&path, 9).unwrap_err();
        assert_eq!(error.to_string(), "10 bytes is over the 9-byte limit");
    }

    #[test]
    fn a_sparse_giant_is_refused_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.md");
        File::create(&path).unwrap().set_len(3 << 30).unwrap();
        let error = read_regular_file(&path, 1 << 20).unwrap_err();
        assert!(matches!(error, ReadFileError::TooLarge { size, .. } if size == 3 << 30));
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
        ] {
            let error = read_regular_file(path, 1 << 20).unwrap_err();
            assert_eq!(error.to_string(), format!("not a regular file ({kind})"));
        }
        assert!(
            read_regular_file(&dir.path().join("missing"), 1)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn a_log_file_is_regular_or_the_null_device() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            open_for_append(&fifo).unwrap_err().to_string(),
            "not a regular file (a FIFO)"
        );
        open_for_append(&dir.path().join("new.log")).unwrap();
        open_for_append(Path::new("/dev/null")).unwrap();
    }

    #[test]
    fn reading_the_end_is_bounded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("transcript.txt");
        std::fs::write(&path, b"0123456789").expect("write");
        assert_eq!(read_end(&path, 4).expect("read"), (b"6789".to_vec(), false));
        assert_eq!(
            read_end(&path, 100).expect("read"),
            (b"0123456789".to_vec(), true)
        );
    }
}
