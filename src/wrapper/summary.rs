//! One-line summaries of tool calls and tool results, shared by the providers.
//!
//! A command or a tool's output can be long and span lines; as a progress line it is
//! whitespace-collapsed and cut, so one call or result is always one diagnostic line. Tag text
//! in it is left alone here: summaries are written as notes, which escape `<` but hide nothing.

/// Longest summary shown, in characters, before `…`.
pub const MAX_SUMMARY_CHARS: usize = 120;

/// `text` on one line: runs of whitespace (line ends included) become one space, and the
/// result is cut at [`MAX_SUMMARY_CHARS`] characters, marked with `…`.
pub fn one_line(text: &str) -> String {
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = line.char_indices().nth(MAX_SUMMARY_CHARS) {
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// `1 line`, `3 lines`: how long an output was before it was summarised.
pub fn line_count(text: &str) -> String {
    match text.lines().count() {
        1 => "1 line".to_owned(),
        count => format!("{count} lines"),
    }
}

/// `label (details): summary`, or `label (empty)` for an empty output.
pub fn output(label: &str, details: &[&str], text: &str) -> String {
    if text.trim().is_empty() {
        let details = details
            .iter()
            .copied()
            .chain(["empty"])
            .collect::<Vec<_>>()
            .join(", ");
        return format!("{label} ({details})");
    }
    let count = line_count(text);
    let details = details
        .iter()
        .copied()
        .chain([count.as_str()])
        .collect::<Vec<_>>()
        .join(", ");
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
