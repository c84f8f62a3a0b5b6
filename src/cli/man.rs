//! `man [COMMAND]`: the manual page in roff, generated from the clap definition the parser
//! uses (docs/cli.md, "`man`"): clap_mangen's sections, with EXIT STATUS and EXAMPLES of our
//! own for the main page and `run` ([`super::help::man_sections`]).

use std::io::Write;

use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use super::args::ManArgs;
use super::help::{self, Example, ExitRow};
use crate::domain::exit_code::ExitCode;
use crate::report::Output;

pub(super) fn run(args: &ManArgs) -> ExitCode {
    let mut root = help::command().disable_help_subcommand(true);
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
    // Every page names the package and version (clap_mangen would give a command's page
    // only the command's own name).
    let source = concat!("ai-session-handler ", env!("CARGO_PKG_VERSION"));
    let has_commands = command.get_subcommands().next().is_some();
    let has_version = command.get_version().is_some();
    let man = Man::new(command).source(source);
    let mut page = Vec::new();
    let rendered = (|| -> std::io::Result<()> {
        man.render_title(&mut page)?;
        man.render_name_section(&mut page)?;
        man.render_synopsis_section(&mut page)?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
        if has_commands {
            man.render_subcommands_section(&mut page)?;
        }
        if let Some((exit_status, examples)) = help::man_sections(args.command.as_deref()) {
            render_sections(&exit_status, &examples).to_writer(&mut page)?;
        }
        if has_version {
            man.render_version_section(&mut page)?;
        }
        let mut out = std::io::stdout().lock();
        out.write_all(&page)?;
        out.flush()
    })();
    match rendered {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            Output::error(format!("cannot write the manual page: {error}")).print();
            ExitCode::InvalidInput
        }
    }
}

/// EXIT STATUS as a tagged list, EXAMPLES as described commands.
fn render_sections(exit_status: &[ExitRow], examples: &[Example]) -> Roff {
    let mut roff = Roff::default();
    roff.control("SH", ["EXIT STATUS"]);
    for row in exit_status {
        roff.control("TP", []);
        roff.text([bold(row.code.as_str())]);
        roff.text([roman(row.meaning)]);
    }
    roff.control("SH", ["EXAMPLES"]);
    for example in examples {
        roff.control("TP", []);
        roff.text([roman(example.what)]);
        roff.text([bold(example.command)]);
    }
    roff
}
