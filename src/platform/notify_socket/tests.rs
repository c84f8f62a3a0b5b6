//! Tests of the attempt's notification socket with real datagrams: its private address, senders inside and outside the attempt, garbage, oversized datagrams, passed descriptors (closed off the receiver), `systemd-notify`.

use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::sync::{Arc, Mutex};

use super::*;
use crate::domain::notify::StatusChange;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A socket under test: binds, receives on a task, collects deliveries.
struct Harness {
    name: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<NotifyTally>,
    delivered: Arc<Mutex<Vec<Delivery>>>,
}

impl Harness {
    fn start(is_member: impl FnMut(u32) -> bool + Send + 'static) -> Self {
        Self::start_with(NotifySocket::bind().expect("bind"), is_member)
    }

    fn start_with(
        socket: NotifySocket,
        is_member: impl FnMut(u32) -> bool + Send + 'static,
    ) -> Self {
        let name = socket.env_value().to_owned();
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let sink = delivered.clone();
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let deliver = move |delivery| sink.lock().unwrap().push(delivery);
            socket.receive(is_member, deliver, &mut stopped).await
        });
        Self {
            name,
            stop: Some(stop),
            task,
            delivered,
        }
    }

    fn sender(&self) -> NotifySender {
        NotifySender::connect(OsStr::new(&self.name)).expect("connect")
    }

    async fn wait_for(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.delivered.lock().unwrap().len() < count && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn finish(mut self) -> (NotifyTally, Vec<Delivery>) {
        let _ = self.stop.take().expect("not finished").send(());
        let tally = self.task.await.expect("receiver task");
        let delivered = std::mem::take(&mut *self.delivered.lock().unwrap());
        (tally, delivered)
    }
}

fn own_pid() -> impl Fn(u32) -> bool + Send + 'static {
    let me = std::process::id();
    move |pid| pid == me
}

#[test]
fn the_address_is_a_path_in_a_directory_only_the_user_can_enter() {
    use std::os::unix::fs::MetadataExt;
    runtime().block_on(async {
        let socket = NotifySocket::bind().expect("bind");
        let path = std::path::PathBuf::from(socket.env_value());
        assert!(path.is_absolute(), "{}", path.display());
        assert!(path.as_os_str().len() <= MAX_SOCKET_PATH);
        let directory = path.parent().expect("a directory").to_owned();
        let metadata = std::fs::metadata(&directory).expect("directory");
        assert_eq!(metadata.mode() & 0o777, 0o700);
        assert_eq!(metadata.uid(), rustix::process::getuid().as_raw());
        // std's own client reaches it by the same name.
        let client = UnixDatagram::unbound().expect("client");
        client.send_to(b"WATCHDOG=1", &path).expect("send");
        // Gone, directory and all, once the socket is.
        let harness = Harness::start_with(socket, own_pid());
        harness.wait_for(1).await;
        harness.finish().await;
        assert!(!directory.exists(), "{} is left", directory.display());
    });
    let socket = NotifySocket::bind().expect("bind");
    let directory = std::path::Path::new(socket.env_value())
        .parent()
        .unwrap()
        .to_owned();
    drop(socket);
    assert!(!directory.exists(), "{} is left", directory.display());
}

#[test]
fn accepted_datagrams_are_delivered_with_their_sender() {
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let sender = harness.sender();
        sender
            .send("STATUS=tool: Bash cargo test\nWATCHDOG=1")
            .unwrap();
        sender.send("EXTEND_TIMEOUT_USEC=5000000").unwrap();
        harness.wait_for(2).await;
        let (tally, delivered) = harness.finish().await;
        assert_eq!(tally.accepted, 2);
        assert_eq!(delivered[0].pid, std::process::id());
        assert_eq!(
            delivered[0].notification.status,
            Some(StatusChange::Set("tool: Bash cargo test".to_owned()))
        );
        assert!(delivered[0].notification.watchdog);
        assert_eq!(
            delivered[1].notification.extend_timeout,
            Some(Duration::from_secs(5))
        );
    });
}

#[test]
fn senders_outside_the_attempt_are_dropped_and_counted() {
    runtime().block_on(async {
        let harness = Harness::start(|_| false);
        harness.sender().send("WATCHDOG=1").unwrap();
        // Queued before the stop, so read by the drain at the latest.
        let (tally, delivered) = harness.finish().await;
        assert!(delivered.is_empty());
        assert_eq!(tally.from_outside, 1);
        assert_eq!(tally.accepted, 0);
    });
}

#[test]
fn garbage_and_oversized_datagrams_change_nothing_but_the_tally() {
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let sender = harness.sender();
        sender.send("garbage").unwrap();
        let huge = format!("STATUS={}", "x".repeat(64 * 1024));
        // A datagram beyond the default send buffer may be refused by the kernel outright.
        let _ = sender.send(&huge);
        sender.send("STATUS=\u{1b}").unwrap();
        sender.send("WATCHDOG=1").unwrap();
        harness.wait_for(2).await;
        let (tally, delivered) = harness.finish().await;
        assert_eq!(tally.malformed, 1);
        assert_eq!(tally.accepted, 2);
        assert!(tally.oversized <= 1);
        assert_eq!(delivered.len(), 2);
    });
}

#[test]
fn a_datagram_larger_than_the_buffer_is_oversized() {
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let client = UnixDatagram::unbound().expect("client");
        socket::setsockopt(&client, sockopt::SndBuf, &(256 * 1024)).expect("sndbuf");
        let address = &harness.name;
        let huge = format!("STATUS={}", "x".repeat(64 * 1024));
        client
            .send_to(huge.as_bytes(), address)
            .expect("send 64 KiB");
        client.send_to(b"WATCHDOG=1", address).expect("send");
        harness.wait_for(1).await;
        let (tally, delivered) = harness.finish().await;
        assert_eq!(tally.oversized, 1);
        assert_eq!(delivered.len(), 1);
        assert!(delivered[0].notification.watchdog);
    });
}

/// Sends `BARRIER=1` with `fds` passed along.
fn send_descriptors(harness: &Harness, fds: &[RawFd]) -> nix::Result<usize> {
    let client = UnixDatagram::unbound().expect("client");
    let address = UnixAddr::new(harness.name.as_str()).unwrap();
    socket::sendmsg(
        client.as_raw_fd(),
        &[IoSlice::new(b"BARRIER=1")],
        &[socket::ControlMessage::ScmRights(fds)],
        MsgFlags::empty(),
        Some(&address),
    )
}

#[test]
fn passed_descriptors_are_closed_at_once() {
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let (read_end, write_end) = nix::unistd::pipe().expect("pipe");
        send_descriptors(&harness, &[write_end.as_raw_fd()]).expect("sendmsg");
        drop(write_end);
        // Once the receiver closed its copy, the read end sees end of file: what
        // `systemd-notify` waits for.
        let closed = tokio::task::spawn_blocking(move || {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            let mut fds = [PollFd::new(read_end.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::from(30_000u16)).expect("poll") == 1
                && fds[0]
                    .revents()
                    .is_some_and(|events| events.contains(PollFlags::POLLHUP))
        })
        .await
        .expect("join");
        assert!(closed, "the passed descriptor was not closed");
        let (tally, delivered) = harness.finish().await;
        assert_eq!(tally.descriptors_closed, 1);
        assert_eq!(delivered.len(), 1);
    });
}

/// A TCP socket with unsent data, `SO_LINGER` 120 s and a peer that never reads: its last
/// close blocks for the linger time. Passed to the receiver, that close must not hold up the
/// datagrams after it.
#[test]
fn a_passed_lingering_socket_does_not_stall_the_receiver() {
    use std::io::Write;
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
        eprintln!("no loopback network here; skipped");
        return;
    };
    let mut lingering =
        std::net::TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
    let (_peer, _) = listener.accept().expect("accept");
    socket::setsockopt(
        &lingering,
        sockopt::Linger,
        &nix::libc::linger {
            l_onoff: 1,
            l_linger: 120,
        },
    )
    .expect("linger");
    lingering.set_nonblocking(true).expect("non-blocking");
    let chunk = vec![0u8; 64 * 1024];
    while lingering.write(&chunk).is_ok() {}
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let started = std::time::Instant::now();
        send_descriptors(&harness, &[lingering.as_raw_fd()]).expect("sendmsg");
        drop(lingering);
        let sender = harness.sender();
        sender.send("STATUS=after the socket").unwrap();
        harness.wait_for(2).await;
        // A close on the receiver would have held it (and this runtime) for the 120 s.
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(60), "held up for {waited:?}");
        let (tally, delivered) = harness.finish().await;
        assert_eq!(tally.descriptors_closed, 1);
        assert_eq!(delivered.len(), 2, "{tally:?}");
    });
}

#[test]
fn a_flooding_sender_is_judged_once() {
    runtime().block_on(async {
        let judged = Arc::new(Mutex::new(0));
        let count = judged.clone();
        let harness = Harness::start(move |_| {
            *count.lock().unwrap() += 1;
            false
        });
        let started = std::time::Instant::now();
        let sender = harness.sender();
        for _ in 0..500 {
            while sender.send("WATCHDOG=1").is_err() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let (tally, _) = harness.finish().await;
        assert_eq!(tally.from_outside, 500);
        // Once a second at most, not once a datagram.
        let judged = *judged.lock().unwrap();
        let seconds = started.elapsed().as_secs() + 1;
        assert!(judged <= seconds, "judged {judged} times in {seconds} s");
    });
}

#[test]
fn systemd_notify_is_heard_and_returns() {
    if Command::new("systemd-notify")
        .arg("--help")
        .output()
        .is_err()
    {
        eprintln!("systemd-notify is not installed; skipped");
        return;
    }
    runtime().block_on(async {
        // systemd-notify sends with its parent's pid (ours) when it may, else its own.
        let me = std::process::id();
        let harness = Harness::start(move |pid| {
            pid == me
                || crate::platform::proc::stat(pid)
                    .ok()
                    .flatten()
                    .is_some_and(|process| process.ppid == me)
        });
        let name = harness.name.clone();
        let status = tokio::task::spawn_blocking(move || {
            Command::new("systemd-notify")
                .arg("--status=compiling")
                .env(NOTIFY_SOCKET, name)
                .status()
        });
        let status = tokio::time::timeout(Duration::from_secs(30), status)
            .await
            .expect("systemd-notify returned")
            .expect("join")
            .expect("run systemd-notify");
        assert!(status.success(), "{status}");
        harness.wait_for(1).await;
        let (_, delivered) = harness.finish().await;
        assert!(delivered.iter().any(|delivery| delivery.notification.status
            == Some(StatusChange::Set("compiling".to_owned()))));
    });
}

#[test]
fn a_burst_is_read_whole_and_parsed_within_the_guard() {
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let sender = harness.sender();
        let mut sent = 0;
        // Send until the queue is full or 10,000 are out, reading meanwhile.
        for _ in 0..10_000 {
            while sender.send("WATCHDOG=1").is_err() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            sent += 1;
        }
        let (tally, _) = harness.finish().await;
        assert_eq!(tally.accepted + tally.flooded, sent);
        assert!(tally.accepted >= u64::from(crate::domain::notify::PARSE_BURST));
    });
}

#[test]
fn queued_datagrams_are_read_when_receiving_stops() {
    runtime().block_on(async {
        let harness = Harness::start(own_pid());
        let sender = harness.sender();
        for index in 0..5 {
            sender.send(&format!("STATUS=step {index}")).unwrap();
        }
        let (tally, delivered) = harness.finish().await;
        assert_eq!(tally.accepted, 5);
        assert_eq!(delivered.len(), 5);
    });
}

#[test]
fn a_receiver_reads_what_was_sent_before_it_started() {
    let socket = NotifySocket::bind().expect("bind");
    let sender = NotifySender::connect(OsStr::new(socket.env_value())).expect("connect");
    // The worker may notify before its identity is known and the receiver started.
    sender.send("STATUS=early").unwrap();
    let (tally, delivered) = runtime().block_on(async {
        let harness = Harness::start_with(socket, own_pid());
        sender.send("STATUS=later").unwrap();
        harness.finish().await
    });
    assert_eq!(tally.accepted, 2);
    let statuses: Vec<_> = delivered
        .iter()
        .map(|delivery| delivery.notification.status.clone())
        .collect();
    assert_eq!(
        statuses,
        [
            Some(StatusChange::Set("early".to_owned())),
            Some(StatusChange::Set("later".to_owned()))
        ]
    );
}

#[test]
fn a_sender_without_a_receiver_fails_without_blocking() {
    let sender =
        NotifySender::connect(OsStr::new("@ai-session-handler/nobody/none")).expect("connect");
    assert!(sender.send("WATCHDOG=1").is_err());
    let sender = NotifySender::connect(OsStr::new("/nonexistent/notify")).expect("connect");
    assert!(sender.send("WATCHDOG=1").is_err());
    assert!(NotifySender::connect(OsStr::new("relative/path")).is_err());
    assert!(NotifySender::connect(OsStr::new("")).is_err());
}
