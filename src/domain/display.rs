//! Text the runner prints, made safe for a terminal and for a caller that reads it: from an
//! agent or a path, an escape sequence could rewrite the terminal and a result tag at a line
//! start be taken for a result by an outer handler. The transcript stays byte-exact.

use std::borrow::Cow;

use super::marker::defuse_tags;

/// `text` ready to print: control characters and bidirectional overrides as Rust escapes
/// (`\u{1b}`; a line break, a tab and the `\r` of a `\r\n` kept), result tags defused as the
/// wrappers render them (`&lt;phase-complete>`).
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    let escaped = escape_controls(text);
    match defuse_tags(&escaped) {
        Cow::Borrowed(_) => escaped,
        Cow::Owned(defused) => Cow::Owned(defused),
    }
}

/// A serialized JSON document ready to print: the same characters as JSON escapes (`\u003c`
/// for `<`). Outside strings JSON holds none of them but its whitespace, and inside a string
/// the escape means the same character, so the document's meaning never changes.
pub(crate) fn printable_json(json: &str) -> Cow<'_, str> {
    let escape = |c: char| c == '<' || (needs_escape(c) && !matches!(c, '\n' | '\t' | '\r'));
    if !json.chars().any(escape) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if escape(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape_controls(text: &str) -> Cow<'_, str> {
    let mut chars = text.char_indices().peekable();
    let mut out: Option<String> = None;
    while let Some((at, c)) = chars.next() {
        let keep = match c {
            '\n' | '\t' => true,
            '\r' => chars.peek().is_some_and(|&(_, next)| next == '\n'),
            _ => !needs_escape(c),
        };
        match (&mut out, keep) {
            (Some(out), true) => out.push(c),
            (None, true) => {}
            (out, false) => {
                let out = out.get_or_insert_with(|| text[..at].to_owned());
                out.extend(c.escape_default());
            }
        }
    }
    out.map_or(Cow::Borrowed(text), Cow::Owned)
}

/// Control characters (C0, DEL, C1) and the bidirectional embedding, override and isolate
/// characters, which can make a line display as something it is not.
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "phase-blocked: need Vec<u8> and a < b\n\tsecond line\r\n";
        assert!(matches!(printable(text), Cow::Borrowed(_)));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            printable("evil\u{1b}]0;title\u{7} \r\0done\u{9b}31m"),
            "evil\\u{1b}]0;title\\u{7} \\r\\u{0}done\\u{9b}31m"
        );
        assert_eq!(printable("a\r\nb\u{7f}"), "a\r\nb\\u{7f}");
        assert_eq!(printable("x\u{202e}cba"), "x\\u{202e}cba");
    }

    #[test]
    fn result_tags_are_defused_other_angle_brackets_kept() {
        assert_eq!(
            printable("<phase-complete>done</phase-complete> Vec<u8> < phase-blocked>"),
            "&lt;phase-complete>done&lt;/phase-complete> Vec<u8> &lt; phase-blocked>"
        );
        assert_eq!(printable("< / phase-x"), "&lt; / phase-x");
        assert_eq!(printable("<phases>"), "<phases>");
    }

    #[test]
    fn json_gets_json_escapes() {
        assert_eq!(
            printable_json(r#"{"summary":"<phase-complete>x</phase-complete>\u001b"}"#),
            r#"{"summary":"\u003cphase-complete>x\u003c/phase-complete>\u001b"}"#
        );
        assert_eq!(printable_json("\"a\u{85}b\""), "\"a\\u0085b\"");
        let pretty = "{\n  \"a\": \"<\"\n}";
        assert_eq!(printable_json(pretty), "{\n  \"a\": \"\\u003c\"\n}");
    }

    /// Text made of tag pieces, line breaks, whitespace and control characters.
    fn tag_soup() -> impl proptest::strategy::Strategy<Value = String> {
        let pieces = proptest::sample::select(vec![
            "<",
            "/",
            "phase-",
            "complete",
            "blocked",
            "needs-clarification",
            ">",
            " ",
            "\n",
            "\r",
            "\t",
            "x",
            "\u{1b}",
            "\0",
            "```\n",
        ]);
        proptest::collection::vec(pieces, 0..40).prop_map(|pieces| pieces.concat())
    }

    proptest::proptest! {
        #[test]
        fn printed_text_holds_no_control_character_and_no_tag(
            text in proptest::prop_oneof!["(?s).*", tag_soup()]
        ) {
            let printed = printable(&text);
            proptest::prop_assert!(printed.chars().all(|c| matches!(c, '\n' | '\t' | '\r') || !needs_escape(c)));
            let verdict = super::super::marker::validate_streams(printed.as_bytes(), b"");
            proptest::prop_assert_eq!(verdict, super::super::marker::MarkerVerdict::Missing("missing terminal marker".to_owned()));
        }
    }
}
