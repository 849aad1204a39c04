//! The channel of a binary upgrade (`shellac upgrade`): the running process starts the new
//! binary with one end of a `SOCK_SEQPACKET` socket pair (its number in
//! `$SHELLAC_UPGRADE_FD`) and hands it the listening sockets over it with `SCM_RIGHTS`, as
//! HAProxy's `-x` and Pingora do. Messages keep their boundaries; each is one line of text,
//! the listener list carrying the descriptors:
//!
//! ```text
//! new → old  hello PID                  configuration read and checked
//! old → new  listeners [JSON] + fds     (addr, role) of each descriptor, in order
//! old → new  released                   the old process closed its disk tier cleanly
//! new → old  ready                      serving (after MAINPID= and READY=1 to systemd)
//! ```
//!
//! Either side seeing the channel close (the other exited) gives up: the new process exits,
//! the old one keeps serving.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::listeners::Role;

/// The environment variable naming the new process's end of the channel.
pub const ENV: &str = "SHELLAC_UPGRADE_FD";

/// Most descriptors one message carries (the kernel's `SCM_MAX_FD`).
const MAX_FDS: usize = 253;

/// The admin listener (configured address, descriptor), set when it is bound: it lives as
/// long as the process serves.
static ADMIN: std::sync::Mutex<Option<(SocketAddr, RawFd)>> = std::sync::Mutex::new(None);

/// Records the admin listener, to be handed over with the client listeners.
pub fn set_admin(addr: SocketAddr, fd: RawFd) {
    *ADMIN.lock().unwrap_or_else(|e| e.into_inner()) = Some((addr, fd));
}

/// The admin listener, if one is bound.
pub fn admin() -> Option<(SocketAddr, RawFd)> {
    *ADMIN.lock().unwrap_or_else(|e| e.into_inner())
}

/// One end of the channel.
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// A connected pair (both ends close-on-exec).
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: socketpair writes two descriptors into a valid two-element array.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nothing else.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    /// The new process's end, from `$SHELLAC_UPGRADE_FD` (removed from the environment: call
    /// before any thread starts). `None` when not started by an upgrade.
    pub fn from_env() -> io::Result<Option<Channel>> {
        let Some(value) = std::env::var_os(ENV) else {
            return Ok(None);
        };
        // SAFETY: called by `serve` before the runtime or any other thread exists.
        unsafe { std::env::remove_var(ENV) };
        let fd: RawFd = value
            .to_str()
            .and_then(|v| v.parse().ok())
            .filter(|&fd| fd > 2)
            .ok_or_else(|| io::Error::other(format!("{ENV}: not a descriptor number")))?;
        let mut kind: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into a valid c_int.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&raw mut kind).cast(),
                &raw mut len,
            )
        };
        if r != 0 || kind != libc::SOCK_SEQPACKET {
            return Err(io::Error::other(format!(
                "{ENV}={fd}: not the upgrade channel"
            )));
        }
        // SAFETY: fcntl on the open socket just checked.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        // SAFETY: the descriptor was inherited for this purpose; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Some(Channel { fd }))
    }

    /// This end's descriptor, made inheritable, for the child's `$SHELLAC_UPGRADE_FD`.
    pub fn inheritable_fd(&self) -> io::Result<RawFd> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl on a descriptor this channel owns.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }

    /// Sends one message with `fds` attached.
    pub fn send(&self, text: &str, fds: &[RawFd]) -> io::Result<()> {
        if fds.len() > MAX_FDS {
            return Err(io::Error::other(format!(
                "{} listening sockets: at most {MAX_FDS} can be handed over",
                fds.len()
            )));
        }
        let mut iov = libc::iovec {
            iov_base: text.as_ptr() as *mut libc::c_void,
            iov_len: text.len(),
        };
        let fd_bytes = std::mem::size_of_val(fds);
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
        let mut control = vec![0u8; if fds.is_empty() { 0 } else { space }];
        // SAFETY: an all-zero msghdr is a valid empty header; the fields are set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = control.len() as _;
            // SAFETY: the control buffer is CMSG_SPACE(fd_bytes) long, so the first header
            // and its data (fd_bytes) fit; the descriptors are copied into it.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
                std::ptr::copy_nonoverlapping(
                    fds.as_ptr().cast::<u8>(),
                    libc::CMSG_DATA(cmsg),
                    fd_bytes,
                );
            }
        }
        // SAFETY: msg points to live buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &raw const msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one message and the descriptors attached to it, waiting at most `timeout`.
    /// An error when the other end closed.
    pub fn recv(&self, timeout: Duration) -> io::Result<(String, Vec<OwnedFd>)> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: poll reads and writes one valid pollfd.
        let r = unsafe { libc::poll(&raw mut pfd, 1, ms) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no answer on the upgrade channel",
            ));
        }
        let mut buf = vec![0u8; 64 * 1024];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: CMSG_SPACE only computes a size.
        let space =
            unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
        let mut control = vec![0u8; space];
        // SAFETY: an all-zero msghdr is a valid empty header; the fields are set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: msg points to live buffers; MSG_CMSG_CLOEXEC marks received descriptors.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        // SAFETY: the kernel filled `control` up to msg_controllen; CMSG_FIRSTHDR/NXTHDR
        // walk within it, and each SCM_RIGHTS header's data holds that many descriptors.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                    let count = len / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
            }
        }
        if n == 0 && fds.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the other process closed the upgrade channel",
            ));
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::other("descriptors were truncated"));
        }
        buf.truncate(n as usize);
        Ok((String::from_utf8_lossy(&buf).into_owned(), fds))
    }
}

/// The listener list's text: `listeners` then one `ADDR ROLE` per line (`plain`, `admin`,
/// `tls NAME`), in the order of the descriptors.
pub fn encode_listeners(list: &[(SocketAddr, Role)]) -> String {
    let mut out = String::from("listeners");
    for (addr, role) in list {
        out.push('\n');
        match role {
            Role::Plain => out.push_str(&format!("{addr} plain")),
            Role::Admin => out.push_str(&format!("{addr} admin")),
            Role::Tls(name) => out.push_str(&format!("{addr} tls {name}")),
        }
    }
    out
}

/// The inverse of [`encode_listeners`].
pub fn decode_listeners(text: &str) -> Option<Vec<(SocketAddr, Role)>> {
    let mut lines = text.lines();
    if lines.next()? != "listeners" {
        return None;
    }
    lines
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let addr = parts.next()?.parse().ok()?;
            let role = match (parts.next()?, parts.next()) {
                ("plain", None) => Role::Plain,
                ("admin", None) => Role::Admin,
                ("tls", Some(name)) => Role::Tls(name.to_string()),
                _ => return None,
            };
            Some((addr, role))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_cross_with_their_descriptors() {
        let (a, b) = Channel::pair().unwrap();
        let l1 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let l2 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let list = vec![
            (l1.local_addr().unwrap(), Role::Plain),
            (l2.local_addr().unwrap(), Role::Tls("site one".into())),
        ];
        a.send(&encode_listeners(&list), &[l1.as_raw_fd(), l2.as_raw_fd()])
            .unwrap();
        let (text, fds) = b.recv(Duration::from_secs(5)).unwrap();
        assert_eq!(decode_listeners(&text), Some(list.clone()));
        assert_eq!(fds.len(), 2);
        let got = std::net::TcpListener::from(fds.into_iter().nth(1).unwrap());
        assert_eq!(got.local_addr().unwrap(), list[1].0);
        a.send("released", &[]).unwrap();
        assert_eq!(b.recv(Duration::from_secs(5)).unwrap().0, "released");
        drop(a);
        assert!(b.recv(Duration::from_secs(5)).is_err(), "EOF once closed");
    }
}
