//! The agent command template (SPEC §5; reference §4): POSIX shell-word splitting first, then
//! exactly five named placeholders in each word, `{{`/`}}` for literal braces, and every other
//! brace form rejected with a message quoting the field.

/// A template that failed validation; the message quotes the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The values substituted into a template.
#[derive(Clone, Debug)]
pub struct PlaceholderValues<'a> {
    pub prompt_file: &'a str,
    pub workspace: &'a str,
    pub run_id: &'a str,
    pub transcript_file: &'a str,
    pub state_file: &'a str,
}

/// A validated template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandTemplate {
    raw: String,
}

impl CommandTemplate {
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        let _ = raw;
        todo!()
    }

    /// The template as the user wrote it.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The argv with placeholders substituted; substituted values never split or requote.
    pub fn render(&self, values: &PlaceholderValues<'_>) -> Vec<String> {
        let _ = values;
        todo!()
    }
}

/// Quotes argv for display like POSIX `shlex.join`.
pub fn shell_join(argv: &[String]) -> String {
    let _ = argv;
    todo!()
}
