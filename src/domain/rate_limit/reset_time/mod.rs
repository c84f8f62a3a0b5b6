//! Finding when a provider's rate limit resets in a rate-limited agent's output. The forms
//! recognised and how each is read are in docs/unattended-runs.md, "Reset times recognised".
//! Pure (`now` and the `local` zone come from the caller) and never panics.

use std::str::FromStr;
use std::sync::LazyLock;

use chrono::{
    DateTime, Datelike, FixedOffset, Month, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta,
    TimeZone, Utc, Weekday,
};
use chrono_tz::Tz;
use regex::{Captures, Regex};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResetHint {
    pub at: DateTime<Utc>,
    /// The text it was read from (trimmed, at most [`MAX_PHRASE_CHARS`] characters), for the
    /// line that says why the runner waits until then.
    pub phrase: String,
    pub kind: ResetKind,
}

/// Which form the reset time had (the rows of the docs' table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetKind {
    Relative,
    /// A time of day, maybe with a weekday; resolved to its next occurrence.
    ClockTime,
    /// A month and day (and maybe a year) with a time of day.
    CalendarDate,
    /// RFC 3339 / ISO 8601.
    Timestamp,
    HttpDate,
    /// Unix seconds or milliseconds.
    Epoch,
}

/// Reset times further in the past than this, or further ahead than [`FUTURE_HORIZON`], are
/// misread numbers or stale banners and are skipped (monthly quotas reset within 31 days).
pub(crate) const PAST_HORIZON: TimeDelta = TimeDelta::days(1);
pub(crate) const FUTURE_HORIZON: TimeDelta = TimeDelta::days(31);

/// A time of day that passed less than this long ago is today's (it has just reset), not
/// tomorrow's.
pub(crate) const CLOCK_GRACE: TimeDelta = TimeDelta::hours(1);

pub(crate) const MAX_PHRASE_CHARS: usize = 160;

/// The last plausible reset time in `text` (the message that ended the attempt is the latest;
/// earlier ones are stale). `local` is the zone for times printed without one.
pub(crate) fn find_reset<Z: TimeZone>(
    text: &str,
    now: DateTime<Utc>,
    local: &Z,
) -> Option<ResetHint> {
    let patterns = PATTERNS.as_ref()?;
    let earliest = now.checked_sub_signed(PAST_HORIZON)?;
    let latest = now.checked_add_signed(FUTURE_HORIZON)?;
    let mut best: Option<(usize, usize, ResetHint)> = None;
    for regex in patterns {
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

/// Header and JSON key names that carry a reset time or a delay (`Retry-After`, `retryDelay`,
/// `x-ratelimit-reset-requests`, `resets_in_seconds`, …).
const RESET_KEY: &str = r"(?:[a-z0-9]+-)*ratelimit(?:-[a-z0-9]+)*-reset(?:-[a-z0-9]+)*|retry[-_]?after(?:[-_]?ms)?|retry[-_]?delay|resets?[-_]?at|resets?[-_]?in(?:[-_]?(?:seconds|secs))?|reset[-_]?time";

/// Words that introduce a reset time in prose.
const RESET_WORDS: &str = r"resets?|try[ \t]+again|retry|available(?:[ \t]+again)?|(?:limited|blocked|paused|waiting)[ \t]+until";

/// The scanning regexes, compiled once: `try again in <duration>`; `<reset key>: <value>` as a
/// header or a JSON member; `resets <when>`, `try again at <when>`; Claude Code's `Claude AI
/// usage limit reached|<epoch>`. `None` only if a pattern above were invalid, which a unit test
/// rules out; the scanner then finds nothing rather than panicking.
static PATTERNS: LazyLock<Option<[Regex; 4]>> = LazyLock::new(|| {
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
    Some([
        Regex::new(&relative).ok()?,
        Regex::new(&keyed).ok()?,
        Regex::new(&prose).ok()?,
        Regex::new(usage_epoch).ok()?,
    ])
});

/// The reset time a match of any of the [`PATTERNS`] names (each has its own named groups).
fn interpret<Z: TimeZone>(
    caps: &Captures<'_>,
    now: DateTime<Utc>,
    local: &Z,
) -> Option<(DateTime<Utc>, ResetKind)> {
    if let Some(duration) = caps.name("dur") {
        let seconds = duration_seconds(duration.as_str())?;
        return Some((after(now, seconds)?, ResetKind::Relative));
    }
    if caps.name("iso").is_some() {
        return Some((iso_time(caps, local)?, ResetKind::Timestamp));
    }
    if caps.name("http").is_some() {
        return Some((http_date(caps)?, ResetKind::HttpDate));
    }
    if let Some(digits) = caps.name("epoch") {
        return Some((epoch(digits.as_str())?, ResetKind::Epoch));
    }
    if let Some(number) = caps.name("num") {
        return keyed_number(caps, number.as_str(), now);
    }
    clock_time(caps, now, local)
}

/// The bare number of a `<reset key>: <number>`: a delay, or a Unix time when it is that large.
fn keyed_number(
    caps: &Captures<'_>,
    number: &str,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, ResetKind)> {
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

/// Seconds in `2 hours 13 minutes`, `6m0s`, `an hour`: `None` unless every segment has a
/// known unit and the total is within [`FUTURE_HORIZON`].
pub(crate) fn duration_seconds(text: &str) -> Option<f64> {
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
    ["an ", "a "]
        .into_iter()
        .find_map(|article| strip_prefix_ignore_case(text, article))
        .map(|rest| (1.0, rest))
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

/// A month's number from its three letters (the patterns capture no more), in any case.
fn month_number(name: &str) -> Option<u32> {
    Some(name.parse::<Month>().ok()?.number_from_month())
}

/// Which day a time of day belongs to.
#[derive(Clone, Copy)]
enum DaySpec {
    /// Today, else tomorrow.
    Next,
    Weekday(Weekday),
    /// Without a year: this year's, else next year's.
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
            DaySpec::Weekday(name.as_str().parse().ok()?),
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
mod tests;
