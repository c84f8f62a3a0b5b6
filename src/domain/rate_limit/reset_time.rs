//! Finding when a provider's rate limit resets in a rate-limited agent's output (issue 11).
//!
//! [`find_reset`] scans text (the caller passes the tail of the attempt's output, e.g. its last
//! 64 KiB decoded lossily) for the phrases providers print with a reset time and returns the
//! **last** one found: the message that ended the attempt is the latest one, and earlier ones
//! (a 429 the CLI retried past, a usage banner from an hour ago) are stale.
//!
//! Recognised forms, each only after a word that says it is a reset time, so ordinary log
//! timestamps in the output are never taken for one:
//!
//! | Form | Examples | Kind |
//! |---|---|---|
//! | relative, prose | `try again in 2 hours 13 minutes`, `Please try again in 1.5s`, `try again in 6m0s`, `Please retry in 41.2s`, `resets in 1d 5h`, `retry after 30 seconds` | [`ResetKind::Relative`] |
//! | relative, header or JSON key | `Retry-After: 120`, `retry-after-ms: 1500`, `x-ratelimit-reset-requests: 1s`, `"retryDelay": "41s"`, `"resets_in_seconds": 3600` | [`ResetKind::Relative`] |
//! | time of day | `resets 3pm`, `resets at 3:00 PM (Europe/Berlin)`, `Try again at 3:05 PM`, `resets Mon 12:00am`, `resets 15:00 UTC` | [`ResetKind::ClockTime`] |
//! | calendar date and time | `resets Oct 9, 5pm`, `try again at Jul 9th, 2026 1:47 AM`, `try again at Aug 10, 2026, 11:12 AM` | [`ResetKind::CalendarDate`] |
//! | RFC 3339 / ISO 8601 | `anthropic-ratelimit-tokens-reset: 2026-12-01T15:00:00Z`, `"resets_at": "2026-12-01T15:00:00+01:00"`, `resets at 2026-12-01 15:00` | [`ResetKind::Timestamp`] |
//! | HTTP-date (RFC 9110) | `Retry-After: Wed, 21 Oct 2026 07:28:00 GMT` | [`ResetKind::HttpDate`] |
//! | Unix epoch (s or ms) | `Claude AI usage limit reached\|1764600000`, `"resets_at": 1764600000`, `reset at 1764600000`, `x-ratelimit-reset: 1764600000` | [`ResetKind::Epoch`] |
//!
//! Interpretation rules:
//! - A time without a zone is in the caller's `local` zone (CLIs print local times); a zone
//!   name in parentheses (`(Europe/Berlin)`, any IANA name `chrono-tz` knows) or `UTC`/`GMT`
//!   overrides it. An unknown zone name drops the phrase rather than guess hours wrong.
//! - A time of day means its next occurrence — today, else tomorrow (a weekday: within the
//!   week; a date without a year: this year, else next). "Next" allows [`CLOCK_GRACE`]: a time
//!   that passed less than an hour ago is today's, already past, because a limit announced as
//!   "resets 3pm" and read at 15:00:05 has just reset; it is not 24 hours away.
//! - A bare number for a reset key is seconds to wait, unless it is large enough to be a Unix
//!   time (≥ 10⁹: epoch seconds, ≥ 10¹²: epoch milliseconds); a `…-ms` key counts milliseconds.
//! - A time outside [`PAST_HORIZON`] before `now` to [`FUTURE_HORIZON`] after it is absurd
//!   (a misread number, an example date) and is skipped, so an earlier plausible phrase or no
//!   hint at all is the result. A time in the past within the horizon is returned: the retry
//!   policy reports it as "reset time is in the past" and uses its default wait.
//!
//! Pure: no clock, no environment; `now` and `local` come from the caller. Never panics.

use std::str::FromStr;
use std::sync::LazyLock;

use chrono::{
    DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone, Utc,
    Weekday,
};
use chrono_tz::Tz;
use regex::{Captures, Regex};

/// A reset time found in the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResetHint {
    /// When the limit resets.
    pub at: DateTime<Utc>,
    /// The text it was read from (trimmed, at most [`MAX_PHRASE_CHARS`] characters), for the
    /// line that tells the user why the runner waits until then.
    pub phrase: String,
    pub kind: ResetKind,
}

/// Which form the reset time had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetKind {
    /// A duration from `now`.
    Relative,
    /// A time of day, maybe with a weekday; resolved to its next occurrence.
    ClockTime,
    /// A month and day (and maybe a year) with a time of day.
    CalendarDate,
    /// An RFC 3339 / ISO 8601 date-time.
    Timestamp,
    /// An HTTP-date (`Wed, 21 Oct 2026 07:28:00 GMT`).
    HttpDate,
    /// Unix epoch seconds or milliseconds.
    Epoch,
}

/// How far in the past a reset time may lie and still be reported (as past). Further back is a
/// misread or stale value.
pub const PAST_HORIZON: TimeDelta = TimeDelta::days(1);

/// How far ahead a reset time may lie. Monthly quotas reset within 31 days; anything later is
/// a misread number, not a time worth planning a wait around.
pub const FUTURE_HORIZON: TimeDelta = TimeDelta::days(31);

/// A time of day that passed less than this long ago is today's, not tomorrow's.
pub const CLOCK_GRACE: TimeDelta = TimeDelta::hours(1);

/// The longest [`ResetHint::phrase`], in characters.
pub const MAX_PHRASE_CHARS: usize = 160;

/// The most relevant reset time in `text`: the last plausible one (see the module doc).
/// `now` is the current time; `local` is the zone for times printed without one.
pub fn find_reset<Z: TimeZone>(text: &str, now: DateTime<Utc>, local: &Z) -> Option<ResetHint> {
    let patterns = PATTERNS.as_ref()?;
    let earliest = now.checked_sub_signed(PAST_HORIZON)?;
    let latest = now.checked_add_signed(FUTURE_HORIZON)?;
    let scanners: [(&Regex, Interpreter<Z>); 4] = [
        (&patterns.relative, relative_phrase),
        (&patterns.keyed, keyed_value),
        (&patterns.prose, prose_time),
        (&patterns.usage_epoch, usage_epoch),
    ];
    let mut best: Option<(usize, usize, ResetHint)> = None;
    for (regex, interpret) in scanners {
        for caps in regex.captures_iter(text) {
            let Some(whole) = caps.get(0) else { continue };
            let Some((at, kind)) = interpret(&caps, now, local) else {
                continue;
            };
            if at < earliest || at > latest {
                continue;
            }
            // Last in the text wins; of two phrases ending at the same place the longer one
            // (a header name and its value rather than the bare "reset: …" inside it).
            let better = best.as_ref().is_none_or(|(start, end, _)| {
                whole.end() > *end || (whole.end() == *end && whole.start() < *start)
            });
            if better {
                let hint = ResetHint {
                    at,
                    phrase: phrase(whole.as_str()),
                    kind,
                };
                best = Some((whole.start(), whole.end(), hint));
            }
        }
    }
    best.map(|(_, _, hint)| hint)
}

type Interpreter<Z> = fn(&Captures<'_>, DateTime<Utc>, &Z) -> Option<(DateTime<Utc>, ResetKind)>;

// The building blocks. Named groups are read by the interpreters below; each scanning regex
// uses each block at most once, so the names stay unique within it. Spaces are `[ \t]`, never
// `\s`, so that a phrase never runs on into the next line. Word boundaries are ASCII
// (`(?-u:\b)`): every keyword is ASCII, and a Unicode `\b` would keep the regex engine off its
// fast DFA for any output with non-ASCII text in it (about ten times slower on 64 KiB).

/// One or more number–unit segments: `2 hours 13 minutes`, `6m0s`, `1.5s`, `an hour`,
/// `3 days, 4 hours`, `2 hours and 13 minutes`. Units are any word here; [`duration_seconds`]
/// accepts only the ones it knows.
const DURATION: &str = r"(?:\d+(?:\.\d+)?|an?)[ \t]*[a-z]+(?:(?:[ \t]*,[ \t]*|[ \t]+and[ \t]+|[ \t]*)\d+(?:\.\d+)?[ \t]*[a-z]+)*";

/// `2026-12-01T15:00:00Z`, `2026-12-01 15:00:00.123+01:00`, `2026-12-01T15:00 UTC`,
/// `2026-12-01` (midnight).
const ISO: &str = r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})(?:[t \t](?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<frac>\d+))?)?)?(?:[ \t]*(?P<off>z(?-u:\b)|utc(?-u:\b)|gmt(?-u:\b)|[+-]\d{2}(?::?\d{2})?))?";

/// `Wed, 21 Oct 2026 07:28:00 GMT` (RFC 9110's IMF-fixdate; the weekday is not checked).
const HTTP_DATE: &str = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,[ \t]*(?P<hd>\d{1,2})[ \t]+(?P<hmon>[a-z]{3})[ \t]+(?P<hy>\d{4})[ \t]+(?P<hh>\d{2}):(?P<hmi>\d{2}):(?P<hs>\d{2})(?:[ \t]*(?:gmt|utc|z)(?-u:\b))?";

/// `3pm`, `3:00 PM (Europe/Berlin)`, `15:00 UTC`, `Mon 12:00am`, `Oct 9, 5pm`,
/// `Jul 9th, 2026 1:47 AM`, `Aug 10, 2026, 11:12 AM`. A bare hour (`3`) matches here but is
/// rejected by [`clock_time`]: it needs minutes or am/pm to be a time.
const CLOCK: &str = r"(?:(?P<wd>mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?[ \t]+)?(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?[ \t]+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?[ \t]+(?:(?P<year>\d{4}),?[ \t]+)?(?:at[ \t]+)?)?(?P<ch>\d{1,2})(?::(?P<cm>\d{2}))?(?::(?P<cs>\d{2}))?(?:[ \t]*(?P<ampm>[ap])\.?[ \t]?m(?-u:\b)\.?)?(?:[ \t]*(?:\([ \t]*(?P<zone>[a-z_]+(?:/[a-z0-9_+-]+)*)[ \t]*\)|(?P<utc>utc|gmt)(?-u:\b)))?";

/// Header and JSON key names that carry a reset time or a delay: `Retry-After`,
/// `retry-after-ms`, `x-ratelimit-reset-requests`, `anthropic-ratelimit-tokens-reset`,
/// `RateLimit-Reset`, `retryDelay`, `resets_at`, `resetsAt`, `resets_in_seconds`, `reset_time`.
const RESET_KEY: &str = r"(?:[a-z0-9]+-)*ratelimit(?:-[a-z0-9]+)*-reset(?:-[a-z0-9]+)*|retry[-_]?after(?:[-_]?ms)?|retry[-_]?delay|resets?[-_]?at|resets?[-_]?in(?:[-_]?(?:seconds|secs))?|reset[-_]?time";

/// Words that introduce a reset time in prose.
const RESET_WORDS: &str = r"resets?|try[ \t]+again|retry|available(?:[ \t]+again)?|(?:limited|blocked|paused|waiting)[ \t]+until";

struct Patterns {
    /// `try again in <duration>`.
    relative: Regex,
    /// `<reset key>: <value>`, as a header or a JSON member.
    keyed: Regex,
    /// `resets <when>`, `try again at <when>`.
    prose: Regex,
    /// Claude Code's `Claude AI usage limit reached|<epoch>`.
    usage_epoch: Regex,
}

/// Compiled once. `None` only if a pattern above were invalid, which a unit test rules out;
/// the scanner then finds nothing rather than panicking.
static PATTERNS: LazyLock<Option<Patterns>> = LazyLock::new(|| {
    let relative = format!(
        r"(?i)(?-u:\b)(?:{RESET_WORDS})[ \t]+(?:in|after)[ \t]*:?[ \t]*(?P<dur>{DURATION})"
    );
    let keyed = format!(
        r#"(?i)(?-u:\b)(?P<key>{RESET_KEY})["']?[ \t]*[:=][ \t]*["']?[ \t]*(?:(?P<iso>{ISO})|(?P<http>{HTTP_DATE})|(?P<num>\d+(?:\.\d+)?)(?P<unit>[ \t]*[a-z]+(?:\d+(?:\.\d+)?[a-z]+)*)?)"#
    );
    let prose = format!(
        r"(?i)(?-u:\b)(?:{RESET_WORDS})(?:[ \t]+(?:at|on|after))?[ \t]*:?[ \t]+(?:(?P<iso>{ISO})|(?P<http>{HTTP_DATE})|(?P<epoch>\d{{9,13}})(?-u:\b)|(?P<clock>{CLOCK}))"
    );
    let usage_epoch = r"(?i)limit[ \t]+reached[ \t]*\|[ \t]*(?P<epoch>\d{9,13})(?-u:\b)";
    Some(Patterns {
        relative: Regex::new(&relative).ok()?,
        keyed: Regex::new(&keyed).ok()?,
        prose: Regex::new(&prose).ok()?,
        usage_epoch: Regex::new(usage_epoch).ok()?,
    })
});

fn relative_phrase<Z: TimeZone>(
    caps: &Captures<'_>,
    now: DateTime<Utc>,
    _local: &Z,
) -> Option<(DateTime<Utc>, ResetKind)> {
    let seconds = duration_seconds(caps.name("dur")?.as_str())?;
    Some((after(now, seconds)?, ResetKind::Relative))
}

fn keyed_value<Z: TimeZone>(
    caps: &Captures<'_>,
    now: DateTime<Utc>,
    local: &Z,
) -> Option<(DateTime<Utc>, ResetKind)> {
    if caps.name("iso").is_some() {
        return Some((iso_time(caps, local)?, ResetKind::Timestamp));
    }
    if caps.name("http").is_some() {
        return Some((http_date(caps)?, ResetKind::HttpDate));
    }
    let number = caps.name("num")?.as_str();
    let key = caps.name("key")?.as_str().to_ascii_lowercase();
    if key.ends_with("ms") {
        let millis: f64 = number.parse().ok()?;
        return Some((after(now, millis / 1000.0)?, ResetKind::Relative));
    }
    if let Some(unit) = caps.name("unit") {
        // `6m0s`, `41s`, `20 seconds`. A word that is no unit (`120 requests`) leaves the bare
        // number, read as below.
        if let Some(seconds) = duration_seconds(&format!("{number}{}", unit.as_str())) {
            return Some((after(now, seconds)?, ResetKind::Relative));
        }
    }
    let value: f64 = number.parse().ok()?;
    if value >= 1e9 {
        return Some((epoch(number)?, ResetKind::Epoch));
    }
    Some((after(now, value)?, ResetKind::Relative))
}

fn prose_time<Z: TimeZone>(
    caps: &Captures<'_>,
    now: DateTime<Utc>,
    local: &Z,
) -> Option<(DateTime<Utc>, ResetKind)> {
    if caps.name("iso").is_some() {
        return Some((iso_time(caps, local)?, ResetKind::Timestamp));
    }
    if caps.name("http").is_some() {
        return Some((http_date(caps)?, ResetKind::HttpDate));
    }
    if let Some(digits) = caps.name("epoch") {
        return Some((epoch(digits.as_str())?, ResetKind::Epoch));
    }
    clock_time(caps, now, local)
}

fn usage_epoch<Z: TimeZone>(
    caps: &Captures<'_>,
    _now: DateTime<Utc>,
    _local: &Z,
) -> Option<(DateTime<Utc>, ResetKind)> {
    Some((epoch(caps.name("epoch")?.as_str())?, ResetKind::Epoch))
}

/// Seconds in a duration made of number–unit segments (`2 hours 13 minutes`, `6m0s`,
/// `an hour`). `None` unless every segment has a known unit, or when the total is beyond
/// [`FUTURE_HORIZON`].
pub fn duration_seconds(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut segments = 0;
    let mut rest = text.trim();
    while !rest.is_empty() {
        rest = rest
            .trim_start_matches(|c: char| c == ',' || c.is_whitespace())
            .trim_start();
        if let Some(after_and) = strip_prefix_ignore_case(rest, "and ") {
            rest = after_and.trim_start();
        }
        if rest.is_empty() {
            break;
        }
        let (number, after_number) = leading_number(rest)?;
        let after_number = after_number.trim_start();
        let unit_len = after_number
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after_number.len());
        let (unit, remainder) = after_number.split_at(unit_len);
        total += number * unit_seconds(unit)?;
        segments += 1;
        rest = remainder;
    }
    let horizon = FUTURE_HORIZON.num_seconds() as f64;
    (segments > 0 && total.is_finite() && total <= horizon).then_some(total)
}

/// The number at the start of `text` (`12`, `1.5`, `a`/`an` for one) and what follows it.
fn leading_number(text: &str) -> Option<(f64, &str)> {
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    if digits > 0 {
        let (number, rest) = text.split_at(digits);
        return Some((number.parse().ok()?, rest));
    }
    for article in ["an ", "a "] {
        if let Some(rest) = strip_prefix_ignore_case(text, article) {
            return Some((1.0, rest));
        }
    }
    None
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

fn unit_seconds(unit: &str) -> Option<f64> {
    let unit = unit.to_ascii_lowercase();
    let seconds = match unit.as_str() {
        "ns" | "nanosecond" | "nanoseconds" => 1e-9,
        "us" | "microsecond" | "microseconds" => 1e-6,
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 1e-3,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        "w" | "wk" | "wks" | "week" | "weeks" => 604_800.0,
        _ => return None,
    };
    Some(seconds)
}

/// `now` plus `seconds`, to the millisecond.
fn after(now: DateTime<Utc>, seconds: f64) -> Option<DateTime<Utc>> {
    let horizon = FUTURE_HORIZON.num_seconds() as f64;
    if !(seconds.is_finite() && (0.0..=horizon).contains(&seconds)) {
        return None;
    }
    now.checked_add_signed(TimeDelta::milliseconds((seconds * 1000.0).round() as i64))
}

/// Unix seconds, or milliseconds when the number has 13 digits or more.
fn epoch(digits: &str) -> Option<DateTime<Utc>> {
    let value: i64 = digits.split('.').next()?.parse().ok()?;
    if value >= 1_000_000_000_000 {
        DateTime::from_timestamp_millis(value)
    } else {
        DateTime::from_timestamp(value, 0)
    }
}

fn group_u32(caps: &Captures<'_>, name: &str) -> Option<u32> {
    caps.name(name)?.as_str().parse().ok()
}

fn iso_time<Z: TimeZone>(caps: &Captures<'_>, local: &Z) -> Option<DateTime<Utc>> {
    let year: i32 = caps.name("y")?.as_str().parse().ok()?;
    let date = NaiveDate::from_ymd_opt(year, group_u32(caps, "mo")?, group_u32(caps, "d")?)?;
    let nanos = match caps.name("frac") {
        // Nine digits of nanoseconds; further digits are below the clock's resolution.
        Some(frac) => {
            let digits: String = frac.as_str().chars().take(9).collect();
            format!("{digits:0<9}").parse().ok()?
        }
        None => 0,
    };
    let time = match caps.name("h") {
        Some(_) => NaiveTime::from_hms_nano_opt(
            group_u32(caps, "h")?,
            group_u32(caps, "mi")?,
            caps.name("s").map_or(Some(0), |_| group_u32(caps, "s"))?,
            nanos,
        )?,
        None => NaiveTime::MIN,
    };
    let naive = NaiveDateTime::new(date, time);
    match caps
        .name("off")
        .map(|off| off.as_str().to_ascii_lowercase())
    {
        None => in_zone(local, naive),
        Some(off) if matches!(off.as_str(), "z" | "utc" | "gmt") => in_zone(&Utc, naive),
        Some(off) => in_zone(&fixed_offset(&off)?, naive),
    }
}

/// `+01:00`, `-0530`, `+01`.
fn fixed_offset(text: &str) -> Option<FixedOffset> {
    let sign = if text.starts_with('-') { -1 } else { 1 };
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let hours: i32 = digits.get(..2)?.parse().ok()?;
    let minutes: i32 = match digits.get(2..) {
        Some("") | None => 0,
        Some(minutes) => minutes.parse().ok()?,
    };
    if minutes >= 60 {
        return None;
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

fn http_date(caps: &Captures<'_>) -> Option<DateTime<Utc>> {
    let year: i32 = caps.name("hy")?.as_str().parse().ok()?;
    let month = month_number(caps.name("hmon")?.as_str())?;
    let date = NaiveDate::from_ymd_opt(year, month, group_u32(caps, "hd")?)?;
    let time = NaiveTime::from_hms_opt(
        group_u32(caps, "hh")?,
        group_u32(caps, "hmi")?,
        group_u32(caps, "hs")?,
    )?;
    Some(Utc.from_utc_datetime(&NaiveDateTime::new(date, time)))
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let prefix = name.get(..3)?.to_ascii_lowercase();
    let index = MONTHS.iter().position(|month| *month == prefix)?;
    u32::try_from(index + 1).ok()
}

fn weekday(name: &str) -> Option<Weekday> {
    let prefix = name.get(..3)?.to_ascii_lowercase();
    Weekday::from_str(&prefix).ok()
}

/// Which day a time of day belongs to.
#[derive(Clone, Copy)]
enum DaySpec {
    /// Today, else tomorrow.
    Next,
    /// That weekday's next occurrence.
    Weekday(Weekday),
    /// That date; without a year, this year's else next year's.
    Date {
        month: u32,
        day: u32,
        year: Option<i32>,
    },
}

fn clock_time<Z: TimeZone>(
    caps: &Captures<'_>,
    now: DateTime<Utc>,
    local: &Z,
) -> Option<(DateTime<Utc>, ResetKind)> {
    let hour = group_u32(caps, "ch")?;
    let minute = caps.name("cm").map_or(Some(0), |_| group_u32(caps, "cm"))?;
    let second = caps.name("cs").map_or(Some(0), |_| group_u32(caps, "cs"))?;
    let hour = match caps.name("ampm") {
        // A bare number after "resets" ("resets 3 times") is no time of day.
        None if caps.name("cm").is_none() => return None,
        None => hour,
        Some(_) if !(1..=12).contains(&hour) => return None,
        Some(ampm) => {
            hour % 12
                + if ampm.as_str().eq_ignore_ascii_case("p") {
                    12
                } else {
                    0
                }
        }
    };
    let time = NaiveTime::from_hms_opt(hour, minute, second)?;
    let (day, kind) = match (caps.name("mon"), caps.name("wd")) {
        (Some(month), _) => (
            DaySpec::Date {
                month: month_number(month.as_str())?,
                day: group_u32(caps, "day")?,
                year: match caps.name("year") {
                    Some(year) => Some(year.as_str().parse().ok()?),
                    None => None,
                },
            },
            ResetKind::CalendarDate,
        ),
        (None, Some(name)) => (
            DaySpec::Weekday(weekday(name.as_str())?),
            ResetKind::ClockTime,
        ),
        (None, None) => (DaySpec::Next, ResetKind::ClockTime),
    };
    let at = if let Some(zone) = caps.name("zone") {
        // `chrono-tz` names are case-sensitive (`Europe/Berlin`); an unknown one is dropped.
        next_occurrence(&Tz::from_str(zone.as_str()).ok()?, now, time, day)?
    } else if caps.name("utc").is_some() {
        next_occurrence(&Utc, now, time, day)?
    } else {
        next_occurrence(local, now, time, day)?
    };
    Some((at, kind))
}

/// The first time `time` on a day matching `day` in `zone` that is not more than
/// [`CLOCK_GRACE`] before `now`.
fn next_occurrence<Z: TimeZone>(
    zone: &Z,
    now: DateTime<Utc>,
    time: NaiveTime,
    day: DaySpec,
) -> Option<DateTime<Utc>> {
    let not_before = now.checked_sub_signed(CLOCK_GRACE)?;
    let today = now.with_timezone(zone).date_naive();
    let at_time = |date: NaiveDate| in_zone(zone, NaiveDateTime::new(date, time));
    let first_not_passed = |dates: &mut dyn Iterator<Item = NaiveDate>| {
        dates.filter_map(&at_time).find(|at| *at >= not_before)
    };
    match day {
        DaySpec::Next => first_not_passed(&mut today.iter_days().take(2)),
        DaySpec::Weekday(weekday) => first_not_passed(
            &mut today
                .iter_days()
                .take(8)
                .filter(|date| date.weekday() == weekday),
        ),
        DaySpec::Date {
            month,
            day,
            year: Some(year),
        } => at_time(NaiveDate::from_ymd_opt(year, month, day)?),
        DaySpec::Date {
            month,
            day,
            year: None,
        } => first_not_passed(
            &mut [today.year(), today.year().saturating_add(1)]
                .into_iter()
                .filter_map(|year| NaiveDate::from_ymd_opt(year, month, day)),
        ),
    }
}

/// A wall-clock time in `zone`. In a DST fold the earlier instant; in a DST gap the time an
/// hour later (the clock skipped to it).
fn in_zone<Z: TimeZone>(zone: &Z, naive: NaiveDateTime) -> Option<DateTime<Utc>> {
    zone.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            let shifted = naive.checked_add_signed(TimeDelta::hours(1))?;
            zone.from_local_datetime(&shifted).earliest()
        })
        .map(|at| at.with_timezone(&Utc))
}

fn phrase(text: &str) -> String {
    text.trim().chars().take(MAX_PHRASE_CHARS).collect()
}

#[cfg(test)]
mod tests {
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
}
