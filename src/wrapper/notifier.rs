//! What a wrapper tells the runner besides its output: statuses, idle extensions and usage,
//! sent on the runner's `NOTIFY_SOCKET` (docs/worker-protocol.md, "Notifications"); nothing
//! without one.

use std::sync::Mutex;
use std::time::Duration;

use crate::domain::marker::defuse_tags;
use crate::domain::status_text::sanitize_status;
use crate::domain::token_usage::report::UsageReport;
use crate::platform::notify_socket::NotifySender;

/// What the runner should be told: `STATUS=`, `EXTEND_TIMEOUT_USEC=` (a silence on purpose),
/// `X_AISH_USAGE=`.
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    Status(String),
    Extend(Duration),
    Usage(UsageReport),
}

impl Notice {
    /// A status made one printable line, tag text defused as in the diagnostics.
    pub fn status(text: &str) -> Self {
        Self::Status(defuse_tags(&sanitize_status(text)).into_owned())
    }

    pub fn datagram(&self) -> String {
        match self {
            Self::Status(text) => format!("STATUS={text}"),
            Self::Extend(duration) => format!("EXTEND_TIMEOUT_USEC={}", duration.as_micros()),
            Self::Usage(report) => format!("X_AISH_USAGE={}", report.to_json()),
        }
    }
}

/// Sends notices on `NOTIFY_SOCKET`, if the wrapper has one.
#[derive(Debug, Default)]
pub struct Notifier {
    sender: Option<NotifySender>,
    /// The last status and usage report sent, so repeats are not sent again.
    last: Mutex<(Option<String>, Option<String>)>,
}

impl Notifier {
    pub fn from_env() -> Self {
        Self {
            sender: NotifySender::from_env(),
            last: Mutex::default(),
        }
    }

    /// Sends `notices` in order, skipping repeats. Never blocks and never fails the session: a
    /// notice the runner's queue has no room for is dropped.
    pub fn send(&self, notices: &[Notice]) {
        let Some(sender) = &self.sender else {
            return;
        };
        for notice in notices {
            let datagram = notice.datagram();
            if let Ok(mut last) = self.last.lock() {
                let slot = match notice {
                    Notice::Status(_) => &mut last.0,
                    Notice::Usage(_) => &mut last.1,
                    Notice::Extend(_) => {
                        let _ = sender.send(&datagram);
                        continue;
                    }
                };
                if slot.as_deref() == Some(datagram.as_str()) {
                    continue;
                }
                *slot = Some(datagram.clone());
            }
            if let Err(error) = sender.send(&datagram) {
                tracing::debug!(%error, "a notification was not delivered");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixDatagram;

    use super::*;
    use crate::domain::token_usage::TokenCounts;

    #[test]
    fn notices_are_one_line_datagrams() {
        assert_eq!(
            Notice::status("tool: Bash\n<phase-complete>x</phase-complete>").datagram(),
            "STATUS=tool: Bash &lt;phase-complete>x&lt;/phase-complete>"
        );
        assert_eq!(
            Notice::Extend(Duration::from_millis(18_600)).datagram(),
            "EXTEND_TIMEOUT_USEC=18600000"
        );
        let report = UsageReport {
            totals: TokenCounts {
                input_tokens: Some(3),
                ..TokenCounts::default()
            },
            is_final: true,
            ..UsageReport::default()
        };
        assert_eq!(
            Notice::Usage(report).datagram(),
            "X_AISH_USAGE={\"input_tokens\":3,\"final\":true}"
        );
    }

    #[test]
    fn repeats_are_not_sent_and_extensions_always_are() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).expect("bind");
        receiver.set_nonblocking(true).expect("non-blocking");
        let notifier = Notifier {
            sender: Some(NotifySender::connect(path.as_os_str()).expect("connect")),
            last: Mutex::default(),
        };
        assert!(notifier.sender.is_some());
        let extend = Notice::Extend(Duration::from_secs(1));
        notifier.send(&[
            Notice::status("generating"),
            Notice::status("generating"),
            extend.clone(),
            extend,
            Notice::status("thinking"),
            Notice::status("generating"),
        ]);
        let mut received = Vec::new();
        let mut buffer = [0u8; 256];
        while let Ok(len) = receiver.recv(&mut buffer) {
            received.push(String::from_utf8_lossy(&buffer[..len]).into_owned());
        }
        assert_eq!(
            received,
            [
                "STATUS=generating",
                "EXTEND_TIMEOUT_USEC=1000000",
                "EXTEND_TIMEOUT_USEC=1000000",
                "STATUS=thinking",
                "STATUS=generating",
            ]
        );
    }

    #[test]
    fn without_a_socket_nothing_is_sent() {
        let notifier = Notifier::default();
        assert!(notifier.sender.is_none());
        notifier.send(&[Notice::status("generating")]);
    }
}
