//! Tests of the Codex `--json` event translator: items shown once, reasoning labelled, turn
//! failures and rate limits told apart, statuses and usage notified.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::wrapper::diagnostics::StreamTranslator;
use crate::wrapper::json_lines::JsonEvents;

fn translate_chunks(chunks: &[&[u8]]) -> (String, JsonEvents<ExecEvents>) {
    let mut reader = JsonEvents::<ExecEvents>::default();
    let mut out = Vec::new();
    for chunk in chunks {
        reader.translate(chunk, &mut out);
    }
    reader.finish(&mut out);
    (String::from_utf8(out).expect("utf-8"), reader)
}

fn translate(events: &[Value]) -> (String, JsonEvents<ExecEvents>) {
    let text: String = events.iter().map(|event| format!("{event}\n")).collect();
    translate_chunks(&[text.as_bytes()])
}

fn completed(item: Value) -> Value {
    json!({"type": "item.completed", "item": item})
}

/// A session as Codex 0.171 prints it with `--json`.
fn session() -> Vec<Value> {
    let command = json!({"id": "item_3", "type": "command_execution",
        "command": "/bin/bash -lc 'echo   hello\n&& echo <phase-complete>x</phase-complete>'",
        "aggregated_output": "", "exit_code": null, "status": "in_progress"});
    let mut finished = command.clone();
    finished["aggregated_output"] = json!("hello\nbash: syntax error\n");
    finished["exit_code"] = json!(2);
    finished["status"] = json!("failed");
    vec![
        json!({"type": "thread.started", "thread_id": "t"}),
        completed(json!({"id": "item_0", "type": "error",
            "message": "Model metadata for `mock-model` not found."})),
        json!({"type": "turn.started"}),
        completed(json!({"id": "item_1", "type": "reasoning",
            "text": "Secret thinking: <phase-blocked>never shown</phase-blocked>"})),
        completed(json!({"id": "item_2", "type": "agent_message",
            "text": "Let me check <phase-complete> later.\n```python\nprint('<phase-blocked>')\n```\n"})),
        json!({"type": "item.started", "item": command}),
        completed(finished),
        completed(json!({"id": "item_4", "type": "agent_message",
            "text": "Done.\n<phase-complete>\nRan echo.\n</phase-complete>"})),
        json!({"type": "turn.completed", "usage": {"input_tokens": 20}}),
    ]
}

#[test]
fn items_are_shown_labelled_escaped_and_once() {
    let (out, reader) = translate(&session());
    assert_eq!(
        out,
        "[codex] warning: Model metadata for `mock-model` not found.\n\
         [codex] reasoning: Secret thinking: \n\
         [codex] Let me check &lt;phase-complete> later.\n\
         [codex] ```python\n\
         [codex] print('&lt;phase-blocked>')\n\
         [codex] ```\n\
         [codex] exec: /bin/bash -lc 'echo hello && echo &lt;phase-complete>x&lt;/phase-complete>'\n\
         [codex] exec result (exit 2, 2 lines): hello bash: syntax error\n\
         [codex] Done.\n"
    );
    assert_eq!(reader.reader().turn_failure(), None);
}

#[test]
fn output_does_not_depend_on_where_lines_are_split() {
    let text: String = session().iter().map(|event| format!("{event}\n")).collect();
    let expected = translate_chunks(&[text.as_bytes()]).0;
    let bytes = text.as_bytes();
    for cut in (0..=bytes.len()).step_by(7) {
        assert_eq!(
            translate_chunks(&[&bytes[..cut], &bytes[cut..]]).0,
            expected,
            "cut {cut}"
        );
    }
}

#[test]
fn a_failed_turn_is_remembered_and_its_error_shown_once() {
    let message = "exceeded retry limit, last status: 429 Too Many Requests";
    let (out, reader) = translate(&[
        json!({"type": "error", "message": "Reconnecting... 1/2 (stream error)"}),
        json!({"type": "error", "message": message}),
        json!({"type": "turn.failed", "error": {"message": message}}),
    ]);
    assert_eq!(
        out,
        format!("[codex] error: Reconnecting... 1/2 (stream error)\n[codex] error: {message}\n")
    );
    assert_eq!(
        reader.reader().turn_failure(),
        Some(TurnFailure {
            message: message.to_owned(),
            shown: true
        })
    );
    let (out, reader) = translate(&[json!({"type": "turn.failed", "error": {"message": "boom"}})]);
    assert_eq!(out, "[codex] error: boom\n");
    assert_eq!(
        reader.reader().turn_failure().map(|failure| failure.shown),
        Some(true)
    );
}

#[test]
fn other_items_are_one_line_each() {
    let (out, _) = translate(&[
        completed(
            json!({"type": "file_change", "status": "completed", "changes": [
            {"path": "src/a.rs", "kind": "update"}, {"path": "b.rs", "kind": "add"}]}),
        ),
        json!({"type": "item.started", "item": {"type": "mcp_tool_call", "server": "docs",
            "tool": "search", "status": "in_progress"}}),
        completed(
            json!({"type": "mcp_tool_call", "server": "docs", "tool": "search",
            "status": "completed"}),
        ),
        json!({"type": "item.started", "item": {"type": "web_search", "query": "rust <T>"}}),
        completed(json!({"type": "web_search", "query": "rust <T>"})),
        completed(json!({"type": "todo_list", "items": [
            {"text": "read", "completed": true}, {"text": "write", "completed": false}]})),
        completed(
            json!({"type": "command_execution", "command": "x", "status": "declined",
            "aggregated_output": ""}),
        ),
        completed(json!({"type": "future_kind"})),
    ]);
    assert_eq!(
        out,
        "[codex] files (completed): update src/a.rs, add b.rs\n\
         [codex] tool: docs.search\n\
         [codex] tool result (completed): docs.search\n\
         [codex] web search: rust &lt;T>\n\
         [codex] plan: 1 of 2 done; next: write\n\
         [codex] exec result (declined, empty)\n\
         [codex] item: future_kind\n"
    );
}

#[test]
fn lines_that_are_not_events_are_shown_as_they_are() {
    let (out, _) = translate_chunks(&[b"The answer <phase-complete>x</phase-complete>\nplain"]);
    assert_eq!(out, "[codex] The answer \n[codex] plain\n");
}

fn notices_of(events: &[Value]) -> (JsonEvents<ExecEvents>, Vec<Notice>) {
    let (_, mut reader) = translate(events);
    let mut notices = Vec::new();
    reader.take_notices(&mut notices);
    (reader, notices)
}

#[test]
fn statuses_follow_the_items_and_a_turn_in_progress_is_generating() {
    let (_, notices) = notices_of(&session());
    let statuses: Vec<&str> = notices
        .iter()
        .filter_map(|notice| match notice {
            Notice::Status(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        [
            "generating",
            "reasoning: Secret thinking: &lt;phase-blocked>never shown&lt;/phase-blocked>",
            "message: Let me check &lt;phase-complete> later. ```python print('&lt;phase-blocked>') ```",
            "exec: /bin/bash -lc 'echo hello && echo &lt;phase-complete>x&lt;/phase-complete>'",
            "generating",
            "message: Done. &lt;phase-complete> Ran echo. &lt;/phase-complete>",
        ]
    );
    let (_, notices) = notices_of(&[
        completed(
            json!({"type": "file_change", "status": "completed", "changes": [
            {"path": "src/a.rs", "kind": "update"}]}),
        ),
        json!({"type": "error", "message": "Reconnecting... 1/2 (stream error)"}),
    ]);
    assert_eq!(
        notices,
        [
            Notice::Status("files: update src/a.rs".to_owned()),
            Notice::Status("error: Reconnecting... 1/2 (stream error)".to_owned()),
        ]
    );
}

#[test]
fn each_completed_turn_reports_the_sum_and_the_end_makes_it_final() {
    let (reader, notices) = notices_of(&[
        json!({"type": "turn.completed", "usage": {"input_tokens": 20,
            "cached_input_tokens": 5, "cache_write_input_tokens": 0, "output_tokens": 40,
            "reasoning_output_tokens": 7}}),
        json!({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}}),
    ]);
    let expected = TokenCounts {
        input_tokens: Some(21),
        cached_input_tokens: Some(5),
        output_tokens: Some(42),
        reasoning_tokens: Some(7),
        cost_usd: None,
    };
    match notices.last() {
        Some(Notice::Usage(report)) => {
            assert!(!report.is_final);
            assert_eq!(report.totals, expected);
        }
        other => panic!("{other:?}"),
    }
    let last = reader.reader().final_usage().expect("final");
    assert!(last.is_final);
    assert_eq!(last.totals, expected);
    assert_eq!(ExecEvents::default().final_usage(), None);
}

use crate::wrapper::diagnostics::test_support::{json_like_chunks, translate_all};

proptest! {
    #[test]
    fn never_panics_and_stays_inert(chunks in json_like_chunks()) {
        let mut reader = JsonEvents::<ExecEvents>::default();
        let out = translate_all(&mut reader, &chunks);
        prop_assert!(!out.contains(&b'<'));
        let _ = reader.reader().turn_failure();
    }
}
