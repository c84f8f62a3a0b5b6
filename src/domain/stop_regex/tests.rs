//! Tests of the streaming scanner: both paths against `regex` as the oracle over random chunkings,
//! chunk-boundary and end-of-input corners, the NFA path's limits, and pattern kinds.

use super::set::CompileOptions;
use super::*;
use proptest::prelude::*;
use regex::bytes::Regex;

/// The 0-based step that reported (`chunks.len()` for `finish`) and the matched index.
type Verdict = Option<(usize, usize)>;

fn compile(patterns: &[&str]) -> Arc<StopPatterns> {
    let owned: Vec<String> = patterns.iter().map(|&p| p.to_owned()).collect();
    Arc::new(StopPatterns::compile(&owned).unwrap())
}

/// Like `compile`, but also takes patterns that match empty text (the engines handle them;
/// only validation refuses them) and reaches the paths' corners.
fn compile_with(patterns: &[String], options: CompileOptions) -> Arc<StopPatterns> {
    let options = CompileOptions {
        refuse_empty_matches: false,
        ..options
    };
    Arc::new(StopPatterns::compile_with(patterns, options).unwrap())
}

fn owned(patterns: &[&str]) -> Vec<String> {
    patterns.iter().map(|&p| p.to_owned()).collect()
}

fn nfa_only() -> CompileOptions {
    CompileOptions {
        nfa_only: true,
        ..CompileOptions::default()
    }
}

/// Every way the same patterns can be compiled: as routed, all on the NFA path, and all on
/// the NFA path with a cache that is cleared at every new state.
fn all_routes(patterns: &[&str]) -> Vec<Arc<StopPatterns>> {
    let patterns = owned(patterns);
    vec![
        compile_with(&patterns, CompileOptions::default()),
        compile_with(&patterns, nfa_only()),
        compile_with(
            &patterns,
            CompileOptions {
                nfa_cache_budget: 0,
                ..nfa_only()
            },
        ),
    ]
}

/// Feeds the chunks and finishes; returns the 0-based step that reported (`chunks.len()`
/// for `finish`) and the matched index. Also checks the scanner reports at most once.
fn first_match(patterns: &Arc<StopPatterns>, chunks: &[&[u8]]) -> Verdict {
    let mut scanner = StopScanner::new(Arc::clone(patterns));
    let mut reported = Vec::new();
    for (step, chunk) in chunks.iter().enumerate() {
        if let Some(found) = scanner.feed(chunk) {
            reported.push((step, found));
        }
    }
    if let Some(found) = scanner.finish() {
        reported.push((chunks.len(), found));
    }
    assert!(reported.len() <= 1, "reported more than once: {reported:?}");
    reported.into_iter().next().map(|(step, found)| {
        assert_eq!(found.pattern, patterns.patterns()[found.index]);
        (step, found.index)
    })
}

/// `first_match` on every route, which must agree.
fn first_match_on_all_routes(patterns: &[&str], chunks: &[&[u8]]) -> Verdict {
    let verdicts: Vec<_> = all_routes(patterns)
        .iter()
        .map(|compiled| first_match(compiled, chunks))
        .collect();
    assert!(
        verdicts.windows(2).all(|pair| pair[0] == pair[1]),
        "routes disagree on {patterns:?} over {chunks:?}: {verdicts:?}"
    );
    verdicts[0]
}

/// What the original computed: after each chunk, the lowest-index pattern that matches
/// anywhere in everything received so far.
fn whole_history_verdict(patterns: &[String], chunks: &[Vec<u8>]) -> Verdict {
    let regexes: Vec<Regex> = patterns.iter().map(|p| Regex::new(p).unwrap()).collect();
    let lowest_in = |history: &[u8]| regexes.iter().position(|re| re.is_match(history));
    let mut history = Vec::new();
    for (step, chunk) in chunks.iter().enumerate() {
        history.extend_from_slice(chunk);
        if let Some(index) = lowest_in(&history) {
            return Some((step, index));
        }
    }
    if chunks.is_empty() {
        return lowest_in(&history).map(|index| (0, index));
    }
    None
}

fn slices(chunks: &[Vec<u8>]) -> Vec<&[u8]> {
    chunks.iter().map(Vec::as_slice).collect()
}

#[test]
fn matches_are_reported_at_the_chunk_that_completes_them() {
    let patterns = ["rate limit", "(?m)^FATAL: .*$"];
    let first = |chunks: &[&[u8]]| first_match_on_all_routes(&patterns, chunks);
    assert_eq!(
        first(&[b"xx rate li", b"mit reached", b"more"]),
        Some((1, 0))
    );
    assert_eq!(first(&[b"xx rate li", b"mit"]), Some((1, 0)));
    assert_eq!(
        first(&[b"ok\nFATAL: bo", b"om\nmore"]),
        Some((0, 1)),
        "the peek treats the current end as end of text"
    );
    assert_eq!(
        first(&[b"rate", b" li", b"m-it; ratelimit; FATAL: mid-line"]),
        None
    );
}

#[test]
fn an_end_anchored_pattern_matches_trailing_output_without_newline() {
    // The original runner searched the whole output after every chunk, so `$` matched at
    // the end of what had arrived (docs/decisions.md).
    let patterns = ["final stop text$"];
    let first = |chunks: &[&[u8]]| first_match_on_all_routes(&patterns, chunks);
    assert_eq!(
        first(&[b"ordinary output\n", b"final stop text"]),
        Some((1, 0))
    );
    assert_eq!(first(&[b"ordinary output\nfinal stop text"]), Some((0, 0)));
    assert_eq!(
        first(&[b"final stop text", b"\nmore"]),
        Some((0, 0)),
        "`$` means the end of what has arrived so far"
    );
    assert_eq!(first(&[b"final stop text\nmore"]), None);
}

#[test]
fn finish_decides_patterns_that_match_empty_output() {
    // Refused by validation, but the paths must still get them right.
    for pattern in ["^$", r"\A\B\z", ""] {
        assert_eq!(
            first_match_on_all_routes(&[pattern], &[]),
            Some((0, 0)),
            "{pattern:?}"
        );
        assert_eq!(
            first_match_on_all_routes(&[pattern], &[b""]),
            Some((0, 0)),
            "{pattern:?}"
        );
    }
    assert_eq!(first_match_on_all_routes(&["^$"], &[b"x"]), None);
    assert_eq!(first_match_on_all_routes(&[""], &[b"abc"]), Some((0, 0)));
}

#[test]
fn chunks_of_both_streams_form_one_text() {
    let stdout_chunk: &[u8] = b"429: rate ";
    let stderr_chunk: &[u8] = b"limit";
    assert_eq!(
        first_match_on_all_routes(&["rate limit"], &[stdout_chunk, stderr_chunk]),
        Some((1, 0))
    );
}

#[test]
fn line_anchors_hold_across_chunk_seams() {
    let line = ["(?m)^FATAL"];
    assert_eq!(first_match_on_all_routes(&line, &[b"x", b"FATAL"]), None);
    assert_eq!(
        first_match_on_all_routes(&line, &[b"x\n", b"FATAL"]),
        Some((1, 0))
    );
    assert_eq!(
        first_match_on_all_routes(&line, &[b"FAT", b"AL"]),
        Some((1, 0))
    );
    let ascii_word = [r"(?-u:\b)stop(?-u:\b)"];
    assert_eq!(
        first_match_on_all_routes(&ascii_word, &[b"non", b"stop"]),
        None
    );
    assert_eq!(
        first_match_on_all_routes(&ascii_word, &[b"non ", b"stop", b"s"]),
        Some((1, 0))
    );
}

#[test]
fn the_lowest_index_matching_in_the_deciding_chunk_wins() {
    assert_eq!(
        first_match_on_all_routes(&["b", "a"], &[b"ab"]),
        Some((0, 0))
    );
    assert_eq!(
        first_match_on_all_routes(&["b", "a"], &[b"a", b"b"]),
        Some((0, 1))
    );
    assert_eq!(
        first_match_on_all_routes(&["zzz", "y", "x"], &[b"..x..y.."]),
        Some((0, 1))
    );
}

#[test]
fn a_lower_index_on_either_path_wins_the_chunk() {
    // `\bz\b` takes the NFA path, `a` the DFA path.
    let patterns = compile(&[r"\bz\b", "a"]);
    assert_eq!(patterns.nfa_patterns(), [r"\bz\b"]);
    assert_eq!(first_match(&patterns, &[b"a z"]), Some((0, 0)));
    assert_eq!(first_match(&patterns, &[b"a", b" z"]), Some((0, 1)));
    let reversed = compile(&["a", r"\bz\b"]);
    assert_eq!(first_match(&reversed, &[b"z a"]), Some((0, 0)));
    assert_eq!(first_match(&reversed, &[b"z"]), Some((0, 1)));
}

#[test]
fn the_scanner_latches_after_the_first_match() {
    for patterns in all_routes(&["one", "two"]) {
        let mut scanner = StopScanner::new(Arc::clone(&patterns));
        assert_eq!(scanner.feed(b"nothing"), None);
        assert_eq!(
            scanner.feed(b"two"),
            Some(StopMatch {
                index: 1,
                pattern: "two".to_owned(),
                kind: PatternKind::StopRegex,
            })
        );
        assert_eq!(scanner.feed(b"one"), None);
        assert_eq!(scanner.finish(), None);
    }
}

#[test]
fn input_after_finish_is_ignored() {
    for patterns in all_routes(&["x"]) {
        let mut scanner = StopScanner::new(patterns);
        assert_eq!(scanner.finish(), None);
        assert_eq!(scanner.feed(b"x"), None);
    }
}

#[test]
fn no_patterns_never_match() {
    let mut scanner = StopScanner::new(compile(&[]));
    assert!(scanner.dfa_state.is_none() && scanner.nfa_stream.is_none());
    assert_eq!(scanner.feed(b"anything at all"), None);
    assert_eq!(scanner.finish(), None);
}

#[test]
fn dfa_only_patterns_have_no_nfa_stream() {
    let scanner = StopScanner::new(compile(&["never", r"(?-u:\b)x"]));
    assert!(scanner.nfa_stream.is_none());
}

#[test]
fn a_dead_dfa_stops_scanning() {
    let patterns = compile(&[r"\Afoo"]);
    let mut scanner = StopScanner::new(Arc::clone(&patterns));
    assert_eq!(scanner.feed(b"xf"), None);
    assert_eq!(scanner.dfa_state, None, "no match is possible any more");
    assert_eq!(scanner.feed(b"foo"), None);
    assert_eq!(scanner.finish(), None);
    assert_eq!(first_match(&patterns, &[b"fo", b"o!"]), Some((1, 0)));
}

#[test]
fn a_dead_nfa_path_stops_scanning() {
    let patterns = compile(&[r"\A\bfoo\b"]);
    assert_eq!(patterns.nfa_patterns(), [r"\A\bfoo\b"]);
    let mut scanner = StopScanner::new(Arc::clone(&patterns));
    assert_eq!(scanner.feed(b"xfoo foo"), None);
    assert!(scanner.nfa_stream.as_ref().unwrap().is_dead());
    assert_eq!(scanner.feed(b" foo "), None);
    assert_eq!(scanner.finish(), None);
    assert_eq!(first_match(&patterns, &[b"fo", b"o"]), Some((1, 0)));
    assert_eq!(first_match(&patterns, &[b"fo", b"o", b"d"]), Some((1, 0)));
    assert_eq!(first_match(&patterns, &[b"fo", b"od"]), None);
}

#[test]
fn a_unicode_word_boundary_streams_and_matches_at_seams() {
    let patterns = compile(&["rate limit", r"\bstop\b"]);
    assert_eq!(patterns.nfa_patterns(), [r"\bstop\b"]);
    assert_eq!(
        first_match(&patterns, &[b"please st", b"op now"]),
        Some((1, 1))
    );
    assert_eq!(first_match(&patterns, &[b"nonstop", b"ping"]), None);
    assert_eq!(first_match(&patterns, &[b"non", b"stop", b"ping"]), None);
    assert_eq!(
        first_match(&patterns, &["éstop".as_bytes()]),
        None,
        "é is a Unicode word character"
    );
    assert_eq!(
        first_match(&patterns, &[b"\xc3", b"\xa9st", b"op"]),
        None,
        "é split across chunks is still a word character before `stop`"
    );
    assert_eq!(
        first_match(&patterns, &[b"stop\xc3", b"\xa9"]),
        Some((0, 1)),
        "an unfinished codepoint at the end of the text so far is not a word character"
    );
    assert_eq!(
        first_match(&patterns, &["stopé".as_bytes()]),
        None,
        "but the finished codepoint é is"
    );
    assert_eq!(
        first_match(&patterns, &[b"\xffstop\xff"]),
        Some((0, 1)),
        "invalid UTF-8 is not a word character"
    );
    assert_eq!(
        first_match(&patterns, &[b"stop", b" rate limit"]),
        Some((0, 1))
    );
    assert_eq!(
        first_match(&patterns, &[b"rate limit and stop"]),
        Some((0, 0))
    );
}

#[test]
fn unicode_word_boundary_variants_hold_across_seams() {
    let cases: [(&str, &[&[u8]], Verdict); 8] = [
        (r"\Bop\B", &[b"st", b"op", b"s"], Some((2, 0))),
        (r"\Bop\B", &[b"st", b"op"], None),
        (r"\<stop", &["日".as_bytes(), b"stop"], None),
        (r"\<stop", &["日 ".as_bytes(), b"stop"], Some((1, 0))),
        (r"本\>", &["日本".as_bytes(), b"a"], Some((0, 0))),
        (r"本\>", &["日本".as_bytes(), "語".as_bytes()], Some((0, 0))),
        (r"本\b{end}x", &["日本".as_bytes(), b"x"], None),
        (r"\b{start-half}x", &[b"-", b"x"], Some((1, 0))),
    ];
    for (pattern, chunks, expected) in cases {
        let chunks_owned: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        assert_eq!(
            whole_history_verdict(&owned(&[pattern]), &chunks_owned),
            expected,
            "reference for {pattern:?} over {chunks:?}"
        );
        assert_eq!(
            first_match_on_all_routes(&[pattern], chunks),
            expected,
            "{pattern:?} over {chunks:?}"
        );
    }
}

#[test]
fn an_ascii_word_boundary_uses_the_dfa() {
    let patterns = compile(&[r"(?-u:\b)stop(?-u:\b)"]);
    assert!(patterns.nfa_patterns().is_empty());
    assert_eq!(first_match(&patterns, &[b"please stop now"]), Some((0, 0)));
    assert_eq!(first_match(&patterns, &[b"nonstop"]), None);
}

#[test]
fn an_exponential_pattern_streams_in_bounded_memory() {
    let exponential = r"\b(a|b)*a(a|b){20}";
    let patterns = compile(&["rate limit", exponential]);
    assert_eq!(patterns.nfa_patterns(), [exponential]);
    let hit = format!("xx {}", "a".repeat(21));
    assert_eq!(first_match(&patterns, &[hit.as_bytes()]), Some((0, 1)));
    assert_eq!(first_match(&patterns, &[b"xx a", &[b'b'; 19]]), None);
    assert_eq!(first_match(&patterns, &[b"rate limit"]), Some((0, 0)));

    // Random a/b output visits up to 2^21 thread sets: the cache must be cleared rather
    // than grow, and the verdict must not change.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut noise = Vec::with_capacity(1 << 16);
    noise.push(b' ');
    while noise.len() < 1 << 16 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        noise.push(if seed & 1 == 0 { b'a' } else { b'b' });
    }
    // Every 21st-from-last `a` ends a match; keep only output with no `a` 21 bytes back.
    let never = Arc::new(
        StopPatterns::compile_with(
            &owned(&[r"\b(a|b)*a(a|b){20}c"]),
            CompileOptions {
                nfa_cache_budget: 64 << 10,
                ..CompileOptions::default()
            },
        )
        .unwrap(),
    );
    let mut scanner = StopScanner::new(Arc::clone(&never));
    for chunk in noise.chunks(4096) {
        assert_eq!(scanner.feed(chunk), None);
    }
    let stream = scanner.nfa_stream.as_ref().unwrap();
    assert!(stream.cache_clears() > 0, "the cache was never cleared");
    assert!(
        stream.cache_memory() <= (64 << 10) + (16 << 10),
        "{} bytes cached",
        stream.cache_memory()
    );
    assert_eq!(scanner.feed(b"c"), None, "no `a` 21 bytes before the `c`");
    let mut hit = noise.clone();
    hit.extend_from_slice(b"a");
    hit.extend_from_slice(&[b'b'; 20]);
    hit.push(b'c');
    assert_eq!(
        first_match(&never, &[&hit[..40_000], &hit[40_000..]]),
        Some((1, 0))
    );
}

#[test]
fn a_peek_that_clears_the_cache_keeps_the_real_state() {
    // With no budget every new state clears the cache, also during the end-of-chunk peek;
    // the walk must resume from where it really was, not from where the peek got to.
    let patterns = compile_with(
        &owned(&[r"\babcd\b", r"\bzz\b"]),
        CompileOptions {
            nfa_cache_budget: 0,
            ..nfa_only()
        },
    );
    let mut scanner = StopScanner::new(Arc::clone(&patterns));
    assert_eq!(scanner.feed(b"xx a"), None);
    assert_eq!(scanner.feed(b"bc"), None);
    let clears = scanner.nfa_stream.as_ref().unwrap().cache_clears();
    assert!(clears > 0, "no clear happened");
    assert_eq!(
        scanner.feed(b"d "),
        Some(StopMatch {
            index: 0,
            pattern: r"\babcd\b".to_owned(),
            kind: PatternKind::StopRegex,
        })
    );
    assert_eq!(first_match(&patterns, &[b"xx a", b"bc", b"de"]), None);
    assert_eq!(
        first_match(&patterns, &[b"xx a", b"b", b"c", b"d"]),
        Some((3, 0))
    );
}

#[test]
fn output_that_is_not_utf8_is_searched() {
    let patterns = ["stop", r"(?-u:\xFF)end"];
    assert_eq!(
        first_match_on_all_routes(&patterns, &[b"\xff\xfe st", b"op \xc3"]),
        Some((1, 0))
    );
    assert_eq!(
        first_match_on_all_routes(&patterns, &[b"\xc3", b"\xffend"]),
        Some((1, 1))
    );
    let unicode_dot = ["a.b"];
    assert_eq!(
        first_match_on_all_routes(&unicode_dot, &[b"a\xffb"]),
        None,
        "`.` is one codepoint"
    );
    assert_eq!(
        first_match_on_all_routes(&unicode_dot, &["a☃b".as_bytes()]),
        Some((0, 0))
    );
    assert_eq!(
        first_match_on_all_routes(
            &unicode_dot,
            &[&"a☃b".as_bytes()[..2], &"a☃b".as_bytes()[2..]]
        ),
        Some((1, 0)),
        "a codepoint split across chunks"
    );
}

#[test]
fn long_runs_without_a_literal_are_skipped_correctly() {
    let mut haystack = vec![b'.'; 100_000];
    haystack.extend_from_slice(b"needle");
    assert_eq!(
        first_match_on_all_routes(&["needle"], &[&haystack]),
        Some((0, 0))
    );
    assert_eq!(
        first_match_on_all_routes(&[r"\bneedle\b"], &[&haystack]),
        Some((0, 0))
    );
}

#[test]
fn a_literal_split_across_chunks_is_not_skipped() {
    let patterns = ["out of memory", "FATAL: "];
    let long_prefix = format!("{} out of me", ".".repeat(200));
    let first = |chunks: &[&[u8]]| first_match_on_all_routes(&patterns, chunks);
    assert_eq!(first(&[long_prefix.as_bytes(), b"mory"]), Some((1, 0)));
    assert_eq!(
        first(&[b"..............o", b"ut of memor", b"y"]),
        Some((2, 0))
    );
    assert_eq!(first(&[b"................FATAL:", b" x"]), Some((1, 1)));
    assert_eq!(first(&[b"................FATAL:", b"x "]), None);
}

#[test]
fn a_short_literal_does_not_hide_a_long_one_running_into_the_next_chunk() {
    // The literal search finds `f` near the chunk end; `out of me…` began before it and
    // only completes in the next chunk, so the walk must not jump past its start.
    let chunk = format!("{} out of me", ".".repeat(200));
    assert_eq!(
        first_match_on_all_routes(&["out of memory", r"f\w"], &[chunk.as_bytes(), b"mory"]),
        Some((1, 0))
    );
    assert_eq!(
        first_match_on_all_routes(
            &[r"\bout of memory\b", r"\bf\w"],
            &[chunk.as_bytes(), b"mory"]
        ),
        Some((1, 0))
    );
}

#[test]
fn a_skip_resumes_with_the_right_look_behind() {
    let word = [r"(?-u:\b)stop(?-u:\b)"];
    let unicode_word = [r"\bstop\b"];
    for word in [&word, &unicode_word] {
        assert_eq!(
            first_match_on_all_routes(word, &[b"nonstop, stops; xstop"]),
            None
        );
        assert_eq!(
            first_match_on_all_routes(word, &[b"nonstop, stops; stop."]),
            Some((0, 0))
        );
        assert_eq!(
            first_match_on_all_routes(word, &[b"nonstop", b"stop"]),
            None
        );
    }
    assert_eq!(
        first_match_on_all_routes(&unicode_word, &["éstop, stopé ".as_bytes()]),
        None
    );
    let line = ["(?m)^FATAL: "];
    assert_eq!(
        first_match_on_all_routes(&line, &[b"xFATAL: a FATAL: "]),
        None
    );
    assert_eq!(
        first_match_on_all_routes(&line, &[b"xFATAL: a\nFATAL: "]),
        Some((0, 0))
    );
    assert_eq!(
        first_match_on_all_routes(&line, &[b"xFATAL: a\n", b"FATAL: "]),
        Some((1, 0))
    );
    let text_start = compile(&[r"\AFATAL: "]);
    assert_eq!(first_match(&text_start, &[b"FATAL: "]), Some((0, 0)));
    let mut scanner = StopScanner::new(text_start);
    assert_eq!(scanner.feed(b"xx FATAL: "), None);
    assert_eq!(scanner.dfa_state, None, "no match is possible any more");
}

#[test]
fn false_candidates_and_unfinished_matches_are_not_lost() {
    // `error\nfatal` and `(?m)^FATAL: .*$` share no literal with most of the text, but
    // "error" and "FATAL" alone are frequent; only the full literal is a candidate.
    let patterns = [r"error\nfatal", r"(?m)^FATAL: .*$"];
    let text = b"error[E0308]: x\nFATAL warning\nerror\nfat".repeat(100);
    let first = |chunks: &[&[u8]]| first_match_on_all_routes(&patterns, chunks);
    assert_eq!(first(&[&text]), None);
    assert_eq!(first(&[&text, b"al"]), Some((1, 0)));
    assert_eq!(first(&[&text, b"al\nFATAL: x"]), Some((1, 0)));
    assert_eq!(
        first(&[b"\nFATAL: abc", &text]),
        Some((0, 1)),
        "a match in progress is decided at the chunk end"
    );
}

#[test]
fn one_byte_chunks_carry_the_look_around_across_every_seam() {
    let text = "x stop. é stopé 日本 stop\r\nFATAL: stop";
    for pattern in [r"\bstop\b", r"\Bop\b", r"(?m)^FATAL: \w+$", r"本\b", r"\bé"] {
        let chunks: Vec<Vec<u8>> = text.bytes().map(|byte| vec![byte]).collect();
        let expected = whole_history_verdict(&owned(&[pattern]), &chunks);
        assert_eq!(
            first_match_on_all_routes(&[pattern], &slices(&chunks)),
            expected,
            "{pattern:?}"
        );
    }
}

/// Patterns from a small grammar over a few letters, multibyte characters, newlines and
/// every kind of assertion `regex` has, Unicode word boundaries included.
fn pattern() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("a"),
        Just("b"),
        Just("é"),
        Just("日"),
        Just(r"\n"),
        Just(r"\r"),
        Just(" "),
        Just("."),
        Just("(?s:.)"),
        Just("[ab]"),
        Just("[^a]"),
        Just(r"\w"),
        Just(r"\W"),
        Just(r"(?-u:\xff)"),
        Just(r"(?-u:[\x80-\xff])"),
        Just("^"),
        Just("$"),
        Just("(?m:^)"),
        Just("(?m:$)"),
        Just("(?Rm:^)"),
        Just("(?Rm:$)"),
        Just(r"(?-u:\b)"),
        Just(r"(?-u:\B)"),
        Just(r"\b"),
        Just(r"\B"),
        Just(r"\<"),
        Just(r"\>"),
        Just(r"\b{start-half}"),
        Just(r"\b{end-half}"),
        Just(r"\A"),
        Just(r"\z"),
    ]
    .prop_map(str::to_owned);
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}{b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(?:{a}|{b})")),
            inner.clone().prop_map(|a| format!("(?:{a})*")),
            inner.clone().prop_map(|a| format!("(?:{a})+")),
            inner.clone().prop_map(|a| format!("(?:{a})?")),
            inner.prop_map(|a| format!("(?:{a}){{1,3}}")),
        ]
    })
}

/// Output made of letters, separators, whole multibyte characters and bytes that are not
/// UTF-8, cut into chunks at random places (so codepoints are split across seams, and some
/// chunks are empty).
fn chunks() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let piece = prop_oneof![
        Just(&b"a"[..]),
        Just(&b"b"[..]),
        Just(&b"_"[..]),
        Just(&b"1"[..]),
        Just(&b" "[..]),
        Just(&b"\n"[..]),
        Just(&b"\r"[..]),
        Just("é".as_bytes()),
        Just("日".as_bytes()),
        Just("→".as_bytes()),
        Just(&b"\xff"[..]),
        Just(&b"\x80"[..]),
        Just(&b"\xc3"[..]),
        Just(&b"\xe6\x97"[..]),
    ];
    let text = proptest::collection::vec(piece, 0..14).prop_map(|pieces| pieces.concat());
    (
        text,
        proptest::collection::vec(any::<proptest::sample::Index>(), 0..6),
    )
        .prop_map(|(text, cuts)| cut(&text, &cuts))
}

/// `text` cut at the given places.
fn cut(text: &[u8], cuts: &[proptest::sample::Index]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(text.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain([text.len()]) {
        chunks.push(text[from..cut].to_vec());
        from = cut;
    }
    chunks
}

/// Literal texts for patterns to begin with and haystacks to be made of, each with a piece
/// of itself, so that a short literal often lies inside a longer one (and is found while
/// the longer one is still running into the next chunk). A text never starts with a
/// space: a lone space is too common to be worth a literal search.
fn literal_texts() -> impl Strategy<Value = Vec<String>> {
    use proptest::sample::Index;
    let text = ("[abc\n][abc\n ]{0,6}", any::<Index>(), any::<Index>());
    proptest::collection::vec(text, 1..4).prop_map(|texts| {
        let mut all = Vec::new();
        for (text, from, len) in texts {
            let from = from.index(text.len());
            let to = from + 1 + len.index(text.len() - from);
            let piece = text[from..to].trim_start_matches(' ');
            if !piece.is_empty() {
                all.push(piece.to_owned());
            }
            all.push(text);
        }
        all
    })
}

/// A pattern that begins (after optional look-behind assertions) with one or two of the
/// `texts`, possibly case-folded, followed by a tail with look-ahead assertions or one that
/// never matches.
fn literal_prefixed_pattern(texts: Vec<String>) -> impl Strategy<Value = String> {
    let text = proptest::sample::select(texts);
    let literal = (text, any::<bool>()).prop_map(|(text, fold_case)| {
        let flags = if fold_case { "i" } else { "" };
        format!("(?{flags}:{})", regex::escape(&text))
    });
    let literals = proptest::collection::vec(literal, 1..3)
        .prop_map(|alternatives| format!("(?:{})", alternatives.join("|")));
    let assertion = prop_oneof![
        Just(""),
        Just("^"),
        Just("(?m:^)"),
        Just(r"(?-u:\b)"),
        Just(r"(?-u:\B)"),
        Just(r"\A"),
        Just(r"(?m:^)(?-u:\b)"),
    ];
    let rest = prop_oneof![
        // Never matches these haystacks, and too large a class for the literal to go on:
        // a candidate that never becomes a match.
        4 => Just("[0-9D-Z]"),
        1 => Just(""),
        1 => Just("$"),
        1 => Just("(?m:$)"),
        1 => Just(r"(?-u:\b)"),
        1 => Just(r"\z"),
        1 => Just(r"b*\n(?m:^)c"),
        1 => Just(r"[^\n]*(?m:$)"),
        1 => Just(r"(?:a|b)+(?-u:\b)"),
        1 => Just(r"(?-u:\B)c?$"),
    ];
    (assertion, literals, rest)
        .prop_map(|(assertion, literals, rest)| format!("{assertion}{literals}{rest}"))
}

/// A haystack of the `texts`, whole or cut short, and noise over the same alphabet, cut
/// into chunks at random places (so literals straddle chunk seams).
fn chunked_haystack(texts: Vec<String>) -> impl Strategy<Value = Vec<Vec<u8>>> {
    let text = (
        proptest::sample::select(texts),
        any::<proptest::sample::Index>(),
    )
        .prop_map(|(text, cut)| {
            let keep = if cut.index(3) == 0 {
                cut.index(text.len() + 1)
            } else {
                text.len()
            };
            text.as_bytes()[..keep].to_vec()
        });
    let noise = proptest::collection::vec(
        prop_oneof![
            Just(b'a'),
            Just(b'b'),
            Just(b'c'),
            Just(b'\n'),
            Just(b' '),
            Just(b'x'),
            Just(b'B'),
        ],
        1..8,
    );
    let piece = prop_oneof![
        3 => text,
        2 => noise,
        1 => proptest::collection::vec(Just(b'x'), 1..40),
    ];
    let haystack = proptest::collection::vec(piece, 0..30).prop_map(|pieces| pieces.concat());
    (
        haystack,
        proptest::collection::vec(any::<proptest::sample::Index>(), 0..10),
    )
        .prop_map(|(haystack, cuts)| cut(&haystack, &cuts))
}

/// Literal-prefixed patterns (1 to 6, so that both one search per pattern and one shared
/// search occur) and a chunked haystack full of their literals and near misses.
fn literal_patterns_and_chunks() -> impl Strategy<Value = (Vec<String>, Vec<Vec<u8>>)> {
    literal_texts().prop_flat_map(|texts| {
        (
            proptest::collection::vec(literal_prefixed_pattern(texts.clone()), 1..7),
            chunked_haystack(texts),
        )
    })
}

/// Two patterns whose literals overlap, and output in which the longer one is cut by the
/// seam between two chunks while the shorter one, which never becomes a match, lies wholly
/// in the first chunk after the longer one's start.
fn literal_cut_by_a_seam() -> impl Strategy<Value = (Vec<String>, Vec<Vec<u8>>)> {
    use proptest::sample::Index;
    (
        "[abc\n][abc\n ]{1,8}",
        any::<Index>(),
        any::<Index>(),
        any::<Index>(),
        "[abc\n x]{0,40}",
        "[abc\n x]{0,10}",
    )
        .prop_map(|(long, from, len, cut, before, after)| {
            let from = from.index(long.len());
            let to = from + 1 + len.index(long.len() - from);
            let short = &long[from..to];
            let patterns = vec![
                regex::escape(&long),
                format!("{}[0-9D-Z]", regex::escape(short)),
            ];
            let cut = 1 + cut.index(long.len() - 1);
            let chunks = vec![
                format!("{before}{}", &long[..cut]).into_bytes(),
                format!("{}{after}", &long[cut..]).into_bytes(),
            ];
            (patterns, chunks)
        })
}

/// With the Unicode `\b` of the NFA path in place of every ASCII one.
fn with_unicode_word_boundaries(patterns: &[String]) -> Vec<String> {
    patterns
        .iter()
        .map(|pattern| {
            pattern
                .replace(r"(?-u:\b)", r"\b")
                .replace(r"(?-u:\B)", r"\B")
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn streaming_equals_searching_the_whole_history(
        patterns in proptest::collection::vec(pattern(), 1..4),
        chunks in chunks(),
        nfa_only in any::<bool>(),
        tiny_cache in any::<bool>(),
    ) {
        let options = CompileOptions {
            nfa_only,
            nfa_cache_budget: if tiny_cache { 0 } else { 2 << 20 },
            ..CompileOptions::default()
        };
        let compiled = compile_with(&patterns, options);
        prop_assert_eq!(
            first_match(&compiled, &slices(&chunks)),
            whole_history_verdict(&patterns, &chunks),
            "NFA path: {:?}", compiled.nfa_patterns()
        );
    }

    #[test]
    fn literal_skips_never_change_the_verdict(
        (patterns, chunks) in literal_patterns_and_chunks(),
    ) {
        let compiled = compile(&patterns.iter().map(String::as_str).collect::<Vec<_>>());
        let dfa = compiled.dfa.as_ref().unwrap();
        prop_assert!(compiled.nfa_patterns().is_empty());
        prop_assert!(dfa.literal_searches().is_some());
        let verdict = first_match(&compiled, &slices(&chunks));
        prop_assert_eq!(verdict, dfa.byte_by_byte_verdict(&chunks));
        prop_assert_eq!(verdict, whole_history_verdict(&patterns, &chunks));

        let unicode = with_unicode_word_boundaries(&patterns);
        let compiled = compile_with(&unicode, nfa_only());
        prop_assert!(compiled.nfa.as_ref().unwrap().has_literal_searches());
        prop_assert_eq!(
            first_match(&compiled, &slices(&chunks)),
            whole_history_verdict(&unicode, &chunks)
        );
    }

    #[test]
    fn a_literal_cut_by_a_seam_is_never_skipped(
        (patterns, chunks) in literal_cut_by_a_seam(),
    ) {
        let compiled = compile(&patterns.iter().map(String::as_str).collect::<Vec<_>>());
        let dfa = compiled.dfa.as_ref().unwrap();
        let verdict = first_match(&compiled, &slices(&chunks));
        prop_assert_eq!(verdict, dfa.byte_by_byte_verdict(&chunks));
        prop_assert_eq!(verdict, whole_history_verdict(&patterns, &chunks));
        let on_nfa = compile_with(&patterns, nfa_only());
        prop_assert_eq!(first_match(&on_nfa, &slices(&chunks)), verdict);
    }

    #[test]
    fn compile_and_scan_never_panic(
        patterns in proptest::collection::vec("[abc.*+?|()\\[\\]{}^$\\\\0-2AzBbu:<>-]{0,10}", 0..3),
        chunks in chunks(),
        nfa_only in any::<bool>(),
    ) {
        let options = CompileOptions { nfa_only, ..CompileOptions::default() };
        if let Ok(compiled) = StopPatterns::compile_with(&patterns, options) {
            first_match(&Arc::new(compiled), &slices(&chunks));
        }
    }
}
