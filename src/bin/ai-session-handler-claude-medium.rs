//! `ai-session-handler-claude-medium`: runs `claude-lean --effort medium` with stream-json
//! output behind the runner's result contract (docs/providers.md, `docs/providers.md`). Everything
//! lives in the library.

use ai_session_handler::wrapper::claude::{self, Effort};
use ai_session_handler::wrapper::usage;
use clap::Parser;

/// Run claude-lean with medium effort, stream-json rendering and terminal marker filtering.
///
/// Reads the prompt on stdin, runs `claude-lean --effort medium -p --output-format stream-json
/// --verbose`, prints assistant text, tool-use summaries and stderr as `[claude] ` diagnostics,
/// then prints the last result event's result block if it is valid. Exits with claude-lean's
/// exit code.
#[derive(Debug, Parser)]
#[command(name = "ai-session-handler-claude-medium", version)]
struct Args {
    /// Claude model to pass through as --model (default: ANTHROPIC_MODEL, then Claude's settings).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

fn main() {
    let args: Args = usage::parse_args("[claude] ");
    std::process::exit(claude::run(Effort::Medium, args.model));
}
