//! `ai-session-handler-codex-high`: `codex-lean exec --json` with high reasoning effort. The
//! response is the last agent message, from the `--output-last-message` file (in a private
//! temporary directory); a failed turn means none (docs/providers.md, "Codex: `exec --json`").

pub mod events;
pub mod stderr;

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use clap::{CommandFactory, Parser};
use tempfile::TempDir;

use super::child::Launcher;
use super::final_result::FinalResponse;
use super::json_lines::JsonEvents;
use super::notifier::Notice;
use super::rate_limit;
use super::session::{self, LauncherError, Provider};
use events::ExecEvents;
use stderr::CodexStderr;

pub const LAUNCHER: &str = "codex-lean";

pub const PREFIX: &str = "[codex] ";

/// Run Codex (codex-lean exec --json) with high reasoning effort behind the runner's result contract.
///
/// Reads the prompt on stdin, then runs (codex-lean is looked up on PATH)
///
///   codex-lean exec --json --color never --output-last-message DIR/final-message.txt
///
/// with CODEX_REASONING_EFFORT=high (and CODEX_MODEL=MODEL with --model), DIR being a
/// private temporary directory removed afterwards.
///
/// Codex's JSON events and its stderr are shown as `[codex] ` diagnostics, whole lines, every
/// `<` escaped and live result blocks hidden: messages, `reasoning: ` summaries, commands when
/// they start (`exec: …`) and end (`exec result (exit 2, 3 lines): …`), file changes, tool
/// calls, and errors, reconnect retries included (`error: Reconnecting... 1/2 (…)`).
///
/// Once codex-lean has exited, the final message (the --output-last-message file) is printed
/// if it is exactly one well-framed result block; otherwise no block is printed and the
/// reason is given on stderr (`[codex] no result reported: …`).
///
/// SIGINT and SIGTERM are forwarded to codex-lean (SIGKILL 0.25 s after the first); no result
/// is printed then. Run by hand (not as a session leader, as the handler starts it), the
/// wrapper also stops the processes codex-lean left behind, and names them.
///
/// Exit code: codex-lean's own; 75 when Codex gave up on a rate limit, usage limit or
/// overload (the handler records `rate-limited`); 128 + N when signal N ended codex-lean or
/// interrupted the wrapper (SIGINT 130, SIGTERM 143); 127 when codex-lean is not on PATH, 126
/// when it cannot be started; 1 when the wrapper itself fails; 2 for a usage error.
#[derive(Debug, Parser)]
#[command(name = "ai-session-handler-codex-high", version, verbatim_doc_comment)]
struct Args {
    /// Codex CLI model slug to pass through as CODEX_MODEL.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

/// Parses the command line, runs one Codex session and exits with its code.
pub fn main() -> ! {
    let args: Args = session::parse_args(PREFIX, Args::command());
    std::process::exit(session::run(Codex {
        model: args.model,
        scratch: None,
    }))
}

struct Codex {
    model: Option<String>,
    /// Holds `final-message.txt`; removed when the session ends.
    scratch: Option<TempDir>,
}

impl Codex {
    fn final_message_path(scratch: &TempDir) -> PathBuf {
        scratch.path().join("final-message.txt")
    }

    /// The final message file's text, or why there is none.
    fn final_message(&self) -> Result<Vec<u8>, NoFinalMessage> {
        let Some(scratch) = &self.scratch else {
            return Err(NoFinalMessage::NotRun);
        };
        match fs::read(Self::final_message_path(scratch)) {
            Ok(text) => Ok(text),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Err(NoFinalMessage::NotWritten)
            }
            Err(error) => Err(NoFinalMessage::Unreadable(error)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum NoFinalMessage {
    #[error("{LAUNCHER} was not run")]
    NotRun,
    #[error("{LAUNCHER} wrote no final message (--output-last-message)")]
    NotWritten,
    #[error("failed to read the final message: {0}")]
    Unreadable(io::Error),
}

impl Provider for Codex {
    const PREFIX: &'static str = PREFIX;
    type Stdout = JsonEvents<ExecEvents>;
    type Stderr = CodexStderr;

    fn launcher(&mut self) -> Result<Launcher, LauncherError> {
        // Private: the final message is the agent's whole answer.
        let scratch = tempfile::Builder::new()
            .prefix("ai-session-handler-codex-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(LauncherError::Scratch)?;
        let final_message = Self::final_message_path(&scratch);
        self.scratch = Some(scratch);
        Ok(codex_launcher(self.model.as_deref(), final_message))
    }

    fn translators(&self, prompt: &[u8]) -> (Self::Stdout, CodexStderr) {
        (JsonEvents::default(), CodexStderr::new(prompt))
    }

    fn final_notices(&self, stdout: &Self::Stdout) -> Vec<Notice> {
        stdout
            .reader()
            .final_usage()
            .map(Notice::Usage)
            .into_iter()
            .collect()
    }

    fn final_response(&self, stdout: Self::Stdout, stderr: CodexStderr) -> FinalResponse {
        if let Some(failure) = stdout.reader().turn_failure() {
            let error = if failure.shown {
                " (the error above)".to_owned()
            } else {
                format!(": {}", failure.message)
            };
            return if rate_limit::is_temporary(None, &failure.message) {
                FinalResponse::RateLimited(format!("rate limited{error}"))
            } else {
                FinalResponse::Unavailable(format!("{LAUNCHER}'s turn failed{error}"))
            };
        }
        let message = self.final_message();
        let answered = message
            .as_ref()
            .is_ok_and(|text| !text.trim_ascii().is_empty());
        // Without --json, an `ERROR: ` line on stderr is the only account of a failed turn.
        if let (false, Some(error)) = (answered, stderr.last_error()) {
            return if rate_limit::is_temporary(None, error) {
                FinalResponse::RateLimited("rate limited (the error above)".to_owned())
            } else {
                FinalResponse::Unavailable(format!("{LAUNCHER} failed (the error above)"))
            };
        }
        match message {
            Ok(text) => FinalResponse::Text(text),
            Err(reason) => FinalResponse::Unavailable(reason.to_string()),
        }
    }
}

fn codex_launcher(model: Option<&str>, final_message: PathBuf) -> Launcher {
    let mut env = vec![("CODEX_REASONING_EFFORT", OsString::from("high"))];
    // Without --model an inherited CODEX_MODEL (or Codex's own config) decides.
    if let Some(model) = model {
        env.push(("CODEX_MODEL", OsString::from(model)));
    }
    Launcher {
        program: LAUNCHER,
        args: vec![
            "exec".into(),
            "--json".into(),
            "--color".into(),
            "never".into(),
            "--output-last-message".into(),
            final_message.into_os_string(),
        ],
        env,
    }
}

#[cfg(test)]
mod tests;
