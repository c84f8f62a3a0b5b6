//! Tests that must not share the test process: the test binary re-executes itself to run one
//! test alone. A test that makes the process a child subreaper and sweeps escaped
//! descendants would otherwise kill other tests' children.

use std::process::{Command, Stdio};

/// Set in a re-executed test binary that runs one isolated test.
const ISOLATED: &str = "AISH_ISOLATED_TEST";

/// Runs `body` when this is the re-executed process, else re-executes this test binary for
/// the test `name` (its full path) alone and asserts that it ran and passed.
pub(super) fn isolated(name: &str, body: impl FnOnce()) {
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
