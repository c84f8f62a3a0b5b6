//! "Did you mean …?": the known name nearest to a misspelt one. Names are compared without
//! case, `_`, `-` and spaces, by edit distance (swapping two neighbours is one edit); a
//! candidate is near when at most a third of the longer name (at least one edit) differs.

/// The candidate nearest to `word`, if one is near enough; the first of equally near ones.
pub(crate) fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = normalized(word);
    candidates
        .iter()
        .map(|candidate| {
            let other = normalized(candidate);
            let longer = other.chars().count().max(word.chars().count());
            (strsim::osa_distance(&word, &other), longer, *candidate)
        })
        .filter(|(distance, longer, _)| *distance <= (longer / 3).max(1))
        .min_by_key(|(distance, _, _)| *distance)
        .map(|(_, _, candidate)| candidate)
}

fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
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
        let d = strsim::osa_distance;
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
