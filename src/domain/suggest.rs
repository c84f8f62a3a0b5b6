//! "Did you mean …?": the known name nearest to a misspelt one. Names are compared without
//! case, `_`, `-` and spaces, by edit distance; a candidate is near when at most a third of the
//! longer name (at least one edit) differs.

/// The candidate nearest to `word`, if one is near enough; the first of equally near ones.
pub(crate) fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = normalized(word);
    candidates
        .iter()
        .map(|candidate| {
            let other = normalized(candidate);
            (
                distance(&word, &other),
                other.len().max(word.len()),
                *candidate,
            )
        })
        .filter(|(distance, longer, _)| *distance <= (longer / 3).max(1))
        .min_by_key(|(distance, _, _)| *distance)
        .map(|(_, _, candidate)| candidate)
}

fn normalized(name: &str) -> Vec<char> {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Optimal-string-alignment distance: Levenshtein plus the swap of two neighbours.
fn distance(a: &[char], b: &[char]) -> usize {
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 0..=a.len() {
        rows[at(i, 0)] = i;
    }
    for j in 0..=b.len() {
        rows[at(0, j)] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[at(i - 1, j)] + 1)
                .min(rows[at(i, j - 1)] + 1)
                .min(rows[at(i - 1, j - 1)] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[at(i - 2, j - 2)] + 1);
            }
            rows[at(i, j)] = best;
        }
    }
    rows[at(a.len(), b.len())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PLACEHOLDERS: [&str; 5] = [
        "prompt_file",
        "workspace",
        "run_id",
        "transcript_file",
        "state_file",
    ];

    #[test]
    fn misspellings_find_the_name_meant() {
        for (typed, meant) in [
            ("promptfile", "prompt_file"),
            ("prompt-file", "prompt_file"),
            ("PROMPT_FILE", "prompt_file"),
            ("prompt_fiel", "prompt_file"),
            ("promt_file", "prompt_file"),
            ("workspce", "workspace"),
            ("work_space", "workspace"),
            ("runid", "run_id"),
            ("run_di", "run_id"),
            ("transcript", "transcript_file"),
            ("statefile", "state_file"),
        ] {
            assert_eq!(nearest(typed, &PLACEHOLDERS), Some(meant), "{typed}");
        }
    }

    #[test]
    fn unrelated_names_find_nothing() {
        for typed in ["file", "x", "plan", "output", "prompt_path_and_more"] {
            assert_eq!(nearest(typed, &PLACEHOLDERS), None, "{typed}");
        }
    }

    #[test]
    fn distances_count_each_edit_once() {
        let d = |a: &str, b: &str| {
            distance(
                &a.chars().collect::<Vec<_>>(),
                &b.chars().collect::<Vec<_>>(),
            )
        };
        assert_eq!(d("", ""), 0);
        assert_eq!(d("abc", ""), 3);
        assert_eq!(d("abc", "abc"), 0);
        assert_eq!(d("abc", "acb"), 1);
        assert_eq!(d("kitten", "sitting"), 3);
    }

    proptest! {
        #[test]
        fn a_known_name_is_its_own_nearest(index in 0..PLACEHOLDERS.len()) {
            prop_assert_eq!(nearest(PLACEHOLDERS[index], &PLACEHOLDERS), Some(PLACEHOLDERS[index]));
        }

        #[test]
        fn any_text_gives_an_answer_without_panicking(word in ".{0,40}") {
            if let Some(found) = nearest(&word, &PLACEHOLDERS) {
                prop_assert!(PLACEHOLDERS.contains(&found));
            }
        }
    }
}
