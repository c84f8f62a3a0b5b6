//! `ai-session-handler-claude-high` (docs/providers.md); everything lives in the library.

use ai_session_handler::wrapper::claude::{self, Effort};

fn main() {
    claude::main(Effort::High)
}
