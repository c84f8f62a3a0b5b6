//! The attempt's notification socket once its worker runs: the receiving thread
//! ([`crate::platform::notify_socket::NotifyReceiver`]) with the attempt's membership check,
//! and where each accepted datagram goes — what concerns the clocks (a sign of life, a status,
//! an extension) to the deadline timer, a usage report to the attempt supervisor, whose
//! lifecycle folds it and applies the budget caps.
//!
//! Deliveries are cast from the receiving thread. Plain pings (`WATCHDOG=1` and other
//! datagrams with neither a status nor an extension) are coalesced to one per
//! [`PING_INTERVAL`], like output notices: a flood of them costs the timer nothing. The
//! supervisor drains the socket once the group is empty ([`NotifyReceiver::finish`]); every
//! report read by then was cast before the drain reports back, so it reaches the lifecycle
//! before recording starts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::ActorRef;

use super::deadline_timer::TimerMsg;
use super::messages::AttemptMsg;
use crate::actors::notify;
use crate::platform::activity_sampler::AttemptProcesses;
use crate::platform::notify_socket::{Delivery, NotifyReceiver, NotifySocket};

/// Plain pings reach the timer at most once per this interval.
const PING_INTERVAL: Duration = Duration::from_millis(20);

/// Starts receiving on `socket` for the attempt whose processes are `processes`. `None` when
/// the thread cannot be started: the attempt then runs without notifications (logged).
pub(crate) fn start(
    socket: NotifySocket,
    processes: Arc<AttemptProcesses>,
    timer: ActorRef<TimerMsg>,
    supervisor: ActorRef<AttemptMsg>,
) -> Option<NotifyReceiver> {
    let mut last_ping: Option<Instant> = None;
    let deliver = move |delivery: Delivery| {
        let notification = delivery.notification;
        let at = Instant::now();
        let plain = notification.status.is_none() && notification.extend_timeout.is_none();
        if !plain || last_ping.is_none_or(|last| at.duration_since(last) >= PING_INTERVAL) {
            last_ping = Some(at);
            notify(
                &timer,
                TimerMsg::Notified {
                    at,
                    status: notification.status,
                    extend: notification.extend_timeout,
                },
            );
        }
        if let Some(report) = notification.usage {
            notify(&supervisor, AttemptMsg::UsageReported(Box::new(report)));
        }
    };
    let is_member = move |pid| processes.is_member(pid);
    match NotifyReceiver::start(socket, is_member, deliver) {
        Ok(receiver) => Some(receiver),
        Err(error) => {
            tracing::warn!(%error, "cannot start the notification receiver; the worker's notifications are not read");
            None
        }
    }
}
