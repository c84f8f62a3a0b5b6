//! Per-chunk hot paths of `run` (docs/benchmarks.md): result-block framing plus the live-output
//! filter, and the stop-regex scanner with 0, 1 and 3 patterns on its DFA path and the same
//! with a Unicode `\b` on its NFA path, each over 64 MiB of agent-like output in 64 KiB chunks,
//! alternating stdout and stderr as the transcript writer sees them.
//!
//! Every group also measures `baseline/memchr_newlines`: one SIMD pass counting newlines over
//! the same chunks, the cheapest "touch every byte" a consumer can do. Figures in
//! docs/benchmarks.md are ratios against it.

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use ai_session_handler::domain::marker::{LiveFilter, MarkerVerdict, StreamFramer, combine};
use ai_session_handler::domain::output_stream::OutputStream;
use ai_session_handler::domain::stop_regex::{StopPatterns, StopScanner};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

const OUTPUT_LEN: usize = 64 << 20;
const CHUNK: usize = 64 << 10;

/// The three non-matching patterns of the whole-process benchmark (benches/run.sh): an ASCII
/// word boundary, an anchored multi-line pattern and one spanning a newline. All three take
/// the DFA path.
const STOP_PATTERNS: [&str; 3] = [
    r"(?-u:\b)out of memory(?-u:\b)",
    r"(?m)^FATAL: .*$",
    r"error\nfatal",
];

/// The first of them as users write it, with Unicode word boundaries: the NFA path.
const UNICODE_WORD_PATTERN: &str = r"\bout of memory\b";

/// Scanner cases: (name, patterns, whether some pattern takes the NFA path). None matches the
/// generated output. The `every_byte` pair has no literal to jump to, so both paths walk every
/// byte: the NFA path's worst realistic case next to the DFA path's.
fn scanner_cases() -> Vec<(&'static str, Vec<&'static str>, bool)> {
    let [ascii_word, fatal, fatal_block] = STOP_PATTERNS;
    vec![
        ("patterns/0", vec![], false),
        ("patterns/1", vec![ascii_word], false),
        ("patterns/3", vec![ascii_word, fatal, fatal_block], false),
        ("unicode_word/1", vec![UNICODE_WORD_PATTERN], true),
        (
            "unicode_word/3",
            vec![UNICODE_WORD_PATTERN, fatal, fatal_block],
            true,
        ),
        ("every_byte/dfa", vec![r"\w+ failed(?-u:\b)"], false),
        ("every_byte/nfa", vec![r"\w+ failed\b"], true),
    ]
}

/// One self-contained output per stream (so each stream's fences close), cut into chunks
/// that alternate between the streams while both have some left.
struct Interleaved {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Interleaved {
    fn new(generate: fn(usize, u64) -> Vec<u8>, seed: u64) -> Self {
        Self {
            stdout: generate(OUTPUT_LEN / 2, seed),
            stderr: generate(OUTPUT_LEN / 2, seed + 1),
        }
    }

    fn len(&self) -> u64 {
        (self.stdout.len() + self.stderr.len()) as u64
    }

    /// `(stream, chunk)` in arrival order; stream 0 is stdout.
    fn chunks(&self) -> Vec<(usize, &[u8])> {
        let mut stdout = self.stdout.chunks(CHUNK).map(|chunk| (0, chunk));
        let mut stderr = self.stderr.chunks(CHUNK).map(|chunk| (1, chunk));
        let mut arrival = Vec::new();
        loop {
            match (stdout.next(), stderr.next()) {
                (None, None) => return arrival,
                (first, second) => arrival.extend(first.into_iter().chain(second)),
            }
        }
    }
}

fn memchr_newlines(chunks: &[(usize, &[u8])]) -> usize {
    chunks
        .iter()
        .map(|(_, chunk)| memchr::memchr_iter(b'\n', chunk).count())
        .sum()
}

/// Frames every chunk like the marker parser does, then the result block, and checks the
/// verdict so a framing regression cannot pass for a speed-up.
fn frame(chunks: &[(usize, &[u8])]) -> MarkerVerdict {
    let mut framers = [
        StreamFramer::new(OutputStream::Stdout),
        StreamFramer::new(OutputStream::Stderr),
    ];
    for &(stream, chunk) in chunks {
        framers[stream].feed(chunk);
    }
    let [mut stdout, stderr] = framers;
    stdout.feed(b"\n<phase-complete>ok</phase-complete>\n");
    let verdict = combine(stdout.finish(), stderr.finish());
    assert!(
        matches!(verdict, MarkerVerdict::Result(_)),
        "unexpected verdict {verdict:?}"
    );
    verdict
}

/// Filters every chunk like the transcript writer's console echo does.
fn filter_live(chunks: &[(usize, &[u8])], visible: &mut Vec<u8>) {
    let mut filters = [LiveFilter::new(), LiveFilter::new()];
    for &(stream, chunk) in chunks {
        visible.clear();
        filters[stream].filter(chunk, visible);
        black_box(&visible);
    }
}

fn marker_framing(c: &mut Criterion) {
    for (name, generate) in [
        ("mixed", common::agent_output as fn(usize, u64) -> Vec<u8>),
        ("plain", common::plain_output),
    ] {
        let output = Interleaved::new(generate, 1);
        let chunks = output.chunks();
        let mut group = c.benchmark_group(format!("marker_framing/{name}"));
        group.throughput(Throughput::Bytes(output.len()));
        group.sampling_mode(SamplingMode::Flat);
        group.bench_function("baseline/memchr_newlines", |b| {
            b.iter(|| memchr_newlines(black_box(&chunks)))
        });
        group.bench_function("framer", |b| b.iter(|| frame(black_box(&chunks))));
        let mut visible = Vec::with_capacity(CHUNK);
        group.bench_function("live_filter", |b| {
            b.iter(|| filter_live(black_box(&chunks), &mut visible))
        });
        group.bench_function("framer_and_live_filter", |b| {
            b.iter(|| {
                filter_live(black_box(&chunks), &mut visible);
                frame(black_box(&chunks))
            })
        });
        group.finish();
    }
}

fn stop_scanner(c: &mut Criterion) {
    let output = Interleaved::new(common::agent_output, 3);
    let chunks = output.chunks();
    let mut group = c.benchmark_group("stop_scanner");
    group.throughput(Throughput::Bytes(output.len()));
    group.sampling_mode(SamplingMode::Flat);
    group.bench_function("baseline/memchr_newlines", |b| {
        b.iter(|| memchr_newlines(black_box(&chunks)))
    });
    for (name, patterns, uses_nfa) in scanner_cases() {
        let texts: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
        let patterns = Arc::new(StopPatterns::compile(&texts).expect("patterns compile"));
        assert_eq!(
            !patterns.nfa_patterns().is_empty(),
            uses_nfa,
            "{name}: unexpected path"
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut scanner = StopScanner::new(Arc::clone(&patterns));
                for &(_, chunk) in &chunks {
                    assert!(scanner.feed(chunk).is_none(), "no pattern matches");
                }
                scanner.finish()
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
}

criterion_group! {
    name = benches;
    config = config();
    targets = marker_framing, stop_scanner
}
criterion_main!(benches);
