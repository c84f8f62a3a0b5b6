//! Library half of the provider wrapper binaries (docs/providers.md, `docs/providers.md`).
//!
//! A wrapper sits between the runner and a provider's launcher (`codex-lean`, `claude-lean`).
//! To the runner it is an ordinary worker; to the launcher it is the caller that supplies the
//! prompt. Its job is to keep the runner's exactly-one-result contract however chatty or
//! structured the provider's output is:
//!
//! - everything the launcher prints becomes inert diagnostics ([`diagnostics`]): prefixed,
//!   `<` escaped, complete live result blocks hidden;
//! - the result comes only from the provider's authoritative final response, validated with
//!   the runner's own framing rules and re-emitted as one unprefixed block ([`final_result`]);
//! - the launcher runs as a plain child inside the runner's process group, with SIGINT/SIGTERM
//!   forwarded and its exit code preserved ([`child`]).
//!
//! [`session`] ties these together for any [`session::Provider`]; [`codex`] and [`claude`] are
//! the providers.

pub mod child;
pub mod claude;
pub mod codex;
pub mod diagnostics;
pub mod final_result;
pub mod session;
