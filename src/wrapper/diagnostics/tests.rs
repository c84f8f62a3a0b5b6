//! Tests of the wrappers' diagnostic lines: prefixes, escaping of `<`, and live result-block
//! hiding across reads.

use proptest::prelude::*;

use super::*;

fn render_bytes(chunks: &[&[u8]]) -> Vec<u8> {
    let mut stream = DiagnosticStream::new("[codex] ");
    let mut out = Vec::new();
    for chunk in chunks {
        stream.translate(chunk, &mut out);
    }
    stream.finish(&mut out);
    out
}

fn render_chunks(chunks: &[&[u8]]) -> String {
    String::from_utf8(render_bytes(chunks)).expect("utf-8 in, utf-8 out")
}

fn render(text: &str) -> String {
    render_chunks(&[text.as_bytes()])
}

#[test]
fn reference_example_renders_exactly() {
    for fence in ["```python", "~~~text"] {
        let third_chunk = format!("\n{fence}\r\n");
        let chunks: [&[u8]; 5] = [
            b"first <phase-blo",
            b"cked>secret\r\nsecond",
            b" line</phase-blocked> tail\r",
            third_chunk.as_bytes(),
            b"print('<phase-blocked >')",
        ];
        assert_eq!(
            render_chunks(&chunks),
            format!(
                "[codex] first  tail\r\n[codex] {fence}\r\n[codex] print('&lt;phase-blocked >')\n"
            )
        );
    }
}

#[test]
fn every_line_is_prefixed_including_empty_ones() {
    assert_eq!(render("a\n\nb\n"), "[codex] a\n[codex] \n[codex] b\n");
}

#[test]
fn every_angle_bracket_is_escaped() {
    assert_eq!(
        render("<<phase-complete>x</phase-complete/ & <b>"),
        "[codex] &lt;&lt;phase-complete>x&lt;/phase-complete/ & &lt;b>\n"
    );
}

#[test]
fn carriage_returns_are_kept_and_do_not_end_lines() {
    assert_eq!(
        render("50%\r100%\r\ndone"),
        "[codex] 50%\r100%\r\n[codex] done\n"
    );
}

#[test]
fn finish_ends_a_partial_last_line() {
    assert_eq!(render("done\n"), "[codex] done\n");
    assert_eq!(render("done"), "[codex] done\n");
    assert_eq!(render(""), "");
}

#[test]
fn only_whole_lines_are_written() {
    let mut stream = DiagnosticStream::new("[codex] ");
    let mut out = Vec::new();
    stream.translate(b"working", &mut out);
    assert_eq!(out, b"");
    assert!(stream.holds_partial_line());
    stream.translate(b"...\nnext", &mut out);
    assert_eq!(out, b"[codex] working...\n");
    stream.finish(&mut out);
    assert_eq!(out, b"[codex] working...\n[codex] next\n");
}

#[test]
fn a_flushed_partial_line_is_ended_and_continued_on_a_new_line() {
    let mut stream = DiagnosticStream::new("[codex] ");
    let mut out = Vec::new();
    stream.translate(b"tokens used", &mut out);
    stream.flush_partial_line(&mut out);
    assert_eq!(out, b"[codex] tokens used\n");
    assert!(!stream.holds_partial_line());
    // The line end of the flushed line adds nothing; a continuation is a line of its own.
    stream.translate(b"\n30\nstep", &mut out);
    stream.flush_partial_line(&mut out);
    stream.translate(b" two\n", &mut out);
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "[codex] tokens used\n[codex] 30\n[codex] step\n[codex]  two\n"
    );
}

#[test]
fn blank_partial_lines_are_not_flushed() {
    let mut stream = DiagnosticStream::new("[codex] ");
    let mut out = Vec::new();
    stream.translate(b"  ", &mut out);
    assert!(!stream.holds_partial_line());
    stream.flush_partial_line(&mut out);
    assert_eq!(out, b"");
}

#[test]
fn an_overlong_partial_line_is_written_without_waiting() {
    let mut stream = DiagnosticStream::new("[codex] ");
    let mut out = Vec::new();
    stream.translate(&vec![b'x'; MAX_PARTIAL_LINE + 1], &mut out);
    assert_eq!(out.len(), "[codex] ".len() + MAX_PARTIAL_LINE + 2);
    assert!(!stream.holds_partial_line());
}

#[test]
fn complete_live_blocks_are_hidden_without_leaving_a_blank_line() {
    assert_eq!(
        render("live\n<phase-complete>claim</phase-complete>\n"),
        "[codex] live\n"
    );
    assert_eq!(
        render("live\n<phase-complete>\nmulti\nline\n</phase-complete>\r\nafter\n"),
        "[codex] live\n[codex] after\n"
    );
    assert_eq!(
        render("text <phase-complete>claim</phase-complete> tail\n"),
        "[codex] text  tail\n"
    );
    // A blank line the launcher printed after the block is its own, and shown.
    assert_eq!(
        render("<phase-complete>claim</phase-complete>\n\nafter\n"),
        "[codex] \n[codex] after\n"
    );
    assert_eq!(
        render("diagnostic quoted <phase-blocked> without a close\n"),
        "[codex] diagnostic quoted &lt;phase-blocked> without a close\n"
    );
}

#[test]
fn an_unclosed_block_is_shown_at_the_end() {
    assert_eq!(
        render("<phase-complete>\nnever closed\n"),
        "[codex] &lt;phase-complete>\n[codex] never closed\n"
    );
}

#[test]
fn notes_are_escaped_but_not_filtered_and_end_a_partial_line() {
    let mut stream = DiagnosticStream::new("[claude] ");
    let mut out = Vec::new();
    stream.translate(b"Let me check", &mut out);
    stream.note(
        "tool: Bash echo <phase-complete>x</phase-complete>",
        &mut out,
    );
    stream.translate(b"\n", &mut out);
    stream.finish(&mut out);
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "[claude] Let me check\n[claude] tool: Bash echo &lt;phase-complete>x&lt;/phase-complete>\n"
    );
}

#[test]
fn a_wrapper_message_is_rendered_line_by_line() {
    assert_eq!(
        render_message("[codex] ", "error: <x> failed"),
        b"[codex] error: &lt;x> failed\n"
    );
    assert_eq!(
        render_message("[codex] ", "a\nb\n"),
        b"[codex] a\n[codex] b\n"
    );
}

fn chunked(text: &[u8], cuts: &[prop::sample::Index]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(text.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for point in points {
        chunks.push(text[start..point].to_vec());
        start = point;
    }
    chunks.push(text[start..].to_vec());
    chunks
}

proptest! {
    #[test]
    fn rendering_does_not_depend_on_chunking(
        text in proptest::collection::vec(
            prop_oneof![
                Just(b'<'), Just(b'>'), Just(b'/'), Just(b'\n'), Just(b'\r'), Just(b' '),
                Just(b'p'), any::<u8>(),
            ],
            0..200,
        ),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let chunks = chunked(&text, &cuts);
        let pieces: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(render_bytes(&pieces), render_bytes(&[&text]));
    }

    #[test]
    fn output_is_inert_whole_lines(
        text in proptest::collection::vec(any::<u8>(), 0..300),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        flush_after in proptest::collection::vec(any::<bool>(), 7),
    ) {
        let mut stream = DiagnosticStream::new("[codex] ");
        let mut out = Vec::new();
        for (chunk, flush) in chunked(&text, &cuts).iter().zip(&flush_after) {
            stream.translate(chunk, &mut out);
            // Whatever was written so far is whole lines.
            prop_assert!(out.is_empty() || out.ends_with(b"\n"));
            if *flush {
                stream.flush_partial_line(&mut out);
            }
        }
        stream.finish(&mut out);
        prop_assert!(!out.contains(&b'<'));
        prop_assert!(out.is_empty() || out.ends_with(b"\n"));
        for line in out.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()) {
            prop_assert!(line.starts_with(b"[codex] "));
        }
    }
}
