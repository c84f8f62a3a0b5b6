//! `ai-session-handler-claude-medium` (docs/providers.md); everything lives in the library.

use ai_session_handler::wrapper::claude::{self, Effort};

fn main() {
    claude::main(Effort::Medium)
}
