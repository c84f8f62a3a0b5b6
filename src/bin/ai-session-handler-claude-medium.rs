//! `ai-session-handler-claude-medium`: runs `claude-lean --effort medium` with stream-json
//! output behind the runner's result contract (docs/providers.md). Everything lives in the
//! library.

use ai_session_handler::wrapper::claude::{self, Effort};

fn main() {
    claude::main(Effort::Medium)
}
