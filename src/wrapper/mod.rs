//! Library half of the provider wrapper binaries (`src/bin/ai-session-handler-*-*.rs`): what a
//! wrapper does and why is in docs/providers.md.

pub mod child;
pub mod claude;
pub mod codex;
pub mod descendants;
pub mod diagnostics;
pub mod final_result;
pub mod json_lines;
pub mod notifier;
pub mod prompt_echo;
pub mod rate_limit;
pub mod session;
pub mod summary;

/// Each wrapper binary's file name and the launcher it starts (looked up on its `PATH`).
pub const WRAPPERS: [(&str, &str); 3] = [
    ("ai-session-handler-claude-high", claude::LAUNCHER),
    ("ai-session-handler-claude-medium", claude::LAUNCHER),
    ("ai-session-handler-codex-high", codex::LAUNCHER),
];

/// The launcher the wrapper named `file_name` starts; `None` for any other program. `check`
/// and `run` look for it before a wrapper is launched, since the wrapper finds out only after
/// an attempt has been recorded.
pub fn launcher_of(file_name: &str) -> Option<&'static str> {
    WRAPPERS
        .iter()
        .find(|(wrapper, _)| *wrapper == file_name)
        .map(|(_, launcher)| *launcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wrapper_binary_is_known_with_its_launcher() {
        let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
        let mut wrappers: Vec<String> = std::fs::read_dir(bin)
            .expect("src/bin")
            .map(|entry| {
                let name = entry.expect("entry").file_name();
                let name = name.to_str().expect("UTF-8").to_owned();
                name.strip_suffix(".rs").expect("a .rs file").to_owned()
            })
            .filter(|name| name != "ai-session-handler")
            .collect();
        wrappers.sort();
        let known: Vec<String> = WRAPPERS
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        assert_eq!(wrappers, known);
        assert_eq!(
            launcher_of("ai-session-handler-claude-medium"),
            Some("claude-lean")
        );
        assert_eq!(
            launcher_of("ai-session-handler-codex-high"),
            Some("codex-lean")
        );
        assert_eq!(launcher_of("ai-session-handler"), None);
    }
}
