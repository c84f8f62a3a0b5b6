//! One printable line from text an agent sent (a `STATUS=`, a usage report's model names, the
//! wrappers' status lines): no control or bidirectional-formatting character survives, and the
//! line is bounded so one chatty agent cannot flood a status display.

/// A status longer than this many characters is cut (and ends with `…`).
pub(crate) const MAX_STATUS_CHARS: usize = 200;

/// Control and bidirectional-formatting characters become spaces, whitespace runs one space;
/// trimmed and cut to [`MAX_STATUS_CHARS`] characters.
pub(crate) fn sanitize_status(value: &str) -> String {
    let printable: String = value
        .chars()
        .map(|c| if is_unprintable(c) { ' ' } else { c })
        .collect();
    let text = printable.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= MAX_STATUS_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_STATUS_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// `text` cut to `max_chars` characters, `…` marking a cut.
pub(crate) fn cut_chars(text: &str, max_chars: usize) -> String {
    let mut cut: String = text.chars().take(max_chars).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

pub(crate) fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn controls_and_direction_marks_become_single_spaces() {
        assert_eq!(
            sanitize_status("  tool:\tBash \u{1b}[31mls\r  -la  "),
            "tool: Bash [31mls -la"
        );
        assert_eq!(sanitize_status("x\u{202e}y\u{0}z\u{2066}"), "x y z");
        assert_eq!(sanitize_status(" \t "), "");
    }

    #[test]
    fn a_long_status_is_cut_with_an_ellipsis() {
        let cut = sanitize_status(&"é".repeat(500));
        assert_eq!(cut.chars().count(), MAX_STATUS_CHARS);
        assert!(cut.ends_with("é…"), "{cut}");
        let exact = "a".repeat(MAX_STATUS_CHARS);
        assert_eq!(sanitize_status(&exact), exact);
        let spaced = format!("{} b", "a".repeat(MAX_STATUS_CHARS - 2));
        assert_eq!(sanitize_status(&spaced), spaced);
        let cut_at_space = sanitize_status(&format!("{} bbbb", "a".repeat(MAX_STATUS_CHARS - 2)));
        assert_eq!(
            cut_at_space,
            format!("{}…", "a".repeat(MAX_STATUS_CHARS - 2))
        );
    }

    proptest! {
        #[test]
        fn a_status_is_always_printable_trimmed_and_bounded(text in "\\PC*|[\\x00-\\x1f\u{202a}-\u{202e} a]{0,300}") {
            let status = sanitize_status(&text);
            prop_assert!(status.chars().count() <= MAX_STATUS_CHARS);
            prop_assert!(!status.chars().any(is_unprintable));
            prop_assert_eq!(status.trim(), status.as_str());
            prop_assert!(!status.contains("  "));
        }
    }
}
