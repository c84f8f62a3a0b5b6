//! How durations and sizes read in what a person sees (`3m12s`, `1.2 MiB`); JSON carries the
//! raw milliseconds and bytes instead.

use std::time::Duration;

/// `49ms`, `4.2s`, `12s`, `3m12s`, `1h05m`: milliseconds below a second, one decimal below
/// ten seconds, then whole units, the smaller one zero-padded.
pub(crate) fn duration(ms: u64) -> String {
    let seconds = ms / 1000;
    match seconds {
        0 => format!("{ms}ms"),
        1..10 => format!("{:.1}s", ms as f64 / 1000.0),
        10..60 => format!("{seconds}s"),
        60..3600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3600, seconds % 3600 / 60),
    }
}

/// [`duration`] of a measured time.
pub(crate) fn elapsed(time: Duration) -> String {
    duration(millis(time))
}

/// Whole milliseconds, saturating.
pub(crate) fn millis(time: Duration) -> u64 {
    time.as_millis().try_into().unwrap_or(u64::MAX)
}

/// `40, 41, 42`: the first twenty pids, `, …` when there are more.
pub(crate) fn pids(pids: &[u32]) -> String {
    let listed: Vec<String> = pids.iter().take(20).map(u32::to_string).collect();
    let more = if pids.len() > 20 { ", …" } else { "" };
    format!("{}{more}", listed.join(", "))
}

/// `1 attempt`, `3 attempts`.
pub(crate) fn count(count: usize, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        count => format!("{count} {noun}s"),
    }
}

/// `512 B`, `12.3 KiB`, `1.2 MiB`, `3.0 GiB` (binary units, one decimal).
pub(crate) fn bytes(count: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if count < 1024 {
        return format!("{count} B");
    }
    let mut value = count as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration(0), "0ms");
        assert_eq!(duration(420), "420ms");
        assert_eq!(duration(4_240), "4.2s");
        assert_eq!(duration(9_949), "9.9s");
        assert_eq!(duration(12_700), "12s");
        assert_eq!(duration(192_000), "3m12s");
        assert_eq!(duration(3_599_999), "59m59s");
        assert_eq!(duration(3_900_000), "1h05m");
        assert_eq!(duration(100 * 3_600_000), "100h00m");
    }

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(1_258_291), "1.2 MiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(bytes(u64::MAX), "16777216.0 TiB");
    }
}
