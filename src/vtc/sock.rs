//! The scripted peers' sockets: a server's listening socket and its accepts (which a stop or
//! `-break` interrupts), and addresses as the test files write them.

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::context::{Halt, Shared, Step, fail};
use super::stream::{Socket, Stream};

/// A server's listening socket; `broken` ends its accepts (`-break`).
pub struct Listening {
    pub socket: Socket,
    pub broken: Arc<AtomicBool>,
}

/// The next connection on `listener` (waiting in 100 ms slices so a stop or a `-break`
/// interrupts it).
pub fn accept(shared: &Shared, listener: &Listening) -> Step<Stream> {
    loop {
        shared.check()?;
        if listener.broken.load(Ordering::Acquire) {
            return Err(Halt::Stopped);
        }
        let mut pfd = libc::pollfd {
            fd: listener.socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack, length 1; poll(2) writes only its revents.
        let n = unsafe { libc::poll(&mut pfd, 1, 100) };
        if n > 0 {
            match listener.socket.accept() {
                Ok(s) => {
                    let _ = s.set_nonblocking(false);
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return fail(format!("Accept failed: {e}")),
            }
        }
    }
}

/// `IP PORT`, `IP:PORT` or `[IP6]:PORT` as a socket address.
pub fn resolve(text: &str) -> Step<SocketAddr> {
    let t = text.trim();
    let candidate = match t.split_once(' ') {
        Some((ip, port)) if !ip.contains(':') => format!("{ip}:{}", port.trim()),
        Some((ip, port)) => format!("[{ip}]:{}", port.trim()),
        None => t.to_string(),
    };
    candidate
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Halt::Fail(format!("cannot resolve address {text:?}")))
}

/// `IP:PORT` (`[IP]:PORT` for IPv6), today's harness's `_sock` macros.
pub fn sock_text(a: SocketAddr) -> String {
    match a {
        SocketAddr::V4(v) => format!("{}:{}", v.ip(), v.port()),
        SocketAddr::V6(v) => format!("[{}]:{}", v.ip(), v.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            resolve("127.0.0.1 8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            resolve("127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(resolve("::1 80").unwrap(), "[::1]:80".parse().unwrap());
        assert!(resolve("nonsense").is_err());
        assert_eq!(sock_text("[::1]:80".parse().unwrap()), "[::1]:80");
    }
}
