//! Helpers for the platform's process tests: running a test alone in a re-executed test binary
//! (one that makes the process a child subreaper and sweeps escapees would kill other tests'
//! children), and looking at the processes a test script started.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::proc;

/// Set in a re-executed test binary that runs one isolated test.
const ISOLATED: &str = "AISH_ISOLATED_TEST";

/// Runs `body` when this is the re-executed process, else re-executes this test binary for
/// the test `name` (its full path) alone and asserts that it ran and passed.
pub(crate) fn isolated(name: &str, body: impl FnOnce()) {
    if std::env::var_os(ISOLATED).is_some() {
        body();
        return;
    }
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([name, "--exact", "--test-threads", "1", "--nocapture"])
        .env(ISOLATED, "1")
        .stdin(Stdio::null())
        .output()
        .expect("re-execute the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "isolated test {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "the isolated run did not run {name}:\n{stdout}"
    );
}

/// Whether `pid` is alive (not gone, not a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    proc::stat_of(pid).is_some_and(|stat| !stat.is_defunct())
}

/// The pid a test script wrote to `path`, once it is there.
pub(crate) fn pid_in(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
