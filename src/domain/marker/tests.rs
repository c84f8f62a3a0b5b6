//! Unit and property tests of framing, tag matching and the live filter.

use super::live_filter::*;
use super::tags::*;
use super::*;
use crate::domain::output_stream::OutputStream;
use memchr::memchr;
use proptest::prelude::*;
use strum::IntoEnumIterator;

const STDOUT_MISPLACED: &str =
    "terminal marker in stdout must begin at a line boundary and be its final content";

fn frame_chunks(chunks: &[&[u8]]) -> MarkerVerdict {
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    for chunk in chunks {
        framer.feed(chunk);
    }
    framer.finish()
}

fn frame(text: &str) -> MarkerVerdict {
    frame_chunks(&[text.as_bytes()])
}

fn result(kind: ResultKind, text: &str) -> MarkerVerdict {
    MarkerVerdict::Result(ResultBlock {
        kind,
        text: text.to_owned(),
    })
}

fn missing() -> MarkerVerdict {
    MarkerVerdict::Missing("missing terminal marker".to_owned())
}

fn invalid(message: &str) -> MarkerVerdict {
    MarkerVerdict::Invalid(message.to_owned())
}

fn multiple(message: &str) -> MarkerVerdict {
    MarkerVerdict::Multiple(message.to_owned())
}

fn complete(text: &str) -> MarkerVerdict {
    MarkerVerdict::Result(ResultBlock {
        kind: ResultKind::Complete,
        text: text.to_owned(),
    })
}

/// Visible output of each chunk, then of `finish`.
fn filter_chunks(chunks: &[&str]) -> Vec<String> {
    let mut filter = LiveFilter::new();
    let mut outputs = Vec::new();
    for chunk in chunks {
        let mut visible = Vec::new();
        filter.filter(chunk.as_bytes(), &mut visible);
        outputs.push(String::from_utf8(visible).expect("test input is UTF-8"));
    }
    let mut visible = Vec::new();
    filter.finish(&mut visible);
    outputs.push(String::from_utf8(visible).expect("test input is UTF-8"));
    outputs
}

fn filter_all(mut filter: LiveFilter, chunks: &[&[u8]]) -> Vec<u8> {
    let mut visible = Vec::new();
    for chunk in chunks {
        filter.filter(chunk, &mut visible);
        assert!(filter.held.len() < LONGEST_TAG, "held {:?}", filter.held);
    }
    filter.finish(&mut visible);
    visible
}

// The original runner's marker scenarios 1–12 (docs/worker-protocol.md).

#[test]
fn s01_complete_after_progress() {
    assert_eq!(
        validate_streams(b"done\n<phase-complete>Built it.</phase-complete>\n", b""),
        complete("Built it.")
    );
}

#[test]
fn s02_blocked_at_stream_start() {
    assert_eq!(
        frame("<phase-blocked>Need credentials.</phase-blocked>"),
        result(ResultKind::Blocked, "Need credentials.")
    );
}

#[test]
fn s03_needs_clarification() {
    assert_eq!(
        frame("<phase-needs-clarification>Which API?</phase-needs-clarification>"),
        result(ResultKind::NeedsClarification, "Which API?")
    );
}

#[test]
fn s04_multiline_body() {
    assert_eq!(
        frame("<phase-complete>\nImplemented parser.\nAll tests pass.\n</phase-complete>\n"),
        result(ResultKind::Complete, "Implemented parser.\nAll tests pass.")
    );
}

#[test]
fn s05_result_on_stderr() {
    assert_eq!(
        validate_streams(
            b"ordinary progress\n",
            b"warn: x\n<phase-blocked>No network.</phase-blocked>\n"
        ),
        MarkerVerdict::Result(ResultBlock {
            kind: ResultKind::Blocked,
            text: "No network.".to_owned()
        })
    );
}

#[test]
fn s06_split_tags_and_multibyte_character() {
    let chunks: [&[u8]; 4] = [
        b"<phase-",
        b"complete>Changed caf\xc3",
        b"\xa9.txt.\nTests pass.</phase-com",
        b"plete>\n",
    ];
    assert_eq!(
        frame_chunks(&chunks),
        result(ResultKind::Complete, "Changed café.txt.\nTests pass.")
    );
}

#[test]
fn s07_ordinary_output_is_not_retained() {
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    for line in 0..1000 {
        framer.feed(format!("diagnostic line {line} with a < b\n").as_bytes());
        assert_eq!(framer.retained_bytes(), 0);
    }
    assert!(framer.candidate.is_none());
    assert_eq!(framer.finish(), missing());
    assert_eq!(
        validate_streams(&b"diagnostic\n".repeat(1000), b""),
        MarkerVerdict::Missing("missing terminal marker".to_owned())
    );
}

#[test]
fn s08_missing() {
    assert_eq!(
        validate_streams(b"no terminal marker", b""),
        MarkerVerdict::Missing("missing terminal marker".to_owned())
    );
}

#[test]
fn s09_two_adjacent_blocks() {
    assert_eq!(
        frame("<phase-complete>a</phase-complete>\n<phase-complete>b</phase-complete>\n"),
        multiple("multiple terminal markers in stdout")
    );
}

#[test]
fn s10_results_on_both_streams() {
    assert_eq!(
        validate_streams(
            b"<phase-complete>Done.</phase-complete>\n",
            b"<phase-blocked>Stuck.</phase-blocked>\n"
        ),
        MarkerVerdict::Multiple("terminal result was emitted on both stdout and stderr".into())
    );
}

#[test]
fn s11_invalid_framings() {
    let cases = [
        (
            "quoted <phase-complete>fixture</phase-complete>",
            STDOUT_MISPLACED,
        ),
        (
            "<phase-complete>Done.</phase-complete>\nBut then it failed.\n",
            STDOUT_MISPLACED,
        ),
        (
            "<phase-complete> \n\t </phase-complete>",
            "terminal marker in stdout has an empty result",
        ),
        (
            "<phase-complete>Done.\n",
            "unclosed terminal marker in stdout",
        ),
        (
            "Done.</phase-complete>\n",
            "unclosed terminal marker in stdout",
        ),
        (
            "<phase-complete result\n",
            "malformed terminal marker in stdout",
        ),
        (
            "```text\n<phase-complete>Done.</phase-complete>\n",
            STDOUT_MISPLACED,
        ),
        (
            "~~~\n<phase-blocked>Stuck.</phase-blocked>\n",
            STDOUT_MISPLACED,
        ),
    ];
    for (text, message) in cases {
        assert_eq!(frame(text), invalid(message), "{text:?}");
        assert_eq!(
            validate_streams(text.as_bytes(), b""),
            MarkerVerdict::Invalid(message.to_owned()),
            "{text:?}"
        );
    }
}

#[test]
fn s12_nested_block() {
    assert_eq!(
        frame("<phase-complete>\n<phase-blocked>x</phase-blocked>\n</phase-complete>\n"),
        multiple("multiple terminal markers in stdout")
    );
}

// The original runner's live-filter scenarios 13–15, and the Codex wrapper's rendering example.

#[test]
fn s13_filter_hides_body_across_chunks() {
    assert_eq!(
        filter_chunks(&[
            "before <phase-blocked>secret",
            " detail",
            "</phase-blocked> after\n"
        ]),
        ["before ", "", " after\n", ""]
    );
}

#[test]
fn s14_filter_hides_split_tags_and_multiline_body() {
    assert_eq!(
        filter_chunks(&[
            "before <phase-",
            "complete>secret\nsecond line",
            "</phase-",
            "complete> after"
        ]),
        ["before ", "", "", " after", ""]
    );
}

#[test]
fn s15_filter_flushes_partial_prefix_at_end() {
    assert_eq!(filter_chunks(&["ordinary <pha"]), ["ordinary ", "<pha"]);
}

#[test]
fn filter_matches_codex_wrapper_example() {
    let outputs = filter_chunks(&[
        "first <phase-blo",
        "cked>secret\r\nsecond",
        " line</phase-blocked> tail\r",
        "\n<fence>\r\n",
        "print('<phase-blocked >')",
    ]);
    assert_eq!(
        outputs.concat(),
        "first  tail\r\n<fence>\r\nprint('<phase-blocked >')"
    );
}

// Tag grammar.

#[test]
fn malformed_tags() {
    for tag in [
        "<phase-blocked >",
        "<phase-complete result>",
        "</phase-complete x>",
        "< phase-complete>",
        "</ phase-complete>",
        "<phase-complete/",
        "<phase-complete/>",
        "</phase-complete/>",
        "<\nphase-complete>",
        "<phase-complete\n",
        "<phase-needs-clarification\t>",
    ] {
        let text = format!("<phase-complete>Done.</phase-complete>\n{tag}");
        assert_eq!(
            frame(&text),
            invalid("malformed terminal marker in stdout"),
            "{tag:?}"
        );
    }
}

#[test]
fn tag_name_cut_off_at_end_is_malformed() {
    for end in [
        "<phase-complete",
        "</phase-blocked",
        "< /phase-needs-clarification",
    ] {
        assert_eq!(
            frame(end),
            invalid("malformed terminal marker in stdout"),
            "{end:?}"
        );
    }
}

#[test]
fn near_misses_are_ordinary_text() {
    for text in [
        "<phase-completed>",
        "</phase-blockedness>",
        "<phase-complete-x>",
        "<phase->",
        "<phase-",
        "<pha",
        "<",
        "</",
        "< b",
        "a < b and c > d",
        "<p>html</p>",
        "<<phase-",
        "<PHASE-COMPLETE>",
        "<phase-complete<",
        "<phase_complete>",
    ] {
        assert_eq!(frame(text), missing(), "{text:?}");
        let with_result = format!("{text}\n<phase-complete>Done.</phase-complete>");
        assert_eq!(
            frame(&with_result),
            result(ResultKind::Complete, "Done."),
            "{text:?}"
        );
    }
}

#[test]
fn doubled_angle_bracket_starts_a_new_tag() {
    assert_eq!(
        frame("<\n<phase-complete>Done.</phase-complete>"),
        result(ResultKind::Complete, "Done.")
    );
    assert_eq!(
        frame("<<phase-complete>Done.</phase-complete>"),
        invalid(STDOUT_MISPLACED)
    );
}

// Placement.

#[test]
fn opening_tag_must_start_its_line() {
    for text in [
        " <phase-complete>Done.</phase-complete>",
        "\t<phase-complete>Done.</phase-complete>",
        "x\r<phase-complete>Done.</phase-complete>",
        "note: <phase-complete>Done.</phase-complete>\n",
    ] {
        assert_eq!(frame(text), invalid(STDOUT_MISPLACED), "{text:?}");
    }
}

#[test]
fn closing_tag_may_sit_anywhere_on_its_line() {
    assert_eq!(
        frame("<phase-complete>Done.\n  </phase-complete>"),
        result(ResultKind::Complete, "Done.")
    );
}

#[test]
fn only_whitespace_may_follow_the_block() {
    assert_eq!(
        frame("<phase-complete>Done.</phase-complete> \t\r\n\n  \x0b\x0c\n"),
        result(ResultKind::Complete, "Done.")
    );
    assert_eq!(
        frame("<phase-complete>Done.</phase-complete>."),
        invalid(STDOUT_MISPLACED)
    );
    assert_eq!(
        frame_chunks(&[b"<phase-complete>Done.</phase-complete>\n", b"\n", b"x"]),
        invalid(STDOUT_MISPLACED)
    );
}

#[test]
fn fences_around_the_block() {
    let fenced_example = "```\n<phase-complete>Example.</phase-complete>\n```\n";
    assert_eq!(frame(fenced_example), invalid(STDOUT_MISPLACED));
    // A fenced example still counts as a block.
    assert_eq!(
        frame(&format!(
            "{fenced_example}<phase-complete>Real.</phase-complete>\n"
        )),
        multiple("multiple terminal markers in stdout")
    );
    // A closed fence before the block, or inside its body, is harmless.
    assert_eq!(
        frame("```\ncode\n```\n<phase-complete>Done.</phase-complete>"),
        result(ResultKind::Complete, "Done.")
    );
    assert_eq!(
        frame("<phase-complete>Ran:\n~~~\nmake\n~~~\n</phase-complete>"),
        result(ResultKind::Complete, "Ran:\n~~~\nmake\n~~~")
    );
    // A fence opened in the body and never closed puts the closing tag inside it.
    assert_eq!(
        frame("<phase-complete>Ran:\n```\nmake\n</phase-complete>\n"),
        invalid(STDOUT_MISPLACED)
    );
    // An indented fence still counts; four spaces do not make a fence.
    assert_eq!(
        frame("   ~~~\n<phase-complete>Done.</phase-complete>"),
        invalid(STDOUT_MISPLACED)
    );
    assert_eq!(
        frame("    ~~~\n<phase-complete>Done.</phase-complete>"),
        result(ResultKind::Complete, "Done.")
    );
}

// Counting.

#[test]
fn tag_counts() {
    assert_eq!(
        frame("<phase-complete>a</phase-complete>\n</phase-complete>"),
        multiple("multiple terminal markers in stdout")
    );
    assert_eq!(
        frame("<phase-complete>a</phase-complete>\n<phase-complete>"),
        multiple("multiple terminal markers in stdout")
    );
    assert_eq!(
        frame("<phase-complete>\n<phase-complete>"),
        multiple("nested terminal marker in stdout")
    );
    // One opening tag and a closing tag of another kind is broken framing, not a second
    // result (issue 14).
    assert_eq!(
        frame("<phase-complete>a</phase-blocked>"),
        invalid("mismatched terminal marker in stdout")
    );
    assert_eq!(
        frame("<phase-complete>\nall done\n</phase-blocked>\n"),
        invalid("mismatched terminal marker in stdout")
    );
    assert_eq!(
        frame("</phase-complete>\n<phase-complete>a"),
        invalid("mismatched terminal marker in stdout")
    );
    assert_eq!(
        frame("<phase-blocked>\n</phase-blocked>\n<phase-blocked>\n</phase-blocked>"),
        multiple("multiple terminal markers in stdout")
    );
}

#[test]
fn precedence_of_faults() {
    // Multiple beats malformed.
    assert_eq!(
        frame("<phase-complete >\n<phase-complete>a</phase-complete>\n</phase-complete>"),
        multiple("multiple terminal markers in stdout")
    );
    // Malformed beats unclosed and placement.
    assert_eq!(
        frame("x <phase-complete>a\n<phase-blocked/"),
        invalid("malformed terminal marker in stdout")
    );
    // Unclosed beats placement.
    assert_eq!(
        frame("x <phase-complete>a"),
        invalid("unclosed terminal marker in stdout")
    );
    // Nested or mismatched beats placement.
    assert_eq!(
        frame("x <phase-complete>a</phase-blocked>"),
        invalid("mismatched terminal marker in stdout")
    );
    assert_eq!(
        frame("x <phase-complete>a<phase-blocked>"),
        multiple("nested terminal marker in stdout")
    );
    // Placement beats an empty body.
    assert_eq!(
        frame("x <phase-complete> </phase-complete>"),
        invalid(STDOUT_MISPLACED)
    );
    assert_eq!(
        frame("<phase-complete> </phase-complete>\ntrailing"),
        invalid(STDOUT_MISPLACED)
    );
}

#[test]
fn messages_name_the_stream() {
    let mut framer = StreamFramer::new(OutputStream::Stderr);
    framer.feed(b"<phase-complete>a");
    assert_eq!(
        framer.finish(),
        invalid("unclosed terminal marker in stderr")
    );
}

// Bodies.

#[test]
fn crlf_bodies_and_crlf_after_close() {
    assert_eq!(
        frame("log\r\n<phase-complete>\r\nLine one.\r\nLine two.\r\n</phase-complete>\r\n"),
        result(ResultKind::Complete, "Line one.\r\nLine two.")
    );
}

#[test]
fn invalid_utf8_in_body_is_replaced() {
    assert_eq!(
        frame_chunks(&[b"<phase-complete>caf\xff!</phase-complete>"]),
        result(ResultKind::Complete, "caf\u{fffd}!")
    );
}

#[test]
fn body_keeps_inner_angle_brackets_and_near_misses() {
    assert_eq!(
        frame("<phase-complete>Use <b> and <phase-completed> tags; a < b.</phase-complete>"),
        result(
            ResultKind::Complete,
            "Use <b> and <phase-completed> tags; a < b."
        )
    );
}

#[test]
fn ten_mib_body_fed_in_chunks() {
    let body = "0123456789abcdef\n".repeat(10 * 1024 * 1024 / 17);
    let text = format!("progress\n<phase-complete>{body}x</phase-complete>\n");
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    for chunk in text.as_bytes().chunks(64 * 1024) {
        framer.feed(chunk);
    }
    let MarkerVerdict::Result(block) = framer.finish() else {
        panic!("expected a result");
    };
    assert_eq!(block.text.len(), body.len() + 1);
    assert!(block.text.starts_with("0123456789abcdef\n"));
    assert!(block.text.ends_with("\nx"));
}

#[test]
fn body_size_limit() {
    let at_limit = vec![b'a'; MAX_RESULT_BYTES];
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    framer.feed(b"<phase-complete>");
    framer.feed(&at_limit);
    framer.feed(b"</phase-complete>");
    let MarkerVerdict::Result(block) = framer.finish() else {
        panic!("a body of exactly the limit is accepted");
    };
    assert_eq!(block.text.len(), MAX_RESULT_BYTES);

    let mut framer = StreamFramer::new(OutputStream::Stdout);
    framer.feed(b"<phase-complete>");
    framer.feed(&at_limit);
    framer.feed(b" </phase-complete>");
    assert_eq!(
        framer.finish(),
        invalid("terminal marker in stdout exceeds 16 MiB")
    );
}

#[test]
fn oversized_body_is_released_while_streaming() {
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    framer.feed(b"<phase-complete>");
    for _ in 0..20 {
        framer.feed(&[b'a'; 1024 * 1024]);
    }
    assert_eq!(framer.retained_bytes(), 0);
    framer.feed(b"</phase-complete>");
    assert_eq!(
        framer.finish(),
        invalid("terminal marker in stdout exceeds 16 MiB")
    );
}

#[test]
fn hopeless_blocks_keep_no_body() {
    for start in [
        "quoted <phase-complete>",
        "```\n<phase-complete>",
        "<phase-blocked >\n<phase-complete>",
        "<phase-complete>a<phase-complete>",
        "<phase-complete>a</phase-blocked>",
    ] {
        let mut framer = StreamFramer::new(OutputStream::Stdout);
        framer.feed(start.as_bytes());
        framer.feed(b"lots of output");
        assert_eq!(framer.retained_bytes(), 0, "{start:?}");
    }
}

// Across streams.

#[test]
fn combine_fails_closed_and_prefers_stdout() {
    let done = || result(ResultKind::Complete, "Done.");
    let bad = |s: &str| invalid(&format!("bad {s}"));
    let many = |s: &str| multiple(&format!("many {s}"));
    let cases = [
        (
            missing(),
            missing(),
            MarkerVerdict::Missing("missing terminal marker".into()),
        ),
        (done(), missing(), complete("Done.")),
        (missing(), done(), complete("Done.")),
        (
            done(),
            done(),
            MarkerVerdict::Multiple("terminal result was emitted on both stdout and stderr".into()),
        ),
        (done(), bad("err"), MarkerVerdict::Invalid("bad err".into())),
        (bad("out"), done(), MarkerVerdict::Invalid("bad out".into())),
        (
            done(),
            many("err"),
            MarkerVerdict::Multiple("many err".into()),
        ),
        (
            missing(),
            bad("err"),
            MarkerVerdict::Invalid("bad err".into()),
        ),
        (
            bad("out"),
            many("err"),
            MarkerVerdict::Invalid("bad out".into()),
        ),
        (
            many("out"),
            bad("err"),
            MarkerVerdict::Multiple("many out".into()),
        ),
    ];
    for (stdout, stderr, expected) in cases {
        assert_eq!(
            combine(stdout.clone(), stderr.clone()),
            expected,
            "{stdout:?} {stderr:?}"
        );
    }
}

#[test]
fn fragments_on_two_streams_never_join() {
    assert_eq!(
        validate_streams(b"<phase-complete>Done.", b"</phase-complete>"),
        MarkerVerdict::Invalid("unclosed terminal marker in stdout".into())
    );
    assert_eq!(
        validate_streams(b"<phase-", b"complete>Done.</phase-complete>"),
        MarkerVerdict::Invalid("unclosed terminal marker in stderr".into())
    );
}

// Chunking.

const REPRESENTATIVE: &[&str] = &[
    "done\n<phase-complete>Built it.</phase-complete>\n",
    "<phase-needs-clarification>Which\r\nAPI?</phase-needs-clarification>\r\n",
    "quoted <phase-complete>fixture</phase-complete>",
    "<phase-complete>a</phase-complete>\n<phase-complete>b</phase-complete>",
    "```\n<phase-blocked>x</phase-blocked>\n```\n",
    "~~~\nx\n~~~\n<phase-blocked>x\n```\ny\n```\n</phase-blocked>  \n",
    "<phase-complete result\n",
    "< phase-complete>",
    "a <phase-completed> b\n<phase-complete>x</phase-complete>",
    "<<phase-complete>x</phase-complete>",
    "<\n<phase-blocked>caf\u{e9}</phase-blocked>",
    "<phase-complete>x</phase-blocked>",
    "<phase-complete>   </phase-complete>",
    "<phase-complete>x</phase-complete>\ntail",
    "<phase-complete>x</phase-complete",
    "<phase-blocked>\u{1F600}</phase-blocked>",
];

#[test]
fn framer_verdict_ignores_chunk_boundaries() {
    for text in REPRESENTATIVE {
        let bytes = text.as_bytes();
        let whole = frame_chunks(&[bytes]);
        for first in 0..=bytes.len() {
            for second in first..=bytes.len() {
                let chunks = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                assert_eq!(frame_chunks(&chunks), whole, "{text:?} at {first}/{second}");
            }
        }
    }
}

#[test]
fn filter_output_ignores_chunk_boundaries() {
    let inputs = [
        "before <phase-blocked>secret</phase-blocked> after\n",
        "x<phase-complete>a</phase-blocked>b</phase-complete>c",
        "<phase-<phase-complete>hidden</phase-complete>!",
        "open <phase-needs-clarification>never closed </phase-needs-clarif",
        "a < b <p> <phase-completed>",
        "<phase-complete><phase-complete>x</phase-complete>y</phase-complete>",
        "done\r\n<phase-complete>ok</phase-complete>\r\nafter\n",
        "<phase-blocked>b</phase-blocked>\r<phase-complete>c</phase-complete>\n\n",
    ];
    for text in inputs {
        let bytes = text.as_bytes();
        let whole = filter_all(LiveFilter::new(), &[bytes]);
        for first in 0..=bytes.len() {
            for second in first..=bytes.len() {
                let chunks = [&bytes[..first], &bytes[first..second], &bytes[second..]];
                assert_eq!(
                    filter_all(LiveFilter::new(), &chunks),
                    whole,
                    "{text:?} at {first}/{second}"
                );
            }
        }
    }
}

// Live filter rules.

#[test]
fn pass_through_only_without_tag_starts() {
    let mut filter = LiveFilter::new();
    assert!(filter.pass_through(b"a < b and Vec<u8>\n"));
    assert!(filter.pass_through(b"ends in a tag <p>"));
    // An end that could begin a tag in the next chunk.
    assert!(!filter.pass_through(b"ends in <p"));
    assert!(!filter.pass_through(b"ends in <phase"));
    assert!(!filter.pass_through(b"x <phase-complete>"));
    assert!(!filter.pass_through(b"text ending in <"));
    assert!(!filter.pass_through(b"text ending in <pha"));
    let mut holding = LiveFilter::new();
    holding.filter(b"<phase-", &mut Vec::new());
    assert!(!holding.pass_through(b"plain"));
}

#[test]
fn filter_passes_other_angle_brackets_at_once() {
    assert_eq!(
        filter_chunks(&["a < b <p>", "x<y"]),
        ["a < b <p>", "x<y", ""]
    );
    assert_eq!(filter_chunks(&["x <", "p"]), ["x ", "", "<p"]);
    assert_eq!(filter_chunks(&["<phase-", "x"]), ["", "<phase-x", ""]);
    assert_eq!(
        filter_chunks(&["</phase-complete>"]),
        ["</phase-complete>", ""]
    );
}

#[test]
fn filter_held_prefix_can_give_way_to_a_new_tag() {
    assert_eq!(
        filter_chunks(&["<phase-", "<phase-blocked>hidden</phase-blocked>!"]),
        ["", "<phase-!", ""]
    );
}

#[test]
fn filter_hides_only_through_the_matching_close() {
    assert_eq!(
        filter_chunks(&["x<phase-complete>a</phase-blocked>b</phase-complete>c"]),
        ["xc", ""]
    );
    assert_eq!(
        filter_chunks(&["<phase-complete><phase-complete>x</phase-complete>y</phase-complete>"]),
        ["y</phase-complete>", ""]
    );
}

#[test]
fn filter_hides_inline_blocks() {
    assert_eq!(
        filter_chunks(&[
            "say <phase-complete>x</phase-complete> twice <phase-blocked>y</phase-blocked>."
        ]),
        ["say  twice .", ""]
    );
}

#[test]
fn filter_gives_up_a_mid_line_block_at_the_end_of_the_next_line() {
    // A tag quoted in chatter: shown again from the second line end on, so the lines after
    // it are not swallowed up to the real block at the end, which is still hidden.
    assert_eq!(
        filter_chunks(&[
            "$ grep -n '<phase-complete>' src/\n",
            "src/a.rs:1: match\n",
            "tests pass\n",
            "<phase-complete>done</phase-complete>\n",
        ])
        .concat(),
        "$ grep -n '<phase-complete>' src/\nsrc/a.rs:1: match\ntests pass\n"
    );
    // Cut anywhere, the same.
    assert_eq!(
        filter_chunks(&["say <phase-blocked>x\ny", "\nz</phase-blocked>\n"]).concat(),
        "say <phase-blocked>x\ny\nz</phase-blocked>\n"
    );
    // A block that closes on its second line is hidden (the reference's example).
    assert_eq!(
        filter_chunks(&["say <phase-blocked>x\ny</phase-blocked>!\n"]).concat(),
        "say !\n"
    );
}

#[test]
fn filter_hides_a_line_start_block_over_many_lines() {
    let body: String = (0..100).map(|n| format!("line {n}\n")).collect();
    assert_eq!(
        filter_chunks(&["progress\n<phase-complete>", &body, "</phase-complete>\n"]).concat(),
        "progress\n"
    );
    // A block opened right after a hidden one is not at a line start.
    assert_eq!(
        filter_chunks(&["<phase-complete>a</phase-complete><phase-blocked>\n\nb</phase-blocked>"])
            .concat(),
        "<phase-blocked>\n\nb</phase-blocked>"
    );
}

#[test]
fn a_block_on_lines_of_its_own_takes_its_line_end_with_it() {
    // The usual last lines of an attempt leave no blank line on the console.
    assert_eq!(
        filter_chunks(&["tests pass\n<phase-complete>\nDone.\n</phase-complete>\n"]).concat(),
        "tests pass\n"
    );
    // CRLF too, also when the CR ends a chunk; a lone CR is shown.
    assert_eq!(
        filter_chunks(&["a\r\n<phase-complete>x</phase-complete>\r", "\nb\r\n"]),
        ["a\r\n", "b\r\n", ""]
    );
    assert_eq!(
        filter_chunks(&["<phase-complete>x</phase-complete>\r", "b"]),
        ["", "\rb", ""]
    );
    assert_eq!(
        filter_chunks(&["<phase-complete>x</phase-complete>\r"]),
        ["", "\r"]
    );
    // Only one line end goes: a blank line the agent printed after the block stays.
    assert_eq!(
        filter_chunks(&["<phase-complete>x</phase-complete>", "\n\nnext\n"]),
        ["", "\nnext\n", ""]
    );
    // Text after the closing tag keeps its line end.
    assert_eq!(
        filter_chunks(&["<phase-complete>x</phase-complete> tail\n"]).concat(),
        " tail\n"
    );
    // A block opened mid-line leaves the line end alone: the line it sits in is not its own.
    assert_eq!(
        filter_chunks(&["say <phase-complete>x</phase-complete>\n"]).concat(),
        "say \n"
    );
}

#[test]
fn filter_shows_unclosed_block_at_end() {
    assert_eq!(
        filter_chunks(&["x<phase-blocked>secret", "\nmore</phase-bl"]),
        ["x", "", "<phase-blocked>secret\nmore</phase-bl"]
    );
}

#[test]
fn filter_shows_a_block_that_outgrows_the_cap() {
    let mut filter = LiveFilter::with_hidden_cap(32);
    let mut visible = Vec::new();
    // `<phase-complete>` is 16 bytes, so the 17th body byte is the first past the cap.
    filter.filter(b"a<phase-complete>0123456789abcdef", &mut visible);
    assert_eq!(visible, b"a");
    filter.filter(b"XYZ", &mut visible);
    assert_eq!(visible, b"a<phase-complete>0123456789abcdefXYZ");
    filter.filter(b"</phase-complete>b", &mut visible);
    filter.finish(&mut visible);
    assert_eq!(
        visible,
        b"a<phase-complete>0123456789abcdefXYZ</phase-complete>b"
    );

    // The byte that completes the closing tag wins over the cap.
    let mut visible = Vec::new();
    let mut filter = LiveFilter::with_hidden_cap(32);
    filter.filter(b"<phase-complete></phase-complete>b", &mut visible);
    filter.finish(&mut visible);
    assert_eq!(visible, b"b");
}

#[test]
fn filter_holds_nothing_in_plain_output() {
    let mut filter = LiveFilter::new();
    let mut visible = Vec::new();
    filter.filter(b"plain output\nwithout tags\n", &mut visible);
    assert!(filter.held.is_empty() && filter.hidden.is_none());
    assert_eq!(visible, b"plain output\nwithout tags\n");
}

// Properties.

/// Exact tags and a malformed one: each decides a verdict, so they are drawn rarely.
const TAGS: &[&str] = &[
    "<phase-blocked ",
    "<phase-complete>",
    "</phase-complete>",
    "<phase-blocked>",
    "</phase-blocked>",
    "<phase-needs-clarification>",
    "</phase-needs-clarification>",
];

const NOISE: &[&str] = &[
    "<phase-",
    "</phase-comp",
    "<phase-needs-",
    "<phase-completed>",
    "<",
    "</",
    ">",
    "/",
    "\n",
    "\r\n",
    "\r",
    "```",
    "~~~",
    "```text",
    "   ",
    " ",
    "\t",
    "done",
    "phase-complete",
    "caf\u{e9}",
    "x",
];

/// Text from the fragment vocabulary, a tag about one fragment in `1 + noise`.
fn fragments(noise: u32) -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        noise => prop::sample::select(NOISE),
        1 => prop::sample::select(TAGS),
    ];
    prop::collection::vec(fragment, 0..30).prop_map(|parts| parts.concat())
}

fn vocabulary_text() -> impl Strategy<Value = Vec<u8>> {
    let loose = fragments(6).prop_map(String::into_bytes);
    // Text around one well-formed block, so that results are exercised too.
    let around_block = (
        fragments(40),
        prop::sample::select(ResultKind::iter().collect::<Vec<_>>()),
        fragments(40),
        prop::sample::select(&["", "\n", " \r\n", "x"][..]),
    )
        .prop_map(|(before, kind, body, after)| {
            format!(
                "{before}\n{}{body}{}{after}",
                kind.open_tag(),
                kind.close_tag()
            )
            .into_bytes()
        });
    prop_oneof![loose, around_block]
}

/// Splits `bytes` at the given (unsorted, unbounded) cut points.
fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(&bytes[start..cut]);
        start = cut;
    }
    chunks.push(&bytes[start..]);
    chunks
}

/// Fragments that crowd the cases the tag search must get right: `<` with and without
/// `/` and whitespace (newlines included) before a name, names with and without their `<`,
/// names cut short, and fences that change where an opening tag is framed.
const DENSE: &[&str] = &[
    "<",
    "</",
    "< ",
    "</ ",
    "<\n",
    "/",
    " ",
    "\t",
    "\n",
    "\r\n",
    "\x0c",
    ">",
    "p",
    "pha",
    "phase",
    "phase-",
    "phase-complete",
    "phase-blocked",
    "phase-needs-clarification",
    "<phase-",
    "<phase-complete",
    "</phase-blocked",
    "<phase-complete>",
    "</phase-complete>",
    "<phase-blocked>",
    "</phase-blocked>",
    "x",
    "```",
    "~~~",
    "\n```\n",
];

fn dense_text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(DENSE), 0..40)
        .prop_map(|parts| parts.concat().into_bytes())
}

/// The straightforward search the fast ones must agree with: reads a possible tag at
/// every `<`.
fn every_angle_bracket(chunk: &[u8], from: usize) -> Option<usize> {
    memchr(b'<', &chunk[from..]).map(|at| from + at)
}

fn reference_find_opening_tag(chunk: &[u8]) -> Option<(usize, TagMatch, ResultKind)> {
    memchr::memchr_iter(b'<', chunk).find_map(|at| match match_opening_tag(&[], &chunk[at..]) {
        (TagMatch::Mismatch, _) => None,
        (found, kind) => Some((at, found, kind)),
    })
}

fn reference_find_tag(chunk: &[u8], tag: &str) -> Option<(usize, TagMatch)> {
    memchr::memchr_iter(b'<', chunk).find_map(|at| match match_tag(&[], &chunk[at..], tag) {
        TagMatch::Mismatch => None,
        found => Some((at, found)),
    })
}

#[test]
fn every_tag_name_starts_with_the_searched_prefix() {
    for kind in ResultKind::iter() {
        assert!(kind.tag().as_bytes().starts_with(NAME_PREFIX), "{kind:?}");
        assert!(
            kind.open_tag().as_bytes().starts_with(OPENING_PREFIX),
            "{kind:?}"
        );
    }
}

#[test]
fn tag_search_skips_only_hopeless_angle_brackets() {
    let cases: &[(&str, Option<usize>)] = &[
        ("a < b </div> <p> Vec<u8>", None),
        ("x <phase-complete>", Some(2)),
        ("x < \n / \t phase-", Some(2)),
        ("x </phase-", Some(2)),
        ("x <//phase-", None),
        ("x </ /phase-", None),
        ("x <a phase-", None),
        ("phase- <", Some(7)),
        ("x < /", Some(2)),
        ("x <\n  pha", Some(2)),
        ("x <phx", None),
        ("x <<phase-", Some(3)),
    ];
    for &(text, expected) in cases {
        assert_eq!(next_tag_start(text.as_bytes(), 0), expected, "{text:?}");
    }
    assert_eq!(next_tag_start(b"<phase- <phase-", 1), Some(8));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn framer_matches_reading_every_angle_bracket(
        text in dense_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let chunks = split(&text, &cuts);
        let mut fast = StreamFramer::new(OutputStream::Stdout);
        let mut reference = StreamFramer::new(OutputStream::Stdout);
        for chunk in &chunks {
            fast.feed(chunk);
            reference.feed_with(chunk, every_angle_bracket);
            prop_assert_eq!(format!("{fast:?}"), format!("{reference:?}"));
        }
        let mut whole = StreamFramer::new(OutputStream::Stdout);
        whole.feed_with(&text, every_angle_bracket);
        let verdict = fast.finish();
        prop_assert_eq!(&verdict, &reference.finish());
        prop_assert_eq!(verdict, whole.finish());
    }

    #[test]
    fn live_filter_search_matches_checking_every_angle_bracket(text in dense_text()) {
        // Every prefix, as chunks end anywhere and the tail is where cut-off tags hide.
        for end in 0..=text.len() {
            let chunk = &text[..end];
            prop_assert_eq!(find_opening_tag(chunk), reference_find_opening_tag(chunk));
            for kind in ResultKind::iter() {
                prop_assert_eq!(
                    find_tag(chunk, kind.close_tag()),
                    reference_find_tag(chunk, kind.close_tag())
                );
            }
        }
    }

    #[test]
    fn never_panics_on_arbitrary_chunks(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8)
    ) {
        let mut framer = StreamFramer::new(OutputStream::Stderr);
        let mut filter = LiveFilter::with_hidden_cap(40);
        let mut visible = Vec::new();
        for chunk in &chunks {
            framer.feed(chunk);
            filter.filter(chunk, &mut visible);
        }
        let _ = framer.finish();
        filter.finish(&mut visible);
    }

    #[test]
    fn framer_verdict_is_the_same_for_any_chunking(
        text in vocabulary_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let whole = frame_chunks(&[&text]);
        prop_assert_eq!(frame_chunks(&split(&text, &cuts)), whole);
    }

    #[test]
    fn filter_output_is_the_same_for_any_chunking(
        text in vocabulary_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        cap in 28usize..80,
    ) {
        let chunks = split(&text, &cuts);
        prop_assert_eq!(
            filter_all(LiveFilter::new(), &chunks),
            filter_all(LiveFilter::new(), &[&text])
        );
        prop_assert_eq!(
            filter_all(LiveFilter::with_hidden_cap(cap), &chunks),
            filter_all(LiveFilter::with_hidden_cap(cap), &[&text])
        );
    }

    #[test]
    fn pass_through_means_filter_is_identity(
        text in dense_text(),
        cut in any::<usize>(),
    ) {
        let cut = cut % (text.len() + 1);
        let (prefix, chunk) = text.split_at(cut);
        let mut filter = LiveFilter::new();
        let mut ignored = Vec::new();
        filter.filter(prefix, &mut ignored);
        let mut copy = LiveFilter::new();
        copy.filter(prefix, &mut ignored);
        if filter.pass_through(chunk) {
            let mut visible = Vec::new();
            copy.filter(chunk, &mut visible);
            prop_assert_eq!(visible, chunk.to_vec());
            prop_assert!(copy.held.is_empty() && copy.hidden.is_none());
            prop_assert_eq!(copy.at_line_start, filter.at_line_start);
        }
    }

    #[test]
    fn filter_is_identity_without_angle_brackets(
        text in prop::collection::vec(any::<u8>().prop_filter("no <", |b| *b != b'<'), 0..200),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let chunks = split(&text, &cuts);
        let mut filter = LiveFilter::new();
        for chunk in &chunks {
            let mut visible = Vec::new();
            filter.filter(chunk, &mut visible);
            prop_assert_eq!(&visible[..], *chunk);
        }
        let mut visible = Vec::new();
        filter.finish(&mut visible);
        prop_assert!(visible.is_empty());
    }
}

// Issue 14: the time bound on a hold (the caller releases it after LIVE_HOLD_LIMIT).

#[test]
fn a_released_hold_shows_the_held_text_and_hides_later_blocks_again() {
    let mut filter = LiveFilter::new();
    let mut visible = Vec::new();
    filter.filter(b"start\n<phase-complete>\nstill working\n", &mut visible);
    assert_eq!(visible, b"start\n");
    assert!(filter.is_holding());
    filter.finish(&mut visible);
    assert_eq!(visible, b"start\n<phase-complete>\nstill working\n");
    assert!(!filter.is_holding());
    // The released block's rest, its closing tag included, is ordinary text now.
    visible.clear();
    filter.filter(b"more\n</phase-complete>\n", &mut visible);
    assert_eq!(visible, b"more\n</phase-complete>\n");
    // A later block is hidden as usual.
    visible.clear();
    filter.filter(b"<phase-blocked>x</phase-blocked>\n", &mut visible);
    assert_eq!(visible, b"");

    // A possible partial tag held at a chunk end is released too.
    let mut filter = LiveFilter::new();
    let mut visible = Vec::new();
    filter.filter(b"text <phase-comp", &mut visible);
    assert!(filter.is_holding());
    filter.finish(&mut visible);
    assert_eq!(visible, b"text <phase-comp");
    assert!(!filter.is_holding());
}
