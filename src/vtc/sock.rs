//! The scripted peers' sockets: a server's listening socket and its accepts (which a stop or
//! `-break` interrupts), the runner's process starts (which a bind to a given port waits
//! out), and addresses as the test files write them.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

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

/// A server's listening socket at `addr`. Port 0 on 127.0.0.1 (a server without `-listen`)
/// is a free port below the ephemeral range, not one the kernel picks from it: a server that
/// is broken and started again binds its port again, and in the gap a port of the ephemeral
/// range can be taken by any outgoing connection or port-0 listener on the machine (trunk
/// b00097 once failed so, "cannot be bound: Address already in use", with four files at a
/// time beside other tests). No connect(2) and no port-0 bind is given a port below the
/// range; the ports go on from a per-process counter, so the files of one run never try the
/// same port twice, and runs in other processes start elsewhere.
///
/// A given address (a server started again after `-break`, or `-listen IP PORT`) is bound
/// while no process start is under way ([`spawn`]).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    if addr != SocketAddr::from((Ipv4Addr::LOCALHOST, 0)) {
        let _quiet = STARTS.write().unwrap_or_else(|e| e.into_inner());
        return TcpListener::bind(addr);
    }
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    const BASE: u16 = 10_000;
    let span = u32::from(low.saturating_sub(BASE).max(1_000));
    let start = std::process::id() % span;
    for _ in 0..span.min(1_000) {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = BASE + ((start + n) % span) as u16;
        if let Ok(l) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            return Ok(l);
        }
    }
    // Every port tried is taken: the kernel's choice, as before.
    TcpListener::bind(addr)
}

/// Process starts under way (read) and binds to a given port (write) exclude each other.
///
/// A child process has a copy of every descriptor of the runner from its fork until its
/// exec closes them (they are all close-on-exec), a listening socket included. The runner
/// runs several files at once, each on its threads, and starts processes (`shellac serve`,
/// `shellac check`, `sh -c`) from any of them: a server broken (`server s0 -break`) in one
/// file while another file's start was between fork and exec stayed listening in that child
/// until the exec, and its file's next `-start`, binding the same port at once, was refused
/// "Address already in use" (trunk/b00097, 2 of 9 runs at four files at a time under load).
/// `Command::spawn` returns once the child has run exec (or failed to): a bind that holds
/// the write side finds no child that can still hold a socket closed before it.
static STARTS: RwLock<()> = RwLock::new(());

/// Starts `cmd` (every process the runner starts goes through here): see [`STARTS`].
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    let _starting = STARTS.read().unwrap_or_else(|e| e.into_inner());
    cmd.spawn()
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

    /// Regression (trunk/b00097, "cannot be bound: Address already in use" on a server's
    /// `-start` after its `-break`): a listening socket closed while another thread's process
    /// start is between fork and exec (its child holding a copy of it) is bound again once
    /// the start is over, not refused. The child here waits 300 ms before its exec; without
    /// [`STARTS`] the bind is refused every time (each of its tries).
    #[test]
    fn a_port_closed_during_a_process_start_binds_again() {
        use std::io::Read;
        use std::os::unix::net::UnixStream;
        use std::os::unix::process::CommandExt;
        use std::time::Duration;

        // A port of the kernel's choosing: the test beside this one takes ports next to the
        // ones `bind` picks.
        let first = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = first.local_addr().unwrap();
        let (mut forked, signal) = UnixStream::pair().unwrap();
        forked
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let fd = signal.as_raw_fd();
        let starter = std::thread::spawn(move || {
            let mut cmd = Command::new("/bin/true");
            // SAFETY: the closure runs in the forked child before exec and only calls
            // write(2) and nanosleep(2), which are async-signal-safe; it allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    libc::write(fd, b"f".as_ptr().cast(), 1);
                    let t = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 300_000_000,
                    };
                    libc::nanosleep(&t, std::ptr::null_mut());
                    Ok(())
                });
            }
            let status = spawn(&mut cmd).and_then(|mut c| c.wait());
            drop(signal);
            status
        });
        // The child is forked: it holds a copy of `first` until its exec.
        let mut byte = [0u8; 1];
        forked.read_exact(&mut byte).unwrap();
        drop(first);
        // Another test of this binary may be starting a process of its own, not through
        // `spawn`: its child holds `first` too, until its exec. A few tries, all well within
        // the 300 ms this test's child waits (without `STARTS` every one is refused).
        let mut again = bind(addr);
        for _ in 0..4 {
            if again.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            again = bind(addr);
        }
        assert!(again.is_ok(), "{addr}: {again:?}");
        assert!(starter.join().unwrap().unwrap().success());
    }

    /// Port 0 on loopback: free ports below the ephemeral range, a new one each time (a port
    /// held by someone else skipped); any other address as asked.
    #[test]
    fn servers_listen_below_the_ephemeral_range() {
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(32768);
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let a = bind(any).unwrap();
        let pa = a.local_addr().unwrap().port();
        if low <= 11_000 {
            // No room below the range on this machine: the kernel's ports.
            return;
        }
        assert!(pa < low, "{pa} below {low}");
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, pa + 1));
        let b = bind(any).unwrap();
        let pb = b.local_addr().unwrap().port();
        assert!(pb < low && pb != pa, "{pa} {pb} below {low}");
        if held.is_ok() {
            assert_ne!(pb, pa + 1, "the held port is skipped");
        }
        if let Ok(l) = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, pa + 2))) {
            assert_eq!(
                l.local_addr().unwrap().port(),
                pa + 2,
                "an exact port as asked"
            );
        }
    }
}
