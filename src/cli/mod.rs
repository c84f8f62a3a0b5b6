//! The command-line interface: argument parsing (clap), logging setup, and one module per
//! command. Every command returns the process exit code; nothing below `main` exits.

mod answer;
mod args;
mod check;
mod completions;
mod event_stream;
mod help;
mod hooks;
mod init;
mod logging;
mod man;
mod next;
mod progress;
mod prompt_preview;
pub(crate) mod report;
mod run;
mod status;
mod watch;

use std::ffi::OsString;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use clap::ColorChoice;
use clap::error::ErrorKind;

pub use args::{Cli, Command};

use crate::domain::exit_code::ExitCode;

/// Parses the command line, sets up logging, runs the command and returns the exit code.
pub fn main() -> i32 {
    // `run` re-executes this binary as its watchdog (docs/architecture.md).
    if let Some(code) = crate::platform::watchdog::main_if_watchdog() {
        return code;
    }
    // The completion script's call (`completions`), answered before anything else runs.
    if let Some(exit) = completions::complete_if_asked() {
        return exit.code();
    }
    let started = Instant::now();
    let words: Vec<OsString> = std::env::args_os().collect();
    // Before parsing: `--help` and a usage error are printed by the parse itself.
    set_colour(args::color_requested(&words).unwrap_or(ColorChoice::Auto));
    let parsed = help::command()
        .try_get_matches_from(&words)
        .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = error.print();
                    0
                }
                // Usage errors exit 5, never clap's 2: 2 means "blocked" to a caller.
                _ => {
                    let line = crate::usage::one_line(&error.render().to_string());
                    // `run --json` promises its caller one object, a usage error included.
                    if args::run_json_requested(words) {
                        let message = line.strip_prefix("error: ").unwrap_or(&line);
                        run::print_json_error(ExitCode::InvalidInput, message, None, started);
                    }
                    crate::report::Output::default().err_line(line).print();
                    ExitCode::InvalidInput.code()
                }
            };
        }
    };
    set_colour(cli.color);
    if let Err(error) = logging::init(&cli.logging) {
        if let Some(Command::Run(args)) = &cli.command
            && args.json
        {
            run::print_json_error(ExitCode::InvalidInput, &error.to_string(), None, started);
        }
        crate::report::Output::error(error.to_string()).print();
        return ExitCode::InvalidInput.code();
    }
    let exit = match cli.command {
        None => {
            let _ = help::command().print_help();
            ExitCode::Success
        }
        Some(Command::Init) => init::run(),
        Some(Command::Status(args)) => status::run(&args),
        Some(Command::Check(args)) => check::run(&args),
        Some(Command::Run(args)) => run::run(&args, &cli.logging),
        Some(Command::Answer(args)) => answer::run(&args),
        Some(Command::Report(args)) => report::run(&args),
        Some(Command::Watch(args)) => watch::run(&args),
        Some(Command::Completions(args)) => completions::run(&args),
        Some(Command::Man(args)) => man::run(&args),
    };
    exit.code()
}

/// Sets the process-wide colour choice from `--color` (`report::terminal` reads it); `auto`
/// leaves it to each stream.
fn set_colour(choice: ColorChoice) {
    match choice {
        ColorChoice::Auto => anstream::ColorChoice::Auto,
        ColorChoice::Always => anstream::ColorChoice::Always,
        ColorChoice::Never => anstream::ColorChoice::Never,
    }
    .write_global();
}

/// A poisoned lock only means another thread panicked while holding it; the data is usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
