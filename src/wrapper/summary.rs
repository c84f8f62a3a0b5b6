//! One-line summaries of tool calls and tool results: whitespace collapsed, cut at
//! [`MAX_SUMMARY_CHARS`]; tag text is left to the notes they are written as.

use crate::domain::status_text::first_chars;

/// Longest summary shown, in characters, before `…`.
pub const MAX_SUMMARY_CHARS: usize = 120;

/// `text` on one line: runs of whitespace (line ends included) become one space, and the
/// result is cut at [`MAX_SUMMARY_CHARS`] characters, marked with `…`.
pub fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    first_chars(&line, MAX_SUMMARY_CHARS)
}

/// `label (details, 3 lines): summary`, or `label (details, empty)` for an empty output.
pub fn output(label: &str, details: &[&str], text: &str) -> String {
    if text.trim().is_empty() {
        return format!("{label} ({})", [details, &["empty"]].concat().join(", "));
    }
    let length = crate::units::count(text.lines().count(), "line");
    let details = [details, &[length.as_str()]].concat().join(", ");
    format!("{label} ({details}): {}", one_line(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_collapsed_and_long_text_cut() {
        assert_eq!(one_line("echo   a\n  && echo b\t"), "echo a && echo b");
        let long = one_line(&"é".repeat(300));
        assert_eq!(long.chars().count(), MAX_SUMMARY_CHARS + 1);
        assert!(long.ends_with("é…"), "{long}");
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn outputs_say_how_long_they_were() {
        assert_eq!(
            output("tool result", &[], "hello\n"),
            "tool result (1 line): hello"
        );
        assert_eq!(
            output("exec result", &["exit 2"], "a\nb\n<c>\n"),
            "exec result (exit 2, 3 lines): a b <c>"
        );
        assert_eq!(
            output("tool result", &["error"], " \n"),
            "tool result (error, empty)"
        );
        assert_eq!(output("tool result", &[], ""), "tool result (empty)");
    }
}
