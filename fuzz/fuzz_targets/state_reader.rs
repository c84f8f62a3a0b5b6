//! The strict readers of `state.json` and `outcomes/<id>.json` on arbitrary bytes: never
//! panic; anything accepted re-serializes (`to_json`) to a document that reads back to an
//! equal value and serializes identically; an outcome is only accepted under its own name.
//! (`state_edits` reaches the same checks through structured edits of valid records.)
#![no_main]

use ai_session_handler_fuzz::{check_outcome, check_state};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check_state(data);
    check_outcome(data);
});
