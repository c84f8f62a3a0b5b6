//! One wrapper invocation, the same for every provider: read the prompt, run the launcher with
//! its output rendered, report the result or why there is none, and exit with the code
//! docs/providers.md, "Exit codes", gives.

use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use crate::domain::decision::EX_TEMPFAIL;
use crate::platform::process_group;
use crate::usage::one_line;

use super::child::{self, Launcher, RunError};
use super::descendants::{self, Supervision};
use super::diagnostics::{StreamTranslator, render_message};
use super::final_result::{FinalResponse, epilogue};
use super::notifier::{Notice, Notifier};

pub const EXIT_LAUNCHER_NOT_FOUND: i32 = 127;
pub const EXIT_LAUNCHER_NOT_STARTED: i32 = 126;
/// The wrapper failed on its own account (stdin, temp files, streaming).
pub const EXIT_WRAPPER_FAILED: i32 = 1;
/// A usage error of the wrapper's own command line (clap's default code; the runner records
/// any nonzero exit as `agent-failed`).
pub const EXIT_USAGE: i32 = 2;

/// What differs between providers.
pub trait Provider {
    /// Marks the provider's diagnostics, e.g. `[codex] `.
    const PREFIX: &'static str;
    type Stdout: StreamTranslator + Send + 'static;
    type Stderr: StreamTranslator + Send + 'static;

    fn launcher(&mut self) -> Result<Launcher, LauncherError>;
    /// The translators for one run; `prompt` is what the launcher gets on stdin.
    fn translators(&self, prompt: &[u8]) -> (Self::Stdout, Self::Stderr);
    /// The authoritative final response, once the launcher has exited normally.
    fn final_response(&self, stdout: Self::Stdout, stderr: Self::Stderr) -> FinalResponse;
    /// What the runner should be told once the launcher has exited by itself (not stopped by
    /// a signal): a provider whose totals are final only at the end says so here.
    fn final_notices(&self, _stdout: &Self::Stdout) -> Vec<Notice> {
        Vec::new()
    }
}

/// Why a provider could not set up its launcher (exit [`EXIT_WRAPPER_FAILED`]): the private
/// directory the launcher writes its answer into.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    #[error("failed to create a temporary directory: {0}")]
    Scratch(io::Error),
}

/// Parses the wrapper's arguments with `command`; exits 0 after `--help` / `--version` and
/// [`EXIT_USAGE`] after a usage error, which is one diagnostic line like every other message.
pub fn parse_args<A: clap::FromArgMatches>(prefix: &'static str, command: clap::Command) -> A {
    match command
        .try_get_matches()
        .and_then(|matches| A::from_arg_matches(&matches))
    {
        Ok(args) => args,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                let _ = error.print();
                std::process::exit(0);
            }
            let line = one_line(&error.render().to_string());
            let _ = io::stderr().write_all(&render_message(prefix, &line));
            std::process::exit(EXIT_USAGE);
        }
    }
}

/// Runs one session for `provider`; returns the wrapper's exit code.
pub fn run<P: Provider>(mut provider: P) -> i32 {
    let prefix = P::PREFIX;
    let mut prompt = Vec::new();
    if let Err(error) = io::stdin().lock().read_to_end(&mut prompt) {
        return fail(
            prefix,
            &format!("failed to read the prompt from stdin: {error}"),
        );
    }
    let launcher = match provider.launcher() {
        Ok(launcher) => launcher,
        Err(error) => return fail(prefix, &error.to_string()),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return fail(
                prefix,
                &format!("failed to start the async runtime: {error}"),
            );
        }
    };
    let (stdout, stderr) = provider.translators(&prompt);
    let notifier = Arc::new(Notifier::from_env());
    let finished = runtime.block_on(child::run(
        &launcher,
        prompt,
        stdout,
        stderr,
        Supervision::detect(),
        notifier.clone(),
    ));
    let finished = match finished {
        Ok(finished) => finished,
        Err(error) => return report_run_error(prefix, launcher.program, error),
    };
    if !finished.leftovers.is_empty() {
        say(
            prefix,
            &descendants::describe(launcher.program, &finished.leftovers),
        );
    }
    if let Some(signal) = finished.interrupted {
        let name = process_group::signal_name(signal).unwrap_or("a signal");
        say(
            prefix,
            &format!(
                "interrupted by {name}; {} was stopped and no result is reported",
                launcher.program
            ),
        );
        return 128 + signal;
    }
    if finished.status.signal().is_none() {
        notifier.send(&provider.final_notices(&finished.stdout));
    }
    let response = provider.final_response(finished.stdout, finished.stderr);
    let epilogue = epilogue(&response, prefix);
    let written = write_all(&mut io::stdout().lock(), &epilogue.stdout)
        .and_then(|()| write_all(&mut io::stderr().lock(), &epilogue.stderr));
    if let Err(error) = written {
        return fail(
            prefix,
            &format!("failed to write the final result: {error}"),
        );
    }
    exit_code(&response, finished.status)
}

/// The launcher's code, unless the provider gave up on a rate limit (and no signal ended it).
fn exit_code(response: &FinalResponse, status: std::process::ExitStatus) -> i32 {
    if matches!(response, FinalResponse::RateLimited(_)) && status.signal().is_none() {
        EX_TEMPFAIL
    } else {
        child::exit_code(status)
    }
}

fn report_run_error(prefix: &'static str, program: &str, error: RunError) -> i32 {
    match error {
        RunError::Spawn(error) if error.kind() == io::ErrorKind::NotFound => {
            say(
                prefix,
                &format!(
                    "error: {program} was not found on PATH; install it or add its directory to PATH"
                ),
            );
            EXIT_LAUNCHER_NOT_FOUND
        }
        RunError::Spawn(error) => {
            say(
                prefix,
                &format!("error: failed to start {program}: {error}"),
            );
            EXIT_LAUNCHER_NOT_STARTED
        }
        RunError::Signals(error) => fail(
            prefix,
            &format!("failed to install SIGINT/SIGTERM handling: {error}"),
        ),
        RunError::Failed(message) => fail(prefix, &message),
    }
}

fn fail(prefix: &'static str, message: &str) -> i32 {
    say(prefix, &format!("error: {message}"));
    EXIT_WRAPPER_FAILED
}

/// Prints a message of the wrapper's own on stderr, rendered like any diagnostic.
fn say(prefix: &'static str, message: &str) {
    let _ = write_all(&mut io::stderr().lock(), &render_message(prefix, message));
}

fn write_all(sink: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    sink.write_all(bytes)?;
    sink.flush()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    #[test]
    fn a_rate_limit_exits_75_unless_a_signal_ended_the_launcher() {
        let limited = FinalResponse::RateLimited("rate limited".to_owned());
        assert_eq!(exit_code(&limited, ExitStatus::from_raw(1 << 8)), 75);
        assert_eq!(exit_code(&limited, ExitStatus::from_raw(0)), 75);
        assert_eq!(exit_code(&limited, ExitStatus::from_raw(15)), 143);
        let other = FinalResponse::Unavailable("no result".to_owned());
        assert_eq!(exit_code(&other, ExitStatus::from_raw(1 << 8)), 1);
    }

    #[test]
    fn an_unexpected_argument_with_a_tip_is_one_line() {
        let rendered = "error: unexpected argument '--modle' found\n\n  tip: a similar argument exists: '--model'\n\nUsage: ai-session-handler-codex-high --model <MODEL>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: unexpected argument '--modle' found; tip: a similar argument exists: '--model'; see 'ai-session-handler-codex-high --help'"
        );
    }

    #[test]
    fn a_missing_value_keeps_the_option_name() {
        let rendered = "error: a value is required for '--model <MODEL>' but none was supplied\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: a value is required for '--model <MODEL>' but none was supplied; see --help"
        );
    }
}
