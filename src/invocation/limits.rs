//! The largest inputs a command reads. Each is far beyond any real file of its kind, and
//! small enough that a runaway file (a sparse plan claiming gigabytes, a device behind a
//! symlink) is refused by its size before a byte is read (docs/decisions.md).

/// A plan: Markdown written by people (the largest real plans are tens of KiB).
pub(super) const MAX_PLAN_BYTES: u64 = 16 * 1024 * 1024;
/// The config: a handful of keys.
pub(super) const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// `state.json` as read: four times what the runner writes
/// ([`crate::domain::state::MAX_STATE_BYTES`], room for 200,000 committed outcomes), because a
/// state written before issue 23 can hold an agent's 16 MiB result twice, JSON-escaped at up
/// to six bytes per byte (192 MiB): it stays readable, and is cut down on its next write.
pub(super) const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;
/// An outcome record: its summary is a result body (at most 16 MiB) or a diagnostic.
pub(super) const MAX_OUTCOME_BYTES: u64 = 32 * 1024 * 1024;
