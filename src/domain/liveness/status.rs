//! What the agent says it is doing (`STATUS=`), since when, and when to tell people about it.
//!
//! The latest status and the time it was first set are kept for the status line, `watch`,
//! `status` and the idle stop message; re-sending the same text does not reset its age. The
//! `activity` event (and the console's dim line) is **rate-limited**: a change is published at
//! once if nothing was published in the last [`PUBLISH_INTERVAL`], otherwise it waits until
//! that interval is over, and only the status current then is published, so a burst of
//! changes costs one event and the last word is never lost. Nothing here causes a durable
//! write.
//!
//! Times are offsets from the launch, passed in by the caller.

use std::time::Duration;

use crate::domain::notify::StatusChange;

/// At most one `activity` event (and dim console line) per this interval.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// The latest status of one attempt and its publication.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatestStatus {
    current: Option<(String, Duration)>,
    /// The text last published (`None`: cleared, or nothing published yet).
    published: Option<String>,
    /// When something was last published.
    published_at: Option<Duration>,
    /// Whether the current status differs from what was published.
    unpublished: bool,
}

/// What the caller should do after a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publish {
    /// Publish this status (`None`: it was cleared) now.
    Now(Option<String>),
    /// Call [`LatestStatus::due`] at this time.
    At(Duration),
    /// Nothing new to publish.
    Nothing,
}

impl LatestStatus {
    /// The status and when it was set.
    pub fn current(&self) -> Option<(&str, Duration)> {
        self.current
            .as_ref()
            .map(|(text, since)| (text.as_str(), *since))
    }

    /// A `STATUS=` at `at`.
    pub fn update(&mut self, at: Duration, change: StatusChange) -> Publish {
        match change {
            StatusChange::Set(text) => {
                if self
                    .current
                    .as_ref()
                    .is_some_and(|(current, _)| *current == text)
                {
                    return Publish::Nothing;
                }
                self.current = Some((text, at));
            }
            StatusChange::Cleared => {
                if self.current.take().is_none() {
                    return Publish::Nothing;
                }
            }
        }
        self.unpublished = self.current_text() != self.published.as_deref();
        if !self.unpublished {
            return Publish::Nothing;
        }
        match self.published_at {
            Some(last) if at < last + PUBLISH_INTERVAL => Publish::At(last + PUBLISH_INTERVAL),
            _ => self.publish(at),
        }
    }

    /// The time asked for by [`Publish::At`] (or later) has come.
    pub fn due(&mut self, at: Duration) -> Publish {
        if !self.unpublished {
            return Publish::Nothing;
        }
        match self.published_at {
            Some(last) if at < last + PUBLISH_INTERVAL => Publish::At(last + PUBLISH_INTERVAL),
            _ => self.publish(at),
        }
    }

    fn current_text(&self) -> Option<&str> {
        self.current.as_ref().map(|(text, _)| text.as_str())
    }

    fn publish(&mut self, at: Duration) -> Publish {
        self.published = self.current_text().map(str::to_owned);
        self.published_at = Some(at);
        self.unpublished = false;
        Publish::Now(self.published.clone())
    }
}

/// `0.4 s`, `2.5 s`, `12 s`, `3 min 5 s`: how long ago, for messages.
pub fn format_age(age: Duration) -> String {
    let seconds = age.as_secs_f64();
    if seconds < 10.0 {
        let tenths = (seconds * 10.0).round() / 10.0;
        return format!("{} s", crate::domain::seconds::format_seconds(tenths));
    }
    let whole = age.as_secs() + u64::from(age.subsec_millis() >= 500);
    if whole < 120 {
        format!("{whole} s")
    } else {
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn set(text: &str) -> StatusChange {
        StatusChange::Set(text.to_owned())
    }

    #[test]
    fn the_first_change_is_published_at_once() {
        let mut status = LatestStatus::default();
        assert_eq!(status.current(), None);
        assert_eq!(
            status.update(ms(100), set("generating")),
            Publish::Now(Some("generating".to_owned()))
        );
        assert_eq!(status.current(), Some(("generating", ms(100))));
    }

    #[test]
    fn the_same_text_again_keeps_its_age_and_publishes_nothing() {
        let mut status = LatestStatus::default();
        status.update(ms(100), set("tool: Bash"));
        assert_eq!(status.update(ms(5000), set("tool: Bash")), Publish::Nothing);
        assert_eq!(status.current(), Some(("tool: Bash", ms(100))));
    }

    #[test]
    fn a_burst_is_published_once_with_its_last_word() {
        let mut status = LatestStatus::default();
        status.update(ms(0), set("thinking"));
        assert_eq!(
            status.update(ms(200), set("generating")),
            Publish::At(ms(1000))
        );
        assert_eq!(
            status.update(ms(300), set("tool: Read")),
            Publish::At(ms(1000))
        );
        assert_eq!(status.due(ms(900)), Publish::At(ms(1000)));
        assert_eq!(
            status.due(ms(1000)),
            Publish::Now(Some("tool: Read".to_owned()))
        );
        assert_eq!(status.due(ms(1500)), Publish::Nothing);
    }

    #[test]
    fn a_change_back_before_publication_publishes_nothing() {
        let mut status = LatestStatus::default();
        status.update(ms(0), set("generating"));
        status.update(ms(100), set("thinking"));
        assert_eq!(status.update(ms(200), set("generating")), Publish::Nothing);
        assert_eq!(status.due(ms(1000)), Publish::Nothing);
        // Its age is the new setting's: the text changed in between.
        assert_eq!(status.current(), Some(("generating", ms(200))));
    }

    #[test]
    fn clearing_is_a_change() {
        let mut status = LatestStatus::default();
        assert_eq!(
            status.update(ms(0), StatusChange::Cleared),
            Publish::Nothing
        );
        status.update(ms(0), set("x"));
        assert_eq!(
            status.update(ms(2000), StatusChange::Cleared),
            Publish::Now(None)
        );
        assert_eq!(status.current(), None);
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(format_age(ms(400)), "0.4 s");
        assert_eq!(format_age(ms(2500)), "2.5 s");
        assert_eq!(format_age(ms(9960)), "10 s");
        assert_eq!(format_age(ms(12_400)), "12 s");
        assert_eq!(format_age(ms(119_600)), "2 min 0 s");
        assert_eq!(format_age(ms(185_000)), "3 min 5 s");
    }

    proptest! {
        #[test]
        fn publications_are_at_least_an_interval_apart_and_the_last_status_is_published(
            changes in proptest::collection::vec((0u64..800, 0usize..4), 1..50),
        ) {
            let texts = ["a", "b", "c", "d"];
            let mut status = LatestStatus::default();
            let mut at = 0;
            let mut last_published: Option<u64> = None;
            let mut pending: Option<Duration> = None;
            let mut record = |publish: Publish, now: u64, pending: &mut Option<Duration>| {
                match publish {
                    Publish::Now(_) => {
                        if let Some(last) = last_published {
                            assert!(now >= last + 1000, "published at {now} after {last}");
                        }
                        last_published = Some(now);
                        *pending = None;
                    }
                    Publish::At(when) => *pending = Some(when),
                    Publish::Nothing => {}
                }
            };
            for (step, text) in changes {
                at += step;
                if let Some(when) = pending.filter(|when| *when <= ms(at)) {
                    let now = when.as_millis() as u64;
                    record(status.due(when), now, &mut pending);
                }
                record(status.update(ms(at), set(texts[text])), at, &mut pending);
            }
            if let Some(when) = pending {
                let now = when.as_millis() as u64;
                record(status.due(when), now, &mut pending);
            }
            prop_assert_eq!(status.due(ms(at + 10_000)), Publish::Nothing);
            prop_assert_eq!(status.published.as_deref(), status.current().map(|(text, _)| text));
        }
    }
}
