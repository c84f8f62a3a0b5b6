//! What `state.json` may hold of an agent's text, and how big the whole document may get
//! (docs/state-and-recovery.md, "Bounded texts"): copied whole, a 16 MiB result body, escaped
//! and named twice, made a state too large for the reader, locking the plan.

/// The most bytes of an agent's text a state field holds before the note.
pub const STATE_TEXT_LIMIT: usize = 16 * 1024;

/// The largest `state.json` the runner writes: far beyond any real history (about 300 bytes
/// per committed outcome), and within what every reader accepts.
pub const MAX_STATE_BYTES: u64 = 64 * 1024 * 1024;

/// `text` when it fits in [`STATE_TEXT_LIMIT`]; else its first bytes, cut at a character
/// boundary, and a note saying how long it is and where it is whole (`full_text_at`).
pub fn excerpt(text: &str, full_text_at: Option<&str>) -> String {
    if text.len() <= STATE_TEXT_LIMIT {
        return text.to_owned();
    }
    let mut cut = STATE_TEXT_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let place = match full_text_at {
        Some(path) => format!("the full text is in {path}"),
        None => "the full text is in the attempt's outcome file".to_owned(),
    };
    format!(
        "{}\n[… cut at {cut} of {} bytes; {place}]",
        &text[..cut],
        text.len()
    )
}

/// Whether `text` is already what [`excerpt`] keeps (short, or an excerpt itself).
pub(super) fn is_bounded(text: &str) -> bool {
    text.len() <= STATE_TEXT_LIMIT + EXCERPT_NOTE_ROOM
}

/// Room left for the note after the cut (a path of a few hundred bytes).
const EXCERPT_NOTE_ROOM: usize = 8 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_short_text_is_kept_whole() {
        assert_eq!(excerpt("need an API key", None), "need an API key");
        let exact = "x".repeat(STATE_TEXT_LIMIT);
        assert_eq!(excerpt(&exact, None), exact);
    }

    #[test]
    fn a_long_text_keeps_its_start_and_says_where_the_rest_is() {
        let text = "\u{1}".repeat(12 << 20);
        let cut = excerpt(&text, Some("/k/outcomes/a.json"));
        assert!(cut.starts_with(&"\u{1}".repeat(STATE_TEXT_LIMIT)));
        assert!(cut.ends_with(&format!(
            "\n[… cut at {STATE_TEXT_LIMIT} of {} bytes; the full text is in /k/outcomes/a.json]",
            12 << 20
        )));
        assert!(is_bounded(&cut));
        assert!(!is_bounded(&text));
        // Bounding twice changes nothing more.
        assert!(is_bounded(&excerpt(&cut, None)));
    }

    proptest! {
        #[test]
        fn an_excerpt_is_bounded_valid_text_and_a_prefix(
            prefix in "\\PC{0,40}",
            filler in "[a-zé€😀\u{1}]{0,20}",
            repeat in 0usize..3000,
        ) {
            let text = format!("{prefix}{}", filler.repeat(repeat));
            let cut = excerpt(&text, None);
            prop_assert!(is_bounded(&cut));
            if text.len() <= STATE_TEXT_LIMIT {
                prop_assert_eq!(&cut, &text);
            } else {
                let kept = cut.rsplit_once("\n[… cut at ").map(|(kept, _)| kept).unwrap();
                prop_assert!(text.starts_with(kept));
                prop_assert!(kept.len() <= STATE_TEXT_LIMIT);
                prop_assert!(kept.len() + 4 > STATE_TEXT_LIMIT);
            }
        }
    }
}
