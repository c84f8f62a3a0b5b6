//! Terminal conventions, as a person at a terminal meets them (docs/cli.md): colour only on a
//! terminal and only when neither `NO_COLOR`, `TERM=dumb` nor `--color never` forbids it (and
//! `--color always` anywhere); a dumb terminal gets no redrawn line; `--help` fits 80 columns
//! with its options under headings; `man` is paged on a terminal and roff elsewhere; the plan
//! may be given without `--plan`, `-q` is `--quiet`; a mistyped command gets a "did you mean".
//! Terminal cases run under a pseudo-terminal (util-linux `script`).

use std::fs;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;

const PLAN: &str = "plan.md";
const COMPLETE: &str = "echo '<phase-complete>done</phase-complete>'\n";

/// What `shell_command` draws on a pseudo-terminal (stdout and stderr together, `\r\n` as
/// `\n`) and its exit code. The environment is a colour terminal's unless `env` says
/// otherwise: `TERM=xterm`, no `NO_COLOR`, `CLICOLOR` or `CLICOLOR_FORCE`.
fn on_terminal(sandbox: &Sandbox, shell_command: &str, env: &[(&str, &str)]) -> (i32, String) {
    let mut terminal = Command::new("script");
    terminal
        .args(["-qefc", shell_command, "/dev/null"])
        .current_dir(&sandbox.root)
        .env("ASH_TEST_TOKEN", &sandbox.token)
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    for (key, value) in env {
        terminal.env(key, value);
    }
    let output = terminal.output().expect("run script");
    let screen = String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n");
    (output.status.code().unwrap_or(-1), screen)
}

/// The handler's command line for [`on_terminal`].
fn handler(args: &str) -> String {
    format!("{BIN} {args}")
}

const RED_ERROR: &str = "\x1b[1m\x1b[31merror:\x1b[0m";
const YELLOW_WARNING: &str = "\x1b[1m\x1b[33mwarning:\x1b[0m";

/// A plan `check` warns about (a near-miss heading) and an agent it refuses (not installed).
fn warned_and_refused(sandbox: &Sandbox) -> String {
    sandbox.write(
        PLAN,
        format!("{}##  Phase 2: almost\n", plan_with_phases(1)),
    );
    handler(&format!(
        "check {PLAN} --agent-cmd no-such-agent-program-anywhere"
    ))
}

#[test]
fn errors_and_warnings_are_coloured_on_a_terminal_unless_something_forbids_it() {
    let sandbox = Sandbox::new();
    let check = warned_and_refused(&sandbox);

    let (code, screen) = on_terminal(&sandbox, &check, &[]);
    assert_eq!(code, 5, "{screen}");
    assert!(
        screen.contains(&format!("{RED_ERROR} --agent-cmd: agent program")),
        "{screen:?}"
    );
    assert!(screen.contains(&format!("{YELLOW_WARNING} ")), "{screen:?}");

    // Each of these turns colour off; nothing else changes.
    let plain = |screen: &str| {
        assert!(
            !screen.contains('\x1b'),
            "colour where none was asked for: {screen:?}"
        );
        assert!(
            screen.contains("error: --agent-cmd: agent program"),
            "{screen:?}"
        );
        assert!(
            screen.contains("\nwarning: ") || screen.starts_with("warning: "),
            "{screen:?}"
        );
    };
    for env in [[("NO_COLOR", "1")], [("TERM", "dumb")], [("CLICOLOR", "0")]] {
        let (code, screen) = on_terminal(&sandbox, &check, &env);
        assert_eq!(code, 5, "{env:?}: {screen}");
        plain(&screen);
    }
    let (_, screen) = on_terminal(&sandbox, &format!("{check} --color never"), &[]);
    plain(&screen);
    // The flag wins over the environment.
    let (_, screen) = on_terminal(
        &sandbox,
        &format!("{check} --color=always"),
        &[("NO_COLOR", "1")],
    );
    assert!(screen.contains(RED_ERROR), "{screen:?}");

    // Not a terminal: no colour unless asked for.
    let args = [
        "check",
        PLAN,
        "--agent-cmd",
        "no-such-agent-program-anywhere",
    ];
    let piped = sandbox.run(&args);
    piped.assert_code(5);
    assert!(!piped.raw_stderr.contains('\x1b'), "{:?}", piped.raw_stderr);
    let forced = sandbox.run(&[&["--color", "always"], &args[..]].concat());
    forced.assert_code(5);
    assert!(
        forced.raw_stderr.contains(RED_ERROR),
        "{:?}",
        forced.raw_stderr
    );
    assert!(
        forced.raw_stderr.contains(YELLOW_WARNING),
        "{:?}",
        forced.raw_stderr
    );
}

/// The usage error of a mistyped flag is coloured like any error, and stays one line.
#[test]
fn a_usage_error_on_a_terminal_is_one_coloured_line_with_exit_5() {
    let sandbox = Sandbox::new();
    let (code, screen) = on_terminal(&sandbox, &handler("status --plann x.md"), &[]);
    assert_eq!(code, 5, "{screen}");
    assert_eq!(screen.lines().count(), 1, "{screen:?}");
    assert!(screen.starts_with(RED_ERROR), "{screen:?}");
    let (code, screen) = on_terminal(&sandbox, &handler("--color never status --plann x.md"), &[]);
    assert_eq!(code, 5, "{screen}");
    assert!(
        screen.starts_with("error: unexpected argument '--plann'"),
        "{screen:?}"
    );
}

/// A phase's end line is coloured by how the phase ended, as nextest colours a test's: green
/// for a completion, yellow for a stop that waits for a person, red for a failure.
#[test]
fn a_phase_end_line_is_coloured_by_how_the_phase_ended() {
    let cases = [
        (COMPLETE, 0, "\x1b[32mphase-1 complete in "),
        (
            "echo '<phase-blocked>need a key</phase-blocked>'\n",
            2,
            "\x1b[33mphase-1 blocked in ",
        ),
        ("exit 1\n", 4, "\x1b[31mphase-1 agent-failed in "),
    ];
    for (body, expected_code, coloured) in cases {
        for no_color in [false, true] {
            let sandbox = Sandbox::new();
            sandbox.write(PLAN, plan_with_phases(1));
            let agent = agent(&sandbox, body);
            let run = handler(&format!("run {PLAN} --agent-cmd {}", agent.display()));
            let env: &[(&str, &str)] = if no_color { &[("NO_COLOR", "1")] } else { &[] };
            let (code, screen) = on_terminal(&sandbox, &run, env);
            assert_eq!(code, expected_code, "{screen}");
            if no_color {
                assert!(!screen.contains('\x1b'), "{screen:?}");
                assert!(screen.contains("phase-1 "), "{screen:?}");
            } else {
                assert!(
                    screen.contains(coloured),
                    "{coloured:?} missing:\n{screen:?}"
                );
            }
            sandbox.assert_no_survivors();
        }
    }
}

/// `TERM=dumb` cannot redraw a line: `--quiet` on it shows no status line and no escape
/// sequence at all, as when stderr is not a terminal.
#[test]
fn a_dumb_terminal_gets_no_status_line() {
    // The control first: a colour terminal draws the status line and erases it.
    for (term, drawn) in [("xterm", true), ("dumb", false)] {
        let sandbox = Sandbox::new();
        sandbox.write(PLAN, plan_with_phases(1));
        let agent = agent(
            &sandbox,
            &format!("for i in 1 2 3 4; do echo \"step $i\"; sleep 0.3; done\n{COMPLETE}"),
        );
        let run = handler(&format!("run {PLAN} --agent-cmd {} -q", agent.display()));
        let (code, screen) = on_terminal(&sandbox, &run, &[("TERM", term)]);
        assert_eq!(code, 0, "{screen}");
        if drawn {
            assert!(screen.contains("phase-1 (1/1) "), "{screen:?}");
            assert!(screen.contains("\x1b[2K"), "{screen:?}");
        } else {
            assert_eq!(screen, "runner-complete: all phases complete\n");
        }
        sandbox.assert_no_survivors();
    }
}

/// `text` without SGR sequences (clap styles `--help` on a terminal) and overstrikes (a
/// formatter's bold and underline).
fn without_styles(text: &str) -> String {
    regex::Regex::new("\x1b\\[[0-9;]*m|.\x08")
        .unwrap()
        .replace_all(text, "")
        .into_owned()
}

#[track_caller]
fn assert_fits(text: &str, columns: usize, what: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= columns,
            "{what}: a line of {} columns, more than {columns}: {line:?}\n{text}",
            line.chars().count()
        );
    }
}

const COMMANDS: [&str; 8] = [
    "",
    "run",
    "status",
    "check",
    "init",
    "watch",
    "completions",
    "man",
];

/// Every `--help` fits 80 columns (`COLUMNS=80`, and a terminal of 80 columns), its usage
/// wrapped; `run`'s options are grouped under headings, as cargo groups its own.
#[test]
fn help_fits_80_columns_with_the_options_under_headings() {
    let sandbox = Sandbox::new();
    for command in COMMANDS {
        let args: Vec<&str> = [command, "--help"]
            .into_iter()
            .filter(|arg| !arg.is_empty())
            .collect();
        let output = sandbox
            .command()
            .args(&args)
            .env("COLUMNS", "80")
            .output()
            .expect("run handler");
        assert!(output.status.success(), "{args:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        assert_fits(&help, 80, &format!("{args:?}"));
    }
    let output = sandbox
        .command()
        .args(["run", "--help"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    let usage: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Usage: "))
        .take_while(|line| !line.is_empty())
        .collect();
    assert!(usage.len() > 3, "the usage is not wrapped:\n{help}");
    assert!(
        usage[0]
            .starts_with("Usage: ai-session-handler run --plan <PATH> [--agent-cmd <TEMPLATE>]"),
        "{help}"
    );
    assert_eq!(
        usage.last(),
        Some(&"       ai-session-handler run <PLAN> [OPTIONS]")
    );
    let headings: Vec<&str> = help
        .lines()
        .filter(|line| line.ends_with(':') && !line.starts_with(' '))
        .collect();
    assert_eq!(
        headings,
        [
            "Arguments:",
            "Options:",
            "Limits:",
            "Recovery:",
            "Unattended runs:",
            "Verification:",
            "Global options:",
            "Exit status:",
            "Examples:"
        ],
        "{help}"
    );
    let limits = &help[help.find("\nLimits:\n").unwrap()..help.find("\nRecovery:\n").unwrap()];
    for flag in [
        "--max-phases",
        "--timeout",
        "--idle-timeout",
        "--max-tokens",
        "--max-cost",
    ] {
        assert!(limits.contains(flag), "{flag} not under Limits:\n{help}");
    }

    // On a terminal the help follows its width: 80 columns, and no more than 100 on a wide one.
    for (columns, limit) in [(80, 80), (150, 100)] {
        let (code, screen) = on_terminal(
            &sandbox,
            &format!("stty cols {columns} rows 40; {BIN} run --help"),
            &[("COLUMNS", "")],
        );
        assert_eq!(code, 0, "{screen}");
        let screen = without_styles(&screen);
        assert!(screen.contains("\nLimits:\n"), "{screen}");
        assert_fits(&screen, limit, &format!("a terminal of {columns} columns"));
    }
}

/// On a terminal `man` shows the page formatted in a pager (`man -l -` with `MANPAGER`, or
/// the page's text in `PAGER` where `man` is missing); piped, it prints roff with every section.
#[test]
fn man_pages_on_a_terminal_and_prints_roff_with_every_section_elsewhere() {
    let sandbox = Sandbox::new();
    let (code, screen) = on_terminal(
        &sandbox,
        &handler("man"),
        &[("MANPAGER", "cat"), ("PAGER", "cat")],
    );
    assert_eq!(code, 0, "{screen}");
    let screen = without_styles(&screen);
    for heading in [
        "PLAN FORMAT",
        "RESULT BLOCK",
        "ENVIRONMENT",
        "FILES",
        "SEE ALSO",
    ] {
        assert!(screen.contains(heading), "{heading} not shown:\n{screen}");
    }
    assert!(
        !screen.contains(".SH") && !screen.contains(".TH"),
        "roff on a terminal:\n{screen}"
    );

    // Without `man`: the text of the page in PAGER, else on the terminal as it is.
    let nothing = sandbox.path("empty-path");
    fs::create_dir_all(&nothing).unwrap();
    let without_man = format!("env PATH={} {BIN} man run", nothing.display());
    for pager in ["/bin/cat", "no-such-pager"] {
        let (code, screen) = on_terminal(
            &sandbox,
            &without_man,
            &[("MANPAGER", ""), ("PAGER", pager)],
        );
        assert_eq!(code, 0, "{pager}: {screen}");
        let screen = without_styles(&screen);
        assert!(
            screen.contains("Usage: ai-session-handler run --plan <PATH>"),
            "{pager}: {screen}"
        );
        assert!(
            screen.contains("Exit status:") && screen.contains("SEE ALSO"),
            "{pager}: {screen}"
        );
        assert!(!screen.contains(".SH"), "{pager}: {screen}");
    }

    let main = sandbox.run(&["man"]);
    main.assert_code(0);
    for section in [
        "\n.SH DESCRIPTION\n",
        "\n.SH \"PLAN FORMAT\"\n",
        "\n.SH \"RESULT BLOCK\"\n",
        "\n.SH \"EXIT STATUS\"\n",
        "\n.SH ENVIRONMENT\n",
        "\n.SH FILES\n",
        "\n.SH \"SEE ALSO\"\n",
    ] {
        assert!(
            main.stdout.contains(section),
            "{section:?} missing:\n{}",
            main.stdout
        );
    }
    assert!(
        main.stdout.contains("<phase\\-needs\\-clarification>"),
        "{}",
        main.stdout
    );
    for command in ["status", "check", "init", "watch", "completions", "man"] {
        let page = sandbox.run(&["man", command]);
        page.assert_code(0);
        for section in ["\n.SH \"EXIT STATUS\"\n", "\n.SH \"SEE ALSO\"\n"] {
            assert!(
                page.stdout.contains(section),
                "{command}: {section:?} missing"
            );
        }
    }
}

/// `status docs/plans/x.md` means `status --plan docs/plans/x.md`, for every command that takes
/// a plan; `-q` means `--quiet`; `run --json`'s usage errors still print its object.
#[test]
fn the_plan_may_be_given_alone_and_q_means_quiet() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(2));
    let agent = agent(&sandbox, COMPLETE);
    let agent = agent.to_str().unwrap();
    let spellings = [
        (vec!["status", "--plan", PLAN], vec!["status", PLAN]),
        (
            vec!["check", "--plan", PLAN, "--agent-cmd", agent],
            vec!["check", PLAN, "--agent-cmd", agent],
        ),
    ];
    for (flagged, alone) in spellings {
        let flagged = sandbox.run(&flagged);
        let alone = sandbox.run(&alone);
        flagged.assert_code(0);
        alone.assert_code(0);
        assert_eq!(alone.stdout, flagged.stdout);
    }
    let run = sandbox.run(&["run", PLAN, "--agent-cmd", agent, "-q", "--max-phases", "1"]);
    run.assert_code(0);
    assert_eq!(run.stdout, "phase-complete: phase-1\n");
    // No banner, no end line: quiet; and the command that continues spells it out.
    assert_eq!(
        run.raw_stderr,
        format!(
            "next: ai-session-handler run --plan {PLAN} --agent-cmd {agent} --max-phases 1 --quiet\n"
        )
    );
    let json = sandbox.run(&["run", PLAN, "--agent-cmd", agent, "--json", "-q"]);
    json.assert_code(0);
    let object: Value = serde_json::from_str(&json.stdout).expect("one JSON object");
    assert_eq!(object["phases_completed"], serde_json::json!(["phase-2"]));

    // Both spellings at once, or none: a usage error naming --plan, exit 5, one line.
    for args in [
        vec!["status", "--plan", PLAN, PLAN],
        vec!["check", "--agent-cmd", agent],
    ] {
        let refused = sandbox.run(&args);
        refused.assert_code(5);
        assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
        assert!(refused.stderr.contains("--plan"), "{}", refused.stderr);
    }
    // `run --json`'s usage error is still its object, with the plan given alone too.
    for args in [
        vec!["run", PLAN, "--json", "--bogus"],
        vec![
            "--color",
            "never",
            "run",
            "--json",
            "--max-phases",
            "0",
            PLAN,
        ],
    ] {
        let refused = sandbox.run(&args);
        refused.assert_code(5);
        let object: Value = serde_json::from_str(&refused.stdout).expect("run --json's object");
        assert_eq!(object["result"], "invalid-input", "{args:?}");
        assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    }
}

/// A mistyped command gets the command meant, in the one line every usage error is.
#[test]
fn a_mistyped_command_gets_a_did_you_mean() {
    let sandbox = Sandbox::new();
    for (typed, meant) in [("statu", "status"), ("chekc", "check"), ("wacth", "watch")] {
        let run = sandbox.run(&[typed, "--plan", PLAN]);
        run.assert_code(5);
        assert_eq!(run.stdout, "");
        assert_eq!(
            run.stderr,
            format!(
                "error: unrecognized subcommand '{typed}'; tip: a similar subcommand exists: '{meant}'; see 'ai-session-handler --help'\n"
            )
        );
    }
}

/// `report` takes the plan alone too, as every command that works on a plan does.
#[test]
fn report_takes_the_plan_alone() {
    let sandbox = Sandbox::new();
    sandbox.write(PLAN, plan_with_phases(1));
    let agent = agent(&sandbox, COMPLETE);
    sandbox
        .run(&["run", PLAN, "--agent-cmd", agent.to_str().unwrap(), "-q"])
        .assert_code(0);
    let flagged = sandbox.run(&["report", "--plan", PLAN]);
    let alone = sandbox.run(&["report", PLAN]);
    flagged.assert_code(0);
    alone.assert_code(0);
    assert!(alone.stdout.contains("phase-1"), "{}", alone.stdout);
    assert_eq!(alone.stdout, flagged.stdout);
}
