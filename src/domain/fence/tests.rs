//! Tests of the fence tracker: openings, closings, info strings and unclosed fences.

use super::*;
use proptest::prelude::*;

fn roles(text: &str) -> Vec<LineRole> {
    let mut tracker = FenceTracker::new();
    text.split('\n')
        .map(|line| tracker.classify_line(line.as_bytes()))
        .collect()
}

use LineRole::*;

#[test]
fn backtick_fence_opens_and_closes() {
    assert_eq!(
        roles("a\n```rust\n## Phase 9: x\n```\nb"),
        vec![Text, FenceOpen, Fenced, FenceClose, Text]
    );
}

#[test]
fn tilde_fence_needs_tilde_closer() {
    assert_eq!(roles("~~~\n```\n~~~"), vec![FenceOpen, Fenced, FenceClose]);
}

#[test]
fn closer_must_be_at_least_as_long() {
    assert_eq!(
        roles("````\n```\n`````"),
        vec![FenceOpen, Fenced, FenceClose]
    );
}

#[test]
fn closer_allows_only_trailing_whitespace() {
    assert_eq!(
        roles("```\n``` x\n```  \t\r"),
        vec![FenceOpen, Fenced, FenceClose]
    );
}

#[test]
fn two_characters_are_not_a_fence() {
    assert_eq!(roles("``\n~~"), vec![Text, Text]);
}

#[test]
fn indentation_up_to_three() {
    assert_eq!(roles("   ```\n```"), vec![FenceOpen, FenceClose]);
    assert_eq!(roles("    ```"), vec![Text]);
    assert_eq!(roles("\t\t\t~~~\n~~~"), vec![FenceOpen, FenceClose]);
}

#[test]
fn backtick_info_with_backtick_is_not_a_fence() {
    assert_eq!(roles("``` a`b"), vec![Text]);
    assert_eq!(roles("~~~ a`b\n~~~"), vec![FenceOpen, FenceClose]);
}

#[test]
fn incremental_feed_matches_line_feed() {
    let text = "x\n ```py\ncode\n```\n~~~~\n~~~\n~~~~~ \n";
    for split in 0..text.len() {
        let mut tracker = FenceTracker::new();
        tracker.feed(&text.as_bytes()[..split]);
        tracker.feed(&text.as_bytes()[split..]);
        assert_eq!(tracker.finish(), None, "split at {split}");
    }
    let mut tracker = FenceTracker::new();
    tracker.feed(b"a\n```\nb");
    let open = tracker.finish().expect("fence stays open");
    assert_eq!(open.line, 2);
    assert_eq!(open.ch, FenceChar::Backtick);
}

#[test]
fn final_line_without_newline_is_classified() {
    let mut tracker = FenceTracker::new();
    tracker.feed(b"```\ncode\n```");
    assert_eq!(tracker.finish(), None);
}

#[test]
fn in_fence_reports_state_at_line_start() {
    let mut tracker = FenceTracker::new();
    tracker.feed(b"```\n");
    assert!(tracker.open_fence().is_some());
    assert!(tracker.at_line_start());
    tracker.feed(b"<tag");
    assert!(tracker.open_fence().is_some());
    assert!(!tracker.at_line_start());
}

#[test]
fn skipped_lines_are_counted() {
    let mut tracker = FenceTracker::new();
    tracker.feed(b"a\nb\n x `y`\n  ~~\nc");
    assert_eq!(tracker.line(), 5);
    assert!(!tracker.at_line_start() && tracker.open_fence().is_none());
    tracker.feed(b"\n\n   ```\nd\n    ```\n");
    assert_eq!(tracker.line(), 10);
    assert_eq!(
        tracker.open_fence(),
        Some(OpenFence {
            ch: FenceChar::Backtick,
            len: 3,
            line: 7
        })
    );
}

/// Line pieces that open, close or nearly make fences, at and away from line starts.
const PIECES: &[&str] = &[
    "```", "````", "~~~", "~~~~", "`", "~", "``", " ", "   ", "    ", "\t", "\n", "\r", "x", "a`b",
    "```rust", "~~~ a`b",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn feed_matches_reading_byte_by_byte(
        parts in prop::collection::vec(prop::sample::select(PIECES), 0..40),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let text = parts.concat().into_bytes();
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (text.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.push(text.len());
        let mut fast = FenceTracker::new();
        let mut reference = FenceTracker::new();
        let mut start = 0;
        for cut in cuts {
            fast.feed(&text[start..cut]);
            for &byte in &text[start..cut] {
                if byte == b'\n' {
                    reference.end_line();
                } else {
                    reference.step(byte);
                }
            }
            start = cut;
            prop_assert_eq!(format!("{fast:?}"), format!("{reference:?}"));
        }
        prop_assert_eq!(fast.finish(), reference.finish());
    }
}
