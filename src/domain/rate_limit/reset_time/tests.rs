//! Unit and property tests of `domain::rate_limit::reset_time`.

use super::*;
use chrono_tz::Europe::Berlin;
use proptest::prelude::*;

/// A Monday afternoon in Berlin: 2026-11-30 12:00:00 UTC is 13:00 CET (UTC+1).
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn find(text: &str) -> Option<ResetHint> {
    find_reset(text, now(), &Berlin)
}

fn secs(seconds: f64) -> DateTime<Utc> {
    now() + TimeDelta::milliseconds((seconds * 1000.0).round() as i64)
}

#[test]
fn patterns_compile() {
    assert!(PATTERNS.is_some());
}

type Expected = Option<(DateTime<Utc>, ResetKind)>;

/// Real-world messages (Claude Code, Codex CLI, the OpenAI, Anthropic and Gemini APIs,
/// HTTP headers) with the reset each one names, relative to `now()` in Berlin.
#[test]
fn real_world_messages() {
    use ResetKind::*;
    let cases: Vec<(&str, Expected)> = vec![
        // Claude Code.
        (
            "Claude AI usage limit reached|1796137200",
            Some((utc("2026-12-01T15:00:00Z"), Epoch)),
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|1796140800"}"#,
            Some((utc("2026-12-01T16:00:00Z"), Epoch)),
        ),
        (
            "5-hour limit reached ∙ resets 3pm",
            Some((utc("2026-11-30T14:00:00Z"), ClockTime)),
        ),
        (
            "Session limit reached ∙ resets 9:30pm\n     /upgrade to increase your usage limit.",
            Some((utc("2026-11-30T20:30:00Z"), ClockTime)),
        ),
        (
            "You've hit your session limit · resets 5pm (Australia/Brisbane)",
            // 17:00 AEST (UTC+10) is 07:00 UTC, already past today: tomorrow's.
            Some((utc("2026-12-01T07:00:00Z"), ClockTime)),
        ),
        (
            "Claude usage limit reached. Your limit will reset at 3:00 PM (Europe/Berlin).",
            Some((utc("2026-11-30T14:00:00Z"), ClockTime)),
        ),
        (
            "You've hit your weekly limit · resets Mon 12:00am",
            Some((utc("2026-12-06T23:00:00Z"), ClockTime)),
        ),
        (
            "Weekly limit reached ∙ resets Dec 9, 5pm",
            Some((utc("2026-12-09T16:00:00Z"), CalendarDate)),
        ),
        (
            "You've hit your session limit · resets in 1d 5h",
            Some((secs(29.0 * 3600.0), Relative)),
        ),
        (
            r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
        ),
        // Anthropic API.
        (
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 50,000 input tokens per minute."}}"#,
            None,
        ),
        (
            "HTTP/1.1 429 Too Many Requests\nretry-after: 20\nanthropic-ratelimit-input-tokens-reset: 2026-11-30T12:00:41Z\n",
            Some((utc("2026-11-30T12:00:41Z"), Timestamp)),
        ),
        (
            "anthropic-ratelimit-requests-reset: 2026-12-01T15:00:00Z",
            Some((utc("2026-12-01T15:00:00Z"), Timestamp)),
        ),
        // OpenAI API.
        (
            r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29882, Requested 1024. Please try again in 1.812s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
            Some((secs(1.812), Relative)),
        ),
        (
            "Rate limit reached for gpt-4 on requests per day (RPD): Limit 200, Used 200, Requested 1. Please try again in 7m12s.",
            Some((secs(432.0), Relative)),
        ),
        ("Please try again in 20s", Some((secs(20.0), Relative))),
        ("Please try again in 1.5s", Some((secs(1.5), Relative))),
        ("Please try again in 120ms.", Some((secs(0.12), Relative))),
        ("try again in 6m0s", Some((secs(360.0), Relative))),
        (
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            None,
        ),
        (
            "x-ratelimit-limit-requests: 60\nx-ratelimit-remaining-requests: 0\nx-ratelimit-reset-requests: 1s\n",
            Some((secs(1.0), Relative)),
        ),
        (
            "x-ratelimit-reset-tokens: 6m0s",
            Some((secs(360.0), Relative)),
        ),
        ("retry-after-ms: 1500", Some((secs(1.5), Relative))),
        // Codex CLI.
        (
            "■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 3 days 4 hours.",
            Some((secs(76.0 * 3600.0), Relative)),
        ),
        (
            "■ You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:05 PM.",
            Some((utc("2026-11-30T14:05:00Z"), ClockTime)),
        ),
        (
            "ERROR: You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Dec 7th, 2026 12:25 PM.",
            Some((utc("2026-12-07T11:25:00Z"), CalendarDate)),
        ),
        (
            "You've hit your usage limit. Upgrade your plan or add credits to continue, or try again at Dec 10, 2026, 11:12 AM.",
            Some((utc("2026-12-10T10:12:00Z"), CalendarDate)),
        ),
        (
            r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again at 3:45 PM."}}"#,
            Some((utc("2026-11-30T14:45:00Z"), ClockTime)),
        ),
        (
            "■ exceeded retry limit, last status: 429 Too Many Requests",
            None,
        ),
        (
            r#"{"type":"token_count","rate_limits":{"primary":{"used_percent":100.0,"window_minutes":300,"resets_in_seconds":5400}}}"#,
            Some((secs(5400.0), Relative)),
        ),
        // Gemini API and CLI.
        (
            "Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute for a region' of service 'generativelanguage.googleapis.com'. Please retry in 41.2s.",
            Some((secs(41.2), Relative)),
        ),
        (
            r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]}}"#,
            Some((secs(41.0), Relative)),
        ),
        (
            "Attempt 1 failed with status 429. Retrying with backoff... ApiError: RESOURCE_EXHAUSTED",
            None,
        ),
        // HTTP headers.
        ("Retry-After: 120", Some((secs(120.0), Relative))),
        (
            "Retry-After: Wed, 02 Dec 2026 07:28:00 GMT",
            Some((utc("2026-12-02T07:28:00Z"), HttpDate)),
        ),
        (
            "x-ratelimit-reset: 1796137200",
            Some((utc("2026-12-01T15:00:00Z"), Epoch)),
        ),
        ("RateLimit-Reset: 60", Some((secs(60.0), Relative))),
        // Generic forms.
        (
            "Rate limited. Try again in 2 hours 13 minutes.",
            Some((secs(2.0 * 3600.0 + 13.0 * 60.0), Relative)),
        ),
        (
            r#"{"resets_at": 1796137200}"#,
            Some((utc("2026-12-01T15:00:00Z"), Epoch)),
        ),
        (
            "usage limit: reset at 1796137200",
            Some((utc("2026-12-01T15:00:00Z"), Epoch)),
        ),
        (
            "limit resets at 2026-12-01T15:00:00+01:00",
            Some((utc("2026-12-01T14:00:00Z"), Timestamp)),
        ),
        (
            "quota resets at 2026-12-01 15:00",
            Some((utc("2026-12-01T14:00:00Z"), Timestamp)),
        ),
        (
            "rate limit resets 15:30 UTC",
            Some((utc("2026-11-30T15:30:00Z"), ClockTime)),
        ),
    ];
    assert!(cases.len() >= 25);
    for (text, expected) in cases {
        let found = find(text).map(|hint| (hint.at, hint.kind));
        assert_eq!(found, expected, "{text}");
    }
}

#[test]
fn the_last_reset_in_the_text_wins() {
    let text = "Please try again in 20s\n…later…\n5-hour limit reached ∙ resets 3pm\n";
    let hint = find(text).unwrap();
    assert_eq!(hint.at, utc("2026-11-30T14:00:00Z"));
    assert_eq!(hint.phrase, "resets 3pm");
    let text = "resets 3pm\nPlease try again in 20s";
    assert_eq!(find(text).unwrap().at, secs(20.0));
}

#[test]
fn phrase_is_the_matched_text() {
    let hint = find("error: Retry-After: 120\n").unwrap();
    assert_eq!(hint.phrase, "Retry-After: 120");
    let hint = find("Your limit will reset at 3:00 PM (Europe/Berlin). Bye").unwrap();
    assert_eq!(hint.phrase, "reset at 3:00 PM (Europe/Berlin)");
}

#[test]
fn bare_clock_times_are_the_next_occurrence_in_the_local_zone() {
    // 13:00 in Berlin now. 3pm is today; 11am passed two hours ago, so tomorrow's.
    assert_eq!(find("resets 3pm").unwrap().at, utc("2026-11-30T14:00:00Z"));
    assert_eq!(find("resets 11am").unwrap().at, utc("2026-12-01T10:00:00Z"));
    // 12:30 passed half an hour ago: within the grace it is today's, in the past.
    assert_eq!(
        find("resets 12:30").unwrap().at,
        utc("2026-11-30T11:30:00Z")
    );
    // The same text in another local zone.
    let tokyo = chrono_tz::Asia::Tokyo;
    assert_eq!(
        find_reset("resets 3pm", now(), &tokyo).unwrap().at,
        utc("2026-12-01T06:00:00Z"),
        "21:00 in Tokyo now: 3pm is tomorrow's"
    );
    assert_eq!(
        find_reset("resets 3pm", now(), &Utc).unwrap().at,
        utc("2026-11-30T15:00:00Z")
    );
}

#[test]
fn clock_time_variants() {
    for (text, expected) in [
        ("resets 3 PM", "2026-11-30T14:00:00Z"),
        ("resets 3 p.m.", "2026-11-30T14:00:00Z"),
        // Exactly the grace ago: still today's; a minute more and it is tomorrow's.
        ("resets 12pm", "2026-11-30T11:00:00Z"),
        ("resets 11:59am", "2026-12-01T10:59:00Z"),
        ("resets 12am", "2026-11-30T23:00:00Z"),
        ("resets 23:59:30", "2026-11-30T22:59:30Z"),
        ("resets at 3:00 PM (Europe/Berlin)", "2026-11-30T14:00:00Z"),
        (
            "resets at 3:00 PM (America/New_York)",
            "2026-11-30T20:00:00Z",
        ),
        ("resets 3pm (UTC)", "2026-11-30T15:00:00Z"),
        ("resets 3pm GMT", "2026-11-30T15:00:00Z"),
        ("resets Tuesday 9am", "2026-12-01T08:00:00Z"),
    ] {
        assert_eq!(
            find(text).map(|hint| hint.at),
            Some(utc(expected)),
            "{text}"
        );
    }
}

#[test]
fn a_date_without_a_year_that_passed_is_next_years() {
    let new_years_eve = Utc.with_ymd_and_hms(2026, 12, 31, 12, 0, 0).unwrap();
    assert_eq!(
        find_reset("resets Jan 2, 5pm", new_years_eve, &Berlin)
            .unwrap()
            .at,
        utc("2027-01-02T16:00:00Z")
    );
    assert_eq!(
        find_reset("resets Dec 31, 12:30pm", new_years_eve, &Berlin)
            .unwrap()
            .at,
        utc("2026-12-31T11:30:00Z"),
        "half an hour ago: this year's, in the past"
    );
}

#[test]
fn not_times() {
    for text in [
        "resets 3 times a day",
        "resets 13pm",
        "resets 25:00",
        "resets 3pm (Mars/Olympus_Mons)",
        "resets Feb 30, 5pm",
        "try again later",
        "try again in a moment",
        "try again in 5 parsecs",
        "2026-12-01T15:00:00Z deploy finished",
        "1796137200",
        "retrying 1/5 in 190ms…",
        "",
    ] {
        assert_eq!(find(text), None, "{text}");
    }
}

#[test]
fn absurd_times_are_skipped_for_an_earlier_plausible_one() {
    assert_eq!(find("reset at 1000000000"), None, "2001 is no reset time");
    assert_eq!(find("Retry-After: Wed, 21 Oct 2015 07:28:00 GMT"), None);
    assert_eq!(find("try again in 90 days"), None);
    assert_eq!(find("resets at 2030-01-01T00:00:00Z"), None);
    let text = "Please try again in 20s. resets_at: 4102444800";
    assert_eq!(find(text).unwrap().at, secs(20.0));
}

#[test]
fn past_times_within_the_horizon_are_reported() {
    let hint = find("resets at 2026-11-30T11:00:00Z").unwrap();
    assert_eq!(hint.at, utc("2026-11-30T11:00:00Z"));
    assert!(hint.at < now());
}

#[test]
fn epoch_milliseconds() {
    assert_eq!(
        find(r#""resetsAt": 1796137200000"#).unwrap().at,
        utc("2026-12-01T15:00:00Z")
    );
}

#[test]
fn iso_forms() {
    for (text, expected) in [
        (
            "resets_at: \"2026-12-01T15:00:00.250Z\"",
            "2026-12-01T15:00:00.250Z",
        ),
        (
            "reset_time=2026-12-01T15:00:00+0100",
            "2026-12-01T14:00:00Z",
        ),
        ("resets at 2026-12-01T15:00 UTC", "2026-12-01T15:00:00Z"),
        ("resets on 2026-12-02", "2026-12-01T23:00:00Z"),
    ] {
        assert_eq!(
            find(text).map(|hint| hint.at),
            Some(utc(expected)),
            "{text}"
        );
    }
}

#[test]
fn dst_gaps_and_folds_resolve() {
    // Berlin skips 02:00–03:00 on 2027-03-28 and repeats 02:00–03:00 on 2026-10-25.
    let before_gap = Utc.with_ymd_and_hms(2027, 3, 27, 12, 0, 0).unwrap();
    assert_eq!(
        find_reset("resets Mar 28, 2:30am", before_gap, &Berlin)
            .unwrap()
            .at,
        utc("2027-03-28T01:30:00Z")
    );
    let before_fold = Utc.with_ymd_and_hms(2026, 10, 24, 12, 0, 0).unwrap();
    assert_eq!(
        find_reset("resets Oct 25, 2:30am", before_fold, &Berlin)
            .unwrap()
            .at,
        utc("2026-10-25T00:30:00Z"),
        "the earlier of the two 02:30s"
    );
}

#[test]
fn duration_seconds_units() {
    for (text, expected) in [
        ("2 hours 13 minutes", 7980.0),
        ("2 hours and 13 minutes", 7980.0),
        ("3 days, 4 hours", 273_600.0),
        ("6m0s", 360.0),
        ("1h2m3.5s", 3723.5),
        ("an hour", 3600.0),
        ("a minute", 60.0),
        ("1 week", 604_800.0),
        ("250ms", 0.25),
    ] {
        assert_eq!(duration_seconds(text), Some(expected), "{text}");
    }
    for text in ["", "5", "5 parsecs", "1e3s", "1..2s", "40 days"] {
        assert_eq!(duration_seconds(text), None, "{text}");
    }
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_text(text in ".{0,300}") {
        let _ = find(&text);
    }

    #[test]
    fn never_panics_on_reset_shaped_text(
        prefix in prop::sample::select(vec![
            "resets ", "try again in ", "try again at ", "Retry-After: ", "resets_at: ",
            "x-ratelimit-reset-tokens: ", "limit reached|", "resets at ", "retry-after-ms: ",
        ]),
        body in "[0-9a-zA-Z:,./()+ -]{0,40}",
        seconds_ago in -40_000_000_000i64..40_000_000_000,
    ) {
        let now = Utc.timestamp_opt(1_796_137_200 + seconds_ago / 1000, 0).single();
        let found = now.and_then(|now| Some((now, find_reset(&format!("{prefix}{body}"), now, &Berlin)?)));
        if let Some((now, hint)) = found {
            prop_assert!(hint.at >= now - PAST_HORIZON && hint.at <= now + FUTURE_HORIZON);
            prop_assert!(hint.phrase.chars().count() <= MAX_PHRASE_CHARS);
        }
    }

    #[test]
    fn relative_durations_round_trip(
        days in 0u32..30,
        hours in 0u32..24,
        minutes in 0u32..60,
        seconds in 0u32..60,
        millis in 0u32..1000,
        style in 0usize..3,
    ) {
        let text = match style {
            0 => format!("Please try again in {days}d{hours}h{minutes}m{seconds}.{millis:03}s."),
            1 => format!("try again in {days} days {hours} hours {minutes} minutes {seconds} seconds"),
            _ => format!("x-ratelimit-reset-requests: {days}d{hours}h{minutes}m{seconds}s"),
        };
        let millis = if style == 0 { millis } else { 0 };
        let expected = TimeDelta::days(days.into())
            + TimeDelta::hours(hours.into())
            + TimeDelta::minutes(minutes.into())
            + TimeDelta::seconds(seconds.into())
            + TimeDelta::milliseconds(millis.into());
        let hint = find(&text).unwrap();
        prop_assert_eq!(hint.at - now(), expected, "{}", text);
        prop_assert_eq!(hint.kind, ResetKind::Relative);
    }

    #[test]
    fn clock_times_are_within_a_day(hour in 1u32..=12, minute in 0u32..60, pm: bool) {
        let text = format!("resets {hour}:{minute:02} {}", if pm { "PM" } else { "AM" });
        let hint = find(&text).unwrap();
        prop_assert!(hint.at >= now() - CLOCK_GRACE);
        prop_assert!(hint.at < now() + TimeDelta::days(1));
    }
}
