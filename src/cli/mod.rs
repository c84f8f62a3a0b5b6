//! The command-line interface: argument parsing (clap), logging setup, and one module per
//! command. Every command returns the process exit code; nothing below `main` exits.

mod args;
mod check;
mod init;
mod logging;
mod run;
mod status;
pub mod usage;

use clap::Parser;
use clap::error::ErrorKind;

pub use args::{Cli, Command};

/// Exit code for invalid input, refused runs and usage errors (never 2: that means blocked).
pub const EXIT_INVALID: i32 = 5;

/// Parses the command line, sets up logging, runs the command and returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = error.print();
                    0
                }
                _ => {
                    eprintln!("{}", usage::one_line(&error.render().to_string()));
                    EXIT_INVALID
                }
            };
        }
    };
    let _logging = match logging::init(&cli.logging) {
        Ok(guard) => guard,
        Err(message) => {
            eprintln!("error: {message}");
            return EXIT_INVALID;
        }
    };
    match cli.command {
        None => {
            use clap::CommandFactory;
            let _ = Cli::command().print_help();
            0
        }
        Some(Command::Init) => init::run(),
        Some(Command::Status(args)) => status::run(&args),
        Some(Command::Check(args)) => check::run(&args),
        Some(Command::Run(args)) => run::run(&args),
    }
}
