//! The streaming stop-regex scanner against `regex::bytes::Regex::is_match` on the text
//! received so far.
//!
//! Input: a chunk plan (see `split_input`), one byte choosing a fixed pattern set, then the
//! output. The scanner is fed chunk by chunk, then finished. It must report at the first chunk
//! after which some pattern matches everything received so far (the original re-ran
//! `re.search` over its history after every read), naming the lowest such pattern index, and
//! nothing before or after that. Without any chunk, `finish` decides on the empty text.
#![no_main]

use std::sync::{Arc, OnceLock};

use ai_session_handler::domain::stop_regex::{StopPatterns, StopScanner};
use ai_session_handler_fuzz::split_input;
use libfuzzer_sys::fuzz_target;
use regex::bytes::Regex;

/// Pattern sets: DFA path only; NFA path only (Unicode word boundaries, whose look-around
/// spans a codepoint on either side of a seam); both paths in one set; look-around at seams;
/// a multi-line block pattern. Patterns that match empty text are refused by `compile`, so none
/// is here.
const PATTERN_SETS: [&[&str]; 5] = [
    &[
        r"(?m)^FATAL: .*$",
        r"done$",
        r"(?-u:\b)error(?-u:\b)",
        r"a[bc]{2,4}d",
    ],
    &[r"\bpanic\b", r"\Bé\w", r"\<stop\>", r"日本\b{end}"],
    &[r"\bpanic\b", r"(?i)stop now", r"x{3}$", r"(?-u:\xff)\x00"],
    &[r"(?m)^$\n", r"ok\z", r"\Aboot", r"(?-u:\B)ok(?-u:\b)"],
    &[
        r"(?s)<phase-complete>.*</phase-complete>",
        r"\w{3}\b!",
        r"[0-9]+ failed",
        r"zz",
    ],
];

struct Compiled {
    patterns: Arc<StopPatterns>,
    regexes: Vec<Regex>,
}

fn compiled(set: usize) -> &'static Compiled {
    static SETS: [OnceLock<Compiled>; PATTERN_SETS.len()] =
        [const { OnceLock::new() }; PATTERN_SETS.len()];
    SETS[set].get_or_init(|| {
        let texts: Vec<String> = PATTERN_SETS[set].iter().map(|p| (*p).to_owned()).collect();
        Compiled {
            patterns: Arc::new(StopPatterns::compile(&texts).expect("fixed patterns compile")),
            regexes: texts
                .iter()
                .map(|p| Regex::new(p).expect("valid"))
                .collect(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let (plan, payload) = split_input(data);
    let Some((&selector, output)) = payload.split_first() else {
        return;
    };
    let set = compiled(usize::from(selector) % PATTERN_SETS.len());
    let lowest_match = |text: &[u8]| set.regexes.iter().position(|regex| regex.is_match(text));

    let mut scanner = StopScanner::new(Arc::clone(&set.patterns));
    let mut received = 0;
    let mut reported = false;
    for chunk in plan.chunks(output, 0) {
        received += chunk.len();
        let found = scanner.feed(chunk);
        if reported {
            assert_eq!(found, None, "a latched scanner reports nothing");
            continue;
        }
        let expected = lowest_match(&output[..received]);
        assert_eq!(
            found.as_ref().map(|found| found.index),
            expected,
            "after {received} bytes"
        );
        if let Some(found) = found {
            assert_eq!(found.pattern, set.regexes[found.index].as_str());
            reported = true;
        }
    }
    let at_end = scanner.finish().map(|found| found.index);
    if output.is_empty() {
        assert_eq!(at_end, lowest_match(b""), "finish without any chunk");
    } else {
        assert_eq!(at_end, None, "every chunk was already decided");
    }
    assert_eq!(scanner.finish(), None, "a finished scanner is spent");
});
