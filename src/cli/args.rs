//! Command-line arguments (docs/cli.md). Help text is written for the person at the terminal; the
//! value parsers reject bad values up front so they exit 5 like every other input error.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use clap::{Args, ColorChoice, Parser, Subcommand, ValueEnum};
use clap_complete::engine::{ArgValueCandidates, ArgValueCompleter};

use crate::domain::budget::{parse_max_cost, parse_max_tokens};
use crate::domain::hooks::{Hook, parse_hook_flag};
use crate::domain::recovery::Invocation;
use crate::domain::seconds::parse_seconds;
use crate::domain::selection::RecoveryFlags;

use super::completions;
use super::help::GLOBAL_HEADING;

/// Help headings grouping `run`'s and `check`'s options, as cargo groups its own.
const LIMITS: &str = "Limits";
const RECOVERY: &str = "Recovery";
const UNATTENDED: &str = "Unattended runs";
const VERIFICATION: &str = "Verification";
const AS_RUN: &str = "Check as run would run";

#[derive(Debug, Parser)]
#[command(
    name = "ai-session-handler",
    version,
    about = "Run a provider-agnostic AI agent plan to completion.",
    long_about = "Run a provider-agnostic AI agent plan to completion.\n\n\
        Each remaining phase of a Markdown plan runs in a fresh agent process started from a \
        command template; its output is streamed live and into a durable transcript, and the \
        phase ends with exactly one result block that the runner records crash-safely."
)]
pub struct Cli {
    /// Colour errors, warnings and phase end lines: auto (on a terminal, unless NO_COLOR is
    /// set or TERM=dumb), always or never.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        hide_possible_values = true,
        default_value_t = ColorChoice::Auto,
        help_heading = GLOBAL_HEADING
    )]
    pub color: ColorChoice,
    #[command(flatten)]
    pub logging: LoggingArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the remaining phases of a plan, one fresh agent process per phase.
    Run(RunArgs),
    /// Print the plan's durable state and where its artifacts are (read-only).
    Status(StatusArgs),
    /// Validate everything `run` would validate and print the phase table (read-only).
    Check(CheckArgs),
    /// Create .ai-session-handler/config.json, plans/ (generated state) and .gitignore here.
    Init,
    /// Answer a phase stopped on needs-clarification or blocked: the answer goes into the plan.
    Answer(AnswerArgs),
    /// What the plan's runs did: each phase's attempts, what they said, changed, verified,
    /// spent and waited for, and what to do next (read-only).
    Report(ReportArgs),
    /// Follow a run of the plan started elsewhere: phase, elapsed, output, waits (read-only).
    Watch(WatchArgs),
    /// Print a shell completion script to stdout (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Show the manual page: the main page, or one command's (paged on a terminal, else roff).
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// A command whose page to show instead (run, status, check, watch, init, completions, man).
    #[arg(value_name = "COMMAND", add = ArgValueCandidates::new(completions::man_topics))]
    pub command: Option<String>,
}

/// The plan a command works on: `--plan PATH`, or the path alone (`status docs/plans/x.md`).
#[derive(Debug, Args)]
#[group(id = "plan-arg", required = true, multiple = false)]
pub struct PlanArg {
    /// Markdown plan path (relative to the current directory); `--plan` may be left out.
    #[arg(id = "plan", long = "plan", value_name = "PATH")]
    flag: Option<PathBuf>,
    /// The plan, given without `--plan`.
    #[arg(id = "plan-path", value_name = "PLAN")]
    positional: Option<PathBuf>,
}

impl PlanArg {
    /// The plan path as typed, whichever way it was given.
    pub fn path(&self) -> &Path {
        // clap's required group guarantees one of the two.
        self.flag
            .as_deref()
            .or(self.positional.as_deref())
            .unwrap_or(Path::new(""))
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub plan: PlanArg,
    /// Agent command template; placeholders: {prompt_file} {workspace} {run_id} {transcript_file} {state_file}.
    #[arg(long, value_name = "TEMPLATE")]
    pub agent_cmd: Option<String>,
    /// Maximum phases to complete in this invocation (default: run to completion).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_phase_limit, help_heading = LIMITS)]
    pub max_phases: Option<u64>,
    /// Per-attempt wall-clock limit in seconds (default: config timeout_seconds, 3600).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = parse_seconds, help_heading = LIMITS)]
    pub timeout: Option<f64>,
    /// Stop an attempt after this many seconds without a sign of life: output, a notification
    /// (NOTIFY_SOCKET) or visible work of its processes.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = parse_seconds, help_heading = LIMITS)]
    pub idle_timeout: Option<f64>,
    /// Stop the agent when its combined output matches this regex (repeatable).
    #[arg(long, value_name = "REGEX", help_heading = LIMITS)]
    pub stop_on_regex: Vec<String>,
    /// Suppress live agent output; transcripts and the final result line are unchanged.
    #[arg(short, long)]
    pub quiet: bool,
    /// Rerun the stopped phase, or resolve an abandoned attempt and rerun its phase.
    #[arg(long, help_heading = RECOVERY)]
    pub retry_stopped: bool,
    /// Accept a changed plan after checking that every completed phase id still exists.
    #[arg(long, help_heading = RECOVERY)]
    pub accept_plan_change: bool,
    /// Retry a failed attempt up to N times (config retry.max_attempts = N + 1; see retry.on).
    #[arg(long, value_name = "N", value_parser = parse_retries, help_heading = UNATTENDED)]
    pub retries: Option<u32>,
    /// Wait for a provider's rate-limit reset, then run the phase again (config rate_limit.max_waits, 3 if unset).
    #[arg(long, help_heading = UNATTENDED)]
    pub wait: bool,
    /// Stop once the plan's attempts (every run's) used N tokens, input (cached included) plus output (config budget.max_tokens).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_max_tokens, help_heading = LIMITS)]
    pub max_tokens: Option<u64>,
    /// Stop once the plan's attempts (every run's) cost USD dollars, as the agents report it (config budget.max_cost_usd).
    #[arg(long, value_name = "USD", allow_negative_numbers = true, value_parser = parse_max_cost, help_heading = LIMITS)]
    pub max_cost: Option<f64>,
    /// Print one JSON object with the result on stdout (live agent output goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also run COMMAND at EVENT (run-finished, phase-stopped, phase-complete, wait-started, wait-finished, interrupted); repeatable.
    #[arg(long = "hook", value_name = "EVENT=COMMAND", value_parser = parse_hook_flag, help_heading = UNATTENDED, add = ArgValueCandidates::new(completions::hook_events))]
    pub hooks: Vec<Hook>,
    /// Skip the phases' Verify checks for this run (recorded in the outcome as verification: skipped).
    #[arg(long, help_heading = VERIFICATION)]
    pub no_verify: bool,
    /// Limit on each Verify check in seconds (default: config verify_timeout_seconds, 600).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = parse_seconds, help_heading = VERIFICATION)]
    pub verify_timeout: Option<f64>,
    /// Do not record what each attempt changed in its git work tree (config record_changes).
    #[arg(long)]
    pub no_record_changes: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub plan: PlanArg,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub plan: PlanArg,
    /// Agent command template to validate instead of the config's agent_cmd.
    #[arg(long, value_name = "TEMPLATE")]
    pub agent_cmd: Option<String>,
    /// Check as `run --retries N` would: the effective retry policy has retry.max_attempts = N + 1.
    #[arg(long, value_name = "N", value_parser = parse_retries, help_heading = AS_RUN)]
    pub retries: Option<u32>,
    /// Check as `run --wait` would: rate-limit waits on (rate_limit.max_waits, 3 if unset).
    #[arg(long, help_heading = AS_RUN)]
    pub wait: bool,
    /// Check as `run --hook EVENT=COMMAND` would: list and validate this hook too (repeatable).
    #[arg(long = "hook", value_name = "EVENT=COMMAND", value_parser = parse_hook_flag, help_heading = AS_RUN, add = ArgValueCandidates::new(completions::hook_events))]
    pub hooks: Vec<Hook>,
    /// Check as `run --max-tokens N` would: the budget check shows.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_max_tokens, help_heading = AS_RUN)]
    pub max_tokens: Option<u64>,
    /// Check as `run --max-cost USD` would.
    #[arg(long, value_name = "USD", allow_negative_numbers = true, value_parser = parse_max_cost, help_heading = AS_RUN)]
    pub max_cost: Option<f64>,
    /// Print one JSON object instead of text.
    #[arg(long, conflicts_with = "prompt")]
    pub json: bool,
    // The help text is given as a string: rustdoc would read `<placeholders>` as an HTML tag.
    #[arg(
        long,
        help = "Print the prompt the next attempt would receive instead of the table (launch-time values as <placeholders>)"
    )]
    pub prompt: bool,
    /// With --prompt: the prompt this phase would receive if it ran next.
    #[arg(long, value_name = "ID", requires = "prompt", add = ArgValueCompleter::new(completions::phase_ids))]
    pub phase: Option<String>,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// Markdown plan path (relative to the current directory).
    #[arg(long, value_name = "PATH")]
    pub plan: PathBuf,
    /// The answer; `-` reads it from standard input.
    #[arg(value_name = "TEXT", conflicts_with = "file")]
    pub text: Option<String>,
    /// Read the answer from this file.
    #[arg(long, value_name = "F")]
    pub file: Option<PathBuf>,
    /// Put the answer at the end of the plan's preamble instead of the stopped phase's body.
    #[arg(long)]
    pub preamble: bool,
    /// Then continue the stopped run at once: its own options plus --retry-stopped
    /// --accept-plan-change.
    #[arg(long)]
    pub run: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub plan: PlanArg,
    /// text (for a terminal), markdown (for a pull request or an issue), html (one
    /// self-contained page) or json (docs/report.schema.json).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    pub format: super::report::Format,
    /// Write the report to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Only the attempts of this run (the `run_id` of events.jsonl).
    #[arg(long = "run", value_name = "RUN_ID")]
    pub run_id: Option<String>,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub plan: PlanArg,
    /// Pass the run's events through as JSON lines instead of describing them.
    #[arg(long)]
    pub json: bool,
    /// Keep watching after the run ends: follow each next run of the plan until interrupted.
    #[arg(long)]
    pub follow: bool,
}

/// The logging options: accepted by every command, listed under their own heading
/// ([`GLOBAL_HEADING`]).
#[derive(Debug, Args)]
pub struct LoggingArgs {
    /// Log level or filter directives (off, error, warn, info, debug, trace, or
    /// target=level); overrides RUST_LOG. Records carry run_id, the invocation (as in
    /// events.jsonl), and attempt_id, the attempt (the {run_id} of agent_cmd and the prompt);
    /// what agents report is under the target ai_session_handler::agent.
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        help_heading = GLOBAL_HEADING
    )]
    pub log_level: Option<String>,
    /// Append logs to this file instead of stderr (with the watchdog's record of what it
    /// stopped after a SIGKILLed handler).
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        help_heading = GLOBAL_HEADING
    )]
    pub log_file: Option<PathBuf>,
    /// Log line format.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "FORMAT",
        default_value_t = LogFormat::Text,
        help_heading = GLOBAL_HEADING
    )]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl RunArgs {
    /// The invocation as the command that continues it repeats it (`next:`): the plan as
    /// typed and every option but the recovery flags, values in their shortest exact form.
    pub fn invocation(&self) -> Invocation {
        let mut carried = Vec::new();
        let mut option = |name: &str, value: Option<String>| {
            carried.push(format!("--{name}"));
            carried.extend(value);
        };
        if let Some(template) = &self.agent_cmd {
            option("agent-cmd", Some(template.clone()));
        }
        if let Some(limit) = self.max_phases {
            option("max-phases", Some(limit.to_string()));
        }
        // `f64`'s `Display` is the shortest text that parses back to the same value.
        if let Some(seconds) = self.timeout {
            option("timeout", Some(seconds.to_string()));
        }
        if let Some(seconds) = self.idle_timeout {
            option("idle-timeout", Some(seconds.to_string()));
        }
        for pattern in &self.stop_on_regex {
            option("stop-on-regex", Some(pattern.clone()));
        }
        if let Some(retries) = self.retries {
            option("retries", Some(retries.to_string()));
        }
        // Where each cap's value sits, for a step that raises it.
        let mut cap_values = Vec::new();
        let caps = [
            (
                "--max-tokens",
                self.max_tokens.map(|tokens| tokens.to_string()),
            ),
            ("--max-cost", self.max_cost.map(|usd| usd.to_string())),
        ];
        for (flag, value) in caps {
            if let Some(value) = value {
                option(&flag[2..], Some(value));
                cap_values.push(flag);
            }
        }
        if self.wait {
            option("wait", None);
        }
        if self.quiet {
            option("quiet", None);
        }
        if self.json {
            option("json", None);
        }
        for hook in &self.hooks {
            for event in &hook.on {
                option(
                    "hook",
                    Some(format!("{}={}", event.as_str(), hook.command.raw())),
                );
            }
        }
        if self.no_verify {
            option("no-verify", None);
        }
        if let Some(seconds) = self.verify_timeout {
            option("verify-timeout", Some(seconds.to_string()));
        }
        if self.no_record_changes {
            option("no-record-changes", None);
        }
        Invocation {
            plan: self.plan.path().to_string_lossy().into_owned(),
            cap_values: cap_values
                .into_iter()
                .filter_map(|flag| {
                    let index = carried.iter().rposition(|word| word == flag)?;
                    Some((flag, index + 1))
                })
                .collect(),
            carried,
            flags: RecoveryFlags {
                retry_stopped: self.retry_stopped,
                accept_plan_change: self.accept_plan_change,
            },
            program: running_program(),
            cwd: std::env::current_dir()
                .map(|dir| dir.display().to_string())
                .unwrap_or_default(),
        }
    }
}

/// The running binary's absolute path, for a `next` step a caller runs from anywhere: as it was
/// invoked when that was a path (made absolute, a symbolic link such as `~/.cargo/bin/…` kept),
/// else where the kernel says the binary is.
pub(crate) fn running_program() -> String {
    let invoked = std::env::args_os().next().map(std::path::PathBuf::from);
    if let Some(path) = invoked.filter(|path| path.components().count() > 1)
        && let Ok(absolute) = std::path::absolute(&path)
    {
        return absolute.display().to_string();
    }
    std::env::current_exe().map_or_else(
        |_| crate::domain::recovery::PROGRAM.to_owned(),
        |path| path.display().to_string(),
    )
}

/// Whether the command line asks for `run --json`, read without clap: for a command line clap
/// rejects, so that the usage error reaches a `run --json` caller as the one JSON object it
/// reads (docs/cli.md). The command is the first word that is neither an option nor the value
/// of a global option; `--json` may appear anywhere after it, before a `--`.
pub(super) fn run_json_requested(args: impl IntoIterator<Item = OsString>) -> bool {
    const GLOBAL_WITH_VALUE: [&str; 4] = ["--color", "--log-level", "--log-file", "--log-format"];
    let mut args = args.into_iter().skip(1);
    let mut command = None;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if GLOBAL_WITH_VALUE.contains(&text.as_ref()) {
            args.next();
        } else if !text.starts_with('-') {
            command = Some(arg);
            break;
        }
    }
    // `--json=yes` is a usage error too, but its caller plainly wants the object.
    command.as_deref() == Some(OsStr::new("run"))
        && args
            .take_while(|arg| arg != "--")
            .any(|arg| arg == "--json" || arg.as_encoded_bytes().starts_with(b"--json="))
}

/// `--color`'s value read without clap, for the output of the parse itself (`--help`, a usage
/// error): the last `--color WHEN` or `--color=WHEN` before a `--`, if it names a choice.
pub(super) fn color_requested(args: &[OsString]) -> Option<ColorChoice> {
    let mut requested = None;
    let mut args = args.iter().skip(1).take_while(|arg| *arg != "--");
    while let Some(arg) = args.next() {
        let value = match arg.to_str() {
            Some("--color") => args.next().and_then(|value| value.to_str()),
            Some(text) => text.strip_prefix("--color="),
            None => None,
        };
        if let Some(choice) = value.and_then(|value| ColorChoice::from_str(value, false).ok()) {
            requested = Some(choice);
        }
    }
    requested
}

/// `--max-phases`: a positive integer.
fn parse_phase_limit(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(limit) if limit >= 1 => Ok(limit),
        _ => Err(format!("expected a positive integer, got '{text}'")),
    }
}

/// The most `--retries`: one attempt more must still be counted (`retry.max_attempts` is
/// 32-bit).
const MAX_RETRIES: u32 = u32::MAX - 1;

/// `--retries`: a whole number from 0 to [`MAX_RETRIES`].
fn parse_retries(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(retries) if retries <= MAX_RETRIES => Ok(retries),
        _ => Err(format!(
            "expected a whole number from 0 to {MAX_RETRIES}, got '{text}'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requested(args: &[&str]) -> bool {
        run_json_requested(
            std::iter::once("ai-session-handler")
                .chain(args.iter().copied())
                .map(OsString::from),
        )
    }

    #[test]
    fn retries_are_whole_numbers_up_to_one_less_than_the_attempt_counter() {
        assert_eq!(parse_retries("0").unwrap(), 0);
        assert_eq!(parse_retries(" 4294967294 ").unwrap(), 4_294_967_294);
        for bad in ["4294967295", "4294967296", "-1", "1.5", "x", ""] {
            assert_eq!(
                parse_retries(bad).unwrap_err().to_string(),
                format!("expected a whole number from 0 to 4294967294, got '{bad}'")
            );
        }
    }

    #[test]
    fn color_is_read_before_the_command_line_is_parsed() {
        let color = |args: &[&str]| {
            let words: Vec<OsString> = std::iter::once("ai-session-handler")
                .chain(args.iter().copied())
                .map(OsString::from)
                .collect();
            color_requested(&words)
        };
        assert_eq!(
            color(&["--color", "never", "--help"]),
            Some(ColorChoice::Never)
        );
        assert_eq!(
            color(&["run", "--help", "--color=always"]),
            Some(ColorChoice::Always)
        );
        assert_eq!(color(&["--color", "sometimes", "run"]), None);
        assert_eq!(color(&["run", "--", "--color", "never"]), None);
        assert_eq!(color(&["run", "--help"]), None);
    }

    #[test]
    fn run_json_is_recognised_in_a_command_line_clap_rejects() {
        assert!(requested(&["run", "--json", "--max-phases", "0"]));
        assert!(requested(&["run", "--plan", "p.md", "--bogus", "--json"]));
        assert!(requested(&["--log-level", "inof", "run", "--json"]));
        assert!(requested(&["--log-file=x.log", "run", "--json"]));
        assert!(requested(&["--color", "never", "run", "p.md", "--json"]));
        assert!(requested(&[
            "--log-format",
            "json",
            "run",
            "--plann",
            "p",
            "--json"
        ]));
        assert!(requested(&["run", "--json=yes", "--plan", "p.md"]));
        assert!(!requested(&["run", "--plan", "p.md"]));
        assert!(!requested(&["run", "--jsonx"]));
        assert!(!requested(&["status", "--json"]));
        assert!(!requested(&["check", "--json", "run"]));
        assert!(!requested(&["--log-file", "run", "status", "--json"]));
        assert!(!requested(&["run", "--", "--json"]));
        assert!(!requested(&[]));
    }
}
