//! Unit tests of what the handler prints (src/report.rs): attempt banners, sign-of-life lines,
//! refusal explanations and the transcript tail.

use super::*;

fn invocation() -> Invocation {
    Invocation {
        plan: "p.md".into(),
        carried: vec!["--quiet".into()],
        ..Invocation::default()
    }
}

#[test]
fn banners_number_the_attempt_as_status_counts_it() {
    let banner = |of_phase, in_run, of| {
        phase_banner(
            "phase-2",
            2,
            5,
            "Second",
            AttemptNumber {
                of_phase,
                in_run,
                of,
            },
        )
    };
    assert_eq!(banner(1, 1, 1), "phase-2 (2/5) Second · attempt 1");
    // Attempts before this run count; the run's own counter is 1 without a policy.
    assert_eq!(banner(3, 1, 1), "phase-2 (2/5) Second · attempt 3");
    assert_eq!(banner(2, 2, 3), "phase-2 (2/5) Second · attempt 2 of 3");
    assert_eq!(
        banner(4, 2, 3),
        "phase-2 (2/5) Second · attempt 4 (2 of 3 in this run)"
    );
}

#[test]
fn a_sign_of_life_counts_whole_seconds_and_has_room_for_a_status() {
    use std::time::Duration;
    let silent = sign_of_life(
        attempt_head("phase-1", 1, 3, Duration::from_millis(41_500), 1_258),
        Duration::from_millis(38_900),
        None,
    );
    assert_eq!(silent, "phase-1 (1/3) 41s · 1.2 KiB · no output for 38s");
    let with_status = sign_of_life(
        attempt_head("phase-1", 1, 3, Duration::from_secs(5), 0),
        Duration::from_secs(5),
        Some("  running the tests \u{1b}[31m "),
    );
    assert_eq!(
        with_status,
        "phase-1 (1/3) 5.0s · 0 B · running the tests \\u{1b}[31m"
    );
}

#[test]
fn a_refusal_no_flag_lifts_says_what_to_change_first() {
    let step = after_refusal(
        &invocation(),
        &Refusal::CompletedPhasesMissing {
            path: "/p.md".into(),
            missing: vec!["phase-1".into(), "phase-2".into(), "phase-4".into()],
        },
        None,
        &EndFacts::default(),
    );
    assert_eq!(
        step.line(),
        "next: restore the completed phase-1, phase-2 and phase-4 headings in the plan, then ai-session-handler run --plan p.md --quiet"
    );
    let moved = after_refusal(
        &invocation(),
        &Refusal::PlanPathMismatch {
            stored: "/old/p.md".into(),
            actual: "/new/p.md".into(),
        },
        None,
        &EndFacts::default(),
    );
    assert_eq!(moved.argv[3], "/old/p.md");
    assert!(
        moved
            .why
            .unwrap()
            .starts_with("restore the plan at /old/p.md")
    );
    let retried = after_refusal(
        &invocation(),
        &Refusal::RetriedPhaseMissing {
            phase_id: "phase-3".into(),
            abandoned_attempt: false,
        },
        None,
        &EndFacts::default(),
    );
    assert_eq!(retried.flags, ["--retry-stopped", "--accept-plan-change"]);
}

#[test]
fn a_stopped_clarification_adds_the_acceptance_to_the_flags_that_lift_it() {
    let stop = Stop {
        reason: AttemptStatus::NeedsClarification,
        phase_id: "phase-1".into(),
        message: None,
        clarification_request: Some("which?".into()),
    };
    let lifted = RecoveryFlags {
        retry_stopped: true,
        accept_plan_change: false,
    };
    let step = after_refusal(
        &invocation(),
        &Refusal::Stopped(stop),
        Some(lifted),
        &EndFacts::default(),
    );
    assert_eq!(step.flags, ["--retry-stopped", "--accept-plan-change"]);
    assert_eq!(
        step.why.as_deref(),
        Some("answer in the plan or the repository")
    );
}

#[test]
fn tail_of_a_whole_file_is_its_last_forty_lines() {
    let text: String = (1..=50).map(|n| format!("line {n}\r\n")).collect();
    let tail = tail_lines(text.as_bytes(), true);
    assert_eq!(tail[0], "transcript tail (last 40 lines):");
    assert_eq!(tail[1], "line 11");
    assert_eq!(tail[40], "line 50");
    assert_eq!(tail.len(), 41);
}

#[test]
fn tail_of_a_short_file_has_every_line() {
    let tail = tail_lines(b"only\nlast without newline", true);
    assert_eq!(
        tail,
        [
            "transcript tail (last 2 lines):",
            "only",
            "last without newline"
        ]
    );
}

#[test]
fn a_partial_first_line_of_a_bounded_read_is_dropped() {
    let tail = tail_lines(b"ment of a cut line\nwhole line\n", false);
    assert_eq!(tail, ["transcript tail (last 1 line):", "whole line"]);
}

#[test]
fn a_line_longer_than_the_read_is_shown_cut() {
    let tail = tail_lines(b"end of a very long line", false);
    assert_eq!(
        tail,
        [
            "transcript tail (last 1 line):",
            "[…]end of a very long line"
        ]
    );
}

#[test]
fn an_unreadable_tail_is_one_line_saying_why() {
    assert_eq!(
        transcript_tail("/nonexistent/transcript.txt"),
        ["transcript tail unavailable: /nonexistent/transcript.txt: No such file or directory"]
    );
}

#[test]
fn a_tail_shows_result_tags_as_printed_and_an_outer_handler_sees_none() {
    let tail = tail_lines(
        b"work\n<phase-complete>done</phase-complete>\n< /phase-blocked >\n",
        true,
    );
    let shown: Vec<String> = tail
        .iter()
        .map(|line| printable(line).into_owned())
        .collect();
    // What a terminal shows: the tags as printed (the joiner is zero-width).
    let visible = |line: &str| line.replace(crate::domain::marker::WORD_JOINER, "");
    assert_eq!(visible(&shown[2]), "<phase-complete>done</phase-complete>");
    assert_eq!(visible(&shown[3]), "< /phase-blocked >");
    assert!(!shown.iter().any(|line| line.contains("&lt;")));
    let text = shown.join("\n") + "\n";
    assert!(matches!(
        crate::domain::marker::validate_streams(text.as_bytes(), b""),
        crate::domain::marker::MarkerVerdict::Missing(_)
    ));
}
