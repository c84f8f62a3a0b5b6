//! The one result a wrapper reports: the launcher's authoritative final response, validated
//! with the runner's own framing rules ([`StreamFramer`]) and re-emitted only when valid.
//!
//! A valid response is re-emitted verbatim from its opening tag to its closing tag, unprefixed,
//! followed by `\n`, as the last output on stdout. The line end matters: the transcript
//! interleaves stdout and stderr by arrival, and a stderr line the handler happens to read
//! after the block must not be joined to the closing tag's line. Verbatim rather than rebuilt from the trimmed body: a body that ends with
//! a fenced code block (`…\n```\n</phase-complete>`) would, squeezed onto the closing tag's
//! line, leave the fence open and the block invalid. The bytes before the opening tag are
//! dropped; the runner sees the block at a line start, after prefixed diagnostics that can open
//! no fence, so it frames it exactly as the wrapper did.
//!
//! Anything else prints no block, so the runner records a marker failure: the wrapper says
//! why on stderr, and shows non-blank invalid text as diagnostics on stdout. A provider that
//! gave up on a rate limit, usage limit or overload is reported the same way; the session
//! then exits 75 ([`super::rate_limit`]).

use memchr::memmem;

use super::diagnostics::DiagnosticRenderer;
use crate::domain::marker::{StreamFramer, StreamVerdict};
use crate::domain::output_stream::OutputStream;

/// The launcher's final response, as far as the wrapper could obtain it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinalResponse {
    /// The final message text.
    Text(Vec<u8>),
    /// There is none; the reason is shown to the user.
    Unavailable(String),
    /// There is none because the provider hit a rate limit, usage limit or overload its own
    /// retries did not get past; the reason (with the provider's message) is shown.
    RateLimited(String),
}

/// What the wrapper prints once the launcher's own output has been drained.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Epilogue {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Decides what to print for `response`; `prefix` marks diagnostics (`[codex] `).
pub fn epilogue(response: &FinalResponse, prefix: &'static str) -> Epilogue {
    let text = match response {
        FinalResponse::Text(text) => text,
        FinalResponse::Unavailable(reason) | FinalResponse::RateLimited(reason) => {
            return rejected(prefix, reason, Vec::new());
        }
    };
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    framer.feed(text);
    let problem = match framer.finish() {
        StreamVerdict::Result(block) => {
            let open_tag = format!("<{}>", block.kind.tag());
            // A valid response holds exactly two exact tags and the framer counts every
            // occurrence, so the first occurrence of the opening tag is the block's.
            if let Some(start) = memmem::find(text, open_tag.as_bytes()) {
                let mut stdout = text[start..].trim_ascii_end().to_vec();
                stdout.push(b'\n');
                return Epilogue {
                    stdout,
                    stderr: Vec::new(),
                };
            }
            "the result block could not be located".to_owned()
        }
        _ if text.trim_ascii().is_empty() => {
            return rejected(prefix, "the final message is empty", Vec::new());
        }
        StreamVerdict::NoResult => "it has no result block".to_owned(),
        StreamVerdict::Invalid(message) | StreamVerdict::Multiple(message) => message,
    };
    let mut shown = Vec::new();
    DiagnosticRenderer::lines(prefix, text, &mut shown);
    let reason = format!("the final message is not one well-framed result block: {problem}");
    rejected(prefix, &reason, shown)
}

fn rejected(prefix: &'static str, reason: &str, stdout: Vec<u8>) -> Epilogue {
    Epilogue {
        stdout,
        stderr: DiagnosticRenderer::message(prefix, &format!("no result reported: {reason}")),
    }
}

#[cfg(test)]
mod tests {
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
                stderr: b"[claude] no result reported: claude-lean produced no result event\n"
                    .to_vec(),
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
}
