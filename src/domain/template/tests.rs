//! Unit and property tests of `domain::template`.

use super::*;
use proptest::prelude::*;

const VALUES: PlaceholderValues<'static> = PlaceholderValues {
    prompt_file: "/abs/my workspace/prompt file.txt",
    workspace: "/abs/my workspace",
    run_id: "20260705T120102Z-phase-1-0b6c",
    transcript_file: "/abs/t.txt",
    state_file: "/abs/state.json",
};

fn render(template: &str, values: &PlaceholderValues<'_>) -> Vec<String> {
    CommandTemplate::parse(template).unwrap().render(values)
}

fn error(template: &str) -> String {
    match CommandTemplate::parse(template) {
        Ok(parsed) => panic!("expected {template:?} to be rejected, got {parsed:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn substituted_values_with_spaces_stay_one_argv_item() {
    assert_eq!(
        render(
            "agent --prompt {prompt_file} --cwd={workspace} --run {run_id}",
            &VALUES
        ),
        [
            "agent",
            "--prompt",
            "/abs/my workspace/prompt file.txt",
            "--cwd=/abs/my workspace",
            "--run",
            "20260705T120102Z-phase-1-0b6c",
        ]
    );
}

#[test]
fn quotes_inside_substituted_values_are_preserved() {
    let values = PlaceholderValues {
        workspace: r#"/abs/it's "quoted" \ here"#,
        ..VALUES
    };
    assert_eq!(
        render("agent {workspace}", &values),
        ["agent", r#"/abs/it's "quoted" \ here"#]
    );
}

#[test]
fn escaped_braces_produce_literal_json() {
    assert_eq!(
        render(r#"agent '--payload={{"status": "ok"}}'"#, &VALUES),
        ["agent", r#"--payload={"status": "ok"}"#]
    );
}

#[test]
fn every_placeholder_renders_its_value() {
    assert_eq!(
        render(
            "a {prompt_file} {workspace} {run_id} {transcript_file} {state_file}",
            &VALUES
        ),
        [
            "a",
            VALUES.prompt_file,
            VALUES.workspace,
            VALUES.run_id,
            VALUES.transcript_file,
            VALUES.state_file,
        ]
    );
}

#[test]
fn placeholders_combine_with_literals_and_each_other_in_one_word() {
    assert_eq!(
        render("a x{run_id}y{{{run_id}}}z{state_file}", &VALUES),
        [
            "a".to_owned(),
            format!(
                "x{}y{{{}}}z{}",
                VALUES.run_id, VALUES.run_id, VALUES.state_file
            ),
        ]
    );
}

#[test]
fn quoting_is_resolved_before_substitution() {
    assert_eq!(
        render(r#"agent "--cwd {workspace}" '{run_id}' \{{x}}"#, &VALUES),
        [
            "agent".to_owned(),
            format!("--cwd {}", VALUES.workspace),
            VALUES.run_id.to_owned(),
            "{x}".to_owned(),
        ]
    );
}

#[test]
fn an_unquoted_leading_hash_starts_a_comment_as_in_a_posix_shell() {
    // shell-words follows the shell here; Python's shlex.split kept `#x` as a word.
    assert_eq!(render("agent #x {unknown}", &VALUES), ["agent"]);
    assert_eq!(render("agent a#x", &VALUES), ["agent", "a#x"]);
}

#[test]
fn raw_is_the_template_as_written() {
    let raw = "agent  --run {run_id} ";
    assert_eq!(CommandTemplate::parse(raw).unwrap().raw(), raw);
}

/// The thirteen invalid templates of the original runner's tests, with its messages.
#[test]
fn the_original_invalid_templates_are_rejected_with_its_messages() {
    let cases = [
        ("", "agent command template produced an empty command"),
        ("   ", "agent command template produced an empty command"),
        ("''", "agent command template produced an empty command"),
        (
            "agent {}",
            "positional command placeholder is not allowed: {}",
        ),
        (
            "agent {0}",
            "positional command placeholder is not allowed: {0}",
        ),
        (
            "agent {workspace.name}",
            "attribute and index access are not allowed in command placeholder: \
                 {workspace.name}",
        ),
        (
            "agent {workspace[0]}",
            "attribute and index access are not allowed in command placeholder: \
                 {workspace[0]}",
        ),
        (
            "agent {workspace!r}",
            "conversion is not allowed in command placeholder: {workspace!r}",
        ),
        (
            "agent {workspace:}",
            "format specification is not allowed in command placeholder: {workspace:}",
        ),
        (
            "agent {workspace:>20}",
            "format specification is not allowed in command placeholder: {workspace:>20}",
        ),
        (
            "agent {workspace:{run_id}}",
            "format specification is not allowed in command placeholder: \
                 {workspace:{run_id}}",
        ),
        ("agent {unknown}", UNKNOWN),
        (
            "agent {workspace",
            "invalid command template syntax: expected '}' before end of string in word '{workspace' (a placeholder cannot contain spaces)",
        ),
        (
            "agent { workspace}",
            "invalid command template syntax: single '{' encountered in format string in word '{' (a placeholder cannot contain spaces)",
        ),
        (
            "agent \"unterminated",
            "invalid command template quoting: missing closing quote",
        ),
    ];
    for (template, expected) in cases {
        assert_eq!(error(template), expected, "{template:?}");
    }
}

#[test]
fn empty_program_is_rejected_even_with_arguments() {
    assert_eq!(
        error("'' {workspace}"),
        "agent command template produced an empty command"
    );
    assert_eq!(
        error("# only a comment"),
        "agent command template produced an empty command"
    );
}

#[test]
fn brace_syntax_errors_name_the_problem() {
    let cases = [
        ("agent }", "single '}' encountered in format string"),
        ("agent x}y", "single '}' encountered in format string"),
        ("agent {", "single '{' encountered in format string"),
        ("agent {{{", "single '{' encountered in format string"),
        ("agent {a{b}}", "unexpected '{' in field name"),
        ("agent {workspace[0}", "expected '}' before end of string"),
        (
            "agent {workspace!",
            "end of string while looking for conversion specifier",
        ),
        ("agent {workspace!r", "unmatched '{' in format spec"),
        (
            "agent {workspace!rx}",
            "expected ':' after conversion specifier",
        ),
        ("agent {workspace:", "unmatched '{' in format spec"),
        ("agent {workspace:{run_id}", "unmatched '{' in format spec"),
    ];
    for (template, detail) in cases {
        let message = error(template);
        let word = template.strip_prefix("agent ").unwrap_or(template);
        assert!(
            message.starts_with(&format!(
                "invalid command template syntax: {detail} in word '{word}'"
            )),
            "{template:?}: {message}"
        );
    }
}

#[test]
fn field_checks_apply_in_the_original_order() {
    let cases = [
        // positional before everything else
        (
            "a {!r}",
            "positional command placeholder is not allowed: {!r}",
        ),
        (
            "a {:>5}",
            "positional command placeholder is not allowed: {:>5}",
        ),
        (
            "a {0.x}",
            "attribute and index access are not allowed in command placeholder: {0.x}",
        ),
        // attribute access before the unknown-name check
        (
            "a {nope.x}",
            "attribute and index access are not allowed in command placeholder: {nope.x}",
        ),
        (
            "a {workspace[:]}",
            "attribute and index access are not allowed in command placeholder: {workspace[:]}",
        ),
        (
            "a {workspace[}]}",
            "attribute and index access are not allowed in command placeholder: {workspace[}]}",
        ),
        // unknown name before conversion and format spec
        (
            "a {nope!r}",
            "unsupported command placeholder: {nope!r} (placeholders: {prompt_file}, {workspace}, {run_id}, {transcript_file}, {state_file}; write {{ and }} for literal braces)",
        ),
        (
            "a {Workspace}",
            "unsupported command placeholder: {Workspace}; did you mean {workspace}? (placeholders: {prompt_file}, {workspace}, {run_id}, {transcript_file}, {state_file}; write {{ and }} for literal braces)",
        ),
        (
            "a '{ workspace}'",
            "unsupported command placeholder: { workspace}; did you mean {workspace}? (placeholders: {prompt_file}, {workspace}, {run_id}, {transcript_file}, {state_file}; write {{ and }} for literal braces)",
        ),
        // conversion before format spec
        (
            "a {workspace!r:>5}",
            "conversion is not allowed in command placeholder: {workspace!r:>5}",
        ),
        (
            "a {workspace!}}",
            "conversion is not allowed in command placeholder: {workspace!}}",
        ),
        (
            "a {workspace!é}",
            "conversion is not allowed in command placeholder: {workspace!é}",
        ),
        (
            "a {run_id:{{}}}",
            "format specification is not allowed in command placeholder: {run_id:{{}}}",
        ),
    ];
    for (template, expected) in cases {
        assert_eq!(error(template), expected, "{template:?}");
    }
}

#[test]
fn the_first_bad_field_in_reading_order_is_reported() {
    assert_eq!(error("agent {unknown} {workspace"), UNKNOWN);
    assert_eq!(
        error("agent {workspace {unknown}"),
        "invalid command template syntax: expected '}' before end of string in word '{workspace' (a placeholder cannot contain spaces)",
        "the word `{{workspace` is malformed before `{{unknown}}` is reached"
    );
}

#[test]
fn quoting_errors_come_before_brace_errors() {
    assert_eq!(
        error("agent {bad} 'open"),
        "invalid command template quoting: missing closing quote"
    );
}

#[test]
fn shell_join_quotes_like_python_shlex() {
    let argv = [
        "python3",
        "/tmp/my dir/agent.py",
        "--cwd=/abs/x",
        "",
        "it's",
        "a!b",
        "{x}",
        "snow☃",
        "@%+=:,./-_",
    ]
    .map(str::to_owned);
    assert_eq!(
        shell_join(&argv),
        r#"python3 '/tmp/my dir/agent.py' --cwd=/abs/x '' 'it'"'"'s' 'a!b' '{x}' 'snow☃' @%+=:,./-_"#
    );
    assert_eq!(shell_join(&[]), "");
}

fn template_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("agent"),
            Just(" "),
            Just("{"),
            Just("}"),
            Just("{{"),
            Just("}}"),
            Just("{workspace}"),
            Just("{run_id}"),
            Just("{prompt_file}"),
            Just("'"),
            Just("\""),
            Just("\\"),
            Just(":"),
            Just("!"),
            Just("["),
            Just("]"),
            Just("."),
            Just("0"),
            Just("#"),
            Just("x"),
            Just("é"),
        ],
        0..12,
    )
    .prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn parse_never_panics_on_arbitrary_text(raw in ".{0,40}") {
        let _ = CommandTemplate::parse(&raw);
    }

    #[test]
    fn rendering_keeps_one_argv_item_per_template_word(
        raw in template_text(),
        workspace in ".{0,12}",
        run_id in "[ '\"{}a-z]{0,8}",
    ) {
        if let Ok(template) = CommandTemplate::parse(&raw) {
            let values = PlaceholderValues { workspace: &workspace, run_id: &run_id, ..VALUES };
            let argv = template.render(&values);
            let words = shell_words::split(&raw).unwrap();
            prop_assert_eq!(argv.len(), words.len());
        }
    }

    #[test]
    fn templates_without_braces_render_as_split(raw in "[a-z '\"\\\\]{0,20}") {
        if let Ok(words) = shell_words::split(&raw) {
            match CommandTemplate::parse(&raw) {
                Ok(template) => prop_assert_eq!(template.render(&VALUES), words),
                Err(error) => prop_assert_eq!(
                    error.to_string(), "agent command template produced an empty command"
                ),
            }
        }
    }

    #[test]
    fn shell_join_round_trips_through_shell_words(
        argv in proptest::collection::vec(".{0,10}", 0..5)
    ) {
        prop_assert_eq!(shell_words::split(&shell_join(&argv)).unwrap(), argv);
    }
}

#[test]
fn the_program_word_is_literal_unless_a_placeholder_is_in_it() {
    let program = |raw: &str| {
        CommandTemplate::parse(raw)
            .unwrap()
            .literal_program()
            .map(str::to_owned)
    };
    assert_eq!(
        program("codex exec {prompt_file}").as_deref(),
        Some("codex")
    );
    assert_eq!(program("'./my agent' --x").as_deref(), Some("./my agent"));
    assert_eq!(program("a{{b}}").as_deref(), Some("a{b}"));
    assert_eq!(program("{workspace}/agent"), None);
    assert_eq!(program("run-{run_id}"), None);
}

/// The error for `{unknown}`: no placeholder is near it, so only the list.
const UNKNOWN: &str = "unsupported command placeholder: {unknown} (placeholders: {prompt_file}, {workspace}, {run_id}, {transcript_file}, {state_file}; write {{ and }} for literal braces)";

#[test]
fn a_misspelt_placeholder_suggests_the_one_meant_and_lists_them_all() {
    assert_eq!(
        error("agent --prompt {promptfile}"),
        "unsupported command placeholder: {promptfile}; did you mean {prompt_file}? (placeholders: {prompt_file}, {workspace}, {run_id}, {transcript_file}, {state_file}; write {{ and }} for literal braces)"
    );
    assert!(error("agent {transcript}").contains("did you mean {transcript_file}?"));
    assert!(!error("agent {file}").contains("did you mean"));
}
