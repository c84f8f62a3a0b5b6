//! `completions <SHELL>`: the shell completion script for every command and flag, generated
//! from the same clap definition the parser uses, so it can never list a flag that does not
//! exist. Printed to stdout; README.md says where each shell wants it.

use std::io::Write;

use clap::CommandFactory;

use super::args::{Cli, CompletionsArgs};
use crate::domain::exit_code::ExitCode;
use crate::report::Output;

/// The binary name the script completes (the one `cargo install` puts on PATH).
const BIN_NAME: &str = "ai-session-handler";

pub fn run(args: &CompletionsArgs) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), BIN_NAME, &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            Output::error(format!("cannot write the completion script: {error}")).print();
            ExitCode::InvalidInput
        }
    }
}
