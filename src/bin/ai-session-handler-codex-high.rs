//! `ai-session-handler-codex-high`: runs `codex-lean exec` with high reasoning effort behind the
//! runner's result contract (docs/providers.md, `docs/providers.md`). Everything lives in the library.

use ai_session_handler::wrapper::codex;
use ai_session_handler::wrapper::usage;
use clap::Parser;

/// Run codex-lean exec with high reasoning and terminal marker filtering.
///
/// Reads the prompt on stdin, runs `codex-lean exec --color never` with
/// CODEX_REASONING_EFFORT=high, prints its output as `[codex] ` diagnostics, then prints the
/// final message's result block if it is valid. Exits with codex-lean's exit code.
#[derive(Debug, Parser)]
#[command(name = "ai-session-handler-codex-high", version)]
struct Args {
    /// Codex CLI model slug to pass through as CODEX_MODEL.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
}

fn main() {
    let args: Args = usage::parse_args("[codex] ");
    std::process::exit(codex::run(args.model));
}
