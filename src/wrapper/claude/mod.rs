//! `ai-session-handler-claude-high` and `-claude-medium`: `claude-lean -p` with stream-json
//! output, partial messages included so that text arrives as the model writes it
//! (docs/providers.md, "Claude: stream-json with partial messages").

pub mod stream_json;
pub mod tokens;

use std::ffi::OsString;

use clap::{CommandFactory, Parser};

use super::child::Launcher;
use super::diagnostics::DiagnosticStream;
use super::final_result::FinalResponse;
use super::json_lines::JsonEvents;
use super::session::{self, LauncherError, Provider};
use stream_json::StreamJson;

pub const LAUNCHER: &str = "claude-lean";

pub const PREFIX: &str = "[claude] ";

#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Effort {
    High,
    Medium,
}

impl Effort {
    fn as_str(self) -> &'static str {
        self.into()
    }

    fn binary(self) -> &'static str {
        match self {
            Self::High => "ai-session-handler-claude-high",
            Self::Medium => "ai-session-handler-claude-medium",
        }
    }
}

/// The wrapper's command line; its help is [`help`].
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Claude model to pass through as --model (default: ANTHROPIC_MODEL, then Claude's settings).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

/// Parses the command line, runs one Claude session and exits with its code.
pub fn main(effort: Effort) -> ! {
    let help = help(effort);
    let summary = help.lines().next().unwrap_or_default().to_owned();
    let command = Args::command()
        .name(effort.binary())
        .about(summary)
        .long_about(help);
    let args: Args = session::parse_args(PREFIX, command);
    let model = args.model;
    std::process::exit(session::run(Claude { effort, model }))
}

/// The wrappers' `--help` text; its first line is their `-h` summary.
fn help(effort: Effort) -> String {
    let effort = effort.as_str();
    format!(
        "Run Claude Code (claude-lean) with {effort} effort behind the runner's result contract.

Reads the prompt on stdin, then runs (claude-lean is looked up on PATH)

  claude-lean --effort {effort} -p --output-format stream-json --verbose
    --include-partial-messages [--model MODEL]

Its stream-json events and its stderr are shown as `[claude] ` diagnostics, whole lines,
every `<` escaped and live result blocks hidden: text as the model writes it, tool calls
(`tool: Bash …`), tool results (`tool result (error, 4 lines): …`), API retries (`API error
529 (overloaded); retry 2 of 10 in 1.2 s`) and API errors with their status. Thinking is
not shown.

Once claude-lean has exited, the `result` text of its last result event is printed if that
event reports success and the text is exactly one well-framed result block; otherwise no
block is printed and the reason is given on stderr (`[claude] no result reported: …`).

SIGINT and SIGTERM are forwarded to claude-lean (SIGKILL 0.25 s after the first); no
result is printed then. Run by hand (not as a session leader, as the handler starts it),
the wrapper also stops the processes claude-lean left behind, and names them.

Exit code: claude-lean's own; 75 when Claude gave up on a rate limit, usage limit or
overload (such as API status 429 or 529; the handler records `rate-limited`); 128 + N
when signal N ended claude-lean or interrupted the wrapper (SIGINT 130, SIGTERM 143); 127
when claude-lean is not on PATH, 126 when it cannot be started; 1 when the wrapper itself
fails; 2 for a usage error."
    )
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
