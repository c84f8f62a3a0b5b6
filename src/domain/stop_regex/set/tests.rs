//! Unit tests of the stop-regex set: compilation, matching and its limits.

use super::*;

fn compile(patterns: &[&str]) -> Result<StopPatterns, StopPatternError> {
    let owned: Vec<String> = patterns.iter().map(|&p| p.to_owned()).collect();
    StopPatterns::compile(&owned)
}

#[test]
fn an_invalid_pattern_is_named_with_its_index() {
    let error = compile(&["fine", "[", "("]).unwrap_err();
    assert_eq!(
        error,
        StopPatternError {
            index: 1,
            pattern: "[".to_owned(),
            message: "unclosed character class".to_owned(),
        }
    );
    assert_eq!(
        error.to_string(),
        "invalid stop regex '[': unclosed character class"
    );
    let multi_line = compile(&["a\n("]).unwrap_err();
    assert_eq!(multi_line.message, "unclosed group");
}

#[test]
fn a_pattern_that_can_match_empty_text_is_refused() {
    for empty in [
        "",
        "^",
        "$",
        "x*",
        "(?:)",
        "a|",
        r"\b",
        r"\B",
        r"(?-u:\b)",
        "(?m)^$",
        r"\A",
        r"\z",
        "(?:x?)+",
        "[a-z]{0,3}",
        r"\b{start}",
    ] {
        let error = compile(&["fine", empty]).unwrap_err();
        assert_eq!(error.index, 1, "{empty:?}");
        assert_eq!(
            error.to_string(),
            format!(
                "invalid stop regex '{empty}': it matches empty text, so it would stop every attempt"
            )
        );
    }
}

#[test]
fn a_pattern_that_needs_at_least_one_byte_is_accepted() {
    for fine in [
        "(?m)^FATAL",
        "x+",
        r"\bstop\b",
        "done$",
        "(?m)^$\n",
        r"[^\s\S]", // can never match: harmless, it never stops anything
    ] {
        assert!(compile(&[fine]).is_ok(), "{fine:?}");
    }
}

#[test]
fn unicode_word_boundaries_take_the_nfa_path_and_the_rest_the_dfa() {
    let patterns = compile(&[
        "rate limit",
        r"\bstop\b",
        r"(?-u:\b)ascii(?-u:\b)",
        r"\<start",
        r"end\b{end}",
    ])
    .unwrap();
    assert_eq!(
        patterns.nfa_patterns(),
        [r"\bstop\b", r"\<start", r"end\b{end}"]
    );
    assert_eq!(patterns.dfa.as_ref().unwrap().pattern_indices, [0, 2]);
}

#[test]
fn patterns_that_only_fail_together_go_to_the_nfa_path_one_by_one() {
    // Each builds alone within 1 MiB (about 600 KiB each); together they do not, so the
    // later one goes to the NFA path.
    let owned = ["(a|b)*a(a|b){12}", "x", "(c|d)*c(c|d){12}", "y"].map(str::to_owned);
    let options = CompileOptions {
        dfa_size_limit: 1 << 20,
        ..CompileOptions::default()
    };
    let patterns = StopPatterns::compile_with(&owned, options).unwrap();
    assert_eq!(patterns.nfa_patterns(), ["(c|d)*c(c|d){12}"]);
    assert_eq!(patterns.dfa.as_ref().unwrap().pattern_indices, [0, 1, 3]);
}

#[test]
fn no_patterns_build_nothing() {
    let patterns = compile(&[]).unwrap();
    assert!(patterns.is_empty());
    assert!(patterns.dfa.is_none());
    assert!(patterns.nfa.is_none());
    assert!(patterns.nfa_patterns().is_empty());
}
