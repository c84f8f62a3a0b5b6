//! The agent command template (SPEC §5; reference §4): POSIX shell-word splitting first, then
//! exactly five named placeholders in each word, `{{`/`}}` for literal braces, and every other
//! brace form rejected with a message quoting the field.
//!
//! Splitting happens before substitution and the parsed words are kept, so rendering is plain
//! concatenation: a substituted path with spaces or quotes stays one argv item and is never
//! requoted. Brace fields are read the way Python's `str.format` reads them (the original
//! validated with `string.Formatter().parse`), so the same brace forms are accepted and
//! rejected, with the field echoed back as written.

use std::mem;

/// A template that failed validation; the message quotes the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The values substituted into a template.
#[derive(Clone, Debug)]
pub struct PlaceholderValues<'a> {
    pub prompt_file: &'a str,
    pub workspace: &'a str,
    pub run_id: &'a str,
    pub transcript_file: &'a str,
    pub state_file: &'a str,
}

/// A validated template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandTemplate {
    raw: String,
    /// One entry per argv item, each the literal and placeholder pieces of that word.
    words: Vec<Vec<Segment>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Placeholder(Placeholder),
}

/// The only names a template may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placeholder {
    PromptFile,
    Workspace,
    RunId,
    TranscriptFile,
    StateFile,
}

impl Placeholder {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "prompt_file" => Some(Self::PromptFile),
            "workspace" => Some(Self::Workspace),
            "run_id" => Some(Self::RunId),
            "transcript_file" => Some(Self::TranscriptFile),
            "state_file" => Some(Self::StateFile),
            _ => None,
        }
    }

    fn value<'a>(self, values: &PlaceholderValues<'a>) -> &'a str {
        match self {
            Self::PromptFile => values.prompt_file,
            Self::Workspace => values.workspace,
            Self::RunId => values.run_id,
            Self::TranscriptFile => values.transcript_file,
            Self::StateFile => values.state_file,
        }
    }
}

impl CommandTemplate {
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        let split = shell_words::split(raw)
            .map_err(|error| TemplateError(format!("invalid command template quoting: {error}")))?;
        if split.first().is_none_or(|program| program.is_empty()) {
            return Err(TemplateError(
                "agent command template produced an empty command".to_owned(),
            ));
        }
        let words = split
            .iter()
            .map(|word| parse_word(word).map_err(|error| in_word(error, word)))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            raw: raw.to_owned(),
            words,
        })
    }

    /// The template as the user wrote it.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The argv with placeholders substituted; substituted values never split or requote.
    pub fn render(&self, values: &PlaceholderValues<'_>) -> Vec<String> {
        self.words
            .iter()
            .map(|segments| {
                let mut word = String::new();
                for segment in segments {
                    match segment {
                        Segment::Literal(text) => word.push_str(text),
                        Segment::Placeholder(placeholder) => {
                            word.push_str(placeholder.value(values));
                        }
                    }
                }
                word
            })
            .collect()
    }
}

/// Joins argv into one shell-quoted line for the transcript's `argv:` header, quoting exactly
/// as Python's `shlex.join` did: words made only of `[A-Za-z0-9_@%+=:,./-]` stay bare,
/// everything else is single-quoted with `'` written as `'"'"'`. (`shell_words::join` quotes
/// differently, e.g. it leaves `!` and `{` bare, so the original's wording would not match.)
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|word| shell_quote(word))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(word: &str) -> String {
    let is_safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(is_safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r#"'"'"'"#))
    }
}

fn syntax_error(detail: &str) -> TemplateError {
    TemplateError(format!("invalid command template syntax: {detail}"))
}

/// Names the shell word a brace syntax error was found in: the template is split into words
/// before placeholders are read, so `{workspace }` fails as the word `{workspace`.
fn in_word(error: TemplateError, word: &str) -> TemplateError {
    if !error.0.starts_with("invalid command template syntax: ") {
        return error;
    }
    let hint = if word.contains('{') && !word.contains('}') || word == "}" {
        " (a placeholder cannot contain spaces)"
    } else {
        ""
    };
    TemplateError(format!("{} in word '{word}'{hint}", error.0))
}

/// Splits one shell word into literal text and placeholders, following `str.format`'s reading
/// of braces. Brace, bracket, `:` and `!` are ASCII, so every slice taken at them falls on a
/// character boundary.
fn parse_word(word: &str) -> Result<Vec<Segment>, TemplateError> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = word;
    while let Some(brace_at) = rest.find(['{', '}']) {
        literal.push_str(&rest[..brace_at]);
        let brace = &rest[brace_at..=brace_at];
        let after = &rest[brace_at + 1..];
        if let Some(after_escape) = after.strip_prefix(brace) {
            literal.push_str(brace);
            rest = after_escape;
            continue;
        }
        if brace == "}" {
            return Err(syntax_error("single '}' encountered in format string"));
        }
        if after.is_empty() {
            return Err(syntax_error("single '{' encountered in format string"));
        }
        let (field, after_field) = BraceField::split_off(after)?;
        let placeholder = field.placeholder()?;
        if !literal.is_empty() {
            segments.push(Segment::Literal(mem::take(&mut literal)));
        }
        segments.push(Segment::Placeholder(placeholder));
        rest = after_field;
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

/// One `{…}` replacement field as `str.format` reads it: `name[!conversion][:format_spec]`.
struct BraceField<'a> {
    /// Everything between the braces, echoed in error messages.
    text: &'a str,
    name: &'a str,
    /// A `!` conversion was present (`!r`, `!s`, or any other character).
    has_conversion: bool,
    /// A `:` was present, even with nothing after it.
    has_format_spec: bool,
}

impl<'a> BraceField<'a> {
    /// Reads the field that starts just after an opening `{` and returns it with the text
    /// after its closing `}`. Mirrors CPython's `parse_field`: `[` skips to the next `]`, a
    /// format spec may nest braces, and the first unbalanced `}` closes the field.
    fn split_off(input: &'a str) -> Result<(Self, &'a str), TemplateError> {
        let bytes = input.as_bytes();
        let mut at = 0;
        let terminator = loop {
            match bytes.get(at) {
                None => return Err(syntax_error("expected '}' before end of string")),
                Some(b'{') => return Err(syntax_error("unexpected '{' in field name")),
                Some(b'[') => match input[at + 1..].find(']') {
                    Some(offset) => at += offset + 2,
                    None => return Err(syntax_error("expected '}' before end of string")),
                },
                Some(&byte @ (b'}' | b':' | b'!')) => break byte,
                Some(_) => at += 1,
            }
        };
        let name = &input[..at];
        let mut field = Self {
            text: name,
            name,
            has_conversion: false,
            has_format_spec: false,
        };
        let mut spec_start = at + 1;
        match terminator {
            b'}' => return Ok((field, &input[at + 1..])),
            b'!' => {
                let Some(conversion) = input[at + 1..].chars().next() else {
                    return Err(syntax_error(
                        "end of string while looking for conversion specifier",
                    ));
                };
                field.has_conversion = true;
                let after_conversion = at + 1 + conversion.len_utf8();
                match bytes.get(after_conversion) {
                    Some(b'}') => {
                        field.text = &input[..after_conversion];
                        return Ok((field, &input[after_conversion + 1..]));
                    }
                    Some(b':') => spec_start = after_conversion + 1,
                    // CPython goes on to look for the spec's closing brace, which is missing.
                    None => return Err(syntax_error("unmatched '{' in format spec")),
                    Some(_) => {
                        return Err(syntax_error("expected ':' after conversion specifier"));
                    }
                }
            }
            _ => {}
        }
        field.has_format_spec = true;
        let mut depth = 1_usize;
        for (offset, byte) in bytes[spec_start..].iter().enumerate() {
            match byte {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        let close = spec_start + offset;
                        field.text = &input[..close];
                        return Ok((field, &input[close + 1..]));
                    }
                }
                _ => {}
            }
        }
        Err(syntax_error("unmatched '{' in format spec"))
    }

    /// Applies the original's checks in its order; the first failing one names the field.
    fn placeholder(&self) -> Result<Placeholder, TemplateError> {
        let reject = |problem: &str| Err(TemplateError(format!("{problem}: {{{}}}", self.text)));
        if self.name.is_empty() || self.name.bytes().all(|byte| byte.is_ascii_digit()) {
            return reject("positional command placeholder is not allowed");
        }
        if self.name.contains(['.', '[', ']']) {
            return reject("attribute and index access are not allowed in command placeholder");
        }
        let Some(placeholder) = Placeholder::from_name(self.name) else {
            return reject("unsupported command placeholder");
        };
        if self.has_conversion {
            return reject("conversion is not allowed in command placeholder");
        }
        if self.has_format_spec {
            return reject("format specification is not allowed in command placeholder");
        }
        Ok(placeholder)
    }
}

#[cfg(test)]
mod tests {
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
            Err(TemplateError(message)) => message,
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

    /// Reference §15.2 item 29: the thirteen invalid templates.
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
            (
                "agent {unknown}",
                "unsupported command placeholder: {unknown}",
            ),
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
            ("a {nope!r}", "unsupported command placeholder: {nope!r}"),
            (
                "a {Workspace}",
                "unsupported command placeholder: {Workspace}",
            ),
            (
                "a '{ workspace}'",
                "unsupported command placeholder: { workspace}",
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
        assert_eq!(
            error("agent {unknown} {workspace"),
            "unsupported command placeholder: {unknown}"
        );
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
                        error.0, "agent command template produced an empty command"
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
}
