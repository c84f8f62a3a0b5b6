//! Why a command template is refused; each message quotes what to fix.

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// An unclosed quote, a trailing backslash.
    #[error("invalid command template quoting: {0}")]
    Quoting(shell_words::ParseError),
    /// `PlaceholderSet::EMPTY_COMMAND`.
    #[error("{0}")]
    EmptyCommand(&'static str),
    /// The template is split into words before braces are read, so `{workspace }` fails as
    /// the word `{workspace`: the message then says a placeholder cannot contain spaces.
    #[error(
        "invalid command template syntax: {problem} in word '{word}'{}",
        spaces_hint(.word)
    )]
    Syntax { problem: BraceSyntax, word: String },
    /// `{}` or `{0}`.
    #[error("positional command placeholder is not allowed: {{{field}}}")]
    Positional { field: String },
    /// `{a.b}` or `{a[0]}`.
    #[error("attribute and index access are not allowed in command placeholder: {{{field}}}")]
    AttributeOrIndex { field: String },
    #[error(
        "unsupported command placeholder: {{{field}}}{} (placeholders: {}; write {{{{ and }}}} for literal braces)",
        .suggestion.map(|name| format!("; did you mean {{{name}}}?")).unwrap_or_default(),
        braced(.known)
    )]
    UnknownPlaceholder {
        field: String,
        suggestion: Option<&'static str>,
        known: &'static [&'static str],
    },
    /// `{name!r}`.
    #[error("conversion is not allowed in command placeholder: {{{field}}}")]
    Conversion { field: String },
    /// `{name:>10}`.
    #[error("format specification is not allowed in command placeholder: {{{field}}}")]
    FormatSpec { field: String },
}

/// How a brace field fails to read, in CPython's `str.format` words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BraceSyntax {
    #[error("single '}}' encountered in format string")]
    SingleClose,
    #[error("single '{{' encountered in format string")]
    SingleOpen,
    #[error("expected '}}' before end of string")]
    UnclosedField,
    #[error("unexpected '{{' in field name")]
    OpenInFieldName,
    #[error("end of string while looking for conversion specifier")]
    NoConversion,
    #[error("expected ':' after conversion specifier")]
    NoColonAfterConversion,
    #[error("unmatched '{{' in format spec")]
    UnclosedFormatSpec,
}

/// A word with an opening brace and no closing one, or a lone `}`, is what splitting a
/// placeholder with a space in it leaves.
fn spaces_hint(word: &str) -> &'static str {
    if word.contains('{') && !word.contains('}') || word == "}" {
        " (a placeholder cannot contain spaces)"
    } else {
        ""
    }
}

/// `{prompt_file}, {workspace}, …`.
fn braced(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("{{{name}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}
