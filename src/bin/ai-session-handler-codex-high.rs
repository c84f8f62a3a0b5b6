//! `ai-session-handler-codex-high`: runs `codex-lean exec --json` with high reasoning effort
//! behind the runner's result contract (docs/providers.md). Everything lives in the library.

use ai_session_handler::wrapper::codex;
use ai_session_handler::wrapper::usage;
use clap::Parser;

/// Run Codex (codex-lean exec --json) with high reasoning effort behind the runner's result contract.
///
/// Reads the prompt on stdin, then runs (codex-lean is looked up on PATH)
///
///   codex-lean exec --json --color never --output-last-message DIR/final-message.txt
///
/// with CODEX_REASONING_EFFORT=high (and CODEX_MODEL=MODEL with --model), DIR being a
/// private temporary directory removed afterwards.
///
/// Codex's JSON events and its stderr are shown as `[codex] ` diagnostics, whole lines, every
/// `<` escaped and live result blocks hidden: messages, `reasoning: ` summaries, commands when
/// they start (`exec: …`) and end (`exec result (exit 2, 3 lines): …`), file changes, tool
/// calls, and errors, reconnect retries included (`error: Reconnecting... 1/2 (…)`).
///
/// Once codex-lean has exited, the final message (the --output-last-message file) is printed
/// if it is exactly one well-framed result block; otherwise no block is printed and the
/// reason is given on stderr (`[codex] no result reported: …`).
///
/// SIGINT and SIGTERM are forwarded to codex-lean (SIGKILL 0.25 s after the first); no result
/// is printed then. Run by hand (not as a session leader, as the handler starts it), the
/// wrapper also stops the processes codex-lean left behind, and names them.
///
/// Exit code: codex-lean's own; 75 when Codex gave up on a rate limit, usage limit or
/// overload (the handler records `rate-limited`); 128 + N when signal N ended codex-lean or
/// interrupted the wrapper (SIGINT 130, SIGTERM 143); 127 when codex-lean is not on PATH, 126
/// when it cannot be started; 1 when the wrapper itself fails; 2 for a usage error.
#[derive(Debug, Parser)]
#[command(name = "ai-session-handler-codex-high", version, verbatim_doc_comment)]
struct Args {
    /// Codex CLI model slug to pass through as CODEX_MODEL.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

fn main() {
    let args: Args = usage::parse_args("[codex] ");
    std::process::exit(codex::run(args.model));
}
