//! Library half of the provider wrapper binaries (`src/bin/ai-session-handler-*-*.rs`): one
//! session per run ([`session`]) with everything the launcher prints rendered as inert
//! diagnostics ([`diagnostics`]) and the result taken only from the provider's final response
//! ([`final_result`]). What a wrapper does and why: docs/providers.md.

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
pub mod usage;
