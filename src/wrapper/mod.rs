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
