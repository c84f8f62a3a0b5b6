//! `ai-session-handler-codex-high`: `codex-lean exec` with high reasoning effort.
//!
//! Codex prints its progress as plain text on both streams; all of it is diagnostics. The
//! authoritative response is the last agent message, which Codex writes to the file named by
//! `--output-last-message` (in a private temporary directory removed afterwards). A result
//! block seen live is never used.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::PathBuf;

use std::os::unix::fs::PermissionsExt;

use tempfile::TempDir;

use super::child::Launcher;
use super::diagnostics::DiagnosticStream;
use super::final_result::FinalResponse;
use super::session::{self, Provider};

pub const LAUNCHER: &str = "codex-lean";

/// Runs one Codex session; `model` becomes `CODEX_MODEL` for the child. Returns the exit code.
pub fn run(model: Option<String>) -> i32 {
    session::run(Codex {
        model,
        scratch: None,
    })
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
}

impl Provider for Codex {
    const PREFIX: &'static str = "[codex] ";
    type Stdout = DiagnosticStream;

    fn launcher(&mut self) -> Result<Launcher, String> {
        // Private: the final message is the agent's whole answer.
        let scratch = tempfile::Builder::new()
            .prefix("ai-session-handler-codex-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|error| format!("failed to create a temporary directory: {error}"))?;
        let final_message = Self::final_message_path(&scratch);
        self.scratch = Some(scratch);
        Ok(codex_launcher(self.model.as_deref(), final_message))
    }

    fn stdout_translator(&self) -> DiagnosticStream {
        DiagnosticStream::new(Self::PREFIX)
    }

    fn final_response(&self, _stdout: DiagnosticStream) -> FinalResponse {
        let Some(scratch) = &self.scratch else {
            return FinalResponse::Unavailable("codex-lean was not run".to_owned());
        };
        match fs::read(Self::final_message_path(scratch)) {
            Ok(text) => FinalResponse::Text(text),
            Err(error) if error.kind() == io::ErrorKind::NotFound => FinalResponse::Unavailable(
                format!("{LAUNCHER} wrote no final message (--output-last-message)"),
            ),
            Err(error) => {
                FinalResponse::Unavailable(format!("failed to read the final message: {error}"))
            }
        }
    }
}

/// `codex-lean exec --color never --output-last-message FILE`, high effort, optional model.
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
            "--color".into(),
            "never".into(),
            "--output-last-message".into(),
            final_message.into_os_string(),
        ],
        env,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_codex_exec_uncolored_with_high_effort() {
        let launcher = codex_launcher(None, PathBuf::from("/tmp/x/final-message.txt"));
        assert_eq!(
            launcher,
            Launcher {
                program: "codex-lean",
                args: [
                    "exec",
                    "--color",
                    "never",
                    "--output-last-message",
                    "/tmp/x/final-message.txt"
                ]
                .map(OsString::from)
                .to_vec(),
                env: vec![("CODEX_REASONING_EFFORT", OsString::from("high"))],
            }
        );
    }

    #[test]
    fn a_model_is_passed_as_codex_model() {
        let launcher = codex_launcher(Some("gpt-5.5"), PathBuf::from("f"));
        assert_eq!(
            launcher.env,
            vec![
                ("CODEX_REASONING_EFFORT", OsString::from("high")),
                ("CODEX_MODEL", OsString::from("gpt-5.5")),
            ]
        );
    }

    #[test]
    fn the_final_message_file_is_the_response() {
        let mut codex = Codex {
            model: None,
            scratch: None,
        };
        let launcher = codex.launcher().expect("temp dir");
        let path = PathBuf::from(launcher.args.last().expect("path argument"));
        assert_eq!(
            codex.final_response(DiagnosticStream::new("[codex] ")),
            FinalResponse::Unavailable(
                "codex-lean wrote no final message (--output-last-message)".to_owned()
            )
        );
        fs::write(&path, "<phase-complete>ok</phase-complete>\n").expect("write");
        assert_eq!(
            codex.final_response(DiagnosticStream::new("[codex] ")),
            FinalResponse::Text(b"<phase-complete>ok</phase-complete>\n".to_vec())
        );
        drop(codex);
        assert!(!path.exists(), "the temporary directory is removed");
    }
}
