//! Keeping the descriptors the handler inherited from the groups it starts
//! ([`super::process_group`] starts every group).

use nix::libc;

/// Marks every descriptor the handler inherited above stderr close-on-exec, once at the start
/// of `run`: the caller's open descriptors (a job server's pipes, a test harness's files) are
/// not a child's, and SPEC's worker protocol passes only the three standard streams. The
/// handler's own descriptors are close-on-exec already, and each child marks everything
/// above stderr again before its `exec` where the kernel can (Linux 5.11).
pub(crate) fn keep_inherited_descriptors_from_workers() {
    // SAFETY: F_GETFD/F_SETFD on descriptor numbers change only their close-on-exec flag; a
    // closed one (the listing's own) fails with EBADF.
    unsafe {
        for fd in super::proc::own_descriptors()
            .into_iter()
            .filter(|fd| *fd > 2)
        {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}
