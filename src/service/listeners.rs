//! Listening sockets this process is handed instead of binding them itself: by systemd
//! (socket activation: `$LISTEN_FDS`, `$LISTEN_PID`, `$LISTEN_FDNAMES`, as `sd_listen_fds(3)`
//! reads them) or by the Shellac it replaces (`shellac upgrade`). They wait here until the
//! server binds the address they match; what matches nothing is closed with a warning.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// What a handed-over socket was in the process it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `server.listen` (cleartext).
    Plain,
    /// A `[[tls]]` listener, by its name.
    Tls(String),
    /// `server.admin`.
    Admin,
}

struct Handed {
    /// The configured address it serves (systemd: the address it is bound to).
    addr: SocketAddr,
    /// `None` from systemd (matched by address alone).
    role: Option<Role>,
    /// Where it came from, for messages: `systemd (name)`, `the previous process`.
    from: String,
    listener: TcpListener,
}

static POOL: Mutex<Vec<Handed>> = Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Vec<Handed>> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps `listener`, handed over for the address `addr` configured as `role`.
pub fn offer(addr: SocketAddr, role: Option<Role>, from: String, listener: TcpListener) {
    pool().push(Handed {
        addr,
        role,
        from,
        listener,
    });
}

/// The handed-over socket for `addr` configured as `role`, if one was given: the exact
/// configured address (port 0 included, for a handover), and the same role unless systemd
/// gave it (then the address alone decides).
pub fn take(addr: SocketAddr, role: &Role) -> Option<TcpListener> {
    let mut pool = pool();
    let i = pool
        .iter()
        .position(|h| h.addr == addr && h.role.as_ref().is_none_or(|r| r == role))?;
    let handed = pool.swap_remove(i);
    tracing::info!("{addr}: using the listening socket from {}", handed.from);
    Some(handed.listener)
}

/// Closes what no configured address took, naming each.
pub fn close_leftovers() {
    for h in pool().drain(..) {
        tracing::warn!(
            "the listening socket on {} from {} matches no configured address (server.listen, [[tls]] listen, server.admin); closed",
            h.addr,
            h.from
        );
    }
}

/// How many sockets wait to be taken.
pub fn waiting() -> usize {
    pool().len()
}

/// The sockets systemd passed (socket activation), into the pool. Reads and then removes
/// `$LISTEN_PID`, `$LISTEN_FDS`, `$LISTEN_FDNAMES` (children must not take them too). Call it
/// before any thread starts (it changes the environment). Returns how many were adopted; a
/// passed descriptor that is not a listening TCP socket is an error.
pub fn adopt_systemd() -> Result<usize, String> {
    let pid = std::env::var("LISTEN_PID").ok();
    let count = std::env::var("LISTEN_FDS").ok();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    // SAFETY: called by `serve` before the runtime or any other thread exists.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    let (Some(pid), Some(count)) = (pid, count) else {
        return Ok(0);
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(0);
    }
    let count: i32 = count
        .trim()
        .parse()
        .map_err(|_| format!("LISTEN_FDS={count}: not a number"))?;
    let names: Vec<String> = names
        .map(|n| n.split(':').map(str::to_string).collect())
        .unwrap_or_default();
    const FIRST: RawFd = 3; // SD_LISTEN_FDS_START
    let mut adopted = 0;
    for i in 0..count {
        let fd = FIRST + i;
        let name = names.get(i as usize).cloned().unwrap_or_default();
        let listener = listening_tcp(fd).map_err(|e| {
            format!("socket activation: descriptor {fd} ({name}): {e} (only ListenStream= TCP sockets are supported)")
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("socket activation: descriptor {fd}: {e}"))?;
        let from = if name.is_empty() {
            "systemd".to_string()
        } else {
            format!("systemd ({name})")
        };
        offer(addr, None, from, listener);
        adopted += 1;
    }
    Ok(adopted)
}

/// Takes `fd` as a listening TCP socket (close-on-exec set), or says what it is not.
pub fn listening_tcp(fd: RawFd) -> Result<TcpListener, String> {
    let int_opt = |level, name| -> Result<i32, String> {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `value`, a valid c_int.
        let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &raw mut len) };
        if r != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        Ok(value)
    };
    if int_opt(libc::SOL_SOCKET, libc::SO_TYPE)? != libc::SOCK_STREAM {
        return Err("not a stream socket".into());
    }
    if int_opt(libc::SOL_SOCKET, libc::SO_ACCEPTCONN)? == 0 {
        return Err("not listening".into());
    }
    let domain = int_opt(libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    if domain != libc::AF_INET && domain != libc::AF_INET6 {
        return Err("not an IPv4 or IPv6 socket".into());
    }
    // SAFETY: fcntl on a descriptor that getsockopt just showed is an open socket.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: the descriptor is an open listening socket that nothing else in this process
    // owns (systemd's passed descriptors, or one just received): ownership moves here.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(TcpListener::from(owned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn a_listener_is_taken_by_address_and_role() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        offer(addr, Some(Role::Tls("site".into())), "test".into(), l);
        assert!(take(addr, &Role::Plain).is_none());
        assert!(take(addr, &Role::Tls("site".into())).is_some());
        assert!(take(addr, &Role::Tls("site".into())).is_none());
        // systemd's: any role.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        offer(addr, None, "systemd".into(), l);
        assert!(take(addr, &Role::Admin).is_some());
    }

    #[test]
    fn only_listening_tcp_sockets_are_taken() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let fd = l.into_raw_fd();
        let back = listening_tcp(fd).expect("a listening socket");
        assert_eq!(back.local_addr().unwrap(), addr);
        let u = std::os::unix::net::UnixDatagram::unbound().unwrap();
        use std::os::fd::AsRawFd;
        assert!(listening_tcp(u.as_raw_fd()).is_err());
    }
}
