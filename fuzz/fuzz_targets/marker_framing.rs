//! Terminal-marker framing and the live filter, chunked arbitrarily against whole buffers.
//!
//! Input: a chunk plan (see `split_input`), two bytes giving the stdout length, then the
//! stdout bytes followed by the stderr bytes. Each stream is fed to a `StreamFramer` and a
//! `LiveFilter` chunk by chunk, and the answers must equal the whole-buffer ones:
//! `combine(...) == validate_streams(stdout, stderr)` and the same visible output. A stream
//! whose verdict is a result must also have its block hidden from the live copy.
#![no_main]

use ai_session_handler::domain::marker::{LiveFilter, MarkerVerdict, StreamFramer, combine, validate_streams, };
use ai_session_handler::domain::output_stream::OutputStream;
use ai_session_handler_fuzz::{ChunkPlan, split_input};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (plan, payload) = split_input(data);
    let (stdout, stderr) = match payload {
        [low, high, rest @ ..] => {
            let len = usize::from(u16::from_le_bytes([*low, *high])) % (rest.len() + 1);
            rest.split_at(len)
        }
        _ => (payload, &[][..]),
    };

    let whole = validate_streams(stdout, stderr);
    let out = frame_chunked(OutputStream::Stdout, &plan, stdout, 0);
    let err = frame_chunked(OutputStream::Stderr, &plan, stderr, 1);
    assert_eq!(
        out,
        frame_whole(OutputStream::Stdout, stdout),
        "stdout verdict"
    );
    assert_eq!(
        err,
        frame_whole(OutputStream::Stderr, stderr),
        "stderr verdict"
    );
    assert_eq!(combine(out.clone(), err.clone()), whole);
    if let MarkerVerdict::Result(block) = &whole {
        assert!(!block.text.trim().is_empty());
        assert_eq!(block.text, block.text.trim_matches(is_ascii_space));
    }

    for (stream, verdict, phase) in [(stdout, &out, 0), (stderr, &err, 1)] {
        let visible = filter_whole(stream);
        assert_eq!(filter_chunked(&plan, stream, phase), visible, "live output");
        if let MarkerVerdict::Result(block) = verdict {
            let tag = block.kind.tag();
            assert!(
                !contains(&visible, format!("<{tag}>").as_bytes()),
                "result block shown"
            );
            assert!(
                !contains(&visible, format!("</{tag}>").as_bytes()),
                "result block shown"
            );
        }
        if !stream.contains(&b'<') {
            assert_eq!(visible, stream, "text without tags passes unchanged");
        }
    }
});

fn is_ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

fn frame_whole(stream: OutputStream, bytes: &[u8]) -> MarkerVerdict {
    let mut framer = StreamFramer::new(stream);
    framer.feed(bytes);
    framer.finish()
}

fn frame_chunked(
    stream: OutputStream,
    plan: &ChunkPlan<'_>,
    bytes: &[u8],
    phase: usize,
) -> MarkerVerdict {
    let mut framer = StreamFramer::new(stream);
    for chunk in plan.chunks(bytes, phase) {
        framer.feed(chunk);
    }
    framer.finish()
}

fn filter_whole(bytes: &[u8]) -> Vec<u8> {
    let mut filter = LiveFilter::new();
    let mut visible = Vec::new();
    filter.filter(bytes, &mut visible);
    filter.finish(&mut visible);
    visible
}

fn filter_chunked(plan: &ChunkPlan<'_>, bytes: &[u8], phase: usize) -> Vec<u8> {
    let mut filter = LiveFilter::new();
    let mut visible = Vec::new();
    for chunk in plan.chunks(bytes, phase) {
        filter.filter(chunk, &mut visible);
    }
    filter.finish(&mut visible);
    visible
}
