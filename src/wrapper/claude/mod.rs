//! `ai-session-handler-claude-high` and `-claude-medium`: `claude-lean -p` with stream-json
//! output, partial messages included.
//!
//! The launcher runs as `claude-lean --effort E -p --output-format stream-json --verbose
//! --include-partial-messages [--model M]`. Without `--include-partial-messages` Claude
//! prints a message only once it is complete, so a model writing for minutes looks idle to
//! the runner's idle timeout; with it, text arrives as the model writes it. How stdout is
//! read: [`stream_json`]. stderr is rendered as plain diagnostics.

pub mod stream_json;
pub mod tokens;

use std::ffi::OsString;

use super::child::Launcher;
use super::diagnostics::DiagnosticStream;
use super::final_result::FinalResponse;
use super::json_lines::JsonEvents;
use super::session::{self, LauncherError, Provider};
use stream_json::StreamJson;

pub const LAUNCHER: &str = "claude-lean";

pub const PREFIX: &str = "[claude] ";

/// Claude's `--effort` level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    High,
    Medium,
}

impl Effort {
    fn as_str(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Medium => "medium",
        }
    }
}

/// Runs one Claude session; `model` is passed as `--model`. Returns the exit code.
pub fn run(effort: Effort, model: Option<String>) -> i32 {
    session::run(Claude { effort, model })
}

struct Claude {
    effort: Effort,
    model: Option<String>,
}

impl Provider for Claude {
    const PREFIX: &'static str = PREFIX;
    type Stdout = JsonEvents<StreamJson>;
    type Stderr = DiagnosticStream;

    fn launcher(&mut self) -> Result<Launcher, LauncherError> {
        Ok(claude_launcher(self.effort, self.model.as_deref()))
    }

    fn translators(&self, _prompt: &[u8]) -> (Self::Stdout, DiagnosticStream) {
        (JsonEvents::default(), DiagnosticStream::new(PREFIX))
    }

    fn final_response(&self, stdout: Self::Stdout, _stderr: DiagnosticStream) -> FinalResponse {
        stdout.into_reader().final_response()
    }
}

/// `claude-lean --effort E -p --output-format stream-json --verbose --include-partial-messages
/// [--model M]`.
///
/// Without `--model`, `ANTHROPIC_MODEL` (inherited untouched) and then Claude's settings and
/// the launcher's defaults decide.
fn claude_launcher(effort: Effort, model: Option<&str>) -> Launcher {
    let mut args: Vec<OsString> = [
        "--effort",
        effort.as_str(),
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]
    .map(OsString::from)
    .to_vec();
    if let Some(model) = model {
        args.extend(["--model".into(), model.into()]);
    }
    Launcher {
        program: LAUNCHER,
        args,
        env: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_claude_lean_with_effort_and_partial_stream_json() {
        assert_eq!(
            claude_launcher(Effort::Medium, None),
            Launcher {
                program: "claude-lean",
                args: [
                    "--effort",
                    "medium",
                    "-p",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--include-partial-messages",
                ]
                .map(OsString::from)
                .to_vec(),
                env: Vec::new(),
            }
        );
        let with_model = claude_launcher(Effort::High, Some("opus"));
        assert_eq!(with_model.args[1], "high");
        assert_eq!(
            with_model.args[7..],
            [OsString::from("--model"), "opus".into()]
        );
    }
}
