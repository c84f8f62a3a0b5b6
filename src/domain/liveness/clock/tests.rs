//! Unit and property tests of the attempt's clocks (src/domain/liveness/clock.rs): the wall clock,
//! the idle deadline and its extensions, activity sampling and rate-limited status publication.

use proptest::prelude::*;

use super::*;
use crate::domain::identity::ProcStat;
use crate::domain::liveness::activity::{ProcessCounters, THRESHOLDS};

impl AttemptClock {
    fn status(&self) -> &LatestStatus {
        &self.status
    }
}

fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds)
}

fn woke(clock: &mut AttemptClock, at: f64) -> Vec<ClockEffect> {
    clock.handle(ClockInput::Woke { at: secs(at) })
}

/// A sample at `at` whose one process has used `cpu_ms` so far.
fn sample(at: f64, cpu_ms: u64) -> ActivitySample {
    ActivitySample {
        at: secs(at),
        processes: vec![ProcessCounters {
            stat: ProcStat {
                pid: 10,
                start_time_ticks: 1,
                ..ProcStat::default()
            },
            thread_cpu_ns: vec![(10, cpu_ms * 1_000_000)],
            ..ProcessCounters::default()
        }],
        sockets: Some(Vec::new()),
        tick: Duration::from_millis(10),
    }
}

fn passed(effects: &[ClockEffect]) -> Option<(bool, Option<String>)> {
    effects.iter().find_map(|effect| match effect {
        ClockEffect::DeadlinesPassed { timeout, idle } => Some((*timeout, idle.clone())),
        _ => None,
    })
}

#[test]
fn without_limits_nothing_is_armed() {
    let (mut clock, effects) = AttemptClock::start(None, None, THRESHOLDS);
    assert!(effects.is_empty());
    assert!(
        clock
            .handle(ClockInput::Output { at: secs(1.0) })
            .is_empty()
    );
    assert!(woke(&mut clock, 100.0).is_empty());
}

#[test]
fn the_wall_clock_passes_whatever_the_agent_says() {
    let (mut clock, effects) = AttemptClock::start(Some(secs(5.0)), None, THRESHOLDS);
    assert_eq!(effects, [ClockEffect::WakeAt(secs(5.0))]);
    clock.handle(ClockInput::Output { at: secs(4.0) });
    clock.handle(ClockInput::Notified {
        at: secs(4.5),
        status: None,
        extend: Some(secs(60.0)),
    });
    assert_eq!(passed(&woke(&mut clock, 4.9)), None);
    assert_eq!(passed(&woke(&mut clock, 5.0)), Some((true, None)));
    // Nothing after the end.
    assert!(woke(&mut clock, 6.0).is_empty());
}

#[test]
fn output_asks_for_nothing_and_the_armed_wake_re_arms() {
    let (mut clock, effects) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
    // The first sample is due a sample interval after the launch.
    assert_eq!(effects, [ClockEffect::WakeAt(secs(0.5))]);
    assert!(
        clock
            .handle(ClockInput::Output { at: secs(0.4) })
            .is_empty()
    );
    // The sample moved to 0.9: the wake at 0.5 samples nothing and arms 0.9.
    assert_eq!(woke(&mut clock, 0.5), [ClockEffect::WakeAt(secs(0.9))]);
}

#[test]
fn a_silent_attempt_is_sampled_and_stopped_with_the_message() {
    let (mut clock, _) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
    let mut at = 0.5;
    let mut stopped = None;
    while stopped.is_none() && at < 10.0 {
        let effects = woke(&mut clock, at);
        if effects.contains(&ClockEffect::Sample) {
            clock.handle(ClockInput::Sampled(sample(at, 0)));
        }
        stopped = passed(&effects);
        at += 0.5;
    }
    assert_eq!(
        stopped,
        Some((
            false,
            Some("no output, notification or activity for 2 s (idle timeout)".to_owned())
        ))
    );
    assert!((at - 2.5).abs() < 1e-9, "stopped at {}", at - 0.5);
}

#[test]
fn work_between_samples_keeps_a_silent_attempt_alive() {
    let (mut clock, _) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
    let mut cpu = 0;
    for step in 1..40 {
        let at = f64::from(step) * 0.5;
        let effects = woke(&mut clock, at);
        assert_eq!(passed(&effects), None, "stopped at {at}");
        if effects.contains(&ClockEffect::Sample) {
            // 400 ms of CPU a second: a busy tool.
            cpu += 200;
            let effects = clock.handle(ClockInput::Sampled(sample(at, cpu)));
            if step > 1 {
                assert!(
                    effects
                        .iter()
                        .any(|effect| matches!(effect, ClockEffect::Working(_))),
                    "{effects:?}"
                );
            }
        }
    }
}

#[test]
fn one_sample_at_a_time() {
    let (mut clock, _) = AttemptClock::start(None, Some(secs(4.0)), THRESHOLDS);
    assert_eq!(
        woke(&mut clock, 1.0),
        [ClockEffect::Sample, ClockEffect::WakeAt(secs(4.0))]
    );
    // The sample is late: later wake-ups ask for no second one.
    assert!(!woke(&mut clock, 2.0).contains(&ClockEffect::Sample));
    // Once it is in, the next is an interval after it.
    assert_eq!(
        clock.handle(ClockInput::Sampled(sample(1.0, 0))),
        [ClockEffect::WakeAt(secs(2.0))]
    );
}

#[test]
fn an_extension_moves_only_the_idle_deadline_and_is_published_once() {
    let (mut clock, _) = AttemptClock::start(Some(secs(30.0)), Some(secs(2.0)), THRESHOLDS);
    let effects = clock.handle(ClockInput::Notified {
        at: secs(0.1),
        status: None,
        extend: Some(secs(5.0)),
    });
    assert_eq!(
        effects.first(),
        Some(&ClockEffect::Extended {
            at: secs(0.1),
            deadline: secs(5.1)
        })
    );
    let again = clock.handle(ClockInput::Notified {
        at: secs(0.2),
        status: None,
        extend: Some(secs(5.0)),
    });
    assert!(
        !again
            .iter()
            .any(|effect| matches!(effect, ClockEffect::Extended { .. })),
        "{again:?}"
    );
    for at in [1.0, 2.0, 3.0, 4.0, 5.0] {
        let effects = woke(&mut clock, at);
        if effects.contains(&ClockEffect::Sample) {
            clock.handle(ClockInput::Sampled(sample(at, 0)));
        }
        assert_eq!(passed(&effects), None, "stopped at {at}");
    }
    assert_eq!(
        passed(&woke(&mut clock, 5.2)),
        Some((
            false,
            Some(
                "no output, notification or activity for 5 s (idle timeout 2 s, extended by the agent)"
                    .to_owned()
            )
        ))
    );
}

fn extensions(effects: &[ClockEffect]) -> Vec<(Duration, Duration)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            ClockEffect::Extended { at, deadline } => Some((*at, *deadline)),
            _ => None,
        })
        .collect()
}

/// An agent growing its announced silence by 1.1 s with each of 380 datagrams a second: one
/// `idle-deadline-extended` a second, the latest deadline written when the second is over.
#[test]
fn extensions_are_published_at_most_once_a_second_the_latest_kept() {
    let (mut clock, _) = AttemptClock::start(None, Some(secs(2.0)), THRESHOLDS);
    let mut published = Vec::new();
    let mut by = 5.0;
    for step in 0..380 {
        let at = secs(0.1 + f64::from(step) / 380.0);
        by += 1.1;
        let effects = clock.handle(ClockInput::Notified {
            at,
            status: None,
            extend: Some(secs(by)),
        });
        published.extend(extensions(&effects));
    }
    assert_eq!(published.len(), 1, "{published:?}");
    assert_eq!(published[0].0, secs(0.1));
    let last_deadline = secs(0.1 + 379.0 / 380.0 + by);
    let effects = woke(&mut clock, 1.1);
    let trailing = extensions(&effects);
    assert_eq!(trailing.len(), 1, "{effects:?}");
    assert_eq!(trailing[0].0, secs(1.1));
    assert!(
        trailing[0].1.abs_diff(last_deadline) < Duration::from_millis(1),
        "{trailing:?} vs {last_deadline:?}"
    );
    assert!(extensions(&woke(&mut clock, 2.5)).is_empty());
}

#[test]
fn statuses_are_published_rate_limited_and_named_in_the_stop_message() {
    let (mut clock, _) = AttemptClock::start(None, Some(secs(10.0)), THRESHOLDS);
    let set = |text: &str| Some(StatusChange::Set(text.to_owned()));
    let effects = clock.handle(ClockInput::Notified {
        at: secs(1.0),
        status: set("thinking"),
        extend: None,
    });
    assert_eq!(
        effects.first(),
        Some(&ClockEffect::Publish {
            text: Some("thinking".to_owned()),
            since: Some(secs(1.0))
        })
    );
    // A second change within the second waits for it; a wake-up is armed for it.
    woke(&mut clock, 1.0);
    let effects = clock.handle(ClockInput::Notified {
        at: secs(1.2),
        status: set("tool: Bash cargo test"),
        extend: None,
    });
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(clock.armed, Some(secs(2.0)));
    let effects = woke(&mut clock, 2.0);
    assert_eq!(
        effects.first(),
        Some(&ClockEffect::Publish {
            text: Some("tool: Bash cargo test".to_owned()),
            since: Some(secs(1.2))
        })
    );
    let mut at = 2.0;
    let stop = loop {
        at += 1.0;
        let effects = woke(&mut clock, at);
        if effects.contains(&ClockEffect::Sample) {
            clock.handle(ClockInput::Sampled(sample(at, 0)));
        }
        if let Some((_, idle)) = passed(&effects) {
            break idle;
        }
    };
    assert_eq!(
        stop.as_deref(),
        Some(
            "no output, notification or activity for 10 s (idle timeout); last status 'tool: Bash cargo test' 11 s ago"
        )
    );
}

#[test]
fn a_status_without_an_idle_limit_is_still_published() {
    let (mut clock, _) = AttemptClock::start(None, None, THRESHOLDS);
    let effects = clock.handle(ClockInput::Notified {
        at: secs(1.0),
        status: Some(StatusChange::Set("generating".to_owned())),
        extend: Some(secs(9.0)),
    });
    assert_eq!(
        effects,
        [ClockEffect::Publish {
            text: Some("generating".to_owned()),
            since: Some(secs(1.0))
        }]
    );
    assert_eq!(clock.status().current(), Some(("generating", secs(1.0))));
}

proptest! {
    /// Whatever arrives, the clock always keeps a wake-up armed no later than its next
    /// deadline, so no deadline can be missed; and it passes at most once.
    #[test]
    fn a_deadline_is_never_missed(
        inputs in proptest::collection::vec((0u64..400, 0u8..4, any::<bool>()), 0..80),
        limit in 500u64..5_000,
    ) {
        let (mut clock, effects) = AttemptClock::start(
            Some(Duration::from_millis(20_000)),
            Some(Duration::from_millis(limit)),
            THRESHOLDS,
        );
        let mut wakes: Vec<Duration> = effects.iter().filter_map(|effect| match effect {
            ClockEffect::WakeAt(at) => Some(*at),
            _ => None,
        }).collect();
        let mut at = Duration::ZERO;
        let mut passes = 0;
        let mut sampling = false;
        for (step, kind, busy) in inputs {
            at += Duration::from_millis(step);
            // Every wake-up due by now comes first, in order.
            wakes.sort();
            while let Some(&wake) = wakes.first().filter(|wake| **wake <= at) {
                wakes.remove(0);
                let effects = clock.handle(ClockInput::Woke { at: wake });
                for effect in effects {
                    match effect {
                        ClockEffect::WakeAt(next) => wakes.push(next),
                        ClockEffect::Sample => sampling = true,
                        ClockEffect::DeadlinesPassed { .. } => passes += 1,
                        _ => {}
                    }
                }
                wakes.sort();
            }
            let input = match kind {
                0 => ClockInput::Output { at },
                1 => ClockInput::Notified { at, status: None, extend: busy.then(|| Duration::from_millis(3_000)) },
                2 if sampling => {
                    sampling = false;
                    ClockInput::Sampled(sample(at.as_secs_f64(), if busy { at.as_millis() as u64 } else { 0 }))
                }
                _ => continue,
            };
            for effect in clock.handle(input) {
                match effect {
                    ClockEffect::WakeAt(next) => wakes.push(next),
                    ClockEffect::DeadlinesPassed { .. } => passes += 1,
                    _ => {}
                }
            }
            if !clock.fired {
                let next = clock.next_wake().expect("a limit is set");
                prop_assert!(
                    wakes.iter().any(|wake| *wake <= next),
                    "nothing armed by {next:?}: {wakes:?}"
                );
            }
        }
        prop_assert!(passes <= 1);
    }
}
