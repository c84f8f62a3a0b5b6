//! When a running attempt's usage becomes a `usage` event: at most one per
//! [`USAGE_EVENT_INTERVAL`], so a chatty agent costs the event stream a line a second. A report
//! in between is not written: the next carries newer totals, and the outcome the final ones.

use std::time::Duration;

pub const USAGE_EVENT_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsagePublication {
    /// When the last `usage` event was written.
    last: Option<Duration>,
}

impl UsagePublication {
    /// The attempt's usage changed at `at`: whether to write a `usage` event now.
    pub fn changed(&mut self, at: Duration) -> bool {
        match self.last {
            Some(last) if at < last + USAGE_EVENT_INTERVAL => false,
            _ => {
                self.last = Some(at);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn the_first_change_is_published_at_once() {
        assert!(UsagePublication::default().changed(ms(0)));
        assert!(UsagePublication::default().changed(ms(12_345)));
    }

    #[test]
    fn changes_within_the_interval_are_not_published() {
        let mut publication = UsagePublication::default();
        assert!(publication.changed(ms(100)));
        assert!(!publication.changed(ms(100)));
        assert!(!publication.changed(ms(600)));
        assert!(!publication.changed(ms(1_099)));
        assert!(publication.changed(ms(1_100)), "the interval is over");
        assert!(!publication.changed(ms(2_000)));
        assert!(publication.changed(ms(2_100)));
    }

    #[test]
    fn a_burst_of_reports_costs_one_event_a_second() {
        let mut publication = UsagePublication::default();
        let published = (0..10_000)
            .filter(|step| publication.changed(ms(step / 2)))
            .count();
        // 10 000 reports over 5 s: at 0, 1, 2, 3 and 4 s.
        assert_eq!(published, 5);
    }
}
