//! For tests only: looking at the processes a test script started (`/proc`, through
//! [`super::proc`]), waiting on conditions with a generous deadline rather than fixed sleeps.

use std::path::Path;
use std::time::{Duration, Instant};

use super::proc;

/// Whether `pid` is alive (not gone, not a zombie).
pub(super) fn alive(pid: u32) -> bool {
    proc::stat(pid)
        .ok()
        .flatten()
        .is_some_and(|stat| !stat.is_defunct())
}

/// The pid a test script wrote to `path`, once it is there.
pub(super) fn pid_in(path: &Path) -> u32 {
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
