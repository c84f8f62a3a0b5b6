//! Command templates (docs/cli.md): POSIX shell-word splitting first, then named placeholders
//! in each word, `{{`/`}}` for literal braces, and every other brace form rejected as Python's
//! `str.format` would (the original validated with `string.Formatter().parse`), quoting the
//! field. The parsed words are kept, so a substituted value is never split or requoted. Each
//! kind of template (the agent command, hooks) names its placeholders with a [`PlaceholderSet`].

mod error;

use std::mem;

pub use error::{BraceSyntax, TemplateError};

use super::suggest;

#[derive(Clone, Debug)]
pub struct PlaceholderValues<'a> {
    pub prompt_file: &'a str,
    pub workspace: &'a str,
    pub run_id: &'a str,
    pub transcript_file: &'a str,
    pub state_file: &'a str,
}

/// The placeholder names one kind of template may use: each variant in snake case between
/// braces.
pub trait PlaceholderSet:
    Copy + std::fmt::Debug + PartialEq + Eq + std::str::FromStr + strum::VariantNames
{
    /// The message for a template that splits into no command or an empty program.
    const EMPTY_COMMAND: &'static str;
}

/// A validated template whose placeholders are of kind `P`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template<P> {
    raw: String,
    /// The literal and placeholder pieces of each argv item.
    words: Vec<Vec<Segment<P>>>,
}

/// The agent command template (`agent_cmd`, `--agent-cmd`, the rate-limit fallbacks).
pub type CommandTemplate = Template<AgentPlaceholder>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment<P> {
    Literal(String),
    Placeholder(P),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumString, strum::VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum AgentPlaceholder {
    PromptFile,
    Workspace,
    RunId,
    TranscriptFile,
    StateFile,
}

impl PlaceholderSet for AgentPlaceholder {
    const EMPTY_COMMAND: &'static str = "agent command template produced an empty command";
}

impl CommandTemplate {
    pub fn render(&self, values: &PlaceholderValues<'_>) -> Vec<String> {
        self.render_with(|placeholder| match placeholder {
            AgentPlaceholder::PromptFile => values.prompt_file,
            AgentPlaceholder::Workspace => values.workspace,
            AgentPlaceholder::RunId => values.run_id,
            AgentPlaceholder::TranscriptFile => values.transcript_file,
            AgentPlaceholder::StateFile => values.state_file,
        })
    }
}

impl<P: PlaceholderSet> Template<P> {
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        let split = shell_words::split(raw).map_err(TemplateError::Quoting)?;
        if split.first().is_none_or(|program| program.is_empty()) {
            return Err(TemplateError::EmptyCommand(P::EMPTY_COMMAND));
        }
        let words = split
            .iter()
            .map(|word| parse_word(word))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            raw: raw.to_owned(),
            words,
        })
    }

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

/// Joins argv into one line for the transcript's `argv:` header, quoting as Python's
/// `shlex.join` did (`shell_words::join` leaves `!` and `{` bare, so it would not match).
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

/// Splits one shell word into literal text and placeholders. Brace, bracket, `:` and `!` are
/// ASCII, so every slice taken at them falls on a character boundary.
fn parse_word<P: PlaceholderSet>(word: &str) -> Result<Vec<Segment<P>>, TemplateError> {
    let syntax_error = |problem| TemplateError::Syntax {
        problem,
        word: word.to_owned(),
    };
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
            return Err(syntax_error(BraceSyntax::SingleClose));
        }
        if after.is_empty() {
            return Err(syntax_error(BraceSyntax::SingleOpen));
        }
        let (field, after_field) = BraceField::split_off(after).map_err(syntax_error)?;
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
    /// Everything between the braces, echoed in messages.
    text: &'a str,
    name: &'a str,
    has_conversion: bool,
    /// A `:` was present, even with nothing after it.
    has_format_spec: bool,
}

impl<'a> BraceField<'a> {
    /// Reads the field that starts just after an opening `{` and returns it with the text
    /// after its closing `}`. Mirrors CPython's `parse_field`: `[` skips to the next `]`, a
    /// format spec may nest braces, and the first unbalanced `}` closes the field.
    fn split_off(input: &'a str) -> Result<(Self, &'a str), BraceSyntax> {
        let bytes = input.as_bytes();
        let mut at = 0;
        let terminator = loop {
            match bytes.get(at) {
                None => return Err(BraceSyntax::UnclosedField),
                Some(b'{') => return Err(BraceSyntax::OpenInFieldName),
                Some(b'[') => match input[at + 1..].find(']') {
                    Some(offset) => at += offset + 2,
                    None => return Err(BraceSyntax::UnclosedField),
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
                    return Err(BraceSyntax::NoConversion);
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
                    None => return Err(BraceSyntax::UnclosedFormatSpec),
                    Some(_) => return Err(BraceSyntax::NoColonAfterConversion),
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
        Err(BraceSyntax::UnclosedFormatSpec)
    }

    /// Applies the original's checks in its order; the first failing one names the field.
    fn placeholder<P: PlaceholderSet>(&self) -> Result<P, TemplateError> {
        let field = || self.text.to_owned();
        if self.name.is_empty() || self.name.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(TemplateError::Positional { field: field() });
        }
        if self.name.contains(['.', '[', ']']) {
            return Err(TemplateError::AttributeOrIndex { field: field() });
        }
        let Ok(placeholder) = self.name.parse::<P>() else {
            return Err(TemplateError::UnknownPlaceholder {
                field: field(),
                suggestion: suggest::nearest(self.name, P::VARIANTS),
                known: P::VARIANTS,
            });
        };
        if self.has_conversion {
            return Err(TemplateError::Conversion { field: field() });
        }
        if self.has_format_spec {
            return Err(TemplateError::FormatSpec { field: field() });
        }
        Ok(placeholder)
    }
}

#[cfg(test)]
mod tests;
