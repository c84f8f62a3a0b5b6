//! `completions <SHELL>`: the shell completion script, generated from the clap definition the
//! parser uses. clap_complete's bash script spells a subcommand's state two ways when the
//! binary name has a hyphen (clap-rs/clap#6421), so nothing after the subcommand completed:
//! [`repair_bash`] spells its case arms the way its loop does.

use std::io::Write;

use clap_complete::Shell;

use super::args::CompletionsArgs;
use super::help;
use crate::domain::exit_code::ExitCode;
use crate::report::Output;

/// The binary name the script completes (the one `cargo install` puts on PATH).
const BIN_NAME: &str = "ai-session-handler";

/// What clap_complete's bash generator joins subcommand names with.
const BASH_SUBCOMMAND_SEPARATOR: &str = "__subcmd__";

pub(super) fn run(args: &CompletionsArgs) -> ExitCode {
    let script = script(args.shell);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            Output::error(format!("cannot write the completion script: {error}")).print();
            ExitCode::InvalidInput
        }
    }
}

/// The completion script for `shell`.
fn script(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut help::command(), BIN_NAME, &mut script);
    match shell {
        Shell::Bash => repair_bash(&String::from_utf8_lossy(&script)).into_bytes(),
        _ => script,
    }
}

/// Rewrites the case arms of a bash script generated for [`BIN_NAME`] to the state names its
/// loop assigns (the binary name's hyphens as `__`, not as the subcommand separator). A script
/// that already agrees (a fixed clap_complete) is returned unchanged.
fn repair_bash(script: &str) -> String {
    let as_loop_spells_it = format!("{}{BASH_SUBCOMMAND_SEPARATOR}", BIN_NAME.replace('-', "__"));
    let as_arms_spell_it = format!(
        "{}{BASH_SUBCOMMAND_SEPARATOR}",
        BIN_NAME.replace('-', BASH_SUBCOMMAND_SEPARATOR)
    );
    script
        .split_inclusive('\n')
        .map(|line| {
            let label = line.trim();
            if label.ends_with(')') && label.starts_with(&as_arms_spell_it) {
                line.replacen(&as_arms_spell_it, &as_loop_spells_it, 1)
            } else {
                line.to_owned()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn bash() -> String {
        String::from_utf8(script(Shell::Bash)).unwrap()
    }

    /// Every state the loop can assign has its case arm, and every arm is reachable.
    #[test]
    fn every_bash_state_has_its_case_arm() {
        let script = bash();
        let assigned: BTreeSet<&str> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("cmd=\""))
            .filter_map(|rest| rest.strip_suffix('"'))
            .filter(|state| !state.is_empty())
            .collect();
        let arms: BTreeSet<&str> = script
            .lines()
            .map(str::trim)
            .filter(|line| line.starts_with("ai__") && line.ends_with(')') && !line.contains(','))
            .map(|line| line.trim_end_matches(')'))
            .collect();
        assert!(
            assigned.contains("ai__session__handler__subcmd__run"),
            "{assigned:?}"
        );
        assert_eq!(assigned, arms);
    }

    #[test]
    fn a_script_that_already_agrees_is_left_alone() {
        let script = bash();
        assert_eq!(repair_bash(&script), script);
    }

    #[test]
    fn the_other_shells_scripts_are_clap_complete_s() {
        for shell in [Shell::Zsh, Shell::Fish, Shell::Elvish, Shell::PowerShell] {
            let mut expected = Vec::new();
            clap_complete::generate(shell, &mut help::command(), BIN_NAME, &mut expected);
            assert_eq!(script(shell), expected, "{shell}");
        }
    }
}
