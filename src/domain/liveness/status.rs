//! What the agent says it is doing (`STATUS=`), since when, and when to publish it: at most
//! one `activity` event a [`PUBLISH_INTERVAL`], and only the status current when the interval
//! ends, so a burst of changes costs one event and the last word is never lost
//! (docs/liveness.md, "Statuses"). Times are offsets from the launch, passed in by the caller.

use std::time::Duration;

use crate::domain::notify::StatusChange;
use crate::domain::seconds::format_tenths;

pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatestStatus {
    /// The text and when it was first set.
    current: Option<(String, Duration)>,
    /// `None`: cleared, or nothing published yet.
    published: Option<String>,
    published_at: Option<Duration>,
}

/// What the caller should do after a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publish {
    /// Publish this status (`None`: it was cleared) now.
    Now(Option<String>),
    /// Call [`LatestStatus::due`] at this time.
    At(Duration),
    Nothing,
}

impl LatestStatus {
    pub fn current(&self) -> Option<(&str, Duration)> {
        self.current
            .as_ref()
            .map(|(text, since)| (text.as_str(), *since))
    }

    /// A `STATUS=` at `at`.
    pub fn update(&mut self, at: Duration, change: StatusChange) -> Publish {
        match change {
            StatusChange::Set(text) => {
                if self.current_text() == Some(text.as_str()) {
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
        self.due(at)
    }

    /// The time asked for by [`Publish::At`] (or later) has come.
    pub fn due(&mut self, at: Duration) -> Publish {
        if self.current_text() == self.published.as_deref() {
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
        Publish::Now(self.published.clone())
    }
}

/// `0.4 s`, `2.5 s`, `12 s`, `3 min 5 s`: how long ago, for messages.
pub fn format_age(age: Duration) -> String {
    if age.as_secs_f64() < 10.0 {
        return format!("{} s", format_tenths(age.as_secs_f64()));
    }
    let whole = age.as_secs() + u64::from(age.subsec_millis() >= 500);
    if whole < 120 {
        format!("{whole} s")
    } else {
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests;
