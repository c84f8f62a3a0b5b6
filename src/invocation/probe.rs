//! What `status` and `check` can tell of live processes without touching them: whether a run
//! holds the plan workspace (its active attempt is then running, not abandoned), and what of a
//! recorded attempt still runs.

use std::path::Path;

use crate::domain::identity::is_alive;
use crate::domain::state::ActiveAttempt;
use crate::domain::watchdog::ATTEMPT_ENV;
use crate::platform::locate::PlanLocation;
use crate::platform::locks::lock_holder;
use crate::platform::proc;

/// A handler holds the plan-workspace lock; its pid when visible from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunInProgress {
    pub handler_pid: Option<u32>,
}

/// The run holding `location`'s plan workspace, if any: the lock is looked up, never taken.
/// When the lock table cannot be read the answer is "none".
pub(crate) fn run_in_progress(location: &PlanLocation) -> Option<RunInProgress> {
    match lock_holder(Path::new(&location.workspace)) {
        Ok(holder) => holder.map(|holder| RunInProgress {
            handler_pid: holder.pid,
        }),
        Err(error) => {
            tracing::debug!(%error, "cannot tell whether a run holds the plan workspace");
            None
        }
    }
}

impl RunInProgress {
    pub(crate) fn describe(&self) -> String {
        match self.handler_pid {
            Some(pid) => format!("handler pid {pid} holds the plan workspace lock"),
            None => "a handler holds the plan workspace lock".to_owned(),
        }
    }
}

/// The live processes that carry `attempt_id` in their environment (every worker and its
/// descendants, also those that left its group): what may still run of the attempt that
/// started at `started_at` (RFC 3339); `None` when `/proc` cannot be scanned. Only processes
/// that started after the attempt are read, with a minute's margin for a wall clock set back
/// since (the boot time is wall clock, a start time is not).
pub(crate) fn attempt_processes(attempt_id: &str, started_at: &str) -> Option<Vec<u32>> {
    let wanted = [format!("{ATTEMPT_ENV}={attempt_id}")];
    let mut pids: Vec<u32> = proc::processes_with_env(&wanted, started_from_ticks(started_at))
        .ok()?
        .iter()
        .map(|process| process.pid)
        .collect();
    pids.sort_unstable();
    Some(pids)
}

/// Clock ticks since boot a minute before `started_at`; 0 when unknown or before the boot.
fn started_from_ticks(started_at: &str) -> u64 {
    const MARGIN_SECONDS: i64 = 60;
    let (Ok(started), Ok(boot)) = (
        chrono::DateTime::parse_from_rfc3339(started_at),
        proc::boot_time(),
    ) else {
        return 0;
    };
    let since_boot = started.timestamp() - MARGIN_SECONDS - i64::try_from(boot).unwrap_or(i64::MAX);
    u64::try_from(since_boot).map_or(0, |seconds| {
        seconds.saturating_mul(proc::ticks_per_second())
    })
}

/// Whether the worker recorded for `attempt` is still the same live process (same pid,
/// group, boot and start time, not a zombie); `None` without a recorded identity or when
/// `/proc` cannot tell. Read-only: the process is never signalled.
pub(crate) fn recorded_worker_alive(attempt: &ActiveAttempt) -> Option<bool> {
    let identity = attempt.process.as_ref()?;
    let boot_id = proc::boot_id().ok()?;
    let observed = proc::stat(identity.pid).ok()?;
    Some(is_alive(identity, &boot_id, observed.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_from_before_the_boot_or_of_unknown_time_reads_every_process() {
        assert_eq!(started_from_ticks("2001-01-01T00:00:00Z"), 0);
        assert_eq!(started_from_ticks("not a time"), 0);
    }

    #[test]
    fn an_attempt_after_the_boot_skips_what_started_before_it_less_a_minute() {
        let boot = proc::boot_time().expect("btime") as i64;
        let started = chrono::DateTime::from_timestamp(boot + 3_600, 0)
            .expect("a time")
            .to_rfc3339();
        assert_eq!(
            started_from_ticks(&started),
            (3_600 - 60) * proc::ticks_per_second()
        );
    }

    #[test]
    fn a_carrier_is_found_only_when_it_started_after_the_attempt_less_a_minute() {
        let token = format!("probe-test-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(ATTEMPT_ENV, &token)
            .spawn()
            .expect("spawn");
        let earlier = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
        // Until the child has exec'd, its environment is still a copy of ours.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut found = Vec::new();
        while found.is_empty() && std::time::Instant::now() < deadline {
            found = attempt_processes(&token, &earlier).expect("scan");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let later = (chrono::Utc::now() + chrono::Duration::minutes(5)).to_rfc3339();
        let not_found = attempt_processes(&token, &later).expect("scan");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found, [child.id()]);
        assert!(not_found.is_empty(), "{not_found:?}");
    }
}
