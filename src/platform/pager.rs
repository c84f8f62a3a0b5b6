//! Showing text through an interactive program on the terminal (`man -l -`, a pager): the
//! program inherits the terminal, reads the text on its stdin, and is waited for.

use std::io::{self, Write};
use std::process::{Command, Stdio};

/// Runs `program` with `args` and `input` on its stdin, its output on the terminal, and waits
/// for it. `false` when it is not installed; a reader that quits before the end is fine.
pub(crate) fn show_through(program: &str, args: &[String], input: &[u8]) -> io::Result<bool> {
    let spawned = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A pager quit before the end closes the pipe: nothing to report.
        let _ = stdin.write_all(input);
    }
    child.wait()?;
    Ok(true)
}
