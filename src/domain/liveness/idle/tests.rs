//! Unit and property tests of the idle rule and its deadline extensions.

use proptest::prelude::*;

use super::*;
use crate::domain::notify::StatusChange;

impl IdleDeadline {
    fn last_sign_of_life(&self) -> Duration {
        self.last_life
    }

    fn check(&self, at: Duration) -> IdleCheck {
        let deadline = self.deadline();
        if at >= deadline {
            IdleCheck::Idle
        } else {
            IdleCheck::Alive { deadline }
        }
    }
}

/// Whether the attempt is idle at a given time, and if not, when it will be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdleCheck {
    Alive { deadline: Duration },
    Idle,
}

fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds)
}

#[test]
fn the_launch_is_the_first_sign_of_life() {
    let idle = IdleDeadline::new(secs(2.0));
    assert_eq!(
        idle.check(secs(1.9)),
        IdleCheck::Alive {
            deadline: secs(2.0)
        }
    );
    assert_eq!(idle.check(secs(2.0)), IdleCheck::Idle);
    assert_eq!(idle.last_sign_of_life(), Duration::ZERO);
}

#[test]
fn every_sign_of_life_moves_the_deadline() {
    let mut idle = IdleDeadline::new(secs(2.0));
    for at in [1.0, 2.5, 4.0] {
        idle.sign_of_life(secs(at));
        assert_eq!(idle.deadline(), secs(at + 2.0));
    }
    assert_eq!(idle.last_sign_of_life(), secs(4.0));
    // A late report of an earlier sign changes nothing.
    idle.sign_of_life(secs(3.0));
    assert_eq!(idle.deadline(), secs(6.0));
}

#[test]
fn an_extension_is_the_later_of_the_current_deadline_and_now_plus_n() {
    let mut idle = IdleDeadline::new(secs(2.0));
    idle.sign_of_life(secs(1.0));
    assert_eq!(
        idle.extend(secs(1.0), secs(5.0)),
        Extension::Moved {
            deadline: secs(6.0)
        }
    );
    assert_eq!(
        idle.check(secs(5.9)),
        IdleCheck::Alive {
            deadline: secs(6.0)
        }
    );
    assert_eq!(idle.check(secs(6.0)), IdleCheck::Idle);
    // Shorter than what is in force: no change.
    assert_eq!(idle.extend(secs(2.0), secs(1.0)), Extension::Unchanged);
    assert_eq!(idle.deadline(), secs(6.0));
    // Output during the extension does not cut it short…
    idle.sign_of_life(secs(2.0));
    assert_eq!(idle.deadline(), secs(6.0));
    // …and life after it ends is measured by the limit again.
    idle.sign_of_life(secs(5.5));
    assert_eq!(idle.deadline(), secs(7.5));
}

#[test]
fn the_agents_5_s_extension_then_4_s_sleep_survives_and_8_s_does_not() {
    // Issue 18's cases: EXTEND_TIMEOUT_USEC=5000000 at 0.1 s under --idle-timeout 2.
    let mut idle = IdleDeadline::new(secs(2.0));
    idle.sign_of_life(secs(0.1));
    idle.extend(secs(0.1), secs(5.0));
    assert!(matches!(idle.check(secs(4.1)), IdleCheck::Alive { .. }));
    assert_eq!(idle.check(secs(5.1)), IdleCheck::Idle);
}

#[test]
fn re_announcing_a_wait_is_published_once_a_second_of_movement() {
    let mut idle = IdleDeadline::new(secs(2.0));
    assert_eq!(
        idle.extend(secs(1.0), secs(10.0)),
        Extension::Moved {
            deadline: secs(11.0)
        }
    );
    assert_eq!(
        idle.extend(secs(1.5), secs(10.0)),
        Extension::Nudged {
            deadline: secs(11.5)
        }
    );
    assert_eq!(idle.deadline(), secs(11.5));
    assert_eq!(
        idle.extend(secs(2.0), secs(10.0)),
        Extension::Moved {
            deadline: secs(12.0)
        }
    );
}

#[test]
fn extensions_are_bounded() {
    let mut idle = IdleDeadline::new(secs(2.0));
    idle.extend(secs(1.0), Duration::MAX);
    assert_eq!(idle.deadline(), secs(1.0) + MAX_EXTENSION);
}

#[test]
fn the_stop_message_names_the_silence_and_the_last_status() {
    let mut status = LatestStatus::default();
    let mut idle = IdleDeadline::new(secs(10.0));
    assert_eq!(
        idle.stop_message(secs(10.0), &status),
        "no output, notification or activity for 10 s (idle timeout)"
    );
    status.update(
        secs(3.0),
        StatusChange::Set("tool: Bash cargo test".to_owned()),
    );
    idle.sign_of_life(secs(5.0));
    assert_eq!(
        idle.stop_message(secs(15.0), &status),
        "no output, notification or activity for 10 s (idle timeout); last status \
         'tool: Bash cargo test' 12 s ago"
    );
    let mut idle = IdleDeadline::new(secs(2.0));
    idle.sign_of_life(secs(0.1));
    idle.extend(secs(0.1), secs(5.0));
    assert_eq!(
        idle.stop_message(secs(5.1), &LatestStatus::default()),
        "no output, notification or activity for 5 s (idle timeout 2 s, extended by the agent)"
    );
    let idle = IdleDeadline::new(secs(0.5));
    assert_eq!(
        idle.stop_message(secs(0.5), &LatestStatus::default()),
        "no output, notification or activity for 0.5 s (idle timeout)"
    );
}

proptest! {
    #[test]
    fn the_deadline_never_moves_earlier(
        events in proptest::collection::vec((0u64..100_000, proptest::option::of(0u64..50_000), any::<bool>()), 0..40),
        limit in 1u64..20_000,
    ) {
        let mut idle = IdleDeadline::new(Duration::from_millis(limit));
        let mut at = 0;
        let mut before = idle.deadline();
        for (step, extension, life) in events {
            at += step;
            let now = Duration::from_millis(at);
            if life {
                idle.sign_of_life(now);
            }
            if let Some(extension) = extension {
                idle.extend(now, Duration::from_millis(extension));
            }
            let after = idle.deadline();
            prop_assert!(after >= before);
            let last = idle.last_sign_of_life();
            prop_assert!(after >= last + Duration::from_millis(limit));
            before = after;
        }
    }
}
