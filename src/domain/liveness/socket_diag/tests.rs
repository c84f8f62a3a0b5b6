//! Unit and property tests of the `sock_diag` request and the parse of its replies.

use proptest::prelude::*;

use super::*;

fn header(len: usize, kind: u16, seq: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&(len as u32).to_ne_bytes());
    bytes.extend_from_slice(&kind.to_ne_bytes());
    bytes.extend_from_slice(&2u16.to_ne_bytes());
    bytes.extend_from_slice(&seq.to_ne_bytes());
    bytes.extend_from_slice(&0u32.to_ne_bytes());
    bytes
}

/// A reply for one socket, as the kernel writes it (with an attribute before the info).
fn socket_reply(seq: u32, inode: u32, received: u64, last_ms: u32) -> Vec<u8> {
    let mut message = vec![0u8; INET_DIAG_MSG];
    message[0] = 2;
    message[INODE_OFFSET..INODE_OFFSET + 4].copy_from_slice(&inode.to_ne_bytes());
    // INET_DIAG_SHUTDOWN (8), one byte, padded.
    message.extend_from_slice(&5u16.to_ne_bytes());
    message.extend_from_slice(&8u16.to_ne_bytes());
    message.extend_from_slice(&[0, 0, 0, 0]);
    let mut info = vec![0u8; 232];
    info[LAST_DATA_RECV_OFFSET..LAST_DATA_RECV_OFFSET + 4].copy_from_slice(&last_ms.to_ne_bytes());
    info[BYTES_RECEIVED_OFFSET..BYTES_RECEIVED_OFFSET + 8].copy_from_slice(&received.to_ne_bytes());
    message.extend_from_slice(&((info.len() + 4) as u16).to_ne_bytes());
    message.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
    message.extend_from_slice(&info);
    let mut reply = header(NLMSG_HEADER + message.len(), SOCK_DIAG_BY_FAMILY, seq);
    reply.extend_from_slice(&message);
    reply
}

#[test]
fn the_request_asks_for_every_tcp_socket_with_its_info() {
    let request = dump_request(10, 7);
    assert_eq!(u32_at(&request, 0), Some(72));
    assert_eq!(u16::from_ne_bytes([request[4], request[5]]), 20);
    assert_eq!(u16::from_ne_bytes([request[6], request[7]]), 0x301);
    assert_eq!(u32_at(&request, 8), Some(7));
    assert_eq!(&request[16..20], &[10, 6, 2, 0]);
    assert_eq!(u32_at(&request, 20), Some(u32::MAX));
}

#[test]
fn replies_become_socket_counters_until_done() {
    let mut bytes = socket_reply(7, 42, 1234, 15);
    bytes.extend(socket_reply(6, 43, 1, 1)); // an earlier dump's straggler
    bytes.extend(socket_reply(7, 44, 99, 70_000));
    let mut sockets = Vec::new();
    assert_eq!(
        parse_replies(&bytes, 7, &mut sockets),
        Ok(DumpProgress::More)
    );
    assert_eq!(
        sockets,
        vec![
            SocketCounters {
                inode: 42,
                bytes_received: 1234,
                last_data_received_ms: 15
            },
            SocketCounters {
                inode: 44,
                bytes_received: 99,
                last_data_received_ms: 70_000
            },
        ]
    );
    let mut done = header(20, NLMSG_DONE, 7);
    done.extend_from_slice(&0i32.to_ne_bytes());
    assert_eq!(
        parse_replies(&done, 7, &mut sockets),
        Ok(DumpProgress::Done)
    );
}

#[test]
fn a_kernel_error_is_reported() {
    let mut error = header(36, NLMSG_ERROR, 3);
    error.extend_from_slice(&(-13i32).to_ne_bytes());
    error.extend_from_slice(&[0; 16]);
    assert_eq!(
        parse_replies(&error, 3, &mut Vec::new()),
        Err(DumpError::Kernel(13))
    );
}

#[test]
fn truncated_or_inconsistent_replies_are_malformed_or_skipped() {
    let reply = socket_reply(1, 42, 5, 5);
    for cut in [1, 15, 40, reply.len() - 1] {
        let mut sockets = Vec::new();
        assert_eq!(
            parse_replies(&reply[..cut], 1, &mut sockets),
            Err(DumpError::Malformed),
            "cut at {cut}"
        );
    }
    // A socket without tcp_info (an old kernel's short info) is skipped.
    let mut short = header(
        NLMSG_HEADER + INET_DIAG_MSG + 4 + 100,
        SOCK_DIAG_BY_FAMILY,
        1,
    );
    short.extend_from_slice(&[0u8; INET_DIAG_MSG]);
    short.extend_from_slice(&104u16.to_ne_bytes());
    short.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
    short.extend_from_slice(&[0u8; 100]);
    let mut sockets = Vec::new();
    assert_eq!(
        parse_replies(&short, 1, &mut sockets),
        Ok(DumpProgress::More)
    );
    assert!(sockets.is_empty());
}

proptest! {
    #[test]
    fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), seq in 0u32..3) {
        let _ = parse_replies(&bytes, seq, &mut Vec::new());
    }

    #[test]
    fn any_socket_reads_back(inode in any::<u32>(), received in any::<u64>(), last in any::<u32>()) {
        let mut sockets = Vec::new();
        prop_assert_eq!(
            parse_replies(&socket_reply(9, inode, received, last), 9, &mut sockets),
            Ok(DumpProgress::More)
        );
        prop_assert_eq!(sockets, vec![SocketCounters {
            inode: u64::from(inode),
            bytes_received: received,
            last_data_received_ms: last,
        }]);
    }
}
