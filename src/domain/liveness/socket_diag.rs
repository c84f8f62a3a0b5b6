//! The netlink `sock_diag` messages the activity sampler exchanges with the kernel to read the
//! counters of TCP sockets (what `ss -ti` shows): the dump request, and the parse of the
//! replies into [`SocketCounters`] (inode, bytes received, milliseconds since data last
//! arrived). Pure byte work; the socket itself is `platform::activity_sampler`'s.
//!
//! Layouts (linux/netlink.h, linux/inet_diag.h, linux/tcp.h), native byte order:
//!
//! - `nlmsghdr`: len u32, type u16, flags u16, seq u32, pid u32 (16 bytes); messages are
//!   4-byte aligned;
//! - `inet_diag_req_v2`: family u8, protocol u8, ext u8, pad u8, states u32, `inet_diag_sockid`
//!   (48 bytes): 56 bytes;
//! - `inet_diag_msg`: family, state, timer, retrans (u8 each), `inet_diag_sockid`, then expires,
//!   rqueue, wqueue, uid, inode (u32 each): 72 bytes, the inode at offset 68; then attributes
//!   (`rtattr`: len u16, type u16, 4-byte aligned);
//! - attribute `INET_DIAG_INFO` (2) holds `struct tcp_info`: `tcpi_last_data_recv` (u32, ms) at
//!   offset 52, `tcpi_bytes_received` (u64) at offset 128 (Linux 4.1 and later).

use super::activity::SocketCounters;

const NLMSG_HEADER: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const IPPROTO_TCP: u8 = 6;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_MSG: usize = 72;
const INODE_OFFSET: usize = 68;
const LAST_DATA_RECV_OFFSET: usize = 52;
const BYTES_RECEIVED_OFFSET: usize = 128;

/// The length of a dump request.
pub const REQUEST_LEN: usize = NLMSG_HEADER + 56;

/// A request for every TCP socket of address family `family` (`AF_INET`, `AF_INET6`) with its
/// `tcp_info`.
pub fn dump_request(family: u8, sequence: u32) -> [u8; REQUEST_LEN] {
    let mut request = [0u8; REQUEST_LEN];
    request[0..4].copy_from_slice(&(REQUEST_LEN as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request[8..12].copy_from_slice(&sequence.to_ne_bytes());
    // pid 0: the kernel.
    request[16] = family;
    request[17] = IPPROTO_TCP;
    request[18] = 1 << (INET_DIAG_INFO - 1);
    // Every state.
    request[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    request
}

/// Where a dump stands after one read of replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpProgress {
    /// More replies follow.
    More,
    /// `NLMSG_DONE` came.
    Done,
}

/// Why a dump failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpError {
    /// The kernel answered with this errno.
    Kernel(i32),
    /// A reply is not shaped as documented.
    Malformed,
}

/// Parses one read of replies, appending each socket's counters to `sockets`. Replies to
/// other sequence numbers (a late answer to an earlier dump) are skipped.
pub fn parse_replies(
    bytes: &[u8],
    sequence: u32,
    sockets: &mut Vec<SocketCounters>,
) -> Result<DumpProgress, DumpError> {
    let mut rest = bytes;
    while !rest.is_empty() {
        if rest.len() < NLMSG_HEADER {
            return Err(DumpError::Malformed);
        }
        let len = u32_at(rest, 0).ok_or(DumpError::Malformed)? as usize;
        if len < NLMSG_HEADER || len > rest.len() {
            return Err(DumpError::Malformed);
        }
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        let seq = u32_at(rest, 8).ok_or(DumpError::Malformed)?;
        let payload = &rest[NLMSG_HEADER..len];
        if seq == sequence {
            match kind {
                NLMSG_DONE => return Ok(DumpProgress::Done),
                NLMSG_ERROR => {
                    let errno = payload
                        .get(0..4)
                        .map(|raw| i32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]))
                        .ok_or(DumpError::Malformed)?;
                    return Err(DumpError::Kernel(-errno));
                }
                SOCK_DIAG_BY_FAMILY => {
                    if let Some(socket) = socket_counters(payload) {
                        sockets.push(socket);
                    }
                }
                _ => {}
            }
        }
        rest = &rest[align(len).min(rest.len())..];
    }
    Ok(DumpProgress::More)
}

/// One `inet_diag_msg` with its `INET_DIAG_INFO`; `None` without a usable `tcp_info`.
fn socket_counters(message: &[u8]) -> Option<SocketCounters> {
    if message.len() < INET_DIAG_MSG {
        return None;
    }
    let inode = u64::from(u32_at(message, INODE_OFFSET)?);
    let mut attributes = &message[INET_DIAG_MSG..];
    while attributes.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attributes[0], attributes[1]]));
        let kind = u16::from_ne_bytes([attributes[2], attributes[3]]);
        if len < 4 || len > attributes.len() {
            return None;
        }
        if kind == INET_DIAG_INFO {
            let info = &attributes[4..len];
            return Some(SocketCounters {
                inode,
                bytes_received: u64_at(info, BYTES_RECEIVED_OFFSET)?,
                last_data_received_ms: u32_at(info, LAST_DATA_RECV_OFFSET)?,
            });
        }
        attributes = &attributes[align(len).min(attributes.len())..];
    }
    None
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let raw = bytes.get(offset..offset + 4)?;
    Some(u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]))
}

fn u64_at(bytes: &[u8], offset: usize) -> Option<u64> {
    let raw: [u8; 8] = bytes.get(offset..offset + 8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(raw))
}

#[cfg(test)]
mod tests {
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
        info[LAST_DATA_RECV_OFFSET..LAST_DATA_RECV_OFFSET + 4]
            .copy_from_slice(&last_ms.to_ne_bytes());
        info[BYTES_RECEIVED_OFFSET..BYTES_RECEIVED_OFFSET + 8]
            .copy_from_slice(&received.to_ne_bytes());
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
}
