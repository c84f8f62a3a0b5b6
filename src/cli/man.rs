//! `man [COMMAND]`: the manual page in roff, generated from the clap definition the parser
//! uses: `ai-session-handler(1)` with the command list, or one command's page
//! (`ai-session-handler-run(1)`, the names `clap_mangen::generate_to` would give the files).
//! Printed to stdout; README.md says where to put it.

use clap::CommandFactory;

use super::args::{Cli, ManArgs};
use crate::domain::exit_code::ExitCode;
use crate::report::Output;

pub fn run(args: &ManArgs) -> ExitCode {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let command = match &args.command {
        None => root,
        Some(name) => match root.find_subcommand(name) {
            Some(command) => command.clone(),
            None => {
                let known: Vec<&str> = root
                    .get_subcommands()
                    .map(clap::Command::get_name)
                    .collect();
                Output::error(format!(
                    "man: no manual page for '{name}'; commands: {}",
                    known.join(", ")
                ))
                .print();
                return ExitCode::InvalidInput;
            }
        },
    };
    let mut page = Vec::new();
    // Every page names the package and version (clap_mangen would give a command's page
    // only the command's own name).
    let source = concat!("ai-session-handler ", env!("CARGO_PKG_VERSION"));
    let rendered = clap_mangen::Man::new(command)
        .source(source)
        .render(&mut page)
        .and_then(|()| {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(&page)?;
            out.flush()
        });
    match rendered {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            Output::error(format!("cannot write the manual page: {error}")).print();
            ExitCode::InvalidInput
        }
    }
}
