//! `ai-session-handler-claude-medium`: runs `claude-lean --effort medium` with stream-json
//! output behind the runner's result contract (docs/providers.md). Everything
//! lives in the library.

use ai_session_handler::wrapper::claude::{self, Effort};
use ai_session_handler::wrapper::usage;
use clap::Parser;

/// Run Claude Code (claude-lean) with medium effort behind the runner's result contract.
///
/// Reads the prompt on stdin, then runs (claude-lean is looked up on PATH)
///
///   claude-lean --effort medium -p --output-format stream-json --verbose
///     --include-partial-messages [--model MODEL]
///
/// Its stream-json events and its stderr are shown as `[claude] ` diagnostics, whole lines,
/// every `<` escaped and live result blocks hidden: text as the model writes it, tool calls
/// (`tool: Bash …`), tool results (`tool result (error, 4 lines): …`), API retries (`API error
/// 529 (overloaded); retry 2 of 10 in 1.2 s`) and API errors with their status. Thinking is
/// not shown.
///
/// Once claude-lean has exited, the `result` text of its last result event is printed if that
/// event reports success and the text is exactly one well-framed result block; otherwise no
/// block is printed and the reason is given on stderr (`[claude] no result reported: …`).
///
/// SIGINT and SIGTERM are forwarded to claude-lean (SIGKILL 0.25 s after the first); no
/// result is printed then. Run by hand (not as a session leader, as the handler starts it),
/// the wrapper also stops the processes claude-lean left behind, and names them.
///
/// Exit code: claude-lean's own; 75 when Claude gave up on a rate limit, usage limit or
/// overload (such as API status 429 or 529; the handler records `rate-limited`); 128 + N
/// when signal N ended claude-lean or interrupted the wrapper (SIGINT 130, SIGTERM 143); 127
/// when claude-lean is not on PATH, 126 when it cannot be started; 1 when the wrapper itself
/// fails; 2 for a usage error.
#[derive(Debug, Parser)]
#[command(
    name = "ai-session-handler-claude-medium",
    version,
    verbatim_doc_comment
)]
struct Args {
    /// Claude model to pass through as --model (default: ANTHROPIC_MODEL, then Claude's settings).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

fn main() {
    let args: Args = usage::parse_args("[claude] ");
    std::process::exit(claude::run(Effort::Medium, args.model));
}
