//! Tests of the Claude stream-json translator: what is shown, hidden and notified for each
//! event kind, split reads, retries, usage, and the final result.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::wrapper::diagnostics::StreamTranslator;
use crate::wrapper::json_lines::{JsonEvents, MAX_LINE_BYTES};

fn translate_chunks(chunks: &[&[u8]]) -> (String, FinalResponse) {
    let mut reader = JsonEvents::<StreamJson>::default();
    let mut out = Vec::new();
    for chunk in chunks {
        reader.translate(chunk, &mut out);
    }
    reader.finish(&mut out);
    (
        String::from_utf8(out).expect("utf-8"),
        reader.into_reader().final_response(),
    )
}

fn translate(text: &str) -> (String, FinalResponse) {
    translate_chunks(&[text.as_bytes()])
}

fn lines(events: &[Value]) -> String {
    events.iter().map(|event| format!("{event}\n")).collect()
}

fn assistant(id: &str, content: Value) -> Value {
    json!({"type": "assistant", "message": {"id": id, "role": "assistant", "model": "claude",
        "content": content}})
}

fn delta(text: &str) -> Value {
    json!({"type": "stream_event", "event": {"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": text}}})
}

fn stream(kind: &str) -> Value {
    json!({"type": "stream_event", "event": {"type": kind}})
}

fn message_start(id: &str) -> Value {
    json!({"type": "stream_event", "event": {"type": "message_start",
        "message": {"id": id}}})
}

fn success(text: &str) -> Value {
    json!({"type": "result", "subtype": "success", "is_error": false, "result": text})
}

/// A session as Claude 2.1 prints it with partial messages: deltas, then each block
/// whole as its own `assistant` event, before the block's stop.
fn session() -> String {
    lines(&[
        json!({"type": "system", "subtype": "init", "model": "claude"}),
        message_start("m1"),
        delta("Looking at <phase-"),
        delta("blocked > now."),
        assistant(
            "m1",
            json!([{"type": "text", "text": "Looking at <phase-blocked > now."}]),
        ),
        stream("content_block_stop"),
        assistant(
            "m1",
            json!([{"type": "tool_use", "id": "t1", "name": "Bash",
            "input": {"command": "ls <phase-complete>x</phase-complete>"}}]),
        ),
        stream("message_stop"),
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "content": "secret\nlisting", "is_error": false}]}}),
        message_start("m2"),
        delta("Done.\n<phase-complete>Built"),
        delta(" it.</phase-complete>"),
        assistant(
            "m2",
            json!([{"type": "text",
            "text": "Done.\n<phase-complete>Built it.</phase-complete>"}]),
        ),
        stream("content_block_stop"),
        success("Done.\n<phase-complete>Built it.</phase-complete>"),
    ])
}

#[test]
fn streamed_text_is_shown_once_tools_as_one_line_and_the_live_result_hidden() {
    let (out, response) = translate(&session());
    assert_eq!(
        out,
        "[claude] Looking at &lt;phase-blocked > now.\n\
         [claude] tool: Bash ls &lt;phase-complete>x&lt;/phase-complete>\n\
         [claude] tool result (2 lines): secret listing\n\
         [claude] Done.\n"
    );
    assert_eq!(
        response,
        FinalResponse::Text(b"Done.\n<phase-complete>Built it.</phase-complete>".to_vec())
    );
}

#[test]
fn whole_messages_are_shown_when_not_streamed() {
    let text = lines(&[
        assistant("m1", json!([{"type": "text", "text": "first\nsecond"}])),
        assistant(
            "m2",
            json!([{"type": "thinking", "thinking": "hmm"}, {"type": "text"}]),
        ),
        assistant("m3", json!([{"type": "text", "text": "third\n"}])),
    ]);
    assert_eq!(
        translate(&text).0,
        "[claude] first\n[claude] second\n[claude] third\n"
    );
}

#[test]
fn output_does_not_depend_on_where_lines_are_split() {
    let whole = session();
    let expected = translate(&whole);
    let bytes = whole.as_bytes();
    for cut in 0..=bytes.len() {
        assert_eq!(
            translate_chunks(&[&bytes[..cut], &bytes[cut..]]),
            expected,
            "cut {cut}"
        );
    }
    let single_bytes: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(translate_chunks(&single_bytes), expected);
}

#[test]
fn partial_text_is_held_until_its_line_ends_or_is_flushed() {
    let mut reader = JsonEvents::<StreamJson>::default();
    let mut out = Vec::new();
    reader.translate(lines(&[delta("tick 1\ntick")]).as_bytes(), &mut out);
    assert_eq!(out, b"[claude] tick 1\n");
    assert!(reader.holds_partial_line());
    reader.flush_partial_line(&mut out);
    reader.translate(lines(&[delta(" 2\n")]).as_bytes(), &mut out);
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "[claude] tick 1\n[claude] tick\n[claude]  2\n"
    );
}

#[test]
fn retries_are_shown() {
    let retry = json!({"type": "system", "subtype": "api_retry", "attempt": 2,
        "max_retries": 10, "retry_delay_ms": 1172.6, "error_status": 529, "error": "overloaded"});
    let bare = json!({"type": "system", "subtype": "api_retry", "attempt": 1});
    assert_eq!(
        translate(&lines(&[retry, bare])).0,
        "[claude] API error 529 (overloaded); retry 2 of 10 in 1.2 s\n\
         [claude] API error; retry 1\n"
    );
}

#[test]
fn an_api_error_is_said_once_with_its_status() {
    let text = lines(&[
        json!({"type": "assistant", "message": {"id": "x", "model": "<synthetic>",
            "content": [{"type": "text", "text": "Invalid API key · Fix external API key"}]}}),
        json!({"type": "result", "subtype": "success", "is_error": true,
            "api_error_status": 401, "result": "Invalid API key · Fix external API key"}),
    ]);
    let (out, response) = translate(&text);
    assert_eq!(out, "");
    assert_eq!(
        response,
        FinalResponse::Unavailable(
            "claude-lean reported API error 401: Invalid API key · Fix external API key".to_owned()
        )
    );
}

#[test]
fn a_synthetic_message_that_is_not_the_error_is_shown() {
    let text = lines(&[
        json!({"type": "assistant", "message": {"id": "x", "model": "<synthetic>",
            "content": [{"type": "text", "text": "[Request interrupted]"}]}}),
        success("<phase-complete>ok</phase-complete>"),
    ]);
    assert_eq!(translate(&text).0, "[claude] [Request interrupted]\n");
    let unfinished = lines(&[json!({"type": "assistant", "message": {"id": "x",
        "model": "<synthetic>", "content": [{"type": "text", "text": "No response"}]}})]);
    assert_eq!(translate(&unfinished).0, "[claude] No response\n");
}

#[test]
fn non_json_lines_are_diagnostics_verbatim() {
    let (out, response) = translate("Warning: <deprecated>\r\n[1, 2]\n\"text\"\nno newline");
    assert_eq!(
        out,
        "[claude] Warning: &lt;deprecated>\r\n[claude] [1, 2]\n[claude] \"text\"\n[claude] no newline\n"
    );
    assert_eq!(
        response,
        FinalResponse::Unavailable("claude-lean produced no result event".to_owned())
    );
}

#[test]
fn the_last_result_event_wins() {
    let text = lines(&[
        success("<phase-blocked>first</phase-blocked>"),
        success("<phase-complete>second</phase-complete>"),
    ]);
    assert_eq!(
        translate(&text).1,
        FinalResponse::Text(b"<phase-complete>second</phase-complete>".to_vec())
    );
    let text = lines(&[
        success("<phase-complete>first</phase-complete>"),
        json!({"type": "result", "subtype": "error_max_turns", "is_error": true}),
    ]);
    assert_eq!(
        translate(&text).1,
        FinalResponse::Unavailable(
            "claude-lean reported an error result (subtype error_max_turns)".to_owned()
        )
    );
}

#[test]
fn failed_results_are_errors_or_rate_limits() {
    let limited = |text: &str| FinalResponse::RateLimited(text.to_owned());
    let unavailable = |text: &str| FinalResponse::Unavailable(text.to_owned());
    let cases = [
        (
            json!({"type": "result", "subtype": "success", "is_error": true,
                "api_error_status": 429, "result": "API Error: Request rejected (429) · slow down"}),
            limited("rate limited (API status 429): API Error: Request rejected (429) · slow down"),
        ),
        (
            json!({"type": "result", "subtype": "success", "is_error": true,
                "result": "API Error: 529 overloaded"}),
            limited("rate limited (API status 529): API Error: 529 overloaded"),
        ),
        (
            json!({"type": "result", "subtype": "success", "is_error": true,
                "result": "5-hour limit reached ∙ resets 3pm"}),
            limited("rate limited: 5-hour limit reached ∙ resets 3pm"),
        ),
        (
            json!({"type": "result", "subtype": "success", "is_error": true,
                "api_error_status": 500, "result": "API Error: 500 Internal server error"}),
            unavailable("claude-lean reported API error 500: API Error: 500 Internal server error"),
        ),
        (
            json!({"type": "result", "subtype": "error_during_execution", "is_error": false,
                "result": "<phase-complete>x</phase-complete>"}),
            unavailable(
                "claude-lean reported an error result (subtype error_during_execution): \
                 <phase-complete>x</phase-complete>",
            ),
        ),
        (
            json!({"type": "result", "result": "<phase-complete>x</phase-complete>"}),
            unavailable(
                "claude-lean reported an error result (subtype none): \
                 <phase-complete>x</phase-complete>",
            ),
        ),
        (
            json!({"type": "result", "subtype": "success", "is_error": false}),
            unavailable("claude-lean's result event has no result text"),
        ),
    ];
    for (event, expected) in cases {
        assert_eq!(translate(&lines(&[event])).1, expected);
    }
}

#[test]
fn tool_lines_are_one_short_line() {
    let summary = |input: Value| tool_summary(Some("Tool"), &input);
    assert_eq!(
        summary(json!({"file_path": "/src/main.rs"})),
        "tool: Tool /src/main.rs"
    );
    assert_eq!(
        summary(json!({"command": "echo a\n  echo b"})),
        "tool: Tool echo a echo b"
    );
    assert_eq!(summary(json!({})), "tool: Tool");
    assert_eq!(summary(json!({"todos": [1]})), "tool: Tool {\"todos\":[1]}");
    assert_eq!(tool_summary(None, &Value::Null), "tool: unknown");
}

/// The summary of a tool result block.
fn summary_of(block: Value) -> String {
    match serde_json::from_value(block).expect("block") {
        Block::ToolResult { content, is_error } => tool_result_summary(content.as_ref(), is_error),
        other => panic!("not a tool result: {other:?}"),
    }
}

#[test]
fn tool_results_are_one_short_line() {
    let result = |content: Value, is_error: bool| {
        summary_of(json!({"type": "tool_result", "content": content,
            "is_error": is_error}))
    };
    assert_eq!(
        result(json!("Exit code 2\nhello\nbash: error"), true),
        "tool result (error, 3 lines): Exit code 2 hello bash: error"
    );
    assert_eq!(
        result(
            json!([{"type": "text", "text": "a"}, {"type": "image"}]),
            false
        ),
        "tool result (2 lines): a [image]"
    );
    assert_eq!(result(json!(""), false), "tool result (empty)");
    assert_eq!(
        summary_of(json!({"type": "tool_result"})),
        "tool result (empty)"
    );
}

#[test]
fn an_overlong_line_is_skipped_with_a_notice() {
    let mut reader = JsonEvents::<StreamJson>::default();
    let mut out = Vec::new();
    let piece = vec![b'x'; MAX_LINE_BYTES / 4 + 1];
    for _ in 0..4 {
        reader.translate(&piece, &mut out);
    }
    reader.translate(b"tail\nafter\n", &mut out);
    reader.finish(&mut out);
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        format!(
            "[claude] skipped an output line longer than {MAX_LINE_BYTES} bytes\n[claude] after\n"
        )
    );
}

fn notices_of(events: &[Value]) -> (String, Vec<Notice>) {
    let mut reader = JsonEvents::<StreamJson>::default();
    let mut out = Vec::new();
    reader.translate(lines(events).as_bytes(), &mut out);
    reader.finish(&mut out);
    let mut notices = Vec::new();
    reader.take_notices(&mut notices);
    (String::from_utf8(out).expect("utf-8"), notices)
}

fn statuses(notices: &[Notice]) -> Vec<&str> {
    notices
        .iter()
        .filter_map(|notice| match notice {
            Notice::Status(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn block_start(kind: &str, extra: Value) -> Value {
    let mut block = json!({"type": kind});
    if let (Value::Object(block), Value::Object(extra)) = (&mut block, extra) {
        block.extend(extra);
    }
    json!({"type": "stream_event", "event": {"type": "content_block_start", "index": 0,
        "content_block": block}})
}

#[test]
fn statuses_say_what_the_model_is_doing() {
    let (_, notices) = notices_of(&[
        message_start("m1"),
        block_start("thinking", json!({"thinking": ""})),
        block_start("text", json!({"text": ""})),
        block_start("tool_use", json!({"name": "Bash", "input": {}})),
        assistant(
            "m1",
            json!([{"type": "tool_use", "id": "t1", "name": "Bash",
                "input": {"command": "cargo   test\n--locked"}}]),
        ),
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "content": "ok", "is_error": false}]}}),
    ]);
    assert_eq!(
        statuses(&notices),
        [
            "generating",
            "thinking",
            "generating",
            "tool: Bash",
            "tool: Bash cargo test --locked",
            "generating"
        ]
    );
}

#[test]
fn an_announced_retry_extends_the_idle_deadline_by_its_delay_and_a_margin() {
    let retry = json!({"type": "system", "subtype": "api_retry", "attempt": 6,
        "max_retries": 10, "retry_delay_ms": 18600.0, "error_status": 529,
        "error": "overloaded"});
    let (out, notices) = notices_of(&[retry]);
    assert_eq!(
        out,
        "[claude] API error 529 (overloaded); retry 6 of 10 in 18.6 s\n"
    );
    assert_eq!(
        notices,
        [
            Notice::Status("API error 529 (overloaded); retry 6 of 10 in 18.6 s".to_owned()),
            Notice::Extend(Duration::from_millis(18_600) + RETRY_MARGIN),
        ]
    );
    // Without a delay there is nothing to extend by.
    let (_, notices) = notices_of(&[json!({"type": "system", "subtype": "api_retry"})]);
    assert_eq!(notices.len(), 1);
}

#[test]
fn usage_is_reported_as_it_goes_and_finally_from_the_result() {
    use crate::domain::token_usage::TokenCounts;
    let start = json!({"type": "stream_event", "event": {"type": "message_start",
        "message": {"id": "m1", "model": "claude-opus", "usage": {"input_tokens": 10,
            "cache_read_input_tokens": 90, "cache_creation_input_tokens": 0,
            "output_tokens": 1}}}});
    let delta = json!({"type": "stream_event", "event": {"type": "message_delta",
        "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}}});
    let result = json!({"type": "result", "subtype": "success", "is_error": false,
        "result": "<phase-complete>x</phase-complete>", "total_cost_usd": 0.0125,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
            "cache_creation_input_tokens": 0, "output_tokens": 20},
        "modelUsage": {"claude-opus": {"inputTokens": 10, "cacheReadInputTokens": 90,
            "outputTokens": 20, "costUSD": 0.0125}}});
    let (out, notices) = notices_of(&[start, delta, result]);
    let reports: Vec<&UsageReport> = notices
        .iter()
        .filter_map(|notice| match notice {
            Notice::Usage(report) => Some(report),
            _ => None,
        })
        .collect();
    assert_eq!(reports.len(), 3, "{notices:?}");
    assert!(!reports[0].is_final && !reports[1].is_final);
    assert_eq!(reports[0].totals.output_tokens, Some(1));
    assert_eq!(reports[1].totals.output_tokens, Some(20));
    assert_eq!(reports[1].totals.input_tokens, Some(100));
    assert!(reports[2].is_final);
    assert_eq!(
        reports[2].totals,
        TokenCounts {
            input_tokens: Some(100),
            cached_input_tokens: Some(90),
            output_tokens: Some(20),
            reasoning_tokens: None,
            cost_usd: Some(0.0125),
        }
    );
    assert_eq!(
        out,
        "[claude] usage: 100 in (90 cached), 20 out tokens, $0.0125 (Claude Code's estimate, not a bill)\n"
    );
}

use crate::domain::token_usage::report::UsageReport;
use crate::wrapper::diagnostics::test_support::{json_like_chunks, translate_all};

proptest! {
    #[test]
    fn never_panics_and_stays_inert(chunks in json_like_chunks()) {
        let mut reader = JsonEvents::<StreamJson>::default();
        let out = translate_all(&mut reader, &chunks);
        prop_assert!(!out.contains(&b'<'));
        let _ = reader.into_reader().final_response();
    }
}
