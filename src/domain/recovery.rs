//! The command line that continues a run after it stopped: the invocation exactly as it was
//! typed, from the directory it was typed in, with the flags the situation needs added. Hooks
//! hand it to whoever they notify (docs/cli.md, "Notifications"), so a person reading a
//! notification on a phone can paste it as it is.

use super::template::shell_join;

/// What continuing the run takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Continuation {
    /// The same command again (a phase limit, a wait or launch interrupted, a retry still
    /// scheduled).
    Rerun,
    /// `--retry-stopped`: a stopped phase or an unresolved attempt.
    RetryStopped,
    /// `--retry-stopped --accept-plan-change`: a clarification, answered in the plan.
    RetryStoppedAcceptingPlanChange,
    /// `--accept-plan-change`: the plan was edited.
    AcceptPlanChange,
}

impl Continuation {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Self::Rerun => &[],
            Self::RetryStopped => &["--retry-stopped"],
            Self::RetryStoppedAcceptingPlanChange => &["--retry-stopped", "--accept-plan-change"],
            Self::AcceptPlanChange => &["--accept-plan-change"],
        }
    }
}

/// `cd <cwd> && <args…> <added flags>`, shell-quoted. `args` is the invocation's argv (the
/// program as it was invoked first); a flag already given is not added again, and flags go
/// before a `--` that ends the options.
pub fn continuation_command(cwd: &str, args: &[String], continuation: Continuation) -> String {
    let options_end = args
        .iter()
        .position(|arg| arg == "--")
        .unwrap_or(args.len());
    let mut argv: Vec<String> = args[..options_end].to_vec();
    for flag in continuation.flags() {
        if !argv.iter().any(|arg| arg == flag) {
            argv.push((*flag).to_owned());
        }
    }
    argv.extend_from_slice(&args[options_end..]);
    format!(
        "cd {} && {}",
        shell_join(&[cwd.to_owned()]),
        shell_join(&argv)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn the_invocation_is_repeated_from_its_directory_with_the_flags_it_needs() {
        let run = args(&[
            "ai-session-handler",
            "run",
            "--plan",
            "docs/plan.md",
            "--agent-cmd",
            "codex exec",
        ]);
        assert_eq!(
            continuation_command("/home/me/project", &run, Continuation::RetryStopped),
            "cd /home/me/project && ai-session-handler run --plan docs/plan.md --agent-cmd 'codex exec' --retry-stopped"
        );
        assert_eq!(
            continuation_command("/p", &run, Continuation::RetryStoppedAcceptingPlanChange),
            "cd /p && ai-session-handler run --plan docs/plan.md --agent-cmd 'codex exec' --retry-stopped --accept-plan-change"
        );
        assert_eq!(
            continuation_command("/p", &run, Continuation::AcceptPlanChange),
            "cd /p && ai-session-handler run --plan docs/plan.md --agent-cmd 'codex exec' --accept-plan-change"
        );
        assert_eq!(
            continuation_command("/p", &run, Continuation::Rerun),
            "cd /p && ai-session-handler run --plan docs/plan.md --agent-cmd 'codex exec'"
        );
    }

    #[test]
    fn a_flag_already_given_is_not_repeated_and_a_path_with_spaces_is_quoted() {
        let run = args(&["./bin/ash", "run", "--plan", "p.md", "--retry-stopped"]);
        assert_eq!(
            continuation_command("/tmp/my dir", &run, Continuation::RetryStopped),
            "cd '/tmp/my dir' && ./bin/ash run --plan p.md --retry-stopped"
        );
    }

    #[test]
    fn added_flags_go_before_an_end_of_options_marker() {
        let run = args(&["ash", "run", "--plan", "p.md", "--", "extra"]);
        assert_eq!(
            continuation_command("/p", &run, Continuation::RetryStopped),
            "cd /p && ash run --plan p.md --retry-stopped -- extra"
        );
    }
}
