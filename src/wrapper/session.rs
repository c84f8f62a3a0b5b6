//! One wrapper invocation, the same for every provider: read the prompt, run the launcher with
//! its output rendered as diagnostics, then report the authoritative result (or why there is
//! none) and exit with the launcher's code.
//!
//! Exit codes: the launcher's own (128 + signal when a signal killed it); 128 + signal when the
//! wrapper itself was interrupted (no result is reported then); 127 when the launcher is not
//! on PATH, 126 when it cannot be started otherwise (the shell's conventions); 1 for any other
//! failure of the wrapper's own. The runner treats every nonzero code as `agent-failed`.

use std::io::{self, Read, Write};

use nix::sys::signal::Signal;

use super::child::{self, Launcher, RunError};
use super::diagnostics::{DiagnosticRenderer, DiagnosticStream, StreamTranslator};
use super::final_result::{FinalResponse, epilogue};

/// The launcher is not on PATH.
pub const EXIT_LAUNCHER_NOT_FOUND: i32 = 127;
/// The launcher exists but could not be started.
pub const EXIT_LAUNCHER_NOT_STARTED: i32 = 126;
/// The wrapper failed on its own account (stdin, temp files, streaming).
pub const EXIT_WRAPPER_FAILED: i32 = 1;

/// What differs between providers.
pub trait Provider {
    /// Marks the provider's diagnostics, e.g. `[codex] `.
    const PREFIX: &'static str;
    /// Reads the launcher's stdout; it may learn the final response on the way.
    type Stdout: StreamTranslator + Send + 'static;

    /// The command to run; an error is reported as a wrapper failure.
    fn launcher(&mut self) -> Result<Launcher, String>;
    fn stdout_translator(&self) -> Self::Stdout;
    /// The authoritative final response, once the launcher has exited normally.
    fn final_response(&self, stdout: Self::Stdout) -> FinalResponse;
}

/// A usage error of the wrapper's own command line (clap's default code; the runner records
/// any nonzero exit as `agent-failed`).
pub const EXIT_USAGE: i32 = 2;

/// Parses the wrapper's arguments. `--help` and `--version` print as usual and exit 0; a usage
/// error is one diagnostic line like every other message of the wrapper (prefixed, `<`
/// escaped) and exits [`EXIT_USAGE`].
pub fn parse_args<A: clap::Parser>(prefix: &'static str) -> A {
    match A::try_parse() {
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
            let line = crate::usage::one_line(&error.render().to_string());
            let _ = io::stderr().write_all(&DiagnosticRenderer::message(prefix, &line));
            std::process::exit(EXIT_USAGE);
        }
    }
}

/// Runs one session for `provider` and returns the wrapper's exit code.
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
        Err(message) => return fail(prefix, &message),
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
    let finished = runtime.block_on(child::run(
        &launcher,
        prompt,
        provider.stdout_translator(),
        DiagnosticStream::new(prefix),
    ));
    let finished = match finished {
        Ok(finished) => finished,
        Err(error) => return report_run_error(prefix, launcher.program, error),
    };
    if let Some(signal) = finished.interrupted {
        let name = Signal::try_from(signal).map_or("a signal", Signal::as_str);
        say(
            prefix,
            &format!(
                "interrupted by {name}; {} was stopped and no result is reported",
                launcher.program
            ),
        );
        return 128 + signal;
    }
    let epilogue = epilogue(&provider.final_response(finished.stdout), prefix);
    let written = write_all(&mut io::stdout().lock(), &epilogue.stdout)
        .and_then(|()| write_all(&mut io::stderr().lock(), &epilogue.stderr));
    if let Err(error) = written {
        return fail(
            prefix,
            &format!("failed to write the final result: {error}"),
        );
    }
    child::exit_code(finished.status)
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
    let _ = write_all(
        &mut io::stderr().lock(),
        &DiagnosticRenderer::message(prefix, message),
    );
}

fn write_all(sink: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    sink.write_all(bytes)?;
    sink.flush()
}
