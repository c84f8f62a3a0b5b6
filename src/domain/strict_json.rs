//! Helpers for reading JSON strictly: exact key sets, typed fields, and error wording that
//! names the dotted key to fix (`missing required key sha256`, `unexpected key plan.version`).
//! Shared by the state, outcome and config readers so all three speak the same language.

/// Describes a JSON syntax error the way users read it:
/// `invalid JSON at line 1, column 2: EOF while parsing an object`.
pub fn describe_syntax_error(error: &serde_json::Error) -> String {
    let message = error.to_string();
    // serde_json appends " at line L column C"; drop it, we lead with the position instead.
    let detail = match message.rfind(" at line ") {
        Some(index) => &message[..index],
        None => message.as_str(),
    };
    // At end of input serde_json points at the last byte read; point one past it, at the
    // place where more input was expected (what Python's json module, and users, report).
    let column = if error.is_eof() {
        error.column() + 1
    } else {
        error.column()
    };
    format!(
        "invalid JSON at line {}, column {}: {}",
        error.line(),
        column,
        detail
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_error_names_line_and_column() {
        let error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let text = describe_syntax_error(&error);
        assert!(text.starts_with("invalid JSON at line 1, column 2: "), "{text}");
    }
}
