//! Command templates (docs/architecture.md; docs/cli.md): POSIX shell-word splitting first, then
//! named placeholders in each word, `{{`/`}}` for literal braces, and every other brace form
//! rejected with a message quoting the field.
//!
//! The machinery is shared by every template the runner runs: the agent command
//! ([`CommandTemplate`], five placeholders) and the hook commands (`domain::hooks`, their own
//! names). Each kind names its placeholders through a [`PlaceholderSet`]; splitting, brace
//! reading and rendering are the same.
//!
//! Splitting happens before substitution and the parsed words are kept, so rendering is plain
//! concatenation: a substituted path with spaces or quotes stays one argv item and is never
//! requoted. Brace fields are read the way Python's `str.format` reads them (the original
//! validated with `string.Formatter().parse`), so the same brace forms are accepted and
//! rejected, with the field echoed back as written.

use std::mem;

use super::suggest;

/// A template that failed validation; the message quotes the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

/// The values substituted into a template.
#[derive(Clone, Debug)]
pub struct PlaceholderValues<'a> {
    pub prompt_file: &'a str,
    pub workspace: &'a str,
    pub run_id: &'a str,
    pub transcript_file: &'a str,
    pub state_file: &'a str,
}

/// The placeholder names one kind of template may use.
pub trait PlaceholderSet: Copy + std::fmt::Debug + PartialEq + Eq {
    /// Every name, in the order the documentation lists them (for the message that lists
    /// them and suggests the nearest to a misspelt one).
    const NAMES: &'static [&'static str];
    /// The placeholder spelled `name` between braces, if this kind has one.
    fn from_name(name: &str) -> Option<Self>;
    /// The message for a template that splits into no command (or an empty program).
    const EMPTY_COMMAND: &'static str;
}

/// A validated template whose placeholders are of kind `P`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template<P> {
    raw: String,
    /// One entry per argv item, each the literal and placeholder pieces of that word.
    words: Vec<Vec<Segment<P>>>,
}

/// The agent command template (`agent_cmd`, `--agent-cmd`, the rate-limit fallbacks).
pub type CommandTemplate = Template<AgentPlaceholder>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment<P> {
    Literal(String),
    Placeholder(P),
}

/// The only names an agent command template may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentPlaceholder {
    PromptFile,
    Workspace,
    RunId,
    TranscriptFile,
    StateFile,
}

impl PlaceholderSet for AgentPlaceholder {
    const NAMES: &'static [&'static str] = &[
        "prompt_file",
        "workspace",
        "run_id",
        "transcript_file",
        "state_file",
    ];
    const EMPTY_COMMAND: &'static str = "agent command template produced an empty command";

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
}

impl AgentPlaceholder {
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
    /// The argv with placeholders substituted; substituted values never split or requote.
    pub fn render(&self, values: &PlaceholderValues<'_>) -> Vec<String> {
        self.render_with(|placeholder| placeholder.value(values))
    }
}

impl<P: PlaceholderSet> Template<P> {
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        let split = shell_words::split(raw)
            .map_err(|error| TemplateError(format!("invalid command template quoting: {error}")))?;
        if split.first().is_none_or(|program| program.is_empty()) {
            return Err(TemplateError(P::EMPTY_COMMAND.to_owned()));
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

    /// The program word (argv\[0\]) when it has no placeholder, so it can be resolved before
    /// any attempt exists; `None` when a placeholder in it takes its value at launch.
    pub fn literal_program(&self) -> Option<&str> {
        match self.words.first().map(Vec::as_slice) {
            Some([Segment::Literal(program)]) => Some(program),
            _ => None,
        }
    }

    /// The argv with each placeholder replaced by `value(placeholder)`; substituted values
    /// never split or requote.
    pub fn render_with<'v>(&self, value: impl Fn(P) -> &'v str) -> Vec<String> {
        self.words
            .iter()
            .map(|segments| {
                let mut word = String::new();
                for segment in segments {
                    match segment {
                        Segment::Literal(text) => word.push_str(text),
                        Segment::Placeholder(placeholder) => word.push_str(value(*placeholder)),
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
fn parse_word<P: PlaceholderSet>(word: &str) -> Result<Vec<Segment<P>>, TemplateError> {
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
        let placeholder = field.placeholder::<P>()?;
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
    fn placeholder<P: PlaceholderSet>(&self) -> Result<P, TemplateError> {
        let reject = |problem: &str| Err(TemplateError(format!("{problem}: {{{}}}", self.text)));
        if self.name.is_empty() || self.name.bytes().all(|byte| byte.is_ascii_digit()) {
            return reject("positional command placeholder is not allowed");
        }
        if self.name.contains(['.', '[', ']']) {
            return reject("attribute and index access are not allowed in command placeholder");
        }
        let Some(placeholder) = P::from_name(self.name) else {
            let known: Vec<String> = P::NAMES.iter().map(|name| format!("{{{name}}}")).collect();
            let guess = match suggest::nearest(self.name, P::NAMES) {
                Some(name) => format!("; did you mean {{{name}}}?"),
                None => String::new(),
            };
            return Err(TemplateError(format!(
                "unsupported command placeholder: {{{}}}{guess} (placeholders: {}; write {{{{ and }}}} for literal braces)",
                self.text,
                known.join(", ")
            )));
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
mod tests;
