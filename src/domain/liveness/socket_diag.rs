//! The netlink `sock_diag` dump request and the parse of its replies, by which the activity
//! sampler reads TCP sockets' counters (what `ss -ti` shows); the socket is the sampler's.
//!
//! Layouts (linux/netlink.h, linux/inet_diag.h, linux/tcp.h), native byte order: `nlmsghdr`
//! is 16 bytes (len u32, type u16, flags u16, seq u32, pid u32), messages 4-byte aligned;
//! `inet_diag_req_v2` 56 bytes; `inet_diag_msg` 72 bytes with the inode at offset 68, then
//! `rtattr`s (len u16, type u16, 4-byte aligned); `INET_DIAG_INFO` holds `struct tcp_info`,
//! with `tcpi_last_data_recv` (u32, ms) at 52 and `tcpi_bytes_received` (u64) at 128.

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

/// Where a dump stands after one read of replies (`Done`: `NLMSG_DONE` came).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpProgress {
    More,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpError {
    /// The kernel answered with this errno.
    Kernel(i32),
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
                    let errno = u32_at(payload, 0).ok_or(DumpError::Malformed)? as i32;
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
mod tests;
