//! `parse_plan` on arbitrary bytes: never panics; an accepted plan is a byte-exact partition
//! of its input (preamble, then each heading line and body in order) with strictly increasing
//! phase numbers and a relative workspace declared inside each body; an error names a line
//! that exists and is one line of text.
#![no_main]

use ai_session_handler::domain::plan::{ParsedPlan, parse_plan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse_plan(data) {
        Ok(plan) => {
            let text = std::str::from_utf8(data).expect("an accepted plan is UTF-8");
            check_accepted(text, &plan);
        }
        Err(error) => {
            let lines = data.iter().filter(|&&byte| byte == b'\n').count() + 1;
            if let Some(line) = error.line {
                assert!((1..=lines).contains(&line), "error line {line} of {lines}");
            }
            assert!(!error.message.is_empty());
            assert!(!error.message.contains('\n'), "{:?}", error.message);
        }
    }
});

fn check_accepted(text: &str, plan: &ParsedPlan) {
    assert!(!plan.phases.is_empty());
    let line_count = text.split_inclusive('\n').count();
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;

    assert!(text.starts_with(&plan.preamble));
    let mut cursor = plan.preamble.len();
    let mut previous_number = 0;
    for (index, phase) in plan.phases.iter().enumerate() {
        assert!(
            phase.number > previous_number,
            "phase numbers must increase"
        );
        previous_number = phase.number;
        assert_eq!(phase.id, format!("phase-{}", phase.number));
        assert_eq!(plan.phase(&phase.id), Some(phase));

        // The heading line starts where the previous body ended ...
        assert_eq!(phase.heading_line, line_of(cursor));
        let heading_end = text[cursor..]
            .find('\n')
            .map_or(text.len(), |at| cursor + at + 1);
        let heading = &text[cursor..heading_end];
        let heading = heading.strip_suffix('\n').unwrap_or(heading);
        let heading = heading.strip_suffix('\r').unwrap_or(heading);
        let expected_suffix = format!(" Phase {}: {}", phase.number, phase.title);
        let hashes = heading.len() - heading.trim_start_matches('#').len();
        assert!((1..=6).contains(&hashes), "heading {heading:?}");
        // Leading zeros are allowed in the number, so compare the parts around it.
        let after_hashes = &heading[hashes..];
        let digits_and_title = after_hashes
            .strip_prefix(" Phase ")
            .unwrap_or_else(|| panic!("heading {heading:?}"));
        let title = digits_and_title
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .strip_prefix(": ")
            .unwrap_or_else(|| panic!("heading {heading:?}"));
        assert_eq!(title, phase.title, "{expected_suffix:?}");
        assert!(!phase.title.is_empty());

        // ... and its body follows it byte for byte.
        assert!(text[heading_end..].starts_with(&phase.body));
        cursor = heading_end + phase.body.len();
        let end_line = match plan.phases.get(index + 1) {
            Some(next) => next.heading_line - 1,
            None => line_count,
        };
        assert_eq!(phase.end_line, end_line);

        assert!(phase.heading_line < phase.workspace_line);
        assert!(phase.workspace_line <= phase.end_line);
        assert!(!phase.workspace.is_empty());
        assert_eq!(phase.workspace, phase.workspace.trim());
        assert!(!phase.workspace.starts_with(['/', '\\']));
        let workspace_line = text
            .split_inclusive('\n')
            .nth(phase.workspace_line - 1)
            .expect("the workspace line exists");
        assert!(workspace_line.contains(&phase.workspace));
    }
    assert_eq!(
        cursor,
        text.len(),
        "the phases must cover the rest of the plan"
    );
}
