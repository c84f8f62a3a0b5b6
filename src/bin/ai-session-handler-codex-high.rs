//! `ai-session-handler-codex-high` (docs/providers.md); everything lives in the library.

fn main() {
    ai_session_handler::wrapper::codex::main()
}
