//! Why a command template is refused: its quoting, no program, a brace that `str.format`
//! would not read, or a field that is no placeholder of its kind. Each message quotes what
//! to fix (the word, the field as written).

/// A template that failed validation; the message quotes the offending field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// POSIX shell-word splitting failed (an unclosed quote, a trailing backslash).
    #[error("invalid command template quoting: {0}")]
    Quoting(shell_words::ParseError),
    /// The template splits into no words, or an empty program; the words are the kind's
    /// (`PlaceholderSet::EMPTY_COMMAND`).
    #[error("{0}")]
    EmptyCommand(&'static str),
    /// A brace in shell word `word` that `str.format` would not read. The template is split
    /// into words before braces are read, so `{workspace }` fails as the word `{workspace`:
    /// the message then says a placeholder cannot contain spaces.
    #[error(
        "invalid command template syntax: {problem} in word '{word}'{}",
        spaces_hint(.word)
    )]
    Syntax { problem: BraceSyntax, word: String },
    /// `{}` or `{0}`: placeholders are named.
    #[error("positional command placeholder is not allowed: {{{field}}}")]
    Positional { field: String },
    /// `{a.b}` or `{a[0]}`.
    #[error("attribute and index access are not allowed in command placeholder: {{{field}}}")]
    AttributeOrIndex { field: String },
    /// A name that is none of the kind's `known` placeholders; `suggestion` is the nearest
    /// one, when one is near.
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

/// How a brace field fails to read, in CPython's `str.format` words (the original validated
/// templates with `string.Formatter().parse`).
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

/// A word with an opening brace and no closing one (or a lone `}`) is what splitting a
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
