//! Tests of the final-result check: only one well-framed block is re-emitted.

use proptest::prelude::*;

use super::*;
use crate::domain::marker::{MarkerVerdict, validate_streams};

fn judge(text: &str) -> (String, String) {
    let epilogue = epilogue(&FinalResponse::Text(text.as_bytes().to_vec()), "[codex] ");
    (
        String::from_utf8(epilogue.stdout).expect("utf-8"),
        String::from_utf8(epilogue.stderr).expect("utf-8"),
    )
}

#[test]
fn a_valid_result_is_re_emitted_from_its_opening_tag() {
    assert_eq!(
        judge("done\n<phase-complete>Implemented.</phase-complete>\n"),
        (
            "<phase-complete>Implemented.</phase-complete>\n".to_owned(),
            String::new()
        )
    );
    assert_eq!(
        judge("<phase-blocked>Need credentials.</phase-blocked>"),
        (
            "<phase-blocked>Need credentials.</phase-blocked>\n".to_owned(),
            String::new()
        )
    );
}

#[test]
fn a_multiline_result_keeps_its_layout() {
    let text = "Summary\r\n<phase-needs-clarification>\nWhich API?\nv1 or v2.\n</phase-needs-clarification>\r\n\n";
    assert_eq!(
        judge(text).0,
        "<phase-needs-clarification>\nWhich API?\nv1 or v2.\n</phase-needs-clarification>\n"
    );
}

#[test]
fn a_body_ending_in_a_code_fence_stays_valid() {
    let text = "<phase-complete>\nRan:\n```text\nok\n```\n</phase-complete>\n";
    let (stdout, _) = judge(text);
    assert_eq!(stdout, text);
    let runner_view = format!("[codex] chatter\n{stdout}");
    assert!(matches!(
        validate_streams(runner_view.as_bytes(), b""),
        MarkerVerdict::Result(block) if block.text == "Ran:\n```text\nok\n```"
    ));
}

#[test]
fn trailing_text_is_rejected_and_shown_inertly() {
    let (stdout, stderr) =
        judge("<phase-complete>fixture result</phase-complete>\nRuntimeError: failed\n");
    assert_eq!(
        stdout,
        "[codex] &lt;phase-complete>fixture result&lt;/phase-complete>\n[codex] RuntimeError: failed\n"
    );
    assert_eq!(
        stderr,
        "[codex] no result reported: the final message is not one well-framed result block: \
         terminal marker in stdout must begin at a line boundary and be its final content\n"
    );
}

#[test]
fn prose_without_a_block_is_rejected() {
    let (stdout, stderr) = judge("I could not finish.");
    assert_eq!(stdout, "[codex] I could not finish.\n");
    assert_eq!(
        stderr,
        "[codex] no result reported: the final message is not one well-framed result block: \
         it has no result block\n"
    );
}

#[test]
fn several_blocks_are_rejected() {
    let (stdout, stderr) =
        judge("<phase-complete>a</phase-complete>\n<phase-complete>b</phase-complete>\n");
    assert!(!stdout.contains('<'), "{stdout}");
    assert!(
        stderr.ends_with("multiple terminal markers in stdout\n"),
        "{stderr}"
    );
}

#[test]
fn an_empty_body_is_rejected() {
    let (stdout, stderr) = judge("<phase-complete> \n </phase-complete>");
    assert_eq!(
        stdout,
        "[codex] &lt;phase-complete> \n[codex]  &lt;/phase-complete>\n"
    );
    assert!(stderr.ends_with("has an empty result\n"), "{stderr}");
}

#[test]
fn a_blank_message_prints_only_the_reason() {
    for blank in ["", " \r\n\n"] {
        assert_eq!(
            judge(blank),
            (
                String::new(),
                "[codex] no result reported: the final message is empty\n".to_owned()
            )
        );
    }
}

#[test]
fn an_unavailable_response_prints_only_the_reason() {
    let epilogue = epilogue(
        &FinalResponse::Unavailable("claude-lean produced no result event".to_owned()),
        "[claude] ",
    );
    assert_eq!(
        epilogue,
        Epilogue {
            stdout: Vec::new(),
            stderr: b"[claude] no result reported: claude-lean produced no result event\n".to_vec(),
        }
    );
}

fn fragments() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("<phase-complete>".to_owned()),
            Just("</phase-complete>".to_owned()),
            Just("<phase-blocked>".to_owned()),
            Just("```".to_owned()),
            Just("\n".to_owned()),
            Just(" ".to_owned()),
            Just("x".to_owned()),
            "[a-z<>/ \r\n]{0,4}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    /// Whatever the final message, the runner sees exactly what the wrapper decided: the
    /// same result when it was valid, and no result block at all otherwise.
    #[test]
    fn the_runner_agrees_with_the_wrapper(
        before in prop_oneof!["([a-z ]{0,6}\n){0,2}", fragments()],
        block in proptest::option::of((
            prop_oneof!["[a-z \n]{1,12}", "x\n```\ny\n```\n", fragments()],
            "[ \r\n]{0,3}",
        )),
    ) {
        // Plausible prose and blocks as well as fragments, so valid results are common.
        let text = match block {
            Some((body, after)) => format!("{before}<phase-complete>{body}</phase-complete>{after}"),
            None => before,
        };
        let own = validate_streams(text.as_bytes(), b"");
        let epilogue = epilogue(&FinalResponse::Text(text.into_bytes()), "[codex] ");
        let runner_stdout = [b"[codex] chatter\n".as_slice(), &epilogue.stdout].concat();
        let runner = validate_streams(&runner_stdout, &epilogue.stderr);
        match own {
            MarkerVerdict::Result(block) => prop_assert_eq!(runner, MarkerVerdict::Result(block)),
            _ => prop_assert!(matches!(runner, MarkerVerdict::Missing(_)), "{:?}", runner),
        }
    }
}
