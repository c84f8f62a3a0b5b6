//! Helpers shared by the fuzz targets: how a fuzz input is cut into chunks, and the round-trip
//! properties of the durable records.

use ai_session_handler::domain::outcome::OutcomeRecord;
use ai_session_handler::domain::state::{State, StateLayout};

/// Chunk lengths to cycle through when splitting a payload.
///
/// Streaming code must give the same answer however its input is split into reads. A
/// streaming target therefore spends the first bytes of the fuzz input on a chunk plan and the
/// rest on the payload, so libFuzzer mutates both the data and where the read boundaries fall.
#[derive(Clone, Copy, Debug)]
pub struct ChunkPlan<'a> {
    sizes: &'a [u8],
}

/// Splits a fuzz input into a chunk plan and the payload.
///
/// Layout: one byte `n`, then `n % 16` chunk lengths (bytes, 0 = an empty read), then the
/// payload. With no lengths, or only zeros, the payload is fed one byte at a time: the
/// harshest split.
pub fn split_input(data: &[u8]) -> (ChunkPlan<'_>, &[u8]) {
    let Some((&count, rest)) = data.split_first() else {
        return (ChunkPlan { sizes: &[] }, &[]);
    };
    let count = usize::from(count % 16).min(rest.len());
    let (sizes, payload) = rest.split_at(count);
    (ChunkPlan { sizes }, payload)
}

impl ChunkPlan<'_> {
    /// Cuts `bytes` into consecutive chunks (empty ones included) whose concatenation is
    /// `bytes`, cycling through the plan's lengths from position `phase`, so two streams cut
    /// with different phases get different boundaries.
    pub fn chunks<'b>(&self, bytes: &'b [u8], phase: usize) -> Vec<&'b [u8]> {
        let one_byte_at_a_time: &[u8] = &[1];
        let sizes = if self.sizes.iter().all(|&size| size == 0) {
            one_byte_at_a_time
        } else {
            self.sizes
        };
        let mut chunks = Vec::new();
        let mut rest = bytes;
        let mut next = phase % sizes.len();
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(usize::from(sizes[next]).min(rest.len()));
            chunks.push(chunk);
            rest = tail;
            next = (next + 1) % sizes.len();
        }
        chunks
    }
}

/// The keyed directory the state targets read against.
pub const STATE_DIR: &str = "/ws/.ai-session-handler/plans/k";

/// Reads `data` as `state.json`; whatever is accepted must validate and survive `to_json` →
/// `from_json` unchanged, writing the same text again. Returns whether it was accepted.
pub fn check_state(data: &[u8]) -> bool {
    let layout = StateLayout {
        dir: STATE_DIR.into(),
    };
    let Ok(state) = State::from_json(data, &layout) else {
        return false;
    };
    assert!(state.validate(&layout).is_ok());
    let written = state.to_json();
    let reread = State::from_json(written.as_bytes(), &layout)
        .unwrap_or_else(|error| panic!("written state is rejected: {error}\n{written}"));
    assert_eq!(reread, state);
    assert_eq!(reread.to_json(), written);
    true
}

/// Reads `data` as an outcome record stored under its own attempt id (taken leniently from
/// the input, so accepted records get through); an accepted record must be refused under any
/// other name, validate, and survive `to_json` → `from_json` unchanged. Returns whether it was
/// accepted.
pub fn check_outcome(data: &[u8]) -> bool {
    let attempt_id = serde_json::from_slice::<serde_json::Value>(data)
        .ok()
        .and_then(|value| value.get("attempt_id")?.as_str().map(str::to_owned));
    let file_name = format!("{}.json", attempt_id.as_deref().unwrap_or("unnamed"));
    let stored_as = format!("{STATE_DIR}/outcomes/{file_name}");
    let Ok(record) = OutcomeRecord::from_json(data, &stored_as) else {
        return false;
    };
    assert_eq!(record.file_name(), file_name);
    assert_eq!(
        OutcomeRecord::from_json(data, &file_name),
        Ok(record.clone())
    );
    if file_name != "elsewhere.json" {
        assert!(OutcomeRecord::from_json(data, "elsewhere.json").is_err());
    }
    assert!(record.validate().is_ok());

    let written = record.to_json();
    let reread = OutcomeRecord::from_json(written.as_bytes(), &file_name)
        .unwrap_or_else(|error| panic!("written outcome is rejected: {error}\n{written}"));
    assert_eq!(reread, record);
    assert_eq!(reread.to_json(), written);
    true
}
