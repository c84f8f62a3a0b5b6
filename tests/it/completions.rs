//! Shell completion, as a user gets it (docs/cli.md, README): the script `completions bash`
//! prints is sourced in a real bash, and what bash's completion machinery would offer is read
//! back — through the function `complete -p` registered, with `COMP_WORDS`/`COMP_CWORD` set
//! as readline sets them. The zsh and fish scripts are loaded in those shells when they are
//! installed (they are not required to run the suite).

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// What bash would offer for the command line `line` (the word under the cursor is its last
/// word, empty after a trailing space), run in `dir`.
fn complete(dir: &Path, script: &Path, line: &str) -> Vec<String> {
    let program = r#"
source "$1"
spec=$(complete -p ai-session-handler) || { echo "no completion registered" >&2; exit 3; }
function=$(printf '%s\n' "$spec" | sed -n 's/.*-F \([^ ]*\).*/\1/p')
line=$2
read -r -a COMP_WORDS <<< "$line"
if [[ $line == *' ' ]]; then COMP_WORDS+=(""); fi
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE=$line
COMP_POINT=${#line}
cur=${COMP_WORDS[COMP_CWORD]}
prev=""
if (( COMP_CWORD > 0 )); then prev=${COMP_WORDS[COMP_CWORD-1]}; fi
"$function" ai-session-handler "$cur" "$prev"
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let output = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", program, "bash"])
        .arg(script)
        .arg(line)
        .current_dir(dir)
        .output()
        .expect("run bash");
    assert!(
        output.status.success(),
        "bash failed for {line:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

#[track_caller]
fn assert_offers(offered: &[String], expected: &[&str]) {
    for word in expected {
        assert!(
            offered.iter().any(|candidate| candidate == word),
            "{word:?} not offered; offered: {offered:?}"
        );
    }
}

fn script(sandbox: &Sandbox, shell: &str) -> std::path::PathBuf {
    let run = sandbox.run(&["completions", shell]);
    run.assert_code(0);
    sandbox.write(&format!("completion.{shell}"), run.stdout)
}

#[test]
fn bash_completes_commands_flags_and_flag_values() {
    let sandbox = Sandbox::new();
    sandbox.write("docs/plan-one.md", "# plan\n");
    let bash = script(&sandbox, "bash");
    let root = &sandbox.root;

    let commands = complete(root, &bash, "ai-session-handler ");
    assert_offers(
        &commands,
        &[
            "run",
            "status",
            "check",
            "init",
            "watch",
            "completions",
            "man",
        ],
    );

    // The flags of a command: what the bug left empty.
    let run_flags = complete(root, &bash, "ai-session-handler run --");
    assert_offers(
        &run_flags,
        &[
            "--plan",
            "--agent-cmd",
            "--max-phases",
            "--timeout",
            "--idle-timeout",
            "--stop-on-regex",
            "--quiet",
            "--retry-stopped",
            "--accept-plan-change",
            "--retries",
            "--wait",
            "--json",
            "--log-level",
            "--log-format",
            "--log-file",
        ],
    );
    assert!(
        !run_flags.iter().any(|flag| flag == "--prompt"),
        "check's flag offered for run: {run_flags:?}"
    );
    assert_eq!(
        complete(root, &bash, "ai-session-handler check --p"),
        ["--plan", "--prompt", "--phase"]
    );

    // Flag values and positional values.
    assert_eq!(
        complete(root, &bash, "ai-session-handler run --log-format "),
        ["text", "json"]
    );
    let shells = complete(root, &bash, "ai-session-handler completions ");
    assert_offers(&shells, &["bash", "zsh", "fish", "elvish", "powershell"]);
    assert!(
        !shells.iter().any(|word| word.starts_with("completion.")),
        "files offered instead of shells: {shells:?}"
    );
    assert_eq!(
        complete(root, &bash, "ai-session-handler completions f"),
        ["fish"]
    );

    // A path value completes files.
    assert_eq!(
        complete(root, &bash, "ai-session-handler status --plan docs/pl"),
        ["docs/plan-one.md"]
    );
}

/// What the binary itself completes beyond flags and fixed values: a directory with its `/`
/// (so the next TAB goes into it), the `man` topics, the `--hook` events with their `=`, and
/// `check --phase`'s ids, read from the plan given on the same command line either way.
#[test]
fn bash_completes_directories_man_topics_hook_events_and_phase_ids() {
    let sandbox = Sandbox::new();
    sandbox.write("docs/plans/x.md", plan_with_phases(2));
    let bash = script(&sandbox, "bash");
    let root = &sandbox.root;

    assert_eq!(
        complete(root, &bash, "ai-session-handler status do"),
        ["docs/"]
    );
    assert_eq!(
        complete(root, &bash, "ai-session-handler run --plan docs/"),
        ["docs/plans/"]
    );
    assert_eq!(
        complete(root, &bash, "ai-session-handler watch docs/plans/"),
        ["docs/plans/x.md"]
    );

    assert_offers(
        &complete(root, &bash, "ai-session-handler man "),
        &[
            "run",
            "status",
            "check",
            "init",
            "watch",
            "completions",
            "man",
        ],
    );
    assert_eq!(
        complete(root, &bash, "ai-session-handler man ch"),
        ["check"]
    );

    assert_eq!(
        complete(root, &bash, "ai-session-handler run --hook phase-"),
        ["phase-stopped=", "phase-complete="]
    );
    assert_eq!(
        complete(root, &bash, "ai-session-handler check --hook r"),
        ["run-finished="]
    );

    for line in [
        "ai-session-handler check --plan docs/plans/x.md --prompt --phase ",
        "ai-session-handler check docs/plans/x.md --prompt --phase ",
        "ai-session-handler --color never check --prompt docs/plans/x.md --phase ",
    ] {
        assert_eq!(
            complete(root, &bash, line),
            ["phase-1", "phase-2"],
            "{line}"
        );
    }
    assert_eq!(
        complete(
            root,
            &bash,
            "ai-session-handler check docs/plans/x.md --prompt --phase phase-2"
        ),
        ["phase-2"]
    );
    // No plan on the line, or one that does not parse: nothing to offer.
    assert!(complete(root, &bash, "ai-session-handler check --prompt --phase ").is_empty());
    sandbox.write("docs/plans/bad.md", "# no phases\n");
    assert!(
        complete(
            root,
            &bash,
            "ai-session-handler check docs/plans/bad.md --prompt --phase "
        )
        .is_empty()
    );
}

/// `zsh` and `fish` are not needed for the suite; where one is installed, its script must load
/// without an error.
#[test]
fn zsh_and_fish_scripts_load_where_those_shells_are_installed() {
    let sandbox = Sandbox::new();
    let installed = |shell: &str| {
        Command::new(shell)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    if installed("zsh") {
        let zsh = script(&sandbox, "zsh");
        let output = Command::new("zsh")
            .args([
                "-f",
                "-c",
                "autoload -Uz compinit && compinit -u -D && source \"$1\" && whence -w _clap_dynamic_completer_ai_session_handler",
                "zsh",
            ])
            .arg(&zsh)
            .output()
            .expect("run zsh");
        assert!(
            output.status.success() && output.stderr.is_empty(),
            "zsh: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    } else {
        eprintln!("zsh is not installed: its completion script was not loaded");
    }
    if installed("fish") {
        let fish = script(&sandbox, "fish");
        let output = Command::new("fish")
            .args([
                "--no-config",
                "-c",
                "source $argv[1]; and complete -C 'ai-session-handler run --log-f'",
            ])
            .arg(&fish)
            .output()
            .expect("run fish");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && output.stderr.is_empty() && stdout.contains("--log-format"),
            "fish: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    } else {
        eprintln!("fish is not installed: its completion script was not loaded");
    }
}
