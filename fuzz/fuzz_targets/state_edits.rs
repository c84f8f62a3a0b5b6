//! Structure-aware companion of `state_reader`. Byte-level mutation of JSON mostly breaks the
//! syntax, so few inputs reach the semantic validators or the round trip. This target starts
//! from a valid record (the committed `state_reader` seeds, embedded) and lets the input choose
//! up to eight edits of its JSON tree: replace any node with a value from a vocabulary of
//! schema-relevant strings (statuses, ids, layout paths, edge-case timestamps), an arbitrary
//! string or number, null, or a copy of another node; append to a string; remove or duplicate
//! a node. The edited document then goes through the same checks as `state_reader`.
#![no_main]

use ai_session_handler_fuzz::{STATE_DIR, check_outcome, check_state};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const BASES: [&str; 8] = [
    include_str!("../corpus/state_reader/state-empty.json"),
    include_str!("../corpus/state_reader/state-fresh.json"),
    include_str!("../corpus/state_reader/state-running.json"),
    include_str!("../corpus/state_reader/state-clarification.json"),
    include_str!("../corpus/state_reader/state-retry-after-abandoned.json"),
    include_str!("../corpus/state_reader/outcome-complete.json"),
    include_str!("../corpus/state_reader/outcome-clarification.json"),
    include_str!("../corpus/state_reader/outcome-blocked-signal.json"),
];

const ID1: &str = "20260705T120102Z-phase-1-a1";
const ID2: &str = "20260705T120500Z-phase-2-b2";
const ID3: &str = "20260705T121000Z-phase-2-c3";

/// Values the validators distinguish; layout paths are added per attempt id at run time.
const VOCABULARY: &[&str] = &[
    "phase-complete",
    "blocked",
    "needs-clarification",
    "agent-failed",
    "launch-failed",
    "missing-marker",
    "invalid-marker",
    "multiple-markers",
    "timeout",
    "stop-regex",
    "interrupted",
    "execution-io-failed",
    "prepared",
    "running",
    "phase-0",
    "phase-1",
    "phase-2",
    "phase-3",
    "phase-01",
    ID1,
    ID2,
    ID3,
    "20260705T120102Z-phase-1",
    "2026-07-05T12:00:00Z",
    "2026-07-05T14:00:00+02:00",
    "2026-07-05T12:00:00.999999999Z",
    "2016-12-31T23:59:60Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-01:00",
    "0000-01-01T00:00:00Z",
    "0000-01-01T00:00:00+00:01",
    "2026-07-05T12:00:00",
    "/ws/docs/plan.md",
    "/ws/app",
    "/",
    "relative/path",
    "C:\\ws",
    "",
    " ",
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
    "boot-a",
];

fuzz_target!(|data: &[u8]| {
    let mut input = Unstructured::new(data);
    let Ok(base) = input.choose(&BASES) else {
        return;
    };
    let mut document: Value = serde_json::from_str(base).expect("the seeds are JSON");
    let edits = input.int_in_range(0..=8).unwrap_or(0);
    for _ in 0..edits {
        if edit(&mut document, &mut input).is_err() {
            break;
        }
    }
    let text = serde_json::to_vec_pretty(&document).expect("a JSON value serializes");
    check_state(&text);
    check_outcome(&text);
});

fn edit(document: &mut Value, input: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let mut pointers = Vec::new();
    collect_pointers(document, String::new(), &mut pointers);
    let Ok(target) = input.choose(&pointers).cloned() else {
        return Ok(());
    };
    let replacement = match input.int_in_range(0..=8)? {
        0 | 1 => Value::String(vocabulary_word(input)?),
        2 => Value::String(String::arbitrary(input)?),
        3 => json!(i64::arbitrary(input)?),
        4 => Value::Null,
        5 => {
            let source = input.choose(&pointers)?;
            document.pointer(source).cloned().unwrap_or(Value::Null)
        }
        6 => {
            let mut text = match document.pointer(&target) {
                Some(Value::String(text)) => text.clone(),
                _ => String::new(),
            };
            text.push_str(&vocabulary_word(input)?);
            Value::String(text)
        }
        7 => {
            remove(document, &target);
            return Ok(());
        }
        _ => {
            duplicate(document, &target);
            return Ok(());
        }
    };
    if let Some(node) = document.pointer_mut(&target) {
        *node = replacement;
    }
    Ok(())
}

fn vocabulary_word(input: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    let words = VOCABULARY.len();
    let index = input.int_in_range(0..=words + 2)?;
    let id = [ID1, ID2, ID3][index % 3];
    Ok(match index.checked_sub(words) {
        None => VOCABULARY[index].to_owned(),
        Some(0) => format!("{STATE_DIR}/prompts/{id}.txt"),
        Some(1) => format!("{STATE_DIR}/transcripts/{id}.txt"),
        Some(_) => format!("{STATE_DIR}/outcomes/{id}.json"),
    })
}

/// JSON pointers of every node below the root.
fn collect_pointers(node: &Value, at: String, pointers: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match node {
        Value::Object(map) => map
            .iter()
            .map(|(key, child)| (key.replace('~', "~0").replace('/', "~1"), child))
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, child)| (index.to_string(), child))
            .collect(),
        _ => return,
    };
    for (token, child) in children {
        let pointer = format!("{at}/{token}");
        pointers.push(pointer.clone());
        collect_pointers(child, pointer, pointers);
    }
}

fn split_parent(pointer: &str) -> Option<(&str, String)> {
    let (parent, token) = pointer.rsplit_once('/')?;
    Some((parent, token.replace("~1", "/").replace("~0", "~")))
}

fn remove(document: &mut Value, pointer: &str) {
    let Some((parent, token)) = split_parent(pointer) else {
        return;
    };
    match document.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.shift_remove(&token);
        }
        Some(Value::Array(items)) => {
            if let Some(index) = token.parse::<usize>().ok().filter(|&i| i < items.len()) {
                items.remove(index);
            }
        }
        _ => {}
    }
}

fn duplicate(document: &mut Value, pointer: &str) {
    let Some(copy) = document.pointer(pointer).cloned() else {
        return;
    };
    let Some((parent, token)) = split_parent(pointer) else {
        return;
    };
    match document.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(format!("{token}_copy"), copy);
        }
        Some(Value::Array(items)) => {
            let index = token
                .parse::<usize>()
                .map_or(items.len(), |i| i.min(items.len()));
            items.insert(index, copy);
        }
        _ => {}
    }
}
