//! The one result a wrapper reports: the provider's final response, validated with the
//! runner's own framing rules ([`StreamFramer`]) and re-emitted verbatim from its opening tag,
//! or no block and the reason (docs/providers.md, "What a wrapper does", step 4).

use memchr::memmem;

use super::diagnostics::{render_lines, render_message};
use crate::domain::marker::{MarkerVerdict, StreamFramer};
use crate::domain::output_stream::OutputStream;

/// The launcher's final response, or why there is none (shown to the user): `RateLimited`
/// when the provider hit a limit or overload its own retries did not get past.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinalResponse {
    Text(Vec<u8>),
    Unavailable(String),
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
    if text.trim_ascii().is_empty() {
        return rejected(prefix, "the final message is empty", Vec::new());
    }
    let mut framer = StreamFramer::new(OutputStream::Stdout);
    framer.feed(text);
    let problem = match framer.finish() {
        MarkerVerdict::Result(block) => {
            let open_tag = format!("<{}>", block.kind.tag());
            // A valid response holds exactly two exact tags and the framer counts every
            // occurrence, so the first occurrence of the opening tag is the block's.
            if let Some(start) = memmem::find(text, open_tag.as_bytes()) {
                // Verbatim, so a body ending in a fenced code block keeps its fence closed.
                let mut stdout = text[start..].trim_ascii_end().to_vec();
                // The transcript interleaves stdout and stderr by arrival: a stderr line read
                // after the block must not join the closing tag's line.
                stdout.push(b'\n');
                return Epilogue {
                    stdout,
                    stderr: Vec::new(),
                };
            }
            "the result block could not be located".to_owned()
        }
        MarkerVerdict::Missing(_) => "it has no result block".to_owned(),
        MarkerVerdict::Invalid(message) | MarkerVerdict::Multiple(message) => message,
    };
    let mut shown = Vec::new();
    render_lines(prefix, text, &mut shown);
    let reason = format!("the final message is not one well-framed result block: {problem}");
    rejected(prefix, &reason, shown)
}

fn rejected(prefix: &'static str, reason: &str, stdout: Vec<u8>) -> Epilogue {
    Epilogue {
        stdout,
        stderr: render_message(prefix, &format!("no result reported: {reason}")),
    }
}

#[cfg(test)]
mod tests;
