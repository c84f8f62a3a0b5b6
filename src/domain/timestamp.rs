//! UTC timestamps as stored in state and outcome records: written as `YYYY-MM-DDTHH:MM:SSZ`,
//! read back from any RFC 3339 value with an offset, so a hand-edited `+00:00` still validates.

use std::fmt;

use chrono::{DateTime, Datelike, SecondsFormat, SubsecRound, Utc};
use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde_with::SerializeDisplay,
)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// Truncates to whole seconds, the precision the records keep.
    pub(crate) fn from_datetime(at: DateTime<Utc>) -> Self {
        Self(at.trunc_subsecs(0))
    }

    /// Parses an RFC 3339 timestamp with an explicit offset. The UTC year must stay within
    /// 0000–9999: an offset can push an edge value out of that range, and such a value would be
    /// written back in a form (`+10000-…`) that RFC 3339 cannot express.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let at = DateTime::parse_from_rfc3339(text)
            .map_err(|_| TimestampError)?
            .with_timezone(&Utc);
        if !(0..=9999).contains(&at.year()) {
            return Err(TimestampError);
        }
        Ok(Self::from_datetime(at))
    }

    pub(crate) fn as_datetime(&self) -> DateTime<Utc> {
        self.0
    }

    /// The compact form used inside attempt ids: `20261129T120102Z`.
    pub(crate) fn compact(&self) -> String {
        self.0.format("%Y%m%dT%H%M%SZ").to_string()
    }
}

/// The text is not an ISO 8601 / RFC 3339 timestamp with an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampError;

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Secs, true))
    }
}

/// Read strictly: a string that is a valid date and time but lacks the offset gets its own
/// message, since adding `Z` is the fix.
impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TimestampVisitor)
    }
}

struct TimestampVisitor;

impl Visitor<'_> for TimestampVisitor {
    type Value = Timestamp;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an ISO 8601 timestamp")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Timestamp, E> {
        Timestamp::parse(text).map_err(|_| {
            if is_local_date_time(text) {
                E::custom("to include a UTC offset")
            } else {
                E::invalid_value(Unexpected::Str(text), &self)
            }
        })
    }
}

/// True for an ISO 8601 date or date-time without an offset (`2026-07-05T12:01:02`,
/// `2026-07-05 12:01`, `2026-07-05`): a timestamp that only lacks its offset.
fn is_local_date_time(text: &str) -> bool {
    const DATE_TIMES: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ];
    DATE_TIMES
        .iter()
        .any(|format| chrono::NaiveDateTime::parse_from_str(text, format).is_ok())
        || chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn formats_seconds_precision_utc() {
        let at = Utc.with_ymd_and_hms(2026, 7, 5, 12, 1, 2).unwrap();
        let ts = Timestamp::from_datetime(at + chrono::Duration::milliseconds(999));
        assert_eq!(ts.to_string(), "2026-07-05T12:01:02Z");
        assert_eq!(ts.compact(), "20260705T120102Z");
    }

    #[test]
    fn parses_offsets_and_rejects_naive() {
        let ts = Timestamp::parse("2026-07-05T14:01:02+02:00").unwrap();
        assert_eq!(ts.to_string(), "2026-07-05T12:01:02Z");
        assert!(Timestamp::parse("2026-07-05T12:01:02").is_err());
        assert!(Timestamp::parse("yesterday").is_err());
    }

    #[test]
    fn local_date_times_are_recognized() {
        for local in ["2026-07-05 12:01:02.5", "2026-07-05T12:01", "2026-07-05"] {
            assert!(is_local_date_time(local), "{local}");
        }
        for other in [
            "2026-07-05T25:00:00",
            "12:01:02",
            "2026-07-05T12:01:02Z",
            "",
        ] {
            assert!(!is_local_date_time(other), "{other}");
        }
    }

    #[test]
    fn offsets_may_not_leave_the_four_digit_years() {
        assert!(Timestamp::parse("9999-12-31T23:59:59-01:00").is_err());
        assert!(Timestamp::parse("0000-01-01T00:00:00+00:01").is_err());
        let edge = Timestamp::parse("9999-12-31T23:59:59Z").unwrap();
        assert_eq!(Timestamp::parse(&edge.to_string()), Ok(edge));
    }
}
