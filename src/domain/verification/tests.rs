//! Unit and property tests of `domain::verification`.

use super::*;
use proptest::prelude::*;
use strum::IntoEnumIterator;

impl VerifyCheck {
    /// `verify 2 (sh, line 14): cargo test`.
    fn describe(&self) -> String {
        format!(
            "verify {} ({}, line {}): {}",
            self.index,
            self.interpreter.name(),
            self.line,
            self.first_line()
        )
    }
}

fn check(interpreter: Interpreter, script: &str) -> VerifyCheck {
    VerifyCheck {
        index: 2,
        interpreter,
        script: script.to_owned(),
        line: 14,
    }
}

#[test]
fn the_info_string_names_the_interpreter_and_an_empty_one_is_sh() {
    assert_eq!(Interpreter::from_info(""), Ok(Interpreter::Sh));
    assert_eq!(Interpreter::from_info("   "), Ok(Interpreter::Sh));
    assert_eq!(Interpreter::from_info("sh"), Ok(Interpreter::Sh));
    assert_eq!(
        Interpreter::from_info("python3 title=\"unit\""),
        Ok(Interpreter::Python3)
    );
    for interpreter in Interpreter::iter() {
        assert_eq!(Interpreter::from_info(interpreter.name()), Ok(interpreter));
    }
    for unknown in ["shell", "Python3", "console", "bash;", "{.sh}"] {
        assert_eq!(
            Interpreter::from_info(unknown),
            Err(UnknownInterpreter(unknown.to_owned()))
        );
    }
    assert_eq!(
        UnknownInterpreter("shell".into()).to_string(),
        "unknown verify interpreter 'shell' in the fence's info string; use one of sh, bash, dash, zsh, ksh, python3, python, perl, ruby, node, or no info string for /bin/sh -e"
    );
}

#[test]
fn shells_run_the_script_with_dash_e_and_name_the_check_others_take_it_inline() {
    assert_eq!(
        check(Interpreter::Sh, "cargo test\n").argv(),
        ["/bin/sh", "-e", "-c", "cargo test\n", "verify-2"]
    );
    assert_eq!(
        check(Interpreter::Bash, "x\n").argv(),
        ["bash", "-e", "-c", "x\n", "verify-2"]
    );
    assert_eq!(
        check(Interpreter::Python3, "import sys\n").argv(),
        ["python3", "-c", "import sys\n"]
    );
    assert_eq!(
        check(Interpreter::Perl, "1;\n").argv(),
        ["perl", "-e", "1;\n"]
    );
    assert_eq!(
        check(Interpreter::Node, "1\n").argv(),
        ["node", "-e", "1\n"]
    );
    assert_eq!(
        check(Interpreter::Ruby, "1\n").argv(),
        ["ruby", "-e", "1\n"]
    );
    assert_eq!(Interpreter::Sh.program(), "/bin/sh");
    assert_eq!(Interpreter::Zsh.program(), "zsh");
}

#[test]
fn the_first_line_is_the_first_command_trimmed_and_cut() {
    let script = "\n   \n  cargo test --locked  \nmore\n";
    let check = check(Interpreter::Sh, script);
    assert_eq!(check.first_line(), "cargo test --locked");
    assert_eq!(
        check.transcript_header(),
        "--- verify 2: cargo test --locked ---"
    );
    assert_eq!(
        check.describe(),
        "verify 2 (sh, line 14): cargo test --locked"
    );
    let long = format!("echo {}\n", "é".repeat(200));
    let cut = VerifyCheck {
        script: long,
        ..check
    }
    .first_line();
    assert_eq!(cut.chars().count(), 121);
    assert!(cut.ends_with('…'));
}

#[test]
fn the_output_tail_keeps_the_last_lines_within_a_bound() {
    let mut tail = OutputTail::default();
    tail.push(b"one\ntwo\nthr");
    tail.push(b"ee\n");
    assert_eq!(tail.text(), "one\ntwo\nthree");
    let mut long = OutputTail::default();
    for line in 0..100 {
        long.push(format!("line {line}\n").as_bytes());
    }
    let text = long.text();
    assert_eq!(text.lines().count(), TAIL_LINES);
    assert!(
        text.starts_with("line 60\n") && text.ends_with("line 99"),
        "{text}"
    );
    // More than the bound: the partial first line is left out.
    let mut flood = OutputTail::default();
    flood.push(&vec![b'x'; TAIL_BYTES - 3]);
    flood.push(b"\nlast\n");
    assert_eq!(flood.text(), "last");
    let mut one_chunk = OutputTail::default();
    one_chunk.push(&[b"start\n".as_slice(), &vec![b'y'; TAIL_BYTES], b"\nend\n"].concat());
    assert_eq!(one_chunk.text(), "end");
    // No newline in the last bytes: they are shown, not "nothing".
    let mut unbroken = OutputTail::default();
    unbroken.push(b"first line\n");
    unbroken.push(&vec![b'z'; TAIL_BYTES + 3000]);
    let text = unbroken.text();
    assert_eq!(text.chars().count(), 1 + PARTIAL_LINE_CHARS, "{text}");
    assert!(text.starts_with('…') && text.ends_with("zzz"), "{text}");
    let mut invalid = OutputTail::default();
    invalid.push(b"bad \xff byte\n");
    assert_eq!(invalid.text(), "bad \u{fffd} byte");
    assert_eq!(OutputTail::default().text(), "");
}

#[test]
fn a_failed_check_says_which_and_how() {
    let failed = |exit_code, signal, timed_out| FailedCheck {
        index: 2,
        command_first_line: "cargo test".into(),
        exit_code,
        signal,
        timed_out,
        output_tail: String::new(),
    };
    assert_eq!(
        failed(Some(101), None, false).describe(),
        "verify check 2 (cargo test) exited with code 101"
    );
    assert_eq!(
        failed(None, Some(9), true).describe(),
        "verify check 2 (cargo test) timed out and was stopped"
    );
    assert_eq!(
        failed(None, Some(9), false).describe(),
        "verify check 2 (cargo test) was killed by SIGKILL"
    );
    assert_eq!(
        failed(None, None, false).describe(),
        "verify check 2 (cargo test) ended with an unknown status"
    );
}

#[test]
fn verification_round_trips_through_its_outcome_keys() {
    let record = |index| CheckRecord {
        index,
        command_first_line: format!("check {index}"),
        exit_code: Some(0),
        duration_ms: 3,
        output_bytes: 0,
    };
    let failure = FailedCheck {
        index: 2,
        command_first_line: "check 2".into(),
        exit_code: Some(1),
        signal: None,
        timed_out: false,
        output_tail: "boom".into(),
    };
    for verification in [
        Verification::Passed(vec![record(1), record(2)]),
        Verification::Failed {
            checks: vec![record(1), record(2)],
            failure: failure.clone(),
        },
        Verification::Skipped,
    ] {
        let (written, failed) = verification.to_record();
        assert_eq!(
            Verification::from_record(&written, failed.as_ref()),
            Ok(verification)
        );
    }
    assert!(Verification::from_record(&VerificationRecord::Skipped, Some(&failure)).is_err());
    assert!(
        Verification::from_record(&VerificationRecord::Checks(vec![record(1)]), Some(&failure))
            .is_err()
    );
    assert_eq!(
        serde_json::to_value(VerificationRecord::Skipped).unwrap(),
        serde_json::json!("skipped")
    );
}

proptest! {
    #[test]
    fn the_tail_is_the_end_of_the_output_however_it_is_chunked(
        output in "([a-z]{0,12}\n){0,80}",
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let bytes = output.as_bytes();
        let mut positions: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        positions.push(0);
        positions.push(bytes.len());
        positions.sort_unstable();
        let mut tail = OutputTail::default();
        for pair in positions.windows(2) {
            tail.push(&bytes[pair[0]..pair[1]]);
        }
        let lines: Vec<&str> = output.lines().collect();
        let expected = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
        prop_assert_eq!(tail.text(), expected);
    }
}

fn outcome(exit_code: Option<i32>, timed_out: bool) -> CheckOutcome {
    CheckOutcome {
        exit_code,
        signal: exit_code.is_none().then_some(9),
        timed_out,
        duration_ms: 5,
        output_bytes: 7,
        output_tail: "last words".into(),
    }
}

fn checks(count: usize) -> Vec<VerifyCheck> {
    (1..=count)
        .map(|index| VerifyCheck {
            index,
            interpreter: Interpreter::Sh,
            script: format!("check {index}\n"),
            line: index * 10,
        })
        .collect()
}

#[test]
fn a_check_passes_only_by_exiting_zero_in_time() {
    assert!(outcome(Some(0), false).passed());
    assert!(!outcome(Some(1), false).passed());
    assert!(!outcome(None, false).passed());
    assert!(
        !outcome(Some(0), true).passed(),
        "a timeout fails even a zero exit"
    );
    let check = &checks(1)[0];
    assert_eq!(
        outcome(Some(3), false).record(check),
        CheckRecord {
            index: 1,
            command_first_line: "check 1".into(),
            exit_code: Some(3),
            duration_ms: 5,
            output_bytes: 7,
        }
    );
    assert_eq!(outcome(Some(0), false).failure(check), None);
    assert_eq!(
        outcome(None, true).failure(check),
        Some(FailedCheck {
            index: 1,
            command_first_line: "check 1".into(),
            exit_code: None,
            signal: Some(9),
            timed_out: true,
            output_tail: "last words".into(),
        })
    );
}

#[test]
fn checks_run_in_order_and_the_first_failure_stops_the_rest() {
    let all = checks(3);
    assert_eq!(next_check(&all, &[]).map(|check| check.index), Some(1));
    let passed = outcome(Some(0), false);
    let failed = outcome(Some(1), false);
    assert_eq!(
        next_check(&all, std::slice::from_ref(&passed)).map(|check| check.index),
        Some(2)
    );
    assert_eq!(next_check(&all, &[passed.clone(), failed.clone()]), None);
    assert_eq!(
        verification_of(&all, std::slice::from_ref(&passed)),
        None,
        "checks still due"
    );
    match verification_of(&all, &[passed.clone(), failed.clone()]) {
        Some(Verification::Failed { checks, failure }) => {
            assert_eq!(checks.len(), 2);
            assert_eq!(failure.index, 2);
        }
        other => panic!("{other:?}"),
    }
    let three = [passed.clone(), passed.clone(), passed.clone()];
    assert_eq!(next_check(&all, &three), None);
    match verification_of(&all, &three) {
        Some(Verification::Passed(records)) => {
            assert_eq!(
                records
                    .iter()
                    .map(|record| record.index)
                    .collect::<Vec<_>>(),
                [1, 2, 3]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        verification_of(&[], &[]),
        Some(Verification::Passed(Vec::new()))
    );
}

#[test]
fn a_stopped_check_says_why_and_an_interrupted_attempt_keeps_the_agents_summary() {
    use crate::domain::decision::StopCause;
    use crate::domain::failure::ExecutionFailure;
    let interrupted = StopCause::Interrupted {
        signal: 15,
        during: None,
    };
    assert_eq!(
        stop_detail(&interrupted),
        "handler interrupted while a verify check ran (SIGTERM)"
    );
    let failed = StopCause::ExecutionIo(ExecutionFailure::Output {
        detail: "/t.txt: disk full".into(),
    });
    assert_eq!(
        stop_detail(&failed),
        "attempt execution IO failed: /t.txt: disk full"
    );
    assert_eq!(
        interrupted_summary(2, &checks(1)[0], "parser done"),
        "handler interrupted while verify check 1 (check 1) ran (SIGINT); the agent had reported phase-complete: parser done"
    );
}

#[test]
fn a_phase_is_held_to_its_checks_unless_they_are_skipped() {
    assert_eq!(VerifyPlan::for_phase(&[], true), VerifyPlan::None);
    assert_eq!(VerifyPlan::for_phase(&[], false), VerifyPlan::None);
    assert_eq!(VerifyPlan::for_phase(&checks(2), false), VerifyPlan::Skip);
    assert_eq!(
        VerifyPlan::for_phase(&checks(2), true),
        VerifyPlan::Run(checks(2))
    );
    assert!(VerifyPlan::Skip.checks().is_empty());
}

#[test]
fn recorded_checks_without_a_verdict_read_back_as_stopped() {
    let record = VerificationRecord::Checks(vec![outcome(None, false).record(&checks(1)[0])]);
    assert!(matches!(
        Verification::read(AttemptStatus::PhaseComplete, &record, None),
        Ok(Verification::Passed(_))
    ));
    assert!(matches!(
        Verification::read(AttemptStatus::Interrupted, &record, None),
        Ok(Verification::Stopped(_))
    ));
    let stopped = Verification::Stopped(vec![outcome(None, false).record(&checks(1)[0])]);
    assert_eq!(stopped.to_record(), (record, None));
}
