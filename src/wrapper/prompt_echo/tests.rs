//! Unit tests of the wrappers' prompt-echo filter.

use proptest::prelude::*;

use super::*;

const NOTE: &str = "(prompt not shown)";

fn filter_chunks(prompt: &str, chunks: &[&[u8]]) -> String {
    let mut echo = PromptEcho::new(prompt.as_bytes().to_vec(), NOTE);
    let mut out = Vec::new();
    for chunk in chunks {
        echo.filter(chunk, &mut out);
    }
    echo.release(&mut out);
    String::from_utf8(out).expect("utf-8")
}

fn filter(prompt: &str, text: &str) -> String {
    filter_chunks(prompt, &[text.as_bytes()])
}

#[test]
fn the_echo_becomes_one_note() {
    let prompt = "PROTOCOL\nDo not run git commit.\n";
    assert_eq!(
        filter(prompt, &format!("header\nuser\n{prompt}\nwarning: x\n")),
        "header\nuser\n(prompt not shown)\nwarning: x\n"
    );
}

#[test]
fn only_a_line_aligned_whole_copy_is_an_echo() {
    let prompt = "do the thing\n";
    assert_eq!(
        filter(prompt, "quote: do the thing\n"),
        "quote: do the thing\n"
    );
    assert_eq!(filter(prompt, "do the thin\ng\n"), "do the thin\ng\n");
    assert_eq!(filter(prompt, "do the thing"), "do the thing");
}

#[test]
fn only_the_first_echo_is_replaced() {
    let prompt = "abc\n";
    assert_eq!(filter(prompt, "abc\nabc\n"), "(prompt not shown)\nabc\n");
}

#[test]
fn a_failed_match_can_be_followed_by_the_echo() {
    // The prompt's first line recurs before the real echo starts.
    let prompt = "ab\nab\ncd\n";
    assert_eq!(
        filter(prompt, "ab\nab\nab\ncd\n\nnext\n"),
        "ab\n(prompt not shown)\nnext\n"
    );
}

#[test]
fn a_stalled_match_is_released() {
    let mut echo = PromptEcho::new(b"long prompt\n".to_vec(), NOTE);
    let mut out = Vec::new();
    echo.filter(b"long", &mut out);
    assert!(echo.holds());
    assert_eq!(out, b"");
    echo.release(&mut out);
    echo.filter(b" prompt\n", &mut out);
    assert_eq!(out, b"long prompt\n");
}

#[test]
fn a_blank_prompt_matches_nothing() {
    assert_eq!(filter("", "\n\nx\n"), "\n\nx\n");
}

proptest! {
    #[test]
    fn the_result_does_not_depend_on_chunking(
        before in "[ab\n]{0,12}",
        after in "[ab\n]{0,12}",
        echo in any::<bool>(),
        cut in any::<prop::sample::Index>(),
        cut2 in any::<prop::sample::Index>(),
    ) {
        let prompt = "ab\nba\n";
        let text = format!("{before}{}{after}", if echo { prompt } else { "" });
        let bytes = text.as_bytes();
        let mut cuts = [cut.index(bytes.len() + 1), cut2.index(bytes.len() + 1)];
        cuts.sort_unstable();
        let whole = filter(prompt, &text);
        let split = filter_chunks(
            prompt,
            &[&bytes[..cuts[0]], &bytes[cuts[0]..cuts[1]], &bytes[cuts[1]..]],
        );
        prop_assert_eq!(&split, &whole);
        // Removing the note and putting the prompt back gives the input (with the line
        // end after the echo), so nothing else was changed.
        if let Some(at) = whole.find(NOTE) {
            let rest = &whole[at + NOTE.len() + 1..];
            prop_assert!(text.starts_with(&whole[..at]));
            prop_assert!(text[at + prompt.len()..].ends_with(rest));
        } else {
            prop_assert_eq!(&whole, &text);
        }
    }
}
