//! Library half of the provider wrapper binaries (docs/providers.md).
//!
//! A wrapper sits between the runner and a provider's launcher (`codex-lean`, `claude-lean`).
//! To the runner it is an ordinary worker; to the launcher it is the caller that supplies the
//! prompt. Its job is to keep the runner's exactly-one-result contract however chatty or
//! structured the provider's output is:
//!
//! - everything the launcher prints becomes inert diagnostics, whole lines at a time
//!   ([`diagnostics`]): prefixed, `<` escaped, complete live result blocks hidden; the
//!   providers' structured output is turned into readable lines ([`claude`], [`codex`], with
//!   [`json_lines`] and [`summary`]), and an echoed prompt into a note ([`prompt_echo`]);
//! - the result comes only from the provider's authoritative final response, validated with
//!   the runner's own framing rules and re-emitted as one unprefixed block ([`final_result`]);
//!   a rate limit, usage limit or overload the provider gave up on exits 75 ([`rate_limit`]);
//! - the launcher runs as a plain child inside the runner's process group, with SIGINT/SIGTERM
//!   forwarded and its exit code preserved ([`child`]); run by hand, the wrapper also stops
//!   what the launcher leaves behind ([`descendants`]).
//!
//! - under the runner, what the provider is doing and what it has used is sent on the
//!   runner's notification socket ([`notifier`]).
//!
//! [`session`] ties these together for any [`session::Provider`]; [`usage`] parses the
//! wrappers' command line.

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
