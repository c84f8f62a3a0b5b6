//! `ai-session-handler-codex-high`: runs `codex-lean exec --json` with high reasoning effort
//! behind the runner's result contract (docs/providers.md). Everything lives in the library.

fn main() {
    ai_session_handler::wrapper::codex::main()
}
