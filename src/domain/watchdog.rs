//! The rules of the per-run watchdog (docs/architecture.md, "The watchdog"): the messages the
//! handler and its workers send it, and which process groups it stops when the handler is
//! gone without having released them.
//!
//! The watchdog is a second process holding one end of a socket whose other end only the
//! handler holds; when the handler dies — even by SIGKILL — the socket reaches end of file.
//! Every worker registers its process group (`watch <pgid>`) from the forked child *before*
//! `exec`, so no window exists in which a worker runs unknown to the watchdog; the handler
//! releases the group (`release <pgid>`) once it has stopped it.

use std::collections::BTreeSet;

/// One message on the watchdog socket (one packet each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchdogMessage {
    /// A worker's process group (its leader's pid) exists and is the handler's to stop.
    Watch(u32),
    /// The handler stopped that group itself.
    Release(u32),
}

/// The longest message: `release ` and a 10-digit pid.
pub const MAX_MESSAGE: usize = 24;

impl WatchdogMessage {
    /// Writes the message into `buffer` without allocating — a worker sends it between
    /// `fork` and `exec`, where only async-signal-safe work is allowed — and returns its
    /// length.
    pub fn encode(self, buffer: &mut [u8; MAX_MESSAGE]) -> usize {
        let (word, number): (&[u8], u32) = match self {
            Self::Watch(pgid) => (b"watch ", pgid),
            Self::Release(pgid) => (b"release ", pgid),
        };
        buffer[..word.len()].copy_from_slice(word);
        let mut digits = [0u8; 10];
        let mut count = 0;
        let mut rest = number;
        loop {
            digits[count] = b'0' + (rest % 10) as u8;
            count += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        for (index, digit) in digits[..count].iter().rev().enumerate() {
            buffer[word.len() + index] = *digit;
        }
        word.len() + count
    }

    /// Reads one packet; anything else is ignored by the watchdog.
    pub fn parse(packet: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(packet).ok()?;
        let (word, number) = text.split_once(' ')?;
        let pgid = number.parse().ok()?;
        match word {
            "watch" => Some(Self::Watch(pgid)),
            "release" => Some(Self::Release(pgid)),
            _ => None,
        }
    }
}

/// The process groups the watchdog would stop now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    watched: BTreeSet<u32>,
    /// Groups the watchdog must never signal: its own and the handler's.
    never: [u32; 2],
}

impl Registry {
    pub fn new(own_pgid: u32, handler_pgid: u32) -> Self {
        Self {
            watched: BTreeSet::new(),
            never: [own_pgid, handler_pgid],
        }
    }

    pub fn apply(&mut self, message: WatchdogMessage) {
        match message {
            // pgid 0 and 1 (and our own groups) are never a worker's: refuse to record them.
            WatchdogMessage::Watch(pgid) if pgid > 1 && !self.never.contains(&pgid) => {
                self.watched.insert(pgid);
            }
            WatchdogMessage::Watch(_) => {}
            WatchdogMessage::Release(pgid) => {
                self.watched.remove(&pgid);
            }
        }
    }

    /// Forgets the groups that no longer exist: a pgid that is gone could later be reused by
    /// an unrelated group, which must never be signalled.
    pub fn forget_gone(&mut self, exists: impl Fn(u32) -> bool) {
        self.watched.retain(|pgid| exists(*pgid));
    }

    /// The groups to stop once the handler is gone without releasing them.
    pub fn unreleased(&self) -> Vec<u32> {
        self.watched.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_without_allocating() {
        for message in [
            WatchdogMessage::Watch(0),
            WatchdogMessage::Watch(7),
            WatchdogMessage::Release(4_194_304),
            WatchdogMessage::Watch(u32::MAX),
        ] {
            let mut buffer = [0u8; MAX_MESSAGE];
            let length = message.encode(&mut buffer);
            assert_eq!(WatchdogMessage::parse(&buffer[..length]), Some(message));
        }
        let mut buffer = [0u8; MAX_MESSAGE];
        let length = WatchdogMessage::Watch(4242).encode(&mut buffer);
        assert_eq!(&buffer[..length], b"watch 4242");
        assert_eq!(WatchdogMessage::parse(b"stop 12"), None);
        assert_eq!(WatchdogMessage::parse(b"watch x"), None);
    }

    #[test]
    fn only_unreleased_existing_worker_groups_are_stopped() {
        let mut registry = Registry::new(500, 600);
        for message in [
            WatchdogMessage::Watch(1000),
            WatchdogMessage::Watch(2000),
            WatchdogMessage::Watch(3000),
            WatchdogMessage::Release(2000),
            // Never its own group, the handler's, init's or 0.
            WatchdogMessage::Watch(500),
            WatchdogMessage::Watch(600),
            WatchdogMessage::Watch(1),
            WatchdogMessage::Watch(0),
        ] {
            registry.apply(message);
        }
        assert_eq!(registry.unreleased(), [1000, 3000]);
        registry.forget_gone(|pgid| pgid != 3000);
        assert_eq!(registry.unreleased(), [1000]);
    }
}
