//! Stopping a process group, as one pure machine for everything that stops one (a worker's,
//! a hook's or a Verify check's group, and the watchdog's groups): SIGTERM, a grace period,
//! then SIGKILL re-sent while any member lives (a process forked while `killpg` walks the group
//! can miss one), until a bound after which the members still alive are reported (a process in
//! uninterruptible sleep survives SIGKILL). The loop is `platform::process_group::escalate`.

use std::time::{Duration, Instant};

pub(crate) const TERMINATE_GRACE: Duration = Duration::from_millis(500);
/// How often the group is probed while waiting, and SIGKILL re-sent while killing.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(5);
/// How long SIGKILL is re-sent before the members still alive are reported as survivors.
pub(crate) const KILL_ROUNDS_LIMIT: Duration = Duration::from_secs(2);
/// After a leader exits on its own: how long its pipes may take to close before what is left
/// of its group is a leak (and is SIGKILLed).
pub(crate) const LEAK_GRACE: Duration = Duration::from_millis(100);
/// After a group is empty: how long a pipe still held open (by a process outside the group)
/// is read before it is abandoned.
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopSignal {
    Terminate,
    Kill,
}

impl StopSignal {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Terminate => "SIGTERM",
            Self::Kill => "SIGKILL",
        }
    }
}

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KillStep {
    /// Send this signal to the group, then probe again after [`CHECK_INTERVAL`].
    Send(StopSignal),
    /// Nothing to send yet: probe again after this long.
    CheckAfter(Duration),
    /// No live member is left: the group is stopped.
    Emptied,
    /// Members outlived SIGKILL for [`KILL_ROUNDS_LIMIT`]: report them as survivors.
    GaveUp,
}

/// `Start`: nothing sent yet (SIGTERM first when `terminate`); `Over`: emptied or given up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start { terminate: bool },
    Grace { kill_at: Instant },
    Killing { give_up_at: Instant },
    Over,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Escalation {
    stage: Stage,
}

impl Escalation {
    pub(crate) fn terminate() -> Self {
        Self {
            stage: Stage::Start { terminate: true },
        }
    }

    /// SIGKILL at once: what is left of a group whose leader exited on its own leaked.
    pub(crate) fn kill() -> Self {
        Self {
            stage: Stage::Start { terminate: false },
        }
    }

    /// A second signal: skip what is left of the grace period (SIGKILL at the next step).
    pub(crate) fn skip_grace(&mut self) {
        match self.stage {
            Stage::Start { .. } | Stage::Grace { .. } => {
                self.stage = Stage::Start { terminate: false }
            }
            Stage::Killing { .. } | Stage::Over => {}
        }
    }

    /// Whether SIGKILL has been sent (or is next).
    pub(crate) fn killing(&self) -> bool {
        matches!(
            self.stage,
            Stage::Start { terminate: false } | Stage::Killing { .. }
        )
    }

    /// The next step at `now`, given whether the group still has a live member.
    pub(crate) fn step(&mut self, now: Instant, alive: bool) -> KillStep {
        if self.stage == Stage::Over || !alive {
            self.stage = Stage::Over;
            return KillStep::Emptied;
        }
        match self.stage {
            Stage::Start { terminate: true } => {
                self.stage = Stage::Grace {
                    kill_at: now + TERMINATE_GRACE,
                };
                KillStep::Send(StopSignal::Terminate)
            }
            Stage::Start { terminate: false } => self.start_killing(now),
            Stage::Grace { kill_at } if now >= kill_at => self.start_killing(now),
            Stage::Grace { kill_at } => KillStep::CheckAfter(CHECK_INTERVAL.min(kill_at - now)),
            Stage::Killing { give_up_at } if now >= give_up_at => {
                self.stage = Stage::Over;
                KillStep::GaveUp
            }
            Stage::Killing { .. } => KillStep::Send(StopSignal::Kill),
            Stage::Over => KillStep::Emptied,
        }
    }

    fn start_killing(&mut self, now: Instant) -> KillStep {
        self.stage = Stage::Killing {
            give_up_at: now + KILL_ROUNDS_LIMIT,
        };
        KillStep::Send(StopSignal::Kill)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_group_that_honours_sigterm_gets_no_sigkill() {
        let start = Instant::now();
        let mut escalation = Escalation::terminate();
        assert_eq!(
            escalation.step(start, true),
            KillStep::Send(StopSignal::Terminate)
        );
        assert_eq!(
            escalation.step(start + MS, true),
            KillStep::CheckAfter(CHECK_INTERVAL)
        );
        assert_eq!(escalation.step(start + 20 * MS, false), KillStep::Emptied);
        assert_eq!(escalation.step(start + 30 * MS, true), KillStep::Emptied);
    }

    #[test]
    fn sigkill_follows_the_grace_period_and_is_resent_until_the_group_is_empty() {
        let start = Instant::now();
        let mut escalation = Escalation::terminate();
        escalation.step(start, true);
        assert_eq!(
            escalation.step(start + TERMINATE_GRACE - MS, true),
            KillStep::CheckAfter(MS)
        );
        assert!(!escalation.killing());
        let killed_at = start + TERMINATE_GRACE;
        assert_eq!(
            escalation.step(killed_at, true),
            KillStep::Send(StopSignal::Kill)
        );
        assert!(escalation.killing());
        assert_eq!(
            escalation.step(killed_at + CHECK_INTERVAL, true),
            KillStep::Send(StopSignal::Kill)
        );
        assert_eq!(
            escalation.step(killed_at + 2 * CHECK_INTERVAL, false),
            KillStep::Emptied
        );
    }

    #[test]
    fn the_kill_rounds_give_up_at_their_limit() {
        let start = Instant::now();
        let mut escalation = Escalation::kill();
        assert_eq!(
            escalation.step(start, true),
            KillStep::Send(StopSignal::Kill)
        );
        assert_eq!(
            escalation.step(start + KILL_ROUNDS_LIMIT - MS, true),
            KillStep::Send(StopSignal::Kill)
        );
        assert_eq!(
            escalation.step(start + KILL_ROUNDS_LIMIT, true),
            KillStep::GaveUp
        );
        assert_eq!(
            escalation.step(start + KILL_ROUNDS_LIMIT, true),
            KillStep::Emptied
        );
    }

    #[test]
    fn a_second_signal_skips_what_is_left_of_the_grace() {
        let start = Instant::now();
        let mut escalation = Escalation::terminate();
        escalation.step(start, true);
        escalation.skip_grace();
        assert_eq!(
            escalation.step(start + MS, true),
            KillStep::Send(StopSignal::Kill)
        );
        let mut before_anything = Escalation::terminate();
        before_anything.skip_grace();
        assert_eq!(
            before_anything.step(start, true),
            KillStep::Send(StopSignal::Kill)
        );
    }

    #[test]
    fn an_empty_group_is_never_signalled() {
        for mut escalation in [Escalation::terminate(), Escalation::kill()] {
            assert_eq!(escalation.step(Instant::now(), false), KillStep::Emptied);
        }
    }
}
