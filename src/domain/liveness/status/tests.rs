//! Unit and property tests of the agent's status and its rate-limited publication.

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
