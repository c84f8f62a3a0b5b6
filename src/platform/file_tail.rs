//! Reading the end of a file without reading all of it: a failure report shows the last lines
//! of a transcript that may be gigabytes long.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Reads at most the last `limit` bytes of a regular file; `true` when that is the whole file.
/// The open never blocks (a transcript replaced by a FIFO is refused, not waited on).
pub(crate) fn read_end(path: &Path, limit: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut file = File::options()
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

#[cfg(test)]
mod tests {
    use super::*;

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
