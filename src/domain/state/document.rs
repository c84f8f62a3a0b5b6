//! The `state.json` document as written: 2-space indentation, keys in schema order, a trailing
//! newline — and, for a writer that keeps them, the text of committed entries reused from one
//! write to the next.
//!
//! A phase writes the state three times (prepared, running, commit), and each write is the
//! whole document, every committed outcome included: 0.7 µs an entry, so a plan with 1,000
//! outcomes spent 2 ms a phase serializing entries that had not changed. Committed entries
//! never change and are shared between a state and the copy a write starts from
//! (`Arc<OutcomeRef>`), so an entry is the same allocation for as long as it is in the state:
//! [`RenderedOutcomes`] keeps each entry's text beside the entry it was rendered from and
//! reuses it while the state still holds that very entry, rendering anything else afresh.
//! The bytes are those of [`State::to_json`] whatever the cache holds (a property test
//! compares them over arbitrary runs).

use std::sync::Arc;

use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::value::RawValue;

use super::excerpt::MAX_STATE_BYTES;
use super::{OutcomeRef, State, StateError};

/// The indentation of a committed entry's keys beyond the top level's: the entries sit in
/// `committed_outcomes`, one level down.
const ENTRY_INDENT: &str = "    ";

impl State {
    /// Serializes with 2-space indentation and a trailing newline, keys in schema order.
    pub fn to_json(&self) -> String {
        document_text(&Document {
            state: self,
            rendered: None,
        })
    }

    /// [`State::to_json`], refused when the document would be over [`MAX_STATE_BYTES`]: the
    /// runner never writes a state it could not read back.
    pub fn to_checked_json(&self) -> Result<String, StateError> {
        checked(self.to_json())
    }

    /// [`State::to_checked_json`], reusing the text of committed entries `rendered` kept from
    /// earlier writes, and keeping this state's for the next.
    pub fn to_checked_json_reusing(
        &self,
        rendered: &mut RenderedOutcomes,
    ) -> Result<String, StateError> {
        rendered.refresh(&self.committed_outcomes);
        let texts: Vec<&RawValue> = rendered.0.iter().map(|(_, text)| &**text).collect();
        checked(document_text(&Document {
            state: self,
            rendered: Some(&texts),
        }))
    }
}

fn checked(text: String) -> Result<String, StateError> {
    if text.len() as u64 > MAX_STATE_BYTES {
        return Err(StateError::TooLarge { bytes: text.len() });
    }
    Ok(text)
}

fn document_text(document: &Document<'_>) -> String {
    let mut text = serde_json::to_string_pretty(document).expect("state serializes");
    text.push('\n');
    text
}

/// The text of committed entries, each beside the shared entry it was rendered from, in the
/// order of the last state rendered with it.
#[derive(Debug, Default)]
pub struct RenderedOutcomes(Vec<(Arc<OutcomeRef>, Box<RawValue>)>);

impl RenderedOutcomes {
    /// Makes the kept texts those of `entries`: a text is kept where its entry is the same
    /// allocation at the same place, rendered otherwise.
    fn refresh(&mut self, entries: &[Arc<OutcomeRef>]) {
        self.0.truncate(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            match self.0.get(index) {
                Some((kept, _)) if Arc::ptr_eq(kept, entry) => {}
                Some(_) => self.0[index] = rendered(entry),
                None => self.0.push(rendered(entry)),
            }
        }
    }
}

/// `entry` as the document holds it: pretty-printed, every line after the first indented one
/// level (JSON strings never hold a raw newline, so every newline is between tokens).
fn rendered(entry: &Arc<OutcomeRef>) -> (Arc<OutcomeRef>, Box<RawValue>) {
    let text = serde_json::to_string_pretty(&**entry).expect("an entry serializes");
    let text = text.replace('\n', &format!("\n{ENTRY_INDENT}"));
    let raw = RawValue::from_string(text).expect("a serialized entry is JSON");
    (Arc::clone(entry), raw)
}

impl Serialize for State {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Document {
            state: self,
            rendered: None,
        }
        .serialize(serializer)
    }
}

/// The state as a document, with the committed entries' text already at hand or not.
struct Document<'a> {
    state: &'a State,
    rendered: Option<&'a [&'a RawValue]>,
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let state = self.state;
        // The optional keys (schema evolution) are written only when set, so a state without
        // them writes the same document as before they existed.
        let fields = 7
            + usize::from(state.retry_schedule.is_some())
            + usize::from(!state.abandoned_attempts.is_empty());
        let mut document = serializer.serialize_struct("State", fields)?;
        document.serialize_field("plan", &state.plan)?;
        document.serialize_field("completed_phase_ids", &state.completed_phase_ids)?;
        match self.rendered {
            Some(texts) => document.serialize_field("committed_outcomes", texts)?,
            None => document.serialize_field("committed_outcomes", &state.committed_outcomes)?,
        }
        document.serialize_field("current_phase", &state.current_phase)?;
        document.serialize_field("active_attempt", &state.active_attempt)?;
        document.serialize_field("stop", &state.stop)?;
        document.serialize_field("last_run", &state.last_run)?;
        match &state.retry_schedule {
            Some(schedule) => document.serialize_field("retry_schedule", schedule)?,
            None => document.skip_field("retry_schedule")?,
        }
        if state.abandoned_attempts.is_empty() {
            document.skip_field("abandoned_attempts")?;
        } else {
            document.serialize_field("abandoned_attempts", &state.abandoned_attempts)?;
        }
        document.end()
    }
}
