//! Where the attempt's accepted notifications go: what concerns the clocks (a sign of life, a
//! status, an extension) to the deadline timer, plain pings coalesced to one per
//! [`NOTICE_INTERVAL`]; a usage report to the attempt supervisor. Membership is checked against
//! the attempt's processes.

use std::sync::Arc;
use std::time::Instant;

use ractor::ActorRef;
use tokio::sync::oneshot::{self, error::TryRecvError};
use tracing::Instrument;

use super::deadline_timer::{NOTICE_INTERVAL, TimerMsg};
use super::messages::AttemptMsg;
use crate::actors::notify;
use crate::domain::lifecycle::attempt::AttemptEvent;
use crate::domain::liveness::clock::ClockInput;
use crate::domain::notify::AGENT_LOG_TARGET;
use crate::platform::activity_sampler::AttemptProcesses;
use crate::platform::notify_socket::{Delivery, NotifySocket};

/// `launched` is the clocks' origin.
pub(crate) fn start(
    socket: NotifySocket,
    launched: Instant,
    processes: Arc<AttemptProcesses>,
    timer: ActorRef<TimerMsg>,
    supervisor: ActorRef<AttemptMsg>,
) -> oneshot::Sender<()> {
    let reports = supervisor.clone();
    let mut last_ping: Option<Instant> = None;
    let deliver = move |delivery: Delivery| {
        let notification = delivery.notification;
        let at = Instant::now();
        let plain = notification.status.is_none() && notification.extend_timeout.is_none();
        if !plain || last_ping.is_none_or(|last| at.duration_since(last) >= NOTICE_INTERVAL) {
            last_ping = Some(at);
            notify(
                &timer,
                TimerMsg::Notified(ClockInput::Notified {
                    at: at.saturating_duration_since(launched),
                    status: notification.status,
                    extend: notification.extend_timeout,
                }),
            );
        }
        let reported = match notification.usage {
            Some(Ok(report)) => {
                tracing::info!(
                    target: AGENT_LOG_TARGET,
                    input_tokens = report.totals.input_tokens,
                    output_tokens = report.totals.output_tokens,
                    cost_usd = report.totals.cost_usd,
                    is_final = report.is_final,
                    "usage reported"
                );
                AttemptEvent::UsageReported(report)
            }
            Some(Err(error)) => {
                tracing::info!(target: AGENT_LOG_TARGET, %error, "invalid usage report ignored");
                AttemptEvent::UsageRejected(error)
            }
            None => return,
        };
        notify(&reports, reported.into());
    };
    // Membership reads `/proc` (a few small reads per new sender): off the runtime threads.
    let is_member = move |pid| tokio::task::block_in_place(|| processes.is_member(pid));
    let (drain, mut drained) = oneshot::channel();
    let receiving = async move {
        // Lets tests hold the receiver before its first read
        // (`notify-receive=1*sleep(1000)`): a worker that notifies and exits meanwhile is
        // heard only through the drain at the stop.
        if cfg!(feature = "failpoints") {
            let _ = tokio::task::spawn_blocking(|| fail::fail_point!("notify-receive")).await;
        }
        let tally = socket.receive(is_member, deliver, &mut drained).await;
        // A receiving that failed early still answers only the drain.
        if let Err(TryRecvError::Empty) = drained.try_recv() {
            let _ = drained.await;
        }
        tally
    };
    let receiving = tokio::spawn(receiving.in_current_span());
    tokio::spawn(
        async move {
            // A receiver that panicked still answers, so the drain never waits out its limit.
            let tally = receiving.await.unwrap_or_else(|error| {
                tracing::warn!(%error, "the notification receiver failed; its counts are lost");
                Default::default()
            });
            // Every report read was sent before this message.
            notify(&supervisor, AttemptMsg::NotificationsDrained(tally));
        }
        .in_current_span(),
    );
    drain
}
