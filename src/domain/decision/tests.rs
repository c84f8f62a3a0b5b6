//! Unit tests of the outcome decision (src/domain/decision.rs): exits, result blocks, marker
//! failures, stop causes, exit 75 and signal names.

use super::*;
use crate::domain::marker::ResultBlock;

const OK: ChildExit = ChildExit {
    code: Some(0),
    signal: None,
};

fn complete(text: &str) -> MarkerVerdict {
    MarkerVerdict::Result(ResultBlock {
        kind: ResultKind::Complete,
        text: text.into(),
    })
}

#[test]
fn result_counts_after_zero_exit() {
    let decision = decide(None, OK, complete("done"));
    assert_eq!(decision.status, AttemptStatus::PhaseComplete);
    assert_eq!(decision.summary, "done");
    let blocked = MarkerVerdict::Result(ResultBlock {
        kind: ResultKind::Blocked,
        text: "need keys".into(),
    });
    assert_eq!(decide(None, OK, blocked).status, AttemptStatus::Blocked);
}

#[test]
fn nonzero_exit_overrides_result() {
    let exit = ChildExit {
        code: Some(7),
        signal: None,
    };
    let decision = decide(None, exit, complete("done"));
    assert_eq!(decision.status, AttemptStatus::AgentFailed);
    assert_eq!(decision.summary, "agent command exited with code 7");
    let killed = ChildExit {
        code: None,
        signal: Some(9),
    };
    assert_eq!(
        decide(None, killed, complete("x")).summary,
        "agent command was killed by SIGKILL"
    );
}

#[test]
fn stop_causes_override_everything() {
    let cases = [
        (
            StopCause::Timeout { seconds: 1.0 },
            AttemptStatus::Timeout,
            "agent command timed out after 1 seconds",
        ),
        (
            StopCause::IdleTimeout(IdleStop {
                seconds: 0.5,
                summary: "no output, notification or activity for 0.5 s (idle timeout)".into(),
            }),
            AttemptStatus::Timeout,
            "no output, notification or activity for 0.5 s (idle timeout)",
        ),
        (
            StopCause::BudgetExceeded(CapReached {
                kind: crate::domain::budget::CapKind::Tokens {
                    limit: 100,
                    spent: 150,
                },
                origin: crate::domain::budget::CapOrigin::CommandLine,
            }),
            AttemptStatus::BudgetExceeded,
            "150 tokens (input + output) spent of 100 (--max-tokens) by this plan's attempts; the agent was stopped; to continue, run again with --retry-stopped and --max-tokens above 150",
        ),
        (
            StopCause::StopRegex {
                pattern: "rate limit".into(),
            },
            AttemptStatus::StopRegex,
            "output matched stop regex: rate limit",
        ),
        (
            StopCause::RateLimited {
                pattern: "usage limit reached".into(),
            },
            AttemptStatus::RateLimited,
            "agent output matched rate-limit pattern 'usage limit reached'",
        ),
        (
            StopCause::Interrupted {
                signal: 2,
                during: Some(Box::new(StopCause::RateLimited {
                    pattern: "429".into(),
                })),
            },
            AttemptStatus::Interrupted,
            "handler interrupted while the worker was active (SIGINT); the attempt was already stopping: agent output matched rate-limit pattern '429'",
        ),
        (
            StopCause::Interrupted {
                signal: 15,
                during: None,
            },
            AttemptStatus::Interrupted,
            "handler interrupted while the worker was active (SIGTERM)",
        ),
        (
            StopCause::Interrupted {
                signal: 2,
                during: Some(Box::new(StopCause::Timeout { seconds: 1.0 })),
            },
            AttemptStatus::Interrupted,
            "handler interrupted while the worker was active (SIGINT); the attempt was already stopping: agent command timed out after 1 seconds",
        ),
        (
            StopCause::ExecutionIo(ExecutionFailure::Output {
                detail: "broken pipe".into(),
            }),
            AttemptStatus::ExecutionIoFailed,
            "attempt execution IO failed: broken pipe",
        ),
    ];
    for (cause, status, summary) in cases {
        let failed = ChildExit {
            code: Some(3),
            signal: None,
        };
        let decision = decide(Some(&cause), failed, complete("done"));
        assert_eq!(decision.status, status);
        assert_eq!(decision.summary, summary);
    }
}

#[test]
fn marker_failures_after_zero_exit() {
    assert_eq!(
        decide(None, OK, MarkerVerdict::Missing("x".into())).status,
        AttemptStatus::MissingMarker
    );
    let invalid = decide(None, OK, MarkerVerdict::Invalid("trailing text".into()));
    assert_eq!(invalid.status, AttemptStatus::InvalidMarker);
    assert_eq!(
        invalid.summary,
        "agent output contained an invalid terminal marker (trailing text)"
    );
    assert_eq!(
        decide(None, OK, MarkerVerdict::Multiple("two".into())).status,
        AttemptStatus::MultipleMarkers
    );
}

const TEMPFAIL: ChildExit = ChildExit {
    code: Some(EX_TEMPFAIL),
    signal: None,
};

#[test]
fn exit_75_is_rate_limited_even_after_a_result_block() {
    let expected = Decision {
        status: AttemptStatus::RateLimited,
        summary: "agent command exited with code 75 (temporary failure: rate limited)".into(),
    };
    assert_eq!(decide(None, TEMPFAIL, complete("done")), expected);
    assert_eq!(
        decide(None, TEMPFAIL, MarkerVerdict::Missing("x".into())),
        expected
    );
    assert_eq!(AttemptStatus::RateLimited.exit_code().code(), 4);
}

#[test]
fn stop_causes_beat_exit_75() {
    for (cause, status) in [
        (StopCause::Timeout { seconds: 2.0 }, AttemptStatus::Timeout),
        (
            StopCause::StopRegex {
                pattern: "FATAL".into(),
            },
            AttemptStatus::StopRegex,
        ),
        (
            StopCause::Interrupted {
                signal: 15,
                during: None,
            },
            AttemptStatus::Interrupted,
        ),
    ] {
        assert_eq!(decide(Some(&cause), TEMPFAIL, complete("x")).status, status);
    }
}

#[test]
fn only_exit_75_means_rate_limited() {
    for code in [1, 2, 74, 76, 139, 255] {
        let exit = ChildExit {
            code: Some(code),
            signal: None,
        };
        assert_eq!(
            decide(None, exit, complete("x")).status,
            AttemptStatus::AgentFailed
        );
    }
    let killed = ChildExit {
        code: None,
        signal: Some(EX_TEMPFAIL),
    };
    assert_eq!(
        decide(None, killed, complete("x")).status,
        AttemptStatus::AgentFailed,
        "signal 75 is not exit code 75"
    );
}

#[test]
fn every_stopping_signal_has_its_name() {
    let names: Vec<String> = [1, 2, 3, 15, 9, 11, 64]
        .into_iter()
        .map(signal_name)
        .collect();
    assert_eq!(
        names,
        [
            "SIGHUP",
            "SIGINT",
            "SIGQUIT",
            "SIGTERM",
            "SIGKILL",
            "SIGSEGV",
            "signal 64"
        ]
    );
}
