//! Send buffers sized for clients a short round trip away (`server.near_send_buffer`).
//!
//! Why: Linux grows a socket's send buffer with its congestion window (up to
//! `net.ipv4.tcp_wmem`'s maximum, 4 MiB by default), and on a path without loss — loopback, a
//! LAN — the window never stops growing. A large response then sits in the kernel as up to
//! ~2.6 MB per connection copied but not yet sent (`ss -tmi`: `notsent`), long gone from the
//! CPU's caches when the receiver finally copies it out; ten such connections are more than
//! the machine's 32 MiB L3. A send buffer of 1 MiB (512 KiB asked, the kernel doubles it for
//! its bookkeeping) keeps what is in flight warm: the 21 MB hit over loopback with 10
//! connections went 1.16× as fast at 1.16× less CPU per byte, 1.48× Varnish's MiB/s and
//! 1.24× its MiB per CPU-second (bench/RESULTS.md, "the 21 MB hit at 1.2× Varnish").
//!
//! A fixed buffer also stops the kernel from growing it, which would cap a distant client's
//! rate at buffer / round trip (1 MiB over 50 ms: 20 MiB/s). So only a connection whose
//! round trip, as the kernel measured it in the handshake, is at most `server.near_rtt`
//! gets it: at the default 0.2 ms, 1 MiB still carries 5 GiB/s. Everyone else keeps the
//! kernel's autotuning.

use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// The connection's smoothed round-trip time as the kernel keeps it (`TCP_INFO`'s
/// `tcpi_rtt`; right after accept: the handshake's), or `None` if the kernel will not say or
/// has no sample (0: a handshake whose SYN-ACK was retransmitted, a SYN cookie).
#[cfg(target_os = "linux")]
pub(crate) fn round_trip(socket: &impl AsFd) -> Option<Duration> {
    // SAFETY: `tcp_info` is plain old data (integers only); all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which is that large, and
    // updates `len`; the descriptor is borrowed from a live socket.
    let r = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    // An older kernel may fill less; `tcpi_rtt` is in the part every kernel since 2.6 fills.
    let rtt_end = std::mem::offset_of!(libc::tcp_info, tcpi_rtt) + 4;
    if r != 0 || (len as usize) < rtt_end || info.tcpi_rtt == 0 {
        return None;
    }
    Some(Duration::from_micros(u64::from(info.tcpi_rtt)))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn round_trip(_socket: &impl AsFd) -> Option<Duration> {
    None
}

/// Gives a newly accepted client socket a send buffer of `bytes` (SO_SNDBUF; the kernel
/// doubles it) when its round trip is at most `near`. `bytes == 0`: never. Returns whether it
/// did; a socket the kernel says nothing about, or refuses the size for, keeps autotuning.
pub(crate) fn tune(socket: &impl AsFd, bytes: u64, near: Duration) -> bool {
    if bytes == 0 {
        return false;
    }
    match round_trip(socket) {
        Some(rtt) if rtt <= near => {
            let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
            socket2::SockRef::from(socket)
                .set_send_buffer_size(bytes)
                .is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let client = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (server, client)
    }

    fn send_buffer(s: &TcpStream) -> usize {
        socket2::SockRef::from(s)
            .send_buffer_size()
            .expect("SO_SNDBUF")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn loopback_is_near_and_gets_the_buffer() {
        let (server, _client) = pair();
        let rtt = round_trip(&server).expect("TCP_INFO on a loopback socket");
        // Loopback measures microseconds; a second would mean the field was misread.
        assert!(rtt < Duration::from_secs(1), "{rtt:?}");
        assert!(tune(&server, 512 * 1024, Duration::from_secs(1)));
        // The kernel caps what it is given at net.core.wmem_max, then doubles it (its
        // bookkeeping share).
        let cap = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        assert_eq!(send_buffer(&server), 2 * cap.min(512 * 1024));
    }

    #[test]
    fn far_or_off_keeps_autotuning() {
        let (server, _client) = pair();
        let before = send_buffer(&server);
        // Off.
        assert!(!tune(&server, 0, Duration::from_secs(1)));
        // Farther than the threshold: a measured round trip is at least a microsecond.
        assert!(!tune(&server, 512 * 1024, Duration::ZERO));
        assert_eq!(send_buffer(&server), before);
    }
}
