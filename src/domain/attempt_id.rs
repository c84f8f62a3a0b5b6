//! Attempt ids: `<UTC compact timestamp>-<phase id>-<UUID v4>`, for example
//! `20261129T120102Z-phase-2-3f2b8c1e-…`. The timestamp makes artifacts sort by start time; the
//! UUID makes two attempts started in the same second distinct.

use uuid::Uuid;

use super::timestamp::Timestamp;

/// Builds the id from its parts; the caller supplies the clock and the randomness.
pub(crate) fn attempt_id(started_at: Timestamp, phase_id: &str, uuid: Uuid) -> String {
    format!("{}-{phase_id}-{}", started_at.compact(), uuid.hyphenated())
}

/// True when `id` is safe to use as a file stem: non-empty, no path separators, no leading dot.
/// Attempt ids read back from state are checked with this before any path is built from them.
pub(crate) fn is_safe_file_stem(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn id_has_timestamp_phase_and_uuid() {
        let at = Timestamp::from_datetime(Utc.with_ymd_and_hms(2026, 7, 5, 12, 1, 2).unwrap());
        let first = attempt_id(at, "phase-1", Uuid::new_v4());
        let second = attempt_id(at, "phase-1", Uuid::new_v4());
        assert!(first.starts_with("20260705T120102Z-phase-1-"));
        assert_ne!(first, second);
        let suffix = &first["20260705T120102Z-phase-1-".len()..];
        assert!(Uuid::parse_str(suffix).is_ok());
        assert!(is_safe_file_stem(&first));
    }

    #[test]
    fn unsafe_stems_are_rejected() {
        for bad in ["", ".hidden", "a/b", "..", "a b", "x\0"] {
            assert!(!is_safe_file_stem(bad), "{bad:?}");
        }
    }
}
