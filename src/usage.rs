//! Command-line usage errors as one line, for the runner and the wrappers alike: a calling agent
//! reads stderr line by line, and a person wants the problem first.

/// Folds clap's rendered usage error into one line:
/// `error: unexpected argument '--plann' found; tip: a similar argument exists: '--plan'; see 'ai-session-handler run --help'`.
pub(crate) fn one_line(rendered: &str) -> String {
    let mut problem = String::new();
    let mut tips = Vec::new();
    let mut command = None;
    for paragraph in rendered.split("\n\n") {
        let text = paragraph
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() {
            continue;
        }
        if let Some(usage) = text.strip_prefix("Usage: ") {
            // `ai-session-handler run --plan <PATH>` → `ai-session-handler run`
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|word| !word.starts_with(['-', '<', '[']))
                .collect();
            command = Some(words.join(" "));
        } else if text.starts_with("tip:") {
            tips.push(text);
        } else if text.starts_with("For more information") {
        } else if problem.is_empty() {
            problem = text;
        } else {
            tips.push(text);
        }
    }
    let mut line = if problem.starts_with("error:") {
        problem
    } else {
        format!("error: {problem}")
    };
    for tip in tips {
        line.push_str("; ");
        line.push_str(&tip);
    }
    match command {
        Some(command) if !command.is_empty() => line.push_str(&format!("; see '{command} --help'")),
        _ => line.push_str("; see --help"),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unexpected_argument_with_a_tip() {
        let rendered = "error: unexpected argument '--plann' found\n\n  tip: a similar argument exists: '--plan'\n\nUsage: ai-session-handler run --plan <PATH>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: unexpected argument '--plann' found; tip: a similar argument exists: '--plan'; see 'ai-session-handler run --help'"
        );
    }

    #[test]
    fn missing_required_argument_keeps_its_name() {
        let rendered = "error: the following required arguments were not provided:\n  --plan <PATH>\n\nUsage: ai-session-handler status --plan <PATH>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: the following required arguments were not provided: --plan <PATH>; see 'ai-session-handler status --help'"
        );
    }

    #[test]
    fn invalid_value_without_usage() {
        assert_eq!(
            one_line("error: invalid value '0' for '--max-phases <N>': must be at least 1\n"),
            "error: invalid value '0' for '--max-phases <N>': must be at least 1; see --help"
        );
    }

    #[test]
    fn top_level_usage() {
        let rendered = "error: unrecognized subcommand 'bogus'\n\nUsage: ai-session-handler [OPTIONS] [COMMAND]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "error: unrecognized subcommand 'bogus'; see 'ai-session-handler --help'"
        );
    }
}
