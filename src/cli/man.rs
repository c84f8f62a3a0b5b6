//! `man [COMMAND]`: the manual page, generated from the clap definition the parser uses:
//! clap_mangen's sections with our own after them ([`extra_sections`]). On a terminal the page
//! is paged by `man -l -`, else the `--help` text and the same sections go to `$MANPAGER`,
//! `$PAGER` or `less`; anywhere else the roff is printed (docs/cli.md, "`man`").

use std::io::{IsTerminal, Write};

use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use super::args::ManArgs;
use super::help::{self, ExitRow};
use crate::domain::exit_code::ExitCode;
use crate::platform::pager::show_through;
use crate::report::Output;

/// The programs tried, in order, to page the text rendering when `man` is missing.
const PAGER_VARIABLES: [&str; 2] = ["MANPAGER", "PAGER"];
const FALLBACK_PAGER: &str = "less";

pub(super) fn run(args: &ManArgs) -> ExitCode {
    let mut root = help::command_unwrapped().disable_help_subcommand(true);
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
    let topic = args.command.as_deref();
    let written = if std::io::stdout().is_terminal() {
        show_paged(&command, topic)
    } else {
        render(command.clone(), topic).and_then(|page| write_stdout(&page))
    };
    match written {
        Ok(()) => ExitCode::Success,
        Err(error) => {
            Output::error(format!("cannot write the manual page: {error}")).print();
            ExitCode::InvalidInput
        }
    }
}

/// The page in roff.
fn render(command: clap::Command, topic: Option<&str>) -> std::io::Result<Vec<u8>> {
    // Every page names the package and version (clap_mangen would give a command's page
    // only the command's own name).
    let source = concat!("ai-session-handler ", env!("CARGO_PKG_VERSION"));
    let has_commands = command.get_subcommands().next().is_some();
    let has_version = command.get_version().is_some();
    let man = Man::new(command).source(source);
    let sections = extra_sections(topic);
    let mut page = Vec::new();
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    // More DESCRIPTION: paragraphs without a heading of their own continue clap's section.
    for section in sections.iter().filter(|section| section.title.is_none()) {
        section.roff().to_writer(&mut page)?;
    }
    man.render_options_section(&mut page)?;
    if has_commands {
        man.render_subcommands_section(&mut page)?;
    }
    for section in sections.iter().filter(|section| section.title.is_some()) {
        section.roff().to_writer(&mut page)?;
    }
    if has_version {
        man.render_version_section(&mut page)?;
    }
    Ok(page)
}

fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Formats and pages the page with `man -l -`; where `man` cannot be started, pages its text
/// rendering; where no pager can be started either, prints that text.
fn show_paged(command: &clap::Command, topic: Option<&str>) -> std::io::Result<()> {
    let page = render(command.clone(), topic)?;
    if show_through("man", &["-l".to_owned(), "-".to_owned()], &page)? {
        return Ok(());
    }
    let text = text_page(command, topic);
    for pager in pagers() {
        if let Some((program, args)) = pager.split_first()
            && show_through(program, args, text.as_bytes())?
        {
            return Ok(());
        }
    }
    write_stdout(text.as_bytes())
}

/// The pagers to try for the text rendering: `$MANPAGER`, `$PAGER` (each split like a shell
/// would), then `less`.
fn pagers() -> Vec<Vec<String>> {
    PAGER_VARIABLES
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .filter_map(|value| shell_words::split(&value).ok())
        .filter(|words| !words.is_empty())
        .chain(std::iter::once(vec![FALLBACK_PAGER.to_owned()]))
        .collect()
}

/// The page as text, for a pager without `man`: the command's `--help`, then the extra
/// sections.
fn text_page(command: &clap::Command, topic: Option<&str>) -> String {
    let mut text = command.clone().render_long_help().to_string();
    for section in extra_sections(topic) {
        // The EXIT STATUS and EXAMPLES of the main page and `run` are in their help already.
        if matches!(section.title, Some("EXIT STATUS" | "EXAMPLES"))
            && help::man_sections(topic).is_some()
        {
            continue;
        }
        text.push('\n');
        text.push_str(&section.text());
    }
    text
}

/// One block of a section's text.
enum Block {
    Paragraph(String),
    /// A term (set in bold) and what it means.
    Item(String, String),
    /// Lines shown as they are (a plan, the result tags).
    Literal(Vec<&'static str>),
}

/// A section of our own; without a title it continues DESCRIPTION.
struct Section {
    title: Option<&'static str>,
    blocks: Vec<Block>,
}

impl Section {
    fn new(title: &'static str, blocks: Vec<Block>) -> Self {
        Self {
            title: Some(title),
            blocks,
        }
    }

    fn roff(&self) -> Roff {
        let mut roff = Roff::default();
        if let Some(title) = self.title {
            roff.control("SH", [title]);
        }
        for block in &self.blocks {
            match block {
                Block::Paragraph(text) => {
                    roff.control("PP", []);
                    roff.text([roman(text.as_str())]);
                }
                Block::Item(term, meaning) => {
                    roff.control("TP", []);
                    roff.text([bold(term.as_str())]);
                    roff.text([roman(meaning.as_str())]);
                }
                Block::Literal(lines) => {
                    roff.control("PP", []);
                    roff.control("RS", ["4"]);
                    roff.control("nf", []);
                    for line in lines {
                        roff.text([roman(*line)]);
                    }
                    roff.control("fi", []);
                    roff.control("RE", []);
                }
            }
        }
        roff
    }

    fn text(&self) -> String {
        let mut text = self
            .title
            .map_or_else(String::new, |title| format!("{title}\n"));
        for block in &self.blocks {
            match block {
                Block::Paragraph(paragraph) => text.push_str(&format!("  {paragraph}\n\n")),
                Block::Item(term, meaning) => {
                    text.push_str(&format!("  {term}\n      {meaning}\n\n"));
                }
                Block::Literal(lines) => {
                    for line in lines {
                        text.push_str(&format!("      {line}\n"));
                    }
                    text.push('\n');
                }
            }
        }
        text
    }
}

fn paragraph(text: &str) -> Block {
    Block::Paragraph(text.to_owned())
}

fn item(term: &str, meaning: &str) -> Block {
    Block::Item(term.to_owned(), meaning.to_owned())
}

/// The commands with a page of their own (all but `help`), for SEE ALSO.
fn commands() -> Vec<String> {
    help::command()
        .get_subcommands()
        .map(|command| command.get_name().to_owned())
        .filter(|name| name != "help")
        .collect()
}

/// Our sections of the page of `topic` (the main page for `None`), in page order.
fn extra_sections(topic: Option<&str>) -> Vec<Section> {
    let mut sections = Vec::new();
    if topic.is_none() {
        sections.push(Section {
            title: None,
            blocks: main_description(),
        });
        sections.push(Section::new("PLAN FORMAT", plan_format()));
        sections.push(Section::new("RESULT BLOCK", result_block()));
    }
    let (exit_status, examples) = help::man_sections(topic).unwrap_or_else(|| {
        let rows = exit_status_of(topic.unwrap_or_default());
        (rows, Vec::new())
    });
    let exit_blocks = exit_status.iter().map(|row| item(&row.code, row.meaning));
    sections.push(Section::new("EXIT STATUS", exit_blocks.collect()));
    if !examples.is_empty() {
        let blocks = examples
            .iter()
            .map(|example| item(example.what, example.command));
        sections.push(Section::new("EXAMPLES", blocks.collect()));
    }
    if topic.is_none() {
        sections.push(Section::new("ENVIRONMENT", environment()));
    }
    if matches!(topic, None | Some("run" | "status" | "init" | "watch")) {
        sections.push(Section::new("FILES", files()));
    }
    sections.push(Section::new("SEE ALSO", see_also(topic)));
    sections
}

fn main_description() -> Vec<Block> {
    vec![
        paragraph(
            "A plan lives in a plan workspace: the nearest directory above the plan that holds .ai-session-handler, .git or AGENTS.md. The configuration and the generated state of each plan are kept in .ai-session-handler/ there (FILES); init creates it.",
        ),
        paragraph(
            "For each remaining phase, run writes the prompt, starts the agent command (config agent_cmd or --agent-cmd) in a process group of its own with the prompt on stdin, streams its output live and into a transcript, and records the outcome in the plan's state. A completed phase moves the run on; any other result stops it with an exit status that says why (EXIT STATUS) and a last line, next:, with the command that continues.",
        ),
        paragraph(
            "The commands that work on a plan take it as --plan PATH or as the path alone: ai-session-handler status docs/plans/feature.md.",
        ),
    ]
}

fn plan_format() -> Vec<Block> {
    vec![
        paragraph(
            "A plan is a UTF-8 Markdown file of numbered phases. The text before the first phase heading is the preamble, copied into every prompt; each phase's text is copied into its own.",
        ),
        item(
            "## Phase N: Title",
            "A heading of any level whose text is exactly Phase N: Title starts a phase. N is a positive integer, the numbers strictly increase, and the phase id is phase-N. Headings inside fenced code blocks are examples, not structure.",
        ),
        item(
            "### Workspace",
            "Exactly one per phase, holding one relative path: the phase's execution workspace, resolved against the plan workspace. It must exist and contain AGENTS.md; the agent runs there.",
        ),
        item(
            "### Verify",
            "Optional. Each fenced block in it is a check (/bin/sh -e, or the interpreter its info string names), run in order in the execution workspace after the agent reports phase-complete; the first failing check makes the attempt verification-failed.",
        ),
        Block::Literal(vec![
            "# Feature rollout",
            "",
            "Plan-wide intent and constraints.",
            "",
            "## Phase 1: Parse plans",
            "",
            "### Workspace",
            "",
            ".",
            "",
            "### Goal",
            "",
            "...",
        ]),
        paragraph(
            "check reports every error of a plan it can find, each with its line; run stops at the first.",
        ),
    ]
}

fn result_block() -> Vec<Block> {
    vec![
        paragraph(
            "The agent ends its output with exactly one result block, on stdout or on stderr:",
        ),
        Block::Literal(vec![
            "<phase-complete>what changed, how it was validated</phase-complete>",
            "<phase-blocked>the external action needed</phase-blocked>",
            "<phase-needs-clarification>the question</phase-needs-clarification>",
        ]),
        paragraph(
            "The opening tag starts a line (nothing before it, not inside a fenced code block); the body, trimmed, is not empty and may span lines; the closing tag of the same kind is followed by nothing but whitespace to the end of that stream; no other result tag appears on either stream. The block is hidden from the live output and kept in the transcript.",
        ),
        item("missing-marker", "no result tag on either stream"),
        item(
            "invalid-marker",
            "a block that is inline, fenced, unclosed, empty, closed by another kind or followed by text, or a malformed tag",
        ),
        item(
            "multiple-markers",
            "two blocks, a block inside another, or results on both streams",
        ),
        paragraph(
            "A result counts only after the agent exited 0 and was not stopped (timeout, idle timeout, stop regex, budget cap, signal); a nonzero exit is agent-failed, 75 rate-limited.",
        ),
    ]
}

/// The exit codes of the commands without a section in [`help::man_sections`].
fn exit_status_of(command: &str) -> Vec<ExitRow> {
    let code = |exit: ExitCode| exit.code().to_string();
    let ok = |meaning| ExitRow {
        code: code(ExitCode::Success),
        meaning,
    };
    let invalid = ExitRow {
        code: code(ExitCode::InvalidInput),
        meaning: "invalid input or a usage error",
    };
    match command {
        "check" => vec![
            ok("everything run would validate is valid (notes may say what run will require)"),
            ExitRow {
                meaning: "invalid input, or a refusal run would make (a changed or moved plan)",
                ..invalid
            },
        ],
        "watch" => vec![
            ok("the followed run finished (its own exit code is on the run finished line)"),
            ExitRow {
                code: code(ExitCode::AgentFailed),
                meaning: "the run's handler ended without finishing the run",
            },
            invalid,
            ExitRow {
                code: code(ExitCode::Signal(nix::libc::SIGPIPE)),
                meaning: "stdout was closed",
            },
        ],
        _ => vec![ok("success"), invalid],
    }
}

fn environment() -> Vec<Block> {
    vec![
        item(
            "NO_COLOR",
            "When set (to anything), no colour, unless --color always. CLICOLOR=0 turns colour off too, CLICOLOR_FORCE=1 on where it would be off.",
        ),
        item(
            "TERM",
            "dumb: no colour, and no line redrawn in place (run --quiet's status line, the sign of life); the terminal gets what a log gets.",
        ),
        item(
            "COLUMNS",
            "The width --help is wrapped to when stdout is not a terminal (at most 100).",
        ),
        item(
            "MANPAGER, PAGER",
            "The pager man uses on a terminal (through man -l -; less when neither is set).",
        ),
        item(
            "RUST_LOG",
            "Log filter directives when --log-level is not given.",
        ),
        item(
            "PATH",
            "Where a bare agent program, hook program or Verify interpreter is looked up, before anything is written.",
        ),
        item(
            "NOTIFY_SOCKET",
            "Set for each agent: the socket it may send STATUS=, WATCHDOG=1, EXTEND_TIMEOUT_USEC= and X_AISH_USAGE= to (docs/worker-protocol.md).",
        ),
        item(
            "AISH_PLAN, AISH_PLAN_WORKSPACE, AISH_STATE_FILE, AISH_RUN_ID, AISH_ATTEMPT_ID, AISH_PHASE_ID, AISH_PHASE_TITLE, AISH_WORKSPACE",
            "Set for each agent and each hook: where it stands in the run (docs/worker-protocol.md). A hook also gets AISH_EVENT, AISH_STATUS and AISH_EXIT_CODE.",
        ),
        item(
            "AI_SESSION_HANDLER_COMPLETE",
            "Set by the completion script (completions) when it asks the binary for candidates.",
        ),
    ]
}

fn files() -> Vec<Block> {
    vec![
        item(
            ".ai-session-handler/config.json",
            "In the plan workspace: the optional config (agent_cmd, timeouts, retry, rate_limit, hooks, budget). Keep it in version control.",
        ),
        item(
            ".ai-session-handler/.gitignore",
            "Written by init: keeps plans/ out of version control.",
        ),
        item(
            ".ai-session-handler/plans/<plan-key>/",
            "Generated state of one plan (the key is the SHA-256 of its workspace-relative path): state.json, events.jsonl (the event stream watch reads), hooks.log, and prompts/, transcripts/ and outcomes/ with one file per attempt. Never plan files.",
        ),
    ]
}

fn see_also(topic: Option<&str>) -> Vec<Block> {
    let pages: Vec<String> = std::iter::once("ai-session-handler".to_owned())
        .chain(
            commands()
                .iter()
                .map(|command| format!("ai-session-handler-{command}")),
        )
        .filter(|page| {
            let this = topic.map_or_else(
                || "ai-session-handler".to_owned(),
                |topic| format!("ai-session-handler-{topic}"),
            );
            *page != this
        })
        .map(|page| format!("{page}(1)"))
        .collect();
    vec![
        paragraph(&pages.join(", ")),
        paragraph(
            "docs/cli.md, docs/plan-format.md and docs/worker-protocol.md in the source repository; the provider wrappers ai-session-handler-claude-high, ai-session-handler-claude-medium and ai-session-handler-codex-high (--help).",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn see_also_names_every_other_command() {
        let Some(Block::Paragraph(pages)) = see_also(Some("run")).into_iter().next() else {
            panic!("SEE ALSO starts with the list of pages");
        };
        assert_eq!(
            pages,
            "ai-session-handler(1), ai-session-handler-status(1), ai-session-handler-check(1), \
             ai-session-handler-init(1), ai-session-handler-answer(1), \
             ai-session-handler-report(1), ai-session-handler-watch(1), \
             ai-session-handler-completions(1), ai-session-handler-man(1)"
        );
    }

    #[test]
    fn every_page_has_exit_status_and_see_also() {
        for topic in
            std::iter::once(None).chain(commands().iter().map(|command| Some(command.as_str())))
        {
            let titles: Vec<&str> = extra_sections(topic)
                .iter()
                .filter_map(|section| section.title)
                .collect();
            assert!(titles.contains(&"EXIT STATUS"), "{topic:?}: {titles:?}");
            assert_eq!(titles.last(), Some(&"SEE ALSO"), "{topic:?}");
        }
        let main: Vec<&str> = extra_sections(None)
            .iter()
            .filter_map(|section| section.title)
            .collect();
        assert_eq!(
            main,
            [
                "PLAN FORMAT",
                "RESULT BLOCK",
                "EXIT STATUS",
                "EXAMPLES",
                "ENVIRONMENT",
                "FILES",
                "SEE ALSO"
            ]
        );
    }

    #[test]
    fn the_text_page_has_the_sections_too() {
        let root = help::command_unwrapped();
        let text = text_page(&root, None);
        assert!(text.contains("\nPLAN FORMAT\n"), "{text}");
        assert!(text.contains("\nENVIRONMENT\n"), "{text}");
        assert_eq!(text.matches("Exit status:").count(), 1, "{text}");
        assert!(!text.contains("\nEXIT STATUS\n"), "{text}");
    }
}
